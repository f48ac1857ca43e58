//! Assembling a streamed Responses answer. Deltas are reported as they
//! arrive; each output item is taken whole from its
//! `response.output_item.done` event, and the response ends with
//! `response.completed` (or `response.incomplete`, `response.failed`).

use cwl::{Block, Message, ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::openai::stream::api_error;
use crate::sse::Events;
use crate::{ProviderError, Response, Sink, StopReason, StreamEvent};

/// One event's data: its type and the fields the reader uses.
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

/// The response so far: finished items as blocks, in order.
#[derive(Default)]
struct Assembly {
    blocks: Vec<Block>,
    refused: bool,
}

/// How the response ended.
enum End {
    Completed,
    Incomplete(String),
}

/// Reads the whole stream of one attempt.
pub(super) async fn read(
    events: &mut Events,
    sink: &mut Sink<'_>,
) -> Result<Response, ProviderError> {
    let mut state = Assembly::default();
    while let Some(event) = events.next().await? {
        if event.data.trim() == "[DONE]" {
            break;
        }
        let data: Event = events.parse(&event, "Responses event (JSON)")?;
        match data.kind.as_str() {
            "response.output_text.delta" | "response.refusal.delta" => {
                sink.text(data.delta.as_deref().unwrap_or_default())
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                sink.reasoning(data.delta.as_deref().unwrap_or_default())
            }
            "response.output_item.added" => announce(data.item.as_ref(), sink),
            "response.output_item.done" => {
                let item = data.item.unwrap_or_default();
                state.item(&item).map_err(|detail| {
                    events.malformed(format!("event {}: {detail}", event.number))
                })?;
            }
            "response.completed" => {
                return Ok(state.finish(End::Completed, data.response.as_ref()));
            }
            "response.incomplete" => {
                let reason = data
                    .response
                    .as_ref()
                    .and_then(|r| r.pointer("/incomplete_details/reason"))
                    .and_then(Value::as_str)
                    .unwrap_or("incomplete")
                    .to_string();
                return Ok(state.finish(End::Incomplete(reason), data.response.as_ref()));
            }
            "response.failed" => {
                let error = data
                    .response
                    .as_ref()
                    .and_then(|r| r.get("error"))
                    .cloned()
                    .unwrap_or(Value::Null);
                return Err(api_error(&error));
            }
            "error" => {
                let mut error = serde_json::json!({ "message": data.message });
                if let Some(code) = data.code {
                    error["code"] = code;
                }
                return Err(api_error(&error));
            }
            _ => {}
        }
    }
    Err(events.truncated("no response.completed arrived"))
}

/// Reports a tool call as soon as its item starts.
fn announce(item: Option<&Value>, sink: &mut Sink<'_>) {
    let Some(item) = item else { return };
    if matches!(
        item.get("type").and_then(Value::as_str),
        Some("function_call" | "custom_tool_call")
    ) {
        sink.emit(StreamEvent::ToolCallStarted {
            id: text(item, "call_id"),
            name: text(item, "name"),
        });
    }
}

fn text(item: &Value, key: &str) -> String {
    item.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The texts of a list of parts (`summary`, `content`) of one `type`.
fn parts(item: &Value, key: &str, kind: &str) -> Vec<String> {
    item.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|part| part.get("type").and_then(Value::as_str) == Some(kind))
        .filter_map(|part| part.get("text").or_else(|| part.get("refusal")))
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

impl Assembly {
    /// Adds a finished output item; an error names what is wrong with it.
    fn item(&mut self, item: &Value) -> Result<(), String> {
        match item.get("type").and_then(Value::as_str).unwrap_or_default() {
            "reasoning" => {
                let mut summary = parts(item, "summary", "summary_text");
                summary.extend(parts(item, "content", "reasoning_text"));
                let signature = item
                    .get("encrypted_content")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if signature.is_some() || !summary.is_empty() {
                    self.blocks.push(Block::Reasoning {
                        text: summary.join("\n\n"),
                        signature,
                    });
                }
            }
            "message" => {
                let refusal = parts(item, "content", "refusal");
                self.refused |= !refusal.is_empty();
                let mut texts = parts(item, "content", "output_text");
                texts.extend(refusal);
                let text = texts.concat();
                if !text.is_empty() {
                    self.blocks.push(Block::Text { text });
                }
            }
            kind @ ("function_call" | "custom_tool_call") => {
                let (id, name) = (text(item, "call_id"), text(item, "name"));
                if id.is_empty() || name.is_empty() {
                    return Err(format!("a {kind} item without a call_id or name: {item}"));
                }
                let arguments = match kind {
                    "function_call" => text(item, "arguments"),
                    _ => text(item, "input"),
                };
                self.blocks
                    .push(Block::ToolCall(ToolCall::new(id, name, arguments)));
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(self, end: End, response: Option<&Value>) -> Response {
        let usage = response
            .and_then(|r| r.get("usage"))
            .map_or_else(Usage::default, usage);
        let has_calls = self
            .blocks
            .iter()
            .any(|block| matches!(block, Block::ToolCall(_)));
        let stop_reason = match end {
            _ if has_calls => StopReason::ToolUse,
            _ if self.refused => StopReason::Refusal,
            End::Completed => StopReason::EndTurn,
            End::Incomplete(reason) if reason == "max_output_tokens" => StopReason::MaxTokens,
            End::Incomplete(reason) if reason == "content_filter" => StopReason::Refusal,
            End::Incomplete(reason) => StopReason::Other(reason),
        };
        Response {
            message: Message::Assistant {
                content: self.blocks,
            },
            usage,
            stop_reason,
            attempts: 1,
        }
    }
}

/// The usage object of a finished response.
fn usage(usage: &Value) -> Usage {
    let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    let input = count("/input_tokens");
    Usage {
        input_tokens: input,
        cached_input_tokens: count("/input_tokens_details/cached_tokens").min(input),
        cache_write_tokens: 0,
        output_tokens: count("/output_tokens"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_become_blocks_in_order() {
        let mut state = Assembly::default();
        for item in [
            json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}], "encrypted_content": "enc"}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]}),
            json!({"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"}),
            json!({"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch"}),
        ] {
            state.item(&item).unwrap();
        }
        let response = state.finish(
            End::Completed,
            Some(&json!({"usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 7}})),
        );
        assert_eq!(
            response.message,
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: "a\n\nb".into(),
                        signature: Some("enc".into())
                    },
                    Block::Text { text: "Hi".into() },
                    Block::ToolCall(ToolCall::new("call_1", "ls", "{}")),
                    Block::ToolCall(ToolCall::new("call_2", "apply_patch", "*** Begin Patch")),
                ]
            }
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 100,
                cached_input_tokens: 60,
                cache_write_tokens: 0,
                output_tokens: 7
            }
        );
        let error = Assembly::default()
            .item(&json!({"type": "function_call", "name": "ls"}))
            .unwrap_err();
        assert!(error.contains("without a call_id"), "{error}");
    }

    #[test]
    fn stream_errors_are_classified() {
        assert!(api_error(&json!({"code": "server_error", "message": "oops"})).is_retryable());
        assert!(
            api_error(&json!({"code": "rate_limit_exceeded", "message": "slow"})).is_retryable()
        );
        let error = api_error(&json!({"code": "invalid_prompt", "message": "bad"}));
        assert!(!error.is_retryable());
        assert!(error.to_string().contains("bad"), "{error}");
    }
}
