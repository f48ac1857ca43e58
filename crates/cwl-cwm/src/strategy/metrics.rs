//! Health of a [`Cwm`] window (section 7 of the document): utilisation,
//! eviction rate, compression ratio, tool-result bloat, burn rate, the
//! component budgets, alerts and trends. Everything here is computed
//! from the saved state (samples are taken as responses are pushed), so a
//! restored or replayed session reports the same figures.

use cwl::Message;
use cwl::strategy::Strategy;
use serde::{Deserialize, Serialize};

use super::{CRITICAL, Cwm, cascade::CompressionStats, zone_name};
use crate::budgets::{BudgetManager, BudgetReport, Check, Component};

/// Samples kept for trends and rates.
pub const SAMPLES: usize = 50;
/// Turns the rates are taken over.
pub const RATE_TURNS: usize = 5;
/// Evicted blocks per turn past which eviction looks undersized.
pub const EVICTION_RATE_ALERT: f64 = 5.0;
/// A compression ratio under this is a warning once a few summaries exist.
pub const RATIO_ALERT: f64 = 2.0;
/// A mean judged fidelity under this is a warning.
pub const FIDELITY_ALERT: f64 = 0.75;
/// Tool results over this share of the context are bloat.
pub const BLOAT_ALERT: f64 = 0.30;

/// The window as a response came in.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Responses before it.
    pub turn: u64,
    /// Prompt tokens then.
    pub tokens: usize,
    /// Tokens pushed so far.
    pub pushed: u64,
    /// Blocks evicted so far.
    pub evicted: u64,
}

/// Everything health knows about the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// Prompt tokens over the budget.
    pub utilisation: f64,
    /// Its zone.
    pub zone: String,
    /// Evicted blocks per response over the last turns.
    pub eviction_rate: f64,
    /// Eviction passes that changed the view.
    pub eviction_passes: u64,
    /// Tokens replaced over the tokens of their summaries (`None`: no
    /// summary yet).
    pub compression_ratio: Option<f64>,
    /// Tool-result tokens over the prompt's.
    pub tool_result_bloat: f64,
    /// The judge's mean fidelity score over the recent summaries (`None`:
    /// none judged).
    pub fidelity: Option<f64>,
    /// Tokens pushed per response over the last turns.
    pub burn_rate: f64,
    /// What the cascade asked and got.
    pub compression: CompressionStats,
    /// The component budgets.
    pub budgets: BudgetReport,
    /// Utilisation at the last responses, oldest first.
    pub trend: Vec<f64>,
    /// `rising`, `falling` or `steady` over those.
    pub direction: String,
    /// Warnings and the critical alert.
    pub alerts: Vec<String>,
}

impl Cwm {
    /// Records a sample as a response comes in.
    pub(super) fn sample(&mut self) {
        self.samples.push_back(Sample {
            turn: self.turn,
            tokens: self.tokens(),
            pushed: self.pushed_tokens,
            evicted: self.evicted_blocks,
        });
        while self.samples.len() > SAMPLES {
            self.samples.pop_front();
        }
    }

    /// The component budgets filled from the view.
    pub fn budget_report(&self) -> BudgetReport {
        self.budgets().report()
    }

    /// Whether `tokens` more fit `component`'s budget now (section 5's
    /// `check_before_add`): the cascade summarises tool results once they
    /// pass their soft limit, and refuses notes that would pass the memory
    /// budget.
    pub fn check_before_add(&self, component: Component, tokens: usize) -> Check {
        self.budgets().check_before_add(component, tokens)
    }

    /// The budget manager of the window, its components filled from the
    /// view and its burn rate from the recent responses.
    fn budgets(&self) -> BudgetManager {
        let mut budgets = BudgetManager::new(self.meter.budget(), self.compression.allocation);
        budgets.track(Component::ToolDefinitions, self.shadow.tools_tokens());
        if let Some((_, tokens)) = &self.notes {
            budgets.track(Component::MemoryInjection, *tokens);
        }
        for entry in &self.entries {
            let component = match entry.message {
                _ if entry.summary => Component::MemoryInjection,
                Message::System { .. } => Component::SystemPrompt,
                Message::ToolResult(_) => Component::ToolResults,
                Message::User { .. } | Message::Assistant { .. } => Component::MessageHistory,
            };
            budgets.track(component, entry.tokens);
        }
        let recent: Vec<&Sample> = self.samples.iter().rev().take(RATE_TURNS + 1).collect();
        for pair in recent.windows(2).rev() {
            budgets.record_turn((pair[0].pushed - pair[1].pushed) as usize);
        }
        budgets
    }

    /// The window's health now.
    pub fn metrics(&self) -> Metrics {
        let utilisation = self.utilisation();
        let recent: Vec<&Sample> = self.samples.iter().rev().take(RATE_TURNS + 1).collect();
        let (eviction_rate, burn_rate) = match (recent.first(), recent.last()) {
            (Some(newest), Some(oldest)) if newest.turn > oldest.turn => {
                let turns = (newest.turn - oldest.turn) as f64;
                (
                    (self.evicted_blocks - oldest.evicted) as f64 / turns,
                    (newest.pushed - oldest.pushed) as f64 / turns,
                )
            }
            _ => (0.0, 0.0),
        };
        let stats = self.jobs.stats.clone();
        let compression_ratio = (stats.summary_tokens > 0)
            .then(|| stats.original_tokens as f64 / stats.summary_tokens as f64);
        let results: usize = self
            .entries
            .iter()
            .filter(|entry| matches!(entry.message, Message::ToolResult(_)))
            .map(|entry| entry.tokens)
            .sum();
        let tool_result_bloat = results as f64 / self.total.max(1) as f64;
        let budget = self.meter.budget().max(1) as f64;
        let trend: Vec<f64> = self
            .samples
            .iter()
            .rev()
            .take(10)
            .rev()
            .map(|sample| sample.tokens as f64 / budget)
            .collect();
        let direction = match (trend.first(), trend.last()) {
            (Some(first), Some(last)) if last - first > 0.05 => "rising",
            (Some(first), Some(last)) if first - last > 0.05 => "falling",
            _ => "steady",
        };
        let mut alerts = Vec::new();
        if utilisation > CRITICAL {
            alerts.push(format!(
                "critical: the context is at {:.0}% of the budget (over {:.0}%)",
                utilisation * 100.0,
                CRITICAL * 100.0
            ));
        }
        if eviction_rate > EVICTION_RATE_ALERT {
            alerts.push(format!(
                "warning: {eviction_rate:.1} blocks evicted per call (over {EVICTION_RATE_ALERT}); the budget may be too small for this task"
            ));
        }
        if let Some(ratio) = compression_ratio.filter(|&r| r < RATIO_ALERT && stats.accepted >= 3) {
            alerts.push(format!(
                "warning: summaries compress only {ratio:.1}× (under {RATIO_ALERT}×)"
            ));
        }
        if tool_result_bloat > BLOAT_ALERT {
            alerts.push(format!(
                "warning: tool results take {:.0}% of the context (over {:.0}%)",
                tool_result_bloat * 100.0,
                BLOAT_ALERT * 100.0
            ));
        }
        let budgets = self.budget_report();
        for (component, budget) in &budgets.components {
            let watched = matches!(
                component,
                Component::MessageHistory | Component::ToolResults | Component::MemoryInjection
            );
            if watched && budget.used >= budget.limit {
                alerts.push(format!(
                    "warning: {} take {} tokens, over their budget of {}",
                    match component {
                        Component::MessageHistory => "the messages",
                        Component::ToolResults => "tool results",
                        _ => "notes and summaries",
                    },
                    budget.used,
                    budget.limit
                ));
            }
        }
        let fidelity = (!stats.fidelity.is_empty())
            .then(|| stats.fidelity.iter().sum::<f64>() / stats.fidelity.len() as f64);
        if let Some(score) = fidelity.filter(|&f| f < FIDELITY_ALERT) {
            alerts.push(format!(
                "warning: compression fidelity {score:.2} (under {FIDELITY_ALERT}): summaries lose key facts"
            ));
        }
        let lost = stats.failed + stats.rejected;
        if lost >= 3 && lost * 2 > stats.asked {
            alerts.push(format!(
                "warning: summaries are not coming: {} failed and {} refused of {} asked (eviction carries the budget)",
                stats.failed, stats.rejected, stats.asked
            ));
        }
        Metrics {
            utilisation,
            zone: zone_name(self.thresholds.zone(utilisation)).to_string(),
            eviction_rate,
            eviction_passes: self.evictions,
            compression_ratio,
            tool_result_bloat,
            fidelity,
            burn_rate,
            compression: stats,
            budgets,
            trend,
            direction: direction.to_string(),
            alerts,
        }
    }
}
