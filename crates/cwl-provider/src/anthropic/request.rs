//! The transcript in the Messages request shape.

use cwl::{Block, Message, ToolSpec};
use serde_json::{Map, Value, json};

use super::{DEFAULT_MAX_TOKENS, REDACTED_THINKING_PREFIX};
use crate::Request;

/// A message of the request being built.
struct Turn {
    role: &'static str,
    blocks: Vec<Value>,
}

/// The request body.
pub(super) fn body(request: &Request<'_>) -> Value {
    let (system, turns) = convert(request.messages, request.cache_breakpoint);
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    let max_output = request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    match request.reasoning {
        Some(effort) => {
            let budget = effort.thinking_budget();
            // The thinking budget counts against max_tokens.
            body.insert(
                "max_tokens".into(),
                json!(max_output.saturating_add(budget)),
            );
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        None => {
            body.insert("max_tokens".into(), json!(max_output));
        }
    }
    if !system.is_empty() {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": system, "cache_control": ephemeral()}]),
        );
    }
    let messages = turns
        .into_iter()
        .map(|t| json!({"role": t.role, "content": t.blocks}))
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request.tools.iter().map(tool).collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = ephemeral();
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    Value::Object(body)
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.parameters,
    })
}

/// The system text and the alternating turns. Each message's blocks join
/// the previous turn when the role is the same; the message at `breakpoint`
/// gets `cache_control` on its last block that can carry one.
fn convert(messages: &[Message], breakpoint: Option<usize>) -> (String, Vec<Turn>) {
    let breakpoint = breakpoint.map(|b| b.min(messages.len().saturating_sub(1)));
    let mut system = Vec::new();
    let mut turns: Vec<Turn> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let (role, blocks) = match m {
            Message::System { content } => {
                system.push(content.as_str());
                ("system", Vec::new())
            }
            Message::User { content } if content.is_empty() => ("user", Vec::new()),
            Message::User { content } => ("user", vec![json!({"type": "text", "text": content})]),
            Message::ToolResult(result) => {
                let mut block = Map::new();
                block.insert("type".into(), json!("tool_result"));
                block.insert("tool_use_id".into(), json!(result.call_id));
                if !result.content.is_empty() {
                    block.insert("content".into(), json!(result.content));
                }
                if result.is_error {
                    block.insert("is_error".into(), json!(true));
                }
                ("user", vec![Value::Object(block)])
            }
            Message::Assistant { content } => (
                "assistant",
                content.iter().filter_map(assistant_block).collect(),
            ),
        };
        if !blocks.is_empty() {
            match turns.last_mut() {
                Some(turn) if turn.role == role => turn.blocks.extend(blocks),
                _ => turns.push(Turn { role, blocks }),
            }
        }
        if Some(i) == breakpoint {
            mark_last_cacheable(&mut turns);
        }
    }
    for turn in turns.iter_mut().filter(|t| t.role == "user") {
        // The API wants a user turn's tool results before anything else.
        let (mut results, rest): (Vec<Value>, Vec<Value>) = std::mem::take(&mut turn.blocks)
            .into_iter()
            .partition(|b| b["type"] == "tool_result");
        results.extend(rest);
        turn.blocks = results;
    }
    (system.join("\n\n"), turns)
}

/// One assistant block, or `None` for what the API cannot take back:
/// empty text, and reasoning without a signature (the API rejects thinking
/// it did not sign).
fn assistant_block(block: &Block) -> Option<Value> {
    match block {
        Block::Text { text } if text.is_empty() => None,
        Block::Text { text } => Some(json!({"type": "text", "text": text})),
        Block::Reasoning { text, signature } => {
            let signature = signature.as_deref().filter(|s| !s.is_empty())?;
            Some(match signature.strip_prefix(REDACTED_THINKING_PREFIX) {
                Some(data) => json!({"type": "redacted_thinking", "data": data}),
                None => json!({"type": "thinking", "thinking": text, "signature": signature}),
            })
        }
        Block::ToolCall(call) => Some(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": tool_input(&call.arguments),
        })),
    }
}

/// Tool arguments as the `input` object. Invalid JSON (which only other
/// providers' models produce) is kept visible rather than dropped.
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({"invalid_json_arguments": arguments}),
    }
}

/// Puts `cache_control` on the last block so far that may carry it
/// (thinking blocks may not).
fn mark_last_cacheable(turns: &mut [Turn]) {
    let block = turns
        .iter_mut()
        .rev()
        .flat_map(|t| t.blocks.iter_mut().rev())
        .find(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")));
    if let Some(block) = block {
        block["cache_control"] = ephemeral();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::ToolCall;

    #[test]
    fn tool_input_forms() {
        assert_eq!(tool_input(""), json!({}));
        assert_eq!(tool_input(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(
            tool_input(r#"{"a":"#),
            json!({"invalid_json_arguments": "{\"a\":"})
        );
        assert_eq!(tool_input("[1]"), json!({"invalid_json_arguments": "[1]"}));
    }

    #[test]
    fn unsigned_reasoning_is_dropped_and_empty_turns_vanish() {
        let messages = vec![
            Message::user("a"),
            Message::Assistant {
                content: vec![Block::Reasoning {
                    text: "t".into(),
                    signature: None,
                }],
            },
            Message::user("b"),
        ];
        let (_, turns) = convert(&messages, None);
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].blocks.len(), 2);
    }

    #[test]
    fn breakpoint_skips_thinking_and_redacted_round_trips() {
        let messages = vec![
            Message::user("a"),
            Message::Assistant {
                content: vec![
                    Block::ToolCall(ToolCall::new("t1", "ls", "{}")),
                    Block::Reasoning {
                        text: String::new(),
                        signature: Some(format!("{REDACTED_THINKING_PREFIX}xyz")),
                    },
                ],
            },
        ];
        let (_, turns) = convert(&messages, Some(1));
        let blocks = &turns[1].blocks;
        assert_eq!(blocks[0]["cache_control"], ephemeral());
        assert_eq!(
            blocks[1],
            json!({"type": "redacted_thinking", "data": "xyz"})
        );
    }
}
