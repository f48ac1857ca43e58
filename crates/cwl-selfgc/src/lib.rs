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

pub mod annotate;
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
pub use strategy::{SelfGc, SelfGcOptions, SelfGcStats};
