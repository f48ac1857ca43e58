//! Anthropic Messages: `text`, `thinking`, `redacted_thinking`,
//! `tool_use` and `tool_result` blocks.
//!
//! An assistant message is one engine assistant message. A user message
//! is its `tool_result` blocks, one engine tool result each, then one user
//! turn of its text blocks, if any. A `system` message (Claude Code sends
//! some) is a system message. Written back, a run of tool results and the
//! user turn after them share one user message, as the API expects.
//! `redacted_thinking` keeps its data as the reasoning's signature, marked
//! with [`REDACTED`] so it is written back as it came.

use cwl::{Block, Message, ToolCall, ToolResult};
use serde_json::{Map, Value, json};

use super::{Group, Names, Part, string, text_of, tool_name};

/// Marks the signature of a `redacted_thinking` block.
const REDACTED: &str = "redacted_thinking:";

/// Text part types of user and tool result content.
const TEXT: &[&str] = &["text"];

/// Reads one message.
pub(super) fn parse(value: &Value, names: &mut Names) -> Result<Vec<Part>, String> {
    let fields = value.as_object().ok_or("a message must be a JSON object")?;
    let role = string(fields, "role")?;
    let content = fields.get("content");
    match role {
        "system" => Ok(vec![Part::Message(Message::system(text_of(
            content, TEXT,
        )?))]),
        "user" => user(content, names),
        "assistant" => assistant(content, names).map(|m| vec![Part::Message(m)]),
        other => Err(format!(
            "unknown role `{other}` (expected user, assistant or system)"
        )),
    }
}

fn user(content: Option<&Value>, names: &Names) -> Result<Vec<Part>, String> {
    let Some(Value::Array(blocks)) = content else {
        return Ok(vec![Part::Message(Message::user(text_of(content, TEXT)?))]);
    };
    let mut parts = Vec::new();
    let mut texts = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let at = |what: String| format!("content[{index}]: {what}");
        let fields = block
            .as_object()
            .ok_or_else(|| at("a block must be a JSON object".into()))?;
        match string(fields, "type").map_err(at)? {
            "tool_result" => {
                let call_id = string(fields, "tool_use_id").map_err(at)?.to_string();
                parts.push(Part::Message(Message::ToolResult(ToolResult {
                    tool_name: tool_name(names, &call_id).map_err(at)?,
                    content: text_of(fields.get("content"), TEXT).map_err(at)?,
                    is_error: fields
                        .get("is_error")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    call_id,
                })));
            }
            "text" => texts.push(string(fields, "text").map_err(at)?.to_string()),
            other => {
                return Err(at(format!(
                    "unsupported block type `{other}` in a user message (cwl holds text and tool_result blocks)"
                )));
            }
        }
    }
    if !texts.is_empty() || parts.is_empty() {
        parts.push(Part::Message(Message::user(texts.join("\n"))));
    }
    Ok(parts)
}

fn assistant(content: Option<&Value>, names: &mut Names) -> Result<Message, String> {
    let Some(Value::Array(blocks)) = content else {
        return Ok(Message::assistant_text(text_of(content, TEXT)?));
    };
    let mut out = Vec::with_capacity(blocks.len());
    for (index, block) in blocks.iter().enumerate() {
        let at = |what: String| format!("content[{index}]: {what}");
        let fields = block
            .as_object()
            .ok_or_else(|| at("a block must be a JSON object".into()))?;
        out.push(match string(fields, "type").map_err(at)? {
            "text" => Block::Text {
                text: string(fields, "text").map_err(at)?.to_string(),
            },
            "thinking" => Block::Reasoning {
                text: string(fields, "thinking").map_err(at)?.to_string(),
                signature: fields.get("signature").and_then(Value::as_str).map(str::to_string),
            },
            "redacted_thinking" => Block::Reasoning {
                text: String::new(),
                signature: Some(format!("{REDACTED}{}", string(fields, "data").map_err(at)?)),
            },
            "tool_use" => {
                let id = string(fields, "id").map_err(at)?;
                let name = string(fields, "name").map_err(at)?;
                let input = fields.get("input").cloned().unwrap_or_else(|| json!({}));
                names.insert(id.to_string(), name.to_string());
                Block::ToolCall(ToolCall::new(id, name, input.to_string()))
            }
            other => {
                return Err(at(format!(
                    "unsupported block type `{other}` in an assistant message (cwl holds text, thinking and tool_use blocks)"
                )));
            }
        });
    }
    if out.is_empty() {
        return Err("assistant message has no content".into());
    }
    Ok(Message::Assistant { content: out })
}

/// Writes the first group: a run of tool results with the user turn after
/// them in one user message, or any other message alone.
pub(super) fn render_group(messages: &[&Message]) -> Group {
    match messages[0] {
        Message::System { content } => single(json!({"role": "system", "content": content})),
        Message::User { content } => single(json!({"role": "user", "content": content})),
        Message::Assistant { content } => single(json!({
            "role": "assistant",
            "content": content.iter().map(block).collect::<Vec<_>>(),
        })),
        Message::ToolResult(_) => {
            let used = group_len(messages);
            let blocks = messages[..used]
                .iter()
                .filter_map(|message| match message {
                    Message::User { content } => Some(json!({"type": "text", "text": content})),
                    Message::ToolResult(result) => Some(tool_result(result)),
                    _ => None, // a group holds nothing else
                })
                .collect::<Vec<_>>();
            Group {
                messages: used,
                values: vec![json!({"role": "user", "content": blocks})],
            }
        }
    }
}

/// How many messages the first group stands for: a run of tool results
/// and the user turn right after them, if any; any other message alone.
pub(super) fn group_len(messages: &[&Message]) -> usize {
    if !matches!(messages.first(), Some(Message::ToolResult(_))) {
        return 1;
    }
    let results = messages
        .iter()
        .take_while(|message| matches!(message, Message::ToolResult(_)))
        .count();
    match messages.get(results) {
        Some(Message::User { .. }) => results + 1,
        _ => results,
    }
}

fn tool_result(result: &ToolResult) -> Value {
    let mut fields = Map::new();
    fields.insert("type".into(), json!("tool_result"));
    fields.insert("tool_use_id".into(), json!(result.call_id));
    fields.insert("content".into(), json!(result.content));
    if result.is_error {
        fields.insert("is_error".into(), json!(true));
    }
    Value::Object(fields)
}

fn single(value: Value) -> Group {
    Group {
        messages: 1,
        values: vec![value],
    }
}

fn block(block: &Block) -> Value {
    match block {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::Reasoning { text, signature } => match signature.as_deref() {
            Some(data) if data.starts_with(REDACTED) => {
                json!({"type": "redacted_thinking", "data": &data[REDACTED.len()..]})
            }
            Some(signature) => {
                json!({"type": "thinking", "thinking": text, "signature": signature})
            }
            None => json!({"type": "thinking", "thinking": text}),
        },
        Block::ToolCall(call) => json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": serde_json::from_str::<Value>(&call.arguments)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({})),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Shape, parse as parse_any, render};
    use super::*;

    fn read(values: &[Value]) -> Vec<Message> {
        let mut names = Names::new();
        values
            .iter()
            .flat_map(|value| parse_any(Shape::Anthropic, value, &mut names).unwrap())
            .map(|part| match part {
                Part::Message(message) => message,
                Part::Assistant(_) => unreachable!("anthropic gives whole messages"),
            })
            .collect()
    }

    #[test]
    fn a_conversation_reads_into_engine_messages_and_writes_back_the_same() {
        let conversation = vec![
            json!({"role": "user", "content": "Find the bug."}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Look at main.", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "main.rs"}},
                {"type": "tool_use", "id": "t2", "name": "grep", "input": {"pattern": "fn"}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "fn main() {}"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "oops", "is_error": true},
                {"type": "text", "text": "Also check lib.rs"},
            ]}),
        ];
        let messages = read(&conversation);
        assert_eq!(messages.len(), 5, "user, assistant, two results, user");
        assert_eq!(
            messages[3],
            Message::tool_result("t2", "grep", "oops", true),
            "a result takes its tool's name from the call"
        );
        let refs: Vec<&Message> = messages.iter().collect();
        assert_eq!(render(Shape::Anthropic, &refs), conversation);
    }

    #[test]
    fn orphans_and_blocks_cwl_cannot_hold_are_refused_by_name() {
        let mut names = Names::new();
        let orphan = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": ""}]});
        let error = parse(&orphan, &mut names).unwrap_err();
        assert!(
            error.contains("content[0]: tool result for unknown call `x`"),
            "{error}"
        );
        let image = json!({"role": "user", "content": [{"type": "image", "source": {}}]});
        let error = parse(&image, &mut names).unwrap_err();
        assert!(error.contains("unsupported block type `image`"), "{error}");
        let role = json!({"role": "tool", "content": ""});
        assert!(
            parse(&role, &mut names)
                .unwrap_err()
                .contains("unknown role `tool`")
        );
    }
}
