//! pi coding agent session JSONL (v3 and the earlier header-only shape).
//!
//! Mapping:
//! - `message` entries: `user` → User, `assistant` → Assistant (one model
//!   call each; `text`, `thinking` without its signature, `toolCall` with
//!   its arguments byte for byte), `toolResult` → ToolResult, `bashExecution`
//!   (a command the user ran with `!`) → a User message showing the command
//!   and its output, as pi shows it to the model.
//! - `compaction` → [`Event::Compaction`], keeping the messages from
//!   `firstKeptEntryIndex` (a 0-based line) on; `model_change` sets the model of
//!   later calls; `thinking_level_change`, `label`, `session_info` and
//!   `custom` are ignored.
//! - Usage: pi's `input` excludes cached tokens (`totalTokens = input +
//!   output + cacheRead + cacheWrite`), so `input_tokens = input + cacheRead
//!   + cacheWrite`. An all-zero usage (aborted call) becomes `None`.
//! - `thinkingSignature` is opaque ciphertext the provider checks but does
//!   not count as prompt text: it is dropped so replays do not tokenize it.
//! - An assistant entry with no content blocks (aborted or failed before any
//!   output) is skipped with a warning, and so is one that ended `aborted`
//!   or `error` with partial content: pi leaves such messages out of every
//!   later prompt (the logged prompt sizes of the traces show it).

use ::cwl::{Block, Message, ToolCall, ToolResult, Usage};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::common::{Located, Outcome, Sink, content_text, nonzero, parse_time, time_or_warn};
use super::{Event, Meta};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    timestamp: Option<String>,
    message: Option<PiMessage>,
    model_id: Option<String>,
    summary: Option<String>,
    tokens_before: Option<u64>,
    /// The 0-based line from which a compaction keeps the history.
    first_kept_entry_index: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PiMessage {
    role: String,
    content: Option<Box<RawValue>>,
    model: Option<String>,
    usage: Option<PiUsage>,
    stop_reason: Option<String>,
    error_message: Option<String>,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    is_error: Option<bool>,
    command: Option<String>,
    output: Option<String>,
    exit_code: Option<i64>,
    cancelled: Option<bool>,
    truncated: Option<bool>,
    exclude_from_context: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PiUsage {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    cache_read: u64,
    #[serde(default)]
    cache_write: u64,
    cost: Option<PiCost>,
}

#[derive(Deserialize)]
struct PiCost {
    total: Option<f64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PiBlock {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    thinking: Option<String>,
    id: Option<String>,
    name: Option<String>,
    arguments: Option<Box<RawValue>>,
}

/// Fills `meta` from the `session` header; true once found.
pub(crate) fn scan(meta: &mut Meta, line: &Value) -> bool {
    if line.get("type").and_then(Value::as_str) != Some("session") {
        return false;
    }
    let text = |key: &str| line.get(key).and_then(Value::as_str).map(str::to_string);
    meta.session_id = text("id");
    meta.cwd = text("cwd");
    meta.provider = text("provider");
    meta.model = text("modelId").or_else(|| text("model"));
    meta.started = text("timestamp").as_deref().and_then(parse_time);
    true
}

/// Line parser for pi sessions.
#[derive(Default)]
pub(crate) struct Parser {
    model: Option<String>,
}

impl super::LineParser for Parser {
    fn line(&mut self, line: u64, text: &str, sink: &mut Sink) -> Outcome {
        let at = Some(line);
        let entry: Entry = match serde_json::from_str(text) {
            Ok(entry) => entry,
            Err(e) => return sink.reject(at, format!("not a pi session entry: {e}; skipped")),
        };
        let Some(kind) = entry.kind.as_deref() else {
            return sink.reject(at, "entry has no `type`; skipped");
        };
        match kind {
            "session" => {
                self.model = entry.model_id;
                Outcome::Used
            }
            "model_change" => {
                self.model = entry.model_id;
                Outcome::Used
            }
            "thinking_level_change" | "label" | "session_info" | "custom" => Outcome::Ignored,
            "compaction" => {
                let timestamp = time_or_warn(entry.timestamp.as_deref(), at, sink);
                sink.push(Located {
                    line: at,
                    event: Event::Compaction {
                        timestamp,
                        tokens_before: entry.tokens_before,
                        summary: entry.summary,
                        kept: entry
                            .first_kept_entry_index
                            .map_or(0, |index| sink.messages_from(index + 1)),
                        restored: Vec::new(),
                    },
                });
                Outcome::Used
            }
            "message" => match entry.message {
                Some(message) => {
                    let timestamp = time_or_warn(entry.timestamp.as_deref(), at, sink);
                    self.message(line, message, timestamp, sink)
                }
                None => sink.reject(at, "`message` entry has no `message` object; skipped"),
            },
            other => sink.reject(at, format!("unknown entry type `{other}`; skipped")),
        }
    }

    fn finish(&mut self, _sink: &mut Sink) {}
}

impl Parser {
    fn message(
        &mut self,
        line: u64,
        message: PiMessage,
        timestamp: Option<chrono::DateTime<chrono::Utc>>,
        sink: &mut Sink,
    ) -> Outcome {
        let at = Some(line);
        match message.role.as_str() {
            "user" => match text_of(message.content.as_deref()) {
                Ok(text) => {
                    sink.message(at, Message::user(text), timestamp);
                    Outcome::Used
                }
                Err(e) => sink.reject(at, format!("user message content: {e}; skipped")),
            },
            "toolResult" => {
                let Some(call_id) = message.tool_call_id else {
                    return sink.reject(at, "tool result has no `toolCallId`; skipped");
                };
                let content = match text_of(message.content.as_deref()) {
                    Ok(text) => text,
                    Err(e) => return sink.reject(at, format!("tool result content: {e}; skipped")),
                };
                let result = ToolResult {
                    call_id,
                    tool_name: message.tool_name.unwrap_or_default(),
                    content,
                    is_error: message.is_error.unwrap_or(false),
                };
                sink.message(at, Message::ToolResult(result), timestamp);
                Outcome::Used
            }
            "bashExecution" => {
                if message.exclude_from_context == Some(true) {
                    return Outcome::Ignored;
                }
                sink.message(at, Message::user(bash_execution_text(&message)), timestamp);
                Outcome::Used
            }
            "assistant" => self.assistant(line, message, timestamp, sink),
            other => sink.reject(at, format!("unknown message role `{other}`; skipped")),
        }
    }

    fn assistant(
        &mut self,
        line: u64,
        message: PiMessage,
        timestamp: Option<chrono::DateTime<chrono::Utc>>,
        sink: &mut Sink,
    ) -> Outcome {
        let at = Some(line);
        let blocks: Vec<PiBlock> = match message.content.as_deref() {
            None => Vec::new(),
            Some(raw) => match serde_json::from_str(raw.get()) {
                Ok(blocks) => blocks,
                Err(e) => {
                    return sink.reject(
                        at,
                        format!("assistant content is not a list of blocks: {e}; skipped"),
                    );
                }
            },
        };
        let mut content = Vec::with_capacity(blocks.len());
        for (index, block) in blocks.into_iter().enumerate() {
            match block.kind.as_str() {
                "text" => content.push(Block::Text {
                    text: block.text.unwrap_or_default(),
                }),
                "thinking" => content.push(Block::Reasoning {
                    text: block.thinking.unwrap_or_default(),
                    signature: None,
                }),
                "toolCall" => match (block.id, block.name) {
                    (Some(id), Some(name)) => content.push(Block::ToolCall(ToolCall {
                        id,
                        name,
                        arguments: block
                            .arguments
                            .map_or_else(|| "{}".to_string(), |raw| raw.get().to_string()),
                    })),
                    _ => sink.warn(
                        at,
                        format!(
                            "content[{index}]: tool call without `id` or `name`; block skipped"
                        ),
                    ),
                },
                other => sink.warn(
                    at,
                    format!("content[{index}]: unknown block type `{other}`; block skipped"),
                ),
            }
        }
        let stop = message.stop_reason.as_deref().unwrap_or("unknown");
        let why = message
            .error_message
            .as_deref()
            .map(|e| format!(", error: {e}"))
            .unwrap_or_default();
        if content.is_empty() {
            return sink.reject(
                at,
                format!("assistant message has no content (stop reason `{stop}`{why}); skipped"),
            );
        }
        if matches!(stop, "aborted" | "error") {
            return sink.reject(
                at,
                format!(
                    "assistant message ended `{stop}`{why}; pi never sends it back to the model, skipped"
                ),
            );
        }
        let usage = message.usage.as_ref().and_then(|u| {
            nonzero(Usage {
                input_tokens: u.input + u.cache_read + u.cache_write,
                cached_input_tokens: u.cache_read,
                cache_write_tokens: u.cache_write,
                output_tokens: u.output,
            })
        });
        let cost_usd = message
            .usage
            .as_ref()
            .and_then(|u| u.cost.as_ref())
            .and_then(|c| c.total)
            .filter(|_| usage.is_some());
        sink.push(Located {
            line: at,
            event: Event::Message {
                message: Message::Assistant { content },
                timestamp,
                usage,
                model: message.model.or_else(|| self.model.clone()),
                cost_usd,
            },
        });
        Outcome::Used
    }
}

/// The text of a pi content field: a string or a list of text/image blocks.
fn text_of(content: Option<&RawValue>) -> Result<String, serde_json::Error> {
    match content {
        None => Ok(String::new()),
        Some(raw) => serde_json::from_str::<Value>(raw.get()).map(|v| content_text(&v)),
    }
}

/// How pi shows a user-run shell command to the model.
fn bash_execution_text(message: &PiMessage) -> String {
    let mut text = format!(
        "Ran `{}`\n```\n{}\n```",
        message.command.as_deref().unwrap_or_default(),
        message.output.as_deref().unwrap_or_default().trim_end()
    );
    if message.cancelled == Some(true) {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = message.exit_code.filter(|code| *code != 0) {
        text.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    if message.truncated == Some(true) {
        text.push_str("\n\n[Output truncated]");
    }
    text
}
