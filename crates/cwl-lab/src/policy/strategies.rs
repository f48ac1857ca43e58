//! The engine strategies the lab replays beside CWL, keyed by the name
//! `--strategy` gives them: each entry builds a fresh strategy for one
//! file, driven by the generic [`StrategyPolicy`](super::strategy::StrategyPolicy).
//! A new strategy is one more entry in [`STRATEGIES`] (name, description,
//! constructor); `--policy`, `all`, `--help` and the reports follow.

use cwl::Strategy;

use super::PolicyConfig;
use crate::transcript::Lab;

/// Builds a strategy for one replayed file: the policy parameters (its
/// budget in local tokens) and the file's lab (counter, tools).
pub type Build = fn(&PolicyConfig, &Lab) -> Box<dyn Strategy>;

/// A strategy the lab knows: its policy name, what it is, and its
/// constructor.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The policy name (the strategy's `--strategy` name).
    pub name: &'static str,
    /// What it is, for `cwl replay --help`.
    pub about: &'static str,
    /// Its constructor.
    pub build: Build,
}

/// Every strategy replayed through the seam, in report order (after the
/// lab's own policies).
pub const STRATEGIES: &[Entry] = &[
    Entry::new(cwl_cwm::strategy::NAME, CWM, cwm),
    Entry::new(cwl_selfgc::strategy::NAME, SELF_GC, self_gc),
];

const CWM: &str = "the context-window manager: summaries through side calls from 50% of the budget (skipped without --model-url), then the weighted scorer with BM25 relevance to the latest user turn, evicting from the orange zone, 75% of the budget, down to it; system and user messages are never evicted";

const SELF_GC: &str = "Self-GC: a planner side call from 30% of the budget folds, masks and prunes indexed objects (skipped without --model-url); its budget backstop prunes the oldest tool results when no plan fits";

impl Entry {
    /// The strategy `name`, described by `about`, built by `build`.
    pub const fn new(name: &'static str, about: &'static str, build: Build) -> Self {
        Entry { name, about, build }
    }
}

/// The context-window manager ([`cwl_cwm::Cwm`]) at the policy budget.
fn cwm(config: &PolicyConfig, lab: &Lab) -> Box<dyn Strategy> {
    Box::new(cwl_cwm::Cwm::new(
        config.baseline_engine(),
        lab.counter_arc(),
        lab.tools().to_vec(),
    ))
}

/// Self-GC ([`cwl_selfgc::SelfGc`]) at the policy budget; its folds stay
/// in memory (the lab writes no sidecars).
fn self_gc(config: &PolicyConfig, lab: &Lab) -> Box<dyn Strategy> {
    Box::new(cwl_selfgc::SelfGc::new(
        config.baseline_engine(),
        lab.counter_arc(),
        lab.tools().to_vec(),
    ))
}

/// The entry named `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    STRATEGIES.iter().find(|entry| entry.name == name)
}
