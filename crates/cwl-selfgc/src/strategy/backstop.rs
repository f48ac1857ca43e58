//! The budget backstop: a deterministic prune, oldest first, whenever the
//! prompt is over τ and no plan brought it under.

use std::collections::HashSet;

use cwl::Block;
use cwl::strategy::Strategy;
use cwl::tokens::{block_tokens, message_tokens};

use crate::billed::message_billed;
use crate::objects::{ObjectId, ObjectKind};
use crate::plan::{Action, Target};

use super::{BACKSTOP_REASON, SelfGc};

impl SelfGc {
    /// The hard backstop: over τ, prunes the oldest tool results, then
    /// whole old conversations, down to the low-water mark.
    pub(super) fn backstop(&mut self) -> Option<String> {
        let budget = self.meter.budget();
        if self.tokens() <= budget {
            return None;
        }
        let floor = (budget as f64 * self.meter.config().low_water.get()) as usize;
        let mut need = self.tokens().saturating_sub(floor);
        let in_flight = self.in_flight();
        let latest = self.table.latest_user();
        let protected = self.protected();
        let guarded: HashSet<u32> = protected
            .iter()
            .filter_map(|id| self.table.get(id)?.parent)
            .collect();
        let pruned: HashSet<&ObjectId> = self
            .committed
            .iter()
            .filter(|t| t.action == Action::Prune)
            .map(|t| &t.id)
            .collect();
        let acted: HashSet<&ObjectId> = self.committed.iter().map(|t| &t.id).collect();
        let mut prunes: Vec<Target> = Vec::new();
        let counter = self.counter.as_ref();
        // Reasoning before the latest user message is not billed.
        let turn_start = self.meter.config().reasoning.turn_start(&self.transcript);
        // First what no plan rule protects, then, as a last resort for the
        // budget, protected work and what plans folded or masked.
        let tiers = [
            (ObjectKind::Function, true),
            (ObjectKind::Conversation, true),
            (ObjectKind::Function, false),
            (ObjectKind::Conversation, false),
        ];
        for (kind, strict) in tiers {
            for object in self.table.objects() {
                if need == 0 {
                    break;
                }
                let parent = match &object.id {
                    ObjectId::User(k) => Some(*k),
                    ObjectId::Function { .. } => object.parent,
                };
                let spared = if strict {
                    acted.contains(&object.id)
                        || protected.contains(&object.id)
                        || parent.is_some_and(|k| {
                            guarded.contains(&k) && kind == ObjectKind::Conversation
                        })
                } else {
                    pruned.contains(&object.id)
                };
                let eligible = object.id.kind() == kind
                    && !spared
                    && parent.is_some_and(|k| !acted.contains(&ObjectId::User(k)))
                    && object.messages.end <= in_flight
                    && object.call.as_ref().is_none_or(|(at, _)| *at < in_flight)
                    && (kind == ObjectKind::Function || parent != latest)
                    && !prunes.iter().any(|t| {
                        matches!(&t.id, ObjectId::User(k) if Some(*k) == parent)
                            || t.id == object.id
                    });
                if !eligible {
                    continue;
                }
                let saved: usize = match &object.id {
                    ObjectId::Function { .. } => {
                        let call = object
                            .call
                            .as_ref()
                            .and_then(|(at, id)| {
                                self.transcript[*at].tool_calls().find(|c| c.id == *id)
                            })
                            .map_or(0, |c| block_tokens(counter, &Block::ToolCall(c.clone())));
                        call + message_tokens(counter, &self.transcript[object.messages.start])
                    }
                    ObjectId::User(_) => (object.messages.start + 1..object.messages.end)
                        .map(|at| message_billed(counter, &self.transcript[at], at < turn_start))
                        .sum(),
                };
                if saved == 0 {
                    continue;
                }
                need = need.saturating_sub(saved);
                prunes.push(Target {
                    action: Action::Prune,
                    id: object.id.clone(),
                    kind: Some(kind),
                    reason: BACKSTOP_REASON.to_string(),
                });
            }
        }
        if prunes.is_empty() {
            return None;
        }
        let count = prunes.len();
        self.committed.extend(prunes);
        self.stats.backstops += 1;
        Some(format!(
            "self-gc: the prompt was over the budget of {budget} with no plan committed; the budget backstop pruned the {count} oldest objects"
        ))
    }
}
