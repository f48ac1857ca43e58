//! # cwl-cwm — the context-window manager's model-free core
//!
//! The context-window manager (`context-window-manager.txt`) treats the
//! window as a monitored, budgeted resource: a pressure monitor says how
//! full it is and how fast it fills (sections 2), component budgets say
//! who fills it and how many turns are left (section 5), and a cascade of
//! eviction and compression acts by zone. This crate holds the parts that
//! need no model:
//! - [`pressure`]: zones, velocity over the last turns, spikes against an
//!   exponential moving average, turns until red;
//! - [`budgets`]: the six components with soft and hard limits,
//!   `check_before_add`, burn rate and a report;
//! - [`scorers`]: the eviction scorers (fifo, lru, priority, type and
//!   their weighted composite), shared with the lab's baselines;
//! - [`relevance`](mod@relevance): lexical relevance to the current task (BM25), the
//!   priority scorer's `semantic` term without a model.
//!
//! - [`checkpoint`]: cross-window state: the task checkpoint as JSON in
//!   a progress log, its validation, and the bootstrap prompt;
//! - [`compress`]: the compression cascade's stages, prompts and the
//!   checks an answer must pass;
//! - [`strategy`]: the manager as a [`cwl::Strategy`] the agent runs
//!   (`--strategy cwm`): zones, summaries asked through side requests,
//!   working notes, scored eviction as the backstop, health.
//!
//! It depends on the engine only (`cwl`): its summaries are side requests
//! through the [`cwl::Strategy`] seam, so it never depends on a provider,
//! the session store, the agent or a front end.

pub mod budgets;
pub mod checkpoint;
pub mod compress;
pub mod pressure;
pub mod relevance;
pub mod scorers;
pub mod strategy;

pub use budgets::{
    Allocation, AllocationError, BudgetManager, BudgetReport, Check, Component, ComponentBudget,
};
pub use checkpoint::{CheckpointError, TaskCheckpoint};
pub use compress::{Cascade, CompressionOptions, Level, Stage};
pub use pressure::{Monitor, PressureEvent, Reading, Source, Thresholds, Zone};
pub use relevance::{RelevanceIndex, WindowIndex, relevance};
pub use scorers::{BlockInfo, ContentType, Scorer};
pub use strategy::{CompressionStats, Cwm, Metrics};
