//! The OpenAI Chat Completions format.
//!
//! Each message is one unit of at most one engine message: `system` and
//! `developer` → system, `user` → user turn (text parts joined, other
//! parts named), `assistant` → assistant (`reasoning_content` → reasoning,
//! `content` → text, `tool_calls` → tool calls), `tool` → tool result.
//! Anything else (legacy `function` messages, an assistant with nothing in
//! it) goes as it came. Rebuilt messages keep every field of the client's
//! message and drop only the evicted calls, reasoning or text.

use serde_json::{Value, json};

use cwl::{Block, Message, ToolCall, ToolResult, ToolSpec};

use super::{CallNames, Item, Part, Unit, Wire, content_text};
use crate::body::Body;

/// The OpenAI Chat Completions API (`POST /v1/chat/completions`).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiChat;

impl Wire for OpenAiChat {
    fn provider(&self) -> &'static str {
        "openai"
    }

    fn history_key(&self) -> &'static str {
        "messages"
    }

    fn system(&self, _body: &Body) -> Option<String> {
        None
    }

    fn tools(&self, body: &Body) -> Vec<ToolSpec> {
        tools(body)
    }

    fn units(&self, items: &[Item], names: &mut CallNames) -> Vec<Unit> {
        items
            .iter()
            .map(|item| Unit {
                items: 1,
                messages: message(item.value(), names).into_iter().collect(),
            })
            .collect()
    }

    fn rebuild(&self, items: &[Item], parts: &[Part<'_>]) -> Vec<Value> {
        let (Some(item), Some(part)) = (items.first(), parts.first()) else {
            return Vec::new();
        };
        let mut out = item.value().clone();
        match part.message {
            Message::Assistant { content } => {
                let Some(fields) = out.as_object_mut() else {
                    return Vec::new();
                };
                if !content.iter().any(|b| matches!(b, Block::Reasoning { .. })) {
                    fields.remove("reasoning_content");
                    fields.remove("reasoning_signature");
                    fields.remove("reasoning");
                }
                let text: Vec<&str> = content
                    .iter()
                    .filter_map(|b| match b {
                        Block::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let original = content_text(fields.get("content").unwrap_or(&Value::Null));
                let text = text.join("\n");
                if text != original {
                    fields.insert(
                        "content".into(),
                        if text.is_empty() {
                            Value::Null
                        } else {
                            Value::String(text)
                        },
                    );
                }
                let kept: Vec<&str> = content
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolCall(call) => Some(call.id.as_str()),
                        _ => None,
                    })
                    .collect();
                let calls: Vec<Value> = fields
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(|calls| {
                        calls
                            .iter()
                            .filter(|c| {
                                c.get("id")
                                    .and_then(Value::as_str)
                                    .is_some_and(|id| kept.contains(&id))
                            })
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                if calls.is_empty() {
                    fields.remove("tool_calls");
                } else {
                    fields.insert("tool_calls".into(), Value::Array(calls));
                }
                let empty = fields.get("content").is_none_or(Value::is_null)
                    && !fields.contains_key("tool_calls");
                if empty {
                    return Vec::new();
                }
            }
            Message::ToolResult(result) => {
                out["content"] = Value::String(result.content.clone());
            }
            Message::User { content } => {
                // A strategy's control-plane reminder (Self-GC's fold
                // pointer) appended to the client's text.
                let original = content_text(out.get("content").unwrap_or(&Value::Null));
                if let Some(added) = content.strip_prefix(original.as_str())
                    && !added.is_empty()
                {
                    match out.get_mut("content") {
                        Some(Value::Array(parts)) => {
                            parts.push(json!({"type": "text", "text": added}));
                        }
                        _ => out["content"] = Value::String(content.clone()),
                    }
                }
            }
            Message::System { .. } => {}
        }
        vec![out]
    }

    fn note(&self, text: &str) -> Value {
        json!({"role": "user", "content": text})
    }

    fn tool(&self, spec: &ToolSpec) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        })
    }

    /// Chat Completions has no error flag on a result: an error answer is
    /// its text.
    fn answer(&self, item: &Value, call_id: &str, content: &str, _: bool) -> Option<Value> {
        let held = item.get("role").and_then(Value::as_str) == Some("tool")
            && item.get("tool_call_id").and_then(Value::as_str) == Some(call_id);
        held.then(|| {
            let mut out = item.clone();
            out["content"] = Value::String(content.to_string());
            out
        })
    }
}

/// The tool definitions of a Chat Completions or Responses body.
pub(crate) fn tools(body: &Body) -> Vec<ToolSpec> {
    body.read::<Vec<Value>>("tools")
        .unwrap_or_default()
        .iter()
        .filter_map(|tool| cwl::openai::parse_tool(tool).ok())
        .collect()
}

fn message(value: &Value, names: &mut CallNames) -> Option<Message> {
    let content = || content_text(value.get("content").unwrap_or(&Value::Null));
    match value.get("role").and_then(Value::as_str)? {
        "system" | "developer" => Some(Message::system(content())),
        "user" => Some(Message::user(content())),
        "assistant" => {
            let mut blocks = Vec::new();
            if let Some(reasoning) = value.get("reasoning_content").and_then(Value::as_str) {
                blocks.push(Block::Reasoning {
                    text: reasoning.to_string(),
                    signature: value
                        .get("reasoning_signature")
                        .and_then(Value::as_str)
                        .map(super::opaque_stand_in),
                });
            }
            let text = content();
            if !text.is_empty() {
                blocks.push(Block::Text { text });
            }
            for call in value
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let call = cwl::openai::parse_tool_call(call).unwrap_or_else(|_| {
                    ToolCall::new(
                        call.get("id").and_then(Value::as_str).unwrap_or_default(),
                        "unknown",
                        call.to_string(),
                    )
                });
                names.insert(call.id.clone(), call.name.clone());
                blocks.push(Block::ToolCall(call));
            }
            (!blocks.is_empty()).then_some(Message::Assistant { content: blocks })
        }
        "tool" => {
            let call_id = value.get("tool_call_id")?.as_str()?.to_string();
            Some(Message::ToolResult(ToolResult {
                tool_name: names.remove(&call_id).unwrap_or_default(),
                call_id,
                content: content(),
                is_error: false,
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(value: Value) -> Item {
        Item::new(serde_json::value::to_raw_value(&value).unwrap())
    }

    #[test]
    fn messages_map_one_to_one() {
        let mut names = CallNames::default();
        let items = [
            item(json!({"role": "system", "content": "be brief"})),
            item(
                json!({"role": "user", "content": [{"type": "text", "text": "fix"}, {"type": "image_url", "image_url": {}}]}),
            ),
            item(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]})),
            item(json!({"role": "tool", "tool_call_id": "c1", "content": "text of a"})),
            item(json!({"role": "function", "name": "old", "content": "x"})),
        ];
        let units = OpenAiChat.units(&items, &mut names);
        let messages: Vec<Vec<Message>> = units.into_iter().map(|u| u.messages).collect();
        assert_eq!(
            messages,
            vec![
                vec![Message::system("be brief")],
                vec![Message::user("fix\n[image]")],
                vec![Message::Assistant {
                    content: vec![Block::ToolCall(ToolCall::new(
                        "c1",
                        "read",
                        r#"{"path":"a"}"#
                    ))]
                }],
                vec![Message::tool_result("c1", "read", "text of a", false)],
                vec![],
            ]
        );
    }

    #[test]
    fn a_rebuilt_assistant_keeps_its_fields_and_surviving_calls() {
        let original = item(
            json!({"role": "assistant", "content": "two reads", "name": "bot",
            "reasoning_content": "think", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]}),
        );
        let altered = Message::Assistant {
            content: vec![
                Block::Text {
                    text: "two reads".into(),
                },
                Block::ToolCall(ToolCall::new("c1", "read", "{}")),
            ],
        };
        let parts = [Part {
            index: 0,
            message: &altered,
            altered: true,
        }];
        assert_eq!(
            OpenAiChat.rebuild(std::slice::from_ref(&original), &parts),
            vec![
                json!({"role": "assistant", "content": "two reads", "name": "bot", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]})
            ]
        );
        let emptied = Message::Assistant {
            content: vec![Block::Reasoning {
                text: "think".into(),
                signature: None,
            }],
        };
        let parts = [Part {
            index: 0,
            message: &emptied,
            altered: true,
        }];
        let original = item(
            json!({"role": "assistant", "content": null, "reasoning_content": "think",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}),
        );
        assert!(OpenAiChat.rebuild(&[original], &parts).is_empty());
    }
}
