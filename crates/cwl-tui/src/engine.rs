//! What the slash commands read from the engine: the episode list, a
//! preview of the next eviction pass, recalled content. Pure over the
//! session's [`Strategy`] (CWL's [`cwl::Context`] or another): nothing
//! here changes the session.

use std::path::Path;
use std::sync::Arc;

use cwl::{EpisodeState, O200k, Origin, Report, Strategy};

use super::screen::EpisodeRow;
use cwl_agent::agent::status::human_tokens;
use cwl_session::{SessionTranscript, SidecarDir};

/// The engine's episodes as panel rows, oldest first: those the model
/// annotated and those `recall` brought back (unannotated segments are
/// the harness's, not the model's work).
pub fn episode_rows(context: &dyn Strategy) -> Vec<EpisodeRow> {
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
pub fn episodes_text(context: &dyn Strategy) -> String {
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
        let deps = cwl_agent::render::describe::dependencies(&deps);
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
/// context's size, to show the order the next pass will follow). The copy
/// is of the session's own strategy, counted as the agent counts (o200k).
pub fn preview(context: &dyn Strategy) -> Result<(Report, bool), String> {
    let mut copy = cwl_session::strategy::copy(context, Arc::new(O200k))?;
    let over = context.tokens() > context.budget();
    if !over {
        copy.set_budget(context.tokens().saturating_sub(1));
    }
    Ok((copy.enforce(), over))
}

/// `/evict`: what the next eviction pass would remove, episode by
/// episode; the session is not changed.
pub fn preview_text(context: &dyn Strategy) -> String {
    let (report, over) = match preview(context) {
        Ok(preview) => preview,
        Err(error) => {
            return format!(
                "no preview: the {} strategy could not be copied: {error}",
                context.name()
            );
        }
    };
    let mut text = if over {
        format!(
            "over the engine's limit ({} of {}, τ less the status block): the next pass evicts down to {}:\n",
            human_tokens(report.tokens_before),
            human_tokens(context.budget()),
            human_tokens(report.floor)
        )
    } else {
        format!(
            "within the engine's limit ({} of {}, τ less the status block): no pass runs yet. Once over, a pass takes, in this order:\n",
            human_tokens(report.tokens_before),
            human_tokens(context.budget())
        )
    };
    if report.episodes.is_empty() {
        if report.tokens_removed() == 0 {
            text.push_str("  nothing: no closed episode can be evicted yet");
        } else {
            text.push_str(&format!(
                "  {} tokens, chosen block by block by the {} strategy (it reports no episodes)",
                human_tokens(report.tokens_removed()),
                context.name()
            ));
        }
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
pub fn recall_text(
    context: &dyn Strategy,
    session: &Path,
    reference: &str,
) -> Result<String, String> {
    let arguments = serde_json::json!({ "episode": reference }).to_string();
    context.recall_with(
        &arguments,
        &SessionTranscript::new(session),
        &SidecarDir::of(session),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Block, Config, Context, EpisodeKind, Level, Message, ToolCall};
    use cwl_session::strategy::StrategyName;
    use serde_json::json;

    fn call(id: &str, name: &str, arguments: serde_json::Value) -> Block {
        Block::ToolCall(ToolCall::new(id, name, arguments.to_string()))
    }

    /// A read in an expl, then an act depending on it.
    fn context(budget: usize) -> Context {
        let mut context = Context::new(
            Config::with_budget(budget),
            Arc::new(O200k),
            vec![cwl::delimiter_spec(), cwl::recall_spec()],
        );
        session(&mut context);
        context
    }

    /// The same session under `strategy`.
    fn session(strategy: &mut dyn Strategy) {
        let mut push = |message: Message| {
            strategy.push(message).unwrap();
        };
        push(Message::user("fix the parser"));
        push(Message::Assistant {
            content: vec![
                call(
                    "d1",
                    "delimiter",
                    json!({"action": "start", "name": "read-parser", "type": "expl"}),
                ),
                call("c1", "read", json!({"path": "parse.rs"})),
            ],
        });
        push(Message::tool_result("d1", "delimiter", "started", false));
        let file: String = (0..400)
            .map(|i| format!("let token_{i} = next();\n"))
            .collect();
        push(Message::tool_result("c1", "read", file, false));
        push(Message::Assistant {
            content: vec![
                call(
                    "d2",
                    "delimiter",
                    json!({"action": "end", "description": "parse() drops the last token"}),
                ),
                call(
                    "d3",
                    "delimiter",
                    json!({"action": "start", "name": "fix-parser", "type": "act", "dependencies": ["read-parser"]}),
                ),
            ],
        });
        push(Message::tool_result("d2", "delimiter", "ended", false));
        push(Message::tool_result("d3", "delimiter", "started", false));
        push(Message::Assistant {
            content: vec![
                call("d4", "delimiter", json!({"action": "end"})),
                call(
                    "d5",
                    "delimiter",
                    json!({"action": "start", "name": "read-tests", "type": "expl"}),
                ),
            ],
        });
        push(Message::tool_result("d4", "delimiter", "ended", false));
        push(Message::tool_result("d5", "delimiter", "started", false));
        push(Message::assistant_text("Reading the tests."));
    }

    #[test]
    fn rows_and_list_show_kinds_dependencies_and_states() {
        let context = context(100_000);
        let rows = episode_rows(&context);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].name, "read-parser");
        assert_eq!(rows[0].kind, EpisodeKind::Expl);
        assert!(!rows[0].active);
        assert_eq!(
            rows[0].residue.as_deref(),
            Some("parse() drops the last token")
        );
        assert_eq!(rows[1].dependencies, ["read-parser"]);
        assert!(!rows[1].active);
        assert!(rows[2].active);
        let text = episodes_text(&context);
        assert!(text.contains("#0 expl read-parser · closed"), "{text}");
        assert!(
            text.contains("act fix-parser ← read-parser · closed"),
            "{text}"
        );
    }

    #[test]
    fn the_preview_names_what_goes_and_changes_nothing() {
        let context = context(100_000);
        let before = context.tokens();
        let text = preview_text(&context);
        assert!(text.starts_with("within the engine's limit"), "{text}");
        assert!(text.contains("expl read-parser:"), "{text}");
        assert_eq!(
            context.tokens(),
            before,
            "the session's context is untouched"
        );
        assert_eq!(context.graph().episodes()[0].level(), None);

        let small = context.tokens() / 2;
        let over = self::context(small);
        let (report, is_over) = preview(&over).unwrap();
        assert!(is_over);
        assert!(report.tokens_removed() > 0);
        let text = preview_text(&over);
        assert!(text.starts_with("over the engine's limit"), "{text}");
        assert_eq!(over.graph().episodes()[0].level(), None);

        let mut evicted = self::context(small);
        assert_eq!(evicted.enforce(), report, "the preview is the pass itself");
        assert!(evicted.graph().episodes()[0].level() >= Some(Level::Intermediate));
    }

    #[test]
    fn recall_refuses_what_is_still_in_view() {
        let context = context(100_000);
        let error = recall_text(&context, Path::new("/nonexistent"), "read-parser").unwrap_err();
        assert!(error.contains("read-parser"), "{error}");
        let error = recall_text(&context, Path::new("/nonexistent"), "nope").unwrap_err();
        assert!(error.contains("nope"), "{error}");
    }

    #[test]
    fn a_cwm_session_previews_its_own_strategy_and_refuses_recall() {
        let tokens = context(100_000).tokens();
        let mut cwm = StrategyName::Cwm.create(
            Config::with_budget(tokens / 2),
            Arc::new(O200k),
            vec![cwl::delimiter_spec(), cwl::recall_spec()],
        );
        session(cwm.as_mut());
        let before: Vec<Message> = cwm.view().cloned().collect();
        let (report, over) = preview(cwm.as_ref()).unwrap();
        assert!(over);
        assert!(report.tokens_removed() > 0, "{report:?}");
        let text = preview_text(cwm.as_ref());
        assert!(text.starts_with("over the engine's limit"), "{text}");
        assert!(
            text.contains("block by block by the cwm strategy"),
            "{text}"
        );
        assert!(
            cwm.view().cloned().eq(before.iter().cloned()),
            "the session's view is untouched"
        );
        let mut real = cwl_session::strategy::copy(cwm.as_ref(), Arc::new(O200k)).unwrap();
        assert_eq!(real.enforce(), report, "the preview is the cwm pass itself");

        let error =
            recall_text(cwm.as_ref(), Path::new("/nonexistent"), "read-parser").unwrap_err();
        assert!(error.contains("cwm"), "{error}");
        assert_eq!(
            episode_rows(cwm.as_ref()).len(),
            3,
            "the cwm keeps the episodes marked"
        );
    }
}
