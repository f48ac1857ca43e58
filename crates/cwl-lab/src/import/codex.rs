//! OpenAI Codex CLI rollout JSONL (`~/.codex/sessions/.../rollout-*.jsonl`).
//!
//! Mapping (`response_item` payloads):
//! - Consecutive model-output items (`reasoning`, assistant `message`,
//!   `function_call`, `custom_tool_call`, `local_shell_call`) form one
//!   assistant message, i.e. one model call. The call ends at the first
//!   input item (tool output, user or developer message), at a
//!   `token_count` event or at `compacted`; but a call that follows a tool
//!   output with no `token_count`, `turn_context` or input message between
//!   them belongs to the same response (Codex 0.47 to 0.62 log parallel
//!   calls each followed by its output), in logs that record usage, unless
//!   the call's own `token_count` already came after its blocks.
//! - Shell outputs: what the rollout's `cli_version` sent the model
//!   ([`super::codex_output`]: 0.45 to 0.62 logged JSON and sent a text).
//! - `reasoning` → Reasoning with the summary texts. `encrypted_content`
//!   is ciphertext, never counted as text: the block counts as the
//!   call's logged `reasoning_output_tokens` (a filler signature of that
//!   many tokens) or, when the log has none, as nothing, with one warning
//!   per file. `function_call` → ToolCall (arguments as logged);
//!   `custom_tool_call` → ToolCall with arguments `{"input": <text>}`;
//!   `local_shell_call` → ToolCall `local_shell` with the action as
//!   arguments; `*_output` items → ToolResult, paired by `call_id`, marked
//!   as errors when they report a non-zero exit code (JSON
//!   `metadata.exit_code`, or an `Exit code: N` / `Process exited with
//!   code N` header line).
//! - `session_meta` `base_instructions.text` → one System message first:
//!   Codex sends them as the first developer message of every request,
//!   but logs them only there. Older `instructions` (the user's own,
//!   AGENTS.md) likewise, unless the first message holds them (Codex then
//!   sent them as that user message, `# AGENTS.md instructions`).
//! - user messages → User, developer/system messages → System. One logged
//!   between a call's items and its `token_count` (Codex's own warnings)
//!   follows that call without ending it.
//! - `event_msg` `token_count` gives the usage of one call
//!   (`last_token_usage`, else the difference of `total_token_usage`);
//!   `input_tokens` already includes cached ones. It is attached to the
//!   call in progress or just finished when that has none yet, else to the
//!   next call (older Codex versions log it before the call's items). A
//!   count repeated after `turn_context` (same totals) and one with no
//!   tokens (the estimate Codex logs after a compaction) are ignored.
//! - `compacted` → [`Event::Compaction`] with its summary, `tokens_before`
//!   the prompt of the compaction call (its `token_count`, logged just
//!   before, never a conversation call's), and as `restored` what Codex
//!   sent before the summary ([`super::codex_compact`]): the logged
//!   `replacement_history` (newer Codex), else Codex 0.80's rule. The
//!   model call that wrote the summary (the text-only assistant message
//!   just before, whose text the summary holds) is dropped: it is the
//!   harness's compaction request, not a turn of the conversation.
//!   `session_meta`, `turn_context`
//!   (sets the model) and other `event_msg`s (UI copies of messages) carry
//!   nothing else; `world_state` and `token_usage_record` lines (harness
//!   state, a copy of the usage) and `web_search_call` and `ghost_snapshot`
//!   items are ignored.
//! - Rollouts from before the envelope (Codex CLI up to about September
//!   2025) open with a bare header `{"id", "timestamp", "instructions",
//!   "git"}` and write each response item as a whole line, without
//!   `payload`, timestamps or usage: the header is read as `session_meta`
//!   and the items as above. `{"record_type": "state"}` markers (those
//!   rollouts' and, at times, current ones') are bookkeeping.

use ::cwl::{Block, Message, ToolCall, ToolResult, Usage};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::codex_compact::Remembered;
use super::codex_output::Rendering;
use super::common::{
    Draft, Held, Located, Outcome, Sink, content_text, nonzero, parse_time, part_text, time_or_warn,
};
use super::{Event, Meta};

/// Response item types a rollout from before the envelope (Codex CLI up
/// to about September 2025) writes as whole lines, without `payload`.
const BARE_ITEMS: &[&str] = &[
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "web_search_call",
];

/// Whether an untyped line is the session header of a rollout from
/// before the envelope: `{"id", "timestamp", "instructions"?, "git"?}`.
pub(crate) fn is_bare_header(fields: &serde_json::Map<String, Value>) -> bool {
    fields.get("id").is_some_and(Value::is_string)
        && fields.get("timestamp").is_some_and(Value::is_string)
        && (fields.contains_key("instructions") || fields.contains_key("git"))
}

#[derive(Deserialize)]
struct RolloutLine {
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    payload: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: Option<String>,
    role: Option<String>,
    content: Option<Value>,
    summary: Option<Vec<Value>>,
    encrypted_content: Option<String>,
    name: Option<String>,
    arguments: Option<Value>,
    input: Option<String>,
    call_id: Option<String>,
    id: Option<String>,
    output: Option<Value>,
    action: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct EventMsg {
    #[serde(rename = "type")]
    kind: Option<String>,
    info: Option<TokenInfo>,
}

#[derive(Deserialize)]
struct TokenInfo {
    total_token_usage: Option<TokenUsage>,
    last_token_usage: Option<TokenUsage>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
struct TokenUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cached_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    reasoning_output_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Compacted {
    message: Option<String>,
    /// What the history became (newer Codex): response items.
    replacement_history: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct SessionMeta {
    base_instructions: Option<BaseInstructions>,
    instructions: Option<String>,
    /// The Codex CLI version that wrote the rollout.
    cli_version: Option<String>,
    /// Newer rollouts (Codex Desktop) name the model here too.
    model: Option<String>,
}

#[derive(Deserialize)]
struct BaseInstructions {
    text: Option<String>,
}

#[derive(Deserialize)]
struct TurnContext {
    model: Option<String>,
}

/// Fills `meta` from `session_meta`, the first `turn_context` and the
/// first `token_count` that gives the context window; true once all three
/// were seen.
pub(crate) fn scan(meta: &mut Meta, line: &Value) -> bool {
    let payload = line.get("payload");
    let text = |key: &str| {
        payload
            .and_then(|p| p.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match line.get("type").and_then(Value::as_str) {
        None if line.as_object().is_some_and(is_bare_header) => {
            let text = |key: &str| line.get(key).and_then(Value::as_str).map(str::to_string);
            meta.session_id = text("id");
            meta.provider = Some("openai".to_string());
            meta.started = text("timestamp").as_deref().and_then(parse_time);
        }
        Some("session_meta") => {
            meta.session_id = text("id");
            meta.cwd = text("cwd");
            meta.provider = text("model_provider").or_else(|| Some("openai".to_string()));
            if meta.model.is_none() {
                meta.model = text("model");
            }
            meta.client_prompt = payload
                .and_then(|p| p.pointer("/base_instructions/text"))
                .and_then(Value::as_str)
                .is_some_and(|text| !text.is_empty());
            meta.started = text("timestamp")
                .or_else(|| {
                    line.get("timestamp")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .as_deref()
                .and_then(parse_time);
        }
        Some("turn_context") if meta.model.is_none() => meta.model = text("model"),
        Some("event_msg") if meta.window.is_none() => {
            meta.window = payload
                .and_then(|p| p.get("info"))
                .and_then(|info| info.get("model_context_window"))
                .and_then(Value::as_u64)
                .filter(|&window| window > 0);
        }
        _ => {}
    }
    meta.session_id.is_some() && meta.model.is_some() && meta.window.is_some()
}

/// Line parser for Codex rollouts.
#[derive(Default)]
pub(crate) struct Parser {
    held: Held,
    model: Option<String>,
    pending_usage: Option<(Usage, Option<u64>)>,
    last_total: Option<TokenUsage>,
    instructions_sent: bool,
    /// `session_meta.instructions` (the user's instructions), held until
    /// the first item shows whether a user message carries them.
    user_instructions: Option<Located>,
    /// What the writing version sent the model for a logged shell output.
    rendering: Rendering,
    /// The log records usage per call (`token_count`), so a call's end
    /// shows in it.
    seen_usage: bool,
    /// The held call was closed by a tool output and nothing has been
    /// logged since that would start another call (a `token_count`, a
    /// `turn_context`, an input message): a further call belongs to the
    /// same response, as Codex logs parallel calls each with its output.
    continues: bool,
    /// The held call's own `token_count` came after its blocks: it is
    /// complete, and no output makes a further call part of it.
    counted: bool,
    /// The messages a compaction keeps.
    remembered: Remembered,
}

impl super::LineParser for Parser {
    fn line(&mut self, line: u64, text: &str, sink: &mut Sink) -> Outcome {
        let at = Some(line);
        let entry: RolloutLine = match serde_json::from_str(text) {
            Ok(entry) => entry,
            Err(e) => return sink.reject(at, format!("not a Codex rollout line: {e}; skipped")),
        };
        let Some(kind) = entry.kind.as_deref() else {
            return self.untyped(line, text, sink);
        };
        if entry.payload.is_none() && BARE_ITEMS.contains(&kind) {
            return match serde_json::from_str::<Item>(text) {
                Ok(item) => self.item(line, item, None, sink),
                Err(e) => sink.reject(at, format!("{kind} item: {e}; skipped")),
            };
        }
        let payload = entry
            .payload
            .as_deref()
            .map(RawValue::get)
            .unwrap_or("null");
        let timestamp = time_or_warn(entry.timestamp.as_deref(), at, sink);
        match kind {
            "session_meta" => match serde_json::from_str::<SessionMeta>(payload) {
                Ok(meta) => self.session_meta(at, meta, timestamp, sink),
                Err(e) => sink.reject(at, format!("session_meta payload: {e}; skipped")),
            },
            "world_state" | "token_usage_record" => Outcome::Ignored,
            "turn_context" => match serde_json::from_str::<TurnContext>(payload) {
                Ok(context) => {
                    self.continues = false;
                    if context.model.is_some() {
                        self.model = context.model;
                    }
                    Outcome::Used
                }
                Err(e) => sink.reject(at, format!("turn_context payload: {e}; skipped")),
            },
            "response_item" => match serde_json::from_str::<Item>(payload) {
                Ok(item) => self.item(line, item, timestamp, sink),
                Err(e) => sink.reject(at, format!("response_item payload: {e}; skipped")),
            },
            "event_msg" => match serde_json::from_str::<EventMsg>(payload) {
                Ok(event) if event.kind.as_deref() == Some("token_count") => {
                    self.token_count(event.info)
                }
                Ok(_) => Outcome::Ignored,
                Err(e) => sink.reject(at, format!("event_msg payload: {e}; skipped")),
            },
            "compacted" => match serde_json::from_str::<Compacted>(payload) {
                Ok(compacted) => self.compacted(line, compacted, timestamp, sink),
                Err(e) => sink.reject(at, format!("compacted payload: {e}; skipped")),
            },
            other => sink.reject(at, format!("unknown line type `{other}`; skipped")),
        }
    }

    fn finish(&mut self, sink: &mut Sink) {
        self.release_instructions(None, sink);
        self.held.flush(sink);
        if self.held.unpriced_reasoning > 0 {
            sink.warn(
                self.held.first_unpriced,
                format!(
                    "{} encrypted reasoning item(s) without a logged reasoning token count: counted as 0 tokens (the ciphertext is not text)",
                    self.held.unpriced_reasoning
                ),
            );
        }
    }
}

impl Parser {
    /// A line without `type`: a state marker, or the session header of a
    /// rollout from before the envelope.
    fn untyped(&mut self, line: u64, text: &str, sink: &mut Sink) -> Outcome {
        let at = Some(line);
        let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(text) else {
            return sink.reject(at, "line has no `type`; skipped");
        };
        if fields.contains_key("record_type") {
            return Outcome::Ignored;
        }
        if !is_bare_header(&fields) {
            return sink.reject(at, "line has no `type`; skipped");
        }
        let timestamp = fields.get("timestamp").and_then(Value::as_str);
        let timestamp = time_or_warn(timestamp, at, sink);
        match serde_json::from_value::<SessionMeta>(Value::Object(fields)) {
            Ok(meta) => self.session_meta(at, meta, timestamp, sink),
            Err(e) => sink.reject(at, format!("session header: {e}; skipped")),
        }
    }

    /// The session's header: its model, and the instructions it logs,
    /// sent once as the first system message.
    fn session_meta(
        &mut self,
        at: Option<u64>,
        meta: SessionMeta,
        timestamp: Option<DateTime<Utc>>,
        sink: &mut Sink,
    ) -> Outcome {
        if self.model.is_none() {
            self.model = meta.model;
        }
        self.rendering = Rendering::of(meta.cli_version.as_deref());
        if self.instructions_sent {
            return Outcome::Used;
        }
        if let Some(text) = meta.base_instructions.and_then(|b| b.text)
            && !text.is_empty()
        {
            self.instructions_sent = true;
            sink.message(at, Message::system(text), timestamp);
        } else if let Some(text) = meta.instructions.filter(|t| !t.is_empty()) {
            self.instructions_sent = true;
            self.user_instructions = Some(Located::message(at, Message::system(text), timestamp));
        }
        Outcome::Used
    }

    /// Emits the logged user instructions as a system message, unless
    /// `next` (the first message after them) holds them: Codex 0.4x and
    /// later send them as that user message (`# AGENTS.md instructions`,
    /// `<user_instructions>`), which would count them twice.
    fn release_instructions(&mut self, next: Option<&Message>, sink: &mut Sink) {
        let Some(held) = self.user_instructions.take() else {
            return;
        };
        let sent_as_user = match (&held.event, next) {
            (
                Event::Message {
                    message: Message::System { content: text },
                    ..
                },
                Some(Message::User { content }),
            ) => content.contains(text.trim()),
            _ => false,
        };
        if !sent_as_user {
            sink.push(held);
        }
    }

    fn item(
        &mut self,
        line: u64,
        item: Item,
        timestamp: Option<DateTime<Utc>>,
        sink: &mut Sink,
    ) -> Outcome {
        let at = Some(line);
        let kind = item.kind.as_deref().unwrap_or("");
        if kind != "message" {
            self.release_instructions(None, sink);
        }
        let block = match kind {
            "message" => {
                let role = item.role.as_deref().unwrap_or("");
                let content = item.content.as_ref();
                match role {
                    "assistant" => {
                        self.release_instructions(None, sink);
                        let parts: Vec<Block> = match content {
                            Some(Value::Array(parts)) => parts
                                .iter()
                                .map(|part| Block::Text {
                                    text: part_text(part),
                                })
                                .collect(),
                            Some(other) => vec![Block::Text {
                                text: content_text(other),
                            }],
                            None => Vec::new(),
                        };
                        for part in parts {
                            self.push_block(line, part, timestamp, sink);
                        }
                        return Outcome::Used;
                    }
                    "user" | "developer" | "system" => {
                        let text = content.map(content_text).unwrap_or_default();
                        let message = if role == "user" {
                            Message::user(text)
                        } else {
                            Message::system(text)
                        };
                        self.input_message(at, message, timestamp, sink);
                        return Outcome::Used;
                    }
                    other => {
                        return sink
                            .reject(at, format!("message with unknown role `{other}`; skipped"));
                    }
                }
            }
            "reasoning" => {
                let summary: Vec<String> = item
                    .summary
                    .iter()
                    .flatten()
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect();
                let block = Block::Reasoning {
                    text: summary.join("\n\n"),
                    signature: None,
                };
                self.push_block(line, block, timestamp, sink);
                if item.encrypted_content.is_some_and(|c| !c.is_empty())
                    && let Some(draft) = self.held.draft.as_mut()
                {
                    draft.opaque_reasoning += 1;
                }
                return Outcome::Used;
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let Some(id) = item.call_id.or(item.id) else {
                    return sink.reject(at, format!("{kind} has no `call_id`; skipped"));
                };
                let (name, arguments) = match kind {
                    "function_call" => (
                        item.name,
                        match item.arguments {
                            Some(Value::String(arguments)) => arguments,
                            Some(other) => other.to_string(),
                            None => "{}".to_string(),
                        },
                    ),
                    "custom_tool_call" => (
                        item.name,
                        serde_json::json!({ "input": item.input.unwrap_or_default() }).to_string(),
                    ),
                    _ => (
                        Some("local_shell".to_string()),
                        item.action
                            .map_or_else(|| "{}".to_string(), |raw| raw.get().to_string()),
                    ),
                };
                let Some(name) = name else {
                    return sink.reject(at, format!("{kind} has no `name`; skipped"));
                };
                Block::ToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                })
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                let Some(call_id) = item.call_id else {
                    return sink.reject(at, format!("{kind} has no `call_id`; skipped"));
                };
                if let Some(draft) = self.held.draft.as_mut() {
                    draft.open = false;
                    self.continues = self.seen_usage && !self.counted;
                }
                let (content, is_error) = output_text(item.output.as_ref());
                let content = self.rendering.sent(&content).unwrap_or(content);
                let result = Located::message(
                    at,
                    Message::ToolResult(ToolResult {
                        call_id,
                        tool_name: String::new(),
                        content,
                        is_error,
                    }),
                    timestamp,
                );
                self.held.result(result, sink);
                return Outcome::Used;
            }
            "web_search_call" | "ghost_snapshot" => return Outcome::Ignored,
            other => {
                return sink.reject(at, format!("unknown response item type `{other}`; skipped"));
            }
        };
        self.push_block(line, block, timestamp, sink);
        Outcome::Used
    }

    /// Adds a model-output block to the call in progress, starting a new
    /// call when none is open.
    fn push_block(
        &mut self,
        line: u64,
        block: Block,
        timestamp: Option<DateTime<Utc>>,
        sink: &mut Sink,
    ) {
        if std::mem::take(&mut self.continues)
            && let Some(draft) = self.held.draft.as_mut()
        {
            draft.open = true;
        }
        let open = self.held.draft.as_ref().is_some_and(|d| d.open);
        if !open {
            self.held.flush(sink);
            self.counted = false;
            let (usage, reasoning_tokens) = self.pending_usage.take().unzip();
            self.held.draft = Some(Draft {
                line,
                open: true,
                timestamp,
                usage,
                reasoning_tokens: reasoning_tokens.flatten(),
                model: self.model.clone(),
                ..Draft::default()
            });
        }
        if let Some(draft) = self.held.draft.as_mut() {
            draft.blocks.push(block);
        }
    }

    /// A user or developer message. One logged between a call's items and
    /// its `token_count` (Codex's own warnings, such as "apply_patch was
    /// requested via shell_command") waits behind that call, which it does
    /// not end for its usage; any other ends the call in progress.
    fn input_message(
        &mut self,
        at: Option<u64>,
        message: Message,
        timestamp: Option<DateTime<Utc>>,
        sink: &mut Sink,
    ) {
        self.release_instructions(Some(&message), sink);
        self.continues = false;
        self.remembered.emitted(&message);
        let uncounted = self.seen_usage
            && self
                .held
                .draft
                .as_ref()
                .is_some_and(|d| d.open && d.usage.is_none());
        if !uncounted {
            self.held.flush(sink);
            sink.message(at, message, timestamp);
            return;
        }
        if let Some(draft) = self.held.draft.as_mut() {
            draft.open = false;
        }
        let item = Located::message(at, message, timestamp);
        self.held.result(item, sink);
    }

    /// A compaction: the summary, and what Codex sent before it in place
    /// of the history. The call that wrote the summary is dropped, and its
    /// `token_count` (logged just before) is the prompt before the
    /// compaction, not any conversation call's.
    fn compacted(
        &mut self,
        line: u64,
        compacted: Compacted,
        timestamp: Option<DateTime<Utc>>,
        sink: &mut Sink,
    ) -> Outcome {
        let summary = compacted.message.filter(|s| !s.trim().is_empty());
        if let Some(summary) = &summary
            && self.held.draft.as_ref().is_some_and(|d| wrote(d, summary))
        {
            self.held.draft = None;
        }
        self.held.flush(sink);
        let tokens_before = self.pending_usage.take().map(|(u, _)| u.input_tokens);
        self.continues = false;
        let restored = match compacted.replacement_history {
            Some(items) => {
                let (mut history, skipped) = replacement(&items);
                if skipped > 0 {
                    sink.warn(
                        Some(line),
                        format!("compacted: {skipped} replacement item(s) other than messages (opaque compaction summaries, tool items) not counted"),
                    );
                }
                self.remembered.replaced(&history);
                if let (Some(Message::User { content }), Some(summary)) = (history.last(), &summary)
                    && content.trim() == summary.trim()
                {
                    history.pop();
                }
                history
            }
            None => self.remembered.rebuilt(),
        };
        sink.push(Located {
            line: Some(line),
            event: Event::Compaction {
                timestamp,
                tokens_before,
                summary,
                kept: 0,
                restored,
            },
        });
        Outcome::Used
    }

    fn token_count(&mut self, info: Option<TokenInfo>) -> Outcome {
        let Some(info) = info else {
            return Outcome::Ignored;
        };
        let total = info.total_token_usage;
        if total.is_some() && total == self.last_total {
            return Outcome::Ignored;
        }
        let last = match (info.last_token_usage, total, self.last_total) {
            (Some(last), _, _) => Some(last),
            (None, Some(total), Some(before)) => Some(TokenUsage {
                input_tokens: total.input_tokens.saturating_sub(before.input_tokens),
                cached_input_tokens: total
                    .cached_input_tokens
                    .saturating_sub(before.cached_input_tokens),
                output_tokens: total.output_tokens.saturating_sub(before.output_tokens),
                reasoning_output_tokens: total
                    .reasoning_output_tokens
                    .zip(before.reasoning_output_tokens)
                    .map(|(t, b)| t.saturating_sub(b)),
            }),
            (None, total, _) => total,
        };
        if total.is_some() {
            self.last_total = total;
        }
        self.seen_usage = true;
        self.continues = false;
        let Some((usage, reasoning)) = last.and_then(|u| {
            nonzero(Usage {
                input_tokens: u.input_tokens,
                cached_input_tokens: u.cached_input_tokens,
                cache_write_tokens: 0,
                output_tokens: u.output_tokens,
            })
            .map(|usage| (usage, u.reasoning_output_tokens))
        }) else {
            return Outcome::Ignored;
        };
        match self.held.draft.as_mut() {
            Some(draft) if draft.usage.is_none() => {
                draft.usage = Some(usage);
                draft.reasoning_tokens = reasoning;
                draft.open = false;
                self.counted = true;
            }
            _ => self.pending_usage = Some((usage, reasoning)),
        }
        Outcome::Used
    }
}

/// The messages of a logged `replacement_history` (user and developer
/// messages, mapped as message items are), and how many other items it
/// held.
fn replacement(items: &[Value]) -> (Vec<Message>, usize) {
    let mut messages = Vec::new();
    let mut skipped = 0;
    for item in items {
        let role = item.get("role").and_then(Value::as_str);
        let is_message = item.get("type").and_then(Value::as_str) == Some("message");
        let text = || item.get("content").map(content_text).unwrap_or_default();
        match role.filter(|_| is_message) {
            Some("user") => messages.push(Message::user(text())),
            Some("developer" | "system") => messages.push(Message::system(text())),
            _ => skipped += 1,
        }
    }
    (messages, skipped)
}

/// Whether `draft` is the compaction call that wrote `summary`: text only,
/// and its text is in the summary.
fn wrote(draft: &Draft, summary: &str) -> bool {
    let mut texts = draft.blocks.iter().map(|block| match block {
        Block::Text { text } => Some(text.trim()),
        _ => None,
    });
    texts.all(|text| text.is_some_and(|t| !t.is_empty() && summary.contains(t)))
        && !draft.blocks.is_empty()
}

/// The text of a tool output and whether it reports a failure.
fn output_text(output: Option<&Value>) -> (String, bool) {
    let text = match output {
        None => String::new(),
        Some(Value::Object(fields)) => match fields.get("content") {
            Some(content) => content_text(content),
            None => Value::Object(fields.clone()).to_string(),
        },
        Some(other) => content_text(other),
    };
    let failed = exit_code(&text).is_some_and(|code| code != 0);
    (text, failed)
}

/// The exit code a tool output reports: JSON `metadata.exit_code` (older
/// `shell`), or a header line before `Output:`, `Exit code: N` (`shell`,
/// `shell_command`, `apply_patch`) or `Process exited with code N`
/// (`exec_command`).
fn exit_code(text: &str) -> Option<i64> {
    if text.starts_with('{') {
        return serde_json::from_str::<Value>(text)
            .ok()?
            .pointer("/metadata/exit_code")?
            .as_i64();
    }
    text.lines()
        .take_while(|line| *line != "Output:")
        .take(8)
        .find_map(|line| {
            line.strip_prefix("Exit code: ")
                .or_else(|| line.strip_prefix("Process exited with code "))
        })
        .and_then(|code| code.trim().parse().ok())
}
