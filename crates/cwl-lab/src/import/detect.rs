//! Detects a log's format from its content, never from its file name.
//!
//! JSONL formats are told apart by the first line that only one of them
//! writes (corrupt or ambiguous lines are passed over). A file whose first
//! line starts a JSON value that continues on later lines, and that has no
//! such line, is one JSON document (as is a one-line object with
//! `messages`); documents are told apart by their top-level keys.

use std::path::Path;

use serde_json::Value;

use super::common::read_utf8;
use super::lines::LineReader;
use super::{Format, ImportError, codex};

/// How many lines detection reads at most before giving up.
const DETECT_LINES: u64 = 64;

/// Claude Code line types that carry no message.
const CLAUDE_BOOKKEEPING: &[&str] = &[
    "queue-operation",
    "progress",
    "file-history-snapshot",
    "ai-title",
    "last-prompt",
    "pr-link",
    "summary",
];

/// Detects the format of the log at `path` from its content.
pub fn detect(path: &Path) -> Result<Format, ImportError> {
    let unknown = |why: String| ImportError::UnknownFormat {
        path: path.to_path_buf(),
        why,
    };
    let mut reader = LineReader::open(path)?;
    let mut first: Option<String> = None;
    let mut starts_document = false;
    while reader.line_number() < DETECT_LINES {
        let next = reader.next_line().map_err(|source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let Some((_, bytes)) = next else {
            break;
        };
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text.trim(),
            Err(e) if first.is_none() => {
                return Err(ImportError::NotUtf8 {
                    path: path.to_path_buf(),
                    offset: reader.line_offset() + e.valid_up_to() as u64,
                });
            }
            Err(_) => continue,
        };
        if text.is_empty() {
            continue;
        }
        let is_first = first.is_none();
        if is_first {
            first = Some(text.chars().take(80).collect());
            if text.starts_with('[') {
                return document(path);
            }
        }
        match serde_json::from_str::<Value>(text) {
            Ok(value) if value.get("messages").is_some() && is_first => {
                return classify_document(&value).map_err(unknown);
            }
            Ok(value) => {
                if let Some(format) = classify_line(&value) {
                    return Ok(format);
                }
            }
            Err(e) if is_first && e.is_eof() && text.starts_with('{') => starts_document = true,
            Err(_) => {}
        }
    }
    if starts_document {
        return document(path);
    }
    match first {
        None => Err(ImportError::Empty {
            path: path.to_path_buf(),
        }),
        Some(first) => Err(unknown(format!(
            "no line among the first {DETECT_LINES} identifies a format (first line starts `{first}`)"
        ))),
    }
}

/// Reads and classifies a whole-document file.
fn document(path: &Path) -> Result<Format, ImportError> {
    let text = read_utf8(path)?;
    let value: Value = serde_json::from_str(&text).map_err(|e| ImportError::UnknownFormat {
        path: path.to_path_buf(),
        why: format!("starts like a JSON document but is not valid JSON: {e}"),
    })?;
    classify_document(&value).map_err(|why| ImportError::UnknownFormat {
        path: path.to_path_buf(),
        why,
    })
}

/// The format of a whole JSON document.
fn classify_document(value: &Value) -> Result<Format, String> {
    match value {
        Value::Array(items) if items.iter().all(|m| m.get("role").is_some()) => Ok(Format::OpenAi),
        Value::Array(_) => Err("a JSON array that is not a list of chat messages".into()),
        Value::Object(fields) => {
            if !fields.get("messages").is_some_and(Value::is_array) {
                return Err("a JSON document without a `messages` array".into());
            }
            let mini = fields
                .get("trajectory_format")
                .and_then(Value::as_str)
                .is_some_and(|f| f.starts_with("mini-swe-agent"))
                || value.pointer("/info/config/agent").is_some();
            Ok(if mini {
                Format::MiniSweAgent
            } else {
                Format::OpenAi
            })
        }
        _ => Err("a JSON value that is neither an object nor an array".into()),
    }
}

/// The format a single JSONL line belongs to, when only one format writes it.
fn classify_line(value: &Value) -> Option<Format> {
    let has = |key: &str| value.get(key).is_some();
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        let codex = has("record_type") || value.as_object().is_some_and(codex::is_bare_header);
        return codex.then_some(Format::Codex);
    };
    match kind {
        "session" if has("budget") => Some(Format::Cwl),
        "session" => Some(Format::Pi),
        "enforce" | "calibrate" | "note" => Some(Format::Cwl),
        "model_change" | "thinking_level_change" | "compaction" => Some(Format::Pi),
        "session_meta" | "response_item" | "turn_context" | "event_msg" | "compacted"
            if has("payload") =>
        {
            Some(Format::Codex)
        }
        "user" | "assistant" | "system" if has("uuid") || has("sessionId") || has("parentUuid") => {
            Some(Format::ClaudeCode)
        }
        kind if CLAUDE_BOOKKEEPING.contains(&kind) => Some(Format::ClaudeCode),
        "message" => match value.pointer("/message/role").and_then(Value::as_str)? {
            "toolResult" | "bashExecution" => Some(Format::Pi),
            "tool_result" => Some(Format::Cwl),
            _ => None,
        },
        _ => None,
    }
}
