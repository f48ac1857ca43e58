//! The session record: the line types of a cwl session file (JSONL, one
//! [`Record`] a line).
//!
//! The agent writes these; the lab reads them back. Only the types live
//! here, so both sides agree on the format without the engine doing I/O.

use serde::{Deserialize, Serialize};

use crate::config::{Config, Share};

fn default_keep_recent() -> Option<Share> {
    Config::default().keep_recent
}

fn default_strategy() -> String {
    "cwl".to_string()
}

fn default_superseded_plans() -> bool {
    Config::default().superseded_plans
}
use crate::message::{Message, ToolSpec};
use crate::protocol::Annotation;

/// The current version of the session file format.
pub const SESSION_FORMAT_VERSION: u32 = 1;

/// Token usage reported by a provider for one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, including cached ones.
    pub input_tokens: u64,
    /// Prompt tokens served from the provider's prefix cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Prompt tokens written to the provider's prefix cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Generated tokens, including reasoning.
    pub output_tokens: u64,
}

/// One line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Record {
    /// First line: what the session is.
    Session {
        /// Format version ([`SESSION_FORMAT_VERSION`]).
        version: u32,
        /// Session id.
        id: String,
        /// When the session was created (RFC 3339).
        timestamp: String,
        /// Working directory of the agent.
        cwd: String,
        /// Provider name (`openai`, `anthropic`, `scripted`...).
        provider: String,
        /// Model name.
        model: String,
        /// Token budget τ.
        budget: u64,
        /// Tool definitions offered to the model (part of the prologue).
        tools: Vec<ToolSpec>,
    },
    /// A transcript message, in order.
    Message {
        /// When it was recorded (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timestamp: Option<String>,
        /// The message.
        message: Message,
        /// For assistant messages, the provider's usage for the call; for a
        /// sub-agent's result (`delegate`), the usage of its calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// The cost in US dollars of those calls, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// The engine enforced the budget before a model call; replaying the
    /// same enforcement at the same point reproduces the same view.
    Enforce {
        /// The budget in force.
        budget: u64,
        /// The pass's report as JSON (see `cwl::Report`).
        report: serde_json::Value,
    },
    /// The provider's prompt-token count calibrated the local count.
    Calibrate {
        /// Tokens the engine counted for the request.
        local: u64,
        /// Tokens the provider reported.
        reported: u64,
    },
    /// The eviction settings the session runs with, so a resume replays
    /// and continues with the same ones. The last such record is in force.
    Settings {
        /// Where a triggered pass stops, as a share of τ.
        low_water: Share,
        /// The share of τ residues may take before they fold; `None`: off.
        residue_share: Option<Share>,
        /// The recent working set as a share of τ; `None`: off. Files
        /// written before it existed ran with the default.
        #[serde(default = "default_keep_recent")]
        keep_recent: Option<Share>,
        /// The share of an episode's lines a later one must repeat for it
        /// to go first; `None`: off. Files written before it existed ran
        /// without it.
        #[serde(default)]
        superseded: Option<Share>,
        /// The share of a tool output's lines later outputs must repeat for
        /// it to be stubbed first; `None`: off. Files written before it
        /// existed ran without it.
        #[serde(default)]
        restated: Option<Share>,
        /// The share of τ unannotated answers between episodes may take
        /// before the oldest go first; `None`: off. Files written before
        /// it existed ran without it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer_share: Option<Share>,
        /// Whether old acts' outputs are stubbed before any removal. Files
        /// written before it existed ran without it.
        #[serde(default)]
        stub_act_outputs: bool,
        /// Whether a plan tool's earlier calls go first once it is called
        /// again (`--plans drop`). Files written before it existed were
        /// resumed with the default.
        #[serde(default = "default_superseded_plans")]
        superseded_plans: bool,
        /// The strategy managing the context (`cwl`, `cwm`; see
        /// `cwl::Strategy`). Files written before it existed ran CWL.
        #[serde(default = "default_strategy")]
        strategy: String,
        /// The strategy's own settings, as given (`self-gc`: `trigger`,
        /// `regrowth`...; `cwm`: the cascade and component budgets); null:
        /// its defaults. Files written before it existed ran the defaults.
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        strategy_options: serde_json::Value,
    },
    /// The engine's whole state after the message records before it (see
    /// `cwl::Checkpoint`), so a resume restores it and replays only the
    /// records after it. Kept as JSON: an unreadable checkpoint costs a full
    /// replay, not the session.
    Checkpoint {
        /// Messages pushed before it (`cwl::Checkpoint::pushes`).
        pushes: u64,
        /// The checkpoint as JSON (see `cwl::Checkpoint`).
        checkpoint: serde_json::Value,
    },
    /// A tool call is about to run: written and flushed before the tool
    /// starts, so a resume can tell a call that may have run partly (a
    /// `tool_started` with no result) from one that never ran.
    ToolStarted {
        /// When it started (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timestamp: Option<String>,
        /// The call id as the model sent it.
        call_id: String,
        /// The tool.
        name: String,
    },
    /// A model call a strategy asked for beside the main loop (see
    /// `cwl::SideRequest`) and what came of it; a resume gives the same
    /// answer back at the same point, so the strategy reaches the same state.
    SideCall {
        /// The strategy's id for the request.
        id: u64,
        /// What it was for.
        purpose: String,
        /// The model's text, or why there is none (error, timeout).
        result: Result<String, String>,
    },
    /// Before a model call, the conversation had sat idle this long since
    /// the previous one, and the strategy took note (see
    /// `cwl::Strategy::idle`: Self-GC commits a pending plan once the
    /// provider's cache has expired); a resume gives the same gap back at
    /// the same point. Gaps no strategy minded are not recorded.
    Idle {
        /// Whole seconds since the previous model call ended.
        seconds: u64,
    },
    /// An episode annotation applied out of band before the next message
    /// (the agent's inferred episodes for tool use outside any the model
    /// opened); a resume applies it at the same point.
    Annotate {
        /// The annotation, as `delimiter` arguments would give it.
        annotation: Annotation,
    },
    /// A free-form event worth keeping (task boundaries, warnings).
    Note {
        /// When it happened (RFC 3339).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timestamp: Option<String>,
        /// What happened.
        text: String,
    },
}
