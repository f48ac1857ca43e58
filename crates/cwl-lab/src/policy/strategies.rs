//! The engine strategies the lab replays beside CWL, keyed by the name
//! `--strategy` gives them: each entry builds a fresh strategy for one
//! file, driven by the generic [`StrategyPolicy`](super::strategy::StrategyPolicy).
//! A new strategy is one more line in [`STRATEGIES`].

use cwl::Strategy;

use super::PolicyConfig;
use crate::transcript::Lab;

/// Builds a strategy for one replayed file: the policy parameters (its
/// budget in local tokens) and the file's lab (counter, tools).
pub type Build = fn(&PolicyConfig, &Lab) -> Box<dyn Strategy>;

/// A strategy the lab knows: its policy name and constructor.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The policy name (the strategy's `--strategy` name).
    pub name: &'static str,
    /// Its constructor.
    pub build: Build,
}

/// Every strategy replayed through the seam, in report order (after the
/// lab's own policies).
pub const STRATEGIES: &[Entry] = &[Entry::new(cwl_cwm::strategy::NAME, cwm)];

impl Entry {
    /// The strategy `name`, built by `build`.
    pub const fn new(name: &'static str, build: Build) -> Self {
        Entry { name, build }
    }
}

/// The context-window manager ([`cwl_cwm::Cwm`]) at the policy budget.
fn cwm(config: &PolicyConfig, lab: &Lab) -> Box<dyn Strategy> {
    Box::new(cwl_cwm::Cwm::new(
        config.engine(),
        lab.counter_arc(),
        lab.tools().to_vec(),
    ))
}

/// The entry named `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    STRATEGIES.iter().find(|entry| entry.name == name)
}
