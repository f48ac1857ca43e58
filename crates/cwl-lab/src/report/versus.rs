//! CWL against the policies that held the budget: for each measure the
//! issue judges by (requests loss-free by anchors and by content, cost),
//! the best of the other policies that never sent a request over τ, so a
//! reader sees at once where CWL is ahead and where it is not. `none`
//! never holds a budget; a policy that went over τ even once is left out,
//! since keeping more by ignoring the budget is no achievement.

use serde::Serialize;

use crate::metrics::{Stats, Summary};
use crate::policy::PolicyKind;

/// One measure: CWL's figure, the best other budget-holding figure and the
/// policies that reached it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Standing {
    /// CWL's figure.
    pub cwl: f64,
    /// The best figure among the other budget-holding policies.
    pub best: f64,
    /// The policies with that figure, in the order they were replayed.
    pub by: Vec<&'static str>,
    /// Whether CWL is at least as good (higher shares, lower cost).
    pub ahead: bool,
}

/// CWL against the other budget-holding policies of one aggregate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Versus {
    /// Whether CWL itself held the budget on every request.
    pub cwl_held_budget: bool,
    /// Share of at-risk requests with no anchor lost.
    pub loss_free: Standing,
    /// Share of at-risk requests with all the content they rely on.
    pub content_loss_free: Standing,
    /// Dollars, when every compared policy's cost is known.
    pub cost: Option<Standing>,
}

impl Versus {
    /// The comparison, or `None` when CWL was not replayed or no other
    /// policy held the budget.
    pub fn of(aggregate: &[(PolicyKind, Stats)]) -> Option<Versus> {
        let summaries: Vec<(PolicyKind, Summary)> = aggregate
            .iter()
            .map(|(kind, stats)| (*kind, stats.summary()))
            .collect();
        let cwl = &summaries.iter().find(|(k, _)| *k == PolicyKind::Cwl)?.1;
        let held: Vec<&(PolicyKind, Summary)> = summaries
            .iter()
            .filter(|(k, s)| {
                !matches!(k, PolicyKind::Cwl | PolicyKind::None) && s.over_budget_share == 0.0
            })
            .collect();
        if held.is_empty() {
            return None;
        }
        let standing = |value: &dyn Fn(&Summary) -> f64, higher_is_better: bool| {
            let better = |a: f64, b: f64| if higher_is_better { a > b } else { a < b };
            let best = held
                .iter()
                .map(|(_, s)| value(s))
                .fold(None, |best: Option<f64>, v| match best {
                    Some(b) if !better(v, b) => Some(b),
                    _ => Some(v),
                })
                .expect("held is not empty");
            let by = held
                .iter()
                .filter(|(_, s)| value(s) == best)
                .map(|(k, _)| k.name())
                .collect();
            let mine = value(cwl);
            Standing {
                cwl: mine,
                best,
                by,
                ahead: !better(best, mine),
            }
        };
        let costs_known = cwl.cost_usd.is_some() && held.iter().all(|(_, s)| s.cost_usd.is_some());
        Some(Versus {
            cwl_held_budget: cwl.over_budget_share == 0.0,
            loss_free: standing(&|s| s.loss_free_share, true),
            content_loss_free: standing(&|s| s.content_loss_free_share, true),
            cost: costs_known.then(|| standing(&|s| s.cost_usd.unwrap_or(0.0), false)),
        })
    }

    /// One line for the text report.
    pub fn line(&self) -> String {
        let share = |s: &Standing, what: &str| {
            format!(
                "{what} {:.1}% vs {:.1}% ({}){}",
                s.cwl * 100.0,
                s.best * 100.0,
                s.by.join("/"),
                if s.ahead { "" } else { " behind" }
            )
        };
        let mut parts = vec![
            share(&self.loss_free, "loss-free"),
            share(&self.content_loss_free, "content loss-free"),
        ];
        match &self.cost {
            Some(c) => parts.push(format!(
                "cost ${:.2} vs ${:.2} ({}){}",
                c.cwl,
                c.best,
                c.by.join("/"),
                if c.ahead { "" } else { " behind" }
            )),
            None => parts.push("cost unknown".to_string()),
        }
        let behind = [
            Some(&self.loss_free),
            Some(&self.content_loss_free),
            self.cost.as_ref(),
        ]
        .into_iter()
        .flatten()
        .filter(|s| !s.ahead)
        .count();
        let verdict = match (self.cwl_held_budget, behind) {
            (false, _) => "; cwl itself went over τ".to_string(),
            (true, 0) => "; cwl ahead or even on each".to_string(),
            (true, n) => format!("; cwl behind on {n}"),
        };
        format!(
            "cwl against the best policy that held the budget: {}{verdict}\n",
            parts.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A policy's totals over 10 requests: `over` of them over τ, `free` of
    /// 10 at-risk requests loss-free by anchors, `content` by content.
    fn stats(over: u64, free: u64, content: u64, cost: f64) -> Stats {
        Stats {
            tokens: vec![1; 10],
            over_budget: over,
            cost_usd: cost,
            requests_at_risk: 10,
            requests_loss_free: free,
            content_requests_at_risk: 10,
            content_requests_loss_free: content,
            ..Stats::default()
        }
    }

    #[test]
    fn the_best_of_the_policies_that_held_the_budget_is_the_bar() {
        let aggregate = vec![
            (PolicyKind::Cwl, stats(0, 9, 7, 1.0)),
            (PolicyKind::None, stats(5, 10, 10, 0.5)),
            (PolicyKind::Truncate, stats(0, 8, 8, 3.0)),
            (PolicyKind::Lru, stats(0, 6, 8, 2.0)),
            (PolicyKind::ToolPrune, stats(1, 10, 10, 0.9)),
        ];
        let versus = Versus::of(&aggregate).unwrap();
        assert!(versus.cwl_held_budget);
        assert_eq!(
            versus.loss_free,
            Standing {
                cwl: 0.9,
                best: 0.8,
                by: vec!["truncate"],
                ahead: true
            },
            "none and tool-prune went over τ: they set no bar"
        );
        assert_eq!(versus.content_loss_free.by, vec!["truncate", "lru"]);
        assert!(!versus.content_loss_free.ahead);
        let cost = versus.cost.as_ref().unwrap();
        assert_eq!(
            (cost.best, cost.by.clone(), cost.ahead),
            (2.0, vec!["lru"], true)
        );
        let line = versus.line();
        assert!(
            line.contains("content loss-free 70.0% vs 80.0% (truncate/lru) behind"),
            "{line}"
        );
        assert!(line.ends_with("cwl behind on 1\n"), "{line}");
    }

    #[test]
    fn a_tie_is_not_behind_and_no_bar_means_no_comparison() {
        let tie = vec![
            (PolicyKind::Cwl, stats(0, 9, 9, 1.0)),
            (PolicyKind::Fifo, stats(0, 9, 9, 1.0)),
        ];
        assert!(
            Versus::of(&tie)
                .unwrap()
                .line()
                .contains("ahead or even on each")
        );
        let alone = vec![
            (PolicyKind::Cwl, stats(0, 9, 9, 1.0)),
            (PolicyKind::None, stats(3, 10, 10, 0.5)),
        ];
        assert_eq!(Versus::of(&alone), None);
        let without_cwl = vec![(PolicyKind::Fifo, stats(0, 9, 9, 1.0))];
        assert_eq!(Versus::of(&without_cwl), None);
    }

    #[test]
    fn cwl_over_budget_is_said_first() {
        let over = vec![
            (PolicyKind::Cwl, stats(1, 10, 10, 0.1)),
            (PolicyKind::Fifo, stats(0, 9, 9, 1.0)),
        ];
        let line = Versus::of(&over).unwrap().line();
        assert!(line.ends_with("; cwl itself went over τ\n"), "{line}");
    }
}
