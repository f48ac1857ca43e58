//! How the scripted upstream counts a request's input tokens, which it
//! reports as usage: shared by `scripted_upstream.rs` and the proxy's
//! traffic measurement (`tests/integration/measure`), whose local
//! upstream must report what the recorded runs' upstream did.

use cwl::TokenCounter as _;
use serde_json::Value;

/// The text of a content value: a string, or the `text` of its parts.
pub fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => s.clone(),
                other => other
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Input tokens of an Anthropic Messages request: system prompt, tools
/// and messages in o200k tokens, 4 a message and 3 a tool call besides,
/// thinking only in the latest user turn.
pub fn anthropic_tokens(body: &Value) -> usize {
    let count = |text: &str| cwl::O200k.count(text);
    let mut total = body.get("system").map_or(0, |s| count(&text_of(s)));
    if let Some(tools) = body.get("tools") {
        total += count(&tools.to_string());
    }
    let messages = body["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let turn = user_turn(messages).unwrap_or(0);
    for (index, message) in messages.iter().enumerate() {
        total += 4;
        let content = &message["content"];
        if let Some(text) = content.as_str() {
            total += count(text);
            continue;
        }
        for block in content.as_array().into_iter().flatten() {
            total += match block["type"].as_str().unwrap_or_default() {
                "text" => count(block["text"].as_str().unwrap_or_default()),
                "thinking" if index < turn => 0,
                "thinking" => count(block["thinking"].as_str().unwrap_or_default()),
                "tool_use" => {
                    3 + count(block["name"].as_str().unwrap_or_default())
                        + count(&block["input"].to_string())
                }
                "tool_result" => count(&text_of(&block["content"])),
                _ => 0,
            };
        }
    }
    total
}

/// Where the latest user turn of Anthropic `messages` starts: its last
/// user message that is not tool results only.
pub fn user_turn(messages: &[Value]) -> Option<usize> {
    messages
        .iter()
        .rposition(|message| message["role"] == "user" && !only_tool_results(&message["content"]))
}

/// Whether a user message's content is tool results only (the model's
/// turn goes on), not a new user turn.
pub fn only_tool_results(content: &Value) -> bool {
    content.as_array().is_some_and(|blocks| {
        !blocks.is_empty() && blocks.iter().all(|block| block["type"] == "tool_result")
    })
}

/// Input tokens of an OpenAI Responses request, counted like
/// [`anthropic_tokens`], reasoning only in the latest user turn; each
/// reasoning item counted stands for `reasoning` tokens besides its summary.
pub fn responses_tokens(body: &Value, reasoning: usize) -> usize {
    let count = |text: &str| cwl::O200k.count(text);
    let mut total = body
        .get("instructions")
        .map_or(0, |s| count(s.as_str().unwrap_or_default()));
    if let Some(tools) = body.get("tools") {
        total += count(&tools.to_string());
    }
    let input = &body["input"];
    if let Some(text) = input.as_str() {
        return total + 4 + count(text);
    }
    let items = input.as_array().map_or(&[][..], Vec::as_slice);
    let turn = responses_turn(items);
    for (index, item) in items.iter().enumerate() {
        total += match item["type"].as_str().unwrap_or("message") {
            "reasoning" if index < turn => 0,
            "message" => 4 + count(&text_of(&item["content"])),
            "function_call" => {
                3 + count(item["name"].as_str().unwrap_or_default())
                    + count(item["arguments"].as_str().unwrap_or_default())
            }
            "custom_tool_call" => {
                3 + count(item["name"].as_str().unwrap_or_default())
                    + count(item["input"].as_str().unwrap_or_default())
            }
            "function_call_output" | "custom_tool_call_output" => count(&text_of(&item["output"])),
            "reasoning" => reasoning + count(&text_of(&item["summary"])),
            _ => count(&item.to_string()),
        };
    }
    total
}

/// Where the latest user turn of Responses `input` starts.
pub fn responses_turn(items: &[Value]) -> usize {
    items
        .iter()
        .rposition(|item| {
            item["type"].as_str().unwrap_or("message") == "message" && item["role"] == "user"
        })
        .unwrap_or(0)
}
