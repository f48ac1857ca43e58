//! The Anthropic Messages format.
//!
//! Each message is one unit. An assistant message is one engine assistant
//! message: `text` → text, `thinking` → reasoning with a stand-in for its
//! signature, `redacted_thinking` → empty reasoning with a stand-in for
//! its data ([`super::opaque_stand_in`]: ciphertext is not counted),
//! `tool_use` → a tool call (input as JSON text); any other block (server
//! tools and their results) → a text holding the block's JSON, so it is
//! counted and kept with its message. A user message is its `tool_result`
//! blocks, one tool result each, then one user turn of every other block's
//! text, if any; the files Claude Code restores after compacting (text
//! blocks of reminders, see [`Restored`]) are tool calls and results
//! there, before the user turn, so eviction may take them. A `system` message (Claude Code sends some) is a system
//! message. Rebuilt messages keep the client's JSON for every block that
//! survived.

use serde_json::{Value, json};

use cwl::{Block, Message, ToolCall, ToolResult, ToolSpec};

use super::{CallNames, Item, Part, Unit, Wire, content_text};
use crate::body::Body;

/// The Anthropic Messages API (`POST /v1/messages`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Anthropic;

impl Wire for Anthropic {
    fn provider(&self) -> &'static str {
        "anthropic"
    }

    fn history_key(&self) -> &'static str {
        "messages"
    }

    fn system(&self, body: &Body) -> Option<String> {
        let system: Value = body.read("system")?;
        let text = content_text(&system);
        (!text.is_empty()).then_some(text)
    }

    fn tools(&self, body: &Body) -> Vec<ToolSpec> {
        body.read::<Vec<Value>>("tools")
            .unwrap_or_default()
            .into_iter()
            .filter_map(|tool| {
                let name = tool.get("name")?.as_str()?.to_string();
                let description = tool
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let parameters = tool.get("input_schema").cloned().unwrap_or(tool);
                Some(ToolSpec {
                    name,
                    description,
                    parameters,
                })
            })
            .collect()
    }

    fn units(&self, items: &[Item], names: &mut CallNames) -> Vec<Unit> {
        items
            .iter()
            .map(|item| Unit {
                items: 1,
                messages: messages(item.value(), names),
            })
            .collect()
    }

    fn rebuild(&self, items: &[Item], parts: &[Part<'_>]) -> Vec<Value> {
        let Some(item) = items.first() else {
            return Vec::new();
        };
        let original = item.value();
        let content = match original.get("role").and_then(Value::as_str) {
            Some("assistant") => parts
                .first()
                .map(|part| assistant_blocks(original, part.message))
                .unwrap_or_default(),
            Some("user") => user_blocks(original, parts),
            _ => Vec::new(),
        };
        if content.is_empty() {
            return Vec::new();
        }
        let mut message = original.clone();
        message["content"] = Value::Array(content);
        vec![message]
    }

    /// A user message: the API merges consecutive assistant messages, and
    /// one that holds thinking must start with it, so an assistant note
    /// before a thinking turn would be rejected.
    fn note(&self, text: &str) -> Value {
        json!({"role": "user", "content": [{"type": "text", "text": text}]})
    }

    fn tool(&self, spec: &ToolSpec) -> Value {
        json!({
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.parameters,
        })
    }

    fn answer(&self, item: &Value, call_id: &str, content: &str, is_error: bool) -> Option<Value> {
        if item.get("role").and_then(Value::as_str) != Some("user") {
            return None;
        }
        let mut out = item.clone();
        let block = out
            .get_mut("content")?
            .as_array_mut()?
            .iter_mut()
            .find(|b| kind(b) == "tool_result" && b.get("tool_use_id") == Some(&json!(call_id)))?
            .as_object_mut()?;
        block.insert("content".into(), Value::String(content.to_string()));
        if is_error {
            block.insert("is_error".into(), Value::Bool(true));
        } else {
            block.remove("is_error");
        }
        Some(out)
    }

    fn mark(&self, item: &mut Value, control: &Value) -> bool {
        if let Some(Value::String(text)) = item.get("content") {
            item["content"] = json!([{"type": "text", "text": text}]);
        }
        let Some(last) = item
            .get_mut("content")
            .and_then(Value::as_array_mut)
            .and_then(|blocks| blocks.last_mut())
            .and_then(Value::as_object_mut)
        else {
            return false;
        };
        if last.contains_key("cache_control") {
            return false;
        }
        last.insert("cache_control".into(), control.clone());
        true
    }
}

/// Cache breakpoints a request already holds (Anthropic allows four),
/// and the `cache_control` value of the last one, if the client asked
/// for caching at all.
pub fn breakpoints(body: &Body, items: &[Item]) -> (usize, Option<Value>) {
    fn walk(value: &Value, count: &mut usize, last: &mut Option<Value>) {
        match value {
            Value::Object(fields) => {
                for (key, value) in fields {
                    if key == "cache_control" {
                        *count += 1;
                        *last = Some(value.clone());
                    } else {
                        walk(value, count, last);
                    }
                }
            }
            Value::Array(values) => values.iter().for_each(|v| walk(v, count, last)),
            _ => {}
        }
    }
    let (mut count, mut last) = (0, None);
    // A field or item whose text names no `cache_control` holds none:
    // most of a long history, and the tools, are never parsed for this.
    for key in ["tools", "system"] {
        if let Some(value) = body
            .get(key)
            .filter(|raw| super::names_cache_control(raw.get()))
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        {
            walk(&value, &mut count, &mut last);
        }
    }
    for item in items
        .iter()
        .filter(|item| super::names_cache_control(item.raw.get()))
    {
        walk(item.value(), &mut count, &mut last);
    }
    if let Some(top) = body.read::<Value>("cache_control") {
        last = Some(top);
    }
    (count, last)
}

/// The blocks of a message's content (a string is one text block).
fn blocks(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        Some(Value::Array(blocks)) => blocks.clone(),
        _ => Vec::new(),
    }
}

fn kind(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

fn text_of(block: &Value, key: &str) -> String {
    block
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The engine block of one assistant block.
fn engine_block(block: &Value) -> Block {
    match kind(block) {
        "text" => Block::Text {
            text: text_of(block, "text"),
        },
        "thinking" => Block::Reasoning {
            text: text_of(block, "thinking"),
            signature: block
                .get("signature")
                .and_then(Value::as_str)
                .map(super::opaque_stand_in),
        },
        "redacted_thinking" => Block::Reasoning {
            text: String::new(),
            signature: Some(super::opaque_stand_in(&text_of(block, "data"))),
        },
        "tool_use" => Block::ToolCall(ToolCall::new(
            text_of(block, "id"),
            text_of(block, "name"),
            block
                .get("input")
                .map_or_else(|| "{}".to_string(), Value::to_string),
        )),
        _ => Block::Text {
            text: block.to_string(),
        },
    }
}

/// Claude Code, having compacted, puts back the files it had read as text
/// blocks of a user message, a call then its result:
/// `<system-reminder>\nCalled the Read tool with the following input: {…}`
/// and `<system-reminder>\nResult of calling the Read tool: "…"`. They are
/// tool output, not what the person typed: each result becomes a tool
/// call and its result (an id of the proxy's own), which eviction may
/// take like any read; a user turn is never evicted, and these alone can
/// pass the budget (four files are about 20k tokens).
enum Restored {
    /// The call: its tool and its input (JSON text).
    Call { tool: String, arguments: String },
    /// The result: its tool and the block's text.
    Result { tool: String, output: String },
}

impl Restored {
    const CALL: &str = "<system-reminder>\nCalled the ";
    const RESULT: &str = "<system-reminder>\nResult of calling the ";

    fn of(block: &Value) -> Option<Restored> {
        if kind(block) != "text" {
            return None;
        }
        let text = block.get("text")?.as_str()?;
        if let Some(rest) = text.strip_prefix(Self::CALL) {
            let (tool, input) = rest.split_once(" tool with the following input: ")?;
            let input = input
                .trim_end()
                .trim_end_matches("</system-reminder>")
                .trim();
            return Some(Restored::Call {
                tool: tool.to_string(),
                arguments: input.to_string(),
            });
        }
        let rest = text.strip_prefix(Self::RESULT)?;
        let (tool, _) = rest.split_once(" tool: ")?;
        (!tool.contains(char::is_whitespace)).then(|| Restored::Result {
            tool: tool.to_string(),
            output: text.to_string(),
        })
    }
}

fn messages(message: &Value, names: &mut CallNames) -> Vec<Message> {
    match message.get("role").and_then(Value::as_str) {
        Some("assistant") => {
            let content: Vec<Block> = blocks(message).iter().map(engine_block).collect();
            for block in &content {
                if let Block::ToolCall(call) = block {
                    names.insert(call.id.clone(), call.name.clone());
                }
            }
            if content.is_empty() {
                Vec::new()
            } else {
                vec![Message::Assistant { content }]
            }
        }
        Some("user") => {
            if let Some(Value::String(text)) = message.get("content") {
                return vec![Message::user(text.clone())];
            }
            let mut out = Vec::new();
            let mut texts = Vec::new();
            let mut reread = Vec::new();
            let mut input = None;
            for block in blocks(message) {
                if let Some(restored) = Restored::of(&block) {
                    match restored {
                        Restored::Call { tool, arguments } => {
                            input = Some((tool, arguments));
                            texts.push(content_text(&Value::Array(vec![block])));
                        }
                        Restored::Result { tool, output } => {
                            let arguments = input
                                .take()
                                .filter(|(called, _)| *called == tool)
                                .map_or_else(|| "{}".to_string(), |(_, arguments)| arguments);
                            let id = format!(
                                "cwl_restored_{}_{}",
                                reread.len() / 2,
                                super::opaque_stand_in(&output)
                            );
                            reread.push(Message::Assistant {
                                content: vec![Block::ToolCall(ToolCall::new(
                                    &id, &tool, arguments,
                                ))],
                            });
                            reread.push(Message::tool_result(id, tool, output, false));
                        }
                    }
                } else if kind(&block) == "tool_result" {
                    let call_id = text_of(&block, "tool_use_id");
                    out.push(Message::ToolResult(ToolResult {
                        tool_name: names.remove(&call_id).unwrap_or_default(),
                        call_id,
                        content: content_text(block.get("content").unwrap_or(&Value::Null)),
                        is_error: block
                            .get("is_error")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    }));
                } else {
                    texts.push(content_text(&Value::Array(vec![block])));
                }
            }
            out.append(&mut reread);
            if !texts.is_empty() {
                out.push(Message::user(texts.join("\n")));
            }
            out
        }
        Some("system") => vec![Message::system(content_text(
            message.get("content").unwrap_or(&Value::Null),
        ))],
        _ => Vec::new(),
    }
}

/// The blocks of an altered assistant message: the client's block for
/// each engine block that is one of its own (in order), a new text block
/// for anything the engine wrote.
fn assistant_blocks(original: &Value, message: &Message) -> Vec<Value> {
    let Message::Assistant { content } = message else {
        return Vec::new();
    };
    let originals = blocks(original);
    let mut cursor = 0;
    let mut out = Vec::with_capacity(content.len());
    for block in content {
        let found = originals[cursor..]
            .iter()
            .position(|o| engine_block(o) == *block);
        match found {
            Some(offset) => {
                out.push(originals[cursor + offset].clone());
                cursor += offset + 1;
            }
            None => out.push(render_block(block)),
        }
    }
    out
}

fn render_block(block: &Block) -> Value {
    match block {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::Reasoning {
            text,
            signature: Some(signature),
        } => json!({"type": "thinking", "thinking": text, "signature": signature}),
        Block::Reasoning { text, .. } => json!({"type": "text", "text": text}),
        Block::ToolCall(call) => json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": serde_json::from_str::<Value>(&call.arguments).unwrap_or_else(|_| json!({})),
        }),
    }
}

/// The blocks of a user message some of whose parts are gone: each tool
/// result still in the view (with the engine's content if it was
/// altered), and the other blocks if the user turn is.
fn user_blocks(original: &Value, parts: &[Part<'_>]) -> Vec<Value> {
    let originals = blocks(original);
    let results = originals
        .iter()
        .filter(|b| kind(b) == "tool_result")
        .count();
    let restored = originals
        .iter()
        .filter(|b| matches!(Restored::of(b), Some(Restored::Result { .. })))
        .count();
    let user = results + 2 * restored;
    let part = |index: usize| parts.iter().find(|part| part.index == index);
    let keep_user = part(user).is_some();
    let mut at = 0;
    let mut reread = 0;
    let mut out = Vec::new();
    for block in originals {
        if let Some(Restored::Result { .. }) = Restored::of(&block) {
            // Its call and result leave together.
            match part(results + 2 * reread + 1) {
                Some(Part {
                    message: Message::ToolResult(result),
                    altered: true,
                    ..
                }) => {
                    let mut block = block;
                    block["text"] = Value::String(result.content.clone());
                    out.push(block);
                }
                Some(_) => out.push(block),
                None => {}
            }
            reread += 1;
            continue;
        }
        if kind(&block) != "tool_result" {
            if keep_user {
                out.push(block);
            }
            continue;
        }
        let index = at;
        at += 1;
        match part(index) {
            Some(Part {
                message: Message::ToolResult(result),
                altered: true,
                ..
            }) => {
                let mut block = block;
                block["content"] = Value::String(result.content.clone());
                out.push(block);
            }
            Some(_) => out.push(block),
            None => {}
        }
    }
    // A strategy's reminder appended to the client's text.
    if let Some(Part {
        message: Message::User { content },
        altered: true,
        ..
    }) = part(user)
        && let Some(Message::User { content: was }) = messages(original, &mut CallNames::default())
            .into_iter()
            .rev()
            .find(|m| matches!(m, Message::User { .. }))
        && let Some(added) = content.strip_prefix(was.as_str())
        && !added.is_empty()
    {
        out.push(json!({"type": "text", "text": added}));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(value: Value) -> Item {
        Item::new(serde_json::value::to_raw_value(&value).unwrap())
    }

    #[test]
    fn a_user_message_is_its_results_then_its_text() {
        let mut names = CallNames::default();
        let assistant = item(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.rs"}},
            {"type": "tool_use", "id": "t2", "name": "Grep", "input": {"pattern": "x"}}]}));
        let user = item(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "fn a"}]},
            {"type": "tool_result", "tool_use_id": "t2", "content": "a.rs:1", "is_error": true},
            {"type": "text", "text": "also check b"}]}));
        let units = Anthropic.units(&[assistant, user], &mut names);
        assert_eq!(units.len(), 2);
        assert_eq!(
            units[0].messages,
            vec![Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: "hm".into(),
                        signature: Some(crate::wire::opaque_stand_in("sig"))
                    },
                    Block::ToolCall(ToolCall::new("t1", "Read", r#"{"file_path":"a.rs"}"#)),
                    Block::ToolCall(ToolCall::new("t2", "Grep", r#"{"pattern":"x"}"#)),
                ]
            }]
        );
        assert_eq!(
            units[1].messages,
            vec![
                Message::tool_result("t1", "Read", "fn a", false),
                Message::tool_result("t2", "Grep", "a.rs:1", true),
                Message::user("also check b"),
            ]
        );
    }

    #[test]
    fn an_altered_assistant_keeps_the_client_blocks_that_survive() {
        let original = item(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "text", "text": "reading", "cache_control": {"type": "ephemeral"}},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}}]}));
        let altered = Message::Assistant {
            content: vec![
                Block::Text {
                    text: "reading".into(),
                },
                Block::Text {
                    text: "[evicted]".into(),
                },
            ],
        };
        let parts = [Part {
            index: 0,
            message: &altered,
            altered: true,
        }];
        let rebuilt = Anthropic.rebuild(std::slice::from_ref(&original), &parts);
        assert_eq!(
            rebuilt,
            vec![json!({"role": "assistant", "content": [
                {"type": "text", "text": "reading", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "[evicted]"}]})]
        );
    }

    #[test]
    fn a_user_message_loses_evicted_results_and_keeps_the_rest() {
        let original = item(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "long output"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "other", "is_error": false},
            {"type": "text", "text": "go on"}]}));
        let stubbed = Message::tool_result("t2", "Bash", "[output removed]", false);
        let user = Message::user("go on");
        let parts = [
            Part {
                index: 1,
                message: &stubbed,
                altered: true,
            },
            Part {
                index: 2,
                message: &user,
                altered: false,
            },
        ];
        assert_eq!(
            Anthropic.rebuild(std::slice::from_ref(&original), &parts),
            vec![json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "[output removed]", "is_error": false},
                {"type": "text", "text": "go on"}]})]
        );
        assert!(Anthropic.rebuild(&[original], &[]).is_empty());
    }

    #[test]
    fn system_messages_and_server_blocks_are_kept() {
        let mut names = CallNames::default();
        let search = json!({"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "x"}});
        let items = [
            item(json!({"role": "system", "content": "reminder"})),
            item(json!({"role": "assistant", "content": [search.clone(),
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]})),
            item(json!({"role": "user", "content": []})),
        ];
        let units = Anthropic.units(&items, &mut names);
        assert_eq!(units[0].messages, vec![Message::system("reminder")]);
        assert!(units[2].messages.is_empty(), "nothing for the engine");
        // Evicting the Read call keeps the server block, as the client sent it.
        let Message::Assistant { content } = &units[1].messages[0] else {
            panic!("{:?}", units[1])
        };
        let altered = Message::Assistant {
            content: vec![content[0].clone()],
        };
        let parts = [Part {
            index: 0,
            message: &altered,
            altered: true,
        }];
        assert_eq!(
            Anthropic.rebuild(&items[1..2], &parts),
            vec![json!({"role": "assistant", "content": [search]})]
        );
    }

    #[test]
    fn breakpoints_are_counted_and_placed_once() {
        let body = Body::parse(
            br#"{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[]}"#,
        )
        .unwrap();
        let items = [item(
            json!({"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]}),
        )];
        assert_eq!(
            breakpoints(&body, &items),
            (2, Some(json!({"type": "ephemeral"})))
        );
        let none = Body::parse(br#"{"messages":[]}"#).unwrap();
        assert_eq!(breakpoints(&none, &[]), (0, None));

        let control = json!({"type": "ephemeral"});
        let mut message = json!({"role": "user", "content": "plain"});
        assert!(Anthropic.mark(&mut message, &control));
        assert_eq!(
            message,
            json!({"role": "user", "content": [{"type": "text", "text": "plain", "cache_control": {"type": "ephemeral"}}]})
        );
        assert!(!Anthropic.mark(&mut message, &control), "already marked");
    }

    #[test]
    fn prologue_fields_are_read() {
        let body = Body::parse(
            br#"{"system":[{"type":"text","text":"be brief"}],"tools":[{"name":"Read","description":"reads","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}],"messages":[]}"#,
        )
        .unwrap();
        assert_eq!(Anthropic.system(&body).as_deref(), Some("be brief"));
        let tools = Anthropic.tools(&body);
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].parameters, json!({"type": "object"}));
        assert_eq!(tools[1].name, "web_search");
    }

    #[test]
    fn signatures_count_as_stand_ins_and_go_upstream_as_sent() {
        use cwl::TokenCounter;
        let signature = "EqQBCkYIBRgCKkCx".repeat(100);
        let original = item(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": signature},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}}]}));
        let mut names = CallNames::default();
        let units = Anthropic.units(std::slice::from_ref(&original), &mut names);
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
        assert!(cwl::O200k.count(&signature) > 500);
        let altered = Message::Assistant {
            content: vec![content[0].clone()],
        };
        let parts = [Part {
            index: 0,
            message: &altered,
            altered: true,
        }];
        let rebuilt = Anthropic.rebuild(std::slice::from_ref(&original), &parts);
        assert_eq!(rebuilt[0]["content"][0], original.value()["content"][0]);
    }
}
