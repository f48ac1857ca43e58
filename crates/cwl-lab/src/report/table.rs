//! The human-readable report: a table per file and one aggregate.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};

use super::ReplayReport;
use crate::metrics::Stats;
use crate::policy::PolicyKind;

const HEADER: [&str; 13] = [
    "policy",
    "mean",
    "p95",
    "max",
    ">budget",
    "evict/req",
    "cache read",
    "cache write",
    "cost $",
    "lost anchors",
    "loss-free",
    "content loss-free",
    "view chg",
];

/// The whole report as text.
pub fn render(report: &ReplayReport) -> String {
    let mut out = String::new();
    for file in &report.files {
        let episodes = if file.annotated {
            "annotated"
        } else {
            "inferred episodes"
        };
        out.push_str(&format!(
            "{} ({}, {} requests, {episodes}, {} log compactions, {} warnings)\n",
            file.path,
            file.format,
            file.requests,
            file.log_compactions,
            file.warnings.len()
        ));
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
    }
    let aggregate = report.aggregate();
    out.push_str(&format!(
        "aggregate over {} files, {} requests (budget {}, costs for {})\n",
        report.files.len(),
        report.requests(),
        report.budget,
        report.model
    ));
    let rows: Vec<(PolicyKind, &Stats)> = aggregate.iter().map(|(k, s)| (*k, s)).collect();
    out.push_str(&table(&rows));
    out.push('\n');
    out
}

fn table(rows: &[(PolicyKind, &Stats)]) -> String {
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED).set_header(HEADER);
    for (kind, stats) in rows {
        let s = stats.summary();
        table.add_row(vec![
            kind.name().to_string(),
            thousands(s.tokens_mean.round() as u64),
            thousands(u64::from(s.tokens_p95)),
            thousands(u64::from(s.tokens_max)),
            percent(s.over_budget_share),
            format!("{:.2}", s.evictions),
            thousands(s.cache_read_tokens),
            thousands(s.cache_write_tokens),
            format!("{:.2}", s.cost_usd),
            format!("{} ({})", percent(s.lost_anchor_rate), s.anchors_lost),
            percent(s.loss_free_share),
            percent(s.content_loss_free_share),
            percent(s.view_changes),
        ]);
    }
    for column in table.column_iter_mut().skip(1) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table.to_string()
}

fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// `1234567` as `1,234,567`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
