//! Calibration of replayed token counts to the provider's own counts.
//!
//! The lab counts tokens locally (o200k by default), which is not the
//! provider's tokenizer, and most logs lack the client's system prompt and
//! tool schemas. Where a log records the prompt size of its model calls
//! ([`cwl::Usage::input_tokens`]: uncached + cache reads + cache writes), a
//! request of `c` locally counted tokens (history and any tool definitions
//! the log carries) is taken to cost `overhead + ratio × c` provider tokens:
//!
//! - `ratio`, provider tokens per local token: the median, over pairs of
//!   consecutive logged calls, of Δlogged / Δlocal (what the provider
//!   counted for the content one step added), using steps that add at
//!   least [`MIN_STEP`] local tokens and at most [`MAX_STEPS`] of them;
//! - `overhead`, what the log does not carry (client system prompt and tool
//!   schemas): the first logged call's prompt minus `ratio ×` its local
//!   count, at least 0.
//!
//! Only calls before the log's first compaction or prompt drop are used:
//! after one the logged prompt is the harness's compacted or cleared
//! prompt, not the history ([`prompt_dropped`]: a harness such as Claude
//! Code 2.0 clears old tool results from what it sends and logs them
//! whole, with no other trace in the log). With
//! fewer than [`MIN_SAMPLES`] steps the ratio is 1 and the overhead comes
//! from the first call alone; with no logged prompt at all the calibration
//! is the identity ([`Calibration::from_log`] false), except for a Codex
//! rollout that logs neither prompt sizes nor Codex's own instructions
//! (those written before September 2025): its overhead is
//! [`CODEX_PROMPT_TOKENS`].
//!
//! Every policy's requests are converted the same way, and every budgeted
//! policy decides against the budget converted back to local tokens
//! ([`Calibration::local_tokens`]), so comparisons stay fair: a policy that
//! keeps its local count within that budget sends at most τ provider tokens.

use std::path::Path;

use cwl::tokens::{message_tokens, tools_tokens};
use cwl::{Message, TokenCounter};
use serde::Serialize;

use crate::import::Format;
use crate::metrics::sent::{History, ReasoningScope, reasoning_tokens};
use crate::session::{OpenError, Session, SessionEvent};

/// Smallest step (local tokens added between two logged calls) whose ratio
/// is used: smaller steps are dominated by per-message framing.
pub const MIN_STEP: u64 = 256;
/// Steps measured at most; the calibration pass stops after them.
pub const MAX_STEPS: usize = 64;
/// Steps needed to estimate a ratio; fewer leave it at 1.
pub const MIN_SAMPLES: usize = 3;

/// Provider tokens of Codex CLI's own instructions and tool schemas, which
/// its rollouts from before September 2025 do not log (nor any prompt
/// size): measured on Codex CLI 0.29.0, whose requests held 5,513 tokens
/// more than its rollout on average (`scripts/real-clients/run.sh` with
/// that version as `CODEX`).
pub const CODEX_PROMPT_TOKENS: u64 = 5_500;

/// Whether a logged prompt of `logged` tokens is smaller than the
/// previous call's, `previous`, by more than a tenth (and 2,048 tokens):
/// the log's harness removed something from what it sent. Without a
/// compaction in between a history only grows; providers' own counts
/// wobble by a few percent (Gemini's, in the mini-swe-agent logs, by up
/// to 2.3%), while Claude Code 2.0's clearing of old tool results cut its
/// prompt by about 40%.
pub fn prompt_dropped(previous: u64, logged: u64) -> bool {
    logged + (previous / 10).max(2_048) < previous
}

/// How local token counts map to the provider's, for one log.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Calibration {
    /// Provider tokens every request holds that the log does not carry
    /// (the client's system prompt and tool schemas), estimated.
    pub system_tokens_estimate: u64,
    /// Provider tokens per locally counted token.
    pub token_ratio: f64,
    /// Steps the ratio was measured on (0: ratio left at 1).
    pub ratio_samples: usize,
    /// Whether the figures come from logged prompt sizes (false: identity,
    /// or [`CODEX_PROMPT_TOKENS`] added).
    pub from_log: bool,
    /// Which turns' reasoning the provider counted, when the logged prompt
    /// sizes showed it against the rule for the log's model
    /// ([`ReasoningScope::of_model`]); `None`: that rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_scope: Option<ReasoningScope>,
}

/// A calibration fitted under one reasoning scope, and how well it
/// explains the log's prompt sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// The calibration.
    pub calibration: Calibration,
    /// Logged calls before the log's first compaction or prompt drop (as
    /// that scope counts a drop).
    pub calls: usize,
    /// Mean |calibrated − logged| / logged over them; `None` without any.
    pub error: Option<f64>,
    /// Reasoning tokens in finished user turns: what the two scopes count
    /// differently (0: nothing to choose between).
    pub stale: usize,
    /// Mean logged prompt over those calls; `None` without any.
    pub logged_mean: Option<f64>,
}

/// Share of the mean logged prompt that finished turns' reasoning must
/// reach before a closer fit alone may overrule the model's rule: below
/// it, drift in the provider's counts explains as much (the pi log's
/// 2.4k tokens of earlier thinking, 2% of its mean, fit 1.6 points better
/// left out, yet its cache reads show Claude Opus 4.5 kept them).
pub const STALE_SHARE: f64 = 0.05;

impl Default for Calibration {
    fn default() -> Self {
        Self::identity()
    }
}

impl Calibration {
    /// No calibration: local counts stand as they are.
    pub fn identity() -> Self {
        Calibration {
            system_tokens_estimate: 0,
            token_ratio: 1.0,
            ratio_samples: 0,
            from_log: false,
            reasoning_scope: None,
        }
    }

    /// Fits a calibration to `points`: `(local, logged)` prompt sizes of the
    /// logged calls in order, all before the log's first compaction.
    pub fn fit(points: &[(u64, u64)]) -> Self {
        let Some(&(first_local, first_logged)) = points.first() else {
            return Self::identity();
        };
        let mut ratios: Vec<f64> = points
            .windows(2)
            .filter_map(|pair| {
                let (local_a, logged_a) = pair[0];
                let (local_b, logged_b) = pair[1];
                let local = local_b.checked_sub(local_a)?;
                let logged = logged_b.checked_sub(logged_a)?;
                (local >= MIN_STEP).then(|| logged as f64 / local as f64)
            })
            .take(MAX_STEPS)
            .collect();
        let samples = ratios.len();
        let ratio = if samples >= MIN_SAMPLES {
            ratios.sort_by(f64::total_cmp);
            let mid = samples / 2;
            if samples % 2 == 1 {
                ratios[mid]
            } else {
                (ratios[mid - 1] + ratios[mid]) / 2.0
            }
        } else {
            1.0
        };
        let ratio = if ratio.is_finite() && ratio > 0.0 {
            ratio
        } else {
            1.0
        };
        let overhead = (first_logged as f64 - ratio * first_local as f64).max(0.0);
        Calibration {
            system_tokens_estimate: overhead.round() as u64,
            token_ratio: ratio,
            ratio_samples: if samples >= MIN_SAMPLES { samples } else { 0 },
            from_log: true,
            reasoning_scope: None,
        }
    }

    /// Reads `session` up to its first compaction or prompt drop, counting
    /// with `counter` as the replay does and reasoning as the log's model
    /// counts it, and fits.
    pub fn measure(session: Session, counter: &dyn TokenCounter) -> Self {
        let scope = session.info.reasoning_scope();
        Self::fit_scope(session, counter, scope).calibration
    }

    /// [`Calibration::measure`] of the log at `path`, where the logged
    /// prompt sizes also choose which turns' reasoning the provider
    /// counted: when the log's finished turns hold reasoning, it is fitted
    /// both ways, and the other way wins only when it explains clearly
    /// more of the log: more calls before a drop, or, when that reasoning
    /// is at least [`STALE_SHARE`] of the mean prompt, a mean error under
    /// half the rule's and two points lower.
    pub fn measure_path(path: &Path, counter: &dyn TokenCounter) -> Result<Self, OpenError> {
        let session = Session::open(path)?;
        let rule = session.info.reasoning_scope();
        let fit = Self::fit_scope(session, counter, rule);
        if fit.stale == 0 || !fit.calibration.from_log {
            return Ok(fit.calibration);
        }
        let other = match rule {
            ReasoningScope::AllTurns => ReasoningScope::CurrentTurn,
            ReasoningScope::CurrentTurn => ReasoningScope::AllTurns,
        };
        let alternative = Self::fit_scope(Session::open(path)?, counter, other);
        let material = fit.logged_mean.is_some_and(|mean| {
            fit.calibration.provider_amount(fit.stale) as f64 >= STALE_SHARE * mean
        });
        Ok(match (fit.error, alternative.error) {
            (Some(rule_error), Some(other_error))
                if (alternative.calls > fit.calls && other_error <= rule_error + 0.01)
                    || (material
                        && alternative.calls == fit.calls
                        && rule_error - other_error >= 0.02
                        && other_error < 0.5 * rule_error) =>
            {
                Calibration {
                    reasoning_scope: Some(other),
                    ..alternative.calibration
                }
            }
            _ => fit.calibration,
        })
    }

    /// Fits `session` counting reasoning as a provider of `scope` does.
    pub fn fit_scope(session: Session, counter: &dyn TokenCounter, scope: ReasoningScope) -> Fit {
        let tools = tools_tokens(counter, &session.info.tools) as u64;
        let mut history = History::new(scope);
        let mut points: Vec<(u64, u64)> = Vec::new();
        for event in session.events {
            let (message, usage) = match event {
                SessionEvent::Compaction => break,
                SessionEvent::Warning(_) => continue,
                SessionEvent::Message { message, usage, .. } => (message, usage),
            };
            if let Some(logged) = usage.map(|u| u.input_tokens).filter(|t| *t > 0) {
                let local = tools + history.sent() as u64;
                let stripped = history.take_dropped() as u64;
                if points.last().is_some_and(|&(_, before)| {
                    prompt_dropped(before.saturating_sub(stripped), logged)
                }) {
                    break;
                }
                points.push((local, logged));
            }
            history.push(
                message_tokens(counter, &message),
                reasoning_tokens(counter, &message),
                matches!(message, Message::User { .. }),
            );
        }
        let stale = history.stale();
        let codex = session.info.format == Format::Codex.name();
        if points.is_empty() && codex && !session.info.client_prompt {
            let calibration = Calibration {
                system_tokens_estimate: CODEX_PROMPT_TOKENS,
                ..Self::identity()
            };
            return Fit {
                calibration,
                calls: 0,
                error: None,
                stale,
                logged_mean: None,
            };
        }
        let calibration = Self::fit(&points);
        let error = (!points.is_empty()).then(|| {
            points
                .iter()
                .map(|&(local, logged)| {
                    let replayed = calibration.provider_tokens(local as usize) as f64;
                    (replayed - logged as f64).abs() / logged as f64
                })
                .sum::<f64>()
                / points.len() as f64
        });
        let logged_mean = (!points.is_empty()).then(|| {
            points.iter().map(|&(_, logged)| logged as f64).sum::<f64>() / points.len() as f64
        });
        Fit {
            calibration,
            calls: points.len(),
            error,
            stale,
            logged_mean,
        }
    }

    /// Provider tokens of a request of `local` locally counted tokens.
    pub fn provider_tokens(&self, local: usize) -> usize {
        self.system_tokens_estimate as usize + (local as f64 * self.token_ratio).round() as usize
    }

    /// The local count whose request costs at most `provider` tokens (at
    /// least 1): a budget or window as policies must see it.
    pub fn local_tokens(&self, provider: usize) -> usize {
        let room = provider.saturating_sub(self.system_tokens_estimate as usize);
        ((room as f64 / self.token_ratio).floor() as usize).max(1)
    }

    /// An amount of local tokens (not a prompt size) in provider tokens.
    pub fn provider_amount(&self, local: usize) -> u64 {
        (local as f64 * self.token_ratio).round() as u64
    }

    /// An amount of provider tokens (not a prompt size) in local tokens.
    pub fn local_amount(&self, provider: usize) -> usize {
        (provider as f64 / self.token_ratio).ceil() as usize
    }

    /// The estimated overhead in local tokens, to add to every request.
    pub fn overhead_local(&self) -> usize {
        (self.system_tokens_estimate as f64 / self.token_ratio).round() as usize
    }
}

/// How the replayed full history compares with the prompt sizes the log
/// recorded, over the calls before the log's first compaction or prompt
/// drop that logged one (after either the log's prompt is the harness's
/// compacted or cleared one, which no replay of the full history should
/// match).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Fidelity {
    /// Calls compared.
    pub compared_calls: u64,
    /// Mean logged prompt size over them (`None` when there are none).
    pub logged_prompt_tokens_mean: Option<f64>,
    /// Mean replayed full-history (`none`) request over the same calls, in
    /// calibrated provider tokens.
    pub replayed_prompt_tokens_mean: Option<f64>,
    /// The same before calibration: local count, log content only.
    pub local_prompt_tokens_mean: Option<f64>,
    /// Mean over the same calls of |replayed − logged| / logged, calibrated.
    pub prompt_tokens_error_mean: Option<f64>,
    /// What the log says its calls before the first compaction cost, when
    /// it records the cost of each of them (pi, mini-swe-agent).
    pub logged_cost_usd: Option<f64>,
    /// What the replayed full history (`none`) costs over the same calls.
    pub replayed_cost_usd: Option<f64>,
}

/// Sums for a [`Fidelity`], fed call by call during the replay.
#[derive(Debug, Clone, Copy)]
pub struct FidelityTally {
    calibration: Calibration,
    calls: u64,
    logged: u64,
    local: u64,
    error: f64,
}

impl FidelityTally {
    /// An empty tally converting local counts with `calibration`.
    pub fn new(calibration: Calibration) -> Self {
        FidelityTally {
            calibration,
            calls: 0,
            logged: 0,
            local: 0,
            error: 0.0,
        }
    }

    /// Adds a call whose full history counts `local` tokens and whose
    /// logged prompt held `logged` (above 0).
    pub fn add(&mut self, local: usize, logged: u64) {
        let replayed = self.calibration.provider_tokens(local) as f64;
        self.calls += 1;
        self.local += local as u64;
        self.logged += logged;
        self.error += (replayed - logged as f64).abs() / logged.max(1) as f64;
    }

    /// The comparison.
    pub fn finish(&self) -> Fidelity {
        if self.calls == 0 {
            return Fidelity::default();
        }
        let n = self.calls as f64;
        let local = self.local as f64 / n;
        let round = |v: f64, digits: i32| {
            let scale = 10f64.powi(digits);
            (v * scale).round() / scale
        };
        let c = &self.calibration;
        Fidelity {
            compared_calls: self.calls,
            logged_prompt_tokens_mean: Some(round(self.logged as f64 / n, 1)),
            replayed_prompt_tokens_mean: Some(round(
                c.system_tokens_estimate as f64 + c.token_ratio * local,
                1,
            )),
            local_prompt_tokens_mean: Some(round(local, 1)),
            prompt_tokens_error_mean: Some(round(self.error / n, 4)),
            logged_cost_usd: None,
            replayed_cost_usd: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_drop_is_more_than_a_providers_wobble() {
        assert!(!prompt_dropped(29_866, 29_361), "Gemini's wobble: 1.7%");
        assert!(!prompt_dropped(10_000, 8_500), "under 2,048 tokens");
        assert!(
            prompt_dropped(134_996, 78_133),
            "Claude Code 2.0's clearing"
        );
        assert!(!prompt_dropped(50_000, 60_000));
    }

    #[test]
    fn fits_ratio_from_steps_and_overhead_from_the_first_call() {
        // provider = 1500 + 1.2 × local, with one noisy step
        let locals = [100u64, 1100, 2100, 2300, 4300, 6300];
        let mut points: Vec<(u64, u64)> = locals
            .iter()
            .map(|&l| (l, 1500 + (l as f64 * 1.2) as u64))
            .collect();
        points[3].1 += 400;
        let c = Calibration::fit(&points);
        assert!((c.token_ratio - 1.2).abs() < 1e-9, "{c:?}");
        assert_eq!(c.system_tokens_estimate, 1500);
        assert_eq!(c.ratio_samples, 4, "the 200-token step is too small");
        assert!(c.from_log);
        assert_eq!(c.provider_tokens(1000), 2700);
        assert_eq!(c.local_tokens(2700), 1000);
        assert_eq!(c.overhead_local(), 1250);
    }

    #[test]
    fn too_few_steps_leave_the_ratio_at_one() {
        let c = Calibration::fit(&[(500, 2500), (900, 2950)]);
        assert_eq!(c.token_ratio, 1.0);
        assert_eq!(c.ratio_samples, 0);
        assert_eq!(c.system_tokens_estimate, 2000);
        let none = Calibration::fit(&[]);
        assert_eq!(none, Calibration::identity());
        assert_eq!(none.provider_tokens(77), 77);
        assert_eq!(none.local_tokens(77), 77);
    }

    #[test]
    fn overhead_never_negative() {
        let c = Calibration::fit(&[(5000, 3000)]);
        assert_eq!(c.system_tokens_estimate, 0);
        assert_eq!(c.local_tokens(0), 1);
    }

    #[test]
    fn tally_compares_means_and_per_call_error() {
        let c = Calibration::fit(&[(0, 1000), (1000, 3000), (2000, 5000), (3000, 7000)]);
        assert_eq!((c.system_tokens_estimate, c.token_ratio), (1000, 2.0));
        let mut tally = FidelityTally::new(c);
        tally.add(1000, 3300);
        tally.add(2000, 4500);
        let f = tally.finish();
        assert_eq!(f.compared_calls, 2);
        assert_eq!(f.logged_prompt_tokens_mean, Some(3900.0));
        assert_eq!(f.replayed_prompt_tokens_mean, Some(4000.0));
        assert_eq!(f.local_prompt_tokens_mean, Some(1500.0));
        let expected = (300.0 / 3300.0 + 500.0 / 4500.0) / 2.0;
        assert!((f.prompt_tokens_error_mean.unwrap() - expected).abs() < 1e-4);
        assert_eq!(FidelityTally::new(c).finish(), Fidelity::default());
    }
}
