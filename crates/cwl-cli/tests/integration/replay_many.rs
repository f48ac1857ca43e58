//! `cwl replay` over a directory of 2,000 session logs: every one is
//! replayed, in order, and the process's peak memory stays bounded.

use std::process::Command;

/// A small Chat Completions log: a task, `reads` reads and an answer.
fn chat_log(n: usize, reads: usize) -> String {
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are a coding agent."}),
        serde_json::json!({"role": "user", "content": format!("Task {n}: survey the crate.")}),
    ];
    for step in 0..reads {
        let id = format!("c{step}");
        messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "read", "arguments": format!("{{\"path\":\"src/f{step}.rs\"}}")}}
        ]}));
        let output: String = (0..20)
            .map(|line| format!("fn item_{n}_{step}_{line}() {{}}\n"))
            .collect();
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": output}));
    }
    messages.push(serde_json::json!({"role": "assistant", "content": "Surveyed."}));
    serde_json::json!({"model": "gpt-4o", "messages": messages}).to_string()
}

#[test]
fn two_thousand_logs_replay_in_order_with_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..2_000 {
        std::fs::write(dir.path().join(format!("log{n:04}.json")), chat_log(n, 3)).unwrap();
    }
    let output = Command::new(env!("CARGO_BIN_EXE_cwl"))
        .args(["replay", "--json", "--policy", "cwl,none", "--budget", "1k"])
        .args(["--tokenizer", "estimate"])
        .arg(dir.path())
        .output()
        .expect("cwl runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let files = report["files"].as_array().unwrap();
    assert_eq!(files.len(), 2_000);
    for (n, file) in files.iter().enumerate() {
        let path = file["path"].as_str().unwrap();
        assert!(path.ends_with(&format!("log{n:04}.json")), "{n}: {path}");
    }
    let line = stderr
        .lines()
        .find(|l| l.starts_with("replayed 2000 files"))
        .unwrap_or_else(|| panic!("no throughput line: {stderr}"));
    let peak: f64 = line
        .split("peak memory ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|mib| mib.parse().ok())
        .unwrap_or_else(|| panic!("no peak memory in {line}"));
    assert!(peak < 256.0, "{line}");
}
