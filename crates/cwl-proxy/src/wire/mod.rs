//! Provider wire formats ↔ engine messages.
//!
//! A request's history is a list of wire items (Anthropic messages, Chat
//! Completions messages, Responses input items). The items split into
//! [`Unit`]s: runs of items that turn into engine messages together (an
//! Anthropic user message holding three tool results and a text is one
//! unit of four engine messages; a Responses reasoning item, message item
//! and function call are one unit of one assistant message). The engine's
//! view is mapped back unit by unit ([`render()`]): a unit whose engine
//! messages are all in the view unchanged goes out as the client's own
//! bytes; a unit the engine altered is rebuilt by its format, keeping the
//! client's JSON for every block that survived; residues and the index
//! line become notes.

pub mod anthropic;
pub mod openai_chat;
pub mod openai_responses;
pub mod render;

use std::sync::OnceLock;

use rustc_hash::FxHashMap;
use serde_json::Value;
use serde_json::value::RawValue;

use cwl::{Message, ToolSpec};

use crate::body::Body;

pub use cwl::openai::content_text;
pub use render::{Layout, Mark, render};

/// What the engine holds for opaque reasoning (a thinking signature,
/// `redacted_thinking` data, Responses `encrypted_content`): a short
/// stand-in named by a hash of the ciphertext, not the ciphertext.
///
/// Providers do not bill ciphertext as text, so counting it with the
/// tokenizer (about a token per 1.5 base64 characters) would inflate the
/// engine's count and credit evictions that drop it with tokens the
/// provider never counted; the lab's importers exclude it the same way.
/// The client's bytes still go upstream: altered units are rebuilt by
/// matching engine blocks against blocks converted the same way.
pub fn opaque_stand_in(ciphertext: &str) -> String {
    use std::hash::Hasher;
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write(ciphertext.as_bytes());
    format!("opaque:{:016x}", hasher.finish())
}

/// One wire item as the client sent it: its bytes, parsed only when
/// needed (most items of a request were seen before and go out as bytes).
#[derive(Debug)]
pub struct Item {
    /// The client's JSON, byte for byte.
    pub raw: Box<RawValue>,
    value: OnceLock<Value>,
}

impl Item {
    /// One item from its raw JSON.
    pub fn new(raw: Box<RawValue>) -> Item {
        Item {
            raw,
            value: OnceLock::new(),
        }
    }

    /// One item holding `value`, as its own JSON text.
    pub fn of(value: Value) -> Item {
        let raw = serde_json::value::to_raw_value(&value).expect("a JSON value serializes");
        Item {
            raw,
            value: OnceLock::from(value),
        }
    }

    /// Whether the item was parsed.
    pub fn parsed(&self) -> bool {
        self.value.get().is_some()
    }

    /// The item parsed (valid JSON by construction; `null` only past the
    /// parser's nesting limit, which the raw value shares).
    pub fn value(&self) -> &Value {
        self.value
            .get_or_init(|| serde_json::from_str(self.raw.get()).unwrap_or(Value::Null))
    }

    /// A hash of what the item says, blind to where the client put its
    /// cache breakpoints (`"cache_control":{...}` members, which Claude
    /// Code moves to the latest messages on every request).
    pub fn content_hash(&self) -> u64 {
        let mut rest = self.raw.get();
        let mut kept = String::new();
        while let Some((before, after)) = without_cache_control(rest) {
            kept.push_str(before);
            rest = after;
        }
        let text = if kept.is_empty() {
            rest
        } else {
            kept.push_str(rest);
            &kept
        };
        std::hash::BuildHasher::hash_one(&rustc_hash::FxBuildHasher, text)
    }
}

/// The key of Anthropic's cache breakpoints, quoted as JSON writes it.
const CACHE_CONTROL: &str = "\"cache_control\"";

/// Where `json` first names the key `"cache_control"` from byte `from`:
/// searched for in the whole history on every request, so with SIMD.
fn find_cache_control(json: &str, from: usize) -> Option<usize> {
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(CACHE_CONTROL));
    FINDER.find(&json.as_bytes()[from..]).map(|at| from + at)
}

/// Whether `json` names the key `"cache_control"` anywhere.
pub(crate) fn names_cache_control(json: &str) -> bool {
    find_cache_control(json, 0).is_some()
}

/// The text of `json` before and after its first `"cache_control": {...}`
/// member and the comma that joins it to a neighbour.
fn without_cache_control(json: &str) -> Option<(&str, &str)> {
    let mut search = 0;
    loop {
        let start = find_cache_control(json, search)?;
        search = start + CACHE_CONTROL.len();
        let rest = json[search..].trim_start();
        let Some(value) = rest.strip_prefix(':').map(str::trim_start) else {
            continue;
        };
        if !value.starts_with('{') {
            continue;
        }
        let close = value.find('}')?;
        let mut end = json.len() - value.len() + close + 1;
        let mut from = start;
        let after = json[end..].trim_start();
        if let Some(next) = after.strip_prefix(',') {
            end = json.len() - next.trim_start().len();
        } else if let Some(before) = json[..start].trim_end().strip_suffix(',') {
            from = before.len();
        }
        return Some((&json[..from], &json[end..]));
    }
}

/// Items that turn into engine messages together.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// How many wire items it spans.
    pub items: usize,
    /// The engine messages they make, in order (none for an item the
    /// engine has no use for; it is sent as it came).
    pub messages: Vec<Message>,
}

/// One engine message of a unit that is in the view.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    /// Its position among the unit's engine messages.
    pub index: usize,
    /// The message as the view holds it.
    pub message: &'a Message,
    /// Whether eviction changed it.
    pub altered: bool,
}

/// Tool names by call id, so a result (which names only its call) gets
/// its tool's name; an entry goes when its result comes, so the map holds
/// only calls still waiting.
pub type CallNames = FxHashMap<String, String>;

/// A provider's message format.
pub trait Wire: Send + Sync {
    /// The provider's name for session files (`anthropic`, `openai`).
    fn provider(&self) -> &'static str;

    /// The body field that holds the history (`messages`, `input`).
    fn history_key(&self) -> &'static str;

    /// The system prompt, counted toward the budget but sent in its own
    /// field (so never part of the view sent back), if the body has one.
    fn system(&self, body: &Body) -> Option<String>;

    /// The tool definitions the request offers (they count toward the
    /// budget).
    fn tools(&self, body: &Body) -> Vec<ToolSpec>;

    /// Splits `items` into units (covering every item, in order).
    fn units(&self, items: &[Item], names: &mut CallNames) -> Vec<Unit>;

    /// A unit some of whose engine messages are gone or altered: the wire
    /// items to send instead (none when nothing is left).
    fn rebuild(&self, items: &[Item], parts: &[Part<'_>]) -> Vec<Value>;

    /// Gives a wire item a cache breakpoint (`cache_control`) on its last
    /// block, where the format has them; false when it has none or the
    /// item is already marked.
    fn mark(&self, _item: &mut Value, _control: &Value) -> bool {
        false
    }

    /// A note from the engine (an evicted episode's residue, the index of
    /// folded ones) as a wire item.
    fn note(&self, text: &str) -> Value;

    /// A tool definition in the format's `tools` list (the proxy adds
    /// `recall` this way: see [`crate::recall`]).
    fn tool(&self, spec: &ToolSpec) -> Value;

    /// `item` with the result it holds for call `call_id` answered by
    /// `content` instead (an error when `is_error`, where the format can
    /// say so); `None` when the item holds no result for that call.
    fn answer(&self, item: &Value, call_id: &str, content: &str, is_error: bool) -> Option<Value>;
}

/// The text of an engine note message (residue or index line).
pub fn note_text(message: &Message) -> String {
    match message {
        Message::Assistant { content } => content
            .iter()
            .filter_map(|block| match block {
                cwl::Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Message::System { content } | Message::User { content } => content.clone(),
        Message::ToolResult(result) => result.content.clone(),
    }
}

#[cfg(test)]
mod content_hash_tests {
    use super::Item;

    fn item(json: &str) -> Item {
        Item::new(serde_json::value::RawValue::from_string(json.into()).unwrap())
    }

    #[test]
    fn a_moved_cache_breakpoint_is_no_edit() {
        let plain = item(
            r#"{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]}"#,
        );
        let last = item(
            r#"{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"},"cache_control":{"type":"ephemeral"}}]}"#,
        );
        let first = item(
            r#"{"role":"assistant","content":[{"cache_control":{"type":"ephemeral"},"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]}"#,
        );
        assert_eq!(plain.content_hash(), last.content_hash());
        assert_eq!(plain.content_hash(), first.content_hash());
        let edited = item(
            r#"{"role":"assistant","content":[{"type":"text","text":"b"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]}"#,
        );
        assert_ne!(plain.content_hash(), edited.content_hash());
    }
}
