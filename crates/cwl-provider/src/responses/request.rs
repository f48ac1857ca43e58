//! The transcript as Responses `input` items.

use cwl::{Block, Message};
use serde_json::{Map, Value, json};

use crate::Request;

/// The request body: the first system message as `instructions`, the rest
/// of the transcript as `input` items, nothing stored, reasoning returned
/// encrypted.
pub(super) fn body(request: &Request<'_>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    let messages = match request.messages {
        [Message::System { content }, rest @ ..] => {
            body.insert("instructions".into(), json!(content));
            rest
        }
        all => all,
    };
    body.insert(
        "input".into(),
        Value::Array(messages.iter().flat_map(items).collect()),
    );
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
    }
    if let Some(max) = request.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(effort) = request.reasoning {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort.as_str(), "summary": "auto"}),
        );
    }
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    body.insert("stream".into(), json!(true));
    Value::Object(body)
}

/// The input items of one message. Reasoning without encrypted content
/// (from another provider) cannot be sent back with nothing stored, so it
/// is left out.
fn items(message: &Message) -> Vec<Value> {
    match message {
        Message::System { content } => {
            vec![json!({"type": "message", "role": "developer", "content": content})]
        }
        Message::User { content } => vec![json!({
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": content}],
        })],
        Message::ToolResult(result) => vec![json!({
            "type": "function_call_output",
            "call_id": result.call_id,
            "output": result.content,
        })],
        Message::Assistant { content } => content.iter().filter_map(block).collect(),
    }
}

fn block(block: &Block) -> Option<Value> {
    match block {
        Block::Reasoning { text, signature } => {
            let encrypted = signature.as_deref()?;
            let summary: Vec<Value> = if text.is_empty() {
                Vec::new()
            } else {
                vec![json!({"type": "summary_text", "text": text})]
            };
            Some(json!({"type": "reasoning", "summary": summary, "encrypted_content": encrypted}))
        }
        Block::Text { text } => Some(json!({
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        })),
        Block::ToolCall(call) => Some(json!({
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": if call.arguments.trim().is_empty() { "{}" } else { &call.arguments },
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReasoningEffort;
    use cwl::{ToolCall, ToolSpec};

    #[test]
    fn the_transcript_becomes_instructions_and_items() {
        let messages = vec![
            Message::system("be brief"),
            Message::user("list files"),
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: "look first".into(),
                        signature: Some("gAAAA-enc".into()),
                    },
                    Block::Reasoning {
                        text: "from another provider".into(),
                        signature: None,
                    },
                    Block::Text {
                        text: "Listing.".into(),
                    },
                    Block::ToolCall(ToolCall::new("call_1", "ls", r#"{"path":"."}"#)),
                ],
            },
            Message::tool_result("call_1", "ls", "a.rs\nb.rs", false),
        ];
        let tools = vec![ToolSpec {
            name: "ls".into(),
            description: "List.".into(),
            parameters: json!({"type": "object"}),
        }];
        let mut request = Request::new("gpt-5.1-codex", &messages, &tools);
        request.max_output_tokens = Some(4096);
        request.reasoning = Some(ReasoningEffort::High);
        let body = body(&request);
        assert_eq!(body["instructions"], "be brief");
        assert_eq!(
            body["input"],
            json!([
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "look first"}], "encrypted_content": "gAAAA-enc"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}]},
                {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{\"path\":\".\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.rs\nb.rs"},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "ls", "description": "List.", "parameters": {"type": "object"}}])
        );
        assert_eq!(body["store"], false);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(
            body["reasoning"],
            json!({"effort": "high", "summary": "auto"})
        );
        assert_eq!(body["max_output_tokens"], 4096);
        assert_eq!(body["stream"], true);
    }
}
