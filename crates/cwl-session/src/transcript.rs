//! The session file as the engine's [`cwl::TranscriptStore`]: `recall`
//! reads evicted messages back from it.
//!
//! Push position k is the k-th [`Record::Message`] line: the agent writes a
//! message record exactly when the engine accepts a push, and a resume
//! replays every message record as one push, so the two counts agree.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use cwl::{Message, Record, TranscriptStore};

/// Reads pushed messages back from a session file.
#[derive(Debug, Clone)]
pub struct SessionTranscript {
    path: PathBuf,
}

/// How every record line the agent writes starts (serde writes the tag first).
const TAG_PREFIX: &str = r#"{"type":""#;
/// How a message record's line starts.
const MESSAGE_PREFIX: &str = r#"{"type":"message""#;

impl SessionTranscript {
    /// The transcript kept in the session file at `path`.
    pub fn new(path: &Path) -> Self {
        SessionTranscript {
            path: path.to_owned(),
        }
    }
}

impl TranscriptStore for SessionTranscript {
    fn messages(&self, first: u64, last: u64) -> Result<Vec<Message>, String> {
        if first > last {
            return Err(format!("empty range {first}..={last}"));
        }
        let file =
            std::fs::File::open(&self.path).map_err(|e| format!("{}: {e}", self.path.display()))?;
        let mut messages = Vec::new();
        let mut position = 0u64;
        for (index, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| format!("{}: {e}", self.path.display()))?;
            // Lines the agent wrote start with their tag; parse only the
            // messages wanted and lines some other writer reordered.
            let tagged = line.starts_with(TAG_PREFIX);
            if tagged && !line.starts_with(MESSAGE_PREFIX) || line.trim().is_empty() {
                continue;
            }
            if position >= first || !tagged {
                match serde_json::from_str::<Record>(&line) {
                    Ok(Record::Message { message, .. }) if position >= first => {
                        messages.push(message)
                    }
                    Ok(Record::Message { .. }) => {}
                    Ok(_) => continue,
                    Err(error) => {
                        return Err(format!(
                            "{} line {}: not a session record ({error})",
                            self.path.display(),
                            index + 1
                        ));
                    }
                }
            }
            if position == last {
                return Ok(messages);
            }
            position += 1;
        }
        Err(format!(
            "{} holds {position} messages; message {last} is not there",
            self.path.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SessionInfo, SessionWriter};

    #[test]
    fn positions_count_message_records_only() {
        let dir = tempfile::tempdir().unwrap();
        let info = SessionInfo {
            id: "t".into(),
            timestamp: "2025-01-01T00:00:00Z".into(),
            cwd: "/tmp".into(),
            provider: "openai".into(),
            model: "m".into(),
            budget: 100,
            tools: Vec::new(),
        };
        let mut writer = SessionWriter::create(dir.path(), &info).unwrap();
        let message = |text: &str| Record::Message {
            timestamp: None,
            message: Message::user(text),
            usage: None,
            cost_usd: None,
        };
        writer.append(&message("zero")).unwrap();
        writer
            .append(&Record::Note {
                timestamp: None,
                text: "{\"type\":\"message\" is not this".into(),
            })
            .unwrap();
        writer.append(&message("one")).unwrap();
        writer
            .append(&Record::Calibrate {
                local: 1,
                reported: 2,
            })
            .unwrap();
        writer.append(&message("two")).unwrap();
        let reordered = r#"{"message":{"role":"user","content":"three"},"type":"message"}"#;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(writer.path())
            .unwrap();
        std::io::Write::write_all(&mut file, format!("{reordered}\n").as_bytes()).unwrap();
        let store = SessionTranscript::new(writer.path());
        assert_eq!(
            store.messages(1, 2).unwrap(),
            vec![Message::user("one"), Message::user("two")]
        );
        assert_eq!(store.messages(0, 0).unwrap(), vec![Message::user("zero")]);
        assert_eq!(store.messages(3, 3).unwrap(), vec![Message::user("three")]);
        let error = store.messages(2, 4).unwrap_err();
        assert!(error.contains("holds 4 messages"), "{error}");
        assert!(store.messages(2, 1).is_err());
    }
}
