//! Rehearsal: a plan tried on a copy of the view before anything changes.
//!
//! Targets are resolved against the object table; edits to unknown ids,
//! to the latest turn (the latest user request as a whole, and the
//! latest model response with its results, which go back unmodified), to
//! protected objects (instruction files, the active work), to objects
//! before the first user turn and to objects an earlier committed plan
//! already acted on are dropped; overlapping actions are normalised (an
//! action on a conversation covers the functions inside it; two actions on
//! one object keep the more conservative: fold, then mask, then prune).
//! The projection (the committed actions and the plan's, over the whole
//! transcript) is materialised and counted; a plan that saves too little
//! is rejected, and a rejected plan changes nothing.
//!
//! The projection keeps the guarantees every strategy keeps: user turns
//! stay (a fold attaches its recovery pointer to the user message as a
//! control-plane reminder), a tool call and its result leave together, and
//! an assistant message left empty goes.

use std::collections::{BTreeMap, HashSet};

use cwl::tokens::message_tokens;
use cwl::{Block, Message, ReasoningScope, TokenCounter};
use thiserror::Error;

use crate::billed::billed_tokens;
use crate::objects::{ObjectId, ObjectKind, ObjectTable};
use crate::plan::{Action, Plan, Target};

/// Lines a mask keeps at each end of a tool result.
pub const MASK_KEEP_LINES: usize = 5;

/// Why a target was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// The text names no object.
    Malformed,
    /// No object of this session has the id.
    Unknown,
    /// The plan's `kind` disagrees with the id.
    KindMismatch,
    /// The latest turn, or a tool result inside it.
    CutTurn,
    /// A protected object (instruction files, the active work) or one
    /// before the first user turn.
    Protected,
    /// Inside a conversation the plan already acts on.
    Covered,
    /// The object has a more conservative action in the same plan.
    Conflict,
}

/// A target rehearsal dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The action asked for.
    pub action: Action,
    /// The id as given.
    pub target: String,
    /// Why it was dropped.
    pub reason: DropReason,
}

/// The exact payload of a folded object, for the harness to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sidecar {
    /// The folded object.
    pub id: ObjectId,
    /// For a function: the result's content, byte for byte. For a
    /// conversation: the JSON array of the folded messages.
    pub payload: String,
}

/// The view a plan would leave, and what it folds away.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Projection {
    /// The messages of the projected view.
    pub messages: Vec<Message>,
    /// For each message of the view: its index in the transcript, and
    /// whether the projection altered it.
    pub origins: Vec<(usize, bool)>,
    /// The payloads to persist before the view is committed.
    pub sidecars: Vec<Sidecar>,
}

/// An accepted plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Rehearsed {
    /// The targets applied, normalised.
    pub accepted: Vec<Target>,
    /// The targets dropped, with reasons.
    pub dropped: Vec<Dropped>,
    /// The projected view.
    pub projection: Projection,
    /// Tokens of the view before (as billed, for [`Rehearsal::run_billed`]).
    pub tokens_before: usize,
    /// Tokens of the projected view (likewise).
    pub tokens_after: usize,
}

impl Rehearsed {
    /// The paper's pruning rate, Prune = 1 − |C′|/|C|.
    pub fn prune(&self) -> f64 {
        prune(self.tokens_before, self.tokens_after)
    }
}

/// A plan rehearsal refused; the view is unchanged.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Rejected {
    /// No target survived.
    #[error("no target of the plan could be applied ({} dropped)", dropped.len())]
    Empty {
        /// The targets dropped.
        dropped: Vec<Dropped>,
    },
    /// The projection saves less than the minimum.
    #[error("the plan would prune {:.1}% of the view, under the minimum of {:.1}%", prune * 100.0, min * 100.0)]
    TooLittle {
        /// What it would prune.
        prune: f64,
        /// The minimum.
        min: f64,
        /// The targets dropped.
        dropped: Vec<Dropped>,
    },
}

/// The inputs of one rehearsal.
pub struct Rehearsal<'a> {
    /// The current view.
    pub messages: &'a [Message],
    /// Its objects (indexed over the same messages).
    pub table: &'a ObjectTable,
    /// How tokens are counted.
    pub counter: &'a dyn TokenCounter,
    /// Objects no plan may touch besides the cut turn.
    pub protected: &'a HashSet<ObjectId>,
    /// The smallest pruning rate a plan must reach to be accepted.
    pub min_prune: f64,
    /// Index of the first in-flight message (the latest model response;
    /// it and what follows are never edited); `messages.len()` when none.
    pub in_flight: usize,
    /// Actions already committed: the plan comes on top of them.
    pub committed: &'a [Target],
}

impl Rehearsal<'_> {
    /// Rehearses `plan`: the accepted, normalised targets and the
    /// projected view, or why the plan was rejected. Every message of the
    /// views counts in full ([`ReasoningScope::AllTurns`]).
    pub fn run(&self, plan: &Plan) -> Result<Rehearsed, Rejected> {
        self.run_billed(plan, ReasoningScope::AllTurns)
    }

    /// [`Rehearsal::run`], with the views' tokens (and so the pruning
    /// rate) counted as a provider of `reasoning` bills them: under
    /// [`ReasoningScope::CurrentTurn`] the reasoning of assistant messages
    /// before the latest user message counts for nothing.
    pub fn run_billed(
        &self,
        plan: &Plan,
        reasoning: ReasoningScope,
    ) -> Result<Rehearsed, Rejected> {
        let (accepted, dropped) = self.normalise(plan);
        if accepted.is_empty() {
            return Err(Rejected::Empty { dropped });
        }
        let current = project(self.messages, self.table, self.counter, self.committed);
        let all: Vec<Target> = self.committed.iter().chain(&accepted).cloned().collect();
        let mut projection = project(self.messages, self.table, self.counter, &all);
        projection
            .sidecars
            .retain(|sidecar| accepted.iter().any(|target| target.id == sidecar.id));
        let count = |messages: &[Message]| billed_tokens(self.counter, messages, reasoning);
        let tokens_before = count(&current.messages);
        let tokens_after = count(&projection.messages);
        let rate = prune(tokens_before, tokens_after);
        if rate < self.min_prune {
            return Err(Rejected::TooLittle {
                prune: rate,
                min: self.min_prune,
                dropped,
            });
        }
        Ok(Rehearsed {
            accepted,
            dropped,
            projection,
            tokens_before,
            tokens_after,
        })
    }

    fn normalise(&self, plan: &Plan) -> (Vec<Target>, Vec<Dropped>) {
        let mut dropped: Vec<Dropped> = plan
            .invalid
            .iter()
            .map(|(action, text)| Dropped {
                action: *action,
                target: text.clone(),
                reason: DropReason::Malformed,
            })
            .collect();
        let drop = |target: &Target, reason| Dropped {
            action: target.action,
            target: target.id.short(),
            reason,
        };
        let cut = self.table.latest_user();
        let done: HashSet<&ObjectId> = self.committed.iter().map(|t| &t.id).collect();
        let done_users: HashSet<u32> = done
            .iter()
            .filter_map(|id| match id {
                ObjectId::User(k) => Some(*k),
                ObjectId::Function { .. } => None,
            })
            .collect();
        // Conversations holding a protected object: no whole-turn action.
        let guarded: HashSet<u32> = self
            .protected
            .iter()
            .filter_map(|id| self.table.get(id)?.parent)
            .collect();
        // The target kept for each object, by its place in the plan.
        let mut chosen: BTreeMap<ObjectId, (usize, &Target, Option<u32>)> = BTreeMap::new();
        for (at, target) in plan.targets.iter().enumerate() {
            let Some(object) = self.table.get(&target.id) else {
                dropped.push(drop(target, DropReason::Unknown));
                continue;
            };
            let conversation = match &target.id {
                ObjectId::User(k) => Some(*k),
                ObjectId::Function { .. } => object.parent,
            };
            let in_flight = object.messages.end > self.in_flight
                || object
                    .call
                    .as_ref()
                    .is_some_and(|(at, _)| *at >= self.in_flight);
            let reason = if target.kind.is_some_and(|kind| kind != target.id.kind()) {
                Some(DropReason::KindMismatch)
            } else if in_flight
                || (target.id.kind() == ObjectKind::Conversation && conversation == cut)
            {
                Some(DropReason::CutTurn)
            } else if done.contains(&target.id)
                || conversation.is_some_and(|k| done_users.contains(&k))
            {
                Some(DropReason::Covered)
            } else if conversation.is_none()
                || self.protected.contains(&target.id)
                || conversation.is_some_and(|k| self.protected.contains(&ObjectId::User(k)))
                || matches!(target.id, ObjectId::User(k) if guarded.contains(&k))
            {
                Some(DropReason::Protected)
            } else {
                None
            };
            if let Some(reason) = reason {
                dropped.push(drop(target, reason));
                continue;
            }
            match chosen.get(&target.id) {
                Some((_, kept, _)) if kept.action >= target.action => {
                    dropped.push(drop(target, DropReason::Conflict));
                }
                previous => {
                    if let Some((_, kept, _)) = previous {
                        dropped.push(drop(kept, DropReason::Conflict));
                    }
                    chosen.insert(target.id.clone(), (at, target, object.parent));
                }
            }
        }
        let covering: HashSet<u32> = chosen
            .keys()
            .filter_map(|id| match id {
                ObjectId::User(k) => Some(*k),
                ObjectId::Function { .. } => None,
            })
            .collect();
        let mut kept: Vec<(usize, &Target, Option<u32>)> = chosen.into_values().collect();
        kept.sort_by_key(|(at, _, _)| *at);
        let mut accepted = Vec::new();
        for (_, target, parent) in kept {
            if target.id.kind() == ObjectKind::Function
                && parent.is_some_and(|k| covering.contains(&k))
            {
                dropped.push(drop(target, DropReason::Covered));
            } else {
                accepted.push(target.clone());
            }
        }
        (accepted, dropped)
    }
}

/// The view `targets` leave of the transcript `messages` (indexed in
/// `table`): a strategy's committed view is the projection of every
/// action it committed. Targets naming no object are skipped.
pub fn project(
    messages: &[Message],
    table: &ObjectTable,
    counter: &dyn TokenCounter,
    targets: &[Target],
) -> Projection {
    Projector {
        messages,
        table,
        counter,
    }
    .project(targets)
}

struct Projector<'a> {
    messages: &'a [Message],
    table: &'a ObjectTable,
    counter: &'a dyn TokenCounter,
}

impl Projector<'_> {
    fn project(&self, accepted: &[Target]) -> Projection {
        let mut messages: Vec<Option<Message>> = self.messages.iter().cloned().map(Some).collect();
        let mut altered = vec![false; messages.len()];
        let mut sidecars = Vec::new();
        let mut reminders: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        let mut pruned_calls: HashSet<(usize, String)> = HashSet::new();
        for target in accepted {
            let Some(object) = self.table.get(&target.id) else {
                continue;
            };
            match (&target.id, target.action) {
                (ObjectId::Function { .. }, action) => {
                    let at = object.messages.start;
                    let Some(Message::ToolResult(result)) = messages[at].as_mut() else {
                        continue;
                    };
                    altered[at] = true;
                    match action {
                        Action::Fold => {
                            sidecars.push(Sidecar {
                                id: target.id.clone(),
                                payload: result.content.clone(),
                            });
                            let tokens = self.counter.count(&result.content);
                            result.content = format!(
                                "[folded as {}; the recall tool restores it exactly]",
                                target.id
                            );
                            let what = object
                                .call
                                .as_ref()
                                .and_then(|(at, id)| call_of(&self.messages[*at], id))
                                .map(|(name, arguments)| {
                                    format!("{name} {}", cwl::shorten(arguments, 81))
                                })
                                .unwrap_or_else(|| result.tool_name.clone());
                            if let Some(user) = object
                                .parent
                                .and_then(|k| self.table.get(&ObjectId::User(k)))
                            {
                                reminders
                                    .entry(user.messages.start)
                                    .or_default()
                                    .push(format!("{} ({what}, {tokens} tokens)", target.id));
                                altered[user.messages.start] = true;
                            }
                        }
                        Action::Mask => result.content = mask(&result.content),
                        Action::Prune => {
                            messages[at] = None;
                            if let Some(call) = &object.call {
                                pruned_calls.insert(call.clone());
                            }
                        }
                    }
                }
                (ObjectId::User(_), action) => {
                    let span = object.messages.start + 1..object.messages.end;
                    match action {
                        Action::Fold => {
                            let folded: Vec<&Message> =
                                self.messages[span.clone()].iter().collect();
                            let tokens: usize =
                                folded.iter().map(|m| message_tokens(self.counter, m)).sum();
                            sidecars.push(Sidecar {
                                id: target.id.clone(),
                                payload: serde_json::to_string(&folded).unwrap_or_default(),
                            });
                            altered[object.messages.start] = true;
                            reminders
                                .entry(object.messages.start)
                                .or_default()
                                .push(format!(
                                    "{} (the work on this request: {} messages, {tokens} tokens)",
                                    target.id,
                                    folded.len()
                                ));
                            span.for_each(|at| messages[at] = None);
                        }
                        Action::Mask => {
                            for at in span {
                                if let Some(Message::ToolResult(result)) = messages[at].as_mut() {
                                    result.content = mask(&result.content);
                                    altered[at] = true;
                                }
                            }
                        }
                        Action::Prune => span.for_each(|at| messages[at] = None),
                    }
                }
            }
        }
        for (at, message) in messages.iter_mut().enumerate() {
            if let Some(Message::Assistant { content }) = message {
                let before = content.len();
                content.retain(|block| {
                    !matches!(block, Block::ToolCall(call) if pruned_calls.contains(&(at, call.id.clone())))
                });
                altered[at] |= content.len() != before;
                if content
                    .iter()
                    .all(|block| matches!(block, Block::Reasoning { .. }))
                {
                    *message = None;
                }
            }
        }
        for (at, folded) in reminders {
            if let Some(Message::User { content }) = messages[at].as_mut() {
                content.push_str(&format!(
                    "\n<system-reminder>Folded to sidecars; the recall tool restores each exactly: {}</system-reminder>",
                    folded.join("; ")
                ));
            }
        }
        let (messages, origins) = messages
            .into_iter()
            .enumerate()
            .filter_map(|(at, message)| message.map(|m| (m, (at, altered[at]))))
            .unzip();
        Projection {
            messages,
            origins,
            sidecars,
        }
    }
}

/// The pruning rate of a view going from `before` to `after` tokens.
fn prune(before: usize, after: usize) -> f64 {
    if before == 0 {
        return 0.0;
    }
    1.0 - after as f64 / before as f64
}

/// The name and arguments of the call `id` in `message`.
fn call_of<'a>(message: &'a Message, id: &str) -> Option<(&'a str, &'a str)> {
    message
        .tool_calls()
        .find(|call| call.id == id)
        .map(|call| (call.name.as_str(), call.arguments.as_str()))
}

/// `text` with its middle elided: the first and last
/// [`MASK_KEEP_LINES`] lines kept and the count of the rest.
pub fn mask(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= 2 * MASK_KEEP_LINES + 1 {
        return text.to_string();
    }
    let hidden = lines.len() - 2 * MASK_KEEP_LINES;
    format!(
        "{}\n[… {hidden} lines masked …]\n{}",
        lines[..MASK_KEEP_LINES].join("\n"),
        lines[lines.len() - MASK_KEEP_LINES..].join("\n")
    )
}
