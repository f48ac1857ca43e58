//! # cwl — Context Window Lifecycle
//!
//! The engine of CWL: long-running LLM agents mark their work as typed,
//! dependency-linked episodes with one `delimiter` tool, and a deterministic,
//! model-free policy evicts content in a fixed order whenever the prompt
//! passes a token budget.
//!
//! The crate is pure: no I/O, no provider, no file system. A harness
//! appends messages to a [`Context`], calls [`Context::enforce`] before each
//! model call and sends [`Context::view`]; [`evict`] does the same in one
//! shot over a whole transcript.
//!
//! ```
//! use std::sync::Arc;
//! use cwl::{Block, Config, Context, Message, O200k, ToolCall, delimiter_spec};
//!
//! let mut context = Context::new(Config::with_budget(80_000), Arc::new(O200k::new()), vec![delimiter_spec()]);
//! context.push(Message::system("You are a coding agent."))?;
//! context.push(Message::user("Find where auth happens."))?;
//!
//! // The model opens an exploration episode; the engine answers the call.
//! let start = r#"{"action":"start","name":"locate-auth","type":"expl"}"#;
//! let outcomes = context.push(Message::Assistant {
//!     content: vec![Block::ToolCall(ToolCall::new("call_1", "delimiter", start))],
//! })?;
//! let outcome = &outcomes[0];
//! context.push(Message::tool_result(&outcome.call_id, "delimiter", outcome.text(), outcome.is_error()))?;
//! assert_eq!(context.active_episode().map(|(name, _)| name), Some("locate-auth"));
//!
//! // Before every model call: enforce the budget, then send the view.
//! let report = context.enforce();
//! assert!(report.budget_met);
//! let request: Vec<&Message> = context.view().collect();
//! assert_eq!(request.len(), 4);
//! # Ok::<(), cwl::TranscriptError>(())
//! ```
//!
//! It depends on no other crate of the workspace, and never on a provider,
//! a tool, the file system or a front end.

pub mod budget;
pub mod checkpoint;
pub mod classes;
pub mod config;
pub mod context;
mod eviction;
pub mod evictor;
mod fold;
pub mod graph;
mod id_set;
pub mod message;
pub mod meter;
pub mod oneshot;
pub mod openai;
mod plans;
pub mod protocol;
pub mod reasoning;
pub mod recall;
pub mod record;
mod repeats;
pub mod report;
pub mod settings;
pub mod strategy;
mod term_index;
pub mod text;
pub mod tokens;
mod uses;

pub use budget::{Budget, BudgetError};
pub use checkpoint::{Checkpoint, CheckpointError};
pub use classes::{DEFAULT_PLAN_TOOLS, ToolClass, ToolClasses};
pub use config::{
    ActOutputs, ActOutputsError, Config, DEFAULT_ANSWER_SHARE, DEFAULT_BUDGET, DEFAULT_KEEP_RECENT,
    DEFAULT_LOW_WATER, DEFAULT_RESIDUE_SHARE, DEFAULT_RESTATED, DEFAULT_SUPERSEDED, PlanCalls,
    PlanCallsError, RESTATED_MIN_TOKENS, ResidueCap, SMALL_TOKENS, Share, ShareError,
};
pub use context::{Accepted, Context, DelimiterOutcome, Source, TranscriptError};
pub use evictor::{Evictor, OldestFirst, PaperOrder};
pub use graph::{Candidates, Episode, EpisodeId, EpisodeState, Graph, Level, Origin};
pub use message::{Block, Message, ToolCall, ToolResult, ToolSpec};
pub use meter::{MAX_REPORTED_RATIO, Meter, untrusted_report};
pub use oneshot::{EvictError, Evicted, evict, evict_annotated};
pub use protocol::{Annotation, DELIMITER, DelimiterError, EpisodeKind, delimiter_spec};
pub use reasoning::ReasoningScope;
pub use recall::{RECALL, RecallError, TranscriptStore, recall_spec};
pub use record::{Record, Usage};
pub use report::{EpisodeReport, LevelReport, Report};
pub use settings::{EngineSettings, Preset, PresetError};
pub use strategy::{
    Health, NoSidecars, Saved, SideCalls, SideRequest, SidecarFile, SidecarStore, Strategy,
};
pub use text::shorten;
pub use tokens::{Estimate, O200k, Remembering, TokenCounter};
