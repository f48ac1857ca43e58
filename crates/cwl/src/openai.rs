//! The OpenAI Chat Completions message shape, the interchange format of
//! `cwl evict` and of logs written by OpenAI-compatible harnesses.

use std::collections::HashMap;

use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::message::{Block, Message, ToolCall, ToolResult, ToolSpec};

/// Why a request body could not be read, and where.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum OpenAiError {
    /// The body is not an object with a `messages` array.
    #[error("{0}")]
    Shape(String),
    /// A message is malformed.
    #[error("messages[{index}]: {what}")]
    Message {
        /// Zero-based index in `messages`.
        index: usize,
        /// What is wrong.
        what: String,
    },
    /// A tool definition is malformed.
    #[error("tools[{index}]: {what}")]
    Tool {
        /// Zero-based index in `tools`.
        index: usize,
        /// What is wrong.
        what: String,
    },
}

/// A request body: messages and tool definitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The transcript.
    pub messages: Vec<Message>,
    /// The tools offered.
    pub tools: Vec<ToolSpec>,
}

/// Reads `{"messages": [...], "tools": [...]?}`.
pub fn parse_request(body: &Value) -> Result<Request, OpenAiError> {
    let Value::Object(fields) = body else {
        return Err(OpenAiError::Shape(
            "input must be a JSON object with a `messages` array".into(),
        ));
    };
    let messages = match fields.get("messages") {
        Some(Value::Array(messages)) => parse_messages(messages)?,
        Some(_) => return Err(OpenAiError::Shape("`messages` must be an array".into())),
        None => return Err(OpenAiError::Shape("input has no `messages` array".into())),
    };
    let tools = match fields.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .map(|(index, tool)| parse_tool(tool).map_err(|what| OpenAiError::Tool { index, what }))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(OpenAiError::Shape("`tools` must be an array".into())),
    };
    Ok(Request { messages, tools })
}

/// Reads a `messages` array.
pub fn parse_messages(messages: &[Value]) -> Result<Vec<Message>, OpenAiError> {
    let mut names: HashMap<String, String> = HashMap::new();
    messages
        .iter()
        .enumerate()
        .map(|(index, message)| {
            parse_message(message, &mut names).map_err(|what| OpenAiError::Message { index, what })
        })
        .collect()
}

/// Reads one message of a `messages` array. `names` maps the ids of the
/// tool calls read so far to their tools' names: a tool message takes its
/// tool's name from there, and an assistant message's calls are added.
pub fn parse_message(
    value: &Value,
    names: &mut HashMap<String, String>,
) -> Result<Message, String> {
    let Value::Object(fields) = value else {
        return Err("a message must be a JSON object".into());
    };
    let role = match fields.get("role") {
        Some(Value::String(role)) => role.as_str(),
        Some(_) => return Err("`role` must be a string".into()),
        None => return Err("message has no `role`".into()),
    };
    match role {
        "system" | "developer" => Ok(Message::System {
            content: text_content(fields)?.unwrap_or_default(),
        }),
        "user" => Ok(Message::User {
            content: text_content(fields)?.unwrap_or_default(),
        }),
        "assistant" => {
            let mut content = Vec::new();
            if let Some(reasoning) = optional_string(fields, "reasoning_content")? {
                content.push(Block::Reasoning {
                    text: reasoning.to_string(),
                    signature: optional_string(fields, "reasoning_signature")?.map(str::to_string),
                });
            }
            let text = text_content(fields)?;
            let calls = match fields.get("tool_calls") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(calls)) => calls
                    .iter()
                    .enumerate()
                    .map(|(index, call)| {
                        parse_tool_call(call).map_err(|what| format!("tool_calls[{index}]: {what}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(_) => return Err("`tool_calls` must be an array".into()),
            };
            match text {
                Some(text) if !text.is_empty() || calls.is_empty() => {
                    content.push(Block::Text { text });
                }
                None if calls.is_empty() && content.is_empty() => {
                    return Err("assistant message has neither content nor tool_calls".into());
                }
                _ => {}
            }
            for call in calls {
                names.insert(call.id.clone(), call.name.clone());
                content.push(Block::ToolCall(call));
            }
            Ok(Message::Assistant { content })
        }
        "tool" => {
            let call_id = optional_string(fields, "tool_call_id")?
                .ok_or("tool message has no `tool_call_id`")?
                .to_string();
            let Some(tool_name) = names.get(&call_id).cloned() else {
                return Err(format!(
                    "tool result for unknown call `{call_id}` (no earlier assistant tool_call has this id)"
                ));
            };
            Ok(Message::ToolResult(ToolResult {
                call_id,
                tool_name,
                content: text_content(fields)?.unwrap_or_default(),
                is_error: false,
            }))
        }
        other => Err(format!(
            "unknown role `{other}` (expected system, developer, user, assistant or tool)"
        )),
    }
}

/// Reads one entry of an assistant message's `tool_calls`; the error says
/// what is missing or malformed.
pub fn parse_tool_call(value: &Value) -> Result<ToolCall, String> {
    let Value::Object(fields) = value else {
        return Err("a tool call must be a JSON object".into());
    };
    let id = optional_string(fields, "id")?.ok_or("tool call has no `id`")?;
    let Some(Value::Object(function)) = fields.get("function") else {
        return Err("tool call has no `function` object".into());
    };
    let name = optional_string(function, "name")?.ok_or("tool call has no `function.name`")?;
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(arguments)) => arguments.clone(),
        Some(other @ Value::Object(_)) => other.to_string(),
        Some(_) => return Err("`function.arguments` must be a JSON string".into()),
    };
    Ok(ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        arguments,
    })
}

/// Reads one tool definition, `{"type":"function","function":{...}}` or
/// the bare function object; the error says what is wrong.
pub fn parse_tool(value: &Value) -> Result<ToolSpec, String> {
    let function = match value.get("function") {
        Some(Value::Object(function)) => function,
        _ => match value {
            Value::Object(fields) if fields.contains_key("name") => fields,
            _ => return Err("a tool must be {\"type\":\"function\",\"function\":{...}}".into()),
        },
    };
    Ok(ToolSpec {
        name: optional_string(function, "name")?
            .ok_or("tool has no `function.name`")?
            .to_string(),
        description: optional_string(function, "description")?
            .unwrap_or_default()
            .to_string(),
        parameters: function
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    })
}

fn optional_string<'a>(
    fields: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, String> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(format!("`{field}` must be a string")),
    }
}

/// `content` as a string, or the text parts of a content array joined.
fn text_content(fields: &Map<String, Value>) -> Result<Option<String>, String> {
    match fields.get("content") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (index, part) in parts.iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text" | "input_text" | "output_text"), Some(Value::String(text))) => {
                        texts.push(text.as_str());
                    }
                    (Some(kind), _) => {
                        return Err(format!(
                            "content[{index}]: unsupported content part type `{kind}` (only text parts are supported)"
                        ));
                    }
                    (None, _) => return Err(format!("content[{index}]: part has no `type`")),
                }
            }
            Ok(Some(texts.join("\n")))
        }
        Some(_) => Err("`content` must be a string, an array of parts, or null".into()),
    }
}

/// Writes messages in the OpenAI shape.
pub fn to_messages(messages: &[Message]) -> Vec<Value> {
    messages.iter().map(to_message).collect()
}

/// Writes one message in the OpenAI shape.
pub fn to_message(message: &Message) -> Value {
    match message {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::ToolResult(result) => json!({
            "role": "tool",
            "tool_call_id": result.call_id,
            "content": result.content,
        }),
        Message::Assistant { content } => {
            let parts = assistant_fields(content);
            let mut fields = Map::new();
            fields.insert("role".into(), json!("assistant"));
            fields.insert(
                "content".into(),
                parts.content.map_or(Value::Null, |text| json!(text)),
            );
            if let Some(reasoning) = parts.reasoning {
                fields.insert("reasoning_content".into(), json!(reasoning));
            }
            if let Some(signature) = parts.signature {
                fields.insert("reasoning_signature".into(), json!(signature));
            }
            if !parts.calls.is_empty() {
                let calls = parts
                    .calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
                fields.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(fields)
        }
    }
}

/// An assistant message's content as the Chat Completions shape holds it
/// ([`assistant_fields`]), for writers of that shape other than
/// [`to_message`] (the Python binding builds its objects from it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantFields<'a> {
    /// The texts, joined by a blank line; `None` without any (`null`).
    pub content: Option<std::borrow::Cow<'a, str>>,
    /// The reasoning texts, joined by a blank line (`reasoning_content`).
    pub reasoning: Option<std::borrow::Cow<'a, str>>,
    /// The first reasoning signature (`reasoning_signature`).
    pub signature: Option<&'a str>,
    /// The tool calls, in order (`tool_calls`).
    pub calls: Vec<&'a ToolCall>,
}

/// Groups an assistant message's blocks into the Chat Completions fields.
pub fn assistant_fields(content: &[Block]) -> AssistantFields<'_> {
    fn joined<'a>(parts: &[&'a str]) -> Option<std::borrow::Cow<'a, str>> {
        match parts {
            [] => None,
            [one] => Some(std::borrow::Cow::Borrowed(*one)),
            _ => Some(std::borrow::Cow::Owned(parts.join("\n\n"))),
        }
    }
    let mut texts = Vec::new();
    let mut reasoning = Vec::new();
    let mut signature = None;
    let mut calls = Vec::new();
    for block in content {
        match block {
            Block::Text { text } => texts.push(text.as_str()),
            Block::Reasoning { text, signature: s } => {
                reasoning.push(text.as_str());
                signature = signature.or(s.as_deref());
            }
            Block::ToolCall(call) => calls.push(call),
        }
    }
    AssistantFields {
        content: joined(&texts),
        reasoning: joined(&reasoning),
        signature,
        calls,
    }
}

/// Writes tool definitions in the OpenAI shape.
pub fn to_tools(tools: &[ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }
            })
        })
        .collect()
}

/// The text of a provider content value: a string, or a list of parts
/// whose texts are joined by newlines; parts without text (images,
/// documents…) become a `[type]` placeholder (`[image]` for every image
/// kind). OpenAI, Anthropic and Responses content share this shape, so
/// every importer and the proxy read it the same way.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().map(part_text).collect::<Vec<_>>().join("\n"),
        other => other.to_string(),
    }
}

/// The text of one content part (see [`content_text`]).
pub fn part_text(part: &Value) -> String {
    if let Some(text) = part.as_str() {
        return text.to_string();
    }
    match part.get("text").and_then(Value::as_str) {
        Some(text) => text.to_string(),
        None => {
            let kind = part.get("type").and_then(Value::as_str).unwrap_or("part");
            let kind = if kind.contains("image") {
                "image"
            } else {
                kind
            };
            format!("[{kind}]")
        }
    }
}
