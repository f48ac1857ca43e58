//! Governance rounds: the planner's answer rehearsed into a pending plan,
//! and the pending plan committed by the cache-aware rule.

use std::collections::HashSet;

use cwl::Message;
use cwl::strategy::{SidecarFile, Strategy};

use crate::commit::{Commit, decide};
use crate::fold::FoldRecord;
use crate::objects::{ObjectId, ObjectKind};
use crate::plan::{Action, Plan, Target, parse_plan};
use crate::rehearsal::{Dropped, Rehearsal, Rehearsed, Rejected};

use super::{CommitTokens, INSTRUCTION_FILES, Pending, SelfGc};

impl SelfGc {
    /// Objects no plan may touch besides the cut turn: reads of
    /// instruction files and the tool results of the active episode.
    pub(super) fn protected(&self) -> HashSet<ObjectId> {
        let active_from = self.shadow.graph().active().map(|id| {
            let (first, _) = self.shadow.graph().episode(id).span();
            usize::try_from(first).unwrap_or(usize::MAX)
        });
        self.table
            .objects()
            .iter()
            .filter(|object| object.id.kind() == ObjectKind::Function)
            .filter(|object| {
                let instructions = object.call.as_ref().is_some_and(|(at, id)| {
                    self.transcript[*at].tool_calls().any(|call| {
                        call.id == *id
                            && INSTRUCTION_FILES
                                .iter()
                                .any(|file| call.arguments.contains(file))
                    })
                });
                let active = active_from.is_some_and(|first| object.messages.start >= first);
                instructions || active
            })
            .map(|object| object.id.clone())
            .collect()
    }

    pub(super) fn rehearse(&self, plan: &Plan, min_prune: f64) -> Result<Rehearsed, Rejected> {
        let protected = self.protected();
        Rehearsal {
            messages: &self.transcript,
            table: &self.table,
            counter: self.counter.as_ref(),
            protected: &protected,
            min_prune,
            in_flight: self.in_flight(),
            committed: &self.committed,
        }
        .run_billed(plan, self.meter.config().reasoning)
    }

    /// Whether some object could still be collected: otherwise a planner
    /// call could only come back empty.
    pub(super) fn collectable(&self) -> bool {
        let in_flight = self.in_flight();
        let latest = self.table.latest_user();
        let acted: HashSet<&ObjectId> = self.committed.iter().map(|t| &t.id).collect();
        self.table.objects().iter().any(|object| {
            let parent = match &object.id {
                ObjectId::User(k) => Some(*k),
                ObjectId::Function { .. } => object.parent,
            };
            parent.is_some_and(|k| !acted.contains(&ObjectId::User(k)))
                && !acted.contains(&object.id)
                && object.messages.end <= in_flight
                && (object.id.kind() == ObjectKind::Function || parent != latest)
        })
    }

    pub(super) fn note(&mut self, text: String) {
        tracing::info!(target: "cwl_selfgc", "{text}");
        self.notes.push(text);
    }

    pub(super) fn reject(&mut self, reason: String) {
        tracing::warn!(target: "cwl_selfgc", "{reason}");
        self.stats.rejected += 1;
        self.notes
            .push(format!("self-gc: {reason}; the view is unchanged"));
    }

    /// Rehearses the planner's answer; an accepted plan becomes pending.
    pub(super) fn take_answer(&mut self, answer: Result<String, String>) {
        let text = match answer {
            Ok(text) => text,
            Err(reason) => {
                // The harness says "timed out" for a call cut at its timeout.
                if reason.contains("timed out") {
                    self.stats.timeouts += 1;
                } else {
                    self.stats.errors += 1;
                }
                self.stats.failure_streak += 1;
                return self.reject(format!("the planner gave no plan ({reason})"));
            }
        };
        let plan = match parse_plan(&text) {
            Ok(plan) => plan,
            Err(error) => {
                self.stats.malformed += 1;
                self.stats.failure_streak += 1;
                return self.reject(format!("the planner's answer is no plan: {error}"));
            }
        };
        self.stats.failure_streak = 0;
        match self.rehearse(&plan, self.options.min_prune) {
            Ok(rehearsed) => {
                self.stats.accepted += 1;
                if self.pending.is_some() {
                    self.stats.superseded += 1;
                }
                let prune = rehearsed.prune();
                self.note(format!(
                    "self-gc: plan accepted ({}), would prune {:.0}% of the view ({} → {} tokens){}; {}",
                    describe(&rehearsed.accepted),
                    prune * 100.0,
                    rehearsed.tokens_before,
                    rehearsed.tokens_after,
                    dropped_text(&rehearsed.dropped),
                    if prune >= self.options.commit_prune {
                        "commits at the next turn boundary"
                    } else {
                        "pending until the next task boundary, the cache's expiry or the budget"
                    }
                ));
                self.pending = Some(Pending {
                    targets: rehearsed.accepted,
                    summary: plan.summary,
                    prune,
                });
            }
            Err(rejected) => {
                let dropped = match &rejected {
                    Rejected::Empty { dropped } => {
                        self.stats.no_target += 1;
                        dropped
                    }
                    Rejected::TooLittle { dropped, .. } => {
                        self.stats.too_little += 1;
                        dropped
                    }
                };
                let text = format!("plan rejected: {rejected}{}", dropped_text(dropped));
                self.reject(text);
            }
        }
    }

    /// Commits the pending plan if the rule says so now; a description of
    /// what it did.
    pub(super) fn commit_pending(&mut self) -> Option<String> {
        let pending = self.pending.as_ref()?;
        let pending_prune = pending.prune;
        if !self.shadow.pending_calls().is_empty() {
            return None;
        }
        let task_boundary = matches!(self.transcript.last(), Some(Message::User { .. }));
        let over = self.tokens() > self.meter.budget();
        let expired = self.cache_expired;
        if decide(
            pending.prune,
            self.options.commit_prune,
            task_boundary || over || expired.is_some(),
        ) == Commit::Pending
        {
            return None;
        }
        let plan = Plan {
            summary: pending.summary.clone(),
            targets: pending.targets.clone(),
            invalid: Vec::new(),
        };
        // What changed since planning (a new latest turn, a backstop)
        // may drop targets; a plan left with no effect stays pending.
        let rehearsed = self
            .rehearse(&plan, 0.0)
            .ok()
            .filter(|r| r.tokens_after < r.tokens_before)?;
        for sidecar in &rehearsed.projection.sidecars {
            let record = FoldRecord::of(&sidecar.id, &sidecar.payload);
            self.sidecars_out.push(SidecarFile {
                name: record.file.clone(),
                content: sidecar.payload.clone(),
            });
            self.folds.insert(sidecar.id.clone(), record);
        }
        self.committed.extend(rehearsed.accepted.iter().cloned());
        self.pending = None;
        self.stats.commits += 1;
        self.stats.last_commit = Some(CommitTokens {
            before: rehearsed.tokens_before as u64,
            after: rehearsed.tokens_after as u64,
        });
        let why = match expired {
            Some(seconds)
                if !task_boundary && !over && pending_prune < self.options.commit_prune =>
            {
                format!(
                    "; the provider cache had expired ({seconds} s idle, cache_ttl_s {})",
                    self.options.cache_ttl_s
                )
            }
            _ => String::new(),
        };
        Some(format!(
            "self-gc: plan committed ({}), {:.0}% of the view pruned ({} → {} tokens){}{why}",
            describe(&rehearsed.accepted),
            rehearsed.prune() * 100.0,
            rehearsed.tokens_before,
            rehearsed.tokens_after,
            if rehearsed.projection.sidecars.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} payloads folded to sidecars",
                    rehearsed.projection.sidecars.len()
                )
            }
        ))
    }
}

/// `fold 2, prune 1 over user:3, read:7, …`.
fn describe(targets: &[Target]) -> String {
    let count = |action| targets.iter().filter(|t| t.action == action).count();
    let ids: Vec<String> = targets.iter().map(|t| t.id.short()).collect();
    format!(
        "fold {}, mask {}, prune {} over {}",
        count(Action::Fold),
        count(Action::Mask),
        count(Action::Prune),
        ids.join(", ")
    )
}

fn dropped_text(dropped: &[Dropped]) -> String {
    if dropped.is_empty() {
        return String::new();
    }
    let items: Vec<String> = dropped
        .iter()
        .map(|d| format!("{} {} ({:?})", d.action, d.target, d.reason))
        .collect();
    format!("; dropped {}", items.join(", "))
}
