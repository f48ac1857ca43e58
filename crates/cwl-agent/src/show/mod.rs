//! `cwl sessions show`: one session's state and its strategy's health,
//! read by replaying its file (nothing is written).

mod selfgc;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cwl::{O200k, Record};
use serde::Serialize;

use crate::agent::STATUS_RESERVE;
use crate::agent::status::human_tokens;
use cwl_session::{
    ReplayOptions, SessionError, SessionUsage, Settings, notes_path, read, replay, session_usage,
};

/// What `cwl sessions show` tells about a session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionReport {
    /// The session id.
    pub id: String,
    /// Its file.
    pub path: PathBuf,
    /// The model it ran with.
    pub model: String,
    /// Its budget τ for a whole request.
    pub budget: u64,
    /// The strategy managing its context.
    pub strategy: String,
    /// User turns.
    pub tasks: usize,
    /// Messages in the view now.
    pub messages: usize,
    /// Prompt tokens of the view (calibrated).
    pub tokens: usize,
    /// Side calls made (summaries, plans), and how many failed.
    pub side_calls: usize,
    /// Of which failed or timed out.
    pub side_failures: usize,
    /// Tokens and cost of the whole session, sub-agents' calls included
    /// and shown apart.
    pub usage: SessionUsage,
    /// The notes file, when the strategy kept notes.
    pub notes: Option<PathBuf>,
    /// The strategy's health figures (`None`: it keeps none, as CWL).
    pub health: Option<serde_json::Value>,
    /// Where the replay disagreed with the file (should be empty).
    pub warnings: Vec<String>,
}

/// Reads and replays the session in file `path`.
pub fn report(path: &Path) -> Result<SessionReport, SessionError> {
    let loaded = read(path)?;
    let settings = Settings::try_last(loaded.records.iter().map(|(_, record)| record))
        .map_err(|error| SessionError::Replay {
            path: path.to_owned(),
            line: 0,
            reason: error.to_string(),
        })?
        .unwrap_or_default();
    let budget = usize::try_from(loaded.info.budget)
        .unwrap_or(usize::MAX)
        .saturating_sub(STATUS_RESERVE);
    let config = settings.session_config(budget, &loaded.info.model);
    let replayed = replay(
        &loaded,
        path,
        Arc::new(O200k),
        config,
        ReplayOptions::default(),
    )?;
    let context = replayed.context;
    let (mut side_calls, mut side_failures) = (0, 0);
    for (_, record) in &loaded.records {
        if let Record::SideCall { result, .. } = record {
            side_calls += 1;
            side_failures += usize::from(result.is_err());
        }
    }
    let notes = notes_path(path);
    Ok(SessionReport {
        id: loaded.info.id.clone(),
        path: path.to_owned(),
        model: loaded.info.model.clone(),
        budget: loaded.info.budget,
        strategy: context.name().to_string(),
        tasks: replayed.tasks,
        messages: context.view().count(),
        tokens: context.tokens(),
        side_calls,
        side_failures,
        usage: session_usage(loaded.records.iter().map(|(_, record)| record)),
        notes: (context.notes().is_some() && notes.exists()).then_some(notes),
        health: context.metrics(),
        warnings: loaded
            .warnings
            .into_iter()
            .chain(replayed.warnings)
            .collect(),
    })
}

fn percent(value: &serde_json::Value) -> String {
    value
        .as_f64()
        .map_or_else(|| "-".to_string(), |v| format!("{:.0}%", v * 100.0))
}

fn number(value: &serde_json::Value) -> String {
    value
        .as_f64()
        .map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
}

/// The report as text for people.
pub fn render(report: &SessionReport) -> String {
    let mut out = format!(
        "session {}  strategy {}, model {}, budget {}\nfile {}\n{} tasks · view {} messages, {} tokens · {} side calls ({} failed)\n",
        report.id,
        report.strategy,
        report.model,
        human_tokens(report.budget as usize),
        report.path.display(),
        report.tasks,
        report.messages,
        human_tokens(report.tokens),
        report.side_calls,
        report.side_failures,
    );
    out.push_str(&usage_line(&report.usage));
    if let Some(notes) = &report.notes {
        out.push_str(&format!("notes {}\n", notes.display()));
    }
    let Some(health) = &report.health else {
        out.push_str(&format!(
            "health: the {} strategy reports none\n",
            report.strategy
        ));
        return with_warnings(out, report);
    };
    if report.strategy == cwl_selfgc::strategy::NAME {
        out.push_str(&selfgc::render(health));
        return with_warnings(out, report);
    }
    let compression = &health["compression"];
    let trend: Vec<String> = health["trend"]
        .as_array()
        .map(|t| t.iter().map(percent).collect())
        .unwrap_or_default();
    out.push_str("health\n");
    out.push_str(&format!(
        "  utilisation   {} of the budget (zone {}), {}: {}\n",
        percent(&health["utilisation"]),
        health["zone"].as_str().unwrap_or("-"),
        health["direction"].as_str().unwrap_or("-"),
        trend.join(" ")
    ));
    out.push_str(&format!(
        "  eviction      {} blocks per call, {} passes\n",
        number(&health["eviction_rate"]),
        health["eviction_passes"]
    ));
    out.push_str(&format!(
        "  compression   {} asked, {} taken, {} refused, {} failed; ratio {}\n",
        compression["asked"],
        compression["accepted"],
        compression["rejected"],
        compression["failed"],
        health["compression_ratio"]
            .as_f64()
            .map_or_else(|| "-".to_string(), |r| format!("{r:.1}×"))
    ));
    if let Some(fidelity) = health["fidelity"].as_f64() {
        out.push_str(&format!("  fidelity      {fidelity:.2} (judged)\n"));
    }
    out.push_str(&format!(
        "  tool results  {} of the context\n",
        percent(&health["tool_result_bloat"])
    ));
    out.push_str(&format!(
        "  burn rate     {} tokens per call{}\n",
        number(&health["burn_rate"]),
        health["budgets"]["turns_until_exhausted"]
            .as_f64()
            .map(|turns| format!(", the window full in about {turns:.0} calls without compression"))
            .unwrap_or_default()
    ));
    if let Some(components) = health["budgets"]["components"].as_array() {
        let parts: Vec<String> = components
            .iter()
            .map(|pair| {
                format!(
                    "{} {}/{}",
                    pair[0].as_str().unwrap_or("-").replace('_', " "),
                    pair[1]["used"],
                    pair[1]["limit"]
                )
            })
            .collect();
        out.push_str(&format!("  budgets       {}\n", parts.join(" · ")));
    }
    let alerts: Vec<&str> = health["alerts"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if alerts.is_empty() {
        out.push_str("  alerts        none\n");
    }
    for alert in alerts {
        out.push_str(&format!("  alert         {alert}\n"));
    }
    with_warnings(out, report)
}

/// `usage 12 requests · 40.1k in (12k cached) / 2.3k out · $0.0123`, with
/// the sub-agents' share when there is one.
fn usage_line(usage: &SessionUsage) -> String {
    let spent = |s: &cwl_session::Spent| {
        let cached = if s.cached_input_tokens > 0 {
            format!(" ({} cached)", human_tokens(s.cached_input_tokens as usize))
        } else {
            String::new()
        };
        format!(
            "{} in{cached} / {} out · {}",
            human_tokens(s.input_tokens as usize),
            human_tokens(s.output_tokens as usize),
            s.cost_usd
                .map_or_else(|| "cost unknown".to_string(), |cost| format!("${cost:.4}"))
        )
    };
    let mut line = format!(
        "usage {} requests · {}",
        usage.requests,
        spent(&usage.total)
    );
    if usage.delegated_runs > 0 {
        line.push_str(&format!(
            "; of which {} sub-agent runs: {}",
            usage.delegated_runs,
            spent(&usage.delegated)
        ));
    }
    line.push('\n');
    line
}

fn with_warnings(mut out: String, report: &SessionReport) -> String {
    for warning in &report.warnings {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}
