//! The agent's integration tests, in one test binary (one link instead of
//! one per file): a module per former `tests/*.rs` file, sharing
//! [`support`].
//!
//! Some tests run this binary again to run one ignored test in a child
//! process; they name it with [`support::child_test`], as libtest does
//! here: with its module path (`agent_approval::cwl_process`).

mod support;

mod agent_approval;
mod agent_cli;
mod agent_cwm;
mod agent_delegate_cost;
mod agent_demo;
mod agent_failures;
mod agent_forgetful;
mod agent_instructions;
mod agent_interrupt;
mod agent_limits;
mod agent_recall;
mod agent_secrets;
mod agent_selfgc;
mod agent_selfgc_expiry;
mod agent_selfgc_health;
mod agent_session;
mod agent_strategy;
mod mcp;
mod providers;
mod session_lock;
mod tools;
mod tools_registry;
mod tools_replace;
mod tools_sandbox;
