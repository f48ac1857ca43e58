//! Calibration to logged prompt sizes, end to end on a pi-style log whose
//! usage the test controls: every logged prompt is `SYSTEM + RATIO ×` the
//! local count of the history before it, except one noisy call, and a
//! compaction after which the logged prompt shrinks.

use crate::lab_common;

use std::io::Write;
use std::sync::Arc;

use cwl::tokens::message_tokens;
use cwl::{Estimate, Message, ToolCall, ToolResult};
use cwl_lab::calibrate::{self, Calibration};
use cwl_lab::metrics::sent::ReasoningScope;
use cwl_lab::policy::PolicyKind;
use cwl_lab::replay::{ReplayConfig, replay_with};
use cwl_lab::session::Session;
use serde_json::json;

const SYSTEM: f64 = 3000.0;
const RATIO: f64 = 1.25;
const CALLS_BEFORE_COMPACTION: usize = 12;

/// Writes the log; returns its path (inside `dir`).
fn write_log(dir: &std::path::Path) -> std::path::PathBuf {
    let counter = Estimate;
    let path = dir.join("calibrated.jsonl");
    let mut out = std::fs::File::create(&path).unwrap();
    let mut line = |value: serde_json::Value| writeln!(out, "{value}").unwrap();
    line(
        json!({"type": "session", "version": 3, "id": "s", "timestamp": "2025-03-01T10:00:00.000Z",
        "cwd": "/w", "provider": "anthropic", "modelId": "claude-sonnet-4-5"}),
    );
    let user = "please read every file in src and summarize them";
    line(
        json!({"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": user}]}}),
    );
    let mut local = message_tokens(&counter, &Message::user(user));
    let summary = "read files";
    let logged = |local: usize, i: usize| {
        let noise = if i == 5 { 900.0 } else { 0.0 };
        (SYSTEM + RATIO * local as f64 + noise).round() as u64
    };
    for i in 0..CALLS_BEFORE_COMPACTION + 4 {
        if i == CALLS_BEFORE_COMPACTION {
            // pi keeps the latest entries from `firstKeptEntryIndex` (a
            // 0-based line); this one keeps none of them.
            line(
                json!({"type": "compaction", "summary": summary, "firstKeptEntryIndex": 99, "tokensBefore": 9}),
            );
            local = message_tokens(&counter, &Message::user(summary));
        }
        let input = logged(local, i);
        let id = format!("t{i}");
        let arguments = format!(r#"{{"path":"src/f{i}.rs"}}"#);
        line(json!({"type": "message", "message": {"role": "assistant",
            "content": [{"type": "toolCall", "id": id, "name": "read", "arguments": {"path": format!("src/f{i}.rs")}}],
            "usage": {"input": input, "output": 10, "cacheRead": 0, "cacheWrite": 0}, "stopReason": "toolUse"}}));
        let assistant = Message::Assistant {
            content: vec![cwl::Block::ToolCall(ToolCall::new(&id, "read", &arguments))],
        };
        let output = format!("fn f{i}() {{}}\n").repeat(40 * (i + 1));
        line(
            json!({"type": "message", "message": {"role": "toolResult", "toolCallId": id, "toolName": "read",
            "content": [{"type": "text", "text": output}], "isError": false}}),
        );
        let result = Message::ToolResult(ToolResult {
            call_id: id.clone(),
            tool_name: "read".into(),
            content: output,
            is_error: false,
        });
        local += message_tokens(&counter, &assistant) + message_tokens(&counter, &result);
    }
    path
}

fn config(budget: usize) -> ReplayConfig {
    ReplayConfig {
        policies: vec![PolicyKind::None, PolicyKind::Truncate, PolicyKind::Cwl],
        counter: Arc::new(Estimate),
        ..lab_common::config(budget)
    }
}

#[test]
fn recovers_overhead_and_ratio_and_matches_the_logged_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path());
    let measured = calibrate::measure(Session::open(&path).unwrap(), &Estimate);
    let calibration = measured.calibration;
    assert!(calibration.from_log);
    assert!(
        (calibration.token_ratio - RATIO).abs() < 0.01,
        "{calibration:?}"
    );
    assert!(
        (calibration.system_tokens_estimate as f64 - SYSTEM).abs() <= 2.0,
        "{calibration:?}"
    );
    assert!(calibration.ratio_samples >= 8, "{calibration:?}");

    let cfg = config(12_000);
    let file = replay_with(
        Session::open(&path).unwrap(),
        "calibrated.jsonl",
        &cfg,
        measured,
        &mut || {},
    );
    let f = file.fidelity;
    assert_eq!(
        (f.logged_calls, f.compared_calls, f.compactions),
        (
            CALLS_BEFORE_COMPACTION as u64 + 4,
            CALLS_BEFORE_COMPACTION as u64 + 4,
            1
        ),
        "calls after the compaction are compared too, against the summary in place of the history: {f:?}"
    );
    let logged = f.logged_prompt_tokens_mean.unwrap();
    let replayed = f.replayed_prompt_tokens_mean.unwrap();
    assert!((replayed - logged).abs() / logged < 0.02, "{f:?}");
    assert!(f.prompt_tokens_error_mean.unwrap() < 0.02, "{f:?}");
    let local = f.local_prompt_tokens_mean.unwrap();
    assert!(
        (logged - local) / logged > 0.3,
        "uncalibrated counts miss the system prompt and the ratio: {f:?}"
    );

    let stats = |kind: PolicyKind| {
        file.policies
            .iter()
            .find(|o| o.kind == kind)
            .unwrap()
            .stats
            .summary()
    };
    let none = stats(PolicyKind::None);
    assert!(
        none.tokens_max > 12_000,
        "the full history outgrows the budget"
    );
    let truncate = stats(PolicyKind::Truncate);
    assert!(
        truncate.tokens_max <= 12_000 && truncate.tokens_max > 9_000,
        "provider-token requests fill τ and stay within it: {truncate:?}"
    );
    let cwl = stats(PolicyKind::Cwl);
    let over = (cwl.over_budget_share * cwl.requests as f64).round() as u64;
    assert_eq!(
        cwl.budget_unmet,
        Some(over),
        "the engine decides against the converted budget: its own count of unmet requests is the measured one"
    );
}

#[test]
fn without_calibration_counts_stay_local() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path());
    let measured = calibrate::uncalibrated(Session::open(&path).unwrap(), &Estimate);
    let file = replay_with(
        Session::open(&path).unwrap(),
        "calibrated.jsonl",
        &config(1_000_000),
        measured,
        &mut || {},
    );
    assert_eq!(file.calibration, Calibration::identity());
    let f = file.fidelity;
    assert_eq!(
        f.anchored_calls, 1,
        "uncounted, the system prompt leaves the call after the compaction unexplained: {f:?}"
    );
    assert!(f.prompt_tokens_error_mean.unwrap() > 0.2, "{f:?}");
}

/// A Codex rollout from before September 2025 logs neither prompt sizes
/// nor Codex's own instructions (its `instructions` are the user's):
/// every request gets the estimate of them; a rollout that logs them
/// (`base_instructions`) stays uncalibrated.
#[test]
fn an_unlogged_codex_prompt_is_estimated() {
    use cwl_lab::calibrate::CODEX_PROMPT_TOKENS;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, header: serde_json::Value| {
        let lines = [
            header,
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]}),
        ];
        let path = dir.path().join(name);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    };
    let counter = Estimate;
    let bare = write(
        "bare.jsonl",
        json!({"id": "b", "timestamp": "2025-06-02T09:15:00.000Z", "instructions": "Follow AGENTS.md."}),
    );
    let calibration = calibrate::measure(Session::open(&bare).unwrap(), &counter).calibration;
    assert_eq!(calibration.system_tokens_estimate, CODEX_PROMPT_TOKENS);
    assert!(!calibration.from_log);
    let file = replay_with(
        Session::open(&bare).unwrap(),
        "bare.jsonl",
        &config(1_000_000),
        calibration,
        &mut || {},
    );
    let none = file.policies[0].stats.summary();
    assert!(
        none.tokens_mean > CODEX_PROMPT_TOKENS as f64,
        "the estimate is in every request: {}",
        none.tokens_mean
    );
    let told = write(
        "told.jsonl",
        json!({"type": "session_meta", "payload": {"id": "t", "base_instructions": {"text": "You are Codex."}}}),
    );
    let calibration = calibrate::measure(Session::open(&told).unwrap(), &counter).calibration;
    assert_eq!(calibration, Calibration::identity());
}

/// The real traces in `shared/traces`, when present: the replay of what
/// each log's harness sent, calibrated, is compared on at least 90% of
/// the calls that log a prompt size, after compactions too, within 10% on
/// the mean and 5% on the median call.
#[test]
fn real_traces_replay_as_sent_within_the_fidelity_bounds() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for (dir, suffix, take) in [
        ("pi", ".jsonl", 2),
        ("mini-swe-agent", ".traj.json", 3),
        ("claude-code", ".jsonl", usize::MAX),
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            println!("skipped: no real traces at {}", root.join(dir).display());
            continue;
        };
        let mut found: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        found.sort();
        files.extend(found.into_iter().take(take));
    }
    let counter: Arc<dyn cwl::TokenCounter> = Arc::new(cwl::O200k::new());
    for path in files {
        let measured = calibrate::measure(Session::open(&path).unwrap(), counter.as_ref());
        assert_eq!(
            calibrate::measure_path(&path, counter.as_ref()).unwrap(),
            measured,
            "{}: the models' rules stand (the pi log's cache reads show Claude Opus 4.5 kept earlier thinking)",
            path.display()
        );
        let shown = path.display().to_string();
        let f = measured.fidelity;
        let Some(logged) = f.logged_prompt_tokens_mean else {
            assert_eq!(f.logged_calls, 0, "{shown}: {f:?}");
            println!("{shown}: no model call logs a prompt size");
            continue;
        };
        let replayed = f.replayed_prompt_tokens_mean.unwrap();
        let gap = (replayed - logged) / logged;
        let median = f.prompt_tokens_error_median.unwrap();
        println!(
            "{shown}: {} of {} calls, logged {logged:.0}, replayed {replayed:.0} ({:+.1}%), median error {:.1}%",
            f.compared_calls,
            f.logged_calls,
            gap * 100.0,
            median * 100.0
        );
        assert!(f.compared_share() >= 0.9, "{shown}: {f:?}");
        assert!(
            gap.abs() < 0.10,
            "{shown}: {f:?} {:?}",
            measured.calibration
        );
        assert!(median < 0.05, "{shown}: {f:?} {:?}", measured.calibration);
    }
}

const TURNS: usize = 3;
const CALLS_PER_TURN: usize = 4;
const REASONING: usize = 2_000;

/// Writes a three-turn Codex rollout of `model` whose logged prompts are
/// `SYSTEM +` the local count of the history before each call, counting
/// reasoning as a provider of `billed` does (OpenAI's models before
/// GPT-5.6 count only the current turn's); returns its path.
fn write_codex_turns(
    dir: &std::path::Path,
    model: &str,
    billed: ReasoningScope,
) -> std::path::PathBuf {
    use cwl::Block;
    let counter = Estimate;
    let path = dir.join(format!("turns-{model}-{billed:?}.jsonl"));
    let mut out = std::fs::File::create(&path).unwrap();
    let mut line = |kind: &str, payload: serde_json::Value| {
        writeln!(
            out,
            "{}",
            json!({"timestamp": "2025-11-01T10:00:00.000Z", "type": kind, "payload": payload})
        )
        .unwrap()
    };
    line(
        "session_meta",
        json!({"id": "t", "cwd": "/w", "cli_version": "0.66.0", "model_provider": "openai"}),
    );
    let mut local = 0usize;
    let mut turn_reasoning = 0usize;
    for turn in 0..TURNS {
        let task = format!("task number {turn}: look at the files");
        line(
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": task}]}),
        );
        line("turn_context", json!({"cwd": "/w", "model": model}));
        if billed == ReasoningScope::CurrentTurn {
            local -= turn_reasoning;
        }
        turn_reasoning = 0;
        local += message_tokens(&counter, &Message::user(task));
        for call in 0..CALLS_PER_TURN {
            let id = format!("call_{turn}_{call}");
            let summary = format!("Looking at file {call} of turn {turn}");
            let arguments = json!({"cmd": format!("cat f{call}.rs")}).to_string();
            let logged = (SYSTEM + local as f64).round() as u64;
            line(
                "response_item",
                json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": summary}],
                    "encrypted_content": "gAAAA".repeat(400)}),
            );
            line(
                "response_item",
                json!({"type": "function_call", "name": "exec_command", "arguments": arguments, "call_id": id}),
            );
            let usage = json!({"input_tokens": logged, "cached_input_tokens": 0,
                "output_tokens": REASONING + 20, "reasoning_output_tokens": REASONING,
                "total_tokens": logged + REASONING as u64 + 20});
            line(
                "event_msg",
                json!({"type": "token_count", "info": {"last_token_usage": usage, "total_token_usage": usage}}),
            );
            let output = format!("fn f{call}() {{ {turn} }}\n").repeat(60);
            line(
                "response_item",
                json!({"type": "function_call_output", "call_id": id, "output": output}),
            );
            let assistant = Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: summary,
                        signature: Some(" xxx".repeat(REASONING)),
                    },
                    Block::ToolCall(ToolCall::new(&id, "exec_command", &arguments)),
                ],
            };
            let reasoning = cwl::tokens::block_tokens(&counter, &assistant_reasoning(&assistant));
            turn_reasoning += reasoning;
            local += message_tokens(&counter, &assistant)
                + message_tokens(
                    &counter,
                    &Message::tool_result(&id, "exec_command", &output, false),
                );
        }
    }
    path
}

fn assistant_reasoning(message: &Message) -> cwl::Block {
    match message {
        Message::Assistant { content } => content[0].clone(),
        _ => unreachable!(),
    }
}

/// A Codex rollout of several user turns: its logged prompt falls at each
/// new turn by the reasoning of the one before, which `gpt-5-codex` drops.
/// The replay counts as that model did, so the whole log is compared and
/// matches; the same log said to be of a model that keeps every turn's
/// reasoning reads, by that model's rule, as a harness cutting its prompt,
/// and the log's own prompt sizes overrule it.
#[test]
fn a_codex_rollout_counts_only_the_current_turns_reasoning() {
    let dir = tempfile::tempdir().unwrap();
    let replayed = |model: &str, billed: ReasoningScope, by_rule: bool| {
        let path = write_codex_turns(dir.path(), model, billed);
        let calibration = if by_rule {
            calibrate::measure(Session::open(&path).unwrap(), &Estimate)
        } else {
            calibrate::measure_path(&path, &Estimate).unwrap()
        };
        replay_with(
            Session::open(&path).unwrap(),
            "turns.jsonl",
            &config(1_000_000),
            calibration,
            &mut || {},
        )
    };
    let faithful = |file: &cwl_lab::replay::FileReport| {
        let f = file.fidelity;
        assert_eq!(file.log_prompt_drops, 0, "{:?}", file.warnings);
        assert_eq!(f.compared_calls, (TURNS * CALLS_PER_TURN) as u64, "{f:?}");
        let logged = f.logged_prompt_tokens_mean.unwrap();
        let gap = (f.replayed_prompt_tokens_mean.unwrap() - logged) / logged;
        assert!(gap.abs() < 0.02, "{f:?}");
    };
    let none = |file: &cwl_lab::replay::FileReport| file.policies[0].stats.summary().tokens_mean;

    let current = replayed("gpt-5-codex", ReasoningScope::CurrentTurn, false);
    faithful(&current);
    assert_eq!(
        current.calibration.reasoning_scope, None,
        "the model's rule"
    );

    let by_rule = replayed("gpt-5.6", ReasoningScope::CurrentTurn, true);
    assert_eq!(by_rule.log_prompt_drops, (TURNS - 1) as u64);
    let f = by_rule.fidelity;
    assert_eq!(
        (f.cuts, f.anchored_calls, f.compared_calls),
        (
            (TURNS - 1) as u64,
            (TURNS - 1) as u64,
            (TURNS * CALLS_PER_TURN - (TURNS - 1)) as u64
        ),
        "each cut the rule cannot explain is sized from the log: {f:?}"
    );
    assert!(
        none(&by_rule) > none(&current) + REASONING as f64,
        "every turn's reasoning counted: {} against {}",
        none(&by_rule),
        none(&current)
    );
    let by_log = replayed("gpt-5.6", ReasoningScope::CurrentTurn, false);
    faithful(&by_log);
    assert_eq!(
        by_log.calibration.reasoning_scope,
        Some(ReasoningScope::CurrentTurn)
    );

    let kept = replayed("gpt-5-codex", ReasoningScope::AllTurns, false);
    faithful(&kept);
    assert_eq!(
        kept.calibration.reasoning_scope,
        Some(ReasoningScope::AllTurns)
    );
    assert!(none(&kept) > none(&current) + REASONING as f64);
}
