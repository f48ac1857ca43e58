//! Token budgets per component of the window (section 5 of the
//! document): who fills the window, against what share, and how many turns
//! are left at the current burn rate.
//!
//! Six components share the window: system prompt 6%, tool definitions
//! 4%, message history 65%, tool results 12%, memory injections 8%, output
//! reserve 5% (configurable). Each has a hard limit (its share) and a soft
//! limit at 80% of it: crossing the soft limit warns, reaching the hard
//! limit blocks the addition. Tracking is always allowed; enforcement is
//! the caller's policy.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A part of the window with its own budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    /// The system prompt: fixed, never evicted.
    SystemPrompt,
    /// Tool definitions.
    ToolDefinitions,
    /// The conversation: the primary eviction target.
    MessageHistory,
    /// Tool outputs: capped, summarised first.
    ToolResults,
    /// Injected memory (notes, retrieved facts).
    MemoryInjection,
    /// Room left for the model's answer.
    OutputReserved,
}

impl Component {
    /// All six, in the document's order.
    pub const ALL: [Component; 6] = [
        Component::SystemPrompt,
        Component::ToolDefinitions,
        Component::MessageHistory,
        Component::ToolResults,
        Component::MemoryInjection,
        Component::OutputReserved,
    ];
}

/// Each component's share of the window, in [`Component::ALL`] order.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Allocation(pub [f64; 6]);

impl Default for Allocation {
    fn default() -> Self {
        Allocation([0.06, 0.04, 0.65, 0.12, 0.08, 0.05])
    }
}

/// Shares that are no allocation.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum AllocationError {
    /// A share outside [0, 1].
    #[error("the share of {0:?} must be between 0 and 1, not {1}")]
    OutOfRange(Component, f64),
    /// Shares adding up to more than the window.
    #[error("the shares add up to {0:.2}, more than the whole window")]
    OverOne(f64),
}

impl Allocation {
    /// Checked shares.
    pub fn new(shares: [f64; 6]) -> Result<Self, AllocationError> {
        for (component, share) in Component::ALL.iter().zip(shares) {
            if !(0.0..=1.0).contains(&share) {
                return Err(AllocationError::OutOfRange(*component, share));
            }
        }
        let sum: f64 = shares.iter().sum();
        if sum > 1.0 + 1e-9 {
            return Err(AllocationError::OverOne(sum));
        }
        Ok(Allocation(shares))
    }
}

/// One component's budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComponentBudget {
    /// Its hard limit in tokens.
    pub limit: usize,
    /// Tokens it holds.
    pub used: usize,
    /// The soft limit as a share of the hard one (default 0.8).
    pub soft_share: f64,
}

impl ComponentBudget {
    /// The soft limit in tokens.
    pub fn soft_limit(&self) -> usize {
        (self.limit as f64 * self.soft_share) as usize
    }

    /// `used / limit` (0 for an empty budget).
    pub fn utilisation(&self) -> f64 {
        if self.limit == 0 {
            0.0
        } else {
            self.used as f64 / self.limit as f64
        }
    }

    /// Tokens left under the hard limit.
    pub fn remaining(&self) -> usize {
        self.limit.saturating_sub(self.used)
    }
}

/// What `check_before_add` says about an addition.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Check {
    /// Within the soft limit.
    Allowed,
    /// Allowed, but past the soft limit.
    Warning {
        /// The component.
        component: Component,
        /// Its utilisation after the addition.
        utilisation_after: f64,
    },
    /// It would reach the hard limit.
    Blocked {
        /// The component.
        component: Component,
        /// Tokens it holds.
        used: usize,
        /// Its hard limit.
        limit: usize,
        /// By how much the addition would pass it.
        excess: usize,
    },
}

/// The budget manager of one window.
#[derive(Debug, Clone)]
pub struct BudgetManager {
    max_tokens: usize,
    budgets: [ComponentBudget; 6],
    burns: VecDeque<usize>,
}

/// Turns the burn rate is averaged over.
pub const BURN_WINDOW: usize = 20;

/// A snapshot for reports and `--json` events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetReport {
    /// Each component's budget.
    pub components: Vec<(Component, ComponentBudget)>,
    /// Tokens held by all components.
    pub total_used: usize,
    /// `total_used / max_tokens`.
    pub total_utilisation: f64,
    /// Mean tokens per turn over the recent turns.
    pub burn_rate: f64,
    /// Turns until the window is full at that rate.
    pub turns_until_exhausted: Option<f64>,
}

impl BudgetManager {
    /// Budgets for a `max_tokens` window.
    pub fn new(max_tokens: usize, allocation: Allocation) -> Self {
        let budgets = allocation.0.map(|share| ComponentBudget {
            limit: (max_tokens as f64 * share) as usize,
            used: 0,
            soft_share: 0.8,
        });
        BudgetManager {
            max_tokens,
            budgets,
            burns: VecDeque::new(),
        }
    }

    fn index(component: Component) -> usize {
        Component::ALL
            .iter()
            .position(|c| *c == component)
            .unwrap_or_default()
    }

    /// A component's budget.
    pub fn budget(&self, component: Component) -> &ComponentBudget {
        &self.budgets[Self::index(component)]
    }

    /// Counts `tokens` against a component (always allowed).
    pub fn track(&mut self, component: Component, tokens: usize) {
        self.budgets[Self::index(component)].used += tokens;
    }

    /// Gives `tokens` back (content evicted or compressed).
    pub fn release(&mut self, component: Component, tokens: usize) {
        let budget = &mut self.budgets[Self::index(component)];
        budget.used = budget.used.saturating_sub(tokens);
    }

    /// Records one turn's total consumption, for the burn rate.
    pub fn record_turn(&mut self, tokens: usize) {
        self.burns.push_back(tokens);
        if self.burns.len() > BURN_WINDOW {
            self.burns.pop_front();
        }
    }

    /// Whether `tokens` more fit the component's budget.
    pub fn check_before_add(&self, component: Component, tokens: usize) -> Check {
        let budget = self.budget(component);
        let projected = budget.used + tokens;
        if projected >= budget.limit {
            Check::Blocked {
                component,
                used: budget.used,
                limit: budget.limit,
                excess: projected - budget.limit,
            }
        } else if projected >= budget.soft_limit() {
            Check::Warning {
                component,
                utilisation_after: projected as f64 / budget.limit as f64,
            }
        } else {
            Check::Allowed
        }
    }

    /// Mean tokens per turn over the last [`BURN_WINDOW`] turns.
    pub fn burn_rate(&self) -> f64 {
        if self.burns.is_empty() {
            return 0.0;
        }
        self.burns.iter().sum::<usize>() as f64 / self.burns.len() as f64
    }

    /// Tokens held by all components.
    pub fn total_used(&self) -> usize {
        self.budgets.iter().map(|b| b.used).sum()
    }

    /// Turns until the window is full at the burn rate (`None`: no burn).
    pub fn turns_until_exhausted(&self) -> Option<f64> {
        let rate = self.burn_rate();
        (rate > 0.0).then(|| self.max_tokens.saturating_sub(self.total_used()) as f64 / rate)
    }

    /// The full status.
    pub fn report(&self) -> BudgetReport {
        BudgetReport {
            components: Component::ALL.iter().copied().zip(self.budgets).collect(),
            total_used: self.total_used(),
            total_utilisation: self.total_used() as f64 / self.max_tokens.max(1) as f64,
            burn_rate: self.burn_rate(),
            turns_until_exhausted: self.turns_until_exhausted(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documents_example() {
        let mut budgets = BudgetManager::new(128_000, Allocation::default());
        budgets.track(Component::SystemPrompt, 5_000);
        budgets.track(Component::ToolDefinitions, 3_000);
        budgets.track(Component::MessageHistory, 45_000);
        assert_eq!(budgets.budget(Component::ToolResults).limit, 15_360);
        assert_eq!(
            budgets.check_before_add(Component::ToolResults, 8_000),
            Check::Allowed
        );
        assert!(matches!(
            budgets.check_before_add(Component::ToolResults, 13_000),
            Check::Warning { .. }
        ));
        assert_eq!(
            budgets.check_before_add(Component::ToolResults, 16_000),
            Check::Blocked {
                component: Component::ToolResults,
                used: 0,
                limit: 15_360,
                excess: 640
            }
        );
        for turn in [2_000, 3_500, 2_800, 5_200, 3_100] {
            budgets.record_turn(turn);
        }
        assert!((budgets.burn_rate() - 3_320.0).abs() < 1e-9);
        let left = budgets.turns_until_exhausted().unwrap();
        assert!((left - 75_000.0 / 3_320.0).abs() < 1e-9, "{left}");
        let report = budgets.report();
        assert_eq!(report.total_used, 53_000);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["components"][2][0], "message_history");
        budgets.release(Component::MessageHistory, 50_000);
        assert_eq!(budgets.budget(Component::MessageHistory).used, 0);
    }

    #[test]
    fn allocations_are_checked() {
        assert!(Allocation::new([0.06, 0.04, 0.65, 0.12, 0.08, 0.05]).is_ok());
        assert_eq!(
            Allocation::new([0.5, 0.5, 0.5, 0.0, 0.0, 0.0]),
            Err(AllocationError::OverOne(1.5))
        );
        assert!(matches!(
            Allocation::new([-0.1, 0.0, 0.0, 0.0, 0.0, 0.0]),
            Err(AllocationError::OutOfRange(Component::SystemPrompt, _))
        ));
    }
}
