//! Reports of a replay: a table per file and an aggregate ([`table`]), one
//! JSON object for scripts ([`json`]), and a plot of request tokens over
//! each session ([`plot`]).

pub mod json;
pub mod plot;
pub mod table;

use crate::metrics::Stats;
use crate::policy::PolicyKind;
use crate::replay::FileReport;

/// Everything a replay of several files produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// The budget τ used.
    pub budget: usize,
    /// The model the costs are for.
    pub model: String,
    /// The policies, in report order.
    pub policies: Vec<PolicyKind>,
    /// Per file, in the order given.
    pub files: Vec<FileReport>,
}

impl ReplayReport {
    /// Each policy's counts over all files.
    pub fn aggregate(&self) -> Vec<(PolicyKind, Stats)> {
        self.policies
            .iter()
            .map(|&kind| {
                let mut total = Stats::default();
                for file in &self.files {
                    for outcome in file.policies.iter().filter(|o| o.kind == kind) {
                        total.merge(&outcome.stats);
                    }
                }
                (kind, total)
            })
            .collect()
    }

    /// Model calls replayed over all files.
    pub fn requests(&self) -> u64 {
        self.files.iter().map(|f| f.requests).sum()
    }
}
