//! The transcript in the Chat Completions request shape.

use cwl::Message;
use serde_json::{Map, Value, json};

use crate::Request;

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
            Value::Array(cwl::openai::to_tools(request.tools)),
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

/// One message in the interchange shape, less the `reasoning_signature`
/// extension, which Chat Completions servers do not know.
fn message(m: &Message) -> Value {
    let mut value = cwl::openai::to_message(m);
    if let Some(fields) = value.as_object_mut() {
        fields.remove("reasoning_signature");
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Block, ToolCall};

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
                "content": null,
                "reasoning_content": "think",
                "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}],
            })
        );
        let text = Message::assistant_text("done");
        assert_eq!(
            message(&text),
            json!({"role": "assistant", "content": "done"})
        );
    }
}
