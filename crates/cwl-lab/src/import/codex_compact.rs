//! What Codex CLI sent in place of its history after a compaction.
//!
//! Newer Codex writes the new history in the `compacted` line
//! (`replacement_history`, response items): that is exactly what it
//! became. Codex 0.80 and earlier write only the summary (`message`); the
//! history then became, by Codex's own rule (`compact.rs`): the initial
//! context (the AGENTS.md / user-instructions and `<environment_context>`
//! user messages, and any developer message among them), every real user
//! message so far, oldest first, keeping the newest within
//! [`USER_MESSAGE_TOKENS`] (Codex's estimate: bytes / 4; a message across
//! the limit is cut in its middle), and the summary last. Tool calls,
//! outputs, reasoning and earlier summaries are gone.
//!
//! [`Remembered`] follows the messages the importer emits to rebuild that
//! list, holding only the user messages that may still be sent.

use std::collections::VecDeque;

use ::cwl::Message;

/// Tokens of earlier user messages Codex keeps after a compaction.
pub(crate) const USER_MESSAGE_TOKENS: usize = 20_000;

/// How Codex opens a compaction summary it sends as a user message.
const SUMMARY_PREFIX: &str = "Another language model started to solve this problem";

/// How the user messages of Codex's initial context open.
const INITIAL_PREFIXES: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
];

/// Codex's token estimate of a text: its bytes / 4, rounded up.
fn approx_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// Whether a user message is a compaction summary Codex sent earlier.
pub(crate) fn is_summary(text: &str) -> bool {
    text.trim_start().starts_with(SUMMARY_PREFIX)
}

/// Whether a user message is part of Codex's initial context.
fn is_initial(text: &str) -> bool {
    let text = text.trim_start();
    INITIAL_PREFIXES.iter().any(|p| text.starts_with(p))
}

/// The messages the importer emitted that survive a Codex compaction.
#[derive(Debug, Default)]
pub(crate) struct Remembered {
    /// The initial context: sent again after every compaction.
    initial: Vec<Message>,
    /// Real user messages, oldest first: only the newest that may still
    /// be within [`USER_MESSAGE_TOKENS`].
    users: VecDeque<String>,
    tokens: usize,
    /// A message other than a system one was seen: system messages before
    /// it open every request anyway (the prologue) and are not restored.
    past_prologue: bool,
    /// A real user message was seen: the initial context is complete.
    started: bool,
}

impl Remembered {
    /// Notes a user or system message the importer emitted.
    pub(crate) fn emitted(&mut self, message: &Message) {
        match message {
            Message::System { .. } if !self.past_prologue => {}
            Message::System { .. } if !self.started => self.initial.push(message.clone()),
            Message::User { content } if is_initial(content) && !self.started => {
                self.initial.push(message.clone());
            }
            Message::User { content } if is_initial(content) => {}
            Message::User { content } if !is_summary(content) => {
                self.started = true;
                self.push_user(content.clone());
            }
            _ => {}
        }
        if !matches!(message, Message::System { .. }) {
            self.past_prologue = true;
        }
    }

    fn push_user(&mut self, text: String) {
        self.tokens += approx_tokens(&text);
        self.users.push_back(text);
        while let Some(oldest) = self.users.front() {
            let rest = self.tokens - approx_tokens(oldest);
            if rest < USER_MESSAGE_TOKENS {
                break;
            }
            self.tokens = rest;
            self.users.pop_front();
        }
    }

    /// What Codex 0.80 sent before the summary after a compaction: the
    /// initial context and the newest user messages within the limit.
    /// Those user messages are what it remembers from then on.
    pub(crate) fn rebuilt(&mut self) -> Vec<Message> {
        let mut remaining = USER_MESSAGE_TOKENS;
        let mut selected = Vec::new();
        for text in self.users.iter().rev() {
            if remaining == 0 {
                break;
            }
            let tokens = approx_tokens(text);
            if tokens <= remaining {
                selected.push(text.clone());
                remaining -= tokens;
            } else {
                selected.push(cut_middle(text, remaining));
                break;
            }
        }
        selected.reverse();
        self.users.clear();
        self.tokens = 0;
        for text in &selected {
            self.push_user(text.clone());
        }
        self.initial
            .iter()
            .cloned()
            .chain(selected.into_iter().map(Message::user))
            .collect()
    }

    /// Takes the history a newer Codex logged (`replacement_history`) as
    /// what it remembers from then on.
    pub(crate) fn replaced(&mut self, history: &[Message]) {
        let initial: Vec<Message> = history
            .iter()
            .filter(|m| match m {
                Message::User { content } => is_initial(content),
                Message::System { .. } => true,
                _ => false,
            })
            .cloned()
            .collect();
        if !initial.is_empty() {
            self.initial = initial;
        }
        self.users.clear();
        self.tokens = 0;
        for message in history {
            if let Message::User { content } = message
                && !is_initial(content)
                && !is_summary(content)
            {
                self.push_user(content.clone());
            }
        }
        self.started = true;
        self.past_prologue = true;
    }
}

/// `text` cut to about `tokens` tokens (4 bytes each), keeping its start
/// and end around a marker, as Codex truncates a long message.
fn cut_middle(text: &str, tokens: usize) -> String {
    let budget = tokens.saturating_mul(4);
    if text.len() <= budget {
        return text.to_string();
    }
    let mut head = budget / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (budget - budget / 2);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    let removed = approx_tokens(&text[head..tail]);
    format!(
        "{}…{removed} tokens truncated…{}",
        &text[..head],
        &text[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_initial_context_and_the_newest_user_messages() {
        let mut remembered = Remembered::default();
        remembered.emitted(&Message::system("base instructions"));
        remembered.emitted(&Message::user("# AGENTS.md instructions for /r"));
        remembered.emitted(&Message::user(
            "<environment_context>/r</environment_context>",
        ));
        let big = "x".repeat(USER_MESSAGE_TOKENS * 4 - 8);
        for text in ["first", big.as_str(), "third", "fourth"] {
            remembered.emitted(&Message::user(text));
        }
        remembered.emitted(&Message::user(format!("{SUMMARY_PREFIX}: old summary")));
        let rebuilt = remembered.rebuilt();
        let texts: Vec<String> = rebuilt
            .iter()
            .map(|m| match m {
                Message::User { content } | Message::System { content } => content.clone(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(texts.len(), 5, "initial 2, then the newest three");
        assert!(texts[0].starts_with("# AGENTS.md"));
        assert!(texts[1].starts_with("<environment_context>"));
        assert!(texts[2].contains("tokens truncated"), "cut in its middle");
        assert!(approx_tokens(&texts[2]) <= USER_MESSAGE_TOKENS + 10);
        assert_eq!(texts[3..], ["third".to_string(), "fourth".to_string()]);
        assert_eq!(remembered.users.len(), 3, "what the next one starts from");
    }

    #[test]
    fn memory_stays_within_the_limit() {
        let mut remembered = Remembered::default();
        let text = "y".repeat(4_000);
        for _ in 0..100 {
            remembered.emitted(&Message::user(text.clone()));
        }
        assert!(remembered.users.len() <= USER_MESSAGE_TOKENS / 1_000 + 1);
        assert_eq!(remembered.rebuilt().len(), USER_MESSAGE_TOKENS / 1_000);
    }
}
