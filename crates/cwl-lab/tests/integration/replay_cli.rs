//! `cwl replay` as a user meets it: each log priced by its own model,
//! unreadable files skipped, files with no model call said so, the
//! aggregate-only view, ranked warnings and a bounded plot.

use std::path::{Path, PathBuf};

use clap::Parser;
use cwl_lab::cli::{ReplayArgs, SkippedFiles, replay_files, run_replay};
use cwl_lab::metrics::cost::ModelSource;
use cwl_lab::report::{json, losses, plot, table, warnings};
use serde_json::{Value, json};

#[derive(Parser)]
struct Replay {
    #[command(flatten)]
    args: ReplayArgs,
}

fn args(files: &[&Path], extra: &[&str]) -> ReplayArgs {
    let mut argv: Vec<String> = vec!["replay".into()];
    argv.extend(files.iter().map(|f| f.display().to_string()));
    argv.extend(["--tokenizer", "estimate"].iter().map(|s| s.to_string()));
    if !extra.contains(&"--policy") {
        argv.extend(
            ["--policy", "none,truncate,cwl"]
                .iter()
                .map(|s| s.to_string()),
        );
    }
    argv.extend(extra.iter().map(|s| s.to_string()));
    Replay::try_parse_from(argv).unwrap().args
}

/// The JSON lines of a log.
fn log_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Writes `lines` as the log `name` in `dir`.
fn write_log(dir: &Path, name: &str, lines: &[Value]) -> PathBuf {
    let path = dir.join(name);
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, body).unwrap();
    path
}

/// A pi log of `calls` model calls by `model`, with logged usage.
fn pi_log(dir: &Path, name: &str, model: &str, calls: usize) -> PathBuf {
    let mut lines = vec![json!({"type": "session", "version": 3, "id": name,
        "timestamp": "2025-03-01T10:00:00.000Z", "cwd": "/w", "provider": "x", "modelId": model})];
    lines.push(json!({"type": "message", "message": {"role": "user",
        "content": [{"type": "text", "text": "read the files in src and fix the bug"}]}}));
    for i in 0..calls {
        let id = format!("t{i}");
        lines.push(json!({"type": "message", "message": {"role": "assistant",
            "content": [{"type": "toolCall", "id": id, "name": "read", "arguments": {"path": format!("src/f{i}.rs")}}],
            "usage": {"input": 10, "output": 20, "cacheRead": 1000 * (i + 1), "cacheWrite": 50}, "stopReason": "toolUse"}}));
        lines.push(json!({"type": "message", "message": {"role": "toolResult", "toolCallId": id,
            "toolName": "read", "content": [{"type": "text", "text": "fn main() {}\n".repeat(200)}], "isError": false}}));
    }
    write_log(dir, name, &lines)
}

fn none_cost(report: &cwl_lab::report::ReplayReport) -> Option<f64> {
    report.files[0].policies[0].stats.summary().cost_usd
}

#[test]
fn each_log_is_priced_by_its_own_model_unless_model_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let opus = pi_log(dir.path(), "opus.jsonl", "claude-opus-4-5", 4);
    let (own, _) = replay_files(&args(&[&opus], &[])).unwrap();
    let file = &own.files[0];
    assert_eq!(file.model, "claude-opus-4-5");
    assert_eq!(file.model_source, Some(ModelSource::Log));
    assert!(file.priced);
    let (flagged, _) = replay_files(&args(&[&opus], &["--model", "claude-sonnet-4-5"])).unwrap();
    assert_eq!(flagged.files[0].model_source, Some(ModelSource::Flag));
    let ratio = none_cost(&own).unwrap() / none_cost(&flagged).unwrap();
    assert!(
        (ratio - 5.0 / 3.0).abs() < 0.01,
        "opus 4.5 costs 5/3 of sonnet 4.5 on every kind of token: {ratio}"
    );
    let text = table::render(&own);
    assert!(
        text.contains("model claude-opus-4-5, the log's model; budget 80k"),
        "{text}"
    );
    assert!(
        text.contains("costs by each log's model: claude-opus-4-5 (1 file)"),
        "{text}"
    );
    assert!(
        table::render(&flagged).contains("(budget 80k, costs for claude-sonnet-4-5)"),
        "the aggregate header states the --model"
    );
}

#[test]
fn a_dated_or_variant_model_keeps_its_name_and_says_what_priced_it() {
    let dir = tempfile::tempdir().unwrap();
    let dated = pi_log(dir.path(), "d.jsonl", "claude-sonnet-4-5-20250929", 3);
    let (report, _) = replay_files(&args(&[&dated], &[])).unwrap();
    let file = &report.files[0];
    assert_eq!(
        (file.model.as_str(), file.priced_as.as_str(), file.priced),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", true)
    );
    let text = table::render(&report);
    assert!(
        text.contains(
            "model claude-sonnet-4-5-20250929, the log's model, priced as claude-sonnet-4-5; budget 80k"
        ),
        "{text}"
    );
    let value: Value = serde_json::from_str(&json::to_json(&report)).unwrap();
    assert_eq!(value["files"][0]["priced_as"], "claude-sonnet-4-5");
}

#[test]
fn a_log_naming_no_model_is_priced_as_its_clients_default() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![
        json!({"id": "b1", "timestamp": "2025-06-02T09:15:00.000Z", "instructions": null}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list src"}]}),
    ];
    for i in 0..3 {
        let id = format!("call_{i}");
        lines.push(json!({"type": "function_call", "name": "shell", "call_id": id,
            "arguments": json!({"command": ["bash", "-lc", format!("cat src/f{i}.rs")]}).to_string()}));
        lines.push(json!({"type": "function_call_output", "call_id": id,
            "output": json!({"output": "fn f() {}\n".repeat(50), "metadata": {"exit_code": 0}}).to_string()}));
        lines.push(json!({"record_type": "state"}));
    }
    let codex = dir.path().join("rollout-2025-06-02T09-15-00-b1.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&codex, text).unwrap();
    let (report, _) = replay_files(&args(&[&codex], &[])).unwrap();
    let file = &report.files[0];
    assert_eq!(file.requests, 3);
    assert_eq!(
        (file.model.as_str(), file.model_source),
        ("gpt-5", Some(ModelSource::Default)),
        "a Codex rollout from before Codex logged its model"
    );
    assert!(file.priced);
    assert!(
        table::render(&report).contains("model gpt-5, default: the log names none"),
        "{}",
        table::render(&report)
    );
}

#[test]
fn a_model_without_a_price_has_an_unknown_cost() {
    let dir = tempfile::tempdir().unwrap();
    let gemini = pi_log(dir.path(), "gemini.jsonl", "gemini-4-neon", 3);
    let (report, _) = replay_files(&args(&[&gemini], &["--budget", "50%"])).unwrap();
    let file = &report.files[0];
    assert!(!file.priced);
    assert_eq!(file.model, "gemini-4-neon");
    assert_eq!(none_cost(&report), None);
    let value: Value = serde_json::from_str(&json::to_json(&report)).unwrap();
    assert_eq!(value["budget_typed"], "50%");
    assert_eq!(value["model"], Value::Null);
    let f = &value["files"][0];
    assert_eq!(f["cost_known"], false);
    assert_eq!(f["model_from"], "log");
    assert_eq!(f["policies"]["none"]["cost_usd"], Value::Null);
    assert_eq!(f["policies"]["none"]["unpriced_requests"], 3);
    let text = table::render(&report);
    assert!(
        text.contains("not in the price table: cost unknown"),
        "{text}"
    );
    assert!(text.contains("budget 50% = 100,000 tokens"), "{text}");
    assert!(text.contains("unknown"), "{text}");
}

#[test]
fn unreadable_files_are_skipped_and_silent_logs_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let good = pi_log(dir.path(), "good.jsonl", "claude-sonnet-4-5", 3);
    let silent = pi_log(dir.path(), "silent.jsonl", "claude-sonnet-4-5", 0);
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, "this is not a session log\n").unwrap();
    let all = args(&[&good, &broken, &silent], &[]);
    let (report, _) = replay_files(&all).unwrap();
    assert_eq!(report.files.len(), 2, "the run goes on past the bad file");
    assert_eq!(report.skipped.len(), 1);
    assert!(report.skipped[0].path.ends_with("broken.jsonl"));
    assert_eq!(report.files[1].requests, 0);

    let text = table::render(&report);
    assert!(text.contains("silent.jsonl (pi, 0 warnings): no model call in this log"));
    assert!(!text.contains("silent.jsonl (pi, 0 requests"));
    assert!(text.contains("skipped "), "{text}");
    assert!(text.contains("aggregate over 2 files, 1 with no model call, 1 skipped"));
    let value: Value = serde_json::from_str(&json::to_json(&report)).unwrap();
    let silent_json = &value["files"][1];
    assert_eq!(silent_json["no_model_call"], true);
    assert_eq!(silent_json["policies"], json!({}), "never 100% loss-free");
    assert!(value["files"][0].get("no_model_call").is_none());
    assert!(
        value["skipped"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("broken.jsonl")
    );

    let ranked = warnings::rank(&report);
    assert_eq!(ranked[0].rank, warnings::Rank::Figures);
    assert!(ranked[0].example.contains("broken.jsonl"));

    let error = run_replay(args(&[&good, &broken, &silent], &["--json"])).unwrap_err();
    let skipped = error
        .downcast_ref::<SkippedFiles>()
        .expect("exit status says files were skipped");
    assert_eq!((skipped.skipped.len(), skipped.total), (1, 3));
}

#[test]
fn a_directory_replays_every_log_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let day = dir.path().join("sessions/2026/11/25");
    std::fs::create_dir_all(&day).unwrap();
    pi_log(&day, "b.jsonl", "claude-sonnet-4-5", 2);
    pi_log(&day, "a.jsonl", "claude-sonnet-4-5", 3);
    std::fs::write(day.join("notes.txt"), "not a log").unwrap();
    let (report, _) = replay_files(&args(&[&dir.path().join("sessions")], &[])).unwrap();
    let names: Vec<&str> = report.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].ends_with("a.jsonl") && names[1].ends_with("b.jsonl"));
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!((report.files[0].requests, report.files[1].requests), (3, 2));

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let error = run_replay(args(&[&empty], &["--json"])).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no session logs under this directory"),
        "{error}"
    );
}

#[test]
fn many_files_show_the_aggregate_only_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<PathBuf> = (0..11)
        .map(|i| pi_log(dir.path(), &format!("s{i}.jsonl"), "claude-sonnet-4-5", 2))
        .collect();
    let paths: Vec<&Path> = logs.iter().map(PathBuf::as_path).collect();
    assert!(!args(&paths, &[]).per_file_tables(), "more than 10 files");
    assert!(args(&paths, &["--per-file"]).per_file_tables());
    assert!(args(&paths[..2], &[]).per_file_tables());
    assert!(!args(&paths[..2], &["--summary"]).per_file_tables());
    let mut argv = vec!["replay", "a", "--summary", "--per-file"];
    assert!(Replay::try_parse_from(argv.drain(..)).is_err());

    let (report, _) = replay_files(&args(&paths, &[])).unwrap();
    let summary = table::render_with(&report, false);
    assert!(!summary.contains("s3.jsonl"), "{summary}");
    assert!(summary.contains("aggregate over 11 files, 22 requests"));
    assert!(summary.contains("engine >τ"), "the engine's own count");
    let full = table::render_with(&report, true);
    assert!(full.contains("s3.jsonl (pi, 2 requests"));
}

#[test]
fn losses_list_what_a_request_lacked_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let read = pi_log(dir.path(), "read.jsonl", "claude-sonnet-4-5", 6);
    let mut lines = log_lines(&read);
    lines.push(json!({"type": "message", "message": {"role": "assistant",
        "content": [{"type": "toolCall", "id": "again", "name": "read", "arguments": {"path": "src/f0.rs"}}],
        "usage": {"input": 10, "output": 20, "cacheRead": 7000, "cacheWrite": 50}, "stopReason": "toolUse"}}));
    let log = write_log(dir.path(), "again.jsonl", &lines);
    let asked = [
        "--policy",
        "none,truncate",
        "--budget",
        "3k",
        "--no-calibration",
    ];
    let (quiet, _) = replay_files(&args(&[&log], &asked)).unwrap();
    assert!(quiet.files[0].losses.is_empty());
    assert_eq!(losses::render(&quiet), "");
    assert!(!json::to_json(&quiet).contains("\"losses\""));

    let (report, _) = replay_files(&args(&[&log], &[&asked[..], &["--losses"]].concat())).unwrap();
    let listed = losses::render(&report);
    assert!(listed.contains("losses in"), "{listed}");
    assert!(
        listed.contains("#7 truncate: anchors src/f0.rs (after #1)"),
        "{listed}"
    );
    assert!(
        !listed.contains(" none:"),
        "the full history lost nothing: {listed}"
    );
    let value: Value = serde_json::from_str(&json::to_json(&report)).unwrap();
    let first = &value["files"][0]["losses"][0];
    assert_eq!(first["request"], 7);
    assert_eq!(first["policy"], "truncate");
    assert!(
        first["anchors"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "src/f0.rs", "seen_after": 1})),
        "{first}"
    );
}

#[test]
fn a_plot_of_long_sessions_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    let log = pi_log(dir.path(), "long.jsonl", "claude-sonnet-4-5", 600);
    let (mut report, _) = replay_files(&args(&[&log], &["--budget", "20k"])).unwrap();
    let one = report.files[0].clone();
    report.files = (0..60).map(|_| one.clone()).collect();
    let svg = dir.path().join("p.svg");
    plot::write_svg(&report, &svg).unwrap();
    let size = std::fs::metadata(&svg).unwrap().len();
    assert!(
        size < 4_000_000,
        "60 sessions × 3 policies × 600 calls in {size} bytes"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("budget 20k"));
}

/// A Codex rollout of `calls` reads of about 600 tokens each whose
/// `token_count` events give the client's context window as `window`.
fn codex_log(dir: &Path, window: u64, calls: usize) -> PathBuf {
    let mut lines = vec![
        json!({"type": "session_meta", "payload": {"id": "c1", "cwd": "/w",
            "base_instructions": {"text": "You are Codex."}}}),
        json!({"type": "turn_context", "payload": {"model": "gpt-5-codex"}}),
        json!({"type": "response_item", "payload": {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "read every module"}]}}),
    ];
    for i in 0..calls {
        let id = format!("call_{i}");
        lines.push(json!({"type": "response_item", "payload": {"type": "function_call",
            "name": "exec_command", "call_id": id, "arguments": format!("{{\"cmd\":\"cat src/m{i}.rs\"}}")}}));
        lines.push(
            json!({"type": "response_item", "payload": {"type": "function_call_output",
            "call_id": id, "output": format!("fn module_{i}() {{}}\n").repeat(150)}}),
        );
        lines.push(
            json!({"type": "event_msg", "payload": {"type": "token_count",
            "info": {"model_context_window": window}}}),
        );
    }
    write_log(dir, "rollout.jsonl", &lines)
}

#[test]
fn compact_summarizes_against_the_window_the_log_records() {
    let dir = tempfile::tempdir().unwrap();
    let rollout = codex_log(dir.path(), 20_000, 60);
    let peak = |report: &cwl_lab::report::ReplayReport, policy: usize| {
        report.files[0].policies[policy].stats.summary().tokens_max
    };
    let compact = ["--policy", "none,compact"];
    let (logged, _) = replay_files(&args(&[&rollout], &compact)).unwrap();
    assert_eq!(logged.files[0].window, 20_000);
    assert!(
        peak(&logged, 1) < 20_000 && peak(&logged, 0) > 30_000,
        "compact fires near the client's 20k window: {} against {}",
        peak(&logged, 1),
        peak(&logged, 0)
    );
    let value: Value = serde_json::from_str(&json::to_json(&logged)).unwrap();
    assert_eq!(value["files"][0]["window"], 20_000);

    let flagged = [&compact[..], &["--window", "400000"]].concat();
    let (wide, _) = replay_files(&args(&[&rollout], &flagged)).unwrap();
    assert_eq!(wide.files[0].window, 400_000, "--window wins");
    assert_eq!(
        peak(&wide, 1),
        peak(&wide, 0),
        "never reached: compact is none"
    );

    let pi = pi_log(dir.path(), "p.jsonl", "claude-opus-4-5", 3);
    let (table, _) = replay_files(&args(&[&pi], &compact)).unwrap();
    assert_eq!(
        table.files[0].window, 200_000,
        "no logged window: the model's"
    );
}

/// Mean request tokens of each policy of the first file, in order.
fn means(report: &cwl_lab::report::ReplayReport) -> Vec<f64> {
    report.files[0]
        .policies
        .iter()
        .map(|p| p.stats.summary().tokens_mean)
        .collect()
}

#[test]
fn clear_tool_uses_takes_the_apis_settings() {
    let dir = tempfile::tempdir().unwrap();
    let log = pi_log(dir.path(), "reads.jsonl", "claude-sonnet-4-5", 12);
    let replay = |extra: &[&str]| {
        let mut all = vec!["--policy", "none,clear-tool-uses", "--budget", "3k"];
        all.extend(extra);
        means(&replay_files(&args(&[&log], &all)).unwrap().0)
    };
    let default = replay(&[]);
    assert!(
        default[1] < default[0],
        "past the trigger it clears: {default:?}"
    );
    let keep_one = replay(&["--clear-keep", "1"]);
    assert!(keep_one[1] < default[1], "{keep_one:?} against {default:?}");
    let inputs = replay(&["--clear-inputs"]);
    assert!(inputs[1] < default[1], "{inputs:?} against {default:?}");
    let at_8k = |extra: &[&str]| {
        let mut all = vec!["--policy", "none,clear-tool-uses", "--budget", "8k"];
        all.extend(extra);
        means(&replay_files(&args(&[&log], &all)).unwrap().0)
    };
    let (every, as_event) = (at_8k(&[]), at_8k(&["--clear-as-event"]));
    assert!(
        every[1] < as_event[1] && as_event[1] < as_event[0],
        "as an event the prompt grows back between clears: {as_event:?} against {every:?}"
    );
    let never = replay(&["--clear-at-least", "10M"]);
    assert_eq!(
        never[1], never[0],
        "an edit freeing too little is not applied"
    );

    let err = Replay::try_parse_from(["replay", "x.jsonl", "--clear-at-least", "0"])
        .err()
        .expect("a zero minimum is refused");
    assert!(err.to_string().contains("--clear-at-least"), "{err}");
}

#[test]
fn a_call_the_log_shows_reading_no_cache_is_cold_for_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    let warm = pi_log(dir.path(), "warm.jsonl", "claude-sonnet-4-5", 8);
    let mut lines = log_lines(&warm);
    let fifth_call = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.pointer("/message/usage").is_some())
        .nth(4)
        .unwrap()
        .0;
    // Cold: the same prompt, none of it read from the cache.
    let usage = &mut lines[fifth_call]["message"]["usage"];
    let read = usage["cacheRead"].as_u64().unwrap();
    usage["input"] = json!(usage["input"].as_u64().unwrap() + read);
    usage["cacheRead"] = json!(0);
    let cold = write_log(dir.path(), "cold.jsonl", &lines);

    let costs = |log: &Path| {
        let (report, _) = replay_files(&args(&[log], &["--policy", "none,cwl"])).unwrap();
        report.files[0]
            .policies
            .iter()
            .map(|p| p.stats.summary())
            .map(|s| (s.cost_usd.unwrap(), s.cache_read_tokens))
            .collect::<Vec<_>>()
    };
    let (warm, cold) = (costs(&warm), costs(&cold));
    for (w, c) in warm.iter().zip(&cold) {
        assert!(c.0 > w.0, "a cold call costs more: {c:?} against {w:?}");
        assert!(c.1 < w.1, "and reads less: {c:?} against {w:?}");
    }
}

#[test]
fn the_logs_own_cost_is_set_beside_the_replayed_full_history() {
    let dir = tempfile::tempdir().unwrap();
    let plain = pi_log(dir.path(), "plain.jsonl", "claude-sonnet-4-5", 6);
    let mut lines = log_lines(&plain);
    for line in lines.iter_mut() {
        if let Some(usage) = line.pointer_mut("/message/usage") {
            usage["cost"] = json!({"total": 0.25});
        }
    }
    let priced = write_log(dir.path(), "priced.jsonl", &lines);
    let (report, _) = replay_files(&args(&[&priced], &["--policy", "cwl"])).unwrap();
    let fidelity = &report.files[0].fidelity;
    assert_eq!(fidelity.logged_cost_usd, Some(1.5));
    let replayed = fidelity
        .replayed_cost_usd
        .expect("the full history is priced");
    assert!(replayed > 0.0);
    let line = table::render(&report);
    assert!(
        line.contains("logged cost $1.50 vs replayed full history $"),
        "{line}"
    );

    // One call without a logged cost: no sum is better than a partial one.
    let call = lines
        .iter()
        .position(|l| l.pointer("/message/usage").is_some())
        .unwrap();
    lines[call]["message"]["usage"]
        .as_object_mut()
        .unwrap()
        .remove("cost");
    let partial = write_log(dir.path(), "partial.jsonl", &lines);
    let (report, _) = replay_files(&args(&[&partial], &[])).unwrap();
    assert_eq!(report.files[0].fidelity.logged_cost_usd, None);
    assert_eq!(report.files[0].fidelity.replayed_cost_usd, None);
}

/// A pi log whose first task reads a file and rewrites a long todo list
/// ten times; the second task reads another file, and its answer quotes a
/// name from the first read.
fn plans_log(dir: &Path) -> PathBuf {
    let mut lines = vec![json!({"type": "session", "version": 3, "id": "plans",
        "timestamp": "2025-03-01T10:00:00.000Z", "cwd": "/w", "provider": "x",
        "modelId": "claude-sonnet-4-5"})];
    let user = |text: &str| {
        json!({"type": "message", "message": {"role": "user",
        "content": [{"type": "text", "text": text}]}})
    };
    let call = |id: &str, name: &str, arguments: Value| {
        json!({"type": "message", "message": {
        "role": "assistant", "stopReason": "toolUse",
        "content": [{"type": "toolCall", "id": id, "name": name, "arguments": arguments}]}})
    };
    let result = |id: &str, name: &str, text: &str| {
        json!({"type": "message", "message": {
        "role": "toolResult", "toolCallId": id, "toolName": name,
        "content": [{"type": "text", "text": text}], "isError": false}})
    };
    let say = |text: &str| {
        json!({"type": "message", "message": {"role": "assistant",
        "stopReason": "stop", "content": [{"type": "text", "text": text}]}})
    };
    lines.push(user("read src/kinds.rs and plan the port"));
    lines.push(call("r0", "read", json!({"path": "src/kinds.rs"})));
    let source = format!(
        "pub fn parse_record_kind_v2(line: &str) -> Kind {{ todo!() }}\n{}",
        "// the record kinds of the ledger\n".repeat(20)
    );
    lines.push(result("r0", "read", &source));
    for write in 0..10 {
        let todos: Vec<Value> = (0..8)
            .map(|item| {
                json!({"content": format!("Port step {item} of the ledger parser and its tests"),
                "activeForm": format!("Porting step {item}"),
                "status": if item < write { "completed" } else { "pending" }})
            })
            .collect();
        let id = format!("p{write}");
        lines.push(call(&id, "TodoWrite", json!({"todos": todos})));
        lines.push(result(
            &id,
            "TodoWrite",
            "Todos have been modified successfully.",
        ));
    }
    lines.push(say("Planned."));
    lines.push(user(
        "now read src/ledger.rs: which function parses its kinds?",
    ));
    lines.push(call("r1", "read", json!({"path": "src/ledger.rs"})));
    lines.push(result(
        "r1",
        "read",
        &"// ledger entries, one per line\n".repeat(100),
    ));
    lines.push(say("`parse_record_kind_v2` in src/kinds.rs parses them."));
    write_log(dir, "plans.jsonl", &lines)
}

#[test]
fn superseded_plans_go_before_what_the_agent_read() {
    let dir = tempfile::tempdir().unwrap();
    let log = plans_log(dir.path());
    let replay = |extra: &[&str]| {
        let mut all = vec!["--policy", "cwl", "--budget", "3400", "--no-calibration"];
        all.extend(extra);
        let (report, _) = replay_files(&args(&[&log], &all)).unwrap();
        report.files[0].policies[0].stats.summary()
    };
    let dropped = replay(&[]);
    assert_eq!(dropped.over_budget_share, 0.0);
    assert_eq!(dropped.content_requests_at_risk, 1, "{dropped:?}");
    assert_eq!(dropped.content_loss_free_share, 1.0, "{dropped:?}");
    let kept = replay(&["--plans", "keep"]);
    assert_eq!(kept.over_budget_share, 0.0);
    assert_eq!(
        kept.content_loss_free_share, 0.0,
        "with the plans kept, the read went: {kept:?}"
    );
}

#[test]
fn a_logged_prompt_that_shrinks_without_a_compaction_is_the_harness_cutting_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![json!({"type": "session", "version": 3, "id": "cut",
        "timestamp": "2025-03-01T10:00:00.000Z", "cwd": "/w", "provider": "x",
        "modelId": "claude-sonnet-4-5"})];
    lines.push(json!({"type": "message", "message": {"role": "user",
        "content": [{"type": "text", "text": "read the files in src"}]}}));
    // The harness cleared old results before the sixth call: its prompt
    // fell from 60k to 30k, and the log holds every result whole.
    let logged = [
        10_000, 20_000, 30_000, 40_000, 50_000, 30_000, 33_000, 36_000,
    ];
    for (i, prompt) in logged.iter().enumerate() {
        let id = format!("t{i}");
        lines.push(json!({"type": "message", "message": {"role": "assistant",
            "content": [{"type": "toolCall", "id": id, "name": "read", "arguments": {"path": format!("src/f{i}.rs")}}],
            "usage": {"input": 10, "output": 20, "cacheRead": prompt - 10, "cacheWrite": 0}, "stopReason": "toolUse"}}));
        lines.push(json!({"type": "message", "message": {"role": "toolResult", "toolCallId": id,
            "toolName": "read", "content": [{"type": "text", "text": "fn main() {}\n".repeat(2000)}], "isError": false}}));
    }
    let log = write_log(dir.path(), "cut.jsonl", &lines);
    let (report, _) = replay_files(&args(&[&log], &["--policy", "none"])).unwrap();
    let file = &report.files[0];
    assert_eq!(file.log_prompt_drops, 1);
    assert_eq!(file.log_compactions, 0);
    let f = file.fidelity;
    assert_eq!(
        (f.logged_calls, f.compared_calls, f.anchored_calls, f.cuts),
        (8, 7, 1, 1),
        "the call after the cut is sized from the log, the rest compared: {f:?}"
    );
    assert!(
        file.warnings
            .iter()
            .any(|w| w.contains("shrank on 1 calls")),
        "{:?}",
        file.warnings
    );
    let text = table::render(&report);
    assert!(text.contains("1 log prompt drops"), "{text}");
    assert!(
        text.contains("over 7 of 8 calls (1 unlogged cuts, 1 calls after an edit the log does not hold sized from the log)"),
        "{text}"
    );
    assert!(
        file.warnings.iter().any(|w| w.contains(
            "cannot replay what the log's harness sent within the lab's bounds (7 of 8 calls compared)"
        )),
        "under 90% of the calls compared is said: {:?}",
        file.warnings
    );
    assert!(
        file.warnings.iter().any(|w| w.contains(
            "cannot replay what the log's harness sent within the lab's bounds (7 of 8 calls compared)"
        )),
        "under 90% of the calls compared is said: {:?}",
        file.warnings
    );
    let summary = table::render_with(&report, false);
    assert!(
        summary.contains("fidelity over 1 files: the replay as their harnesses sent them compared on 7 of 8 calls that log a prompt size (87.5%; 1 sized from the log"),
        "{summary}"
    );
    let json: Value = serde_json::from_str(&json::to_json(&report)).unwrap();
    assert_eq!(json["files"][0]["log_prompt_drops"], 1);
}

/// The smallest real Claude Code traces in `shared/traces`, when present.
fn smallest_real_traces(count: usize) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/claude-code");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("no real traces at {}: generated logs only", dir.display());
        return Vec::new();
    };
    let mut found: Vec<(u64, PathBuf)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| (std::fs::metadata(&p).map_or(u64::MAX, |m| m.len()), p))
        .collect();
    found.sort();
    found.into_iter().take(count).map(|(_, p)| p).collect()
}

#[test]
fn files_replayed_in_parallel_report_as_one_after_another() {
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = (1..=5)
        .map(|n| {
            pi_log(
                dir.path(),
                &format!("p{n}.jsonl"),
                "claude-sonnet-4-5",
                2 + n,
            )
        })
        .collect();
    files.extend(smallest_real_traces(3));
    files.push(dir.path().join("missing.jsonl"));
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let run = |jobs: &str| {
        let (report, bytes) =
            replay_files(&args(&paths, &["--policy", "all", "--jobs", jobs])).unwrap();
        (
            json::to_json(&report).to_string(),
            bytes,
            report.skipped.len(),
        )
    };
    let sequential = run("1");
    assert_eq!(sequential.2, 1, "the missing file is skipped, in its place");
    assert_eq!(run("2"), sequential);
    assert_eq!(run("3"), sequential);
}

/// A pi log whose calls read seven files in turn, so each path comes back
/// after six other reads (at risk under a small budget).
fn rereading_log(dir: &Path, calls: usize) -> PathBuf {
    let mut lines = vec![json!({"type": "session", "version": 3, "id": "reread",
        "timestamp": "2025-03-01T10:00:00.000Z", "cwd": "/w", "provider": "x", "modelId": "claude-sonnet-4-5"})];
    lines.push(json!({"type": "message", "message": {"role": "user",
        "content": [{"type": "text", "text": "read the files in src and fix the bug"}]}}));
    for i in 0..calls {
        let id = format!("t{i}");
        let path = format!("src/f{}.rs", i % 7);
        lines.push(json!({"type": "message", "message": {"role": "assistant",
            "content": [{"type": "toolCall", "id": id, "name": "read", "arguments": {"path": path}}],
            "usage": {"input": 10, "output": 20, "cacheRead": 600 * (i + 1), "cacheWrite": 50}, "stopReason": "toolUse"}}));
        lines.push(json!({"type": "message", "message": {"role": "toolResult", "toolCallId": id,
            "toolName": "read", "content": [{"type": "text", "text": format!("// {path}\n{}", "fn main() {}\n".repeat(150))}], "isError": false}}));
    }
    write_log(dir, "reread.jsonl", &lines)
}

#[test]
fn one_file_with_its_policies_split_over_threads_reports_as_one_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = vec![rereading_log(dir.path(), 40)];
    files.extend(smallest_real_traces(1));
    for file in &files {
        let run = |jobs: &str| {
            let extra = [
                "--policy", "all", "--losses", "--budget", "3k", "--jobs", jobs,
            ];
            let (report, _) = replay_files(&args(&[file], &extra)).unwrap();
            serde_json::from_str::<Value>(&json::to_json(&report)).unwrap()
        };
        let sequential = run("1");
        let losses = sequential["files"][0]["losses"].as_array().unwrap();
        let policies: std::collections::HashSet<&str> = losses
            .iter()
            .filter_map(|loss| loss["policy"].as_str())
            .collect();
        assert!(
            policies.len() > 1,
            "several policies lose something, so the merge has an order to keep: {policies:?}"
        );
        assert_eq!(run("2"), sequential, "{}", file.display());
        assert_eq!(run("3"), sequential, "{}", file.display());
    }
}
