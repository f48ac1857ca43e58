//! Assembling a streamed Messages response from its events.

use cwl::{Block, Message, ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use super::REDACTED_THINKING_PREFIX;
use crate::sse::{Events, SseEvent};
use crate::{ProviderError, Response, Sink, StopReason, StreamEvent};

#[derive(Deserialize)]
struct Wire {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

/// A content block being assembled.
enum Part {
    Text(String),
    Thinking {
        text: String,
        signature: String,
    },
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        initial: Value,
    },
    /// A block type we do not keep (server tools and the like).
    Ignored,
}

/// The response so far.
#[derive(Default)]
struct Assembly {
    parts: Vec<(usize, Part)>,
    usage: WireUsage,
    stop_reason: Option<String>,
}

/// Reads the whole stream of one attempt.
pub(super) async fn read(
    events: &mut Events,
    sink: &mut Sink<'_>,
) -> Result<Response, ProviderError> {
    let mut state = Assembly::default();
    let mut stopped = false;
    while let Some(event) = events.next().await? {
        let wire: Wire = events.parse(&event, "Messages stream event (JSON with a \"type\")")?;
        match wire.kind.as_str() {
            "message_start" => {
                if let Some(usage) = wire.message.and_then(|m| m.usage) {
                    state.merge_usage(usage);
                }
            }
            "content_block_start" => state.start(&wire, &event, events, sink)?,
            "content_block_delta" => state.delta(&wire, &event, events, sink)?,
            "message_delta" => {
                if let Some(reason) = wire
                    .delta
                    .as_ref()
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    state.stop_reason = Some(reason.to_string());
                }
                if let Some(usage) = wire.usage {
                    state.merge_usage(usage);
                }
            }
            "message_stop" => {
                stopped = true;
                break;
            }
            "error" => return Err(api_error(wire.error.as_ref())),
            // ping, content_block_stop, and event types added later.
            _ => {}
        }
    }
    if !stopped && state.stop_reason.is_none() {
        return Err(events.truncated("no message_stop and no stop_reason arrived"));
    }
    Ok(state.finish())
}

/// A required string field of an event's JSON.
fn text_field<'v>(
    value: &'v Value,
    key: &str,
    event: &SseEvent,
    events: &Events,
) -> Result<&'v str, ProviderError> {
    value.get(key).and_then(Value::as_str).ok_or_else(|| {
        events.malformed(format!(
            "event {} ({}) lacks the string field {key:?}: {value}",
            event.number, event.name
        ))
    })
}

impl Assembly {
    fn merge_usage(&mut self, usage: WireUsage) {
        let u = &mut self.usage;
        u.input_tokens = usage.input_tokens.or(u.input_tokens);
        u.cache_read_input_tokens = usage.cache_read_input_tokens.or(u.cache_read_input_tokens);
        u.cache_creation_input_tokens = usage
            .cache_creation_input_tokens
            .or(u.cache_creation_input_tokens);
        u.output_tokens = usage.output_tokens.or(u.output_tokens);
    }

    /// The block index of a content block event and its `field`, whose
    /// value is `payload`; both are required.
    fn block_event<'w>(
        wire: &Wire,
        payload: Option<&'w Value>,
        field: &str,
        event: &SseEvent,
        events: &Events,
    ) -> Result<(usize, &'w Value), ProviderError> {
        let missing = |what: &str| {
            events.malformed(format!(
                "event {} ({}) has no {what}",
                event.number, wire.kind
            ))
        };
        let index = wire.index.ok_or_else(|| missing("block index"))?;
        let payload = payload.ok_or_else(|| missing(field))?;
        Ok((index, payload))
    }

    fn start(
        &mut self,
        wire: &Wire,
        event: &SseEvent,
        events: &Events,
        sink: &mut Sink<'_>,
    ) -> Result<(), ProviderError> {
        let (index, block) = Self::block_event(
            wire,
            wire.content_block.as_ref(),
            "content_block",
            event,
            events,
        )?;
        let optional = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let part = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = optional("text");
                sink.text(&text);
                Part::Text(text)
            }
            Some("thinking") => {
                let text = optional("thinking");
                sink.reasoning(&text);
                Part::Thinking {
                    text,
                    signature: optional("signature"),
                }
            }
            Some("redacted_thinking") => Part::Redacted(optional("data")),
            Some("tool_use") => {
                let id = text_field(block, "id", event, events)?.to_string();
                let name = text_field(block, "name", event, events)?.to_string();
                sink.emit(StreamEvent::ToolCallStarted {
                    id: id.clone(),
                    name: name.clone(),
                });
                Part::ToolUse {
                    id,
                    name,
                    json: String::new(),
                    initial: block.get("input").cloned().unwrap_or(Value::Null),
                }
            }
            _ => Part::Ignored,
        };
        if self.parts.iter().any(|(i, _)| *i == index) {
            return Err(events.malformed(format!(
                "event {}: content block {index} started twice",
                event.number
            )));
        }
        self.parts.push((index, part));
        Ok(())
    }

    fn delta(
        &mut self,
        wire: &Wire,
        event: &SseEvent,
        events: &Events,
        sink: &mut Sink<'_>,
    ) -> Result<(), ProviderError> {
        let (index, delta) = Self::block_event(wire, wire.delta.as_ref(), "delta", event, events)?;
        let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
        let Some((_, part)) = self.parts.iter_mut().find(|(i, _)| *i == index) else {
            return Err(events.malformed(format!(
                "event {}: {kind} for content block {index}, which was never started",
                event.number
            )));
        };
        match (kind, part) {
            ("text_delta", Part::Text(text)) => {
                let piece = text_field(delta, "text", event, events)?;
                sink.text(piece);
                text.push_str(piece);
            }
            ("thinking_delta", Part::Thinking { text, .. }) => {
                let piece = text_field(delta, "thinking", event, events)?;
                sink.reasoning(piece);
                text.push_str(piece);
            }
            ("signature_delta", Part::Thinking { signature, .. }) => {
                signature.push_str(text_field(delta, "signature", event, events)?);
            }
            ("input_json_delta", Part::ToolUse { json, .. }) => {
                json.push_str(text_field(delta, "partial_json", event, events)?);
            }
            (_, Part::Ignored) | ("citations_delta", _) => {}
            ("text_delta" | "thinking_delta" | "signature_delta" | "input_json_delta", _) => {
                return Err(events.malformed(format!(
                    "event {}: {kind} does not fit content block {index}",
                    event.number
                )));
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(mut self) -> Response {
        self.parts.sort_by_key(|(i, _)| *i);
        let mut content = Vec::new();
        for (_, part) in self.parts {
            match part {
                Part::Text(text) if !text.is_empty() => content.push(Block::Text { text }),
                Part::Thinking { text, signature } => content.push(Block::Reasoning {
                    text,
                    signature: (!signature.is_empty()).then_some(signature),
                }),
                Part::Redacted(data) => content.push(Block::Reasoning {
                    text: String::new(),
                    signature: Some(format!("{REDACTED_THINKING_PREFIX}{data}")),
                }),
                Part::ToolUse {
                    id,
                    name,
                    json,
                    initial,
                } => {
                    let arguments = if !json.trim().is_empty() {
                        json
                    } else if initial.is_object() {
                        initial.to_string()
                    } else {
                        "{}".to_string()
                    };
                    content.push(Block::ToolCall(ToolCall {
                        id,
                        name,
                        arguments,
                    }));
                }
                Part::Text(_) | Part::Ignored => {}
            }
        }
        let has_calls = content.iter().any(|b| matches!(b, Block::ToolCall(_)));
        let stop_reason = match self.stop_reason.as_deref() {
            _ if has_calls => StopReason::ToolUse,
            Some("end_turn" | "stop_sequence") | None => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            Some("refusal") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_string()),
        };
        let u = self.usage;
        let read = u.cache_read_input_tokens.unwrap_or(0);
        let write = u.cache_creation_input_tokens.unwrap_or(0);
        Response {
            message: Message::Assistant { content },
            usage: Usage {
                input_tokens: u.input_tokens.unwrap_or(0) + read + write,
                cached_input_tokens: read,
                cache_write_tokens: write,
                output_tokens: u.output_tokens.unwrap_or(0),
            },
            stop_reason,
            attempts: 1,
        }
    }
}

/// An `error` event. Overload, rate limits and internal errors are
/// transient.
fn api_error(error: Option<&Value>) -> ProviderError {
    let field = |key: &str| {
        error
            .and_then(|e| e.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let kind = field("type").unwrap_or_else(|| "error".to_string());
    let message = field("message").unwrap_or_else(|| "(no message)".to_string());
    let retryable = matches!(
        kind.as_str(),
        "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
    );
    ProviderError::Api {
        kind,
        message,
        retryable,
    }
}
