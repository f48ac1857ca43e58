//! The prompt the log's own harness sent, call by call, in local tokens.
//!
//! A replayed policy starts from the full history; the log's harness did
//! not. It compacted (a summary in place of everything before it), cut
//! old tool results from what it sent without logging it (Claude Code
//! 2.0), and its provider dropped earlier turns' reasoning (see
//! [`ReasoningScope`]). [`AsSent`] follows the log the way the harness
//! did, so that every logged prompt size can be set against a replayed
//! one, not only those before the first compaction.
//!
//! What the log records, it replays: the history, the reasoning rule, a
//! compaction's summary and the messages the harness sent with it. What
//! the log does not record (files Claude Code 1.0 re-read after a
//! compaction, the tool results a harness cleared) it cannot; the call
//! after such an edit opens a new [`Segment`], and [`super::fidelity`]
//! decides there whether the model explained the edit or must take its
//! size from the log.

use cwl::tokens::message_tokens;
use cwl::{Message, TokenCounter, ToolResult};

use super::clearing::{ClearRule, PLACEHOLDER};
use super::prompt_dropped;
use crate::metrics::sent::{History, ReasoningScope, reasoning_tokens};
use crate::session::SessionEvent;

/// What opened a segment of the log: the harness's own edit of the
/// prompt it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    /// A compaction the log records, with its summary.
    Compaction,
    /// The logged prompt shrank with no compaction and the harness's own
    /// clearing rule ([`ClearRule`]) was applied to the replay.
    Clearing,
    /// The logged prompt shrank by more than the model removed, with no
    /// compaction: the harness cut content it logged whole
    /// ([`prompt_dropped`]).
    Drop,
}

/// A stretch of calls with no edit of the harness's between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Counted from 0 (the start of the log).
    pub index: u32,
    /// What opened it (`None`: the start of the log).
    pub opened_by: Option<Edit>,
}

/// One logged call: the replayed prompt and the logged one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// The prompt the harness sent, as replayed: local tokens of the tools
    /// the log carries and of the history as the harness held it.
    pub local: u64,
    /// The prompt size the log records, in provider tokens.
    pub logged: u64,
    /// The segment it falls in.
    pub segment: Segment,
    /// Whether it is the first call of its segment.
    pub first: bool,
}

/// One message of the history as the harness holds it.
#[derive(Debug, Clone, Copy)]
struct Piece {
    tokens: usize,
    reasoning: usize,
    user: bool,
    /// For a result the harness may clear: its size by the harness's
    /// estimate.
    clearable: Option<usize>,
    cleared: bool,
}

/// Follows a log as its harness sent it.
#[derive(Debug)]
pub struct AsSent {
    scope: ReasoningScope,
    tools: u64,
    /// Leading system messages: sent again after every compaction.
    prologue: usize,
    in_prologue: bool,
    history: History,
    /// Each message of the history (what a compaction may keep and a
    /// clearing may clear).
    messages: Vec<Piece>,
    /// Tokens the harness's clearings took out of the history.
    cleared: usize,
    clearing: Option<ClearRule>,
    segment: Segment,
    /// A compaction came since the last logged call.
    compacted: bool,
    previous: Option<u64>,
    points: Vec<Point>,
}

impl AsSent {
    /// A log whose tool definitions count `tools` local tokens, billed by
    /// a provider of `scope`.
    pub fn new(scope: ReasoningScope, tools: u64) -> Self {
        AsSent {
            scope,
            tools,
            prologue: 0,
            in_prologue: true,
            history: History::new(scope),
            messages: Vec::new(),
            cleared: 0,
            clearing: None,
            segment: Segment {
                index: 0,
                opened_by: None,
            },
            compacted: false,
            previous: None,
            points: Vec::new(),
        }
    }

    /// The same, for a harness that clears old tool results from what it
    /// sends by `rule` when its prompt shrinks with no compaction.
    pub fn with_clearing(mut self, rule: Option<ClearRule>) -> Self {
        self.clearing = rule;
        self
    }

    /// Takes the log's next event.
    pub fn event(&mut self, counter: &dyn TokenCounter, event: &SessionEvent) {
        match event {
            SessionEvent::Warning(_) => {}
            SessionEvent::Compaction { replacement, kept } => {
                self.in_prologue = false;
                let kept = self
                    .messages
                    .split_off(self.messages.len().saturating_sub(*kept));
                self.history = History::new(self.scope);
                self.messages.clear();
                self.cleared = 0;
                for message in replacement {
                    self.push(counter, message);
                }
                for piece in kept {
                    self.push_piece(piece);
                }
                self.compacted = true;
            }
            SessionEvent::Message { message, usage, .. } => {
                if let Some(logged) = usage.map(|u| u.input_tokens).filter(|t| *t > 0) {
                    self.call(counter, logged);
                }
                self.push(counter, message);
            }
        }
    }

    fn call(&mut self, counter: &dyn TokenCounter, logged: u64) {
        let stripped = self.history.take_dropped() as u64;
        let edit = if self.compacted {
            Some(Edit::Compaction)
        } else if self
            .previous
            .is_some_and(|before| prompt_dropped(before.saturating_sub(stripped), logged))
        {
            Some(if self.clear(counter) {
                Edit::Clearing
            } else {
                Edit::Drop
            })
        } else {
            None
        };
        self.compacted = false;
        if let Some(edit) = edit {
            self.segment = Segment {
                index: self.segment.index + 1,
                opened_by: Some(edit),
            };
        }
        let first = edit.is_some() || self.points.is_empty();
        self.points.push(Point {
            local: self.local(),
            logged,
            segment: self.segment,
            first,
        });
        self.previous = Some(logged);
    }

    fn push(&mut self, counter: &dyn TokenCounter, message: &Message) {
        let tokens = message_tokens(counter, message);
        let system = matches!(message, Message::System { .. });
        if self.in_prologue && system {
            self.prologue += tokens;
            return;
        }
        self.in_prologue = false;
        let clearable = match (message, self.clearing) {
            (Message::ToolResult(result), Some(rule)) if rule.clears(&result.tool_name) => {
                Some(ClearRule::estimate(result.content.len()))
            }
            _ => None,
        };
        self.push_piece(Piece {
            tokens,
            reasoning: reasoning_tokens(counter, message),
            user: matches!(message, Message::User { .. }),
            clearable,
            cleared: false,
        });
    }

    fn push_piece(&mut self, piece: Piece) {
        self.history.push(piece.tokens, piece.reasoning, piece.user);
        self.messages.push(piece);
    }

    /// Applies the harness's clearing rule, if it has one; whether it
    /// cleared anything.
    fn clear(&mut self, counter: &dyn TokenCounter) -> bool {
        let Some(rule) = self.clearing else {
            return false;
        };
        let at: Vec<usize> = (0..self.messages.len())
            .filter(|&i| self.messages[i].clearable.is_some())
            .collect();
        let results: Vec<(usize, bool)> = at
            .iter()
            .map(|&i| {
                let piece = &self.messages[i];
                (piece.clearable.unwrap_or(0), piece.cleared)
            })
            .collect();
        let chosen = rule.select(&results);
        let placeholder = message_tokens(
            counter,
            &Message::ToolResult(ToolResult {
                call_id: String::new(),
                tool_name: String::new(),
                content: PLACEHOLDER.into(),
                is_error: false,
            }),
        );
        for &index in &chosen {
            let piece = &mut self.messages[at[index]];
            let now = placeholder.min(piece.tokens);
            self.cleared += piece.tokens - now;
            piece.tokens = now;
            piece.cleared = true;
        }
        !chosen.is_empty()
    }

    /// The prompt the harness holds now, in local tokens.
    pub fn local(&self) -> u64 {
        self.tools + (self.prologue + self.history.sent().saturating_sub(self.cleared)) as u64
    }

    /// Reasoning tokens in finished user turns so far (see
    /// [`History::stale`]).
    pub fn stale(&self) -> usize {
        self.history.stale()
    }

    /// The logged calls so far.
    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// The logged calls.
    pub fn into_points(self) -> Vec<Point> {
        self.points
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Estimate, ToolResult, Usage};

    fn call(logged: u64) -> SessionEvent {
        SessionEvent::Message {
            message: Message::Assistant {
                content: vec![cwl::Block::Text { text: "ok".into() }],
            },
            timestamp: None,
            usage: Some(Usage {
                input_tokens: logged,
                ..Usage::default()
            }),
            cost_usd: None,
        }
    }

    fn said(text: &str) -> SessionEvent {
        SessionEvent::Message {
            message: Message::user(text),
            timestamp: None,
            usage: None,
            cost_usd: None,
        }
    }

    #[test]
    fn a_compaction_replaces_the_history_but_not_the_prologue() {
        let counter = Estimate;
        let mut sent = AsSent::new(ReasoningScope::AllTurns, 100);
        sent.event(
            &counter,
            &SessionEvent::Message {
                message: Message::system("instructions ".repeat(40)),
                timestamp: None,
                usage: None,
                cost_usd: None,
            },
        );
        let prologue = sent.local() - 100;
        sent.event(&counter, &said(&"long task ".repeat(400)));
        sent.event(&counter, &call(5_000));
        let before = sent.local();
        sent.event(
            &counter,
            &SessionEvent::Compaction {
                replacement: vec![Message::user("the summary")],
                kept: 0,
            },
        );
        let after = 100 + prologue + message_tokens(&counter, &Message::user("the summary")) as u64;
        assert_eq!(sent.local(), after);
        assert!(after < before);
        sent.event(&counter, &call(1_000));
        let points = sent.into_points();
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].segment.index, 0);
        assert!(points[0].first);
        assert_eq!(
            points[1].segment,
            Segment {
                index: 1,
                opened_by: Some(Edit::Compaction)
            }
        );
        assert!(points[1].first);
        assert_eq!(points[1].local, after);
    }

    fn result(tool: &str, bytes: usize) -> SessionEvent {
        SessionEvent::Message {
            message: Message::ToolResult(ToolResult {
                call_id: "c".into(),
                tool_name: tool.into(),
                content: "x".repeat(bytes),
                is_error: false,
            }),
            timestamp: None,
            usage: None,
            cost_usd: None,
        }
    }

    #[test]
    fn a_shrink_of_a_claude_code_log_replays_its_clearing() {
        let counter = Estimate;
        let mut sent = AsSent::new(ReasoningScope::AllTurns, 0)
            .with_clearing(ClearRule::of_format("claude-code"));
        sent.event(&counter, &said("go"));
        for _ in 0..6 {
            sent.event(&counter, &call(100_000));
            sent.event(&counter, &result("Read", 60_000));
        }
        sent.event(&counter, &call(100_000));
        sent.event(&counter, &result("TodoWrite", 60_000));
        let before = sent.local();
        sent.event(&counter, &call(60_000));
        let after = sent.local();
        // Six 15k-token Read results: the oldest three go (the latest
        // three stay, 45k > 40k, so a fourth would too but is protected).
        assert!(before - after > 3 * 14_000, "{before} -> {after}");
        assert!(before - after < 4 * 15_000, "{before} -> {after}");
        assert_eq!(sent.points()[7].segment.opened_by, Some(Edit::Clearing));
        let mut plain = AsSent::new(ReasoningScope::AllTurns, 0);
        plain.event(&counter, &said("go"));
        plain.event(&counter, &call(100_000));
        plain.event(&counter, &result("Read", 60_000));
        plain.event(&counter, &call(50_000));
        assert_eq!(plain.points()[1].segment.opened_by, Some(Edit::Drop));
    }

    #[test]
    fn an_unexplained_shrink_opens_a_segment() {
        let counter = Estimate;
        let mut sent = AsSent::new(ReasoningScope::AllTurns, 0);
        sent.event(&counter, &said("go"));
        for logged in [40_000, 42_000, 20_000, 21_000] {
            sent.event(&counter, &call(logged));
        }
        let segments: Vec<(u32, bool)> = sent
            .points()
            .iter()
            .map(|p| (p.segment.index, p.first))
            .collect();
        assert_eq!(segments, [(0, true), (0, false), (1, true), (1, false)]);
        assert_eq!(sent.points()[2].segment.opened_by, Some(Edit::Drop));
    }
}
