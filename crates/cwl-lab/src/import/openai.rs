//! OpenAI Chat Completions JSON: `{"messages": [...], "tools": [...]?,
//! "model": ...?}`, or a bare `messages` array.
//!
//! Mapping: `system`/`developer` → System, `user` → User, `assistant` →
//! Assistant (`reasoning_content` as a Reasoning block first, then the
//! text, then `tool_calls` with their arguments string as is), `tool` →
//! ToolResult. Content is a string or a list of parts (text parts joined by
//! newlines, other parts as `[type]` placeholders). A malformed message is
//! skipped with a warning naming its index; the rest is imported.

use ::cwl::{Block, Message, ToolResult};
use serde_json::{Map, Value};

use super::common::{Outcome, Sink, content_text};
use super::{Meta, Stats};

/// Imports a whole document; `Err` when it is not a chat document at all.
pub(crate) fn import(
    doc: &Value,
    meta: &mut Meta,
    sink: &mut Sink,
    stats: &mut Stats,
) -> Result<(), String> {
    let messages = match doc {
        Value::Array(messages) => messages,
        Value::Object(fields) => {
            meta.model = fields
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string);
            match fields.get("tools") {
                None | Some(Value::Null) => {}
                Some(Value::Array(tools)) => {
                    for (index, tool) in tools.iter().enumerate() {
                        match ::cwl::openai::parse_tool(tool) {
                            Ok(spec) => meta.tools.push(spec),
                            Err(what) => {
                                sink.warn(None, format!("tools[{index}]: {what}; tool skipped"))
                            }
                        }
                    }
                }
                Some(_) => sink.warn(None, "`tools` is not an array; ignored"),
            }
            match fields.get("messages") {
                Some(Value::Array(messages)) => messages,
                _ => return Err("no `messages` array".into()),
            }
        }
        _ => return Err("expected an object with a `messages` array".into()),
    };
    for (index, message) in messages.iter().enumerate() {
        let outcome = match convert(message) {
            Ok(Some(message)) => {
                let model = matches!(message, Message::Assistant { .. })
                    .then(|| meta.model.clone())
                    .flatten();
                sink.push(super::common::Located {
                    line: None,
                    event: super::Event::Message {
                        message,
                        timestamp: None,
                        usage: None,
                        model,
                        cost_usd: None,
                    },
                });
                Outcome::Used
            }
            Ok(None) => sink.reject(None, format!("messages[{index}]: assistant message with no content and no tool calls; skipped")),
            Err(what) => sink.reject(None, format!("messages[{index}]: {what}; skipped")),
        };
        stats.count_record(outcome);
    }
    Ok(())
}

fn convert(message: &Value) -> Result<Option<Message>, String> {
    let Value::Object(fields) = message else {
        return Err("not a JSON object".into());
    };
    let role = string(fields, "role")?.ok_or("no `role`")?;
    let content = || fields.get("content").map(content_text).unwrap_or_default();
    Ok(Some(match role {
        "system" | "developer" => Message::system(content()),
        "user" => Message::user(content()),
        "tool" => Message::ToolResult(ToolResult {
            call_id: string(fields, "tool_call_id")?
                .ok_or("tool message has no `tool_call_id`")?
                .to_string(),
            tool_name: string(fields, "name")?.unwrap_or_default().to_string(),
            content: content(),
            is_error: false,
        }),
        "assistant" => {
            let mut blocks = Vec::new();
            let reasoning = string(fields, "reasoning_content")?.or(string(fields, "reasoning")?);
            if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                blocks.push(Block::Reasoning {
                    text: text.to_string(),
                    signature: None,
                });
            }
            let text = content();
            if !text.is_empty() {
                blocks.push(Block::Text { text });
            }
            match fields.get("tool_calls") {
                None | Some(Value::Null) => {}
                Some(Value::Array(calls)) => {
                    for (index, call) in calls.iter().enumerate() {
                        let call = ::cwl::openai::parse_tool_call(call)
                            .map_err(|what| format!("tool_calls[{index}]: {what}"))?;
                        blocks.push(Block::ToolCall(call));
                    }
                }
                Some(_) => return Err("`tool_calls` is not an array".into()),
            }
            if blocks.is_empty() {
                return Ok(None);
            }
            Message::Assistant { content: blocks }
        }
        other => return Err(format!("unknown role `{other}`")),
    }))
}

fn string<'a>(fields: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match fields.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(format!("`{key}` is not a string")),
    }
}
