//! The porting task most proxy tests send: a pi-like client reading one
//! file a step over Chat Completions, and the planner answers that fold
//! its reads.

use serde_json::{Value, json};

use super::{Reply, Seen, quoted};

/// The client's one tool, as Chat Completions declares it.
pub const TOOLS: &str = r#"[{"type": "function", "function": {"name": "read", "description": "Reads a file", "parameters": {"type": "object"}}}]"#;

/// Tokens of `text` in the proxy's default counter.
pub fn count(text: &str) -> usize {
    cwl::TokenCounter::count(&cwl::O200k::new(), text)
}

/// Tokens of what the model reads in a wire value: its texts, arguments
/// and outputs, not the JSON around them.
pub fn content_tokens(value: &Value) -> usize {
    match value {
        Value::Object(fields) => fields
            .iter()
            .map(|(key, value)| match (key.as_str(), value) {
                ("content" | "text" | "arguments" | "output", Value::String(text)) => count(text),
                (_, Value::String(_)) => 0,
                (_, other) => content_tokens(other),
            })
            .sum(),
        Value::Array(items) => items.iter().map(content_tokens).sum(),
        _ => 0,
    }
}

/// The output of read `step`, `lines` lines long.
pub fn output(step: usize, lines: usize) -> String {
    (0..lines)
        .map(|j| format!("value_{step}_{j} = compute_{j}(input_{step})  # src/mod_{step}.py:{j}\n"))
        .collect()
}

/// The porting task's opening: pi's system prompt and the task.
pub fn opening() -> Vec<String> {
    vec![
        r#"{"role": "system", "content": "You are pi."}"#.to_string(),
        r#"{"role": "user", "content": "Task: port the module"}"#.to_string(),
    ]
}

/// Step `step` of the porting task: read `step` (`lines` lines long), and
/// after the 15th an answer and a second task.
pub fn step(messages: &mut Vec<String>, step: usize, lines: usize) {
    push_read(messages, step, lines);
    if step == 15 {
        messages.push(r#"{"role": "assistant", "content": "half done"}"#.to_string());
        messages.push(r#"{"role": "user", "content": "Task: the rest"}"#.to_string());
    }
}

/// Adds read `step` (the call, then its `lines`-line result) to a Chat
/// Completions history.
pub fn push_read(messages: &mut Vec<String>, step: usize, lines: usize) {
    let id = format!("call_{step}");
    messages.push(format!(
        r#"{{"role": "assistant", "content": "step {step}", "tool_calls": [{{"id": "{id}", "type": "function", "function": {{"name": "read", "arguments": {}}}}}]}}"#,
        quoted(&format!(r#"{{"path": "src/mod_{step}.py"}}"#))
    ));
    messages.push(format!(
        r#"{{"role": "tool", "tool_call_id": "{id}", "content": {}}}"#,
        quoted(&output(step, lines))
    ));
}

/// A streamed Chat Completions request of `messages` offering [`TOOLS`].
pub fn chat_body(messages: &[String]) -> String {
    format!(
        r#"{{"model": "gpt-test", "tools": {TOOLS}, "stream": true, "messages": [{}]}}"#,
        messages.join(", ")
    )
}

/// A Chat Completions answer with `text` and usage.
pub fn chat_answer(text: &str) -> Reply {
    Reply::Whole {
        status: 200,
        headers: vec![("content-type", "application/json")],
        body: json!({
            "choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1234, "completion_tokens": 56},
        })
        .to_string(),
    }
}

/// A Self-GC plan folding `ids` (`read:N`) as stable artifacts.
pub fn plan_folding(ids: &[String]) -> String {
    format!(
        "<above_conversation_summary>\nA porting session.\n</above_conversation_summary>\n<gc_plan>\n<fold kind=\"function\" reason=\"stable_artifact\">\n{}\n</fold>\n</gc_plan>",
        ids.join("\n")
    )
}

/// A planner's answer that folds every read but the latest six it is
/// shown.
pub fn fold_plan(seen: &Seen) -> String {
    let mut ids: Vec<u64> = seen
        .text()
        .split("function:read:")
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let keep = ids.len().saturating_sub(6);
    let ids: Vec<String> = ids[..keep].iter().map(|n| format!("read:{n}")).collect();
    plan_folding(&ids)
}

/// Asserts that in request `at`, every Chat Completions tool result
/// follows its call and no call is left unanswered before another
/// message.
pub fn assert_paired(at: usize, sent: &[Value]) {
    let mut open: Vec<&Value> = Vec::new();
    for message in sent {
        if message["role"] == "tool" {
            let position = open.iter().position(|id| **id == message["tool_call_id"]);
            open.remove(position.expect("a result follows its call"));
        } else {
            assert!(open.is_empty(), "request {at}: calls unanswered: {open:?}");
        }
        if let Some(calls) = message["tool_calls"].as_array() {
            open.extend(calls.iter().map(|c| &c["id"]));
        }
    }
}
