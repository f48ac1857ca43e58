//! Reading a session file back, tolerating a torn last line.

use std::path::Path;

use cwl::Record;

use super::{SessionError, SessionInfo};

/// How a checkpoint line starts: such a line may be skipped when it cannot
/// be read, since a resume can always replay the messages instead.
const CHECKPOINT_PREFIX: &str = r#"{"type":"checkpoint""#;

/// A session file as read from disk.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The header.
    pub info: SessionInfo,
    /// Every record after the header with its 1-based line number.
    pub records: Vec<(usize, Record)>,
    /// Bytes of the file up to the end of the last good record; a writer
    /// resuming the session cuts the file here.
    pub valid_len: u64,
    /// Problems that were worked around (a torn last line).
    pub warnings: Vec<String>,
}

/// Reads the session file at `path`.
///
/// A last line that is not a record (a crash cut it short) is skipped with
/// a warning; a bad line anywhere else is an error, since skipping it would
/// silently change the transcript.
pub fn read(path: &Path) -> Result<Loaded, SessionError> {
    let bytes = std::fs::read(path).map_err(|source| SessionError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut lines: Vec<(usize, usize, &[u8])> = Vec::new();
    let mut start = 0;
    for (number, piece) in bytes.split(|&b| b == b'\n').enumerate() {
        let end = start + piece.len();
        lines.push((number + 1, end, piece));
        start = end + 1;
    }
    let last_content = lines
        .iter()
        .rposition(|(_, _, piece)| !piece.iter().all(u8::is_ascii_whitespace));
    let mut records = Vec::new();
    let mut valid_len = 0u64;
    let mut warnings = Vec::new();
    for (index, &(line, end, piece)) in lines.iter().enumerate() {
        if piece.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let parsed = std::str::from_utf8(piece)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Record>(text).map_err(|e| e.to_string()));
        match parsed {
            Ok(record) => {
                records.push((line, record));
                valid_len = (end + usize::from(end < bytes.len())) as u64;
            }
            Err(reason) if Some(index) == last_content => {
                warnings.push(format!(
                    "session file {} line {line} is incomplete (the session was interrupted while writing it); it is skipped",
                    path.display()
                ));
                tracing::warn!(path = %path.display(), line, %reason, "torn last line skipped");
            }
            Err(reason) if piece.starts_with(CHECKPOINT_PREFIX.as_bytes()) => {
                warnings.push(format!(
                    "session file {} line {line}: unreadable checkpoint skipped ({reason})",
                    path.display()
                ));
            }
            Err(reason) => {
                return Err(SessionError::Corrupt {
                    path: path.to_owned(),
                    line,
                    reason,
                });
            }
        }
    }
    if records.is_empty() {
        return Err(SessionError::NoHeader(path.to_owned()));
    }
    let (_, first) = records.remove(0);
    let (info, version) =
        SessionInfo::from_record(&first).ok_or_else(|| SessionError::NoHeader(path.to_owned()))?;
    if version != cwl::record::SESSION_FORMAT_VERSION {
        return Err(SessionError::Version {
            path: path.to_owned(),
            version,
            supported: cwl::record::SESSION_FORMAT_VERSION,
        });
    }
    Ok(Loaded {
        info,
        records,
        valid_len,
        warnings,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::SessionWriter;
    use cwl::Message;

    /// A session header for tests.
    pub(crate) fn info(id: &str) -> SessionInfo {
        SessionInfo {
            id: id.into(),
            timestamp: "2025-01-01T00:00:00Z".into(),
            cwd: "/tmp/x".into(),
            provider: "openai".into(),
            model: "gpt-test".into(),
            budget: 4000,
            tools: vec![cwl::delimiter_spec()],
        }
    }

    fn message(text: &str) -> Record {
        Record::Message {
            timestamp: None,
            message: Message::user(text),
            usage: None,
            cost_usd: None,
        }
    }

    #[test]
    fn round_trips_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = SessionWriter::create(dir.path(), &info("s1")).unwrap();
        writer.append(&message("one")).unwrap();
        writer
            .append(&Record::Calibrate {
                local: 10,
                reported: 12,
            })
            .unwrap();
        let loaded = read(writer.path()).unwrap();
        assert_eq!(loaded.info, info("s1"));
        assert_eq!(
            loaded.records,
            vec![
                (2, message("one")),
                (
                    3,
                    Record::Calibrate {
                        local: 10,
                        reported: 12
                    }
                )
            ]
        );
        assert!(loaded.warnings.is_empty());
        assert_eq!(
            loaded.valid_len,
            std::fs::metadata(writer.path()).unwrap().len()
        );
        assert!(
            SessionWriter::create(dir.path(), &info("s1")).is_err(),
            "never overwrites"
        );
    }

    #[test]
    fn torn_last_line_is_skipped_and_cut_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = SessionWriter::create(dir.path(), &info("s2")).unwrap();
        writer.append(&message("kept")).unwrap();
        let path = writer.path().to_owned();
        drop(writer);
        let good = std::fs::read(&path).unwrap();
        let mut torn = good.clone();
        torn.extend_from_slice(br#"{"type":"message","message":{"role":"user","con"#);
        std::fs::write(&path, &torn).unwrap();

        let loaded = read(&path).unwrap();
        assert_eq!(loaded.records, vec![(2, message("kept"))]);
        assert_eq!(loaded.warnings.len(), 1);
        assert!(
            loaded.warnings[0].contains("line 3 is incomplete"),
            "{:?}",
            loaded.warnings
        );
        assert_eq!(loaded.valid_len, good.len() as u64);

        let (mut writer, reloaded) = SessionWriter::reopen(&path).unwrap();
        assert_eq!(reloaded.valid_len, loaded.valid_len);
        assert_eq!(std::fs::read(&path).unwrap(), good, "the torn line is cut");
        writer.append(&message("after")).unwrap();
        let again = read(&path).unwrap();
        assert!(again.warnings.is_empty());
        assert_eq!(
            again.records,
            vec![(2, message("kept")), (3, message("after"))]
        );
    }

    #[test]
    fn a_complete_last_line_without_newline_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let writer = SessionWriter::create(dir.path(), &info("s3")).unwrap();
        let path = writer.path().to_owned();
        drop(writer);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(serde_json::to_string(&message("x")).unwrap().as_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let loaded = read(&path).unwrap();
        assert_eq!(loaded.records.len(), 1);
        let (mut writer, _) = SessionWriter::reopen(&path).unwrap();
        writer.append(&message("y")).unwrap();
        assert_eq!(read(&path).unwrap().records.len(), 2);
    }

    #[test]
    fn corrupt_middle_lines_and_missing_headers_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = SessionWriter::create(dir.path(), &info("s4")).unwrap();
        writer.append(&message("a")).unwrap();
        let path = writer.path().to_owned();
        drop(writer);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("garbage\n");
        text.push_str(&serde_json::to_string(&message("b")).unwrap());
        text.push('\n');
        std::fs::write(&path, &text).unwrap();
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("line 3"), "{error}");

        let headless = dir.path().join("h.jsonl");
        std::fs::write(
            &headless,
            serde_json::to_string(&message("a")).unwrap() + "\n",
        )
        .unwrap();
        assert!(matches!(read(&headless), Err(SessionError::NoHeader(_))));
        let empty = dir.path().join("e.jsonl");
        std::fs::write(&empty, "").unwrap();
        assert!(matches!(read(&empty), Err(SessionError::NoHeader(_))));
        assert!(matches!(
            read(&dir.path().join("missing.jsonl")),
            Err(SessionError::Io { .. })
        ));
    }
}
