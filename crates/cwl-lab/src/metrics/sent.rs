//! What the provider reads of a request, which is not always what the
//! client sent: OpenAI's reasoning models before GPT-5.6 drop the
//! reasoning items of earlier user turns from the prompt. The client sends
//! them back (Codex CLI, encrypted), but they are neither seen nor counted
//! in `input_tokens`. Reasoning from the current turn is counted. Codex CLI
//! adds its own estimate of that earlier reasoning to the API's figure for
//! exactly this reason (openai/codex#6161, #7113). A live probe found the
//! same (UKGovernmentBEIS/inspect_ai#3809).
//!
//! Every other model's reasoning counts as sent: the pi log shows Claude
//! Opus 4.5 keeping earlier turns' thinking (each call after a user turn
//! reads the whole previous prompt from cache). Where a log's prompt sizes
//! clearly show the other rule, calibration finds it
//! ([`crate::calibrate::Calibration::measure_path`]).

use std::sync::Arc;

use cwl::tokens::block_tokens;
use cwl::{Block, Message, TokenCounter};
use serde::Serialize;

use crate::transcript::Entry;

/// Which turns' reasoning a provider keeps in the prompt it bills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningScope {
    /// Every turn's, as sent.
    #[default]
    AllTurns,
    /// Only that of the current user turn: reasoning in an assistant
    /// message before the latest user message is dropped.
    CurrentTurn,
}

impl ReasoningScope {
    /// The scope of the provider serving `model`: [`CurrentTurn`] for
    /// OpenAI's reasoning models before GPT-5.6 (`o1`, `o3`, `o4-mini`,
    /// `codex-mini`, `gpt-5`, `gpt-5-codex`, `gpt-5.1` to `gpt-5.5`, with
    /// or without an `openai/` prefix), [`AllTurns`] for every other.
    ///
    /// [`CurrentTurn`]: ReasoningScope::CurrentTurn
    /// [`AllTurns`]: ReasoningScope::AllTurns
    pub fn of_model(model: &str) -> Self {
        let model = model.trim().to_ascii_lowercase();
        let model = model.strip_prefix("openai/").unwrap_or(&model);
        let o_series = ["o1", "o3", "o4", "codex-mini"]
            .iter()
            .any(|family| model.starts_with(family));
        let before_5_6 =
            model
                .strip_prefix("gpt-5")
                .is_some_and(|rest| match rest.strip_prefix('.') {
                    Some(minor) => {
                        let digits: String =
                            minor.chars().take_while(char::is_ascii_digit).collect();
                        digits.parse::<u32>().is_ok_and(|minor| minor < 6)
                    }
                    None => rest.is_empty() || rest.starts_with('-'),
                });
        if o_series || before_5_6 {
            ReasoningScope::CurrentTurn
        } else {
            ReasoningScope::AllTurns
        }
    }
}

/// Tokens of the reasoning blocks of `message` (their text and opaque
/// part), as [`cwl::tokens::message_tokens`] counts them.
pub fn reasoning_tokens(counter: &dyn TokenCounter, message: &Message) -> usize {
    match message {
        Message::Assistant { content } => content
            .iter()
            .filter(|b| matches!(b, Block::Reasoning { .. }))
            .map(|b| block_tokens(counter, b))
            .sum(),
        _ => 0,
    }
}

/// One message of a request as the provider counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// The entry's id: two requests share a message when they hold it
    /// with the same id and the same size.
    pub id: u64,
    /// Tokens the provider counts.
    pub tokens: usize,
    /// Whether it is a system message (Anthropic caches up to the last).
    pub system: bool,
}

/// How many of `pieces` come before the current turn's user message, where
/// a provider of `scope` drops reasoning (0 when it keeps all of it).
pub fn turn_start(pieces: &[Arc<Entry>], scope: ReasoningScope) -> usize {
    match scope {
        ReasoningScope::AllTurns => 0,
        ReasoningScope::CurrentTurn => pieces
            .iter()
            .rposition(|p| matches!(p.message(), Message::User { .. }))
            .unwrap_or(0),
    }
}

/// `pieces` as a provider of `scope` counts them.
pub fn sent(pieces: &[Arc<Entry>], scope: ReasoningScope) -> Vec<Sent> {
    sent_from(pieces, turn_start(pieces, scope))
}

/// `pieces` as counted by a provider that drops the reasoning of the
/// first `turn_start` ([`turn_start`]).
pub fn sent_from(pieces: &[Arc<Entry>], turn_start: usize) -> Vec<Sent> {
    pieces
        .iter()
        .enumerate()
        .map(|(index, piece)| Sent {
            id: piece.id(),
            tokens: if index < turn_start {
                piece.tokens() - piece.reasoning_tokens()
            } else {
                piece.tokens()
            },
            system: matches!(piece.message(), Message::System { .. }),
        })
        .collect()
}

/// The whole history so far, as logged and as a provider of one scope
/// counts it: what `none` sends.
#[derive(Debug, Clone)]
pub struct History {
    scope: ReasoningScope,
    logged: usize,
    dropped: usize,
    dropped_taken: usize,
    stale: usize,
    turn_reasoning: usize,
    turn_reasoning_at: Option<usize>,
    changed_at: Option<usize>,
}

impl History {
    /// An empty history under `scope`.
    pub fn new(scope: ReasoningScope) -> Self {
        History {
            scope,
            logged: 0,
            dropped: 0,
            dropped_taken: 0,
            stale: 0,
            turn_reasoning: 0,
            turn_reasoning_at: None,
            changed_at: None,
        }
    }

    /// Appends a message or a step of `tokens`, `reasoning` of them in
    /// reasoning blocks; `user` when it is a user message, which ends the
    /// turn before it.
    pub fn push(&mut self, tokens: usize, reasoning: usize, user: bool) {
        if user {
            self.stale += self.turn_reasoning;
            if let (ReasoningScope::CurrentTurn, Some(at)) = (self.scope, self.turn_reasoning_at) {
                self.dropped += self.turn_reasoning;
                self.changed_at = Some(self.changed_at.map_or(at, |c| c.min(at)));
            }
            self.turn_reasoning = 0;
            self.turn_reasoning_at = None;
        }
        if reasoning > 0 && self.turn_reasoning_at.is_none() {
            self.turn_reasoning_at = Some(self.sent());
        }
        self.turn_reasoning += reasoning;
        self.logged += tokens;
    }

    /// Tokens as the log holds them.
    pub fn logged(&self) -> usize {
        self.logged
    }

    /// Tokens the provider counts.
    pub fn sent(&self) -> usize {
        self.logged - self.dropped
    }

    /// Tokens the provider has stopped counting so far.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Tokens the provider stopped counting since this was last asked:
    /// what a logged prompt may shrink by between two calls.
    pub fn take_dropped(&mut self) -> usize {
        let since = self.dropped - self.dropped_taken;
        self.dropped_taken = self.dropped;
        since
    }

    /// Reasoning tokens in finished user turns, whichever the scope: what
    /// a provider that keeps only the current turn's stops counting.
    pub fn stale(&self) -> usize {
        self.stale
    }

    /// Where the provider's view of the history last changed other than by
    /// growing (tokens before the first message it stopped counting whole),
    /// since this was last asked; `None` when it only grew.
    pub fn take_change(&mut self) -> Option<usize> {
        self.changed_at.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Lab;
    use cwl::{Block, Estimate};

    #[test]
    fn openai_reasoning_models_before_5_6_keep_the_current_turn_only() {
        for model in [
            "gpt-5",
            "gpt-5-codex",
            "gpt-5-mini",
            "GPT-5.1-codex-max",
            "gpt-5.2",
            "gpt-5.5",
            "openai/gpt-5.4-mini",
            "o3",
            "o4-mini",
            "codex-mini-latest",
        ] {
            assert_eq!(
                ReasoningScope::of_model(model),
                ReasoningScope::CurrentTurn,
                "{model}"
            );
        }
        for model in [
            "gpt-5.6",
            "gpt-5.6-sol",
            "gpt-5.10",
            "gpt-6",
            "gpt-4.1",
            "gpt-50",
            "claude-sonnet-4-5",
            "gemini-2.5-pro",
            "",
        ] {
            assert_eq!(
                ReasoningScope::of_model(model),
                ReasoningScope::AllTurns,
                "{model}"
            );
        }
    }

    fn thought(lab: &mut Lab, text: &str) -> Arc<Entry> {
        lab.entry(Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: String::new(),
                    signature: Some("x".repeat(400)),
                },
                Block::Text { text: text.into() },
            ],
        })
    }

    #[test]
    fn earlier_turns_reasoning_is_not_counted() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let first = lab.entry(Message::user("first task"));
        let a = thought(&mut lab, "done");
        let second = lab.entry(Message::user("second task"));
        let b = thought(&mut lab, "working");
        assert_eq!(a.reasoning_tokens(), 100);
        let pieces = [first, a.clone(), second, b.clone()];
        let current = sent(&pieces, ReasoningScope::CurrentTurn);
        assert_eq!(current[1].tokens, a.tokens() - 100);
        assert_eq!(current[3].tokens, b.tokens());
        let all = sent(&pieces, ReasoningScope::AllTurns);
        assert!(all.iter().zip(&pieces).all(|(s, p)| s.tokens == p.tokens()));
    }

    #[test]
    fn the_history_drops_a_turns_reasoning_when_the_next_begins() {
        let mut history = History::new(ReasoningScope::CurrentTurn);
        history.push(10, 0, true);
        history.push(50, 20, false);
        history.push(30, 5, false);
        assert_eq!((history.logged(), history.sent()), (90, 90));
        assert_eq!(history.take_change(), None);
        history.push(8, 0, true);
        assert_eq!(
            (history.logged(), history.sent(), history.dropped()),
            (98, 73, 25)
        );
        assert_eq!(history.take_change(), Some(10));
        assert_eq!(history.take_change(), None);
        history.push(40, 10, false);
        history.push(8, 0, true);
        assert_eq!(history.sent(), 111);
        assert_eq!(history.take_change(), Some(73));

        let mut all = History::new(ReasoningScope::AllTurns);
        for (tokens, reasoning, user) in [(10, 0, true), (50, 20, false), (8, 0, true)] {
            all.push(tokens, reasoning, user);
        }
        assert_eq!((all.sent(), all.take_change(), all.stale()), (68, None, 20));
    }
}
