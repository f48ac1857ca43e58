//! The cwl lab: importers for real session logs, baseline context policies,
//! metrics and reports.
//!
//! `cwl replay` streams each log ([`import`] → [`session`]) through every
//! chosen [`policy`] turn by turn ([`replay`]), calibrated to the log's own prompt sizes
//! where it records them ([`calibrate`]), measures what each request
//! would have cost and lost ([`metrics`]) and reports it as a table, JSON
//! or a plot ([`report`]). `cwl gen` writes synthetic annotated sessions
//! for scale tests ([`synth`]); `cwl sweep` measures the engine's
//! low-water trade-off against the baselines ([`sweep`]). [`cli`] holds the command-line arguments and
//! entry points the `cwl` binary wires.
//!
//! It depends on the engine, the strategies, `cwl-infer` and
//! `cwl-provider` (for the one price table); never on the agent, the
//! session store or the proxy.
pub mod import;
pub mod judge;

pub mod calibrate;
pub mod cli;
pub mod metrics;
pub mod policy;
pub mod replay;
pub mod report;
pub mod session;
pub mod side;
pub mod sweep;
pub mod synth;
pub mod transcript;
