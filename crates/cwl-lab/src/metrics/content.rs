//! Content retention: does a request still hold the content the reply
//! relies on, in text the log wrote?
//!
//! A reply (the logged assistant message of a model call) *relies on*:
//! - the lines it must match verbatim: every line of an edit's old text
//!   (the string values of keys `old_text`, `oldText`, `old_string`,
//!   `oldString`, `old_str`, at any depth, so MultiEdit's `edits` count)
//!   and the context (` `) and removed (`-`) lines of a patch (an
//!   `apply_patch` envelope, `*** Begin Patch`, or a unified diff hunk
//!   after `@@`), in any string of its tool-call arguments;
//! - the values it quotes that it could only have read in a tool output:
//!   anchors ([`super::anchors`]) in its text or call arguments that had
//!   appeared earlier in the transcript only inside tool results (never in
//!   a user, system or assistant message).
//!
//! Lines are compared after normalization ([`line_key`]): surrounding
//! whitespace and a line-number gutter (`  12\t`, `12→`, `12:`,
//! `path:12:`) are removed, and only lines of at least [`MIN_LINE`]
//! characters count, so `}` or `*/` never decide anything. A line or value
//! is *at risk* when it appeared earlier in the transcript (a line the
//! model types without ever having seen it is not lost by any policy), and
//! *lost* when no message of the request carries it in logged text.
//!
//! Logged text is what the log wrote. Text a policy writes — the engine's
//! residues (`[evicted expl episode …]`), masking placeholders, folded
//! pointers, a modeled compaction summary — never carries content, even
//! when it repeats a path or a name: echoing names cannot game the metric.
//! A rewrite that drops blocks of a logged message carries the blocks it
//! kept verbatim ([`crate::transcript::Lab::derived`]).
//!
//! `content_loss_free_share` is the share of requests with anything at
//! risk that lost nothing.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use cwl::{Block, Message};
use serde_json::Value;

use super::anchors::{AnchorId, Scope, message_texts};
use crate::transcript::Shown;

/// A normalized line, hashed.
pub type LineKey = u64;

/// Shortest line, in characters after normalization, that counts.
pub const MIN_LINE: usize = 10;

/// Keys of an edit's old text in tool-call arguments.
const OLD_TEXT_KEYS: &[&str] = &["old_text", "oldText", "old_string", "oldString", "old_str"];

/// The key of `line`, or `None` when it is too short to identify content.
pub fn line_key(line: &str) -> Option<LineKey> {
    let line = strip_gutter(line.trim()).trim();
    if line.chars().count() < MIN_LINE {
        return None;
    }
    let mut h = DefaultHasher::new();
    line.hash(&mut h);
    Some(h.finish())
}

/// `line` without a leading line number (`12\t`, `12→`, `12:`, `12|`) or
/// grep location (`path:12:`, `path:12-`).
fn strip_gutter(line: &str) -> &str {
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        let rest = &line[digits..];
        for sep in ['\t', '→', ':', '|'] {
            if let Some(after) = rest.strip_prefix(sep) {
                return after;
            }
        }
        return line;
    }
    let Some(colon) = line.find(':') else {
        return line;
    };
    let (path, rest) = (&line[..colon], &line[colon + 1..]);
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if path.is_empty() || path.contains(char::is_whitespace) || digits == 0 {
        return line;
    }
    let rest = &rest[digits..];
    rest.strip_prefix(':')
        .or_else(|| rest.strip_prefix('-'))
        .unwrap_or(line)
}

/// The sorted, deduplicated line keys of everything `message` shows.
pub fn message_lines(message: &Message) -> Vec<LineKey> {
    let mut keys = Vec::new();
    message_texts(message, Scope::All, &mut |text| {
        keys.extend(text.lines().filter_map(line_key));
    });
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The sorted, deduplicated keys of the lines `reply`'s tool calls must
/// match verbatim: edits' old texts and patches' context and removed lines.
pub fn relied_lines(reply: &Message) -> Vec<LineKey> {
    let mut keys = Vec::new();
    if let Message::Assistant { content } = reply {
        for block in content {
            if let Block::ToolCall(call) = block {
                match serde_json::from_str::<Value>(&call.arguments) {
                    Ok(value) => walk(&value, false, &mut keys),
                    Err(_) => patch_lines(&call.arguments, &mut keys),
                }
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn walk(value: &Value, old_text: bool, keys: &mut Vec<LineKey>) {
    match value {
        Value::String(s) if old_text => keys.extend(s.lines().filter_map(line_key)),
        Value::String(s) => patch_lines(s, keys),
        Value::Array(items) => items.iter().for_each(|v| walk(v, old_text, keys)),
        Value::Object(map) => {
            for (key, v) in map {
                walk(v, OLD_TEXT_KEYS.contains(&key.as_str()), keys);
            }
        }
        _ => {}
    }
}

/// Context and removed lines of the patches in `text`: inside an
/// `*** Update File:` section of an `apply_patch` envelope, or after a
/// unified diff's `@@` hunk header.
fn patch_lines(text: &str, keys: &mut Vec<LineKey>) {
    if !text.contains("*** Begin Patch") && !text.contains("\n@@") && !text.starts_with("@@") {
        return;
    }
    let mut in_hunk = false;
    for line in text.lines() {
        if line.starts_with("*** Update File:") || line.starts_with("@@") {
            in_hunk = true;
            continue;
        }
        if line.starts_with("***") || line.starts_with("diff ") || line.starts_with("--- ") {
            in_hunk = false;
            continue;
        }
        if !in_hunk {
            continue;
        }
        if let Some(rest) = line.strip_prefix(' ').or_else(|| line.strip_prefix('-')) {
            keys.extend(line_key(rest));
        }
    }
}

/// What the transcript so far has shown: normalized lines, and the anchors
/// that appeared outside tool outputs.
#[derive(Debug, Default)]
pub struct Seen {
    lines: HashSet<LineKey>,
    outside_tools: HashSet<AnchorId>,
}

impl Seen {
    /// Records a logged message's anchors and lines.
    pub fn note(&mut self, anchors: &[AnchorId], lines: &[LineKey], in_tool_output: bool) {
        self.lines.extend(lines.iter().copied());
        if !in_tool_output {
            self.outside_tools.extend(anchors.iter().copied());
        }
    }

    /// Whether the line appeared earlier.
    pub fn has_line(&self, key: LineKey) -> bool {
        self.lines.contains(&key)
    }

    /// Whether the anchor appeared earlier outside tool outputs.
    pub fn outside_tools(&self, anchor: AnchorId) -> bool {
        self.outside_tools.contains(&anchor)
    }
}

/// The content one reply relies on that appeared earlier: the same for
/// every policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Need {
    /// Lines its edits and patches must match.
    pub lines: Vec<LineKey>,
    /// Values it quotes that appeared earlier only in tool outputs.
    pub anchors: Vec<AnchorId>,
}

impl Need {
    /// What `reply` relies on, given the anchors it used that appeared
    /// earlier (`used_seen`) and what the transcript showed before it.
    pub fn of(reply: &Message, used_seen: &[AnchorId], seen: &Seen) -> Need {
        Need {
            lines: relied_lines(reply)
                .into_iter()
                .filter(|k| seen.has_line(*k))
                .collect(),
            anchors: used_seen
                .iter()
                .copied()
                .filter(|a| !seen.outside_tools(*a))
                .collect(),
        }
    }

    /// Lines and values at risk.
    pub fn len(&self) -> usize {
        self.lines.len() + self.anchors.len()
    }

    /// Whether nothing is at risk.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The lines and values no piece of the request, as the model saw it,
    /// carries in logged text.
    pub fn missing(&self, pieces: &[Shown<'_>]) -> Need {
        let mut missing = self.clone();
        for piece in pieces.iter().rev() {
            if missing.is_empty() {
                break;
            }
            missing.lines.retain(|k| !piece.keeps_line(*k));
            missing.anchors.retain(|a| !piece.keeps_anchor(*a));
        }
        missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::ToolCall;

    fn key(s: &str) -> LineKey {
        line_key(s).unwrap()
    }

    fn call(name: &str, args: &str) -> Message {
        Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new("c1", name, args))],
        }
    }

    #[test]
    fn normalizes_gutters_and_skips_short_lines() {
        let want = key("let total = compute(x);");
        for line in [
            "   let total = compute(x);  ",
            "    12\tlet total = compute(x);",
            "12→let total = compute(x);",
            "src/a.rs:12:let total = compute(x);",
            "src/a.rs:12-let total = compute(x);",
        ] {
            assert_eq!(line_key(line), Some(want), "{line:?}");
        }
        assert_eq!(line_key("    }"), None);
        assert_eq!(line_key("1: short"), None);
        assert_ne!(
            key("a: let total = compute(x);"),
            want,
            "a word is no gutter"
        );
    }

    #[test]
    fn edits_old_texts_at_any_depth() {
        let edit = call(
            "Edit",
            r#"{"file_path":"a.rs","old_string":"fn alpha_value() {\n}","new_string":"fn beta_value() {}"}"#,
        );
        assert_eq!(relied_lines(&edit), vec![key("fn alpha_value() {")]);
        let multi = call(
            "MultiEdit",
            r#"{"file_path":"a.rs","edits":[{"old_string":"let first_one = 1;","new_string":"x"},{"oldText":"let second_one = 2;","newText":"y"}]}"#,
        );
        let mut want = vec![key("let first_one = 1;"), key("let second_one = 2;")];
        want.sort_unstable();
        assert_eq!(relied_lines(&multi), want);
        let write = call(
            "Write",
            r#"{"file_path":"a.rs","content":"let first_one = 1;"}"#,
        );
        assert!(relied_lines(&write).is_empty(), "new text is not relied on");
    }

    #[test]
    fn patch_context_and_removed_lines() {
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@ fn main\n let kept_context = 1;\n-let removed_line = 2;\n+let added_line = 3;\n*** Add File: b.rs\n+let brand_new_line = 4;\n*** End Patch";
        let mut want = vec![key("let kept_context = 1;"), key("let removed_line = 2;")];
        want.sort_unstable();
        let args = serde_json::json!({ "input": patch }).to_string();
        assert_eq!(relied_lines(&call("apply_patch", &args)), want);
        assert_eq!(relied_lines(&call("apply_patch", patch)), want, "raw input");
        let shell = serde_json::json!({ "command": ["bash", "-lc", format!("apply_patch <<'EOF'\n{patch}\nEOF")] }).to_string();
        assert_eq!(relied_lines(&call("shell", &shell)), want);
    }
}
