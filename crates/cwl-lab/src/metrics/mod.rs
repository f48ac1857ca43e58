//! What each policy's requests cost and lose.
//!
//! Per policy and file: request tokens (mean, p95, max, share over the
//! budget), evictions per request (messages of the previous request that
//! this one dropped or rewrote), prefix-cache behaviour under the
//! provider's rules, cost in dollars, and reference retention: anchors the
//! model used at a call (in its text or tool-call arguments) that had
//! appeared earlier in the transcript are *at risk*; those absent from the
//! request the policy built are *lost*. `lost_anchor_rate` is lost / at
//! risk; `loss_free_share` is the share of requests with at least one
//! anchor at risk that lost none (an LLM-free analogue of the Self-GC
//! paper's "no-impact" rate).

pub mod anchors;
pub mod cache;
pub mod cost;
pub mod tokens;

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::policy::{Request, View};
use crate::transcript::Entry;
use anchors::AnchorId;
use cache::{CacheModel, CacheUse};
use cost::Pricing;

/// What the replay knows about one model call, the same for every policy.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// When the request was sent, if the log says.
    pub time: Option<DateTime<Utc>>,
    /// Tokens the model generated (the logged assistant message).
    pub output_tokens: usize,
    /// Anchors the model used that appeared earlier in the transcript.
    pub at_risk: &'a [AnchorId],
}

/// Mergeable per-policy counts (one file, or an aggregate).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Request tokens, per request.
    pub tokens: Vec<u32>,
    /// Evictions, per request.
    pub evictions: Vec<u32>,
    /// Requests over the budget.
    pub over_budget: u64,
    /// All prompt tokens sent, side calls included.
    pub input_tokens: u64,
    /// Tokens shared with the previous request's prefix.
    pub reused_tokens: u64,
    /// Tokens billed as cache reads.
    pub cache_read_tokens: u64,
    /// Tokens billed as cache writes.
    pub cache_write_tokens: u64,
    /// Tokens generated, side calls included.
    pub output_tokens: u64,
    /// Extra model calls (summaries).
    pub side_calls: u64,
    /// Dollars.
    pub cost_usd: f64,
    /// Anchors at risk, summed over requests.
    pub anchors_at_risk: u64,
    /// Anchors lost, summed over requests.
    pub anchors_lost: u64,
    /// Requests with at least one anchor at risk.
    pub requests_at_risk: u64,
    /// Of those, requests that lost none.
    pub requests_loss_free: u64,
    /// Requests the policy itself reported over budget (engine only).
    pub budget_unmet: Option<u64>,
}

impl Stats {
    /// Adds another file's counts.
    pub fn merge(&mut self, other: &Stats) {
        self.tokens.extend_from_slice(&other.tokens);
        self.evictions.extend_from_slice(&other.evictions);
        self.over_budget += other.over_budget;
        self.input_tokens += other.input_tokens;
        self.reused_tokens += other.reused_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.output_tokens += other.output_tokens;
        self.side_calls += other.side_calls;
        self.cost_usd += other.cost_usd;
        self.anchors_at_risk += other.anchors_at_risk;
        self.anchors_lost += other.anchors_lost;
        self.requests_at_risk += other.requests_at_risk;
        self.requests_loss_free += other.requests_loss_free;
        self.budget_unmet = match (self.budget_unmet, other.budget_unmet) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
    }

    /// The figures reported.
    pub fn summary(&self) -> Summary {
        let requests = self.tokens.len();
        let share = |n: u64, d: u64| {
            if d == 0 {
                0.0
            } else {
                round(n as f64 / d as f64, 6)
            }
        };
        let evictions_total: u64 = self.evictions.iter().map(|e| u64::from(*e)).sum();
        Summary {
            requests: requests as u64,
            tokens_mean: round(tokens::mean(&self.tokens), 1),
            tokens_p95: tokens::percentile(&self.tokens, 95.0),
            tokens_max: self.tokens.iter().copied().max().unwrap_or(0),
            over_budget_share: share(self.over_budget, requests as u64),
            evictions: share(evictions_total, requests as u64),
            evictions_total,
            input_tokens: self.input_tokens,
            prefix_reused_tokens: self.reused_tokens,
            cache_read_tokens: self.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens,
            output_tokens: self.output_tokens,
            side_calls: self.side_calls,
            cost_usd: round(self.cost_usd, 6),
            anchors_at_risk: self.anchors_at_risk,
            anchors_lost: self.anchors_lost,
            lost_anchor_rate: share(self.anchors_lost, self.anchors_at_risk),
            requests_at_risk: self.requests_at_risk,
            loss_free_share: if self.requests_at_risk == 0 {
                1.0
            } else {
                share(self.requests_loss_free, self.requests_at_risk)
            },
            budget_unmet: self.budget_unmet,
        }
    }
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

/// The reported figures of one policy (`M` in the JSON report).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Model calls replayed.
    pub requests: u64,
    /// Mean request size in tokens (tool definitions included).
    pub tokens_mean: f64,
    /// 95th percentile request size (nearest rank).
    pub tokens_p95: u32,
    /// Largest request.
    pub tokens_max: u32,
    /// Share of requests over the budget.
    pub over_budget_share: f64,
    /// Evictions per request: messages of the previous request dropped or
    /// rewritten in this one.
    pub evictions: f64,
    /// Evictions over all requests.
    pub evictions_total: u64,
    /// Prompt tokens sent, side calls included.
    pub input_tokens: u64,
    /// Tokens repeating the previous request's prefix.
    pub prefix_reused_tokens: u64,
    /// Tokens billed as cache reads.
    pub cache_read_tokens: u64,
    /// Tokens billed as cache writes.
    pub cache_write_tokens: u64,
    /// Tokens generated, side calls included.
    pub output_tokens: u64,
    /// Extra model calls the policy made (summaries).
    pub side_calls: u64,
    /// Cost in US dollars for the chosen model.
    pub cost_usd: f64,
    /// Anchors used that appeared earlier, summed over requests.
    pub anchors_at_risk: u64,
    /// Of those, anchors absent from the request.
    pub anchors_lost: u64,
    /// anchors_lost / anchors_at_risk.
    pub lost_anchor_rate: f64,
    /// Requests with at least one anchor at risk.
    pub requests_at_risk: u64,
    /// Share of those requests that lost no anchor (1 when none was at risk).
    pub loss_free_share: f64,
    /// Requests the policy itself reported over budget (the engine only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_unmet: Option<u64>,
}

/// Measures one policy's requests on one file.
#[derive(Debug)]
pub struct Recorder {
    budget: usize,
    pricing: Arc<Pricing>,
    cache: CacheModel,
    previous: Vec<u64>,
    stats: Stats,
}

impl Recorder {
    /// A recorder for requests under `budget`, costed with `pricing`.
    pub fn new(budget: usize, pricing: Arc<Pricing>) -> Self {
        Recorder {
            budget,
            cache: CacheModel::new(pricing.rules),
            pricing,
            previous: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// The counts so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Takes the counts.
    pub fn into_stats(self) -> Stats {
        self.stats
    }

    fn bill(&mut self, used: CacheUse, output: usize) {
        let s = &mut self.stats;
        s.input_tokens += (used.uncached + used.read + used.write) as u64;
        s.reused_tokens += used.reused as u64;
        s.cache_read_tokens += used.read as u64;
        s.cache_write_tokens += used.write as u64;
        s.output_tokens += output as u64;
        s.cost_usd += self
            .pricing
            .cost(used.uncached, used.read, used.write, output);
    }

    /// Records one request (and the side calls made before it).
    pub fn record(&mut self, request: &Request, call: &Call<'_>, tools_tokens: usize) {
        for side in &request.side_calls {
            let used = self.cache.pieces(tools_tokens, &side.input, call.time);
            self.bill(used, side.output_tokens);
            self.stats.side_calls += 1;
        }
        let (tokens, used, evictions, lost) = match &request.view {
            View::Full { tokens } => {
                let total = tools_tokens + tokens;
                (total, self.cache.full(total, call.time), 0, 0)
            }
            View::Pieces(pieces) => {
                let total = tools_tokens + pieces.iter().map(|p| p.tokens()).sum::<usize>();
                let used = self.cache.pieces(tools_tokens, pieces, call.time);
                let evictions = self.evictions(pieces);
                (total, used, evictions, lost_anchors(pieces, call.at_risk))
            }
        };
        self.bill(used, call.output_tokens);
        let s = &mut self.stats;
        s.tokens.push(u32::try_from(tokens).unwrap_or(u32::MAX));
        s.evictions
            .push(u32::try_from(evictions).unwrap_or(u32::MAX));
        if tokens > self.budget {
            s.over_budget += 1;
        }
        if !call.at_risk.is_empty() {
            s.requests_at_risk += 1;
            s.anchors_at_risk += call.at_risk.len() as u64;
            s.anchors_lost += lost as u64;
            if lost == 0 {
                s.requests_loss_free += 1;
            }
        }
        if let Some(met) = request.budget_met {
            *s.budget_unmet.get_or_insert(0) += u64::from(!met);
        }
    }

    fn evictions(&mut self, pieces: &[Arc<Entry>]) -> usize {
        let current: HashSet<u64> = pieces.iter().map(|p| p.id()).collect();
        let evicted = self
            .previous
            .iter()
            .filter(|id| !current.contains(id))
            .count();
        self.previous = pieces.iter().map(|p| p.id()).collect();
        evicted
    }
}

/// How many of `at_risk` no piece holds.
pub fn lost_anchors(pieces: &[Arc<Entry>], at_risk: &[AnchorId]) -> usize {
    let mut missing: Vec<AnchorId> = at_risk.to_vec();
    for piece in pieces.iter().rev() {
        if missing.is_empty() {
            break;
        }
        missing.retain(|a| !piece.has_anchor(*a));
    }
    missing.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Lab;
    use cwl::{Estimate, Message};

    #[test]
    fn records_tokens_evictions_losses_and_cost() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let a = lab.entry(Message::user("look at src/alpha.rs ".repeat(300)));
        let b = lab.entry(Message::user("and src/beta.rs ".repeat(300)));
        let alpha = lab.anchors_mut().intern("src/alpha.rs");
        let beta = lab.anchors_mut().intern("src/beta.rs");
        let pricing = Arc::new(cost::lookup("claude-sonnet-4-5").unwrap());
        let mut recorder = Recorder::new(2000, Arc::clone(&pricing));
        let call = Call {
            time: None,
            output_tokens: 10,
            at_risk: &[alpha],
        };
        recorder.record(&Request::pieces(vec![a.clone(), b.clone()]), &call, 0);
        let call = Call {
            time: None,
            output_tokens: 10,
            at_risk: &[alpha, beta],
        };
        recorder.record(&Request::pieces(vec![b.clone()]), &call, 0);
        let s = recorder.stats().summary();
        assert_eq!(s.requests, 2);
        assert_eq!(s.tokens_max as usize, a.tokens() + b.tokens());
        assert_eq!(s.over_budget_share, 0.5);
        assert_eq!(s.evictions_total, 1);
        assert_eq!(s.evictions, 0.5);
        assert_eq!(s.anchors_at_risk, 3);
        assert_eq!(s.anchors_lost, 1);
        assert_eq!(s.requests_at_risk, 2);
        assert_eq!(s.loss_free_share, 0.5);
        assert_eq!(
            s.cache_read_tokens, 0,
            "the second request shares no prefix"
        );
        let first = a.tokens() + b.tokens();
        let expected = pricing.cost(0, 0, first, 10) + pricing.cost(0, 0, b.tokens(), 10);
        assert!((s.cost_usd - round(expected, 6)).abs() < 1e-9);
        assert_eq!(s.budget_unmet, None);
    }

    #[test]
    fn merging_keeps_every_request() {
        let mut a = Stats {
            tokens: vec![1, 2],
            evictions: vec![0, 1],
            budget_unmet: Some(1),
            ..Stats::default()
        };
        let b = Stats {
            tokens: vec![3],
            evictions: vec![2],
            ..Stats::default()
        };
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.requests, 3);
        assert_eq!(s.tokens_max, 3);
        assert_eq!(s.evictions_total, 3);
        assert_eq!(s.budget_unmet, Some(1));
        assert_eq!(s.loss_free_share, 1.0);
    }
}
