//! mini-swe-agent trajectories (`*.traj.json`): `{info, messages,
//! trajectory_format, instance_id?}`.
//!
//! mini-swe-agent has no tool calls: the action is the one ```` ```bash ````
//! block of an assistant message and the next user message is its
//! observation. Mapping:
//! - An assistant message with exactly one bash block (found as
//!   mini-swe-agent finds it) → Assistant with the rest of its text as a
//!   Text block (the thought) and a synthetic ToolCall `bash`
//!   `{"command": ...}` with id `mswe-<n>` (n counts actions from 1); the
//!   next user message → its ToolResult, an error when its `<returncode>`
//!   is non-zero.
//! - An assistant message with zero or several blocks (the agent rejects
//!   it) → Assistant with its text only; the next user message (the format
//!   error) stays a User message.
//! - Other system and user messages stay as they are.
//! - Usage, model, cost and timestamp come from `extra.response` (OpenAI
//!   style: `prompt_tokens` includes cached ones). Provider reasoning kept in
//!   `extra` is not part of the transcript (the agent never sent it back).

use std::sync::LazyLock;

use ::cwl::{Block, Message, ToolCall, ToolResult, Usage};
use chrono::DateTime;
use regex::Regex;
use serde_json::{Value, json};

use super::common::{Located, Outcome, Sink, content_text, nonzero};
use super::{Event, Meta, Stats};

/// The action pattern of mini-swe-agent (`action_regex` of its default config).
static ACTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?s)```bash\s*\n(.*?)\n```").expect("the action pattern is valid")
});

static RETURN_CODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"<returncode>\s*(-?\d+)\s*</returncode>").expect("the return code pattern is valid")
});

/// Imports a whole trajectory; `Err` when it is not one at all.
pub(crate) fn import(
    doc: &Value,
    meta: &mut Meta,
    sink: &mut Sink,
    stats: &mut Stats,
) -> Result<(), String> {
    let Some(messages) = doc.get("messages").and_then(Value::as_array) else {
        return Err("no `messages` array".into());
    };
    meta.session_id = doc
        .get("instance_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    meta.model = doc
        .pointer("/info/config/model/model_name")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut actions = 0u64;
    let mut pending: Option<(String, String)> = None;
    for (index, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str);
        let Some(content) = message.get("content") else {
            stats.count_record(
                sink.reject(None, format!("messages[{index}]: no `content`; skipped")),
            );
            continue;
        };
        let content = content_text(content);
        let outcome = match role {
            Some("system") => {
                pending = None;
                sink.message(None, Message::system(content), None);
                Outcome::Used
            }
            Some("user") => {
                match pending.take() {
                    Some((id, name)) => {
                        let is_error = RETURN_CODE
                            .captures(&content)
                            .and_then(|c| c[1].parse::<i64>().ok())
                            .is_some_and(|code| code != 0);
                        let result = ToolResult {
                            call_id: id,
                            tool_name: name,
                            content,
                            is_error,
                        };
                        sink.message(None, Message::ToolResult(result), None);
                    }
                    None => sink.message(None, Message::user(content), None),
                }
                Outcome::Used
            }
            Some("assistant") => {
                pending = None;
                let mut blocks = Vec::new();
                let found: Vec<_> = ACTION.captures_iter(&content).collect();
                let action = match found.as_slice() {
                    [only] => only.get(0).zip(only.get(1)),
                    _ => None,
                };
                if let Some((whole, command)) = action {
                    let thought =
                        format!("{}{}", &content[..whole.start()], &content[whole.end()..]);
                    let thought = thought.trim();
                    if !thought.is_empty() {
                        blocks.push(Block::Text {
                            text: thought.to_string(),
                        });
                    }
                    actions += 1;
                    let id = format!("mswe-{actions}");
                    blocks.push(Block::ToolCall(ToolCall::new(
                        id.clone(),
                        "bash",
                        json!({ "command": command.as_str() }).to_string(),
                    )));
                    pending = Some((id, "bash".to_string()));
                } else if !content.is_empty() {
                    blocks.push(Block::Text { text: content });
                }
                if blocks.is_empty() {
                    sink.reject(
                        None,
                        format!("messages[{index}]: empty assistant message; skipped"),
                    )
                } else {
                    push_assistant(sink, blocks, message.pointer("/extra/response"), meta);
                    Outcome::Used
                }
            }
            Some(other) => sink.reject(
                None,
                format!("messages[{index}]: unknown role `{other}`; skipped"),
            ),
            None => sink.reject(None, format!("messages[{index}]: no `role`; skipped")),
        };
        stats.count_record(outcome);
    }
    Ok(())
}

fn push_assistant(sink: &mut Sink, blocks: Vec<Block>, response: Option<&Value>, meta: &Meta) {
    let number = |pointer: &str| {
        response
            .and_then(|r| r.pointer(pointer))
            .and_then(Value::as_u64)
    };
    let usage = nonzero(Usage {
        input_tokens: number("/usage/prompt_tokens").unwrap_or(0),
        cached_input_tokens: number("/usage/prompt_tokens_details/cached_tokens").unwrap_or(0),
        cache_write_tokens: 0,
        output_tokens: number("/usage/completion_tokens").unwrap_or(0),
    });
    let model = response
        .and_then(|r| r.get("model"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| meta.model.clone());
    let timestamp =
        number("/created").and_then(|secs| DateTime::from_timestamp(i64::try_from(secs).ok()?, 0));
    let cost_usd = response
        .and_then(|r| r.pointer("/usage/cost"))
        .and_then(Value::as_f64);
    sink.push(Located {
        line: None,
        event: Event::Message {
            message: Message::Assistant { content: blocks },
            timestamp,
            usage,
            model,
            cost_usd,
        },
    });
}
