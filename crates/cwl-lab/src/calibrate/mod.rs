//! Calibration of replayed token counts to the provider's own counts, and
//! how well the replay then matches the log ([`fidelity`]).
//!
//! The lab counts tokens locally (o200k by default), which is not the
//! provider's tokenizer, and most logs lack the client's system prompt and
//! tool schemas. Where a log records the prompt size of its model calls
//! ([`cwl::Usage::input_tokens`]: uncached + cache reads + cache writes), a
//! request of `c` locally counted tokens (history and any tool definitions
//! the log carries) is taken to cost `overhead + ratio × c` provider tokens
//! ([`Calibration::fit`], over the whole log as its harness sent it:
//! [`as_sent`]).
//!
//! Every policy's requests are converted the same way, and every budgeted
//! policy decides against the budget converted back to local tokens
//! ([`Calibration::local_tokens`]), so comparisons stay fair: a policy that
//! keeps its local count within that budget sends at most τ provider tokens.

pub mod as_sent;
pub mod clearing;
pub mod fidelity;

use std::path::Path;

use cwl::TokenCounter;
use cwl::tokens::tools_tokens;
use serde::Serialize;

use crate::import::Format;
use crate::metrics::sent::ReasoningScope;
use crate::session::{OpenError, Session};
pub use as_sent::{AsSent, Edit, Point, Segment};
pub use clearing::ClearRule;
use fidelity::median;
pub use fidelity::{Fidelity, compare};

/// Smallest step (local tokens added between two logged calls) whose ratio
/// is used: smaller steps are dominated by per-message framing.
pub const MIN_STEP: u64 = 256;
/// Calls of one segment paired for the ratio at most: a longer segment
/// is sampled evenly, so the pairs stay within about MAX_PAIRED² / 2.
pub const MAX_PAIRED: usize = 600;
/// Steps needed to estimate a ratio; fewer leave it at 1.
pub const MIN_SAMPLES: usize = 3;
/// Calls before the harness's first edit of its prompt needed to estimate
/// the client's own part of it; fewer take the client's known size
/// ([`known_overhead`]).
pub const MIN_OVERHEAD_SAMPLES: usize = 5;

/// Provider tokens of Codex CLI's own instructions and tool schemas, which
/// its rollouts from before September 2025 do not log (nor any prompt
/// size): measured on Codex CLI 0.29.0, whose requests held 5,513 tokens
/// more than its rollout on average (`scripts/real-clients/run.sh` with
/// that version as `CODEX`).
pub const CODEX_PROMPT_TOKENS: u64 = 5_500;

/// Provider tokens of Claude Code's system prompt and tool schemas, which
/// its session logs never hold: the median overhead fitted on the 13 real
/// Claude Code 1.0.53 sessions in `shared/traces/claude-code` (13,891 to
/// 16,011).
pub const CLAUDE_CODE_PROMPT_TOKENS: u64 = 14_300;

/// Provider tokens of Codex CLI's tool schemas, which rollouts that log
/// its instructions still lack.
pub const CODEX_TOOLS_TOKENS: u64 = 2_000;

/// The provider tokens a client of `format` sends that its logs do not
/// hold (its system prompt and tool schemas), where known; `client_prompt`
/// when the log holds the client's instructions. 0 for formats that log
/// their whole prompt.
pub fn known_overhead(format: &str, client_prompt: bool) -> u64 {
    match format.parse::<Format>() {
        Ok(Format::ClaudeCode) => CLAUDE_CODE_PROMPT_TOKENS,
        Ok(Format::Codex) if client_prompt => CODEX_TOOLS_TOKENS,
        Ok(Format::Codex) => CODEX_PROMPT_TOKENS,
        _ => 0,
    }
}

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
    /// Pairs of calls the ratio was measured on (0: ratio left at 1).
    pub ratio_samples: usize,
    /// Whether the figures come from logged prompt sizes (false: identity,
    /// or [`CODEX_PROMPT_TOKENS`] added).
    pub from_log: bool,
    /// Whether too few calls showed the client's own part of the prompt
    /// and its known size ([`known_overhead`]) stands in.
    pub fallback: bool,
    /// Which turns' reasoning the provider counted, when the logged prompt
    /// sizes showed it against the rule for the log's model
    /// ([`ReasoningScope::of_model`]); `None`: that rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_scope: Option<ReasoningScope>,
}

/// A calibration and how well the replay of the log's harness then
/// matches the log.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    /// The calibration.
    pub calibration: Calibration,
    /// The replay as sent against the logged prompt sizes.
    pub fidelity: Fidelity,
}

impl From<Calibration> for Measured {
    fn from(calibration: Calibration) -> Self {
        Measured {
            calibration,
            fidelity: Fidelity::default(),
        }
    }
}

/// A calibration fitted under one reasoning scope, and how well it
/// explains the log's prompt sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// The calibration and its fidelity.
    pub measured: Measured,
    /// Reasoning tokens in finished user turns: what the two scopes count
    /// differently (0: nothing to choose between).
    pub stale: usize,
}

/// Share of the mean logged prompt that finished turns' reasoning must
/// reach before a closer fit alone may overrule the model's rule: below
/// it, drift in the provider's counts explains as much (the pi log's
/// 2.4k tokens of earlier thinking, 2% of its mean, fit 1.6 points better
/// left out, yet its cache reads show Claude Opus 4.5 kept them).
pub const STALE_SHARE: f64 = 0.05;

/// Δlogged / Δlocal for every pair of calls of one segment at least
/// [`MIN_STEP`] local tokens apart whose logged prompt grew too.
fn pair_ratios(points: &[Point]) -> Vec<f64> {
    let mut ratios = Vec::new();
    let mut start = 0;
    while start < points.len() {
        let index = points[start].segment.index;
        let end = start
            + points[start..]
                .iter()
                .take_while(|p| p.segment.index == index)
                .count();
        let segment = &points[start..end];
        let stride = segment.len().div_ceil(MAX_PAIRED).max(1);
        let sampled: Vec<&Point> = segment.iter().step_by(stride).collect();
        for (i, a) in sampled.iter().enumerate() {
            for b in &sampled[i + 1..] {
                let (Some(local), Some(logged)) =
                    (b.local.checked_sub(a.local), b.logged.checked_sub(a.logged))
                else {
                    continue;
                };
                if local >= MIN_STEP {
                    ratios.push(logged as f64 / local as f64);
                }
            }
        }
        start = end;
    }
    ratios
}

/// Reads `session`, counting with `counter` as the replay does and
/// reasoning as the log's model counts it, fits a calibration and
/// compares.
pub fn measure(session: Session, counter: &dyn TokenCounter) -> Measured {
    let scope = session.info.reasoning_scope();
    fit_scope(session, counter, scope).measured
}

/// [`measure`] of the log at `path`, where the logged prompt sizes also
/// choose which turns' reasoning the provider counted: when the log's
/// finished turns hold reasoning, it is fitted both ways, and the other
/// way wins only when it explains clearly more of the log: fewer cuts of
/// the prompt the replay cannot explain, or, when that reasoning is at
/// least [`STALE_SHARE`] of the mean prompt, a mean error under half the
/// rule's and two points lower.
pub fn measure_path(path: &Path, counter: &dyn TokenCounter) -> Result<Measured, OpenError> {
    let session = Session::open(path)?;
    let rule = session.info.reasoning_scope();
    let fit = fit_scope(session, counter, rule);
    if fit.stale == 0 || !fit.measured.calibration.from_log {
        return Ok(fit.measured);
    }
    let other = match rule {
        ReasoningScope::AllTurns => ReasoningScope::CurrentTurn,
        ReasoningScope::CurrentTurn => ReasoningScope::AllTurns,
    };
    let alternative = fit_scope(Session::open(path)?, counter, other);
    let (ours, theirs) = (fit.measured.fidelity, alternative.measured.fidelity);
    let material = ours.logged_prompt_tokens_mean.is_some_and(|mean| {
        fit.measured.calibration.provider_amount(fit.stale) as f64 >= STALE_SHARE * mean
    });
    Ok(
        match (
            ours.prompt_tokens_error_mean,
            theirs.prompt_tokens_error_mean,
        ) {
            (Some(rule_error), Some(other_error))
                if (theirs.cuts < ours.cuts && other_error <= rule_error + 0.01)
                    || (material
                        && theirs.cuts == ours.cuts
                        && rule_error - other_error >= 0.02
                        && other_error < 0.5 * rule_error) =>
            {
                let mut measured = alternative.measured;
                measured.calibration.reasoning_scope = Some(other);
                measured
            }
            _ => fit.measured,
        },
    )
}

/// Fits `session` counting reasoning as a provider of `scope` does.
pub fn fit_scope(session: Session, counter: &dyn TokenCounter, scope: ReasoningScope) -> Fit {
    let (info, walk) = walk(session, counter, scope);
    let stale = walk.stale();
    let points = walk.into_points();
    let codex = info.format == Format::Codex.name();
    let calibration = if points.is_empty() && codex && !info.client_prompt {
        Calibration {
            system_tokens_estimate: CODEX_PROMPT_TOKENS,
            ..Calibration::identity()
        }
    } else {
        Calibration::fit(&points, known_overhead(&info.format, info.client_prompt))
    };
    Fit {
        measured: Measured {
            calibration,
            fidelity: compare(&points, &calibration),
        },
        stale,
    }
}

/// The replay of what `session`'s harness sent against its logged prompt
/// sizes with local counts left as they are (`--no-calibration`).
pub fn uncalibrated(session: Session, counter: &dyn TokenCounter) -> Measured {
    let scope = session.info.reasoning_scope();
    let (_, walk) = walk(session, counter, scope);
    let calibration = Calibration::identity();
    Measured {
        calibration,
        fidelity: compare(walk.points(), &calibration),
    }
}

fn walk(
    session: Session,
    counter: &dyn TokenCounter,
    scope: ReasoningScope,
) -> (crate::session::SessionInfo, AsSent) {
    let Session { info, events } = session;
    let tools = tools_tokens(counter, &info.tools) as u64;
    let mut walk = AsSent::new(scope, tools).with_clearing(ClearRule::of_format(&info.format));
    for event in events {
        walk.event(counter, &event);
    }
    (info, walk)
}

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
            fallback: false,
            reasoning_scope: None,
        }
    }

    /// Fits a calibration to the logged calls of a log ([`AsSent`]),
    /// `known` standing for the client's own prompt when too few calls
    /// show it:
    ///
    /// - the ratio is the median of Δlogged / Δlocal over pairs of calls
    ///   of one segment at least [`MIN_STEP`] local tokens apart (at least
    ///   [`MIN_SAMPLES`] of them, else 1): the Theil–Sen slope, which
    ///   counts what the client adds to every step (framing, reminders)
    ///   as well as what the log holds;
    /// - the overhead is the median of `logged − ratio × local` over the
    ///   calls before the harness first edited its prompt, when there are
    ///   at least [`MIN_OVERHEAD_SAMPLES`] of them; else `known`
    ///   ([`Calibration::fallback`]);
    /// - medians, so one outlier moves neither, and the overhead never
    ///   exceeds the smallest logged prompt: no request is smaller than
    ///   the client's own part of it.
    pub fn fit(points: &[Point], known: u64) -> Self {
        let Some(smallest) = points.iter().map(|p| p.logged).min() else {
            return Self::identity();
        };
        let mut ratios = pair_ratios(points);
        let samples = ratios.len();
        let ratio = if samples >= MIN_SAMPLES {
            median(&mut ratios)
        } else {
            1.0
        };
        let ratio = if ratio.is_finite() && ratio > 0.0 {
            ratio
        } else {
            1.0
        };
        let mut overheads: Vec<f64> = points
            .iter()
            .filter(|p| p.segment.index == 0)
            .map(|p| p.logged as f64 - ratio * p.local as f64)
            .collect();
        let fallback = overheads.len() < MIN_OVERHEAD_SAMPLES;
        let overhead = if fallback {
            known as f64
        } else {
            median(&mut overheads)
        };
        let overhead = overhead.clamp(0.0, smallest as f64);
        Calibration {
            system_tokens_estimate: overhead.round() as u64,
            token_ratio: ratio,
            ratio_samples: if samples >= MIN_SAMPLES { samples } else { 0 },
            from_log: true,
            fallback,
            reasoning_scope: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls in one segment from the start of a log.
    fn calls(points: &[(u64, u64)]) -> Vec<Point> {
        points
            .iter()
            .enumerate()
            .map(|(i, &(local, logged))| Point {
                local,
                logged,
                segment: Segment {
                    index: 0,
                    opened_by: None,
                },
                first: i == 0,
            })
            .collect()
    }

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
    fn fits_ratio_from_steps_and_overhead_from_the_calls() {
        // provider = 1500 + 1.2 × local, with one noisy call
        let locals = [100u64, 1100, 2100, 2300, 4300, 6300];
        let mut points: Vec<(u64, u64)> = locals
            .iter()
            .map(|&l| (l, 1500 + (l as f64 * 1.2) as u64))
            .collect();
        points[3].1 += 400;
        let c = Calibration::fit(&calls(&points), 0);
        assert!((c.token_ratio - 1.2).abs() < 1e-9, "{c:?}");
        assert_eq!(c.system_tokens_estimate, 1500);
        assert_eq!(c.ratio_samples, 14, "the 200-token step is too small");
        assert!(c.from_log && !c.fallback);
        assert_eq!(c.provider_tokens(1000), 2700);
        assert_eq!(c.local_tokens(2700), 1000);
        assert_eq!(c.overhead_local(), 1250);
    }

    #[test]
    fn too_few_calls_take_the_clients_known_size() {
        let c = Calibration::fit(&calls(&[(500, 2500), (900, 2950)]), 1_800);
        assert_eq!(c.token_ratio, 1.0);
        assert_eq!(c.ratio_samples, 0);
        assert_eq!(c.system_tokens_estimate, 1_800);
        assert!(c.fallback);
        let capped = Calibration::fit(&calls(&[(500, 2500)]), 168_570);
        assert_eq!(capped.system_tokens_estimate, 2_500, "{capped:?}");
        let none = Calibration::fit(&[], 1_800);
        assert_eq!(none, Calibration::identity());
        assert_eq!(none.provider_tokens(77), 77);
        assert_eq!(none.local_tokens(77), 77);
    }

    #[test]
    fn overhead_never_negative() {
        let c = Calibration::fit(&calls(&[(5000, 3000)]), 0);
        assert_eq!(c.system_tokens_estimate, 0);
        assert_eq!(c.local_tokens(0), 1);
    }

    #[test]
    fn known_overheads_by_client() {
        assert_eq!(
            known_overhead("claude-code", false),
            CLAUDE_CODE_PROMPT_TOKENS
        );
        assert_eq!(known_overhead("codex", false), CODEX_PROMPT_TOKENS);
        assert_eq!(known_overhead("codex", true), CODEX_TOOLS_TOKENS);
        assert_eq!(known_overhead("mini-swe-agent", false), 0);
    }
}
