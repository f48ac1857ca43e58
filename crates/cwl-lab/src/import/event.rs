//! What an import yields: the session's metadata, its events and warnings.

use std::fmt;
use std::path::{Path, PathBuf};

use ::cwl::{Message, ToolSpec, Usage};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Format;

/// What a log says about its session as a whole, read before its events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Meta {
    /// The file imported.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// The session id the harness gave it, if any.
    pub session_id: Option<String>,
    /// The model of the first model call, if the log says (assistant
    /// [`Event::Message`]s carry the model of each call).
    pub model: Option<String>,
    /// The provider, if the log says.
    pub provider: Option<String>,
    /// The agent's working directory, if the log says.
    pub cwd: Option<String>,
    /// When the session started, if the log says.
    pub started: Option<DateTime<Utc>>,
    /// Tool definitions offered to the model. Only cwl and OpenAI logs record
    /// them; empty for the others.
    pub tools: Vec<ToolSpec>,
    /// The token budget of a cwl session.
    pub budget: Option<u64>,
    /// The model's context window as the harness counted it, if the log
    /// says (Codex `token_count` `model_context_window`): where the
    /// client's own compaction works from.
    pub window: Option<u64>,
    /// Whether the log records the client's own instructions (Codex
    /// `base_instructions`; rollouts from before 2026 hold only the
    /// user's): without them and without prompt sizes, calibration
    /// estimates them.
    pub client_prompt: bool,
}

impl Meta {
    pub(crate) fn new(path: &Path, format: Format) -> Self {
        Meta {
            path: path.to_path_buf(),
            format,
            session_id: None,
            model: None,
            provider: None,
            cwd: None,
            started: None,
            tools: Vec::new(),
            budget: None,
            window: None,
            client_prompt: false,
        }
    }
}

/// Something wrong in a log that the importer worked around.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportWarning {
    /// The file.
    pub path: PathBuf,
    /// The 1-based line (JSONL formats); `None` for single-document formats,
    /// where `what` names the entry (`messages[12]`).
    pub line: Option<u64>,
    /// What was wrong and what the importer did about it.
    pub what: String,
}

impl fmt::Display for ImportWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.path.display(), line, self.what),
            None => write!(f, "{}: {}", self.path.display(), self.what),
        }
    }
}

/// One item of an imported session, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A transcript message. Each assistant message is one model call.
    Message {
        /// The message.
        message: Message,
        /// When the log says it was recorded.
        timestamp: Option<DateTime<Utc>>,
        /// Assistant messages: the provider's usage for the call, if logged.
        usage: Option<Usage>,
        /// Assistant messages: the model that answered, if logged.
        model: Option<String>,
        /// Assistant messages: the call's cost in US dollars, if logged.
        cost_usd: Option<f64>,
    },
    /// The original harness compacted (summarized) its context here.
    Compaction {
        /// When it happened.
        timestamp: Option<DateTime<Utc>>,
        /// Prompt tokens before the compaction, if logged.
        tokens_before: Option<u64>,
        /// The summary that replaced the history, if logged.
        summary: Option<String>,
        /// How many of the messages just before it the harness kept after
        /// the summary (pi keeps the latest turns); 0: none.
        #[serde(skip_serializing_if = "is_zero")]
        kept: usize,
        /// Messages the harness sent before the summary in place of the
        /// history, which the log holds apart or not at all (Codex's
        /// initial context and earlier user messages, files Claude Code
        /// re-read); empty when the log does not say.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        restored: Vec<Message>,
    },
    /// Something was wrong in the log; the import went on.
    Warning(ImportWarning),
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
