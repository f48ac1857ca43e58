//! What the slash commands read from the engine: the episode list, a
//! preview of the next eviction pass, recalled content. Pure over a
//! [`Context`]: nothing here changes the session.

use std::path::Path;
use std::sync::Arc;

use cwl::{Context, EpisodeState, O200k, Origin, PaperOrder, Report};

use super::screen::EpisodeRow;
use crate::agent::status::human_tokens;
use crate::session::SessionTranscript;

/// The engine's episodes as panel rows, oldest first: those the model
/// annotated and those `recall` brought back (unannotated segments are
/// the harness's, not the model's work).
pub fn episode_rows(context: &Context) -> Vec<EpisodeRow> {
    let graph = context.graph();
    graph
        .episodes()
        .iter()
        .filter(|e| e.origin() != Origin::Unannotated)
        .map(|e| EpisodeRow {
            name: e.name().to_string(),
            kind: e.kind(),
            dependencies: e
                .dependencies()
                .iter()
                .map(|&id| graph.episode(id).name().to_string())
                .collect(),
            active: e.state() == EpisodeState::Active,
            level: e.level(),
            residue: e.description().map(str::to_string),
        })
        .collect()
}

/// `/episodes`: every episode with its kind, dependencies, tokens in view,
/// eviction level and residue.
pub fn episodes_text(context: &Context) -> String {
    let graph = context.graph();
    let mut text = String::new();
    for (id, e) in graph.episodes().iter().enumerate() {
        if e.origin() == Origin::Unannotated {
            continue;
        }
        let deps: Vec<&str> = e
            .dependencies()
            .iter()
            .map(|&d| graph.episode(d).name())
            .collect();
        let deps = if deps.is_empty() {
            String::new()
        } else {
            format!(" ← {}", deps.join(", "))
        };
        let state = match (e.state(), e.level()) {
            (EpisodeState::Active, _) => "active".to_string(),
            (_, Some(level)) => format!("evicted to {}", level.label()),
            (_, None) => "closed".to_string(),
        };
        let residue = e
            .description()
            .map(|d| format!(" · “{d}”"))
            .unwrap_or_default();
        text.push_str(&format!(
            "#{id} {} {}{deps} · {state} · {} in view{residue}\n",
            e.kind(),
            e.name(),
            human_tokens(e.tokens())
        ));
    }
    if text.is_empty() {
        text.push_str("no episodes yet: the model opens them with the delimiter tool\n");
    }
    text.push_str(&format!(
        "conversation {} in view; the engine evicts past {} (τ less the status block)",
        human_tokens(context.tokens()),
        human_tokens(context.budget())
    ));
    text
}

/// The pass a copy of `context` makes, and whether the real context is
/// over its budget (else the copy's budget was lowered to just under the
/// context's size, to show the order the next pass will follow).
pub fn preview(context: &Context) -> (Report, bool) {
    let mut copy = Context::restore(context.checkpoint(), Arc::new(O200k), Arc::new(PaperOrder))
        .expect("a checkpoint of this very process restores");
    let over = context.tokens() > context.budget();
    if !over {
        copy.set_budget(context.tokens().saturating_sub(1));
    }
    (copy.enforce(), over)
}

/// `/evict`: what the next eviction pass would remove, episode by
/// episode; the session is not changed.
pub fn preview_text(context: &Context) -> String {
    let (report, over) = preview(context);
    let mut text = if over {
        format!(
            "over budget ({} of τ {}): the next pass evicts down to {}:\n",
            human_tokens(report.tokens_before),
            human_tokens(context.budget()),
            human_tokens(report.floor)
        )
    } else {
        format!(
            "within budget ({} of τ {}): no pass runs yet. Once over, a pass takes, in this order:\n",
            human_tokens(report.tokens_before),
            human_tokens(context.budget())
        )
    };
    if report.episodes.is_empty() {
        text.push_str("  nothing: no closed episode can be evicted yet");
        return text;
    }
    for episode in &report.episodes {
        let levels: Vec<String> = episode
            .levels
            .iter()
            .map(|l| format!("{} −{}", l.level.label(), human_tokens(l.tokens)))
            .collect();
        text.push_str(&format!(
            "  {} {}: {}\n",
            episode.kind,
            episode.name,
            levels.join(", ")
        ));
    }
    if report.folded > 0 {
        text.push_str(&format!(
            "  and folds {} residue(s) into the index line\n",
            report.folded
        ));
    }
    text.push_str(&format!(
        "  {} tokens in all",
        human_tokens(report.tokens_removed())
    ));
    text
}

/// `/recall ID`: the evicted content of an episode (name or `#id`) or user
/// turn (`uN`), read back from the session file `session`, shown to the
/// user only (the model recalls with its own tool).
pub fn recall_text(context: &Context, session: &Path, reference: &str) -> Result<String, String> {
    let arguments = serde_json::json!({ "episode": reference }).to_string();
    context
        .recall(&arguments, &SessionTranscript::new(session))
        .map_err(|error| error.to_string())
}
