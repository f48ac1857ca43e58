//! Reports of a replay: a table per file and an aggregate ([`table`]), one
//! JSON object for scripts ([`json`]), and a plot of request tokens over
//! each session ([`plot`]); warnings ranked and counted ([`warnings`]);
//! CWL against the best policy that held the budget ([`versus`]); what each
//! request lacked that its reply used ([`losses`]).

pub mod json;
pub mod losses;
pub mod plot;
pub mod table;
pub mod versus;
pub mod warnings;

use crate::metrics::Stats;
use crate::policy::PolicyKind;
use crate::replay::FileReport;

/// Everything a replay of several files produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    /// The budget τ used (a percentage budget resolved on the default
    /// model's window; each file says its own).
    pub budget: usize,
    /// The budget as the user typed it (`80k`, `50%`), for headers.
    pub budget_typed: String,
    /// The model every file was priced as (`--model`), or `None` when each
    /// file is priced by its own log's model.
    pub model: Option<String>,
    /// The policies, in report order.
    pub policies: Vec<PolicyKind>,
    /// Per file, in the order given.
    pub files: Vec<FileReport>,
    /// Files that could not be read or parsed, in the order given.
    pub skipped: Vec<Skipped>,
}

/// A file left out of the replay.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Skipped {
    /// The file.
    pub path: String,
    /// Why it could not be replayed.
    pub why: String,
}

impl Skipped {
    /// The file and why, naming the file once.
    pub fn describe(&self) -> String {
        if self.why.contains(&self.path) {
            self.why.clone()
        } else {
            format!("{}: {}", self.path, self.why)
        }
    }
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

    /// What the costs are for, as a header says it: the `--model`, or each
    /// log's model with how many files used it, unpriced ones named.
    pub fn models_line(&self) -> String {
        if let Some(model) = &self.model {
            return format!("costs for {model}");
        }
        let mut counts: Vec<(String, bool, usize)> = Vec::new();
        for file in &self.files {
            match counts
                .iter_mut()
                .find(|(m, p, _)| *m == file.model && *p == file.priced)
            {
                Some(entry) => entry.2 += 1,
                None => counts.push((file.model.clone(), file.priced, 1)),
            }
        }
        let parts: Vec<String> = counts
            .iter()
            .map(|(model, priced, n)| {
                let unknown = if *priced {
                    ""
                } else {
                    ", no price: cost unknown"
                };
                let files = if *n == 1 { "file" } else { "files" };
                format!("{model} ({n} {files}{unknown})")
            })
            .collect();
        format!("costs by each log's model: {}", parts.join(", "))
    }
}
