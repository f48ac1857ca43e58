//! The JSON report: one object, deterministic byte for byte for the same
//! input and options.
//!
//! `{"budget", "budget_typed", "model", "files": [{"path", "format",
//! "model", "priced_as", "model_from", "cost_known", "budget", "window", "requests",
//! "no_model_call"?, "annotated", "log_compactions", "log_prompt_drops",
//! "warnings", "logged_calls", "compared_calls", "anchored_calls",
//! "compactions", "clearings", "cuts",
//! "logged_prompt_tokens_mean", "replayed_prompt_tokens_mean",
//! "local_prompt_tokens_mean", "prompt_tokens_error_mean",
//! "prompt_tokens_error_median", "logged_cost_usd",
//! "replayed_cost_usd", "calibration", "policies": {NAME: M},
//! "errors"?: {NAME: why}, "losses"?: [{"request", "policy", "anchors":
//! [{"name", "seen_after"}], "values": [same], "lines"}]}], "skipped":
//! [{"path", "why"}],
//! "aggregate": {NAME: M}, "cwl_against_best"}` where `M` is a [`Summary`]
//! and policies appear in the order asked; `cwl_against_best` ([`Versus`])
//! is `null` unless `cwl` and another policy that held the budget were
//! replayed; its `dominated` and `retention_gap_points` are the bar CWL
//! is judged by (no budget-holding policy keeping as much of both for
//! less; at most a point behind the best on each retention measure).
//!
//! Besides the CWL metrics, `M` holds Self-GC's: `prune` (the mean of
//! `1 − |C′|/|C|`), and with a judge `judged`, `no_impact_rate`,
//! `no_impact_ci`, `judge_uncertain`, `judge_failed`; and a strategy's
//! side requests not answered, `side_requests_skipped` (no model) and
//! `side_requests_failed`.
//!
//! `model` is the `--model` every file was priced as, or `null` when each
//! file is priced by its own log's model (`model_from`: `log`, `flag` or
//! `default` when the log names none) and `priced_as` the price table row
//! that priced it (`gpt-5` for `gpt-5-codex`); `window` is the context window
//! `compact` summarizes against (`--window`, else the one the log records, as
//! Codex does, else the model's); `cost_known` is false for a model
//! with no price, whose `cost_usd` is then `null`. A file with no model
//! call has `"no_model_call": true` and no policies.
//!
//! The prompt-size fields ([`Fidelity`]) set the replay of what the log's
//! own harness sent (its compactions, and reasoning its provider dropped)
//! against the prompt sizes the log records: of the `logged_calls` calls
//! that log one, `compared_calls` are compared and `anchored_calls`, the
//! first after an edit of the harness's the log does not hold whole, are
//! sized from the log; over the compared calls, the logged mean, the
//! replayed mean in calibrated provider tokens and uncalibrated, and the
//! mean and median relative error; `null` when the log records no prompt
//! size. Over the calls before the first compaction, when the log records the
//! cost of each (pi, mini-swe-agent), `logged_cost_usd` is what they cost
//! and `replayed_cost_usd` what the replayed full history costs, else both
//! are `null`. `calibration` is the [`Calibration`] applied to every policy
//! of the file; its `reasoning_scope` (`all_turns` or `current_turn`) is
//! there only when the logged prompt sizes overruled the rule for the
//! log's model on which turns' reasoning the provider counted. `losses` (with `--losses`, when a request lost anything)
//! lists per request and policy the anchors, quoted values and count of
//! edit lines the request lacked ([`crate::replay::Loss`]).

use serde::Serialize;
use serde::ser::SerializeMap;

use super::versus::Versus;
use super::{ReplayReport, Skipped};
use crate::calibrate::{Calibration, Fidelity};
use crate::metrics::Summary;
use crate::metrics::cost::ModelSource;
use crate::replay::Loss;

struct Ordered<T>(Vec<(String, T)>);

impl<T: Serialize> Serialize for Ordered<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct File<'a> {
    path: &'a str,
    format: &'a str,
    model: &'a str,
    priced_as: &'a str,
    model_from: Option<ModelSource>,
    cost_known: bool,
    budget: usize,
    window: usize,
    requests: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    no_model_call: bool,
    annotated: bool,
    log_compactions: u64,
    log_prompt_drops: u64,
    warnings: usize,
    #[serde(flatten)]
    fidelity: Fidelity,
    calibration: Calibration,
    policies: Ordered<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<Ordered<&'a str>>,
    #[serde(skip_serializing_if = "<[Loss]>::is_empty")]
    losses: &'a [Loss],
}

#[derive(Serialize)]
struct Report<'a> {
    budget: usize,
    budget_typed: &'a str,
    model: Option<&'a str>,
    files: Vec<File<'a>>,
    skipped: &'a [Skipped],
    aggregate: Ordered<Summary>,
    cwl_against_best: Option<Versus>,
}

/// The report as pretty-printed JSON.
pub fn to_json(report: &ReplayReport) -> String {
    let files = report
        .files
        .iter()
        .map(|file| {
            let errors: Vec<(String, &str)> = file
                .policies
                .iter()
                .filter_map(|o| {
                    o.failed
                        .as_deref()
                        .map(|why| (o.kind.name().to_string(), why))
                })
                .collect();
            File {
                path: &file.path,
                format: &file.format,
                model: &file.model,
                priced_as: &file.priced_as,
                model_from: file.model_source,
                cost_known: file.priced,
                budget: file.budget,
                window: file.window,
                requests: file.requests,
                no_model_call: file.requests == 0,
                annotated: file.annotated,
                log_compactions: file.log_compactions,
                log_prompt_drops: file.log_prompt_drops,
                warnings: file.warnings.len(),
                fidelity: file.fidelity,
                calibration: file.calibration,
                policies: Ordered(
                    file.policies
                        .iter()
                        .filter(|_| file.requests > 0)
                        .map(|o| (o.kind.name().to_string(), o.stats.summary()))
                        .collect(),
                ),
                errors: (!errors.is_empty()).then_some(Ordered(errors)),
                losses: &file.losses,
            }
        })
        .collect();
    let totals = report.aggregate();
    let cwl_against_best = Versus::of(&totals);
    let aggregate = Ordered(
        totals
            .into_iter()
            .map(|(kind, stats)| (kind.name().to_string(), stats.summary()))
            .collect(),
    );
    let out = Report {
        budget: report.budget,
        budget_typed: &report.budget_typed,
        model: report.model.as_deref(),
        files,
        skipped: &report.skipped,
        aggregate,
        cwl_against_best,
    };
    serde_json::to_string_pretty(&out).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
