//! Assembling a streamed chat completion: text, reasoning and tool calls
//! whose pieces arrive across chunks.

use cwl::{Block, Message, ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::sse::Events;
use crate::{ProviderError, Response, Sink, StopReason, StreamEvent};

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// Used instead of `reasoning_content` by OpenRouter and newer vLLM.
    #[serde(default)]
    reasoning: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A string piece normally; a whole object from a few servers.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// A tool call being assembled.
struct PartialCall {
    index: usize,
    id: Option<String>,
    name: String,
    arguments: String,
    announced: bool,
}

/// The response so far.
#[derive(Default)]
struct Assembly {
    reasoning: String,
    text: String,
    calls: Vec<PartialCall>,
    finish: Option<String>,
    usage: Usage,
}

/// Reads the whole stream of one attempt.
pub(super) async fn read(
    events: &mut Events,
    sink: &mut Sink<'_>,
) -> Result<Response, ProviderError> {
    let mut state = Assembly::default();
    let mut done = false;
    while let Some(event) = events.next().await? {
        if event.data.trim() == "[DONE]" {
            done = true;
            break;
        }
        let chunk: Chunk = events.parse(&event, "chat completion chunk (JSON)")?;
        if let Some(error) = chunk.error {
            return Err(api_error(&error));
        }
        state.apply(chunk, sink, events, event.number)?;
    }
    // Some servers end without `[DONE]`; a finish reason is enough.
    if !done && state.finish.is_none() {
        return Err(events.truncated("no finish_reason and no [DONE] arrived"));
    }
    state.finish(events)
}

impl Assembly {
    fn apply(
        &mut self,
        chunk: Chunk,
        sink: &mut Sink<'_>,
        events: &Events,
        number: usize,
    ) -> Result<(), ProviderError> {
        if let Some(usage) = chunk.usage {
            let input = usage.prompt_tokens.unwrap_or(0);
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0);
            self.usage = Usage {
                input_tokens: input,
                cached_input_tokens: cached.min(input),
                cache_write_tokens: 0,
                output_tokens: usage.completion_tokens.unwrap_or(0),
            };
        }
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            let reasoning = delta
                .reasoning_content
                .or_else(|| delta.reasoning.and_then(|r| r.as_str().map(str::to_string)));
            if let Some(piece) = reasoning {
                sink.reasoning(&piece);
                self.reasoning.push_str(&piece);
            }
            if let Some(piece) = delta.content {
                sink.text(&piece);
                self.text.push_str(&piece);
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.apply_call(call, sink, events, number)?;
            }
        }
        Ok(())
    }

    fn apply_call(
        &mut self,
        delta: CallDelta,
        sink: &mut Sink<'_>,
        events: &Events,
        number: usize,
    ) -> Result<(), ProviderError> {
        // Without an index, a delta with a new id starts a call and any
        // other continues the last one.
        let index = match delta.index {
            Some(index) => index,
            None => match (&delta.id, self.calls.last()) {
                (Some(id), Some(last)) if last.id.as_deref() == Some(id) => last.index,
                (None, Some(last)) => last.index,
                _ => self.calls.len(),
            },
        };
        let position = match self.calls.iter().position(|c| c.index == index) {
            Some(position) => position,
            None => {
                self.calls.push(PartialCall {
                    index,
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                    announced: false,
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[position];
        if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
            call.id = Some(id);
        }
        if let Some(function) = delta.function {
            // Names come whole in one delta; a few servers repeat them.
            if let Some(name) = function.name
                && name != call.name
            {
                call.name.push_str(&name);
            }
            match function.arguments {
                None | Some(Value::Null) => {}
                Some(Value::String(piece)) => call.arguments.push_str(&piece),
                Some(Value::Object(object)) => {
                    call.arguments = Value::Object(object).to_string();
                }
                Some(other) => {
                    return Err(events.malformed(format!(
                        "event {number}: tool call {index} has arguments that are neither a \
                         string nor an object: {other}"
                    )));
                }
            }
        }
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            let id = call.id.get_or_insert_with(generated_id).clone();
            sink.emit(StreamEvent::ToolCallStarted {
                id,
                name: call.name.clone(),
            });
        }
        Ok(())
    }

    fn finish(self, events: &Events) -> Result<Response, ProviderError> {
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(Block::Reasoning {
                text: self.reasoning,
                signature: None,
            });
        }
        if !self.text.is_empty() {
            content.push(Block::Text { text: self.text });
        }
        let has_calls = !self.calls.is_empty();
        for call in self.calls {
            if call.name.is_empty() {
                return Err(events.malformed(format!(
                    "tool call {} (id {}) never received a function name",
                    call.index,
                    call.id.as_deref().unwrap_or("none")
                )));
            }
            let arguments = if call.arguments.trim().is_empty() {
                "{}".to_string()
            } else {
                call.arguments
            };
            content.push(Block::ToolCall(ToolCall {
                id: call.id.unwrap_or_else(generated_id),
                name: call.name,
                arguments,
            }));
        }
        let stop_reason = match self.finish.as_deref() {
            _ if has_calls => StopReason::ToolUse,
            Some("stop") | None => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            Some(other) => StopReason::Other(other.to_string()),
        };
        Ok(Response {
            message: Message::Assistant { content },
            usage: self.usage,
            stop_reason,
            attempts: 1,
        })
    }
}

/// An id for a tool call the server sent without one.
fn generated_id() -> String {
    format!("call_{:016x}", fastrand::u64(..))
}

/// An `error` object sent inside the stream (also by the Responses API).
/// Overload, rate-limit and server errors are transient.
pub(crate) fn api_error(error: &Value) -> ProviderError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string());
    let code = error.get("code");
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| code.map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_string)))
        .unwrap_or_else(|| "error".to_string());
    let numeric = code.and_then(Value::as_u64);
    let retryable = matches!(numeric, Some(429 | 500..=599))
        || ["server_error", "overloaded", "rate_limit"]
            .iter()
            .any(|k| kind.contains(k));
    ProviderError::Api {
        kind,
        message,
        retryable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stream_errors_are_classified() {
        let err = api_error(&json!({"message": "busy", "code": 502}));
        assert!(err.is_retryable(), "{err}");
        let err = api_error(&json!({"message": "bad", "type": "invalid_request_error"}));
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("invalid_request_error: bad"));
    }
}
