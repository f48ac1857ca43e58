//! The eviction scorers of the context-window-manager design
//! (`shared/seeds/context-window-manager.txt`, section 3, "Code:
//! EvictionEngine"), with its weights and definitions:
//!
//! - `fifo`: `exp(-age / 10)`;
//! - `lru`: `exp(-idle / 5)` where idle counts turns since a later turn
//!   last *referenced* the block (used one of its anchors); never
//!   referenced scores 0.3 ("cold start"). The seed's code returns
//!   `1 - exp(-idle / 5)`, which evicts the most recently used first and
//!   contradicts its own docstring ("least-recently-referenced blocks score
//!   lowest"); we follow the docstring. A tool result's anchors are those
//!   of its output text, not of its call's arguments: a later command
//!   naming the same file does not refresh it. As `exp(-7/5) < 0.3 <
//!   exp(-6/5)`, an output none of whose anchors a later turn named
//!   outlasts every block last referenced more than 6 turns ago, however
//!   old it is (a log slice the model quotes from memory long after
//!   stays; a file read whose names its edits used goes);
//! - `priority`: `0.30·recency(exp(-age/15)) + 0.25·semantic + 0.20·source
//!   + 0.15·reuse + 0.10·explicit`, semantic fixed at its no-embedding
//!   default 0.5, source prestige user 1.0 / assistant 0.5 / tool result
//!   0.3 (others 0.5), reuse `min(references / 5, 1)`;
//! - `type`: per-type time to live, tool results 8 turns, assistant text
//!   30, thinking 2 (the design's YAML), others 50: past it 0, else
//!   `1 - age / ttl`;
//! - `weighted`: the `HybridScorer` composite, `0.15·fifo + 0.15·lru +
//!   0.40·priority + 0.30·type`.
//!
//! Blocks are user turns, an assistant message's thinking, its text, and
//! each tool call with its result (they leave together). Lowest score goes
//! first until the freed tokens cover the excess over the budget (the
//! engine's `evict(target_free_tokens)`). Never evicted, as the design
//! requires: the system prompt, the original task (first user turn), the
//! current user turn and the active tool cycle (latest step).

use cwl::{Annotation, Block};

use super::work::WorkUnit;
use super::{Policy, PolicyConfig, PolicyError, Request};
use crate::metrics::anchors::AnchorId;
use crate::transcript::{Entry, Lab, Unit};

pub use cwl_cwm::scorers::{BlockInfo, ContentType, Scorer};

#[derive(Debug, Clone, Copy, Default)]
struct Refs {
    last: Option<u64>,
    count: u32,
}

impl Refs {
    fn touch(&mut self, entry: &Entry, used: &[AnchorId], turn: u64) {
        if used.iter().any(|a| entry.has_anchor(*a)) {
            self.last = Some(turn);
            self.count += 1;
        }
    }
}

#[derive(Debug)]
struct Slot {
    unit: WorkUnit,
    created: u64,
    refs: Refs,
    result_refs: Vec<(u64, Refs)>,
    first_user: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    User,
    Thinking,
    Text,
    Result(u64),
}

/// A policy evicting by one of the design's scorers.
#[derive(Debug)]
pub struct Scored {
    scorer: Scorer,
    budget: usize,
    slots: Vec<Slot>,
    turn: u64,
    seen_user: bool,
}

impl Scored {
    /// The `scorer` policy at `config.budget`.
    pub fn new(scorer: Scorer, config: &PolicyConfig, _: &Lab) -> Self {
        Scored {
            scorer,
            budget: config.budget,
            slots: Vec::new(),
            turn: 0,
            seen_user: false,
        }
    }

    fn total(&self, lab: &Lab) -> usize {
        lab.tools_tokens() + self.slots.iter().map(|s| s.unit.tokens(lab)).sum::<usize>()
    }

    fn evict(&mut self, lab: &Lab) {
        let total = self.total(lab);
        if total <= self.budget {
            return;
        }
        let target = total - self.budget;
        let current = self.turn + 1;
        let last_user = self.slots.iter().rposition(|s| s.unit.is_user());
        let last_step = self
            .slots
            .iter()
            .rposition(|s| matches!(s.unit, WorkUnit::Step(_)));
        let mut blocks: Vec<(f64, u64, usize, usize, Target, usize)> = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if Some(index) == last_user || Some(index) == last_step || slot.first_user {
                continue;
            }
            let created = slot.created;
            let info = |content_type, refs: Refs| BlockInfo {
                content_type,
                created,
                last_ref: refs.last,
                refs: refs.count,
                relevance: None,
                do_not_evict: false,
            };
            let is_user = slot.unit.is_user();
            let slot_refs = slot.refs;
            match &mut slot.unit {
                WorkUnit::Message(entry) if is_user => {
                    let block = info(ContentType::User, slot_refs);
                    blocks.push((
                        self.scorer.score(&block, current),
                        created,
                        index,
                        0,
                        Target::User,
                        lab.billed(entry),
                    ));
                }
                WorkUnit::Step(step) => {
                    // Reasoning the provider no longer bills frees nothing.
                    let thinking = if lab.reasoning_dropped(&step.original) {
                        0
                    } else {
                        step.block_tokens_where(|b| matches!(b, Block::Reasoning { .. }), lab)
                    };
                    if thinking > 0 {
                        let block = info(ContentType::Thinking, slot_refs);
                        blocks.push((
                            self.scorer.score(&block, current),
                            created,
                            index,
                            0,
                            Target::Thinking,
                            thinking,
                        ));
                    }
                    let text = step.block_tokens_where(|b| matches!(b, Block::Text { .. }), lab);
                    if text > 0 {
                        let block = info(ContentType::Assistant, slot_refs);
                        blocks.push((
                            self.scorer.score(&block, current),
                            created,
                            index,
                            1,
                            Target::Text,
                            text,
                        ));
                    }
                    for r in 0..step.results.len() {
                        let id = step.results[r].original.id();
                        let refs = slot
                            .result_refs
                            .iter()
                            .find(|(i, _)| *i == id)
                            .map(|(_, r)| *r)
                            .unwrap_or_default();
                        let tokens = step.results[r].current.tokens() + step.call_tokens(r, lab);
                        let block = info(ContentType::ToolResult, refs);
                        blocks.push((
                            self.scorer.score(&block, current),
                            created,
                            index,
                            2 + r,
                            Target::Result(id),
                            tokens,
                        ));
                    }
                }
                _ => {}
            }
        }
        blocks.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        let mut freed = 0;
        let mut drop_user = vec![false; self.slots.len()];
        for (_, _, index, _, target_block, tokens) in blocks {
            if freed >= target {
                break;
            }
            match (&mut self.slots[index].unit, target_block) {
                (WorkUnit::Message(_), Target::User) => {
                    drop_user[index] = true;
                    freed += tokens;
                }
                (WorkUnit::Step(step), Target::Thinking) => {
                    freed += step.remove_blocks(|b| matches!(b, Block::Reasoning { .. }), lab);
                }
                (WorkUnit::Step(step), Target::Text) => {
                    freed += step.remove_blocks(|b| matches!(b, Block::Text { .. }), lab);
                }
                (WorkUnit::Step(step), Target::Result(id)) => {
                    if let Some(r) = step.results.iter().position(|s| s.original.id() == id) {
                        freed += step.remove_result(r, lab);
                    }
                }
                _ => {}
            }
        }
        let mut index = 0;
        self.slots.retain(|slot| {
            let keep =
                !drop_user[index] && !matches!(&slot.unit, WorkUnit::Step(step) if step.is_empty());
            index += 1;
            keep
        });
    }
}

impl Policy for Scored {
    fn name(&self) -> &'static str {
        self.scorer.name()
    }

    fn push(&mut self, unit: &Unit, _: &[Annotation], _: &mut Lab) -> Result<(), PolicyError> {
        if let Unit::Step(step) = unit {
            self.turn += 1;
            let turn = self.turn;
            for slot in &mut self.slots {
                match &slot.unit {
                    WorkUnit::Message(entry) => slot.refs.touch(entry, &step.used, turn),
                    WorkUnit::Step(work) => {
                        slot.refs.touch(&work.original, &step.used, turn);
                        for result in &work.results {
                            let id = result.original.id();
                            if let Some((_, refs)) =
                                slot.result_refs.iter_mut().find(|(i, _)| *i == id)
                            {
                                refs.touch(&result.original, &step.used, turn);
                            }
                        }
                    }
                    WorkUnit::Folded(_) => {}
                }
            }
        }
        let first_user = unit.is_user() && !self.seen_user;
        self.seen_user |= unit.is_user();
        let result_refs = match unit {
            Unit::Step(step) => step
                .results
                .iter()
                .map(|r| (r.id(), Refs::default()))
                .collect(),
            Unit::Message(_) => Vec::new(),
        };
        self.slots.push(Slot {
            unit: WorkUnit::new(unit),
            created: self.turn,
            refs: Refs::default(),
            result_refs,
            first_user,
        });
        Ok(())
    }

    fn request(&mut self, lab: &mut Lab) -> Result<Request, PolicyError> {
        self.evict(lab);
        let mut pieces = Vec::new();
        for slot in &mut self.slots {
            slot.unit.materialize(lab, &mut pieces);
        }
        Ok(Request::pieces(pieces))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(
        content_type: ContentType,
        created: u64,
        last_ref: Option<u64>,
        refs: u32,
    ) -> BlockInfo {
        BlockInfo {
            content_type,
            created,
            last_ref,
            refs,
            relevance: None,
            do_not_evict: false,
        }
    }

    #[test]
    fn scores_follow_the_design() {
        let b = block(ContentType::ToolResult, 0, None, 0);
        assert!((Scorer::Fifo.score(&b, 10) - (-1.0f64).exp()).abs() < 1e-12);
        assert_eq!(Scorer::Lru.score(&b, 10), 0.3);
        let referenced = block(ContentType::ToolResult, 0, Some(5), 1);
        assert!((Scorer::Lru.score(&referenced, 10) - (-1.0f64).exp()).abs() < 1e-12);
        assert!(
            Scorer::Lru.score(&block(ContentType::ToolResult, 0, Some(2), 1), 10)
                < Scorer::Lru.score(&referenced, 10),
            "less recently referenced scores lower"
        );
        assert!(
            Scorer::Lru.score(&block(ContentType::ToolResult, 0, Some(3), 1), 10)
                < Scorer::Lru.score(&b, 10)
                && Scorer::Lru.score(&block(ContentType::ToolResult, 0, Some(4), 1), 10)
                    > Scorer::Lru.score(&b, 10),
            "never referenced outlasts referenced 7 turns ago, not 6"
        );
        assert_eq!(Scorer::Type.score(&b, 9), 0.0);
        assert!((Scorer::Type.score(&b, 4) - 0.5).abs() < 1e-12);
        assert_eq!(
            Scorer::Type.score(&block(ContentType::Thinking, 0, None, 0), 3),
            0.0
        );
        let p = Scorer::Priority.score(&block(ContentType::User, 0, None, 5), 0);
        assert!((p - (0.30 + 0.125 + 0.20 + 0.15)).abs() < 1e-12);
        let w = Scorer::Weighted.score(&b, 4);
        let expected = 0.15 * Scorer::Fifo.score(&b, 4)
            + 0.15 * 0.3
            + 0.40 * Scorer::Priority.score(&b, 4)
            + 0.30 * Scorer::Type.score(&b, 4);
        assert!((w - expected).abs() < 1e-12);
    }
}
