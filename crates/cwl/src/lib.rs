//! # cwl — Context Window Lifecycle
//!
//! The engine of CWL: long-running LLM agents mark their work as typed,
//! dependency-linked episodes with one `delimiter` tool, and a deterministic,
//! model-free policy evicts content in a fixed order whenever the prompt
//! passes a token budget.
//!
//! The crate is pure: no I/O, no provider, no file system.

pub mod message;
pub mod record;

pub use message::{Block, Message, ToolCall, ToolResult, ToolSpec};
pub use record::{Record, Usage};
