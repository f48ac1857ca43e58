//! Conversations stored as sessions in the project's JSONL format, so
//! `cwl sessions` lists them and `cwl replay` replays them: a header, the
//! settings, every message as the proxy pushed it, after each request an
//! `enforce` record with the pass's report (the view's size in
//! `tokens_after`), and a `calibrate` record when the provider's reported
//! prompt size moved the engine's count. A store that fails is switched off for that
//! conversation with a warning; traffic is never held up by it. No file
//! stays open between records (`cwl_session::SessionAppender`).

use std::path::PathBuf;

use cwl::{Message, Record, Report, ToolSpec};
use cwl_session::{
    Loaded, SessionAppender, SessionError, SessionInfo, SessionWriter, Settings, new_id, now,
};

/// Where conversations are written, and with what settings.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    settings: Settings,
    budget: usize,
}

/// Attempts at a fresh session id (ids carry 16 random bits, and many
/// conversations may start in the same second).
const ID_TRIES: usize = 16;

impl Store {
    /// A store writing into `dir` (created when the first conversation is).
    pub fn new(dir: PathBuf, settings: Settings, budget: usize) -> Self {
        Store {
            dir,
            settings,
            budget,
        }
    }

    /// The directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Starts a session for a new conversation.
    pub fn create(
        &self,
        provider: &str,
        model: &str,
        tools: Vec<ToolSpec>,
    ) -> Result<Log, SessionError> {
        let cwd = std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        let mut info = SessionInfo {
            id: new_id(),
            timestamp: now(),
            cwd,
            provider: provider.to_string(),
            model: model.to_string(),
            budget: self.budget as u64,
            tools,
        };
        let mut tries = 0;
        let mut writer = loop {
            match SessionWriter::create(&self.dir, &info) {
                Ok(writer) => break writer,
                Err(SessionError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists && tries < ID_TRIES =>
                {
                    tries += 1;
                    info.id = new_id();
                }
                Err(error) => return Err(error),
            }
        };
        writer.append(&self.settings.record())?;
        Ok(Log {
            writer: Some(writer.into_appender()),
            notes_written: None,
        })
    }
}

/// One conversation's session file, or none when storing is off or failed.
#[derive(Debug, Default)]
pub struct Log {
    /// Holds no file open: thousands of conversations hold no descriptor.
    writer: Option<SessionAppender>,
    /// The strategy's working notes as last written beside the session.
    notes_written: Option<String>,
}

impl Log {
    /// No session file.
    pub fn off() -> Self {
        Log::default()
    }

    /// Reopens a stored conversation to go on writing it, with what it
    /// holds so far.
    pub fn reopen(path: &std::path::Path) -> Result<(Log, Loaded), SessionError> {
        let (writer, loaded) = SessionWriter::reopen(path)?;
        Ok((
            Log {
                writer: Some(writer.into_appender()),
                notes_written: None,
            },
            loaded,
        ))
    }

    /// The session file, when stored.
    pub fn path(&self) -> Option<PathBuf> {
        self.writer.as_ref().map(|w| w.path().to_owned())
    }

    /// The session id, when stored.
    pub fn id(&self) -> Option<String> {
        self.writer.as_ref().map(SessionAppender::id)
    }

    /// Records messages pushed to the engine.
    pub fn messages(&mut self, messages: &[Message]) {
        let timestamp = Some(now());
        for message in messages {
            self.append(&Record::Message {
                timestamp: timestamp.clone(),
                message: message.clone(),
                usage: None,
                cost_usd: None,
            });
        }
    }

    /// Records a request's eviction pass.
    pub fn enforce(&mut self, report: &Report) {
        let report = serde_json::to_value(report).unwrap_or_default();
        let budget = report
            .get("budget")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        self.append(&Record::Enforce { budget, report });
    }

    /// Records an idle gap the strategy minded before a request's pass,
    /// so a rebuilt conversation gives it back at the same point.
    pub fn idle(&mut self, seconds: u64) {
        self.append(&Record::Idle { seconds });
    }

    /// Records a calibration of the engine's count by the provider's.
    pub fn calibrate(&mut self, local: usize, reported: usize) {
        self.append(&Record::Calibrate {
            local: local as u64,
            reported: reported as u64,
        });
    }

    /// Records a side call's answer, so a rebuilt conversation gives its
    /// strategy the same answer at the same point.
    pub fn side_call(&mut self, id: u64, purpose: &str, result: &Result<String, String>) {
        self.append(&Record::SideCall {
            id,
            purpose: purpose.to_string(),
            result: result.clone(),
        });
    }

    /// Writes the strategy's working notes to the session's notes file
    /// (`<id>.notes.md`, as `cwl run` does) when they changed; a file that
    /// cannot be written is noted, the notes staying in the strategy's
    /// state.
    pub fn working_notes(&mut self, notes: &str) {
        let Some(session) = self.path() else {
            return;
        };
        if self.notes_written.as_deref() == Some(notes) {
            return;
        }
        self.notes_written = Some(notes.to_string());
        if let (path, Err(error)) = cwl_session::write_notes(&session, notes) {
            self.note(&format!(
                "could not write the notes file {}: {error}",
                path.display()
            ));
        }
    }

    /// Records a note (a warning about the conversation).
    pub fn note(&mut self, text: &str) {
        self.append(&Record::Note {
            timestamp: Some(now()),
            text: text.to_string(),
        });
    }

    fn append(&mut self, record: &Record) {
        if let Some(writer) = &self.writer
            && let Err(error) = writer.append(record)
        {
            crate::event::warn(&format!("{error}; this conversation is no longer stored"));
            self.writer = None;
        }
    }
}
