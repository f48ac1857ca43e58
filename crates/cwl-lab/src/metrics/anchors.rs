//! Reference anchors: the exact strings a later turn may need verbatim —
//! paths, identifiers, URLs, long numbers, hashes.
//!
//! An anchor the model writes (in its text or tool-call arguments) that
//! had appeared earlier in the transcript but is absent from the request a
//! policy built is a *lost* anchor: an LLM-free analogue of the Self-GC
//! paper's "no-impact" judgment, which asks whether exact paths, URLs, ids
//! and values a future turn needs are still in the retained context.
//!
//! Extraction is purely lexical and deterministic. Every pattern is run on
//! its own, so overlapping anchors are all kept (`src/foo_bar.rs` yields the
//! path, the file name and the identifier `foo_bar`); both sides of the
//! comparison are extracted the same way.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use cwl::{Block, Message};
use regex::Regex;

/// A dense id for an interned anchor string.
pub type AnchorId = u32;

/// URLs.
static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"https?://[^\s"'<>()\[\]{}`]+[^\s"'<>()\[\]{}`.,;:!?]"#).unwrap()
});
/// Slash-separated paths (kept when they have two slashes or a file extension).
static PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:[A-Za-z0-9_.~@+-]+/)+[A-Za-z0-9_.@+-]*[A-Za-z0-9_]").unwrap());
/// File names with an extension.
static FILE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[A-Za-z0-9_-]{2,}\.[A-Za-z][A-Za-z0-9]{0,4}\b").unwrap());
/// Code identifiers: snake_case, camelCase, PascalCase with two humps, `a::b` paths.
static IDENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\b[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+\b",
        r"|\b[A-Za-z_][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]\b",
        r"|\b[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*\b",
        r"|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b",
    ))
    .unwrap()
});
/// Numbers of five digits or more.
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b[0-9]{5,}\b").unwrap());
/// Hex hashes (7–64 hex digits, with both a digit and a letter) and UUIDs.
static HASH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b|\b[0-9a-f]{7,64}\b")
        .unwrap()
});

/// Calls `found` with every anchor in `text`, duplicates included.
pub fn scan(text: &str, found: &mut impl FnMut(&str)) {
    for m in URL.find_iter(text) {
        found(m.as_str());
    }
    // The other patterns match ASCII alone and see any other character only
    // through `\b`: they run on a copy where every non-word character
    // outside ASCII is spaces, which matches at the same offsets and keeps
    // the regex engine on its fast path (Unicode `\b` sends it to a slower
    // one at the first byte outside ASCII).
    let masked = ascii_masked(text);
    let at = |m: regex::Match<'_>| &text[m.range()];
    for m in PATH.find_iter(&masked) {
        let path = at(m).trim_start_matches("./");
        let slashes = path.matches('/').count();
        let last = path.rsplit('/').next().unwrap_or("");
        if path.len() >= 4 && (slashes >= 2 || last.contains('.')) {
            found(path);
        }
    }
    for m in FILE.find_iter(&masked) {
        found(at(m));
    }
    for m in IDENT.find_iter(&masked) {
        if m.len() >= 4 {
            found(at(m));
        }
    }
    for m in NUMBER.find_iter(&masked) {
        found(at(m));
    }
    for m in HASH.find_iter(&masked) {
        let s = at(m);
        let mixed = s.contains('-')
            || (s.bytes().any(|b| b.is_ascii_digit())
                && s.bytes().any(|b| b.is_ascii_alphabetic()));
        if mixed {
            found(s);
        }
    }
}

/// `text` with each character outside ASCII that is no word character (an
/// arrow, a box-drawing line, an emoji) replaced by as many spaces as it
/// has bytes: no pattern but [`URL`] matches either, and `\b` sees both as
/// non-word, so the ASCII patterns find the same matches at the same
/// offsets in it.
fn ascii_masked(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    let mut masked = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() || regex_syntax::is_word_character(c) {
            masked.push(c);
        } else {
            masked.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    }
    Cow::Owned(masked)
}

/// Which parts of a message to read anchors from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Everything the message shows the model (for what a request holds).
    All,
    /// What the model itself wrote: assistant text and tool-call arguments
    /// (for what a turn *uses*). Reasoning is excluded.
    Used,
}

/// Calls `text` with each piece of text of `message` within `scope`.
/// Tool-call arguments are decoded from JSON so escapes do not glue words.
pub fn message_texts(message: &Message, scope: Scope, text: &mut impl FnMut(&str)) {
    match message {
        Message::System { content } | Message::User { content } => {
            if scope == Scope::All {
                text(content)
            }
        }
        Message::ToolResult(result) => {
            if scope == Scope::All {
                text(&result.content)
            }
        }
        Message::Assistant { content } => {
            for block in content {
                match block {
                    Block::Text { text: t } => text(t),
                    Block::Reasoning { text: t, .. } => {
                        if scope == Scope::All {
                            text(t)
                        }
                    }
                    Block::ToolCall(call) => json_strings(&call.arguments, text),
                }
            }
        }
    }
}

/// The string values of a JSON document, or the raw text when it is not JSON.
fn json_strings(raw: &str, text: &mut impl FnMut(&str)) {
    fn walk(value: &serde_json::Value, text: &mut impl FnMut(&str)) {
        match value {
            serde_json::Value::String(s) => text(s),
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, text)),
            serde_json::Value::Object(map) => map.values().for_each(|v| walk(v, text)),
            _ => {}
        }
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(value) => walk(&value, text),
        Err(_) => text(raw),
    }
}

/// Interns anchor strings into dense ids and remembers which were seen,
/// and when last.
#[derive(Debug, Default)]
pub struct AnchorTable {
    ids: HashMap<Box<str>, AnchorId>,
    names: Vec<Box<str>>,
    /// Per anchor: the model calls made before it last appeared.
    seen: Vec<Option<u64>>,
    /// The anchors of messages already read, by the identity of what
    /// [`message_texts`] reads in them: a replay shows every policy the
    /// same messages, and interning is append-only, so they do not change.
    extracted: HashMap<(Scope, u64), Vec<AnchorId>>,
}

/// The identity of what [`message_texts`] reads in `message` within
/// `scope` (SipHash with fixed keys over its texts and raw arguments).
fn message_key(message: &Message, scope: Scope) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::hash::DefaultHasher::new();
    let mut part = |tag: u8, text: &str| {
        tag.hash(&mut hasher);
        text.hash(&mut hasher);
    };
    match message {
        Message::System { content } => part(0, content),
        Message::User { content } => part(1, content),
        Message::ToolResult(result) => part(2, &result.content),
        Message::Assistant { content } => {
            for block in content {
                match block {
                    Block::Text { text } => part(3, text),
                    Block::Reasoning { text, .. } if scope == Scope::All => part(4, text),
                    Block::Reasoning { .. } => part(5, ""),
                    Block::ToolCall(call) => part(6, &call.arguments),
                }
            }
        }
    }
    hasher.finish()
}

impl AnchorTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `anchor`, interning it on first sight.
    pub fn intern(&mut self, anchor: &str) -> AnchorId {
        if let Some(&id) = self.ids.get(anchor) {
            return id;
        }
        let id = AnchorId::try_from(self.ids.len()).unwrap_or(AnchorId::MAX);
        self.ids.insert(anchor.into(), id);
        self.names.push(anchor.into());
        self.seen.push(None);
        id
    }

    /// The string interned as `id` (empty for an id this table never gave).
    /// Ids follow the order of first sight, which depends on every policy
    /// replayed; anything drawn per anchor must key on the string.
    pub fn name(&self, id: AnchorId) -> &str {
        self.names.get(id as usize).map_or("", |name| name)
    }

    /// The sorted, deduplicated anchor ids of `message` within `scope`.
    pub fn extract(&mut self, message: &Message, scope: Scope) -> Vec<AnchorId> {
        let key = (scope, message_key(message, scope));
        if let Some(ids) = self.extracted.get(&key) {
            return ids.clone();
        }
        let mut ids = Vec::new();
        message_texts(message, scope, &mut |text| {
            scan(text, &mut |anchor| ids.push(self.intern(anchor)))
        });
        ids.sort_unstable();
        ids.dedup();
        self.extracted.insert(key, ids.clone());
        ids
    }

    /// Records that these anchors have appeared in the transcript, after
    /// `calls` model calls.
    pub fn mark_seen(&mut self, ids: &[AnchorId], calls: u64) {
        for &id in ids {
            if let Some(seen) = self.seen.get_mut(id as usize) {
                *seen = Some(calls);
            }
        }
    }

    /// Whether the anchor appeared earlier in the transcript.
    pub fn was_seen(&self, id: AnchorId) -> bool {
        self.last_seen(id).is_some()
    }

    /// How many model calls had been made when the anchor last appeared
    /// (0: before the first), if it has.
    pub fn last_seen(&self, id: AnchorId) -> Option<u64> {
        self.seen.get(id as usize).copied().flatten()
    }

    /// Number of distinct anchors interned.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no anchor was interned yet.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchors(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        scan(text, &mut |a| out.push(a.to_string()));
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn finds_paths_identifiers_urls_numbers_hashes() {
        let found = anchors(
            "See src/lib/foo_bar.rs and https://example.com/a/b?x=1. \
             Call parseBudget or HashMap::new; pid 123456; commit 3fa9c1e; id 8f14e45f-ceea-467f-a0e6-6f1c7f9e2b3a",
        );
        for want in [
            "src/lib/foo_bar.rs",
            "foo_bar.rs",
            "foo_bar",
            "https://example.com/a/b?x=1",
            "parseBudget",
            "HashMap::new",
            "123456",
            "3fa9c1e",
            "8f14e45f-ceea-467f-a0e6-6f1c7f9e2b3a",
        ] {
            assert!(
                found.iter().any(|f| f == want),
                "missing {want} in {found:?}"
            );
        }
    }

    #[test]
    fn ignores_prose() {
        assert!(anchors("The quick brown fox and/or the lazy dog, e.g. in 2024.").is_empty());
        assert!(
            anchors("deadbeef").is_empty(),
            "hex without digits is a word"
        );
    }

    #[test]
    fn strips_leading_dot_slash_and_trailing_period() {
        let found = anchors("open ./src/main.rs.");
        assert!(found.contains(&"src/main.rs".to_string()), "{found:?}");
        assert!(!found.iter().any(|f| f.ends_with('.')), "{found:?}");
    }

    #[test]
    fn used_scope_reads_text_and_arguments_only() {
        let mut table = AnchorTable::new();
        let message = Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "think about hidden_name".into(),
                    signature: None,
                },
                Block::Text {
                    text: "editing visible_name".into(),
                },
                Block::ToolCall(cwl::ToolCall::new(
                    "c1",
                    "read",
                    r#"{"path":"src/a/b.rs\nnext_line"}"#,
                )),
            ],
        };
        let used = table.extract(&message, Scope::Used);
        let all = table.extract(&message, Scope::All);
        let hidden = table.intern("hidden_name");
        assert!(!used.contains(&hidden));
        assert!(all.contains(&hidden));
        assert!(
            used.contains(&table.intern("next_line")),
            "JSON escapes are decoded"
        );
        assert!(used.contains(&table.intern("src/a/b.rs")));
    }

    #[test]
    fn seen_marks_are_kept() {
        let mut table = AnchorTable::new();
        let id = table.intern("foo_bar");
        assert!(!table.was_seen(id));
        table.mark_seen(&[id], 3);
        assert!(table.was_seen(id));
        assert_eq!(table.last_seen(id), Some(3));
        table.mark_seen(&[id], 7);
        assert_eq!(table.last_seen(id), Some(7), "the latest sight");
        assert_eq!(table.intern("foo_bar"), id);
        assert_eq!(table.len(), 1);
    }

    /// Every anchor in order, each pattern on `text` itself: what [`scan`]
    /// must give for any text.
    fn unmasked(text: &str) -> Vec<String> {
        let mut out: Vec<String> = URL.find_iter(text).map(|m| m.as_str().into()).collect();
        for m in PATH.find_iter(text) {
            let path = m.as_str().trim_start_matches("./");
            let slashes = path.matches('/').count();
            let last = path.rsplit('/').next().unwrap_or("");
            if path.len() >= 4 && (slashes >= 2 || last.contains('.')) {
                out.push(path.into());
            }
        }
        out.extend(FILE.find_iter(text).map(|m| m.as_str().into()));
        out.extend(
            IDENT
                .find_iter(text)
                .filter(|m| m.len() >= 4)
                .map(|m| m.as_str().into()),
        );
        out.extend(NUMBER.find_iter(text).map(|m| m.as_str().into()));
        for m in HASH.find_iter(text) {
            let s = m.as_str();
            let mixed = s.contains('-')
                || (s.bytes().any(|b| b.is_ascii_digit())
                    && s.bytes().any(|b| b.is_ascii_alphabetic()));
            if mixed {
                out.push(s.into());
            }
        }
        out
    }

    fn scanned(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        scan(text, &mut |a| out.push(a.to_string()));
        out
    }

    #[test]
    fn masking_keeps_matches_beside_symbols_and_letters_outside_ascii() {
        for text in [
            "     1→import src/foo_bar.rs\n     2→x = 12345→abc1234f",
            "café_table→fooBar ééé12345 naïve_name src/ü/x.rs",
            "─┬─ a1b2c3d4e ─ 🙂foo_bar🙂 𝔘nicode_x https://x.io/→/a",
        ] {
            assert_eq!(scanned(text), unmasked(text), "{text}");
        }
    }

    proptest::proptest! {
        #[test]
        fn masking_never_changes_what_is_found(
            text in "([a-zA-Z0-9_./:~@+-]{0,12}[ \n→é─🙂ü𝔘̈\u{200d}]){0,12}"
        ) {
            proptest::prop_assert_eq!(scanned(&text), unmasked(&text));
        }
    }
}
