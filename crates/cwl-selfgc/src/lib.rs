//! # cwl-selfgc — Self-GC's model-free core
//!
//! Self-GC (see `self-gc-paper.txt`, section 3 and the appendix) governs an
//! agent's context as addressable objects: each user request with its
//! execution span is `conversation:user:k`, each tool result
//! `function:<tool>:n`. A side-channel planner model reads the indexed
//! context and answers a plan of **fold** (exact payload to a sidecar, a
//! recovery pointer left behind), **mask** (boundary lines kept, the
//! middle elided) and **prune** (gone from the view) actions over those ids;
//! the harness rehearses the plan locally, projects the view, and commits
//! it at a safe turn boundary when the savings justify breaking the cache.
//!
//! This crate is everything of that which needs no model and no I/O:
//! - [`objects`]: the session-local monotonic id allocator;
//! - [`annotate`]: the ids shown to the planner as in Listing 1;
//! - [`contract`]: the planner contract (the paper's four rules) and request;
//! - [`plan`]: the Listing 2 XML plan, parsed;
//! - [`rehearsal`]: target resolution, filtering, overlap normalisation and
//!   the projected view with its savings;
//! - [`commit`]: the cache-aware commit rule;
//! - [`fold`]: sidecar names and byte-exact checks of folded payloads;
//! - [`strategy`]: all of it as a [`cwl::Strategy`], [`SelfGc`].
//!
//! The planner call, sidecar files and the main loop belong to the
//! harness: the strategy asks for them through the seam (side requests,
//! sidecar writes) and does no I/O itself.
//!
//! Driving [`SelfGc`] (what `cwl run` does before every model call):
//!
//! ```
//! use std::sync::Arc;
//! use cwl::{Config, Estimate, Message, SideCalls, Strategy};
//! use cwl_selfgc::SelfGc;
//!
//! let mut gc = SelfGc::new(Config::with_budget(2_000), Arc::new(Estimate), Vec::new());
//! gc.push(Message::system("You are a coding agent.")).unwrap();
//! gc.push(Message::user("Fix the parser.")).unwrap();
//! // Before each model call: answer the planner calls it asks for (the
//! // model's text, or why there is none) ...
//! while let Some(request) = gc.side_request() {
//!     gc.side_result(request.id, Err("no planner here".into()));
//! }
//! // ... enforce the budget, write the folded payloads, send the view.
//! let report = gc.enforce();
//! for sidecar in gc.take_sidecars() {
//!     let _ = (sidecar.name, sidecar.content); // to <session>.sidecars/
//! }
//! assert!(report.budget_met);
//! assert_eq!(gc.view().count(), 2);
//! // The state for the session file, and back.
//! let saved = gc.save().unwrap();
//! let restored = SelfGc::restore(&saved.state, Arc::new(Estimate)).unwrap();
//! assert!(restored.view().eq(gc.view()));
//! ```
//!
//! It depends on the engine only (`cwl`): its planner calls go through the
//! [`cwl::Strategy`] side-request seam, so it never depends on a provider,
//! the session store, the agent or a front end.

pub mod annotate;
mod billed;
pub mod commit;
pub mod contract;
pub mod fold;
pub mod objects;
pub mod plan;
pub mod rehearsal;
pub mod strategy;

pub use commit::{Commit, CommitCosts, DEFAULT_COMMIT_PRUNE, decide};
pub use objects::{Object, ObjectId, ObjectIdError, ObjectKind, ObjectTable};
pub use plan::{Action, Plan, PlanError, Target, parse_plan};
pub use rehearsal::{DropReason, Dropped, Projection, Rehearsal, Rehearsed, Rejected, Sidecar};
pub use strategy::{CommitTokens, SelfGc, SelfGcMetrics, SelfGcOptions, SelfGcStats, Zone};
