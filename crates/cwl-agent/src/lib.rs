//! The cwl agent harness: model providers, tools, the agent loop and the
//! session store, with context managed by the [`cwl`] engine.
//!
//! The `cwl` binary is a thin front over [`cli`]: `cwl run`, `cwl chat`,
//! `cwl sessions` and `cwl demo` are the `run_*` functions there.

pub mod agent;
pub mod cli;
pub mod config;
pub mod demo;
pub mod mcp;
pub mod prompt;
pub mod render;
pub mod session;
pub mod strategy;
pub mod tools;
pub mod tui;
