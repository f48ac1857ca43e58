//! Message shapes a Python caller speaks: OpenAI Chat Completions,
//! Anthropic Messages and the OpenAI Responses API, read into engine
//! messages and written back from them.
//!
//! Chat Completions is the engine's own interchange shape
//! ([`cwl::openai`], the one `cwl evict` reads); the other two are small
//! converters here. They are not byte-preserving like the proxy's wire
//! formats: a view is written from the engine's messages, so fields the
//! engine does not model (`cache_control`, item ids of messages) are not
//! sent back. Content the engine cannot hold (images, documents, server
//! tools) is refused with an error naming it, never dropped unseen.

mod anthropic;
mod responses;

use std::collections::HashMap;
use std::str::FromStr;

use cwl::{Block, Message, ToolSpec, openai};
use serde_json::{Map, Value, json};

/// A message shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// OpenAI Chat Completions (`messages` of `/v1/chat/completions`).
    Chat,
    /// Anthropic Messages (`messages` of `/v1/messages`).
    Anthropic,
    /// OpenAI Responses (`input` items of `/v1/responses`).
    Responses,
}

impl FromStr for Shape {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "openai" | "chat" | "chat_completions" => Ok(Shape::Chat),
            "anthropic" | "messages" => Ok(Shape::Anthropic),
            "responses" => Ok(Shape::Responses),
            _ => Err(format!(
                "unknown shape `{text}`: expected `openai` (Chat Completions), `anthropic` or `responses`"
            )),
        }
    }
}

impl Shape {
    /// The name callers use.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Chat => "openai",
            Shape::Anthropic => "anthropic",
            Shape::Responses => "responses",
        }
    }
}

/// What one input message or item becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// A whole engine message.
    Message(Message),
    /// Blocks of an assistant response that later items may continue (the
    /// Responses API gives each reasoning, text and call its own item).
    Assistant(Vec<Block>),
}

/// Maps tool call ids to their tools' names, so a result knows its tool.
pub type Names = HashMap<String, String>;

/// The shape a message can only be in, or `None` when every shape reads
/// it the same way (`{"role": "user", "content": "..."}`).
pub fn detect(value: &Value) -> Option<Shape> {
    let fields = value.as_object()?;
    // Only Responses items have a `type` of their own.
    if fields.contains_key("type") {
        return Some(Shape::Responses);
    }
    if fields.get("role").and_then(Value::as_str) == Some("tool")
        || fields.contains_key("tool_calls")
        || fields.contains_key("tool_call_id")
    {
        return Some(Shape::Chat);
    }
    let parts = fields.get("content").and_then(Value::as_array)?;
    parts
        .iter()
        .find_map(|part| match part.get("type").and_then(Value::as_str)? {
            "tool_use" | "tool_result" | "thinking" | "redacted_thinking" => Some(Shape::Anthropic),
            "input_text" | "output_text" => Some(Shape::Responses),
            "image_url" => Some(Shape::Chat),
            _ => None,
        })
}

/// Reads one message in `shape`.
pub fn parse(shape: Shape, value: &Value, names: &mut Names) -> Result<Vec<Part>, String> {
    match shape {
        Shape::Chat => {
            openai::parse_message(value, names).map(|message| vec![Part::Message(message)])
        }
        Shape::Anthropic => anthropic::parse(value, names),
        Shape::Responses => responses::parse(value, names),
    }
}

/// Engine messages written in a shape, a run at a time: `messages` is how
/// many engine messages the values stand for.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Engine messages consumed.
    pub messages: usize,
    /// What they became.
    pub values: Vec<Value>,
}

/// How many engine messages the first group of `messages` (which must not
/// be empty) stands for: in the Anthropic shape a run of tool results and
/// the user turn after them, written as one user message; else one.
pub fn group_len(shape: Shape, messages: &[&Message]) -> usize {
    match shape {
        Shape::Anthropic => anthropic::group_len(messages),
        Shape::Chat | Shape::Responses => 1,
    }
}

/// Writes the first group of `messages` (which must not be empty).
pub fn render_group(shape: Shape, messages: &[&Message]) -> Group {
    match shape {
        Shape::Chat => Group {
            messages: 1,
            values: vec![openai::to_message(messages[0])],
        },
        Shape::Anthropic => anthropic::render_group(messages),
        Shape::Responses => Group {
            messages: 1,
            values: responses::render(messages[0]),
        },
    }
}

/// Writes every message.
pub fn render(shape: Shape, messages: &[&Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut at = 0;
    while at < messages.len() {
        let group = render_group(shape, &messages[at..]);
        at += group.messages.max(1);
        out.extend(group.values);
    }
    out
}

/// Reads a tool definition in any of the three shapes.
pub fn parse_tool(value: &Value) -> Result<ToolSpec, String> {
    if let Some(schema) = value.get("input_schema") {
        let name = value
            .get("name")
            .and_then(Value::as_str)
            .ok_or("tool has no `name`")?;
        return Ok(ToolSpec {
            name: name.to_string(),
            description: value
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            parameters: schema.clone(),
        });
    }
    openai::parse_tool(value)
}

/// Writes a tool definition in `shape`.
pub fn render_tool(shape: Shape, spec: &ToolSpec) -> Value {
    match shape {
        Shape::Chat => openai::to_tools(std::slice::from_ref(spec)).remove(0),
        Shape::Anthropic => json!({
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.parameters,
        }),
        Shape::Responses => json!({
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }),
    }
}

/// `content` as text: a string, or text parts (`kinds` name their types)
/// joined by newlines; any other part is refused, naming its type.
fn text_of(content: Option<&Value>, kinds: &[&str]) -> Result<String, String> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (index, part) in parts.iter().enumerate() {
                texts.push(
                    part_text(part, kinds).map_err(|what| format!("content[{index}]: {what}"))?,
                );
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err("`content` must be a string or an array of parts".into()),
    }
}

/// The text of one part whose type is one of `kinds`.
fn part_text<'a>(part: &'a Value, kinds: &[&str]) -> Result<&'a str, String> {
    if let Some(text) = part.as_str() {
        return Ok(text);
    }
    match (part.get("type").and_then(Value::as_str), part.get("text")) {
        (Some(kind), Some(Value::String(text))) if kinds.contains(&kind) => Ok(text),
        (Some(kind), _) => Err(format!(
            "unsupported content part type `{kind}` (cwl holds text only: expected {})",
            kinds.join(" or ")
        )),
        (None, _) => Err("part has no `type`".into()),
    }
}

/// A required string field.
fn string<'a>(fields: &'a Map<String, Value>, field: &str) -> Result<&'a str, String> {
    match fields.get(field) {
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(format!("`{field}` must be a string")),
        None => Err(format!("missing `{field}`")),
    }
}

/// The name of the tool a result answers, or the error for an orphan.
fn tool_name(names: &Names, call_id: &str) -> Result<String, String> {
    names.get(call_id).cloned().ok_or_else(|| {
        format!("tool result for unknown call `{call_id}` (no earlier tool call has this id)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_only_one_shape_reads_is_detected() {
        let cases = [
            (
                json!({"role": "tool", "tool_call_id": "a", "content": "x"}),
                Some(Shape::Chat),
            ),
            (
                json!({"role": "assistant", "tool_calls": []}),
                Some(Shape::Chat),
            ),
            (
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}),
                Some(Shape::Anthropic),
            ),
            (
                json!({"type": "function_call_output", "call_id": "a"}),
                Some(Shape::Responses),
            ),
            (
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}),
                Some(Shape::Responses),
            ),
            (json!({"role": "user", "content": "hi"}), None),
            (
                json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
                None,
            ),
        ];
        for (value, shape) in cases {
            assert_eq!(detect(&value), shape, "{value}");
        }
    }

    #[test]
    fn tools_of_every_shape_are_read_and_written_back() {
        let spec = cwl::delimiter_spec();
        for shape in [Shape::Chat, Shape::Anthropic, Shape::Responses] {
            let written = render_tool(shape, &spec);
            assert_eq!(parse_tool(&written).unwrap(), spec, "{}", shape.name());
        }
    }

    #[test]
    fn unknown_shapes_and_non_text_parts_are_refused_by_name() {
        assert!(
            "gemini"
                .parse::<Shape>()
                .unwrap_err()
                .contains("unknown shape `gemini`")
        );
        let error =
            text_of(Some(&json!([{"type": "image", "source": {}}])), &["text"]).unwrap_err();
        assert!(
            error.contains("unsupported content part type `image`"),
            "{error}"
        );
    }
}
