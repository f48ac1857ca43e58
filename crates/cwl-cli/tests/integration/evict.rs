//! `cwl evict` end to end: the binary on real files and bad input.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn cwl(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cwl"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cwl");
    // The command may exit before reading its input (bad arguments).
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes());
    child.wait_with_output().expect("wait")
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
}

fn transcript() -> Value {
    let big = "match ".repeat(400);
    json!({
        "tools": [{"type": "function", "function": {"name": "grep", "description": "search", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Find the auth code."},
            {"role": "assistant", "content": null, "tool_calls": [call("c1", "delimiter", json!({"action": "start", "name": "find-auth", "type": "expl"}))]},
            {"role": "tool", "tool_call_id": "c1", "content": "Started expl episode `find-auth`."},
            {"role": "assistant", "content": null, "reasoning_content": "grep first", "tool_calls": [call("c2", "grep", json!({"pattern": "auth"}))]},
            {"role": "tool", "tool_call_id": "c2", "content": big},
            {"role": "assistant", "content": null, "tool_calls": [call("c3", "delimiter", json!({"action": "end", "description": "auth is in src/auth.rs"}))]},
            {"role": "tool", "tool_call_id": "c3", "content": "Ended expl episode `find-auth`."},
            {"role": "assistant", "content": "Auth is in src/auth.rs."},
            {"role": "user", "content": "Thanks."}
        ]
    })
}

fn run_ok(args: &[&str], input: &Value) -> Value {
    let output = cwl(args, &input.to_string());
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON object")
}

#[test]
fn under_budget_the_view_is_the_input() {
    let input = transcript();
    let output = run_ok(&["evict"], &input);
    assert_eq!(output["report"]["budget"], 80_000);
    assert_eq!(output["report"]["budget_met"], true);
    assert_eq!(output["report"]["episodes"], json!([]));
    assert_eq!(
        output["report"]["tokens_before"],
        output["report"]["tokens_after"]
    );
    let messages = output["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 10);
    assert_eq!(messages[5]["content"], input["messages"][5]["content"]);
    assert_eq!(messages[4]["reasoning_content"], "grep first");
}

#[test]
fn over_budget_the_episode_goes_and_its_description_stays() {
    let output = run_ok(&["evict", "--budget", "150", "-"], &transcript());
    let report = &output["report"];
    assert_eq!(report["budget_met"], true);
    assert!(report["tokens_before"].as_u64() > Some(150));
    assert!(report["tokens_after"].as_u64() <= Some(150));
    assert_eq!(report["episodes"][0]["name"], "find-auth");
    let contents: Vec<&str> = output["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|message| message["content"].as_str())
        .collect();
    assert!(contents.contains(&"Find the auth code."));
    assert!(contents.contains(&"Thanks."));
    assert!(
        !contents
            .iter()
            .any(|content| content.contains("match match"))
    );
}

#[test]
fn percentage_budgets_use_the_window() {
    let output = run_ok(
        &["evict", "--budget", "10%", "--window", "1500"],
        &transcript(),
    );
    assert_eq!(output["report"]["budget"], 150);
    let output = cwl(&["evict", "--budget", "10%"], &transcript().to_string());
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--window"));
}

#[test]
fn output_is_deterministic_byte_for_byte() {
    let input = transcript().to_string();
    let first = cwl(&["evict", "--budget", "150"], &input);
    let second = cwl(&["evict", "--budget", "150"], &input);
    assert!(first.status.success());
    assert_eq!(first.stdout, second.stdout);
}

#[test]
fn invalid_delimiter_calls_are_listed_in_warnings() {
    let mut input = transcript();
    input["messages"][2]["tool_calls"][0] = call(
        "c1",
        "delimiter",
        json!({"action": "start", "name": "find-auth"}),
    );
    let output = run_ok(&["evict"], &input);
    let warnings = output["report"]["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0]
            .as_str()
            .expect("text")
            .contains("message 2: delimiter call `c1` ignored: delimiter start needs `type`")
    );
    assert!(
        warnings[1]
            .as_str()
            .expect("text")
            .contains("no episode is active")
    );
}

#[test]
fn bad_input_exits_2_with_one_clear_line() {
    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), "<stdin>: not valid JSON"),
        ("[]".into(), "must be a JSON object with a `messages` array"),
        ("{}".into(), "has no `messages` array"),
        (json!({"messages": [{"role": "robot", "content": "x"}]}).to_string(), "messages[0]: unknown role `robot`"),
        (json!({"messages": [{"content": "x"}]}).to_string(), "messages[0]: message has no `role`"),
        (
            json!({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "zz", "content": "x"}]}).to_string(),
            "messages[1]: tool result for unknown call `zz`",
        ),
        (
            json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [call("c", "grep", json!({}))]}]}).to_string(),
            "message 0: tool call `c` has no tool result",
        ),
        (
            json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c"}]}]}).to_string(),
            "messages[0]: tool_calls[0]: tool call has no `function` object",
        ),
        (json!({"messages": [], "tools": [{"type": "function"}]}).to_string(), "tools[0]"),
    ];
    for (input, expected) in cases {
        let output = cwl(&["evict"], &input);
        assert_eq!(output.status.code(), Some(2), "{input}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{input}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn a_missing_file_and_a_bad_budget_are_input_errors() {
    let output = cwl(&["evict", "/nonexistent/session.json"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("/nonexistent/session.json: cannot read")
    );
    let output = cwl(&["evict", "--budget", "lots"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid budget `lots`"));
}

#[test]
fn tool_classes_can_be_overridden() {
    // With grep as intermediate, a budget that bulk stripping would meet
    // needs the intermediate level instead.
    let default = run_ok(&["evict", "--budget", "400"], &transcript());
    let levels = |output: &Value| -> Vec<String> {
        output["report"]["episodes"][0]["levels"]
            .as_array()
            .expect("levels")
            .iter()
            .map(|level| level["level"].as_str().expect("name").to_string())
            .collect()
    };
    assert_eq!(levels(&default), ["reasoning", "bulk"]);
    let overridden = run_ok(
        &["evict", "--budget", "400", "--class", "grep=intermediate"],
        &transcript(),
    );
    assert_eq!(
        levels(&overridden),
        ["reasoning", "intermediate"],
        "no bulk tool left, so no bulk level"
    );
    let output = cwl(&["evict", "--class", "grep=huge"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("expected bulk or intermediate"));
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cwl"))
        .arg("evict")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cwl");
    // The reader goes away before the command has read its input, so its
    // first write meets a closed pipe.
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(transcript().to_string().as_bytes())
        .expect("write stdin");
    drop(stdin);
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "{:?}", output.status);
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn low_water_and_residue_share_reach_the_engine() {
    let default = run_ok(&["evict", "--budget", "1000"], &transcript());
    assert_eq!(default["report"]["floor"], 800);
    let output = run_ok(
        &[
            "evict",
            "--budget",
            "1000",
            "--low-water",
            "0.5",
            "--residue-share",
            "off",
            "--keep-recent",
            "off",
        ],
        &transcript(),
    );
    assert_eq!(output["report"]["floor"], 500);
    for (flag, bad) in [
        ("--low-water", "0"),
        ("--low-water", "110%"),
        ("--residue-share", "x"),
        ("--keep-recent", "2"),
    ] {
        let output = cwl(&["evict", flag, bad], "");
        assert_eq!(output.status.code(), Some(2), "{flag} {bad}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("invalid share `{bad}`")),
            "{stderr}"
        );
    }
}

/// Three tasks, each a search, an edit and an answer of about 400 tokens
/// given outside any episode.
fn answered() -> Value {
    let mut messages = vec![json!({"role": "system", "content": "You are terse."})];
    for task in 0..3 {
        let (expl, act) = (format!("look-{task}"), format!("fix-{task}"));
        let id = |n: usize| format!("t{task}c{n}");
        messages.extend([
            json!({"role": "user", "content": format!("Task {task}.")}),
            json!({"role": "assistant", "content": null, "tool_calls": [call(&id(1), "delimiter", json!({"action": "start", "name": expl, "type": "expl"}))]}),
            json!({"role": "tool", "tool_call_id": id(1), "content": "started"}),
            json!({"role": "assistant", "content": null, "tool_calls": [call(&id(2), "grep", json!({"pattern": "auth"}))]}),
            json!({"role": "tool", "tool_call_id": id(2), "content": "src/auth.rs:1: fn auth()"}),
            json!({"role": "assistant", "content": null, "tool_calls": [call(&id(3), "delimiter", json!({"action": "end", "description": "found"}))]}),
            json!({"role": "tool", "tool_call_id": id(3), "content": "ended"}),
            json!({"role": "assistant", "content": null, "tool_calls": [call(&id(4), "delimiter", json!({"action": "start", "name": act, "type": "act", "dependencies": [expl]}))]}),
            json!({"role": "tool", "tool_call_id": id(4), "content": "started"}),
            json!({"role": "assistant", "content": null, "tool_calls": [call(&id(5), "edit", json!({"path": "src/auth.rs"}))]}),
            json!({"role": "tool", "tool_call_id": id(5), "content": "edited"}),
            json!({"role": "assistant", "content": null, "tool_calls": [call(&id(6), "delimiter", json!({"action": "end"}))]}),
            json!({"role": "tool", "tool_call_id": id(6), "content": "ended"}),
            json!({"role": "assistant", "content": format!("Answer {task}: {}", "fixed ".repeat(400))}),
        ]);
    }
    messages.push(json!({"role": "user", "content": "Thanks."}));
    json!({"messages": messages})
}

#[test]
fn answer_share_reaches_the_engine() {
    let kept = |output: &Value| -> Vec<bool> {
        let texts: Vec<String> = output["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter_map(|m| m["content"].as_str().map(String::from))
            .collect();
        (0..3)
            .map(|task| {
                texts
                    .iter()
                    .any(|t| t.starts_with(&format!("Answer {task}:")))
            })
            .collect()
    };
    let names = |output: &Value| -> Vec<String> {
        output["report"]["episodes"]
            .as_array()
            .expect("episodes")
            .iter()
            .map(|e| e["name"].as_str().expect("a name").to_string())
            .collect()
    };
    let capped = run_ok(&["evict", "--budget", "1000"], &answered());
    // The latest answer is the latest response, sent as it came.
    assert_eq!(kept(&capped), [false, false, true], "{capped}");
    assert_eq!(
        names(&capped),
        ["(unannotated #1)", "(unannotated #2)", "look-0", "look-1"],
        "the answers over the cap go first, and the acts stay"
    );
    let paper = run_ok(
        &["evict", "--budget", "1000", "--answer-share", "off"],
        &answered(),
    );
    let order = names(&paper);
    assert_eq!(
        order[..6],
        ["look-0", "look-1", "look-2", "fix-0", "fix-1", "fix-2"],
        "the paper's rule keeps the answers until the acts are gone"
    );
    let output = cwl(&["evict", "--answer-share", "15"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid share `15`"));
}

/// An exploration that rewrites its todo list five times, then an answer.
fn planned() -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are terse."}),
        json!({"role": "user", "content": "Port the parser."}),
        json!({"role": "assistant", "content": null, "tool_calls": [call("d1", "delimiter", json!({"action": "start", "name": "plan-port", "type": "expl"}))]}),
        json!({"role": "tool", "tool_call_id": "d1", "content": "Started expl episode `plan-port`."}),
    ];
    for write in 0..5 {
        let todos: Vec<Value> = (0..10)
            .map(|item| json!({"content": format!("Port step {item} of the parser"), "status": if item < write { "completed" } else { "pending" }}))
            .collect();
        let id = format!("t{write}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call(&id, "TodoWrite", json!({"todos": todos}))]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "Todos updated."}));
    }
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call("d2", "delimiter", json!({"action": "end", "description": "planned the port"}))]}));
    messages.push(
        json!({"role": "tool", "tool_call_id": "d2", "content": "Ended expl episode `plan-port`."}),
    );
    messages.push(json!({"role": "assistant", "content": "Planned."}));
    json!({"messages": messages})
}

#[test]
fn superseded_plans_go_first_unless_kept() {
    let levels = |output: &Value| -> Vec<String> {
        output["report"]["episodes"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|episode| episode["levels"].as_array().unwrap().clone())
            .map(|level| level["level"].as_str().unwrap().to_string())
            .collect()
    };
    let calls = |output: &Value| -> Vec<String> {
        output["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|message| message["tool_calls"].as_array())
            .flatten()
            .map(|call| call["id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = run_ok(&["evict", "--budget", "100000"], &planned());
    assert_eq!(calls(&all), ["d1", "t0", "t1", "t2", "t3", "t4", "d2"]);
    let dropped = run_ok(&["evict", "--budget", "700"], &planned());
    let dropped_levels = levels(&dropped);
    assert!(!dropped_levels.is_empty(), "{dropped}");
    assert!(
        dropped_levels.iter().all(|level| level == "plan"),
        "{dropped}"
    );
    assert!(
        calls(&dropped).contains(&"t4".to_string()),
        "the latest plan stays"
    );
    assert!(!calls(&dropped).contains(&"t0".to_string()));
    let kept = run_ok(&["evict", "--budget", "700", "--plans", "keep"], &planned());
    let kept_levels = levels(&kept);
    assert!(!kept_levels.is_empty(), "{kept}");
    assert!(!kept_levels.iter().any(|level| level == "plan"), "{kept}");
    let output = cwl(&["evict", "--plans", "sometimes"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("expected `drop` or `keep`"));
}

#[test]
fn a_model_that_drops_earlier_reasoning_gets_it_taken_out() {
    let reasoning = |view: &Value| {
        view["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m.get("reasoning_content").is_some())
            .count()
    };
    let input = transcript();
    assert_eq!(reasoning(&run_ok(&["evict"], &input)), 1, "no model: kept");
    assert_eq!(reasoning(&run_ok(&["evict", "--model", "o3"], &input)), 0);
    let mut named = transcript();
    named["model"] = json!("gpt-5-codex");
    assert_eq!(
        reasoning(&run_ok(&["evict"], &named)),
        0,
        "the input's model"
    );
    assert_eq!(
        reasoning(&run_ok(&["evict", "--model", "claude-opus-4-5"], &named)),
        1,
        "--model overrides it"
    );
}

/// The flags that turn every refinement off: Algorithm 1 spelled out, as
/// it was before `--preset paper`.
const PAPER_FLAGS: [&str; 16] = [
    "--low-water",
    "1",
    "--residue-share",
    "off",
    "--keep-recent",
    "off",
    "--superseded",
    "off",
    "--restated",
    "off",
    "--answer-share",
    "off",
    "--act-outputs",
    "keep",
    "--plans",
    "keep",
];

/// A `cwl gen` session as an OpenAI-shape transcript: its tools and
/// messages, in order.
fn generated_transcript() -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gen.jsonl");
    let output = cwl(
        &[
            "gen",
            "--tasks",
            "6",
            "--seed",
            "3",
            "-o",
            path.to_str().unwrap(),
        ],
        "",
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut tools = Vec::new();
    let mut messages = Vec::new();
    for line in std::fs::read_to_string(&path).unwrap().lines() {
        match serde_json::from_str::<cwl::Record>(line).unwrap() {
            cwl::Record::Session { tools: given, .. } => tools = given,
            cwl::Record::Message { message, .. } => messages.push(message),
            _ => {}
        }
    }
    assert!(messages.len() > 50, "a session long enough to evict from");
    json!({"tools": cwl::openai::to_tools(&tools), "messages": cwl::openai::to_messages(&messages)})
}

#[test]
fn the_paper_preset_is_the_seven_flags_byte_for_byte() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/transcript.json"
    ))
    .unwrap();
    for (input, budget) in [
        (example, "400"),
        (generated_transcript().to_string(), "20k"),
    ] {
        let flags: Vec<&str> = ["evict", "--budget", budget]
            .into_iter()
            .chain(PAPER_FLAGS)
            .collect();
        let by_flags = cwl(&flags, &input);
        let by_preset = cwl(&["evict", "--budget", budget, "--preset", "paper"], &input);
        let by_default = cwl(&["evict", "--budget", budget], &input);
        assert!(
            by_flags.status.success(),
            "{}",
            String::from_utf8_lossy(&by_flags.stderr)
        );
        assert_eq!(by_preset.stdout, by_flags.stdout, "budget {budget}");
        assert_ne!(
            by_default.stdout, by_flags.stdout,
            "the preset changes something at {budget}"
        );
        let overridden = cwl(
            &[
                "evict",
                "--budget",
                budget,
                "--preset",
                "paper",
                "--low-water",
                "80%",
            ],
            &input,
        );
        assert_ne!(
            overridden.stdout, by_preset.stdout,
            "a flag overrides its preset"
        );
    }
}
