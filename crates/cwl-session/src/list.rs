//! Listing the sessions of a directory.

use std::path::{Path, PathBuf};

use cwl::{Message, Record};
use serde::Serialize;

use super::{SessionError, read};

/// One session, summarised for `cwl sessions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// The file.
    pub path: PathBuf,
    /// When it was created (RFC 3339).
    pub created: String,
    /// When it was last written (RFC 3339).
    pub updated: String,
    /// The agent's working directory.
    pub cwd: String,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// The user's budget.
    pub budget: u64,
    /// User turns.
    pub tasks: usize,
    /// Messages in the full transcript.
    pub messages: usize,
    /// Model calls.
    pub requests: usize,
    /// Total cost in US dollars of the calls whose cost is known (`None`
    /// when none is: `null` in JSON, "unknown" in the table).
    pub cost_usd: Option<f64>,
    /// The first user turn, shortened.
    pub first_task: Option<String>,
    /// A problem reading the file, if any (a torn last line).
    pub warning: Option<String>,
}

/// The sessions in `dir`, most recently updated first. A missing directory
/// has none; files that are not readable sessions are skipped with a
/// warning in the log.
pub fn list(dir: &Path) -> Result<Vec<SessionSummary>, SessionError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(SessionError::Io {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut sessions = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        match summarize(&path) {
            Ok(summary) => sessions.push(summary),
            Err(error) => tracing::warn!(%error, "skipping unreadable session file"),
        }
    }
    sessions.sort_by(|a, b| b.updated.cmp(&a.updated).then(b.id.cmp(&a.id)));
    Ok(sessions)
}

fn summarize(path: &Path) -> Result<SessionSummary, SessionError> {
    let loaded = read(path)?;
    let updated = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map(|t| {
            chrono::DateTime::<chrono::Utc>::from(t)
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        })
        .unwrap_or_else(|_| loaded.info.timestamp.clone());
    let (mut tasks, mut messages) = (0, 0);
    let mut first_task = None;
    for (_, record) in &loaded.records {
        if let Record::Message { message, .. } = record {
            messages += 1;
            if let Message::User { content } = message {
                tasks += 1;
                if first_task.is_none() {
                    first_task = Some(first_line_shortened(content, 60));
                }
            }
        }
    }
    let usage = super::session_usage(loaded.records.iter().map(|(_, record)| record));
    Ok(SessionSummary {
        id: loaded.info.id.clone(),
        path: path.to_owned(),
        created: loaded.info.timestamp.clone(),
        updated,
        cwd: loaded.info.cwd.clone(),
        provider: loaded.info.provider.clone(),
        model: loaded.info.model.clone(),
        budget: loaded.info.budget,
        tasks,
        messages,
        requests: usage.requests,
        cost_usd: usage.total.cost_usd,
        first_task,
        warning: loaded.warnings.first().cloned(),
    })
}

/// The first line of `text`, cut to `max` characters with an ellipsis.
pub(crate) fn first_line_shortened(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if text.trim().contains('\n') {
        cwl::shorten(&format!("{line}…"), max)
    } else {
        cwl::shorten(line, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SessionInfo, SessionWriter};
    use cwl::Usage;

    #[test]
    fn lists_sessions_with_their_counts() {
        let dir = tempfile::tempdir().unwrap();
        assert!(list(&dir.path().join("none")).unwrap().is_empty());
        let info = SessionInfo {
            id: "20250101-000000-abcd".into(),
            timestamp: "2025-01-01T00:00:00Z".into(),
            cwd: "/work".into(),
            provider: "openai".into(),
            model: "gpt-x".into(),
            budget: 80_000,
            tools: Vec::new(),
        };
        let mut writer = SessionWriter::create(dir.path(), &info).unwrap();
        let message = |message, cost_usd| Record::Message {
            timestamp: None,
            message,
            usage: Some(Usage::default()),
            cost_usd,
        };
        writer.append(&message(Message::system("s"), None)).unwrap();
        writer
            .append(&message(Message::user("fix the login bug\nplease"), None))
            .unwrap();
        writer
            .append(&message(Message::assistant_text("done"), Some(0.25)))
            .unwrap();
        std::fs::write(dir.path().join("junk.jsonl"), "not json\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();

        let sessions = list(dir.path()).unwrap();
        assert_eq!(sessions.len(), 1);
        let s = &sessions[0];
        assert_eq!(s.id, "20250101-000000-abcd");
        assert_eq!((s.tasks, s.messages, s.requests), (1, 3, 1));
        assert_eq!(s.cost_usd, Some(0.25));
        assert_eq!(s.first_task.as_deref(), Some("fix the login bug…"));
    }

    #[test]
    fn first_line_shortened_cuts_long_text() {
        assert_eq!(first_line_shortened("short", 10), "short");
        assert_eq!(first_line_shortened("abcdefghijkl", 5), "abcd…");
    }
}
