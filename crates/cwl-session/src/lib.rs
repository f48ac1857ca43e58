//! Session files for cwl: one append-only JSONL file per session, one
//! [`cwl::Record`] a line, written, locked, checkpointed, resumed and
//! listed here; and which strategy manages a session's context
//! ([`strategy`]), since a session records it and resuming rebuilds it.
//! The agent and the proxy both keep their sessions with this crate.
//!
//! It depends on the engine and the strategies only: never on a provider,
//! the agent, a tool or a front end.
//!
//! The file keeps everything: the header (model, budget, tools), every
//! message in order (also those the engine later evicts from the view),
//! each eviction pass that changed the view ([`Record::Enforce`]), each
//! calibration, each idle gap a strategy minded ([`Record::Idle`]: the
//! provider cache expired while Self-GC had a plan pending), usage and
//! cost per model call, and notes. Each record is
//! written with one `write` call as soon as it happens, so a crash loses at
//! most the line being written; [`read`] detects such a torn last line and
//! skips it with a warning. API keys are never part of any record. A
//! writer holds an exclusive lock on the file while it lives, so two
//! processes never append to one session ([`SessionWriter`]).
//!
//! Resuming ([`replay`]) restores the last checkpoint ([`Record::Checkpoint`],
//! written at task ends, spaced so checkpoints take at most about as much
//! room as the rest of the file) and replays the records after it; with
//! no usable checkpoint it replays every record into a fresh
//! [`cwl::Context`]. The same pushes, calibrations, gaps and enforcements at the
//! same points, under the session's [`Settings`], give the same view, byte
//! for byte. The file is also the engine's [`cwl::TranscriptStore`]
//! ([`SessionTranscript`]): `recall` reads evicted messages back from it.

mod list;
mod read;
mod resume;
mod settings;
mod sidecars;
mod store;
pub mod strategy;
mod transcript;
mod usage;

use std::path::PathBuf;

use cwl::{Record, ToolSpec};

pub use list::{SessionSummary, list};
pub use read::{Loaded, read};
pub use resume::{
    MAY_HAVE_RUN, NOT_RUN_ANSWER, PendingCall, ReplayOptions, Replayed, find, replay,
    unfinished_task,
};
pub use settings::Settings;
pub use sidecars::SidecarDir;
pub use store::{
    SessionAppender, SessionWriter, new_id, notes_path, pid_path, remove_stale_pids, write_notes,
};
pub use transcript::SessionTranscript;
pub use usage::{SessionUsage, Spent, session_usage};

/// The name of the agent's `delegate` tool: its results are a child run's
/// answers, whose usage a session counts apart.
pub const DELEGATE: &str = "delegate";

/// Why a session file could not be written, read or replayed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A file system operation failed.
    #[error("session file {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line in the middle of the file is not a record.
    #[error("session file {path} line {line}: not a session record ({reason})")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Why it could not be read.
        reason: String,
    },
    /// The strategy options the file records are refused by this build.
    #[error("session file {path}: its strategy options are refused: {source}")]
    StrategyOptions {
        /// The file.
        path: PathBuf,
        /// Why.
        source: crate::strategy::OptionError,
    },
    /// The file does not start with a session header.
    #[error("session file {0} does not start with a session header")]
    NoHeader(PathBuf),
    /// The header has a format version this build does not read.
    #[error("session file {path} has format version {version}; this cwl reads version {supported}")]
    Version {
        /// The file.
        path: PathBuf,
        /// The file's version.
        version: u32,
        /// The version this build writes and reads.
        supported: u32,
    },
    /// A recorded message cannot be replayed into the engine.
    #[error("session file {path} line {line}: cannot replay message: {reason}")]
    Replay {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The engine's complaint.
        reason: String,
    },
    /// No session matches the name given.
    #[error("no session `{name}` in {dir} (run `cwl sessions` to list them)")]
    NotFound {
        /// What was asked for.
        name: String,
        /// Where we looked.
        dir: PathBuf,
    },
    /// Several sessions match a prefix.
    #[error("`{name}` matches several sessions: {matches}; give more of the id")]
    Ambiguous {
        /// What was asked for.
        name: String,
        /// The ids it matches.
        matches: String,
    },
    /// Another process holds the session's write lock.
    #[error("session {id} is in use by {}; wait for it to finish or stop that process, then resume", held_by(*.pid))]
    InUse {
        /// The session id.
        id: String,
        /// The holder's pid, from the session's `.pid` file when readable.
        pid: Option<u32>,
    },
    /// No data directory is known and none was given.
    #[error("no session directory: the user data directory is unknown; pass --session-dir")]
    NoDataDir,
}

/// The header of a session: what it is, from its first line.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    /// The session id (also the file stem).
    pub id: String,
    /// When the session was created (RFC 3339).
    pub timestamp: String,
    /// The agent's working directory.
    pub cwd: String,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// The user's token budget for a whole request.
    pub budget: u64,
    /// The tools offered, `delimiter` included.
    pub tools: Vec<ToolSpec>,
}

impl SessionInfo {
    /// The header record.
    pub fn record(&self) -> Record {
        Record::Session {
            version: cwl::record::SESSION_FORMAT_VERSION,
            id: self.id.clone(),
            timestamp: self.timestamp.clone(),
            cwd: self.cwd.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            budget: self.budget,
            tools: self.tools.clone(),
        }
    }

    /// The header in `record`, with its format version.
    pub fn from_record(record: &Record) -> Option<(SessionInfo, u32)> {
        match record {
            Record::Session {
                version,
                id,
                timestamp,
                cwd,
                provider,
                model,
                budget,
                tools,
            } => Some((
                SessionInfo {
                    id: id.clone(),
                    timestamp: timestamp.clone(),
                    cwd: cwd.clone(),
                    provider: provider.clone(),
                    model: model.clone(),
                    budget: *budget,
                    tools: tools.clone(),
                },
                *version,
            )),
            _ => None,
        }
    }
}

fn held_by(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("pid {pid}"),
        None => "another process".to_string(),
    }
}

/// The default session directory: `<user data dir>/cwl/sessions`
/// (`~/.local/share/cwl/sessions` on Linux).
pub fn default_dir() -> Result<PathBuf, SessionError> {
    dirs::data_dir()
        .map(|dir| dir.join("cwl").join("sessions"))
        .ok_or(SessionError::NoDataDir)
}

/// How long ago the last model response of `loaded` was recorded, by
/// its timestamp (`None`: no response, or none with a readable time; a
/// time in the future counts as now).
pub fn since_last_response(loaded: &Loaded) -> Option<std::time::Duration> {
    let stamp = loaded
        .records
        .iter()
        .rev()
        .find_map(|(_, record)| match record {
            Record::Message {
                message: cwl::Message::Assistant { .. },
                timestamp,
                ..
            } => Some(timestamp.as_deref()),
            _ => None,
        })??;
    let at = chrono::DateTime::parse_from_rfc3339(stamp).ok()?;
    Some(
        (chrono::Utc::now() - at.to_utc())
            .to_std()
            .unwrap_or_default(),
    )
}

/// The current time in RFC 3339, as records carry it.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
