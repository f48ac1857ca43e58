//! # cwl-proxy — CWL for the agents people already use
//!
//! A local HTTP proxy between an agent (Claude Code, Codex CLI, pi, any
//! OpenAI- or Anthropic-compatible client) and its provider: the agent keeps
//! sending its full history, the proxy keeps one CWL engine per
//! conversation and forwards the evicted request.
//!
//! This crate is being built in steps (issue 10). Present so far:
//! [`conversations`], which tells which known conversation a request
//! continues.

pub mod conversations;

pub use conversations::{ConversationId, Conversations, Route, message_hash};
