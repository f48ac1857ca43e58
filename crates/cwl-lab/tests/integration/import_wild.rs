//! Importer tests on small logs shaped as the clients write them in the
//! wild (`tests/fixtures/import/wild/`): Codex CLI rollouts from 0.44 to
//! 0.171 and Claude Code sessions from 1.0 to 2.1, one variant each.

use crate::import_support;

use cwl::{Block, Message, ReasoningScope, Usage};
use cwl_lab::import::{self, Event};
use cwl_lab::metrics::cost;
use import_support::{Imported, assert_paired, fixture, run};

fn open(name: &str) -> Imported {
    let imported = run(import::open(&fixture(&format!("wild/{name}"))).unwrap());
    assert_paired(&imported.messages);
    imported
}

/// The prompt size and model of each model call, in order.
fn calls(imported: &Imported) -> Vec<(u64, Option<String>)> {
    import_support::calls(&imported.events)
        .into_iter()
        .map(|(usage, model)| (usage.map_or(0, |u| u.input_tokens), model))
        .collect()
}

/// The usage of each model call, in order.
fn usages(imported: &Imported) -> Vec<Option<Usage>> {
    import_support::calls(&imported.events)
        .into_iter()
        .map(|(usage, _)| usage)
        .collect()
}

/// A compaction's fields.
struct Compacted {
    tokens_before: Option<u64>,
    summary: Option<String>,
    restored: Vec<Message>,
}

fn compactions(imported: &Imported) -> Vec<Compacted> {
    imported
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Compaction {
                tokens_before,
                summary,
                restored,
                ..
            } => Some(Compacted {
                tokens_before: *tokens_before,
                summary: summary.clone(),
                restored: restored.clone(),
            }),
            _ => None,
        })
        .collect()
}

fn text(message: &Message) -> &str {
    match message {
        Message::User { content } | Message::System { content } => content,
        _ => "",
    }
}

fn models(names: &[&str]) -> Vec<Option<String>> {
    names.iter().map(|n| Some(n.to_string())).collect()
}

const AGENTS: &str = "# AGENTS.md instructions for /r\n\n<INSTRUCTIONS>\nRun the tests before you finish.\n</INSTRUCTIONS>";
const ENVIRONMENT: &str =
    "<environment_context>\n  <cwd>/r</cwd>\n  <shell>bash</shell>\n</environment_context>";
const WARNING: &str = "Warning: apply_patch was requested via shell_command. Use the apply_patch tool instead of exec_command.";

/// Codex 0.80: each call's `token_count` after its items (the first with
/// `info: null`), repeated after the next `turn_context`; a warning of
/// Codex's between a call and its count; a compaction without
/// `replacement_history`, whose own count and recomputed estimate belong
/// to no call.
#[test]
fn codex_0_80_counts_after_items_and_rebuilds_the_compacted_history() {
    let imported = open("codex-0.80-compaction.jsonl");
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    let inputs: Vec<u64> = calls(&imported).into_iter().map(|(i, _)| i).collect();
    assert_eq!(
        inputs,
        [4000, 4300, 1500, 1700],
        "one count per call, none moved"
    );
    assert_eq!(
        imported.messages[..3],
        [
            Message::user(AGENTS),
            Message::user(ENVIRONMENT),
            Message::user("Double the limits.")
        ],
        "the user instructions once, as Codex sent them (not again from session_meta)"
    );
    let [compaction] = &compactions(&imported)[..] else {
        panic!("one compaction");
    };
    assert_eq!(
        compaction.tokens_before,
        Some(4500),
        "the compaction call's prompt"
    );
    assert!(
        compaction
            .summary
            .as_deref()
            .unwrap()
            .ends_with("the README is next.")
    );
    assert_eq!(
        compaction.restored,
        [
            Message::user(AGENTS),
            Message::user(ENVIRONMENT),
            Message::user("Double the limits."),
            Message::user(WARNING),
        ],
        "initial context, then every user message, Codex's warning included"
    );
    assert_eq!(imported.stats.assistant_messages, 4);
}

/// Codex 0.171: base instructions, a developer message, `apply_patch` as
/// a custom tool, model switches in `turn_context`, and a compaction whose
/// `replacement_history` is what the history became.
#[test]
fn codex_0_171_custom_tools_model_switches_and_replacement_history() {
    let imported = open("codex-0.171-replacement.jsonl");
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    assert_eq!(
        calls(&imported),
        [
            (5000, Some("gpt-5.1-codex-max".to_string())),
            (5400, Some("gpt-5.2-codex".to_string())),
            (1900, Some("gpt-5.2-codex".to_string())),
        ]
    );
    let patch = imported
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Assistant { content } => content.iter().find_map(|b| match b {
                Block::ToolCall(call) if call.name == "apply_patch" => Some(call.clone()),
                _ => None,
            }),
            _ => None,
        })
        .expect("the custom tool call");
    let input: serde_json::Value = serde_json::from_str(&patch.arguments).unwrap();
    assert!(
        input["input"]
            .as_str()
            .unwrap()
            .starts_with("*** Begin Patch")
    );
    let failed = imported
        .messages
        .iter()
        .any(|m| matches!(m, Message::ToolResult(r) if r.call_id == "call_t" && r.is_error));
    assert!(failed, "`Process exited with code 1` is a failure");
    let [compaction] = &compactions(&imported)[..] else {
        panic!("one compaction");
    };
    assert_eq!(compaction.tokens_before, Some(5600));
    assert!(
        compaction
            .summary
            .as_deref()
            .unwrap()
            .ends_with("tests pass.")
    );
    let restored: Vec<&str> = compaction.restored.iter().map(text).collect();
    assert_eq!(
        restored.len(),
        4,
        "the summary is not restored twice: {restored:?}"
    );
    assert!(matches!(compaction.restored[0], Message::System { .. }));
    assert!(restored[0].starts_with("<permissions instructions>"));
    assert_eq!(restored[1..], [AGENTS, ENVIRONMENT, "Fix a.py."]);
    for model in ["gpt-5.1-codex-max", "gpt-5.2-codex"] {
        assert_eq!(
            ReasoningScope::of_model(model),
            ReasoningScope::CurrentTurn,
            "{model}"
        );
        assert!(cost::lookup(model).is_some(), "{model} is priced");
    }
}

/// Codex 0.44: the `token_count` of a call comes before its items.
#[test]
fn codex_0_44_counts_before_items() {
    let imported = open("codex-0.44-count-first.jsonl");
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    let inputs: Vec<u64> = calls(&imported).into_iter().map(|(i, _)| i).collect();
    assert_eq!(inputs, [3000, 3100]);
}

/// Claude Code 2.0.77: one response over several lines that repeat its
/// usage (counted once), and a compaction after which the files read and
/// edited and the todo list, which this version does not log, are
/// modeled as it re-read them.
#[test]
fn claude_code_2_0_models_the_files_it_restores_after_a_compaction() {
    let imported = open("claude-2.0.77-compaction.jsonl");
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    assert_eq!(
        usages(&imported)[0],
        Some(Usage {
            input_tokens: 10_003,
            cached_input_tokens: 9_000,
            cache_write_tokens: 1_000,
            output_tokens: 40,
        }),
        "two lines of one response, one call"
    );
    let inputs: Vec<u64> = calls(&imported).into_iter().map(|(i, _)| i).collect();
    assert_eq!(inputs, [10_003, 10_302, 10_502, 10_652, 10_752, 4_003]);
    let [compaction] = &compactions(&imported)[..] else {
        panic!("one compaction");
    };
    assert_eq!(compaction.tokens_before, Some(10_752));
    assert!(
        compaction
            .summary
            .as_deref()
            .unwrap()
            .starts_with("This session is being continued")
    );
    let restored: Vec<&str> = compaction.restored.iter().map(text).collect();
    assert_eq!(restored.len(), 3, "{restored:?}");
    assert!(restored[0].starts_with(
        "<system-reminder>\nCalled the Read tool with the following input: {\"file_path\":\"/p/a.py\"}\n</system-reminder>\n<system-reminder>\nResult of calling the Read tool: \"     1→x = 10\\n     2→y = 2\\n     3→\\n\\n<system-reminder>"
    ), "the edited file, first: {}", restored[0]);
    assert!(
        restored[1].contains("/p/b.txt") && restored[1].contains("     8→beta"),
        "a file read in part, to its 8 lines: {}",
        restored[1]
    );
    assert!(
        restored[2].contains("Your todo list has changed") && restored[2].contains("Check b.txt")
    );
    assert!(
        !imported
            .messages
            .iter()
            .any(|m| text(m).contains("Called the Read tool")),
        "restored context stays out of the history"
    );
}

/// Claude Code 1.0.53: a sub-agent's sidechain lines in the main file
/// are not the session's calls; a compaction has no boundary line, only a
/// summary with `parentUuid: null`.
#[test]
fn claude_code_1_0_sidechains_and_a_summary_without_boundary() {
    let imported = open("claude-1.0.53-summary.jsonl");
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    assert_eq!(
        calls(&imported),
        [
            (7_004, Some("claude-opus-4-20250514".to_string())),
            (7_304, Some("claude-opus-4-20250514".to_string())),
            (7_404, Some("claude-opus-4-20250514".to_string())),
            (3_004, Some("claude-opus-4-20250514".to_string())),
        ],
        "the sub-agent's two calls are not the session's"
    );
    assert!(
        !imported
            .messages
            .iter()
            .any(|m| text(m) == "List the test files.")
    );
    let [compaction] = &compactions(&imported)[..] else {
        panic!("one compaction");
    };
    assert_eq!(compaction.tokens_before, None);
    assert!(compaction.summary.is_some());
    let restored: Vec<&str> = compaction.restored.iter().map(text).collect();
    assert_eq!(restored.len(), 1, "{restored:?}");
    assert!(restored[0].contains("/p/tests/t.py") && restored[0].contains("assert a.x == 10"));
    assert!(
        !imported
            .messages
            .iter()
            .any(|m| text(m).starts_with("This session is being")),
        "the summary is no user turn"
    );
}

/// Claude Code 2.1: the context restored after a compaction is logged as
/// attachment lines after the summary: they are the compaction's
/// `restored`, not history.
#[test]
fn claude_code_2_1_logged_attachments_are_what_was_restored() {
    let imported = open("claude-2.1-attachments.jsonl");
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    let [compaction] = &compactions(&imported)[..] else {
        panic!("one compaction");
    };
    assert_eq!(compaction.tokens_before, Some(10_110));
    let restored: Vec<&str> = compaction.restored.iter().map(text).collect();
    assert_eq!(
        restored[0],
        "Called the Read tool with the following input: {\"file_path\":\"/p/a.py\"}\nResult of calling the Read tool:\n1\tx = 1\n2\ty = 2"
    );
    assert!(restored[1].starts_with("<system-reminder>\nYour todo list has changed"));
    assert_eq!(restored.len(), 2);
    let users: Vec<&str> = imported
        .messages
        .iter()
        .filter(|m| matches!(m, Message::User { .. }))
        .map(text)
        .collect();
    assert_eq!(users, ["Fix a.py.", "Go on."]);
}

/// A session whose every call is Claude Haiku 4.5: its model, price and
/// reasoning rule.
#[test]
fn claude_code_haiku_session() {
    let path = fixture("wild/claude-haiku.jsonl");
    let model = "claude-haiku-4-5-20251001";
    let import = import::open(&path).unwrap();
    assert_eq!(import.meta().model.as_deref(), Some(model));
    let imported = run(import);
    assert_eq!(
        calls(&imported)
            .into_iter()
            .map(|(_, m)| m)
            .collect::<Vec<_>>(),
        models(&[model, model])
    );
    let price = cost::lookup(model).expect("priced");
    assert_eq!(price.priced_as, "claude-haiku-4-5");
    assert_eq!((price.input, price.output), (1.0, 5.0));
    assert_eq!(ReasoningScope::of_model(model), ReasoningScope::CurrentTurn);
    let Some(Message::Assistant { content }) = imported.messages.get(1) else {
        panic!("the first call");
    };
    assert!(
        matches!(content[0], Block::Reasoning { .. }),
        "thinking kept"
    );
}
