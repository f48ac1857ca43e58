//! Claude Code session JSONL (`~/.claude/projects/<project>/<uuid>.jsonl`).
//!
//! Mapping:
//! - One API response is often split over several `assistant` lines that
//!   share `message.id`, with tool results interleaved; those lines are
//!   merged into one assistant message (one model call) and its results are
//!   emitted after it. The usage of the last line of the call is kept.
//! - `tool_result` blocks in `user` lines → ToolResult messages; other
//!   blocks of a `user` line (text, images) → one User message after them.
//! - Blocks: `text` → Text, `thinking` → Reasoning with its signature,
//!   `redacted_thinking` → Reasoning with empty text and the data as
//!   signature, `tool_use` → ToolCall (input kept byte for byte).
//! - `system` lines with subtype `compact_boundary` → [`Event::Compaction`]
//!   (`compactMetadata.preTokens`); the summary arrives as the next user
//!   message. Other `system` lines, sidechain lines (sub-agents),
//!   bookkeeping types, repeated `uuid`s and `<synthetic>` assistant
//!   messages (written by Claude Code, not by a model) are ignored.
//! - Usage: `input_tokens = input_tokens + cache_creation_input_tokens +
//!   cache_read_input_tokens` (Anthropic reports them apart).
//! - Lines are taken in file order; branches left by rewinding a
//!   conversation are not resolved through `parentUuid`.

use std::collections::HashSet;

use ::cwl::{Block, Message, ToolCall, ToolResult, Usage};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::common::{
    Draft, Held, Located, Outcome, Sink, content_text, nonzero, parse_time, time_or_warn,
};
use super::{Event, Meta};

/// Line types that carry nothing for the transcript.
const BOOKKEEPING: &[&str] = &[
    "queue-operation",
    "progress",
    "file-history-snapshot",
    "ai-title",
    "last-prompt",
    "pr-link",
    "summary",
    "custom-title",
    "tag",
];

/// The model name Claude Code gives messages it wrote itself.
const SYNTHETIC_MODEL: &str = "<synthetic>";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CcLine {
    #[serde(rename = "type")]
    kind: Option<String>,
    subtype: Option<String>,
    uuid: Option<String>,
    is_sidechain: Option<bool>,
    timestamp: Option<String>,
    message: Option<CcMessage>,
    compact_metadata: Option<CompactMetadata>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactMetadata {
    pre_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CcMessage {
    id: Option<String>,
    model: Option<String>,
    content: Option<Box<RawValue>>,
    usage: Option<CcUsage>,
}

#[derive(Deserialize)]
struct CcUsage {
    input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CcBlock {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
    data: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Box<RawValue>>,
    tool_use_id: Option<String>,
    content: Option<Value>,
    is_error: Option<bool>,
}

/// Message content: a plain string or a list of blocks.
enum Content {
    Text(String),
    Blocks(Vec<CcBlock>),
}

fn parse_content(raw: Option<&RawValue>) -> Result<Content, serde_json::Error> {
    let Some(raw) = raw else {
        return Ok(Content::Blocks(Vec::new()));
    };
    if raw.get().trim_start().starts_with('"') {
        serde_json::from_str(raw.get()).map(Content::Text)
    } else {
        serde_json::from_str(raw.get()).map(Content::Blocks)
    }
}

/// Fills `meta` from the first lines; true once the model is known.
pub(crate) fn scan(meta: &mut Meta, line: &Value) -> bool {
    let text = |key: &str| line.get(key).and_then(Value::as_str).map(str::to_string);
    if line.get("isSidechain").and_then(Value::as_bool) == Some(true) {
        return false;
    }
    meta.provider.get_or_insert_with(|| "anthropic".to_string());
    if meta.session_id.is_none() {
        meta.session_id = text("sessionId");
    }
    if meta.cwd.is_none() {
        meta.cwd = text("cwd");
    }
    if meta.started.is_none() {
        meta.started = text("timestamp").as_deref().and_then(parse_time);
    }
    if text("type").as_deref() == Some("assistant")
        && let Some(model) = line.pointer("/message/model").and_then(Value::as_str)
        && model != SYNTHETIC_MODEL
    {
        meta.model = Some(model.to_string());
    }
    meta.model.is_some()
}

/// Line parser for Claude Code sessions.
#[derive(Default)]
pub(crate) struct Parser {
    held: Held,
    seen: HashSet<String>,
}

impl super::LineParser for Parser {
    fn line(&mut self, line: u64, text: &str, sink: &mut Sink) -> Outcome {
        let at = Some(line);
        let entry: CcLine = match serde_json::from_str(text) {
            Ok(entry) => entry,
            Err(e) => {
                return sink.reject(at, format!("not a Claude Code session line: {e}; skipped"));
            }
        };
        let Some(kind) = entry.kind.as_deref() else {
            return sink.reject(at, "line has no `type`; skipped");
        };
        if BOOKKEEPING.contains(&kind) {
            return Outcome::Ignored;
        }
        if !matches!(kind, "user" | "assistant" | "system") {
            return sink.reject(at, format!("unknown line type `{kind}`; skipped"));
        }
        if entry.is_sidechain == Some(true) {
            return Outcome::Ignored;
        }
        if let Some(uuid) = &entry.uuid
            && !self.seen.insert(uuid.clone())
        {
            return Outcome::Ignored;
        }
        let timestamp = time_or_warn(entry.timestamp.as_deref(), at, sink);
        match kind {
            "system" => {
                if entry.subtype.as_deref() != Some("compact_boundary") {
                    return Outcome::Ignored;
                }
                self.held.flush(sink);
                sink.push(Located {
                    line: at,
                    event: Event::Compaction {
                        timestamp,
                        tokens_before: entry.compact_metadata.and_then(|m| m.pre_tokens),
                        summary: None,
                    },
                });
                Outcome::Used
            }
            "assistant" => match entry.message {
                Some(message) => self.assistant(line, message, timestamp, sink),
                None => sink.reject(at, "assistant line has no `message`; skipped"),
            },
            _ => match entry.message {
                Some(message) => self.user(line, message, timestamp, sink),
                None => sink.reject(at, "user line has no `message`; skipped"),
            },
        }
    }

    fn finish(&mut self, sink: &mut Sink) {
        self.held.flush(sink);
    }
}

impl Parser {
    fn assistant(
        &mut self,
        line: u64,
        message: CcMessage,
        timestamp: Option<DateTime<Utc>>,
        sink: &mut Sink,
    ) -> Outcome {
        let at = Some(line);
        if message.model.as_deref() == Some(SYNTHETIC_MODEL) {
            return Outcome::Ignored;
        }
        let blocks = match parse_content(message.content.as_deref()) {
            Ok(Content::Blocks(blocks)) => blocks,
            Ok(Content::Text(text)) => vec![CcBlock::text(text)],
            Err(e) => return sink.reject(at, format!("assistant content: {e}; skipped")),
        };
        let same_call = matches!(
            (&self.held.draft, &message.id),
            (Some(draft), Some(id)) if draft.key.as_ref() == Some(id)
        );
        if !same_call {
            self.held.flush(sink);
            self.held.draft = Some(Draft {
                line,
                key: message.id.clone(),
                open: true,
                timestamp,
                ..Draft::default()
            });
        }
        let Some(draft) = self.held.draft.as_mut() else {
            return Outcome::Used;
        };
        if message.model.is_some() {
            draft.model = message.model;
        }
        if let Some(usage) = message.usage {
            let read = usage.cache_read_input_tokens.unwrap_or(0);
            let written = usage.cache_creation_input_tokens.unwrap_or(0);
            draft.usage = nonzero(Usage {
                input_tokens: usage.input_tokens.unwrap_or(0) + read + written,
                cached_input_tokens: read,
                cache_write_tokens: written,
                output_tokens: usage.output_tokens.unwrap_or(0),
            })
            .or(draft.usage);
        }
        for (index, block) in blocks.into_iter().enumerate() {
            match block.kind.as_str() {
                "text" => draft.blocks.push(Block::Text {
                    text: block.text.unwrap_or_default(),
                }),
                "thinking" => draft.blocks.push(Block::Reasoning {
                    text: block.thinking.unwrap_or_default(),
                    signature: block.signature.filter(|s| !s.is_empty()),
                }),
                "redacted_thinking" => draft.blocks.push(Block::Reasoning {
                    text: String::new(),
                    signature: block.data,
                }),
                "tool_use" => match (block.id, block.name) {
                    (Some(id), Some(name)) => draft.blocks.push(Block::ToolCall(ToolCall {
                        id,
                        name,
                        arguments: block
                            .input
                            .map_or_else(|| "{}".to_string(), |raw| raw.get().to_string()),
                    })),
                    _ => sink.warn(
                        at,
                        format!("content[{index}]: tool_use without `id` or `name`; block skipped"),
                    ),
                },
                other => sink.warn(
                    at,
                    format!("content[{index}]: unsupported block type `{other}`; block skipped"),
                ),
            }
        }
        Outcome::Used
    }

    fn user(
        &mut self,
        line: u64,
        message: CcMessage,
        timestamp: Option<DateTime<Utc>>,
        sink: &mut Sink,
    ) -> Outcome {
        let at = Some(line);
        let blocks = match parse_content(message.content.as_deref()) {
            Ok(Content::Text(text)) => {
                self.held.flush(sink);
                sink.message(at, Message::user(text), timestamp);
                return Outcome::Used;
            }
            Ok(Content::Blocks(blocks)) => blocks,
            Err(e) => return sink.reject(at, format!("user content: {e}; skipped")),
        };
        let mut texts = Vec::new();
        for (index, block) in blocks.into_iter().enumerate() {
            if block.kind != "tool_result" {
                texts.push(match block.kind.as_str() {
                    "text" => block.text.unwrap_or_default(),
                    "image" => "[image]".to_string(),
                    other => format!("[{other}]"),
                });
                continue;
            }
            let Some(call_id) = block.tool_use_id else {
                sink.warn(
                    at,
                    format!("content[{index}]: tool_result without `tool_use_id`; block skipped"),
                );
                continue;
            };
            let result = ToolResult {
                call_id,
                tool_name: String::new(),
                content: block.content.as_ref().map(content_text).unwrap_or_default(),
                is_error: block.is_error.unwrap_or(false),
            };
            let item = Located {
                line: at,
                event: Event::Message {
                    message: Message::ToolResult(result),
                    timestamp,
                    usage: None,
                    model: None,
                    cost_usd: None,
                },
            };
            self.held.result(item, sink);
        }
        if !texts.is_empty() {
            self.held.flush(sink);
            sink.message(at, Message::user(texts.join("\n")), timestamp);
        }
        Outcome::Used
    }
}

impl CcBlock {
    fn text(text: String) -> Self {
        CcBlock {
            kind: "text".into(),
            text: Some(text),
            thinking: None,
            signature: None,
            data: None,
            id: None,
            name: None,
            input: None,
            tool_use_id: None,
            content: None,
            is_error: None,
        }
    }
}
