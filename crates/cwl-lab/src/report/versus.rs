//! CWL against the policies that held the budget: for each measure the
//! issue judges by (requests loss-free by anchors and by content, cost),
//! the best of the other policies that never sent a request over τ, so a
//! reader sees at once where CWL is ahead and where it is not. `none`
//! never holds a budget; a policy that went over τ even once is left out,
//! since keeping more by ignoring the budget is no achievement.
//!
//! A cheaper policy may owe its cost to keeping less: the comparison also
//! prices CWL against only the budget-holding policies that kept at least
//! its share on both retention measures (the frontier `cwl sweep` plots).
//!
//! A share a few requests apart may be chance: for each retention measure
//! the comparison also counts the requests only one of CWL and the best
//! policy lost, with an exact two-sided sign test on them, so a reader can
//! tell a real gap from one probe more or less.

use serde::Serialize;

use crate::metrics::{RequestLoss, Stats, Summary};
use crate::policy::PolicyKind;

use super::table::thousands;

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
    /// For a retention share: the requests where CWL and the first of
    /// `by` disagree (absent for cost, or when their requests differ).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
    /// For cost: the mean request of CWL and of the first of `by`, in
    /// tokens, since a policy that sends less is cheaper for that alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_tokens: Option<MeanTokens>,
}

/// The mean request of CWL and of the best policy on a measure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanTokens {
    /// CWL's.
    pub cwl: f64,
    /// The best policy's.
    pub best: f64,
}

/// The requests only one of two policies lost, replayed on the same logs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Paired {
    /// Requests CWL lost and the other policy kept.
    pub cwl_alone: u64,
    /// Requests the other policy lost and CWL kept.
    pub other_alone: u64,
    /// Two-sided exact sign test: the chance of a split at least this
    /// uneven were each policy as likely to lose any of these requests
    /// (1 when there are none).
    pub p_value: f64,
}

impl Paired {
    /// Compares two policies' per-request losses by `lost`; `None` when
    /// they did not replay the same requests.
    fn of(
        cwl: &[RequestLoss],
        other: &[RequestLoss],
        lost: fn(&RequestLoss) -> bool,
    ) -> Option<Paired> {
        if cwl.len() != other.len() || cwl.is_empty() {
            return None;
        }
        let (mut cwl_alone, mut other_alone) = (0, 0);
        for (mine, theirs) in cwl.iter().zip(other) {
            match (lost(mine), lost(theirs)) {
                (true, false) => cwl_alone += 1,
                (false, true) => other_alone += 1,
                _ => {}
            }
        }
        Some(Paired {
            cwl_alone,
            other_alone,
            p_value: sign_test(cwl_alone, other_alone),
        })
    }
}

/// Two-sided exact binomial test of `a` against `b` at one half.
fn sign_test(a: u64, b: u64) -> f64 {
    let n = a + b;
    let k = a.min(b);
    let mut log_term = -(n as f64) * std::f64::consts::LN_2;
    let mut tail = 0.0;
    for i in 0..=k {
        tail += log_term.exp();
        log_term += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    (2.0 * tail).min(1.0)
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
    /// Dollars against the cheapest budget-holding policy that kept at
    /// least CWL's share on both retention measures; `None` when costs are
    /// unknown or no policy kept as much.
    pub as_retentive: Option<Standing>,
    /// Whether a budget-holding policy kept at least CWL's share on both
    /// retention measures for less: CWL off the Pareto front of cost and
    /// retention, the bar it is judged by.
    pub dominated: bool,
    /// Points CWL trails the best budget-holding policy by on its worse
    /// retention measure (0 when even or ahead on both); the bar is 1.
    pub retention_gap_points: f64,
}

/// Points a retention share may trail the best budget-holding policy's.
pub const RETENTION_SLACK_POINTS: f64 = 1.0;

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
        let losses = |kind: PolicyKind| {
            aggregate
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or(&[][..], |(_, stats)| &stats.losses[..])
        };
        let standing = |value: &dyn Fn(&Summary) -> f64,
                        higher_is_better: bool,
                        lost: Option<fn(&RequestLoss) -> bool>| {
            let better = |a: f64, b: f64| if higher_is_better { a > b } else { a < b };
            let best = held
                .iter()
                .map(|(_, s)| value(s))
                .fold(None, |best: Option<f64>, v| match best {
                    Some(b) if !better(v, b) => Some(b),
                    _ => Some(v),
                })
                .expect("held is not empty");
            let best_kinds: Vec<PolicyKind> = held
                .iter()
                .filter(|(_, s)| value(s) == best)
                .map(|(k, _)| *k)
                .collect();
            let mine = value(cwl);
            let first = held
                .iter()
                .find(|(k, _)| *k == best_kinds[0])
                .map(|(_, s)| s);
            Standing {
                cwl: mine,
                best,
                by: best_kinds.iter().map(|k| k.name()).collect(),
                ahead: !better(best, mine),
                paired: lost.and_then(|lost| {
                    Paired::of(losses(PolicyKind::Cwl), losses(best_kinds[0]), lost)
                }),
                mean_tokens: lost.is_none().then_some(()).and(first).map(|s| MeanTokens {
                    cwl: cwl.tokens_mean,
                    best: s.tokens_mean,
                }),
            }
        };
        let costs_known = cwl.cost_usd.is_some() && held.iter().all(|(_, s)| s.cost_usd.is_some());
        let retentive: Vec<&(PolicyKind, Summary)> = held
            .iter()
            .copied()
            .filter(|(_, s)| {
                s.loss_free_share >= cwl.loss_free_share
                    && s.content_loss_free_share >= cwl.content_loss_free_share
            })
            .collect();
        let as_retentive = retentive
            .iter()
            .filter_map(|(kind, s)| Some((*kind, s.cost_usd?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|_| costs_known)
            .map(|(_, best)| {
                let mine = cwl.cost_usd.unwrap_or(0.0);
                Standing {
                    cwl: mine,
                    best,
                    by: retentive
                        .iter()
                        .filter(|(_, s)| s.cost_usd == Some(best))
                        .map(|(k, _)| k.name())
                        .collect(),
                    ahead: mine <= best,
                    paired: None,
                    mean_tokens: None,
                }
            });
        let loss_free = standing(&|s| s.loss_free_share, true, Some(|l| l.anchors));
        let content_loss_free = standing(&|s| s.content_loss_free_share, true, Some(|l| l.content));
        let retention_gap_points = [&loss_free, &content_loss_free]
            .iter()
            .map(|s| ((s.best - s.cwl) * 100.0).max(0.0))
            .fold(0.0, f64::max);
        Some(Versus {
            cwl_held_budget: cwl.over_budget_share == 0.0,
            loss_free,
            content_loss_free,
            cost: costs_known.then(|| standing(&|s| s.cost_usd.unwrap_or(0.0), false, None)),
            dominated: as_retentive.as_ref().is_some_and(|r| !r.ahead),
            as_retentive,
            retention_gap_points,
        })
    }

    /// One line for the text report.
    pub fn line(&self) -> String {
        let share = |s: &Standing, what: &str| {
            let paired = s.paired.map_or(String::new(), |p| {
                let chance = if p.p_value < 0.001 {
                    "p < 0.001".to_string()
                } else {
                    format!("p {:.3}", p.p_value)
                };
                format!(
                    " [lost by cwl alone {}, by {} alone {}, {chance}]",
                    p.cwl_alone, s.by[0], p.other_alone
                )
            });
            format!(
                "{what} {:.1}% vs {:.1}% ({}){}{paired}",
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
            Some(c) => {
                let means = match c.mean_tokens {
                    Some(m) if !c.ahead => format!(
                        "; mean request {} against cwl's {}",
                        thousands(m.best.round() as u64),
                        thousands(m.cwl.round() as u64)
                    ),
                    _ => String::new(),
                };
                parts.push(format!(
                    "cost ${:.2} vs ${:.2} ({}{means}){}",
                    c.cwl,
                    c.best,
                    c.by.join("/"),
                    if c.ahead { "" } else { " behind" }
                ))
            }
            None => parts.push("cost unknown".to_string()),
        }
        let frontier = match (&self.as_retentive, &self.cost) {
            (Some(r), _) => format!(
                "; against those that kept as much of both: ${:.2} vs ${:.2} ({}){}",
                r.cwl,
                r.best,
                r.by.join("/"),
                if r.ahead { "" } else { " behind" }
            ),
            (None, Some(_)) => "; no other policy that held the budget kept as much of both".into(),
            (None, None) => String::new(),
        };
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
            "cwl against the best policy that held the budget: {}{frontier}{verdict}; {}\n",
            parts.join(", "),
            self.bar()
        )
    }

    /// Whether CWL meets the bar: not dominated, and within
    /// [`RETENTION_SLACK_POINTS`] of the best holder on each retention
    /// measure.
    pub fn meets_bar(&self) -> bool {
        self.cwl_held_budget
            && !self.dominated
            && self.retention_gap_points <= RETENTION_SLACK_POINTS + 1e-9
    }

    fn bar(&self) -> String {
        if !self.cwl_held_budget {
            return "the bar missed: cwl did not hold the budget".to_string();
        }
        let dominance = match &self.as_retentive {
            Some(r) if self.dominated => format!("dominated by {}", r.by.join("/")),
            _ => "not dominated".to_string(),
        };
        let retention = if self.retention_gap_points <= RETENTION_SLACK_POINTS + 1e-9 {
            "retention within 1 point of the best".to_string()
        } else {
            format!(
                "retention {:.1} points behind the best",
                self.retention_gap_points
            )
        };
        format!(
            "the bar {}: {dominance}, {retention}",
            if self.meets_bar() { "met" } else { "missed" }
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
                ahead: true,
                paired: None,
                mean_tokens: None,
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
        assert!(
            line.ends_with(
                "cwl behind on 1; the bar missed: not dominated, retention 10.0 points behind the best\n"
            ),
            "{line}"
        );
        assert!(!versus.dominated && !versus.meets_bar());
        assert!((versus.retention_gap_points - 10.0).abs() < 1e-9);
    }

    #[test]
    fn a_cheaper_policy_shows_how_much_less_it_sends() {
        let sized = |tokens: u32, cost: f64| Stats {
            tokens: vec![tokens; 10],
            ..stats(0, 9, 9, cost)
        };
        let aggregate = vec![
            (PolicyKind::Cwl, sized(70_000, 2.0)),
            (PolicyKind::ClearToolUses, sized(48_000, 1.5)),
            (PolicyKind::Truncate, sized(76_000, 5.0)),
        ];
        let versus = Versus::of(&aggregate).unwrap();
        let cost = versus.cost.as_ref().unwrap();
        assert_eq!(
            cost.mean_tokens,
            Some(MeanTokens {
                cwl: 70_000.0,
                best: 48_000.0
            })
        );
        assert_eq!(
            versus.loss_free.mean_tokens, None,
            "retention shares have none"
        );
        let line = versus.line();
        assert!(
            line.contains(
                "cost $2.00 vs $1.50 (clear-tool-uses; mean request 48,000 against cwl's 70,000) behind"
            ),
            "{line}"
        );
        let ahead = vec![
            (PolicyKind::Cwl, sized(70_000, 1.0)),
            (PolicyKind::Truncate, sized(76_000, 5.0)),
        ];
        let line = Versus::of(&ahead).unwrap().line();
        assert!(line.contains("cost $1.00 vs $5.00 (truncate);"), "{line}");
    }

    #[test]
    fn cost_is_also_set_against_the_policies_that_kept_as_much() {
        // clear-tool-uses is cheapest but keeps less; of those that keep as
        // much of both, lru is the cheaper.
        let aggregate = vec![
            (PolicyKind::Cwl, stats(0, 9, 8, 2.0)),
            (PolicyKind::ClearToolUses, stats(0, 7, 4, 1.0)),
            (PolicyKind::Truncate, stats(0, 9, 9, 6.0)),
            (PolicyKind::Lru, stats(0, 10, 8, 5.0)),
            (PolicyKind::Fifo, stats(0, 10, 7, 3.0)),
        ];
        let versus = Versus::of(&aggregate).unwrap();
        assert!(!versus.cost.as_ref().unwrap().ahead);
        let frontier = versus.as_retentive.as_ref().unwrap();
        assert_eq!(
            (
                frontier.cwl,
                frontier.best,
                frontier.by.clone(),
                frontier.ahead
            ),
            (2.0, 5.0, vec!["lru"], true)
        );
        let line = versus.line();
        assert!(
            line.contains("; against those that kept as much of both: $2.00 vs $5.00 (lru);"),
            "{line}"
        );
        assert!(line.contains("cwl behind on 3; the bar missed"), "{line}");

        let alone = vec![
            (PolicyKind::Cwl, stats(0, 9, 8, 2.0)),
            (PolicyKind::ClearToolUses, stats(0, 7, 4, 1.0)),
        ];
        let versus = Versus::of(&alone).unwrap();
        assert_eq!(versus.as_retentive, None);
        assert!(
            versus
                .line()
                .contains("; no other policy that held the budget kept as much of both;"),
            "{}",
            versus.line()
        );
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

    /// Per-request losses: `content` lists the requests that lost content.
    fn losing(requests: usize, content: &[usize]) -> Vec<RequestLoss> {
        (0..requests)
            .map(|i| RequestLoss {
                anchors: false,
                content: content.contains(&i),
            })
            .collect()
    }

    #[test]
    fn the_requests_only_one_policy_lost_are_counted_and_tested() {
        let mut cwl = stats(0, 10, 7, 1.0);
        cwl.losses = losing(10, &[0, 1, 2]);
        let mut fifo = stats(0, 10, 8, 2.0);
        fifo.losses = losing(10, &[2, 3]);
        let versus = Versus::of(&[(PolicyKind::Cwl, cwl), (PolicyKind::Fifo, fifo)]).unwrap();
        let paired = versus.content_loss_free.paired.unwrap();
        assert_eq!((paired.cwl_alone, paired.other_alone), (2, 1));
        assert_eq!(paired.p_value, 1.0, "two against one is chance");
        assert_eq!(versus.loss_free.paired.unwrap().cwl_alone, 0);
        assert!(versus.cost.as_ref().unwrap().paired.is_none());
        assert!(
            versus
                .line()
                .contains("behind [lost by cwl alone 2, by fifo alone 1, p 1.000]"),
            "{}",
            versus.line()
        );
        let mut short = stats(0, 10, 8, 2.0);
        short.losses = losing(9, &[]);
        let mut cwl = stats(0, 10, 7, 1.0);
        cwl.losses = losing(10, &[0]);
        let versus = Versus::of(&[(PolicyKind::Cwl, cwl), (PolicyKind::Fifo, short)]).unwrap();
        assert!(
            versus.content_loss_free.paired.is_none(),
            "different requests"
        );
    }

    #[test]
    fn the_sign_test_is_exact() {
        assert_eq!(sign_test(0, 0), 1.0);
        assert!((sign_test(5, 0) - 0.0625).abs() < 1e-12);
        assert!((sign_test(2, 10) - 2.0 * 79.0 / 4096.0).abs() < 1e-12);
        assert_eq!(sign_test(0, 2_000), 0.0, "beyond doubt, and no NaN");
        assert_eq!(sign_test(500, 500), 1.0);
    }

    #[test]
    fn cwl_over_budget_is_said_first() {
        let over = vec![
            (PolicyKind::Cwl, stats(1, 10, 10, 0.1)),
            (PolicyKind::Fifo, stats(0, 9, 9, 1.0)),
        ];
        let line = Versus::of(&over).unwrap().line();
        assert!(
            line.ends_with(
                "; cwl itself went over τ; the bar missed: cwl did not hold the budget\n"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_bar_is_the_pareto_front_and_a_point_of_retention() {
        let bar = |cwl: Stats, other: Stats| {
            let versus =
                Versus::of(&[(PolicyKind::Cwl, cwl), (PolicyKind::Truncate, other)]).unwrap();
            (versus.dominated, versus.meets_bar(), versus.line())
        };
        let (dominated, met, line) = bar(stats(0, 9, 9, 3.0), stats(0, 9, 9, 2.0));
        assert!(dominated && !met);
        assert!(
            line.ends_with(
                "the bar missed: dominated by truncate, retention within 1 point of the best\n"
            ),
            "{line}"
        );
        let (dominated, met, line) = bar(stats(0, 9, 9, 1.0), stats(0, 10, 9, 2.0));
        assert!(!dominated && !met, "10 points behind on anchors: {line}");
        let (dominated, met, line) = bar(stats(0, 9, 9, 1.0), stats(0, 8, 9, 0.5));
        assert!(!dominated && met, "cheaper, but keeping less: {line}");
        assert!(
            line.ends_with("the bar met: not dominated, retention within 1 point of the best\n"),
            "{line}"
        );
    }
}
