//! The transcript in the Chat Completions request shape.

use cwl::{Block, Message, ToolSpec};
use serde_json::{Map, Value, json};

use crate::provider::Request;

/// The request body; `max_tokens_field` names the output-limit field.
pub(super) fn body(request: &Request<'_>, max_tokens_field: &str) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "messages".into(),
        Value::Array(request.messages.iter().map(message).collect()),
    );
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool).collect()),
        );
    }
    if let Some(max) = request.max_output_tokens {
        body.insert(max_tokens_field.into(), json!(max));
    }
    if let Some(effort) = request.reasoning {
        body.insert("reasoning_effort".into(), json!(effort.as_str()));
    }
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
    })
}

/// One message. Assistant text blocks are joined, reasoning goes to
/// `reasoning_content`, and `content` is left out when there is no text
/// but there are tool calls (as the API allows).
fn message(m: &Message) -> Value {
    match m {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::ToolResult(result) => json!({
            "role": "tool",
            "tool_call_id": result.call_id,
            "content": result.content,
        }),
        Message::Assistant { content } => {
            let mut texts = Vec::new();
            let mut reasoning = Vec::new();
            let mut calls = Vec::new();
            for block in content {
                match block {
                    Block::Text { text } if !text.is_empty() => texts.push(text.as_str()),
                    Block::Reasoning { text, .. } if !text.is_empty() => {
                        reasoning.push(text.as_str())
                    }
                    Block::ToolCall(call) => calls.push(json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    })),
                    _ => {}
                }
            }
            let mut out = Map::new();
            out.insert("role".into(), json!("assistant"));
            if !texts.is_empty() || calls.is_empty() {
                out.insert("content".into(), json!(texts.join("\n\n")));
            }
            if !reasoning.is_empty() {
                out.insert("reasoning_content".into(), json!(reasoning.join("\n\n")));
            }
            if !calls.is_empty() {
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::ToolCall;

    #[test]
    fn assistant_shapes() {
        let only_calls = Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "think".into(),
                    signature: Some("sig".into()),
                },
                Block::ToolCall(ToolCall::new("c1", "read", r#"{"path":"a"}"#)),
            ],
        };
        assert_eq!(
            message(&only_calls),
            json!({
                "role": "assistant",
                "reasoning_content": "think",
                "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}],
            })
        );
        let empty = Message::Assistant { content: vec![] };
        assert_eq!(message(&empty), json!({"role": "assistant", "content": ""}));
    }
}
