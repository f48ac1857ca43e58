//! The seam between importers and the replay: a *replayable session* is
//! what a log says about itself ([`SessionInfo`]) and a stream of
//! [`SessionEvent`]s pulled one at a time, so a log is never held whole.
//!
//! [`Session::open`] feeds it from [`crate::import`] (any format the
//! importers detect); tests build sessions from plain message lists with
//! [`Session::from_messages`]. The replay depends only on this seam.

use std::path::Path;

use chrono::{DateTime, Utc};
use cwl::{DELIMITER, Message, ToolSpec, Usage};

use crate::import::Format;
use crate::metrics::sent::ReasoningScope;

/// What a session log says about the session as a whole.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    /// The log's format name (`cwl`, `pi`, `claude-code`...).
    pub format: String,
    /// The model of the original session, if the log says.
    pub model: Option<String>,
    /// The model's context window as the log's harness counted it, if the
    /// log says (see [`crate::import::Meta::window`]).
    pub window: Option<usize>,
    /// Tool definitions offered to the model (empty when the log does not
    /// record them).
    pub tools: Vec<ToolSpec>,
    /// Size of the log in bytes, for throughput figures.
    pub bytes: Option<u64>,
    /// Whether the log records the client's own instructions (see
    /// [`crate::import::Meta::client_prompt`]).
    pub client_prompt: bool,
}

impl SessionInfo {
    /// Whether the session's agent annotated its own episodes (it was
    /// offered the `delimiter` tool).
    pub fn annotated(&self) -> bool {
        self.tools.iter().any(|t| t.name == DELIMITER)
    }

    /// Which turns' reasoning the log's provider counted in its prompts:
    /// that of the log's model, or of its format's default model when the
    /// log does not name one. It follows the log, not `--model`: the
    /// reasoning is there because the log's model wrote it.
    pub fn reasoning_scope(&self) -> ReasoningScope {
        let default = self
            .format
            .parse::<Format>()
            .map_or(crate::metrics::cost::DEFAULT_MODEL, Format::default_model);
        ReasoningScope::of_model(self.model.as_deref().unwrap_or(default))
    }
}

/// One item of a session, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// A transcript message; each assistant message is one model call.
    Message {
        /// The message.
        message: Message,
        /// When the log says it was recorded.
        timestamp: Option<DateTime<Utc>>,
        /// For assistant messages: the provider's reported usage.
        usage: Option<Usage>,
        /// For assistant messages: the call's cost in US dollars, if logged.
        cost_usd: Option<f64>,
    },
    /// The original harness compacted its context here. Replays of the
    /// policies ignore it (every policy starts from the full, uncompacted
    /// history); the replay of what the harness sent
    /// ([`crate::calibrate::AsSent`]) follows it.
    Compaction {
        /// What the harness sent in place of the history before it (after
        /// its leading system messages): the summary, as a user message,
        /// and any messages it restored with it.
        replacement: Vec<Message>,
        /// How many of the messages just before it the harness kept, after
        /// the replacement.
        kept: usize,
    },
    /// Something in the log was wrong and worked around.
    Warning(String),
}

/// A replayable session: its description and its events.
pub struct Session {
    /// What the log says about the session.
    pub info: SessionInfo,
    /// The events, pulled one at a time.
    pub events: Box<dyn Iterator<Item = SessionEvent> + Send>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct OpenError(#[from] Box<dyn std::error::Error + Send + Sync>);

impl Session {
    /// A session made of `messages`, without timestamps (tests, and callers
    /// that hold a transcript in memory already).
    pub fn from_messages(format: &str, tools: Vec<ToolSpec>, messages: Vec<Message>) -> Session {
        Session {
            info: SessionInfo {
                format: format.to_string(),
                model: None,
                window: None,
                tools,
                bytes: None,
                client_prompt: false,
            },
            events: Box::new(messages.into_iter().map(|message| SessionEvent::Message {
                message,
                timestamp: None,
                usage: None,
                cost_usd: None,
            })),
        }
    }

    /// Opens a session log of any format the importers detect.
    pub fn open(path: &Path) -> Result<Session, OpenError> {
        open_with_importer(path)
    }
}

fn open_with_importer(path: &Path) -> Result<Session, OpenError> {
    use crate::import::{self, Event};
    let import = import::open(path).map_err(|e| OpenError(Box::new(e)))?;
    let meta = import.meta();
    let info = SessionInfo {
        format: meta.format.name().to_string(),
        model: meta.model.clone(),
        window: meta.window.and_then(|window| usize::try_from(window).ok()),
        tools: meta.tools.clone(),
        bytes: std::fs::metadata(path).ok().map(|m| m.len()),
        client_prompt: meta.client_prompt,
    };
    let events = import.map(|event| match event {
        Event::Message {
            message,
            timestamp,
            usage,
            cost_usd,
            ..
        } => SessionEvent::Message {
            message,
            timestamp,
            usage,
            cost_usd,
        },
        Event::Compaction {
            summary,
            kept,
            restored,
            ..
        } => SessionEvent::Compaction {
            replacement: restored
                .into_iter()
                .chain(summary.map(Message::user))
                .collect(),
            kept,
        },
        Event::Warning(warning) => SessionEvent::Warning(warning.to_string()),
    });
    Ok(Session {
        info,
        events: Box::new(events),
    })
}
