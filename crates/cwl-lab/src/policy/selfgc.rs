//! The heuristic baselines of the Self-GC paper (Hao et al., 2026,
//! "Self-GC: Self-Governing Context for Long-Horizon LLM Agents", section
//! Baselines), replayed under the same budget as every other policy:
//!
//! - `oldest-turn`: "chronologically folds the oldest conversational spans
//!   while preserving the latest user turn". A span is a user turn and the
//!   steps after it; older spans fold whole, the latest span step by step.
//!   Consecutive folded units become one pointer line.
//! - `tool-prune`: "greedily removes tool outputs under token pressure":
//!   largest output first, each with its call.
//! - `tool-mask-prune`: "first masks low-signal tool spans and then prunes
//!   remaining tool outputs when additional budget is needed": outputs
//!   longer than 7 lines keep their first and last 3 lines (oldest first),
//!   then greedy pruning as above.
//! - `hybrid`: "combines chronological turn folding with tool-output
//!   pruning": tool outputs are pruned oldest first, then turns are folded
//!   as in `oldest-turn`.
//!
//! The paper's "mandatory last-turn retention" is applied as: the system
//! prompt, the latest user turn and the latest step (the model's current
//! tool cycle) are never touched. (Retaining the whole latest span would
//! leave nothing to do in single-task agent logs.) Every edit is final.

use cwl::{Annotation, Message};

use super::work::{WorkUnit, placeholder, replaced_result};
use super::{Policy, PolicyConfig, PolicyError, Request};
use crate::transcript::{Lab, Unit};

/// Lines kept at each end of a masked output.
pub const MASK_KEEP: usize = 3;

/// Which heuristic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Chronological turn folding.
    OldestTurn,
    /// Greedy tool-output pruning.
    ToolPrune,
    /// Masking, then greedy pruning.
    ToolMaskPrune,
    /// Chronological pruning, then turn folding.
    Hybrid,
}

#[derive(Debug)]
struct Slot {
    unit: WorkUnit,
    span: u32,
    folded: Option<(usize, usize)>,
}

/// A Self-GC heuristic baseline.
#[derive(Debug)]
pub struct SelfGc {
    variant: Variant,
    budget: usize,
    slots: Vec<Slot>,
    span: u32,
}

impl SelfGc {
    /// The `variant` heuristic at `config.budget`.
    pub fn new(variant: Variant, config: &PolicyConfig, _: &Lab) -> Self {
        SelfGc {
            variant,
            budget: config.budget,
            slots: Vec::new(),
            span: 0,
        }
    }

    fn total(&self, lab: &Lab) -> usize {
        lab.tools_tokens() + self.slots.iter().map(|s| s.unit.tokens(lab)).sum::<usize>()
    }

    /// Which slots are never touched: system, latest user turn, last step.
    fn protected(&self) -> Vec<bool> {
        let last_user = self.slots.iter().rposition(|s| s.unit.is_user());
        let last_step = self
            .slots
            .iter()
            .rposition(|s| matches!(s.unit, WorkUnit::Step(_)));
        (0..self.slots.len())
            .map(|i| self.slots[i].unit.is_system() || Some(i) == last_user || Some(i) == last_step)
            .collect()
    }

    /// Tool results outside protected steps: (slot, result id, tokens incl. call).
    fn outputs(&mut self, lab: &Lab) -> Vec<(usize, u64, usize)> {
        let mut out = Vec::new();
        let protected = self.protected();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if protected[index] {
                continue;
            }
            if let WorkUnit::Step(step) = &mut slot.unit {
                for r in 0..step.results.len() {
                    let tokens = step.results[r].current.tokens() + step.call_tokens(r, lab);
                    out.push((index, step.results[r].original.id(), tokens));
                }
            }
        }
        out
    }

    fn prune(
        &mut self,
        mut candidates: Vec<(usize, u64, usize)>,
        greedy: bool,
        total: &mut usize,
        lab: &Lab,
    ) {
        if greedy {
            candidates.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        }
        for (index, id, _) in candidates {
            if *total <= self.budget {
                break;
            }
            if let WorkUnit::Step(step) = &mut self.slots[index].unit
                && let Some(r) = step.results.iter().position(|s| s.original.id() == id)
            {
                *total -= step.remove_result(r, lab);
            }
        }
        self.slots
            .retain(|s| !matches!(&s.unit, WorkUnit::Step(step) if step.is_empty()));
    }

    fn mask(&mut self, total: &mut usize, lab: &mut Lab) {
        let protected = self.protected();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if *total <= self.budget {
                return;
            }
            if protected[index] {
                continue;
            }
            let WorkUnit::Step(step) = &mut slot.unit else {
                continue;
            };
            for r in 0..step.results.len() {
                if *total <= self.budget {
                    return;
                }
                if step.results[r].replaced() {
                    continue;
                }
                let Message::ToolResult(result) = step.results[r].original.message() else {
                    continue;
                };
                let lines: Vec<&str> = result.content.lines().collect();
                if lines.len() <= 2 * MASK_KEEP + 1 {
                    continue;
                }
                let hidden = lines.len() - 2 * MASK_KEEP;
                let text = format!(
                    "{}\n[… {hidden} lines masked …]\n{}",
                    lines[..MASK_KEEP].join("\n"),
                    lines[lines.len() - MASK_KEEP..].join("\n")
                );
                let masked = replaced_result(lab, &step.results[r].original, text);
                *total -= step.replace_result(r, masked);
            }
        }
    }

    fn fold(&mut self, total: &mut usize, lab: &mut Lab) {
        loop {
            let latest_span = self
                .slots
                .iter()
                .rev()
                .find(|s| s.unit.is_user())
                .map_or(0, |s| s.span);
            let mut groups: Vec<Vec<usize>> = Vec::new();
            let protected = self.protected();
            for (index, slot) in self.slots.iter().enumerate() {
                if protected[index] || slot.folded.is_some() {
                    continue;
                }
                let span = slot.span;
                let same_group = span < latest_span
                    && groups.last().is_some_and(|g| self.slots[g[0]].span == span);
                match groups.last_mut() {
                    Some(group) if same_group => group.push(index),
                    _ => groups.push(vec![index]),
                }
            }
            if groups.is_empty() {
                return;
            }
            for group in groups {
                if *total <= self.budget {
                    break;
                }
                for index in group {
                    let slot = &mut self.slots[index];
                    let tokens = slot.unit.tokens(lab);
                    let messages = match &slot.unit {
                        WorkUnit::Step(step) => 1 + step.results.len(),
                        _ => 1,
                    };
                    slot.folded = Some((messages, tokens));
                    *total = total.saturating_sub(tokens);
                }
            }
            self.merge_folds(lab);
            *total = self.total(lab);
            if *total <= self.budget {
                return;
            }
        }
    }

    /// Replaces each run of folded slots by one pointer line.
    fn merge_folds(&mut self, lab: &mut Lab) {
        let slots = std::mem::take(&mut self.slots);
        let mut run: Option<(u32, u32, usize, usize)> = None;
        let flush = |run: &mut Option<(u32, u32, usize, usize)>,
                     out: &mut Vec<Slot>,
                     lab: &mut Lab| {
            if let Some((first, last, messages, tokens)) = run.take() {
                let turns = if first == last {
                    format!("turn {first}")
                } else {
                    format!("turns {first}–{last}")
                };
                let text = format!(
                    "[Folded {messages} earlier messages ({tokens} tokens) of {turns}; not shown.]"
                );
                out.push(Slot {
                    unit: WorkUnit::Folded(placeholder(lab, text)),
                    span: last,
                    folded: Some((messages, tokens)),
                });
            }
        };
        let mut out = Vec::with_capacity(slots.len());
        for slot in slots {
            match slot.folded {
                Some((messages, tokens)) => {
                    let (first, _, m, t) = run.unwrap_or((slot.span, slot.span, 0, 0));
                    run = Some((first, slot.span, m + messages, t + tokens));
                }
                None => {
                    flush(&mut run, &mut out, lab);
                    out.push(slot);
                }
            }
        }
        flush(&mut run, &mut out, lab);
        self.slots = out;
    }
}

impl Policy for SelfGc {
    fn name(&self) -> &'static str {
        match self.variant {
            Variant::OldestTurn => "oldest-turn",
            Variant::ToolPrune => "tool-prune",
            Variant::ToolMaskPrune => "tool-mask-prune",
            Variant::Hybrid => "hybrid",
        }
    }

    fn push(&mut self, unit: &Unit, _: &[Annotation], _: &mut Lab) -> Result<(), PolicyError> {
        if unit.is_user() {
            self.span += 1;
        }
        self.slots.push(Slot {
            unit: WorkUnit::new(unit),
            span: self.span,
            folded: None,
        });
        Ok(())
    }

    fn request(&mut self, lab: &mut Lab) -> Result<Request, PolicyError> {
        let mut total = self.total(lab);
        if total > self.budget {
            match self.variant {
                Variant::OldestTurn => self.fold(&mut total, lab),
                Variant::ToolPrune => {
                    let outputs = self.outputs(lab);
                    self.prune(outputs, true, &mut total, lab);
                }
                Variant::ToolMaskPrune => {
                    self.mask(&mut total, lab);
                    let outputs = self.outputs(lab);
                    self.prune(outputs, true, &mut total, lab);
                }
                Variant::Hybrid => {
                    let outputs = self.outputs(lab);
                    self.prune(outputs, false, &mut total, lab);
                    if total > self.budget {
                        self.fold(&mut total, lab);
                    }
                }
            }
        }
        let mut pieces = Vec::new();
        for slot in &mut self.slots {
            slot.unit.materialize(lab, &mut pieces);
        }
        Ok(Request::pieces(pieces))
    }
}
