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
//!
//! Content retention ([`content`]) asks the same of the content itself:
//! the lines a reply's edits and patches must match and the values it
//! quotes from tool outputs, held in text the log wrote (never in a
//! policy's residue, placeholder or summary). `content_loss_free_share` is
//! the share of requests with content at risk that lost none.
//!
//! `prune` is Self-GC's pruning rate (its paper, "Metrics"): per request
//! `1 − |C′|/|C|`, where `|C|` is the full history at that call (what
//! `none` sends, tool definitions included) and `|C′|` the request the
//! policy built, averaged over requests. 0 for `none`; a policy that
//! writes more than it removes would go negative.
//!
//! Every request is measured as the provider counts it ([`sent`]): for a
//! model that drops the reasoning of earlier user turns (OpenAI's
//! reasoning models before GPT-5.6, Anthropic's before Claude Opus 4.5 and
//! Sonnet 4.6; [`ReasoningScope`]), without it.
//!
//! `view_changes` is the share of requests, after a session's first, that
//! altered what the previous request sent: the previous request's messages
//! are not all at the head of this one, unchanged and in order (a prefix
//! break, what invalidates a prompt cache). Appending is no change; the
//! full history never changes; a side call (a summary) is not a request.

pub mod anchors;
pub mod cache;
pub mod content;
pub mod cost;
pub mod sent;
pub mod tokens;

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::calibrate::Calibration;
use crate::policy::{Request, View};
use crate::transcript::{Entry, Shown};
use anchors::AnchorId;
use cache::{CacheModel, CacheUse};
use content::Need;
use cost::Pricing;
use sent::ReasoningScope;

/// What the replay knows about one model call, the same for every policy.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// When the request was sent, if the log says.
    pub time: Option<DateTime<Utc>>,
    /// Tokens of the full history before the call as the provider counts
    /// it ([`sent`]), tool definitions excluded: what `none` sends, and
    /// the `|C|` of the prune rate.
    pub history_tokens: usize,
    /// Where the provider's view of the full history changed since the
    /// previous call other than by growing (tokens before the change, tool
    /// definitions excluded): the end of what `none` can read from cache.
    pub history_changed_at: Option<usize>,
    /// Tokens the model generated (the logged assistant message).
    pub output_tokens: usize,
    /// Anchors the model used that appeared earlier in the transcript.
    pub at_risk: &'a [AnchorId],
    /// Content the reply relies on that appeared earlier.
    pub content: &'a Need,
    /// The share of its cached prefix the log's provider read at this call
    /// (its cached tokens over what the rules let it read of the previous
    /// call's prompt; 1 when the log shows no caching): every policy reads
    /// that share of what it could,
    /// so the provider's misses (a cold cache, a partial implicit cache)
    /// cost each of them as they cost the log.
    pub cache_share: f64,
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
    /// Extra model calls (summaries, a strategy's answered side requests).
    pub side_calls: u64,
    /// A strategy's side requests not sent: the replay had no model.
    pub side_requests_skipped: u64,
    /// A strategy's side requests sent that failed.
    pub side_requests_failed: u64,
    /// Sum over requests of `1 − |C′|/|C|` (see the module docs).
    pub prune_sum: f64,
    /// Requests a judge gave a verdict on ([`crate::judge`]).
    pub judged: u64,
    /// Of those, judged to still support the logged reply.
    pub no_impact: u64,
    /// Of those judged, the judge said it was uncertain.
    pub judge_uncertain: u64,
    /// Judgments asked for that gave no verdict (an error, not Listing 3's
    /// JSON).
    pub judge_failed: u64,
    /// Dollars, over the requests whose model has a price.
    pub cost_usd: f64,
    /// Requests (side calls included) whose model has no known price.
    pub unpriced_requests: u64,
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
    /// Content lines and values at risk, summed over requests.
    pub content_at_risk: u64,
    /// Of those, absent from the request's logged text.
    pub content_lost: u64,
    /// Requests with content at risk.
    pub content_requests_at_risk: u64,
    /// Of those, requests that lost none.
    pub content_requests_loss_free: u64,
    /// Requests that had a previous request to compare with.
    pub view_compared: u64,
    /// Of those, requests that altered what the previous one sent.
    pub view_changes: u64,
    /// Per request, what it lost: policies replayed on the same logs can
    /// then be compared request by request ([`crate::report::versus`]).
    pub losses: Vec<RequestLoss>,
}

/// What one request lost, by each retention measure (`false` when nothing
/// was at risk).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestLoss {
    /// It lost an anchor at risk.
    pub anchors: bool,
    /// It lost content at risk.
    pub content: bool,
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
        self.side_requests_skipped += other.side_requests_skipped;
        self.side_requests_failed += other.side_requests_failed;
        self.prune_sum += other.prune_sum;
        self.judged += other.judged;
        self.no_impact += other.no_impact;
        self.judge_uncertain += other.judge_uncertain;
        self.judge_failed += other.judge_failed;
        self.cost_usd += other.cost_usd;
        self.unpriced_requests += other.unpriced_requests;
        self.anchors_at_risk += other.anchors_at_risk;
        self.anchors_lost += other.anchors_lost;
        self.requests_at_risk += other.requests_at_risk;
        self.requests_loss_free += other.requests_loss_free;
        self.content_at_risk += other.content_at_risk;
        self.content_lost += other.content_lost;
        self.content_requests_at_risk += other.content_requests_at_risk;
        self.content_requests_loss_free += other.content_requests_loss_free;
        self.view_compared += other.view_compared;
        self.view_changes += other.view_changes;
        self.losses.extend_from_slice(&other.losses);
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
            side_requests_skipped: self.side_requests_skipped,
            side_requests_failed: self.side_requests_failed,
            prune: if requests == 0 {
                0.0
            } else {
                round(self.prune_sum / requests as f64, 6)
            },
            judged: self.judged,
            no_impact_rate: (self.judged > 0).then(|| share(self.no_impact, self.judged)),
            no_impact_ci: crate::judge::wilson(self.no_impact, self.judged)
                .map(|(low, high)| [round(low, 6), round(high, 6)]),
            judge_uncertain: self.judge_uncertain,
            judge_failed: self.judge_failed,
            cost_usd: (self.unpriced_requests < (requests as u64 + self.side_calls)
                || requests == 0)
                .then(|| round(self.cost_usd, 6)),
            unpriced_requests: self.unpriced_requests,
            anchors_at_risk: self.anchors_at_risk,
            anchors_lost: self.anchors_lost,
            lost_anchor_rate: share(self.anchors_lost, self.anchors_at_risk),
            requests_at_risk: self.requests_at_risk,
            loss_free_share: if self.requests_at_risk == 0 {
                1.0
            } else {
                share(self.requests_loss_free, self.requests_at_risk)
            },
            content_at_risk: self.content_at_risk,
            content_lost: self.content_lost,
            content_requests_at_risk: self.content_requests_at_risk,
            content_loss_free_share: if self.content_requests_at_risk == 0 {
                1.0
            } else {
                share(
                    self.content_requests_loss_free,
                    self.content_requests_at_risk,
                )
            },
            view_changes: share(self.view_changes, self.view_compared),
            view_changes_total: self.view_changes,
            budget_unmet: self.budget_unmet,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
    /// Extra model calls the policy made (summaries, a strategy's
    /// answered side requests).
    pub side_calls: u64,
    /// A strategy's side requests not sent because the replay had no
    /// model (`--model-url`): what they would have changed is not in
    /// these figures.
    pub side_requests_skipped: u64,
    /// A strategy's side requests sent that failed (error, timeout).
    pub side_requests_failed: u64,
    /// Self-GC's pruning rate: the mean over requests of `1 − |C′|/|C|`,
    /// the share of the full history the request left out.
    pub prune: f64,
    /// Requests a judge gave a verdict on (0 without `--judge`).
    pub judged: u64,
    /// Self-GC's no-impact rate: the share of the judged requests whose
    /// retained context still supports the reply the log's model gave
    /// (`null` when none was judged).
    pub no_impact_rate: Option<f64>,
    /// Its Wilson 95% interval.
    pub no_impact_ci: Option<[f64; 2]>,
    /// Judged requests the judge marked uncertain.
    pub judge_uncertain: u64,
    /// Judgments that gave no verdict (an error, a malformed answer).
    pub judge_failed: u64,
    /// Cost in US dollars, each file priced by its model; over the priced
    /// requests only, `null` when none was priced.
    pub cost_usd: Option<f64>,
    /// Requests left out of the cost: their model has no known price.
    #[serde(skip_serializing_if = "is_zero")]
    pub unpriced_requests: u64,
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
    /// Content lines and values the replies relied on that appeared
    /// earlier, summed over requests ([`content`]).
    pub content_at_risk: u64,
    /// Of those, absent from the request's logged text.
    pub content_lost: u64,
    /// Requests with content at risk.
    pub content_requests_at_risk: u64,
    /// Share of those requests that lost no content (1 when none was at risk).
    pub content_loss_free_share: f64,
    /// Share of requests after the first that altered what the previous
    /// request sent (a prefix break; appending is no change).
    pub view_changes: f64,
    /// Requests that altered what the previous request sent.
    pub view_changes_total: u64,
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
    calibration: Calibration,
    overhead: usize,
    reasoning: ReasoningScope,
    /// The previous request's pieces: id, and whether it is reasoning
    /// alone.
    previous: Vec<(u64, bool)>,
    compared: bool,
    stats: Stats,
}

impl Recorder {
    /// A recorder for requests under `budget`, costed with `pricing`,
    /// counting tokens as the lab's counter does.
    pub fn new(budget: usize, pricing: Arc<Pricing>) -> Self {
        Self::calibrated(budget, pricing, Calibration::identity())
    }

    /// A recorder whose requests are converted to provider tokens with
    /// `calibration` (its overhead counts as part of the cached prefix)
    /// before they are measured against `budget` and billed.
    pub fn calibrated(budget: usize, pricing: Arc<Pricing>, calibration: Calibration) -> Self {
        Recorder {
            budget,
            cache: CacheModel::new(pricing.rules),
            pricing,
            overhead: calibration.overhead_local(),
            calibration,
            reasoning: ReasoningScope::AllTurns,
            previous: Vec::new(),
            compared: false,
            stats: Stats::default(),
        }
    }

    /// The recorder for a provider that keeps the reasoning of `scope` in
    /// the prompt it bills (all turns' unless set).
    pub fn reasoning(mut self, scope: ReasoningScope) -> Self {
        self.reasoning = scope;
        self
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
        let scale = |n: usize| (n as f64 * self.calibration.token_ratio).round() as usize;
        let used = CacheUse {
            reused: scale(used.reused),
            read: scale(used.read),
            write: scale(used.write),
            uncached: scale(used.uncached),
        };
        let s = &mut self.stats;
        s.input_tokens += (used.uncached + used.read + used.write) as u64;
        s.reused_tokens += used.reused as u64;
        s.cache_read_tokens += used.read as u64;
        s.cache_write_tokens += used.write as u64;
        s.output_tokens += output as u64;
        if self.pricing.known {
            s.cost_usd += self
                .pricing
                .cost(used.uncached, used.read, used.write, output);
        } else {
            s.unpriced_requests += 1;
        }
    }

    /// Records a judge's verdict on the last request, or its failure.
    pub fn judged(&mut self, judgment: &crate::judge::Judgment) {
        match judgment {
            Ok(verdict) => {
                self.stats.judged += 1;
                self.stats.no_impact += u64::from(verdict.valid);
                self.stats.judge_uncertain += u64::from(verdict.uncertain);
            }
            Err(_) => self.stats.judge_failed += 1,
        }
    }

    /// Records one request (and the side calls made before it); returns
    /// what it lacked that the reply used (nothing for a full history).
    pub fn record(&mut self, request: &Request, call: &Call<'_>, tools_tokens: usize) -> Missed {
        let tools_tokens = tools_tokens + self.overhead;
        let rules = self.pricing.rules;
        for side in &request.side_calls {
            let input = sent::sent(&side.input, self.reasoning);
            let used = self
                .cache
                .pieces(tools_tokens, &input, call.time)
                .read_share(call.cache_share, rules);
            self.bill(used, side.output_tokens);
            self.stats.side_calls += 1;
        }
        self.stats.side_requests_skipped += u64::from(request.side.skipped);
        self.stats.side_requests_failed += u64::from(request.side.failed);
        let (tokens, used, evictions, missed, changed) = match &request.view {
            View::Full => {
                let total = tools_tokens + call.history_tokens;
                let compared = self.compared;
                self.compared = true;
                let changed_at = call.history_changed_at.map(|at| tools_tokens + at);
                let used = self
                    .cache
                    .full(total, changed_at, call.time)
                    .read_share(call.cache_share, rules);
                (total, used, 0, Missed::default(), compared.then_some(false))
            }
            View::Pieces(pieces) => {
                let turn = sent::turn_start(pieces, self.reasoning);
                let sent = sent::sent_from(pieces, turn);
                let total = tools_tokens + sent.iter().map(|p| p.tokens).sum::<usize>();
                let used = self
                    .cache
                    .pieces(tools_tokens, &sent, call.time)
                    .read_share(call.cache_share, rules);
                let (evictions, changed) = self.compare(pieces);
                let shown: Vec<Shown<'_>> = pieces
                    .iter()
                    .enumerate()
                    .map(|(index, piece)| piece.shown(index < turn))
                    .collect();
                (total, used, evictions, Missed::of(&shown, call), changed)
            }
        };
        let (lost, content_lost) = (missed.anchors.len(), missed.content.len());
        self.bill(used, call.output_tokens);
        let full = tools_tokens + call.history_tokens;
        if full > 0 {
            self.stats.prune_sum += 1.0 - tokens as f64 / full as f64;
        }
        let tokens = (tokens as f64 * self.calibration.token_ratio).round() as usize;
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
        if !call.content.is_empty() {
            s.content_requests_at_risk += 1;
            s.content_at_risk += call.content.len() as u64;
            s.content_lost += content_lost as u64;
            if content_lost == 0 {
                s.content_requests_loss_free += 1;
            }
        }
        s.losses.push(RequestLoss {
            anchors: !call.at_risk.is_empty() && lost > 0,
            content: !call.content.is_empty() && content_lost > 0,
        });
        if let Some(changed) = changed {
            s.view_compared += 1;
            s.view_changes += u64::from(changed);
        }
        if let Some(met) = request.budget_met {
            *s.budget_unmet.get_or_insert(0) += u64::from(!met);
        }
        missed
    }

    /// Evictions (messages of the previous request absent from this one)
    /// and whether this request altered the previous one (`None` for the
    /// first request).
    fn compare(&mut self, pieces: &[Arc<Entry>]) -> (usize, Option<bool>) {
        let current: HashSet<u64> = pieces.iter().map(|p| p.id()).collect();
        // A message of only reasoning that a new turn took out is the
        // provider's drop, not the policy's change.
        let dropped = |&(id, only_reasoning): &(u64, bool)| {
            only_reasoning
                && self.reasoning == ReasoningScope::CurrentTurn
                && !current.contains(&id)
        };
        let previous: Vec<u64> = self
            .previous
            .iter()
            .filter(|piece| !dropped(piece))
            .map(|&(id, _)| id)
            .collect();
        let changed = self.compared.then(|| {
            previous.len() > pieces.len()
                || previous.iter().zip(pieces).any(|(id, p)| *id != p.id())
        });
        self.compared = true;
        let evicted = previous.iter().filter(|id| !current.contains(id)).count();
        self.previous = pieces
            .iter()
            .map(|p| (p.id(), p.message().is_reasoning_only()))
            .collect();
        (evicted, changed)
    }
}

/// What a request lacked that the reply of its call used: the evidence
/// behind the lost-anchor rate and the loss-free shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Missed {
    /// Anchors at risk that no piece of the request held.
    pub anchors: Vec<AnchorId>,
    /// Lines and quoted values no piece carried in logged text.
    pub content: Need,
}

impl Missed {
    /// What `pieces`, as the model saw them, lack of what `call`'s reply
    /// used.
    pub fn of(pieces: &[Shown<'_>], call: &Call<'_>) -> Missed {
        Missed {
            anchors: missing_anchors(pieces, call.at_risk),
            content: call.content.missing(pieces),
        }
    }

    /// Whether the request lacked nothing.
    pub fn is_empty(&self) -> bool {
        self.anchors.is_empty() && self.content.is_empty()
    }
}

/// The anchors of `at_risk` that no piece of the request holds.
fn missing_anchors(pieces: &[Shown<'_>], at_risk: &[AnchorId]) -> Vec<AnchorId> {
    let mut missing: Vec<AnchorId> = at_risk.to_vec();
    for piece in pieces.iter().rev() {
        if missing.is_empty() {
            break;
        }
        missing.retain(|a| !piece.has_anchor(*a));
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Lab;
    use cwl::{Estimate, Message};

    /// A call of `history_tokens` whose reply used `at_risk` and `content`.
    fn call<'a>(history_tokens: usize, at_risk: &'a [AnchorId], content: &'a Need) -> Call<'a> {
        Call {
            time: None,
            history_tokens,
            history_changed_at: None,
            output_tokens: 10,
            at_risk,
            content,
            cache_share: 1.0,
        }
    }

    #[test]
    fn records_tokens_evictions_losses_and_cost() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let a = lab.entry(Message::user("look at src/alpha.rs ".repeat(300)));
        let b = lab.entry(Message::user("and src/beta.rs ".repeat(300)));
        let alpha = lab.anchors_mut().intern("src/alpha.rs");
        let beta = lab.anchors_mut().intern("src/beta.rs");
        let pricing = Arc::new(cost::lookup("claude-sonnet-4-5").unwrap());
        let mut recorder = Recorder::new(2000, Arc::clone(&pricing));
        let history_tokens = a.tokens() + b.tokens();
        let nothing = Need::default();
        let (alone, both) = ([alpha], [alpha, beta]);
        let first = call(history_tokens, &alone, &nothing);
        recorder.record(&Request::pieces(vec![a.clone(), b.clone()]), &first, 0);
        let second = call(history_tokens, &both, &nothing);
        recorder.record(&Request::pieces(vec![b.clone()]), &second, 0);
        let lost_alpha = RequestLoss {
            anchors: true,
            content: false,
        };
        assert_eq!(
            recorder.stats().losses,
            [RequestLoss::default(), lost_alpha],
            "the second request lost alpha"
        );
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
        assert!((s.cost_usd.unwrap() - round(expected, 6)).abs() < 1e-9);
        assert_eq!(s.budget_unmet, None);
        let pruned = 1.0 - b.tokens() as f64 / history_tokens as f64;
        assert!(pruned > 0.3, "{pruned}");
        assert_eq!(
            s.prune,
            round(pruned / 2.0, 6),
            "the first request kept all"
        );
        assert_eq!((s.side_requests_skipped, s.side_requests_failed), (0, 0));
    }

    /// An earlier turn's reasoning, which OpenAI's models before GPT-5.6
    /// drop, neither counts in the request nor keeps what it names.
    #[test]
    fn reasoning_a_provider_dropped_keeps_nothing() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let first = lab.entry(Message::user("first task"));
        let thought = lab.entry(Message::Assistant {
            content: vec![
                cwl::Block::Reasoning {
                    text: "the bug is in src/alpha.rs".into(),
                    signature: Some("x".repeat(800)),
                },
                cwl::Block::Text {
                    text: "fixed it".into(),
                },
            ],
        });
        let second = lab.entry(Message::user("second task"));
        let alpha = lab.anchors_mut().intern("src/alpha.rs");
        assert!(thought.shown(false).has_anchor(alpha));
        assert!(!thought.shown(true).has_anchor(alpha));
        let pieces = vec![first.clone(), thought.clone(), second.clone()];
        let history_tokens = pieces.iter().map(|p| p.tokens()).sum();
        let nothing = Need::default();
        let alone = [alpha];
        let used = call(history_tokens, &alone, &nothing);
        let pricing = Arc::new(cost::lookup("gpt-5-codex").unwrap());
        let measured = |scope: ReasoningScope| {
            let mut recorder = Recorder::new(100_000, Arc::clone(&pricing)).reasoning(scope);
            let missed = recorder.record(&Request::pieces(pieces.clone()), &used, 0);
            (recorder.stats().tokens[0] as usize, missed.anchors)
        };
        assert_eq!(measured(ReasoningScope::AllTurns), (history_tokens, vec![]));
        assert_eq!(
            measured(ReasoningScope::CurrentTurn),
            (history_tokens - thought.reasoning_tokens(), vec![alpha])
        );
        assert!(thought.reasoning_tokens() >= 200);
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

    fn read_call(id: &str, path: &str) -> Message {
        Message::Assistant {
            content: vec![cwl::Block::ToolCall(cwl::ToolCall::new(
                id,
                "read",
                format!(r#"{{"path":"{path}"}}"#),
            ))],
        }
    }

    fn record(recorder: &mut Recorder, pieces: &[Arc<Entry>], at_risk: &[AnchorId], need: &Need) {
        let call = Call {
            output_tokens: 1,
            ..call(pieces.iter().map(|p| p.tokens()).sum(), at_risk, need)
        };
        recorder.record(&Request::pieces(pieces.to_vec()), &call, 0);
    }

    /// A user turn, a read of `src/alpha.rs`, and an edit of a line the
    /// read showed: what the edit relies on, once logged.
    fn read_then_edit(lab: &mut Lab) -> (Vec<Arc<Entry>>, Need, Vec<AnchorId>) {
        let logged = [
            Message::user("fix the total"),
            read_call("r1", "src/alpha.rs"),
            Message::tool_result(
                "r1",
                "read",
                "fn total() -> u32 {\n    let alpha_total = compute_sum(1);\n}\n",
                false,
            ),
        ];
        let entries: Vec<Arc<Entry>> = logged
            .into_iter()
            .map(|m| {
                let e = lab.entry(m);
                lab.note_logged(&e);
                e
            })
            .collect();
        let edit = Message::Assistant {
            content: vec![cwl::Block::ToolCall(cwl::ToolCall::new(
                "e1",
                "edit",
                r#"{"path":"src/alpha.rs","oldText":"    let alpha_total = compute_sum(1);","newText":"    let alpha_total = compute_sum(2);"}"#,
            ))],
        };
        let used: Vec<AnchorId> = lab
            .anchors_mut()
            .extract(&edit, anchors::Scope::Used)
            .into_iter()
            .filter(|a| lab.anchors().was_seen(*a))
            .collect();
        let need = Need::of(&edit, &used, lab.seen());
        (entries, need, used)
    }

    #[test]
    fn an_edit_loses_when_its_old_text_was_evicted_not_while_a_read_keeps_it() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let (entries, need, used) = read_then_edit(&mut lab);
        assert_eq!(need.lines.len(), 1, "{need:?}");
        let pricing = Arc::new(cost::lookup("claude-sonnet-4-5").unwrap());
        let mut kept = Recorder::new(100_000, Arc::clone(&pricing));
        record(&mut kept, &entries, &used, &need);
        let s = kept.stats().summary();
        assert_eq!((s.content_requests_at_risk, s.content_lost), (1, 0));
        assert_eq!(s.content_loss_free_share, 1.0);

        let mut evicted = Recorder::new(100_000, pricing);
        record(&mut evicted, &entries[..1], &used, &need);
        let s = evicted.stats().summary();
        assert_eq!(s.content_requests_at_risk, 1);
        assert_eq!(s.content_loss_free_share, 0.0);
        assert!(s.content_lost >= 1);
    }

    #[test]
    fn residues_and_summaries_never_keep_content() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let (entries, need, used) = read_then_edit(&mut lab);
        let path = lab.anchors_mut().intern("src/beta/gamma.rs");
        let listing = lab.entry(Message::tool_result(
            "l1",
            "ls",
            "src/beta/gamma.rs\n",
            false,
        ));
        lab.note_logged(&listing);
        let quote = Need::of(
            &Message::assistant_text("open src/beta/gamma.rs"),
            &[path],
            lab.seen(),
        );
        assert_eq!(quote.anchors, vec![path], "seen only in a tool output");
        let residue = lab.written(Message::assistant_text(
            "[evicted expl episode `t1-expl-1`: 2 read-only calls: listed src/beta/gamma.rs; read src/alpha.rs; let alpha_total = compute_sum(1);]",
        ));
        let summary = lab.modeled(
            Message::user("[summary]    let alpha_total = compute_sum(1);"),
            50,
            used.iter().copied().chain([path]).collect(),
        );
        let pricing = Arc::new(cost::lookup("claude-sonnet-4-5").unwrap());
        for fake in [residue, summary] {
            let pieces = vec![Arc::clone(&entries[0]), fake];
            let mut recorder = Recorder::new(100_000, Arc::clone(&pricing));
            record(&mut recorder, &pieces, &used, &need);
            record(&mut recorder, &pieces, &[path], &quote);
            let s = recorder.stats().summary();
            assert_eq!(
                s.loss_free_share, 1.0,
                "names alone satisfy the anchor metric"
            );
            assert_eq!(s.content_requests_at_risk, 2);
            assert_eq!(
                s.content_loss_free_share, 0.0,
                "but never the content metric"
            );
        }
    }

    #[test]
    fn a_rewrite_keeps_the_content_of_the_blocks_it_kept() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let text = cwl::Block::Text {
            text: "    let alpha_total = compute_sum(1);".into(),
        };
        let call = cwl::Block::ToolCall(cwl::ToolCall::new("c", "bash", r#"{"command":"ls"}"#));
        let original = lab.entry(Message::Assistant {
            content: vec![text.clone(), call],
        });
        let key = content::line_key("let alpha_total = compute_sum(1);").unwrap();
        let stripped = lab.derived(
            Message::Assistant {
                content: vec![text],
            },
            &original,
        );
        assert!(stripped.keeps_line(key));
        let with_residue = lab.derived(
            Message::assistant_text("[evicted: let alpha_total = compute_sum(1);]"),
            &original,
        );
        assert!(!with_residue.keeps_line(key));
    }

    #[test]
    fn appending_is_no_view_change_an_eviction_is() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let e: Vec<Arc<Entry>> = (0..4)
            .map(|i| lab.entry(Message::user(format!("message {i}"))))
            .collect();
        let pricing = Arc::new(cost::lookup("claude-sonnet-4-5").unwrap());
        let mut recorder = Recorder::new(100_000, pricing);
        let none = Need::default();
        record(&mut recorder, &e[..2], &[], &none);
        record(&mut recorder, &e[..3], &[], &none);
        let s = recorder.stats().summary();
        assert_eq!((s.view_changes_total, s.view_changes), (0, 0.0));
        record(
            &mut recorder,
            &[e[0].clone(), e[2].clone(), e[3].clone()],
            &[],
            &none,
        );
        record(
            &mut recorder,
            &[e[0].clone(), e[2].clone(), e[3].clone()],
            &[],
            &none,
        );
        let s = recorder.stats().summary();
        assert_eq!(
            s.view_changes_total, 1,
            "only the eviction altered the view"
        );
        assert!(
            (s.view_changes - 1.0 / 3.0).abs() < 1e-6,
            "{}",
            s.view_changes
        );
    }
}
