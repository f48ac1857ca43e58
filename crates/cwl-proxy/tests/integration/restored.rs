//! Claude Code's files restored after compacting, through the proxy.

use crate::support;

use serde_json::{Value, json};
use support::Scripted;

/// A restored file: Claude Code's call and result reminders.
fn restored(path: &str, lines: usize) -> [Value; 2] {
    let body: String = (1..=lines)
        .map(|n| format!("{n:6}→value_{n} = compute_total_{n}(records, limit={n})\\n"))
        .collect();
    [
        json!({"type": "text", "text": format!(
            "<system-reminder>\nCalled the Read tool with the following input: {{\"file_path\":\"{path}\"}}\n</system-reminder>"
        )}),
        json!({"type": "text", "text": format!(
            "<system-reminder>\nResult of calling the Read tool: \"{body}\"\n</system-reminder>"
        )}),
    ]
}

/// After a compaction the restored reads are tool output the budget may
/// take, not a user turn: without that, four restored files alone kept
/// every request over the budget.
#[tokio::test]
async fn files_restored_after_compacting_are_evictable_reads() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(6_000, &anthropic, &openai, None, None).await;
    let mut first = Vec::new();
    for file in ["a", "b", "c", "d"] {
        first.extend(restored(&format!("/repo/src/{file}.py"), 120));
    }
    first.push(json!({"type": "text", "text": "This session is being continued from a previous conversation. Summary: edit src/e.py."}));
    let body = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "tools": [{"name": "Read", "description": "Reads a file", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": first},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/repo/src/e.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def e():\n    return 1\n"}]},
        ],
    });
    let response = reqwest::Client::new()
        .post(proxy.url("/v1/messages"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let sent = anthropic.seen().pop().unwrap().json();
    let text = sent["messages"].to_string();
    assert!(
        !text.contains("compute_total_100"),
        "restored reads went upstream: {}",
        &text[..text.len().min(400)]
    );
    assert!(
        text.contains("This session is being continued"),
        "the user turn stays"
    );
    assert!(text.contains("toolu_1"), "the latest turn stays");
    let event = proxy.events().pop().unwrap();
    assert!(event.budget_met, "{event:?}");
}
