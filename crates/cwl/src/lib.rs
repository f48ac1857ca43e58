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

pub mod budget;
pub mod classes;
pub mod context;
mod eviction;
pub mod graph;
pub mod message;
pub mod oneshot;
pub mod openai;
pub mod protocol;
pub mod record;
pub mod report;
pub mod tokens;

pub use budget::{Budget, BudgetError};
pub use classes::{ToolClass, ToolClasses};
pub use context::{Accepted, Config, Context, DEFAULT_BUDGET, DelimiterOutcome, TranscriptError};
pub use graph::{Episode, EpisodeId, EpisodeState, Graph, Level};
pub use message::{Block, Message, ToolCall, ToolResult, ToolSpec};
pub use oneshot::{EvictError, Evicted, evict};
pub use protocol::{Annotation, DELIMITER, DelimiterError, EpisodeKind, delimiter_spec};
pub use record::{Record, Usage};
pub use report::{EpisodeReport, LevelReport, Report};
pub use tokens::{Estimate, O200k, TokenCounter};
