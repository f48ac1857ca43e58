//! What the provider reads of a request, which is not always what the
//! client sent: some providers drop the reasoning of earlier user turns
//! from the prompt they bill ([`ReasoningScope`], whose documentation
//! gives the rule and its evidence). Where a log's prompt sizes clearly
//! show the other rule, calibration finds it
//! ([`crate::calibrate::Calibration::measure_path`]).

use std::sync::Arc;

use cwl::tokens::block_tokens;
use cwl::{Block, Message, TokenCounter};

use crate::transcript::Entry;

pub use cwl::ReasoningScope;

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
    scope.turn_start(pieces.iter().map(|piece| piece.message()))
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
