//! OpenAI Responses `input` items: messages, `reasoning`, `function_call`
//! and `function_call_output`.
//!
//! A user, system or developer message is an engine message of its role
//! (developer reads as system). The items of one response (reasoning,
//! assistant message, function calls) are blocks of one engine assistant
//! message: the caller gathers them ([`Part::Assistant`]) until an item of
//! another kind comes. A reasoning item keeps every field but its summary
//! (id, `encrypted_content`) as the reasoning's signature, as JSON, so it
//! is written back as it came.

use cwl::{Block, Message, ToolCall, ToolResult};
use serde_json::{Map, Value, json};

use super::{Names, Part, string, text_of, tool_name};

/// Text part types of message content.
const TEXT: &[&str] = &["input_text", "output_text", "text"];

/// Reads one item.
pub(super) fn parse(value: &Value, names: &mut Names) -> Result<Vec<Part>, String> {
    let fields = value.as_object().ok_or("an item must be a JSON object")?;
    let kind = match fields.get("type") {
        None => "message",
        Some(Value::String(kind)) => kind.as_str(),
        Some(_) => return Err("`type` must be a string".into()),
    };
    let part = match kind {
        "message" => message(fields)?,
        "reasoning" => Part::Assistant(vec![reasoning(fields)?]),
        "function_call" => {
            let call_id = string(fields, "call_id")?;
            let name = string(fields, "name")?;
            let arguments = match fields.get("arguments") {
                None | Some(Value::Null) => "{}".to_string(),
                Some(Value::String(arguments)) => arguments.clone(),
                Some(other @ Value::Object(_)) => other.to_string(),
                Some(_) => return Err("`arguments` must be a JSON string".into()),
            };
            names.insert(call_id.to_string(), name.to_string());
            Part::Assistant(vec![Block::ToolCall(ToolCall::new(
                call_id, name, arguments,
            ))])
        }
        "function_call_output" => {
            let call_id = string(fields, "call_id")?.to_string();
            Part::Message(Message::ToolResult(ToolResult {
                tool_name: tool_name(names, &call_id)?,
                content: text_of(fields.get("output"), TEXT)?,
                is_error: false,
                call_id,
            }))
        }
        other => {
            return Err(format!(
                "unsupported item type `{other}` (cwl holds message, reasoning, function_call and function_call_output items)"
            ));
        }
    };
    Ok(vec![part])
}

fn message(fields: &Map<String, Value>) -> Result<Part, String> {
    let text = text_of(fields.get("content"), TEXT)?;
    match string(fields, "role")? {
        "user" => Ok(Part::Message(Message::user(text))),
        "system" | "developer" => Ok(Part::Message(Message::system(text))),
        "assistant" => Ok(Part::Assistant(vec![Block::Text { text }])),
        other => Err(format!(
            "unknown role `{other}` (expected user, assistant, system or developer)"
        )),
    }
}

fn reasoning(fields: &Map<String, Value>) -> Result<Block, String> {
    let mut rest = fields.clone();
    let summary = match rest.remove("summary") {
        None | Some(Value::Null) => String::new(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| part.get("text").and_then(Value::as_str).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n"),
        Some(_) => return Err("`summary` must be an array".into()),
    };
    Ok(Block::Reasoning {
        text: summary,
        signature: Some(Value::Object(rest).to_string()),
    })
}

/// Writes one engine message as items.
pub(super) fn render(message: &Message) -> Vec<Value> {
    match message {
        Message::System { content } => vec![json!({"role": "system", "content": content})],
        Message::User { content } => vec![json!({"role": "user", "content": content})],
        Message::ToolResult(result) => vec![json!({
            "type": "function_call_output",
            "call_id": result.call_id,
            "output": result.content,
        })],
        Message::Assistant { content } => content.iter().map(item).collect(),
    }
}

fn item(block: &Block) -> Value {
    match block {
        Block::Text { text } => json!({
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        }),
        Block::Reasoning { text, signature } => {
            let mut fields = signature
                .as_deref()
                .and_then(|signature| serde_json::from_str::<Map<String, Value>>(signature).ok())
                .unwrap_or_default();
            fields.insert("type".into(), json!("reasoning"));
            let summary = if text.is_empty() {
                json!([])
            } else {
                json!([{"type": "summary_text", "text": text}])
            };
            fields.insert("summary".into(), summary);
            Value::Object(fields)
        }
        Block::ToolCall(call) => json!({
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_reads_as_blocks_and_writes_back_as_its_items() {
        let items = vec![
            json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "enc",
                   "summary": [{"type": "summary_text", "text": "Plan."}]}),
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": "Looking."}]}),
            json!({"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"}),
        ];
        let mut names = Names::new();
        let mut blocks = Vec::new();
        for value in &items {
            match parse(value, &mut names).unwrap().remove(0) {
                Part::Assistant(more) => blocks.extend(more),
                Part::Message(message) => panic!("{message:?} is no response item"),
            }
        }
        let written = render(&Message::Assistant { content: blocks });
        assert_eq!(written, items);
        let output = json!({"type": "function_call_output", "call_id": "c1", "output": "a.rs"});
        let parts = parse(&output, &mut names).unwrap();
        assert_eq!(
            parts,
            vec![Part::Message(Message::tool_result(
                "c1", "shell", "a.rs", false
            ))]
        );
    }

    #[test]
    fn developer_reads_as_system_and_unknown_items_are_refused() {
        let mut names = Names::new();
        let developer =
            json!({"role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]});
        assert_eq!(
            parse(&developer, &mut names).unwrap(),
            vec![Part::Message(Message::system("Be brief."))]
        );
        let error = parse(&json!({"type": "web_search_call"}), &mut names).unwrap_err();
        assert!(
            error.contains("unsupported item type `web_search_call`"),
            "{error}"
        );
        let error = parse(
            &json!({"type": "function_call_output", "call_id": "zz", "output": ""}),
            &mut names,
        )
        .unwrap_err();
        assert!(error.contains("unknown call `zz`"), "{error}");
    }
}
