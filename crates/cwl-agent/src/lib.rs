//! The cwl agent harness: the agent loop, tools, MCP, approvals and the
//! sandbox, with context managed by the [`cwl`] engine, models reached
//! through [`cwl_provider`] and sessions kept by [`cwl_session`].
//!
//! The `cwl` binary is a thin front over [`cli`]: `cwl run`, `cwl chat`,
//! `cwl sessions` and `cwl demo` are the `run_*` functions there.
//!
//! It depends on the engine, the strategies, `cwl-infer`, `cwl-provider`
//! and `cwl-session`; never on the lab, the proxy or the full-screen UI
//! (`cwl-tui` is a front over it).

pub mod agent;
pub mod bench;
pub mod cli;
pub mod config;
pub mod demo;
pub mod mcp;
pub mod prompt;
pub mod render;
pub mod show;
pub mod tools;
