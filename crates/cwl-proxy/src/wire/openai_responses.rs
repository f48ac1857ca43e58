//! The OpenAI Responses format (what Codex CLI speaks).
//!
//! `input` is a list of items. A run of model-output items (`reasoning`,
//! an assistant `message`, `function_call`, `custom_tool_call`,
//! `local_shell_call`) is one unit of one assistant message: reasoning →
//! reasoning (summary text, a stand-in for the encrypted content as its
//! signature: [`super::opaque_stand_in`]), the
//! message → text, each call → a tool call (custom tools' `input` as
//! their arguments). `function_call_output` and `custom_tool_call_output`
//! are tool results; a `user` message is a user turn; `system` and
//! `developer` messages are system messages. Other items (web searches,
//! item references) go as they came. A rebuilt unit keeps the client's
//! items that survived, and drops a reasoning item whose following item
//! was evicted (the API refuses reasoning without it).

use serde_json::{Value, json};

use cwl::{Block, Message, ToolCall, ToolResult, ToolSpec};

use super::{CallNames, Item, Part, Unit, Wire, content_text};
use crate::body::Body;

/// The OpenAI Responses API (`POST /v1/responses`).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiResponses;

fn kind(item: &Value) -> &str {
    match item.get("type").and_then(Value::as_str) {
        Some(kind) => kind,
        None if item.get("role").is_some() => "message",
        None => "",
    }
}

fn role(item: &Value) -> &str {
    item.get("role").and_then(Value::as_str).unwrap_or("")
}

fn string(item: &Value, key: &str) -> String {
    item.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Whether the item is model output (part of an assistant message).
fn is_output(item: &Value) -> bool {
    match kind(item) {
        "reasoning" | "function_call" | "custom_tool_call" | "local_shell_call" => true,
        "message" => role(item) == "assistant",
        _ => false,
    }
}

/// The engine block of one model-output item.
fn engine_block(item: &Value) -> Block {
    match kind(item) {
        "reasoning" => Block::Reasoning {
            text: item
                .get("summary")
                .and_then(Value::as_array)
                .map(|parts| content_text(&Value::Array(parts.clone())))
                .unwrap_or_default(),
            signature: item
                .get("encrypted_content")
                .and_then(Value::as_str)
                .map(super::opaque_stand_in)
                .or_else(|| item.get("id").and_then(Value::as_str).map(str::to_string)),
        },
        "function_call" => Block::ToolCall(ToolCall::new(
            string(item, "call_id"),
            string(item, "name"),
            string(item, "arguments"),
        )),
        "custom_tool_call" => Block::ToolCall(ToolCall::new(
            string(item, "call_id"),
            string(item, "name"),
            string(item, "input"),
        )),
        "local_shell_call" => Block::ToolCall(ToolCall::new(
            string(item, "call_id"),
            "local_shell",
            item.get("action").map(Value::to_string).unwrap_or_default(),
        )),
        _ => Block::Text {
            text: content_text(item.get("content").unwrap_or(&Value::Null)),
        },
    }
}

fn single(item: &Value, names: &mut CallNames) -> Option<Message> {
    let content = || content_text(item.get("content").unwrap_or(&Value::Null));
    match kind(item) {
        "message" => match role(item) {
            "user" => Some(Message::user(content())),
            "system" | "developer" => Some(Message::system(content())),
            _ => None,
        },
        "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
            let call_id = item.get("call_id")?.as_str()?.to_string();
            Some(Message::ToolResult(ToolResult {
                tool_name: names.remove(&call_id).unwrap_or_default(),
                call_id,
                content: content_text(item.get("output").unwrap_or(&Value::Null)),
                is_error: false,
            }))
        }
        _ => None,
    }
}

impl Wire for OpenAiResponses {
    fn provider(&self) -> &'static str {
        "openai"
    }

    fn history_key(&self) -> &'static str {
        "input"
    }

    fn system(&self, body: &Body) -> Option<String> {
        body.read::<String>("instructions")
            .filter(|text| !text.is_empty())
    }

    fn tools(&self, body: &Body) -> Vec<ToolSpec> {
        super::openai_chat::tools(body)
    }

    fn units(&self, items: &[Item], names: &mut CallNames) -> Vec<Unit> {
        let mut units = Vec::new();
        let mut at = 0;
        while at < items.len() {
            let run = items[at..]
                .iter()
                .take_while(|item| is_output(item.value()))
                .count();
            if run > 0 {
                let content: Vec<Block> = items[at..at + run]
                    .iter()
                    .map(|item| engine_block(item.value()))
                    .collect();
                for block in &content {
                    if let Block::ToolCall(call) = block {
                        names.insert(call.id.clone(), call.name.clone());
                    }
                }
                units.push(Unit {
                    items: run,
                    messages: vec![Message::Assistant { content }],
                });
                at += run;
            } else {
                units.push(Unit {
                    items: 1,
                    messages: single(items[at].value(), names).into_iter().collect(),
                });
                at += 1;
            }
        }
        units
    }

    fn rebuild(&self, items: &[Item], parts: &[Part<'_>]) -> Vec<Value> {
        let Some(part) = parts.first() else {
            return Vec::new();
        };
        match part.message {
            Message::Assistant { content } => assistant_items(items, content),
            Message::ToolResult(result) => items
                .first()
                .map(|item| {
                    let mut out = item.value().clone();
                    out["output"] = Value::String(result.content.clone());
                    vec![out]
                })
                .unwrap_or_default(),
            Message::User { content } => items
                .iter()
                .map(|item| {
                    let mut out = item.value().clone();
                    let was = content_text(out.get("content").unwrap_or(&Value::Null));
                    // A strategy's reminder appended to the client's text.
                    if role(&out) == "user"
                        && let Some(added) = content.strip_prefix(was.as_str())
                        && !added.is_empty()
                    {
                        match out.get_mut("content") {
                            Some(Value::Array(parts)) => {
                                parts.push(json!({"type": "input_text", "text": added}));
                            }
                            _ => out["content"] = Value::String(content.clone()),
                        }
                    }
                    out
                })
                .collect(),
            Message::System { .. } => items.iter().map(|item| item.value().clone()).collect(),
        }
    }

    /// An assistant message, as the engine writes its notes: a user
    /// message would start a new turn, and the reasoning models before
    /// GPT-5.6 drop the reasoning of every earlier turn, so a note placed
    /// inside the current turn would take its reasoning from the model.
    fn note(&self, text: &str) -> Value {
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
    }

    /// A function tool, not strict (the API's strict mode would hold the
    /// model to the schema, which `recall`'s errors already explain).
    fn tool(&self, spec: &ToolSpec) -> Value {
        json!({
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
            "strict": false,
        })
    }

    /// Responses has no error flag on an output: an error answer is its
    /// text.
    fn answer(&self, item: &Value, call_id: &str, content: &str, _: bool) -> Option<Value> {
        let held = matches!(
            kind(item),
            "function_call_output" | "custom_tool_call_output"
        ) && item.get("call_id").and_then(Value::as_str) == Some(call_id);
        held.then(|| {
            let mut out = item.clone();
            out["output"] = Value::String(content.to_string());
            out
        })
    }
}

/// The items of an altered assistant unit: the client's item for each
/// engine block that is one of them, a new message for any other text.
fn assistant_items(items: &[Item], content: &[Block]) -> Vec<Value> {
    let mut kept = vec![false; items.len()];
    let mut written: Vec<(usize, Value)> = Vec::new();
    let mut cursor = 0;
    for block in content {
        let found = items[cursor..]
            .iter()
            .position(|item| engine_block(item.value()) == *block);
        match found {
            Some(offset) => {
                kept[cursor + offset] = true;
                cursor += offset + 1;
            }
            None => {
                let text = match block {
                    Block::Text { text } => text.clone(),
                    _ => continue,
                };
                written.push((
                    cursor,
                    json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]}),
                ));
            }
        }
    }
    for at in 0..items.len() {
        if kept[at]
            && kind(items[at].value()) == "reasoning"
            && !kept.get(at + 1).copied().unwrap_or(true)
        {
            kept[at] = false;
        }
    }
    let mut out = Vec::new();
    let mut notes = written.into_iter().peekable();
    for (at, item) in items.iter().enumerate() {
        while let Some((_, note)) = notes.next_if(|(before, _)| *before <= at) {
            out.push(note);
        }
        if kept[at] {
            out.push(item.value().clone());
        }
    }
    out.extend(notes.map(|(_, note)| note));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(value: Value) -> Item {
        Item::new(serde_json::value::to_raw_value(&value).unwrap())
    }

    fn codex_turn() -> Vec<Item> {
        vec![
            item(
                json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]}),
            ),
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}),
            ),
            item(
                json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look"}], "encrypted_content": "enc1"}),
            ),
            item(
                json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}),
            ),
            item(
                json!({"type": "function_call", "call_id": "call_2", "name": "exec_command", "arguments": "{\"cmd\":\"cat a\"}"}),
            ),
            item(json!({"type": "function_call_output", "call_id": "call_1", "output": "a b"})),
            item(json!({"type": "function_call_output", "call_id": "call_2", "output": "text"})),
        ]
    }

    #[test]
    fn model_output_items_form_one_assistant_message() {
        let mut names = CallNames::default();
        let units = OpenAiResponses.units(&codex_turn(), &mut names);
        let shape: Vec<(usize, usize)> =
            units.iter().map(|u| (u.items, u.messages.len())).collect();
        assert_eq!(shape, vec![(1, 1), (1, 1), (3, 1), (1, 1), (1, 1)]);
        assert_eq!(units[0].messages[0], Message::system("rules"));
        assert_eq!(
            units[2].messages[0],
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: "look".into(),
                        signature: Some(crate::wire::opaque_stand_in("enc1"))
                    },
                    Block::ToolCall(ToolCall::new("call_1", "exec_command", r#"{"cmd":"ls"}"#)),
                    Block::ToolCall(ToolCall::new(
                        "call_2",
                        "exec_command",
                        r#"{"cmd":"cat a"}"#
                    )),
                ]
            }
        );
        assert_eq!(
            units[3].messages[0],
            Message::tool_result("call_1", "exec_command", "a b", false)
        );
    }

    #[test]
    fn reasoning_goes_with_the_item_after_it() {
        let items = codex_turn();
        let unit = &items[2..5];
        let without_first = [
            Block::Reasoning {
                text: "look".into(),
                signature: Some(crate::wire::opaque_stand_in("enc1")),
            },
            Block::ToolCall(ToolCall::new(
                "call_2",
                "exec_command",
                r#"{"cmd":"cat a"}"#,
            )),
        ];
        let out = assistant_items(unit, &without_first);
        assert_eq!(out, vec![items[4].value().clone()]);
        let with_note = [
            Block::Text {
                text: "[evicted]".into(),
            },
            Block::ToolCall(ToolCall::new(
                "call_2",
                "exec_command",
                r#"{"cmd":"cat a"}"#,
            )),
        ];
        let out = assistant_items(unit, &with_note);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["content"][0]["text"], "[evicted]");
        assert_eq!(&out[1], items[4].value());
    }

    #[test]
    fn encrypted_reasoning_counts_as_a_stand_in_and_goes_upstream_as_sent() {
        use cwl::TokenCounter;
        let ciphertext = "gAAAAABpZ3x9Qk7vR2".repeat(100);
        let items = [
            item(
                json!({"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": ciphertext}),
            ),
            item(
                json!({"type": "function_call", "call_id": "call_9", "name": "exec_command", "arguments": "{}"}),
            ),
        ];
        let mut names = CallNames::default();
        let units = OpenAiResponses.units(&items, &mut names);
        let Message::Assistant { content } = &units[0].messages[0] else {
            panic!("not an assistant message: {:?}", units[0].messages);
        };
        let Block::Reasoning {
            signature: Some(held),
            ..
        } = &content[0]
        else {
            panic!("no reasoning: {content:?}");
        };
        assert!(cwl::O200k.count(held) < 20, "{held}");
        assert!(cwl::O200k.count(&ciphertext) > 500);
        let out = assistant_items(&items, content);
        assert_eq!(
            out,
            vec![items[0].value().clone(), items[1].value().clone()]
        );
    }
}
