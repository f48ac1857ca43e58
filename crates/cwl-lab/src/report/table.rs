//! The human-readable report: a table per file (unless asked for the
//! aggregate only) and one aggregate. Headers state the model and budget
//! as the user typed them; a file with no model call says so instead of
//! showing a table.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};

use super::ReplayReport;
use super::versus::Versus;
use crate::calibrate::Fidelity;
use crate::metrics::Stats;
use crate::metrics::cost::ModelSource;
use crate::metrics::sent::ReasoningScope;
use crate::policy::PolicyKind;
use crate::replay::FileReport;

const HEADER: [&str; 15] = [
    "policy",
    "mean",
    "p95",
    "max",
    ">budget",
    "engine >τ",
    "evict/req",
    "cache read",
    "cache write",
    "cost $",
    "lost anchors",
    "loss-free",
    "content loss-free",
    "view chg",
    "prune",
];

/// Skipped files listed by name in the aggregate-only view; the rest are
/// counted (a directory of a client's state can hold hundreds of files
/// that are no session log).
const SKIPPED_LISTED: usize = 10;

/// The whole report as text: every file's table, then the aggregate.
pub fn render(report: &ReplayReport) -> String {
    render_with(report, true)
}

/// The report as text; per-file tables only when `per_file`.
pub fn render_with(report: &ReplayReport, per_file: bool) -> String {
    let mut out = String::new();
    if per_file {
        for file in &report.files {
            out.push_str(&file_section(report, file));
        }
    }
    let listed = if per_file {
        report.skipped.len()
    } else {
        SKIPPED_LISTED
    };
    for skipped in report.skipped.iter().take(listed) {
        out.push_str(&format!("skipped {}\n", skipped.describe()));
    }
    if let Some(more) = report.skipped.len().checked_sub(listed).filter(|n| *n > 0) {
        out.push_str(&format!(
            "… and {more} more skipped (--per-file or --json lists every one)\n"
        ));
    }
    if !report.skipped.is_empty() {
        out.push('\n');
    }
    let aggregate = report.aggregate();
    let silent = report.files.iter().filter(|f| f.requests == 0).count();
    let mut notes = String::new();
    if silent > 0 {
        notes.push_str(&format!(", {silent} with no model call"));
    }
    if !report.skipped.is_empty() {
        notes.push_str(&format!(", {} skipped", report.skipped.len()));
    }
    out.push_str(&format!(
        "aggregate over {} files{notes}, {} requests (budget {}, {})\n",
        report.files.len(),
        report.requests(),
        report.budget_typed,
        report.models_line()
    ));
    if let Some(line) = fidelity_line(report) {
        out.push_str(&line);
    }
    let rows: Vec<(PolicyKind, &Stats)> = aggregate.iter().map(|(k, s)| (*k, s)).collect();
    out.push_str(&table(&rows));
    if let Some(versus) = Versus::of(&aggregate) {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&versus.line());
    }
    out.push('\n');
    out
}

/// How the replay of what the logs' harnesses sent compares with their
/// logged prompt sizes, over every file that logs one.
fn fidelity_line(report: &ReplayReport) -> Option<String> {
    let logged: Vec<&Fidelity> = report
        .files
        .iter()
        .map(|f| &f.fidelity)
        .filter(|f| f.compared_calls > 0)
        .collect();
    if logged.is_empty() {
        return None;
    }
    let calls: u64 = logged.iter().map(|f| f.logged_calls).sum();
    let compared: u64 = logged.iter().map(|f| f.compared_calls).sum();
    let anchored: u64 = logged.iter().map(|f| f.anchored_calls).sum();
    let weighted = |mean: fn(&Fidelity) -> Option<f64>| -> f64 {
        logged
            .iter()
            .map(|f| mean(f).unwrap_or(0.0) * f.compared_calls as f64)
            .sum::<f64>()
            / compared as f64
    };
    let logged_mean = weighted(|f| f.logged_prompt_tokens_mean);
    let replayed_mean = weighted(|f| f.replayed_prompt_tokens_mean);
    let medians = logged.iter().filter_map(|f| f.prompt_tokens_error_median);
    let worst_median = medians.fold(0.0, f64::max);
    let worst_share = logged
        .iter()
        .map(|f| f.compared_share())
        .fold(1.0, f64::min);
    let worst_gap = logged
        .iter()
        .filter_map(|f| {
            let (l, r) = (f.logged_prompt_tokens_mean?, f.replayed_prompt_tokens_mean?);
            Some((r - l) / l)
        })
        .fold(
            0.0f64,
            |worst, gap| if gap.abs() > worst.abs() { gap } else { worst },
        );
    Some(format!(
        "fidelity over {} files: the replay as their harnesses sent them compared on {} of {} calls that log a prompt size ({:.1}%; {} sized from the log after an edit it does not hold), logged mean {} vs replayed {} ({:+.1}%); per file at worst {:.1}% of calls compared, {:+.1}% on the mean, {:.1}% median call error\n",
        logged.len(),
        compared,
        calls,
        compared as f64 / calls.max(1) as f64 * 100.0,
        anchored,
        thousands(logged_mean.round() as u64),
        thousands(replayed_mean.round() as u64),
        (replayed_mean - logged_mean) / logged_mean * 100.0,
        worst_share * 100.0,
        worst_gap * 100.0,
        worst_median * 100.0,
    ))
}

fn file_section(report: &ReplayReport, file: &FileReport) -> String {
    let mut out = String::new();
    if file.requests == 0 {
        out.push_str(&format!(
            "{} ({}, {} warnings): no model call in this log; nothing to replay\n\n",
            file.path,
            file.format,
            file.warnings.len()
        ));
        return out;
    }
    let episodes = if file.annotated {
        "annotated"
    } else {
        "inferred episodes"
    };
    let drops = match file.log_prompt_drops {
        0 => String::new(),
        n => format!(", {n} log prompt drops"),
    };
    out.push_str(&format!(
        "{} ({}, {} requests, {episodes}, {} log compactions{drops}, {} warnings)\n",
        file.path,
        file.format,
        file.requests,
        file.log_compactions,
        file.warnings.len()
    ));
    let source = match file.model_source {
        Some(ModelSource::Flag) => ", --model",
        Some(ModelSource::Log) => ", the log's model",
        Some(ModelSource::Default) => ", default: the log names none",
        None => "",
    };
    let price = if !file.priced {
        "; not in the price table: cost unknown".to_string()
    } else if file.priced_as != file.model {
        format!(", priced as {}", file.priced_as)
    } else {
        String::new()
    };
    let budget = if report.budget_typed.ends_with('%') {
        format!(
            "{} = {} tokens",
            report.budget_typed,
            thousands(file.budget as u64)
        )
    } else {
        report.budget_typed.clone()
    };
    out.push_str(&format!(
        "  model {}{source}{price}; budget {budget}\n",
        file.model
    ));
    out.push_str(&format!("  {}\n", calibration_line(file)));
    let rows: Vec<(PolicyKind, &Stats)> =
        file.policies.iter().map(|o| (o.kind, &o.stats)).collect();
    out.push_str(&table(&rows));
    out.push('\n');
    for outcome in &file.policies {
        if let Some(why) = &outcome.failed {
            out.push_str(&format!("  {} stopped early: {why}\n", outcome.kind));
        }
    }
    out.push('\n');
    out
}

/// How the file's counts were calibrated, and how the replayed full
/// history compares with the logged prompts.
fn calibration_line(file: &FileReport) -> String {
    let c = &file.calibration;
    let f = &file.fidelity;
    let how = if c.from_log {
        let reasoning = match c.reasoning_scope {
            None => "",
            Some(ReasoningScope::AllTurns) => {
                ", earlier turns' reasoning counted (as the logged prompt sizes show, against the model's rule)"
            }
            Some(ReasoningScope::CurrentTurn) => {
                ", earlier turns' reasoning not counted (as the logged prompt sizes show, against the model's rule)"
            }
        };
        format!(
            "tokens calibrated to the log: +{} system/tool tokens, ×{:.3} per local token{reasoning}",
            thousands(c.system_tokens_estimate),
            c.token_ratio
        )
    } else if c.system_tokens_estimate > 0 {
        format!(
            "tokens uncalibrated (local counts) + {} estimated for the client's own instructions and tools",
            thousands(c.system_tokens_estimate)
        )
    } else {
        "tokens uncalibrated (local counts)".to_string()
    };
    let before = match file.log_compactions {
        0 => "",
        _ => " before the log's first compaction",
    };
    let cost = match (f.logged_cost_usd, f.replayed_cost_usd) {
        (Some(logged), Some(replayed)) if logged > 0.0 => format!(
            "; logged cost ${logged:.2} vs replayed full history ${replayed:.2} ({:+.1}%){before}",
            (replayed - logged) / logged * 100.0,
        ),
        _ => String::new(),
    };
    let fallback = if c.fallback {
        " (too few calls before the harness first edited its prompt: the client's known size)"
    } else {
        ""
    };
    match (
        f.logged_prompt_tokens_mean,
        f.replayed_prompt_tokens_mean,
        f.prompt_tokens_error_median,
    ) {
        (Some(logged), Some(replayed), Some(median)) => format!(
            "{how}{fallback}; logged prompt mean {} vs replayed as sent {} ({:+.1}%), median error {:.1}%, over {} of {} calls{}{cost}",
            thousands(logged.round() as u64),
            thousands(replayed.round() as u64),
            (replayed - logged) / logged * 100.0,
            median * 100.0,
            f.compared_calls,
            f.logged_calls,
            edits(f),
        ),
        _ => format!("{how}{fallback}; the log records no prompt size{cost}"),
    }
}

/// The harness's own edits the replay followed, for the calibration line.
fn edits(f: &Fidelity) -> String {
    let parts: Vec<String> = [
        (f.compactions, "compactions followed"),
        (
            f.clearings,
            "unlogged clearings of old tool results replayed",
        ),
        (f.cuts, "unlogged cuts"),
        (
            f.anchored_calls,
            "calls after an edit the log does not hold sized from the log",
        ),
    ]
    .into_iter()
    .filter(|(count, _)| *count > 0)
    .map(|(count, what)| format!("{count} {what}"))
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

fn table(rows: &[(PolicyKind, &Stats)]) -> String {
    let judged = rows.iter().any(|(_, s)| s.judged + s.judge_failed > 0);
    let mut header = HEADER.to_vec();
    if judged {
        header.push("no-impact");
    }
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED).set_header(header);
    let mut partial = 0u64;
    for (kind, stats) in rows {
        let s = stats.summary();
        let engine = s.budget_unmet.map_or_else(
            || "–".to_string(),
            |n| format!("{} ({})", n, percent(share(n, s.requests))),
        );
        let cost = match s.cost_usd {
            None => "unknown".to_string(),
            Some(c) if s.unpriced_requests > 0 => {
                partial = partial.max(s.unpriced_requests);
                format!("{c:.2}*")
            }
            Some(c) => format!("{c:.2}"),
        };
        let mut row = vec![
            kind.name().to_string(),
            thousands(s.tokens_mean.round() as u64),
            thousands(u64::from(s.tokens_p95)),
            thousands(u64::from(s.tokens_max)),
            percent(s.over_budget_share),
            engine,
            format!("{:.2}", s.evictions),
            cache(s.cost_usd, s.cache_read_tokens),
            cache(s.cost_usd, s.cache_write_tokens),
            cost,
            format!("{} ({})", percent(s.lost_anchor_rate), s.anchors_lost),
            percent(s.loss_free_share),
            percent(s.content_loss_free_share),
            percent(s.view_changes),
            percent(s.prune),
        ];
        if judged {
            row.push(match s.no_impact_rate {
                Some(rate) => format!("{} of {}", percent(rate), s.judged),
                None => "–".to_string(),
            });
        }
        table.add_row(row);
    }
    for column in table.column_iter_mut().skip(1) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    let mut text = table.to_string();
    if partial > 0 {
        text.push_str(&format!(
            "\n* cost of the priced requests only: up to {partial} requests are of models with no price"
        ));
    }
    for (kind, stats) in rows {
        text.push_str(&side_note(*kind, stats));
    }
    text
}

/// What a policy's side requests lacked: skipped (no model) and failed
/// ones, or nothing when every one was answered.
fn side_note(kind: PolicyKind, stats: &Stats) -> String {
    let mut parts = Vec::new();
    if stats.side_requests_skipped > 0 {
        parts.push(format!(
            "{} side requests skipped (no --model-url)",
            stats.side_requests_skipped
        ));
    }
    if stats.judge_failed > 0 {
        parts.push(format!("{} judgments failed", stats.judge_failed));
    }
    if stats.side_requests_failed > 0 {
        parts.push(format!(
            "{} side requests failed",
            stats.side_requests_failed
        ));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(
        "\n{kind}: {}; its figures are without what they would have changed",
        parts.join(", ")
    )
}

/// Cache tokens, or `–` when no request had a known model (its caching
/// rules are unknown too).
fn cache(cost: Option<f64>, tokens: u64) -> String {
    match cost {
        Some(_) => thousands(tokens),
        None => "–".to_string(),
    }
}

fn share(n: u64, d: u64) -> f64 {
    if d == 0 { 0.0 } else { n as f64 / d as f64 }
}

fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// `1234567` as `1,234,567`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn skipped_and_failed_side_requests_are_named_per_policy() {
        let stats = Stats {
            tokens: vec![100, 100],
            evictions: vec![0, 0],
            prune_sum: 0.5,
            side_requests_skipped: 3,
            ..Stats::default()
        };
        let text = table(&[
            (PolicyKind::CWM, &stats),
            (PolicyKind::None, &Stats::default()),
        ]);
        assert!(
            text.contains("cwm: 3 side requests skipped (no --model-url)"),
            "{text}"
        );
        assert!(!text.contains("none:"), "{text}");
        assert!(text.contains("prune") && text.contains("25.0%"), "{text}");
        let failed = Stats {
            side_requests_failed: 2,
            ..Stats::default()
        };
        assert!(side_note(PolicyKind::CWM, &failed).contains("2 side requests failed"));
        assert!(
            !text.contains("no-impact"),
            "no column without a judge: {text}"
        );
        let judged = Stats {
            tokens: vec![100],
            evictions: vec![0],
            judged: 4,
            no_impact: 3,
            judge_failed: 1,
            ..Stats::default()
        };
        let text = table(&[
            (PolicyKind::Cwl, &judged),
            (PolicyKind::None, &Stats::default()),
        ]);
        assert!(
            text.contains("no-impact") && text.contains("75.0% of 4"),
            "{text}"
        );
        assert!(text.contains("cwl: 1 judgments failed"), "{text}");
    }
}
