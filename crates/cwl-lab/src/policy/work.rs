//! A policy's editable copy of the transcript: steps whose tool calls can
//! be removed together with their results, whose results can be replaced
//! by placeholders, and runs of units that can be folded into one pointer.
//! Every edit keeps the request valid by construction.

use std::sync::Arc;

use cwl::tokens::{MESSAGE_OVERHEAD, block_tokens};
use cwl::{Block, Message};

use crate::transcript::{Entry, Lab, Step, Unit};

/// One tool result of a step, with the position of its call.
#[derive(Debug, Clone)]
pub struct ResultSlot {
    /// Index of the call in the original assistant message's blocks.
    pub call_block: usize,
    /// The result as it is sent now (possibly a placeholder).
    pub current: Arc<Entry>,
    /// The result as logged.
    pub original: Arc<Entry>,
}

impl ResultSlot {
    /// Whether the result was replaced.
    pub fn replaced(&self) -> bool {
        self.current.id() != self.original.id()
    }
}

/// An assistant message and its results, editable.
#[derive(Debug, Clone)]
pub struct WorkStep {
    /// The assistant message as logged.
    pub original: Arc<Entry>,
    current: Arc<Entry>,
    kept: Vec<bool>,
    block_tokens: Option<Vec<usize>>,
    dirty: bool,
    /// The results of the calls still kept.
    pub results: Vec<ResultSlot>,
}

impl WorkStep {
    /// An untouched step.
    pub fn new(step: &Step) -> Self {
        let blocks: &[Block] = match step.assistant.message() {
            Message::Assistant { content } => content,
            _ => &[],
        };
        let results = step
            .results
            .iter()
            .map(|r| {
                let call_id = match r.message() {
                    Message::ToolResult(result) => result.call_id.as_str(),
                    _ => "",
                };
                let call_block = blocks
                    .iter()
                    .position(|b| matches!(b, Block::ToolCall(c) if c.id == call_id))
                    .unwrap_or(usize::MAX);
                ResultSlot {
                    call_block,
                    current: Arc::clone(r),
                    original: Arc::clone(r),
                }
            })
            .collect();
        WorkStep {
            original: Arc::clone(&step.assistant),
            current: Arc::clone(&step.assistant),
            kept: vec![true; blocks.len()],
            block_tokens: None,
            dirty: false,
            results,
        }
    }

    fn blocks(&self) -> &[Block] {
        match self.original.message() {
            Message::Assistant { content } => content,
            _ => &[],
        }
    }

    fn ensure_block_tokens(&mut self, lab: &Lab) {
        if self.block_tokens.is_none() {
            let tokens = self
                .blocks()
                .iter()
                .map(|b| block_tokens(lab.counter(), b))
                .collect();
            self.block_tokens = Some(tokens);
        }
    }

    /// Whether nothing is left of the step.
    pub fn is_empty(&self) -> bool {
        !self.kept.iter().any(|k| *k)
    }

    /// Tokens the step costs now, as the provider bills them
    /// ([`Lab::billed`]).
    pub fn tokens(&self, lab: &Lab) -> usize {
        self.assistant_tokens(lab)
            + self
                .results
                .iter()
                .map(|r| r.current.tokens())
                .sum::<usize>()
    }

    fn assistant_tokens(&self, lab: &Lab) -> usize {
        if self.is_empty() {
            return 0;
        }
        match (&self.block_tokens, self.dirty) {
            (Some(tokens), true) => {
                let dropped = lab.reasoning_dropped(&self.original);
                MESSAGE_OVERHEAD
                    + tokens
                        .iter()
                        .zip(&self.kept)
                        .zip(self.blocks())
                        .filter(|((_, k), b)| {
                            **k && !(dropped && matches!(b, Block::Reasoning { .. }))
                        })
                        .map(|((t, _), _)| *t)
                        .sum::<usize>()
            }
            _ => lab.billed(&self.current),
        }
    }

    /// Removes the `index`-th remaining result with its call; returns the
    /// tokens freed.
    pub fn remove_result(&mut self, index: usize, lab: &Lab) -> usize {
        let before = self.tokens(lab);
        self.ensure_block_tokens(lab);
        let slot = self.results.remove(index);
        if let Some(k) = self.kept.get_mut(slot.call_block) {
            *k = false;
        }
        self.dirty = true;
        before - self.tokens(lab)
    }

    /// Removes the blocks (not tool calls) that `which` selects; returns the
    /// tokens freed. A step whose calls are all gone goes whole.
    pub fn remove_blocks(&mut self, which: impl Fn(&Block) -> bool, lab: &Lab) -> usize {
        let before = self.tokens(lab);
        self.ensure_block_tokens(lab);
        let hits: Vec<usize> = self
            .blocks()
            .iter()
            .enumerate()
            .filter(|(i, b)| self.kept[*i] && !matches!(b, Block::ToolCall(_)) && which(b))
            .map(|(i, _)| i)
            .collect();
        if hits.is_empty() {
            return 0;
        }
        for i in hits {
            self.kept[i] = false;
        }
        self.dirty = true;
        before.saturating_sub(self.tokens(lab))
    }

    /// Tokens of the kept blocks that `which` selects (tool calls excluded).
    pub fn block_tokens_where(&mut self, which: impl Fn(&Block) -> bool, lab: &Lab) -> usize {
        self.ensure_block_tokens(lab);
        let tokens = self.block_tokens.as_deref().unwrap_or(&[]);
        self.blocks()
            .iter()
            .enumerate()
            .filter(|(i, b)| self.kept[*i] && !matches!(b, Block::ToolCall(_)) && which(b))
            .map(|(i, _)| tokens[i])
            .sum()
    }

    /// Tokens of the call block of the `index`-th result.
    pub fn call_tokens(&mut self, index: usize, lab: &Lab) -> usize {
        self.ensure_block_tokens(lab);
        let block = self.results[index].call_block;
        self.block_tokens
            .as_deref()
            .and_then(|t| t.get(block))
            .copied()
            .unwrap_or(0)
    }

    /// Replaces the `index`-th result's content; returns the tokens freed
    /// (negative savings are clamped to zero).
    pub fn replace_result(&mut self, index: usize, replacement: Arc<Entry>) -> usize {
        let before = self.results[index].current.tokens();
        let after = replacement.tokens();
        self.results[index].current = replacement;
        before.saturating_sub(after)
    }

    /// The step as sent now, appended to `out`.
    pub fn materialize(&mut self, lab: &mut Lab, out: &mut Vec<Arc<Entry>>) {
        if self.is_empty() {
            return;
        }
        if self.dirty {
            let content = self
                .blocks()
                .iter()
                .zip(&self.kept)
                .filter(|(_, k)| **k)
                .map(|(b, _)| b.clone())
                .collect();
            self.current = lab.derived(Message::Assistant { content }, &self.original);
            self.dirty = false;
        }
        out.push(Arc::clone(&self.current));
        out.extend(self.results.iter().map(|r| Arc::clone(&r.current)));
    }
}

/// One unit of a policy's working transcript.
#[derive(Debug, Clone)]
pub enum WorkUnit {
    /// A system or user message, as logged.
    Message(Arc<Entry>),
    /// A step, possibly edited.
    Step(WorkStep),
    /// A pointer standing for folded units.
    Folded(Arc<Entry>),
}

impl WorkUnit {
    /// From a transcript unit.
    pub fn new(unit: &Unit) -> Self {
        match unit {
            Unit::Message(entry) => WorkUnit::Message(Arc::clone(entry)),
            Unit::Step(step) => WorkUnit::Step(WorkStep::new(step)),
        }
    }

    /// Tokens it costs now, as the provider bills them ([`Lab::billed`]).
    pub fn tokens(&self, lab: &Lab) -> usize {
        match self {
            WorkUnit::Message(e) | WorkUnit::Folded(e) => lab.billed(e),
            WorkUnit::Step(step) => step.tokens(lab),
        }
    }

    /// Whether it is a user message.
    pub fn is_user(&self) -> bool {
        matches!(self, WorkUnit::Message(e) if matches!(e.message(), Message::User { .. }))
    }

    /// Whether it is a system message.
    pub fn is_system(&self) -> bool {
        matches!(self, WorkUnit::Message(e) if matches!(e.message(), Message::System { .. }))
    }

    /// It as sent now, appended to `out`.
    pub fn materialize(&mut self, lab: &mut Lab, out: &mut Vec<Arc<Entry>>) {
        match self {
            WorkUnit::Message(e) | WorkUnit::Folded(e) => out.push(Arc::clone(e)),
            WorkUnit::Step(step) => step.materialize(lab, out),
        }
    }
}

/// A one-line placeholder user message standing for removed content.
pub fn placeholder(lab: &mut Lab, text: String) -> Arc<Entry> {
    lab.written(Message::user(text))
}

/// A tool result whose content is replaced by `text`.
pub fn replaced_result(lab: &mut Lab, original: &Entry, text: String) -> Arc<Entry> {
    let message = match original.message() {
        Message::ToolResult(result) => {
            Message::tool_result(&result.call_id, &result.tool_name, text, result.is_error)
        }
        other => other.clone(),
    };
    lab.written(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::view::validate_entries;
    use cwl::{Estimate, ToolCall};

    fn step(lab: &mut Lab) -> Step {
        let assistant = lab.entry(Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "thinking hard about it".into(),
                    signature: None,
                },
                Block::Text {
                    text: "let me look".into(),
                },
                Block::ToolCall(ToolCall::new("a", "read", r#"{"path":"a.rs"}"#)),
                Block::ToolCall(ToolCall::new("b", "grep", r#"{"pattern":"x"}"#)),
            ],
        });
        let results = vec![
            lab.entry(Message::tool_result(
                "a",
                "read",
                "fn a() {}\n".repeat(20),
                false,
            )),
            lab.entry(Message::tool_result("b", "grep", "hit\n".repeat(50), false)),
        ];
        Step {
            assistant,
            results,
            used: Arc::from(Vec::new()),
        }
    }

    #[test]
    fn edits_keep_counts_exact_and_requests_valid() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let step = step(&mut lab);
        let mut work = WorkStep::new(&step);
        assert_eq!(work.tokens(&lab), step.tokens());
        let freed = work.remove_result(1, &lab);
        assert!(freed > 0);
        let freed_reasoning = work.remove_blocks(|b| matches!(b, Block::Reasoning { .. }), &lab);
        assert!(freed_reasoning > 0);
        let expected = work.tokens(&lab);
        let mut out = Vec::new();
        work.materialize(&mut lab, &mut out);
        assert_eq!(
            out.iter().map(|e| e.tokens()).sum::<usize>(),
            expected,
            "incremental count matches a recount"
        );
        assert_eq!(out.len(), 2);
        validate_entries(&out).unwrap();
        let masked = replaced_result(&mut lab, &work.results[0].original, "[omitted]".into());
        assert!(work.replace_result(0, masked) > 0);
        assert!(work.results[0].replaced());
    }

    #[test]
    fn a_step_with_no_blocks_left_disappears() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let step = step(&mut lab);
        let mut work = WorkStep::new(&step);
        work.remove_result(0, &lab);
        work.remove_result(0, &lab);
        work.remove_blocks(|_| true, &lab);
        assert!(work.is_empty());
        assert_eq!(work.tokens(&lab), 0);
        let mut out = Vec::new();
        work.materialize(&mut lab, &mut out);
        assert!(out.is_empty());
    }
}
