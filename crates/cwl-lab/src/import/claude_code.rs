//! Claude Code session JSONL (`~/.claude/projects/<project>/<uuid>.jsonl`).
//!
//! Mapping:
//! - One API response is often split over several `assistant` lines that
//!   share `message.id`, with tool results interleaved; those lines are
//!   merged into one assistant message (one model call) and its results are
//!   emitted after it. The usage of the last line of the call is kept.
//! - `tool_result` blocks in `user` lines → ToolResult messages; other
//!   blocks of a `user` line (text, images) → user text. Consecutive user
//!   texts and the attachments that follow them form one User message, as
//!   in the request Claude Code sends.
//! - `attachment` lines (see `claude_attachment`): a queued prompt is user
//!   text; context the model saw (an @-mentioned file, hook output,
//!   reminders) joins the pending user turn or, mid-turn, the last tool
//!   result (Claude Code sends it inside that result's content); with
//!   neither, it becomes a System message.
//! - Blocks: `text` → Text, `thinking` → Reasoning with its text,
//!   `redacted_thinking` → empty Reasoning, `tool_use` → ToolCall (input
//!   kept byte for byte). Signatures and redacted data are opaque and not
//!   what the model reads, so they are dropped rather than counted.
//! - `system` lines with subtype `compact_boundary` → [`Event::Compaction`]
//!   (`compactMetadata.preTokens`), whose summary is the next `user` line
//!   (`isCompactSummary`): the summary is the compaction's text, never a
//!   user turn. The context attachments between the summary and the next
//!   user or assistant line are the harness restoring what the compaction
//!   dropped (files read before it, listings): they are the compaction's
//!   `restored` messages, never history (the replayed history holds those
//!   files already). Claude Code before 2.1 logs none of them (and 1.0
//!   no boundary either, only the summary): what it re-read is modeled
//!   from the log's Read, Write, Edit and TodoWrite calls
//!   ([`super::claude_restore`]). Other `system` lines, sidechain lines
//!   (sub-agents) in a main transcript (a sub-agent's own file,
//!   `subagents/agent-*.jsonl`, whose lines are all sidechain, is read as
//!   a session), bookkeeping types, repeated `uuid`s and `<synthetic>`
//!   assistant messages (written by Claude Code, not by a model) are
//!   ignored.
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

use super::claude_attachment::{self, Attachment};
use super::claude_restore::Files;
use super::common::{
    Draft, Held, Located, Outcome, Sink, content_text, nonzero, parse_time, time_or_warn,
};
use super::{Event, Meta};

/// Line types that carry nothing for the transcript.
const BOOKKEEPING: &[&str] = &[
    "queue-operation",
    "progress",
    "file-history-snapshot",
    "attribution-snapshot",
    "ai-title",
    "custom-title",
    "last-prompt",
    "pr-link",
    "frame-link",
    "summary",
    "tag",
    "ended-by-model",
    "relocated",
    "agent-name",
    "agent-color",
    "agent-setting",
    "bridge-session",
    "speculation-accept",
    "mode",
    "permission-mode",
    "isolation-latch",
    "worktree-state",
    "marble-origami-commit",
    "marble-origami-snapshot",
    "marble-origami-reset",
    "content-replacement",
    "fork-context-ref",
    "atis-latch",
    "api-request",
    "api-request-blob",
    "api-request-shape",
    "tools-used",
    "cost-state",
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
    attachment: Option<Value>,
    rendered: Option<Value>,
    is_compact_summary: Option<bool>,
    /// The Claude Code version that wrote the line.
    version: Option<String>,
    /// What a tool returned, as structured data (a Read's file extent).
    tool_use_result: Option<Box<RawValue>>,
}

/// The part of a Read's `toolUseResult` that tells the file's length.
#[derive(Deserialize)]
struct ReadExtent {
    file: Option<FileExtent>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileExtent {
    total_lines: Option<usize>,
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

/// User text not yet emitted: consecutive user lines and the attachments
/// that follow them form one user turn, as in the request.
struct PendingUser {
    line: u64,
    timestamp: Option<DateTime<Utc>>,
    texts: Vec<String>,
}

/// A compaction waiting for what the harness restored with its summary.
struct Restoring {
    compaction: Located,
    /// Whether the version that wrote it logs no restored context (before
    /// 2.1), which is then modeled ([`Files`]).
    unlogged: bool,
}

/// Whether Claude Code `version` (`2.0.77`) logs the context it restores
/// after a compaction: 2.1 and later do; unknown versions are taken as
/// older.
fn logs_restored(version: Option<&str>) -> bool {
    let mut parts = version.unwrap_or("").split('.').map(str::parse::<u64>);
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= (2, 1),
        _ => false,
    }
}

/// Line parser for Claude Code sessions.
#[derive(Default)]
pub(crate) struct Parser {
    held: Held,
    seen: HashSet<String>,
    user: Option<PendingUser>,
    /// A compaction boundary waiting for its summary (the next line).
    compaction: Option<Located>,
    /// Set from a compaction summary to the next user or assistant line:
    /// the attachments there are the harness re-injecting context (files
    /// it had read, listings) into the compacted conversation.
    after_summary: bool,
    /// A compaction with its summary, gathering the attachments logged
    /// after it; emitted at the next line of another kind.
    restoring: Option<Restoring>,
    /// The files (and todo list) Claude Code before 2.1 restores, unlogged.
    files: Files,
    /// The file length the current line's `toolUseResult` reports.
    total_lines: Option<usize>,
    /// Whether the file is a sub-agent's own transcript: its first
    /// transcript line is a sidechain one.
    sidechain_file: Option<bool>,
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
        if !matches!(kind, "user" | "assistant" | "system" | "attachment") {
            return sink.reject(at, format!("unknown line type `{kind}`; skipped"));
        }
        let sidechain = entry.is_sidechain.unwrap_or(false);
        if sidechain != *self.sidechain_file.get_or_insert(sidechain) {
            return Outcome::Ignored;
        }
        if let Some(uuid) = &entry.uuid
            && !self.seen.insert(uuid.clone())
        {
            return Outcome::Ignored;
        }
        let timestamp = time_or_warn(entry.timestamp.as_deref(), at, sink);
        if kind != "attachment" {
            self.end_restoring(sink);
        }
        self.total_lines = entry
            .tool_use_result
            .as_deref()
            .and_then(|raw| serde_json::from_str::<ReadExtent>(raw.get()).ok())
            .and_then(|extent| extent.file?.total_lines);
        if entry.is_compact_summary == Some(true) {
            let unlogged = !logs_restored(entry.version.as_deref());
            return self.summary(line, entry.message, timestamp, unlogged, sink);
        }
        if let Some(boundary) = self.compaction.take() {
            sink.push(boundary);
        }
        if matches!(kind, "user" | "assistant") {
            self.after_summary = false;
        }
        match kind {
            "system" => {
                if entry.subtype.as_deref() != Some("compact_boundary") {
                    return Outcome::Ignored;
                }
                self.flush(sink);
                self.compaction = Some(Located {
                    line: at,
                    event: Event::Compaction {
                        timestamp,
                        tokens_before: entry.compact_metadata.and_then(|m| m.pre_tokens),
                        summary: None,
                        kept: 0,
                        restored: Vec::new(),
                    },
                });
                Outcome::Used
            }
            "attachment" => match entry.attachment {
                Some(attachment) => {
                    let rendered = entry.rendered.as_ref();
                    self.attachment(line, &attachment, rendered, timestamp, sink)
                }
                None => sink.reject(at, "attachment line has no `attachment`; skipped"),
            },
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
        self.flush(sink);
        self.end_restoring(sink);
        if let Some(boundary) = self.compaction.take() {
            sink.push(boundary);
        }
    }
}

impl Parser {
    /// Emits the held assistant message and its results, then any pending
    /// user turn.
    fn flush(&mut self, sink: &mut Sink) {
        self.held.flush(sink);
        if let Some(user) = self.user.take() {
            sink.message(
                Some(user.line),
                Message::user(user.texts.join("\n")),
                user.timestamp,
            );
        }
    }

    /// Adds user text to the pending user turn, starting one if needed.
    fn user_text(
        &mut self,
        line: u64,
        text: String,
        timestamp: Option<DateTime<Utc>>,
        sink: &mut Sink,
    ) {
        if self.user.is_none() {
            self.held.flush(sink);
        }
        self.user
            .get_or_insert_with(|| PendingUser {
                line,
                timestamp,
                texts: Vec::new(),
            })
            .texts
            .push(text);
    }

    /// A summary written by a compaction: the text of its boundary event,
    /// never a user turn.
    fn summary(
        &mut self,
        line: u64,
        message: Option<CcMessage>,
        timestamp: Option<DateTime<Utc>>,
        unlogged: bool,
        sink: &mut Sink,
    ) -> Outcome {
        let text = match message.map(|m| parse_content(m.content.as_deref())) {
            Some(Ok(Content::Text(text))) => text,
            Some(Ok(Content::Blocks(blocks))) => blocks
                .into_iter()
                .filter_map(|b| b.text)
                .collect::<Vec<_>>()
                .join("\n"),
            Some(Err(e)) => {
                return sink.reject(Some(line), format!("summary content: {e}; skipped"));
            }
            None => String::new(),
        };
        self.flush(sink);
        let mut boundary = self.compaction.take().unwrap_or(Located {
            line: Some(line),
            event: Event::Compaction {
                timestamp,
                tokens_before: None,
                summary: None,
                kept: 0,
                restored: Vec::new(),
            },
        });
        if let Event::Compaction { summary, .. } = &mut boundary.event {
            *summary = Some(text);
        }
        self.restoring = Some(Restoring {
            compaction: boundary,
            unlogged,
        });
        self.after_summary = true;
        Outcome::Used
    }

    /// Emits the compaction waiting for its restored context: the
    /// attachments logged after its summary or, for a version that logs
    /// none, the files and todo list it re-read.
    fn end_restoring(&mut self, sink: &mut Sink) {
        let Some(Restoring {
            mut compaction,
            unlogged,
        }) = self.restoring.take()
        else {
            return;
        };
        if let Event::Compaction { restored, .. } = &mut compaction.event
            && restored.is_empty()
            && unlogged
        {
            *restored = self.files.restored();
        }
        sink.push(compaction);
    }

    fn attachment(
        &mut self,
        line: u64,
        attachment: &Value,
        rendered: Option<&Value>,
        timestamp: Option<DateTime<Utc>>,
        sink: &mut Sink,
    ) -> Outcome {
        match claude_attachment::read(attachment, rendered) {
            Attachment::Nothing => Outcome::Ignored,
            Attachment::Context(text) if self.after_summary => {
                match self.restoring.as_mut().map(|r| &mut r.compaction.event) {
                    Some(Event::Compaction { restored, .. }) => {
                        restored.push(Message::user(text));
                        Outcome::Used
                    }
                    _ => Outcome::Ignored,
                }
            }
            Attachment::Prompt(text) => {
                self.user_text(line, text, timestamp, sink);
                Outcome::Used
            }
            Attachment::Context(text) => {
                if let Some(user) = self.user.as_mut() {
                    user.texts.push(text);
                } else if !self.held.append_to_last_result(&text) {
                    let item = Located::message(Some(line), Message::system(text), timestamp);
                    self.held.result(item, sink);
                }
                Outcome::Used
            }
        }
    }

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
            self.flush(sink);
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
                    signature: None,
                }),
                "redacted_thinking" => draft.blocks.push(Block::Reasoning {
                    text: String::new(),
                    signature: None,
                }),
                "tool_use" => match (block.id, block.name) {
                    (Some(id), Some(name)) => {
                        let arguments = block
                            .input
                            .map_or_else(|| "{}".to_string(), |raw| raw.get().to_string());
                        self.files.call(&id, &name, &arguments);
                        draft.blocks.push(Block::ToolCall(ToolCall {
                            id,
                            name,
                            arguments,
                        }));
                    }
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
                self.user_text(line, text, timestamp, sink);
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
            if self.user.is_some() {
                self.flush(sink);
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
            self.files.result(
                &result.call_id,
                &result.content,
                result.is_error,
                self.total_lines,
            );
            let item = Located::message(at, Message::ToolResult(result), timestamp);
            self.held.result(item, sink);
        }
        if !texts.is_empty() {
            self.user_text(line, texts.join("\n"), timestamp, sink);
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
            id: None,
            name: None,
            input: None,
            tool_use_id: None,
            content: None,
            is_error: None,
        }
    }
}
