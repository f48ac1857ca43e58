//! # cwl-proxy — CWL for the agents people already use
//!
//! A local HTTP proxy between an agent (Claude Code, Codex CLI, pi, any
//! OpenAI- or Anthropic-compatible client) and its provider: the agent keeps
//! sending its full history, the proxy keeps one CWL engine per
//! conversation and forwards the evicted request.
//!
//! A request is routed to the conversation whose history is its longest
//! prefix ([`conversations`]); its new messages are converted from the
//! provider's format ([`wire`]) and pushed to that conversation's engine
//! ([`engine`]) with episodes inferred from tool use by the same code the
//! lab uses (`cwl-infer`); the budget is enforced and the view goes
//! upstream in the client's own bytes wherever the engine left a message
//! unchanged ([`server`], [`upstream`]). Conversations are stored as
//! sessions ([`store`]); each request can be reported as an [`event`].
//! Replicas behind a load balancer share conversations through their
//! session directory ([`heads`]).
//! Strategies that fold content the model can bring back get a `recall`
//! tool the proxy adds and answers itself ([`recall`]).
//!
//! It depends on the engine, `cwl-infer`, `cwl-provider` (side calls) and
//! `cwl-session` (its conversations are sessions); never on the agent or
//! the lab (only its tests use the lab).

pub mod api;
pub mod body;
pub mod cli;
pub mod conversations;
pub mod engine;
pub mod event;
pub mod heads;
pub mod identity;
mod live;
pub mod recall;
pub mod server;
pub mod side;
pub mod store;
pub mod trim;
pub mod upstream;
pub mod usage;
pub mod wire;

pub use conversations::{ConversationId, Conversations, Route, message_hash};
pub use server::{Options, Proxy, serve};
