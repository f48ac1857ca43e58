//! Token accounting: how many tokens a piece of the prompt costs.
//!
//! Counting sits behind [`TokenCounter`] so harnesses can plug in the
//! tokenizer of their model. The default, [`O200k`], is a real BPE
//! tokenizer embedded in the binary; [`Estimate`] is a cheap stand-in for
//! tests and quick looks.

use crate::message::{Block, Message, ToolSpec};

mod pieces;

/// Tokens a message costs beyond its content (role markers and separators).
pub const MESSAGE_OVERHEAD: usize = 4;
/// Tokens a tool call costs beyond its name and arguments.
pub const TOOL_CALL_OVERHEAD: usize = 3;

/// Counts the tokens of a text.
pub trait TokenCounter: Send + Sync {
    /// Number of tokens `text` encodes to.
    fn count(&self, text: &str) -> usize;
}

/// The o200k BPE tokenizer (GPT-4o and later), embedded: no download.
#[derive(Debug, Clone, Copy, Default)]
pub struct O200k;

impl O200k {
    /// The embedded o200k tokenizer.
    pub fn new() -> Self {
        O200k
    }
}

impl TokenCounter for O200k {
    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        pieces::count(text)
    }
}

/// A counter that remembers what it counted: each distinct text is
/// counted once by the counter it wraps. For one replay of a log, where
/// every policy counts the same messages again; its memory grows with the
/// distinct texts seen (16 bytes each), so it belongs to one session, not
/// a process.
pub struct Remembering {
    inner: std::sync::Arc<dyn TokenCounter>,
    seen: std::sync::Mutex<rustc_hash::FxHashMap<(usize, u64), usize>>,
}

impl Remembering {
    /// Remembers the counts `inner` gives.
    pub fn new(inner: std::sync::Arc<dyn TokenCounter>) -> Self {
        Remembering {
            inner,
            seen: std::sync::Mutex::default(),
        }
    }
}

impl std::fmt::Debug for Remembering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let seen = self.seen.lock().map_or(0, |seen| seen.len());
        f.debug_struct("Remembering").field("texts", &seen).finish()
    }
}

impl TokenCounter for Remembering {
    fn count(&self, text: &str) -> usize {
        use std::hash::{Hash, Hasher};
        // SipHash with fixed keys: the same in every run, and no weak spot
        // for texts that differ in a few bytes.
        let mut hasher = std::hash::DefaultHasher::new();
        text.hash(&mut hasher);
        let key = (text.len(), hasher.finish());
        let known = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .copied();
        known.unwrap_or_else(|| {
            let tokens = self.inner.count(text);
            self.seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key, tokens);
            tokens
        })
    }
}

/// A cheap estimate: one token per four bytes, rounded up.
///
/// Close enough for English and code to size budgets in tests; never use it
/// where the figure matters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Estimate;

impl TokenCounter for Estimate {
    fn count(&self, text: &str) -> usize {
        text.len().div_ceil(4)
    }
}

/// A local count `counted` corrected by a calibration `offset` (provider
/// count minus local count), never below zero: what strategies report as
/// the prompt's size.
pub fn calibrated(counted: usize, offset: i64) -> usize {
    usize::try_from((counted as i64).saturating_add(offset).max(0)).unwrap_or(0)
}

/// Tokens of one assistant block.
pub fn block_tokens(counter: &dyn TokenCounter, block: &Block) -> usize {
    match block {
        Block::Text { text } => counter.count(text),
        Block::Reasoning { text, signature } => {
            counter.count(text) + signature.as_deref().map_or(0, |s| counter.count(s))
        }
        Block::ToolCall(call) => {
            counter.count(&call.name) + counter.count(&call.arguments) + TOOL_CALL_OVERHEAD
        }
    }
}

/// Tokens of a whole message, overhead included.
pub fn message_tokens(counter: &dyn TokenCounter, message: &Message) -> usize {
    MESSAGE_OVERHEAD
        + match message {
            Message::System { content } | Message::User { content } => counter.count(content),
            Message::Assistant { content } => content
                .iter()
                .map(|block| block_tokens(counter, block))
                .sum(),
            Message::ToolResult(result) => counter.count(&result.content),
        }
}

/// Tokens of the tool definitions sent with every request.
pub fn tools_tokens(counter: &dyn TokenCounter, tools: &[ToolSpec]) -> usize {
    tools
        .iter()
        .map(|tool| {
            counter.count(&tool.name)
                + counter.count(&tool.description)
                + counter.count(&tool.parameters.to_string())
                + TOOL_CALL_OVERHEAD
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn o200k_counts_real_tokens() {
        let counter = O200k::new();
        assert_eq!(counter.count(""), 0);
        assert_eq!(counter.count("hello world"), 2);
        assert!(counter.count("fn main() { println!(\"hi\"); }") > 5);
    }

    #[test]
    fn a_remembering_counter_counts_each_distinct_text_once_and_the_same() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Tally(AtomicUsize);
        impl TokenCounter for Tally {
            fn count(&self, text: &str) -> usize {
                self.0.fetch_add(1, Ordering::SeqCst);
                O200k.count(text)
            }
        }
        let tally = std::sync::Arc::new(Tally(AtomicUsize::new(0)));
        let remembering = Remembering::new(tally.clone());
        let texts = [
            "fn main() {}",
            "hello world",
            "fn main() {}",
            "",
            "hello world!",
        ];
        for _ in 0..3 {
            for text in texts {
                assert_eq!(remembering.count(text), O200k.count(text), "{text:?}");
            }
        }
        assert_eq!(tally.0.load(Ordering::SeqCst), 4, "four distinct texts");
        assert!(format!("{remembering:?}").contains("texts: 4"));
    }

    #[test]
    fn estimate_rounds_up() {
        assert_eq!(Estimate.count(""), 0);
        assert_eq!(Estimate.count("abc"), 1);
        assert_eq!(Estimate.count("abcde"), 2);
    }

    #[test]
    fn message_tokens_include_every_part() {
        let message = Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "think".into(),
                    signature: Some("sig".into()),
                },
                Block::ToolCall(crate::ToolCall::new("c1", "grep", "{\"pattern\":\"x\"}")),
            ],
        };
        let counter = Estimate;
        let expected = MESSAGE_OVERHEAD + 2 + 1 + 1 + 4 + TOOL_CALL_OVERHEAD;
        assert_eq!(message_tokens(&counter, &message), expected);
    }
}
