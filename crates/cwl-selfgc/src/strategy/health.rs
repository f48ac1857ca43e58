//! Self-GC's health: how full the window is by its own lines (the trigger
//! share of τ, and τ), what the planner and the backstop did, and the
//! paper's pruning rate, for `--json` events and `cwl sessions show`.
//!
//! Every figure comes from the saved state (the transcript, the committed
//! actions, the fold records, the counters), so a resumed session reports
//! the same figures.

use cwl::Message;
use cwl::recall::RECALL;
use cwl::strategy::{Health, Strategy};
use cwl::tokens::message_tokens;
use serde::Serialize;

use super::{BACKSTOP_REASON, SelfGc};
use crate::billed::billed_tokens;
use crate::plan::Action;

/// Planner failures in a row from which an alert is raised.
pub const PLANNER_FAILURE_ALERT: u64 = 3;

/// The share of τ past which the prompt is critical.
const CRITICAL: f64 = 0.9;

/// Model calls the velocity is measured over.
const VELOCITY_CALLS: usize = 5;

/// Where the prompt is against Self-GC's own lines. Self-GC has no
/// pressure zones of its own: its behaviour changes at the trigger (from
/// there the planner is asked) and at τ (over it the backstop prunes),
/// so those are its zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Zone {
    /// Under the trigger share of τ: no planner round.
    BelowTrigger,
    /// At or over the trigger, within τ: planner rounds run.
    OverTrigger,
    /// Over τ: the budget could not be met.
    OverBudget,
}

impl Zone {
    /// The zone's name as health events spell it.
    pub fn name(self) -> &'static str {
        match self {
            Zone::BelowTrigger => "below-trigger",
            Zone::OverTrigger => "over-trigger",
            Zone::OverBudget => "over-budget",
        }
    }
}

/// The paper's pruning rate, Prune = 1 − |C′|/|C|.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PruneRates {
    /// Of the last commit: its view after over its view before (`None`:
    /// no commit yet).
    pub last: Option<f64>,
    /// Of the whole session: the view over the full transcript, all that
    /// plans and the backstop took out.
    pub cumulative: f64,
    /// Tokens of the full transcript, |C|, as billed (under
    /// [`cwl::ReasoningScope::CurrentTurn`], without the reasoning before
    /// the latest user message).
    pub transcript_tokens: usize,
    /// Tokens of the view, |C′| (messages only, billed as the transcript).
    pub view_tokens: usize,
}

/// Plans rehearsal refused, by reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejections {
    /// All of them.
    pub total: u64,
    /// No target could be applied (unknown ids, the latest turn,
    /// protected work...).
    pub no_target: u64,
    /// The plan would prune less than the minimum.
    pub too_little: u64,
}

/// What became of the planner's plans.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanCounts {
    /// Planner calls asked for.
    pub asked: u64,
    /// Of which answered (a plan, or an error).
    pub answered: u64,
    /// Plans rehearsal accepted.
    pub accepted: u64,
    /// Of which committed.
    pub committed: u64,
    /// Of which replaced by a later plan before their commit.
    pub superseded: u64,
    /// Of which waiting for their commit (0 or 1).
    pub pending: u64,
    /// The pending plan's pruning rate, when one waits.
    pub pending_prune: Option<f64>,
    /// Plans rehearsal refused.
    pub rejected: Rejections,
    /// Answers that changed nothing and whose reason the saved state does
    /// not tell (saved by a build that kept no reasons).
    pub unclassified: u64,
}

/// Planner calls that gave no plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannerFailures {
    /// All of them.
    pub total: u64,
    /// Cut at the planner timeout.
    pub timeout: u64,
    /// Failed (the provider's error).
    pub error: u64,
    /// Answered with no valid Listing 2 plan.
    pub malformed: u64,
    /// Of the latest answers, how many in a row failed.
    pub in_a_row: u64,
}

/// The actions applied so far, by kind (an object a plan folded and
/// the backstop later pruned counts in both).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActionCounts {
    /// Objects folded to sidecars by plans.
    pub folds: u64,
    /// Tool results masked by plans.
    pub masks: u64,
    /// Objects pruned by plans.
    pub prunes: u64,
    /// Objects pruned by the budget backstop.
    pub backstop_prunes: u64,
}

/// Self-GC's figures, as [`Strategy::metrics`] gives them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelfGcMetrics {
    /// Prompt tokens (view and tools, calibrated) over τ.
    pub utilisation: f64,
    /// The zone's name ([`Zone::name`]).
    pub zone: String,
    /// Prompt tokens now.
    pub tokens: usize,
    /// τ.
    pub budget: usize,
    /// The prompt tokens from which the planner is asked.
    pub trigger_tokens: usize,
    /// Pruning rates.
    pub prune: PruneRates,
    /// What became of the plans.
    pub plans: PlanCounts,
    /// Planner calls that gave no plan.
    pub planner_failures: PlannerFailures,
    /// The actions applied so far.
    pub actions: ActionCounts,
    /// Payloads folded to sidecar files.
    pub sidecars: u64,
    /// Their bytes.
    pub sidecar_bytes: u64,
    /// `recall` calls answered with a payload.
    pub recalls_served: u64,
    /// Passes of the budget backstop.
    pub backstop_passes: u64,
    /// Commits and backstop passes: each changed the view.
    pub evictions: u64,
    /// Warnings worth showing.
    pub alerts: Vec<String>,
}

impl SelfGc {
    /// Where the prompt is now.
    pub fn zone(&self) -> Zone {
        let tokens = self.tokens();
        if tokens > self.meter.budget() {
            Zone::OverBudget
        } else if (tokens as f64) < self.options.trigger * self.meter.budget() as f64 {
            Zone::BelowTrigger
        } else {
            Zone::OverTrigger
        }
    }

    fn utilisation(&self) -> f64 {
        self.tokens() as f64 / self.meter.budget().max(1) as f64
    }

    /// Commits and backstop passes so far.
    fn evictions(&self) -> u64 {
        self.stats.commits + self.stats.backstops
    }

    /// Tokens pushed per model call over the last calls: each response
    /// with what followed it (results, user turns), before collection.
    fn velocity(&self) -> f64 {
        let (mut calls, mut pushed, mut since) = (0, 0, 0);
        for message in self.transcript.iter().rev() {
            since += message_tokens(self.counter.as_ref(), message);
            if matches!(message, Message::Assistant { .. }) {
                calls += 1;
                pushed = since;
                if calls == VELOCITY_CALLS {
                    break;
                }
            }
        }
        if calls == 0 {
            return 0.0;
        }
        pushed as f64 / calls as f64
    }

    /// The alerts in force: the prompt over 90% of τ, a planner failing
    /// repeatedly, a plan waiting for its commit.
    fn alerts(&self) -> Vec<String> {
        let mut alerts = Vec::new();
        let utilisation = self.utilisation();
        if utilisation > CRITICAL {
            alerts.push(format!(
                "critical: the prompt takes {:.0}% of the budget",
                utilisation * 100.0
            ));
        }
        if self.stats.failure_streak >= PLANNER_FAILURE_ALERT {
            alerts.push(format!(
                "warning: the planner gave no plan {} times in a row (timeouts, errors or malformed answers); only the budget backstop collects",
                self.stats.failure_streak
            ));
        }
        if let Some(pending) = &self.pending {
            alerts.push(format!(
                "pending plan: one that would prune {:.0}% of the view waits for a task boundary, the cache's expiry or the budget",
                pending.prune * 100.0
            ));
        }
        alerts
    }

    /// The health report: see [`Zone`] for the zones; the velocity is the
    /// tokens pushed per model call over the last calls, and the calls
    /// "until red" are those until τ at that velocity.
    pub(super) fn health_now(&self) -> Health {
        let velocity = self.velocity();
        let room = self.meter.budget().saturating_sub(self.tokens());
        Health {
            utilisation: self.utilisation(),
            zone: self.zone().name().to_string(),
            velocity,
            turns_until_red: (velocity > 0.0).then(|| room as f64 / velocity),
            provider_counted: self.meter.calibrated(),
            evictions: self.evictions(),
            alerts: self.alerts(),
        }
    }

    /// All the figures.
    pub fn metrics_now(&self) -> SelfGcMetrics {
        let stats = &self.stats;
        let counter = self.counter.as_ref();
        let transcript_tokens =
            billed_tokens(counter, &self.transcript, self.meter.config().reasoning);
        let ratio = |after: f64, before: f64| {
            if before > 0.0 {
                1.0 - after / before
            } else {
                0.0
            }
        };
        let count = |keep: &dyn Fn(&crate::plan::Target) -> bool| {
            self.committed.iter().filter(|t| keep(t)).count() as u64
        };
        let failures = stats.timeouts + stats.errors + stats.malformed;
        let refused = stats.no_target + stats.too_little;
        let pending = self.pending.as_ref().map(|p| p.prune);
        SelfGcMetrics {
            utilisation: self.utilisation(),
            zone: self.zone().name().to_string(),
            tokens: self.tokens(),
            budget: self.meter.budget(),
            trigger_tokens: (self.options.trigger * self.meter.budget() as f64).ceil() as usize,
            prune: PruneRates {
                last: stats
                    .last_commit
                    .map(|c| ratio(c.after as f64, c.before as f64)),
                cumulative: ratio(self.view_tokens as f64, transcript_tokens as f64),
                transcript_tokens,
                view_tokens: self.view_tokens,
            },
            plans: PlanCounts {
                asked: stats.rounds + u64::from(self.asked.is_some()),
                answered: stats.rounds,
                accepted: stats.accepted,
                committed: stats.commits,
                superseded: stats.superseded,
                pending: u64::from(pending.is_some()),
                pending_prune: pending,
                rejected: Rejections {
                    total: refused,
                    no_target: stats.no_target,
                    too_little: stats.too_little,
                },
                unclassified: stats.rejected.saturating_sub(failures + refused),
            },
            planner_failures: PlannerFailures {
                total: failures,
                timeout: stats.timeouts,
                error: stats.errors,
                malformed: stats.malformed,
                in_a_row: stats.failure_streak,
            },
            actions: ActionCounts {
                folds: count(&|t| t.action == Action::Fold),
                masks: count(&|t| t.action == Action::Mask),
                prunes: count(&|t| t.action == Action::Prune && t.reason != BACKSTOP_REASON),
                backstop_prunes: count(&|t| {
                    t.action == Action::Prune && t.reason == BACKSTOP_REASON
                }),
            },
            sidecars: self.folds.len() as u64,
            sidecar_bytes: self.folds.values().map(|f| f.bytes as u64).sum(),
            recalls_served: self
                .transcript
                .iter()
                .filter(
                    |m| matches!(m, Message::ToolResult(r) if r.tool_name == RECALL && !r.is_error),
                )
                .count() as u64,
            backstop_passes: stats.backstops,
            evictions: self.evictions(),
            alerts: self.alerts(),
        }
    }
}

#[cfg(test)]
mod tests {
    use cwl::SideCalls;
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::sync::Arc;

    use cwl::strategy::SideRequest;
    use cwl::{Block, Config, Estimate, ToolCall};

    use super::*;
    use crate::SelfGcOptions;

    const BUDGET: usize = 4_000;

    /// A session store with nothing in it: these recalls read sidecars.
    const NO_STORE: &Vec<Message> = &Vec::new();

    /// Sidecars kept in memory, as the harness keeps them on disk.
    type Files = RefCell<HashMap<String, String>>;

    fn body(i: usize) -> String {
        (0..30)
            .map(|line| format!("fn item_{i}_{line}() {{ body of file {i} }}\n"))
            .collect()
    }

    fn started(options: SelfGcOptions) -> SelfGc {
        let mut gc = SelfGc::with_options(
            Config::with_budget(BUDGET),
            Arc::new(Estimate),
            Vec::new(),
            options,
        );
        gc.push(Message::system("You are a coding agent.")).unwrap();
        gc.push(Message::user("task 0: read the files")).unwrap();
        gc
    }

    /// A read (call and result) numbered `i`.
    fn read(gc: &mut SelfGc, i: usize) {
        gc.push(Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new(
                format!("c{i}"),
                "read",
                format!("{{\"path\":\"src/f{i}.rs\"}}"),
            ))],
        })
        .unwrap();
        gc.push(Message::tool_result(
            format!("c{i}"),
            "read",
            body(i),
            false,
        ))
        .unwrap();
    }

    /// Model calls (a pass, then a read) until the planner is asked.
    fn ask(gc: &mut SelfGc, next: &mut usize, files: &Files) -> SideRequest {
        for _ in 0..40 {
            if let Some(request) = gc.side_request() {
                return request;
            }
            pass(gc, files);
            read(gc, *next);
            *next += 1;
        }
        panic!("the planner was never asked: {gc:?}");
    }

    fn pass(gc: &mut SelfGc, files: &Files) {
        gc.enforce();
        for file in gc.take_sidecars() {
            files.borrow_mut().insert(file.name, file.content);
        }
    }

    fn fold(ids: &[&str]) -> String {
        format!(
            "<above_conversation_summary>Reads.</above_conversation_summary>\n<gc_plan>\n<fold kind=\"function\" reason=\"stable_artifact\">\n{}\n</fold>\n</gc_plan>",
            ids.join("\n")
        )
    }

    fn has_alert(gc: &SelfGc, kind: &str) -> bool {
        gc.health()
            .unwrap()
            .alerts
            .iter()
            .any(|a| a.starts_with(kind))
    }

    #[test]
    fn planner_failures_are_counted_by_kind_and_three_in_a_row_raise_an_alert() {
        let files = Files::default();
        let mut gc = started(SelfGcOptions::default());
        let mut next = 0;
        let answers = [
            Ok("I would fold read:1.".to_string()),
            Err("the planner call timed out after 60.0s".to_string()),
            Err("the planner call failed: HTTP 500: boom".to_string()),
        ];
        for (n, answer) in answers.into_iter().enumerate() {
            let request = ask(&mut gc, &mut next, &files);
            assert!(!has_alert(&gc, "warning"), "after {n} failures");
            gc.side_result(request.id, answer);
        }
        let metrics = gc.metrics_now();
        assert_eq!(
            metrics.planner_failures,
            PlannerFailures {
                total: 3,
                timeout: 1,
                error: 1,
                malformed: 1,
                in_a_row: 3,
            }
        );
        assert!(has_alert(
            &gc,
            "warning: the planner gave no plan 3 times in a row"
        ));
        // A parsed plan ends the run of failures, even one rehearsal refuses.
        let request = ask(&mut gc, &mut next, &files);
        gc.side_result(
            request.id,
            Ok("<gc_plan><prune>read:999 user:77</prune></gc_plan>".into()),
        );
        assert!(!has_alert(&gc, "warning"));
        let metrics = gc.metrics_now();
        assert_eq!(metrics.planner_failures.in_a_row, 0);
        assert_eq!(
            metrics.plans.rejected,
            Rejections {
                total: 1,
                no_target: 1,
                too_little: 0
            }
        );
        assert_eq!((metrics.plans.asked, metrics.plans.answered), (4, 4));
        assert_eq!(metrics.plans.accepted + metrics.plans.committed, 0);
        assert_eq!(metrics.plans.unclassified, 0);
        assert_eq!(gc.stats().rejected, 4, "all four changed nothing");
        // A request waiting for its answer is asked, not answered.
        let request = ask(&mut gc, &mut next, &files);
        let metrics = gc.metrics_now();
        assert_eq!((metrics.plans.asked, metrics.plans.answered), (5, 4));
        gc.side_result(request.id, Err("the planner call failed: gone".into()));
        assert_eq!(gc.metrics_now().planner_failures.error, 2);
        assert_eq!(
            metrics.evictions,
            metrics.plans.committed + metrics.backstop_passes
        );
    }

    #[test]
    fn plans_rejected_pending_superseded_and_committed_give_true_figures() {
        let files = Files::default();
        let options = SelfGcOptions {
            min_prune: 0.2,
            commit_prune: 0.95,
            ..SelfGcOptions::default()
        };
        let mut gc = started(options);
        let mut next = 0;
        assert_eq!(gc.zone(), Zone::BelowTrigger);
        let request = ask(&mut gc, &mut next, &files);
        assert_eq!(gc.zone(), Zone::OverTrigger);
        // One read of several saves under the minimum.
        gc.side_result(request.id, Ok(fold(&["read:1"])));
        assert_eq!(gc.stats().too_little, 1, "{:?}", gc.take_notes());
        let request = ask(&mut gc, &mut next, &files);
        gc.side_result(request.id, Ok(fold(&["read:1", "read:2", "read:3"])));
        assert_eq!(gc.stats().accepted, 1, "{:?}", gc.take_notes());
        assert!(has_alert(&gc, "pending plan: one that would prune"));
        let metrics = gc.metrics_now();
        assert_eq!(metrics.plans.pending, 1);
        let waiting = metrics.plans.pending_prune.unwrap();
        assert!((0.2..0.95).contains(&waiting), "{waiting}");
        // A later plan replaces the waiting one.
        let request = ask(&mut gc, &mut next, &files);
        gc.side_result(
            request.id,
            Ok(fold(&["read:1", "read:2", "read:3", "read:4"])),
        );
        assert_eq!(gc.stats().superseded, 1, "{:?}", gc.take_notes());
        // A task boundary commits it.
        gc.push(Message::user("task 1: and now?")).unwrap();
        pass(&mut gc, &files);
        let metrics = gc.metrics_now();
        assert_eq!(metrics.plans.committed, 1);
        assert_eq!(metrics.plans.pending, 0);
        assert!(!has_alert(&gc, "pending plan"));
        assert_eq!(
            metrics.plans.accepted,
            metrics.plans.committed + metrics.plans.superseded + metrics.plans.pending
        );
        let last = gc.stats().last_commit.unwrap();
        let expected = 1.0 - last.after as f64 / last.before as f64;
        assert_eq!(metrics.prune.last, Some(expected));
        assert!(expected > 0.2, "{expected}");
        assert_eq!(metrics.actions.folds, 4);
        assert_eq!(metrics.actions.masks + metrics.actions.prunes, 0);
        assert_eq!(metrics.sidecars, 4);
        let bytes: usize = files.borrow().values().map(String::len).sum();
        assert_eq!(metrics.sidecar_bytes, bytes as u64);
        assert_eq!(bytes, (0..4).map(|i| body(i).len()).sum::<usize>());
        let whole: usize = gc
            .transcript
            .iter()
            .map(|m| message_tokens(&Estimate, m))
            .sum();
        let view: usize = gc.view().map(|m| message_tokens(&Estimate, m)).sum();
        assert_eq!(metrics.prune.transcript_tokens, whole);
        assert_eq!(metrics.prune.view_tokens, view);
        assert_eq!(metrics.prune.cumulative, 1.0 - view as f64 / whole as f64);
        assert_eq!(
            gc.health().unwrap().evictions,
            metrics.plans.committed + metrics.backstop_passes
        );

        // Recalls answered with a payload are served; refused ones are not.
        for (id, arguments) in [("k1", r#"{"id":"read:2"}"#), ("k2", r#"{"id":"read:99"}"#)] {
            gc.push(Message::Assistant {
                content: vec![Block::ToolCall(ToolCall::new(id, RECALL, arguments))],
            })
            .unwrap();
            let answer = gc.recall_with(arguments, NO_STORE, &*files.borrow());
            let is_error = answer.is_err();
            let text = answer.unwrap_or_else(|error| error);
            gc.push(Message::tool_result(id, RECALL, text, is_error))
                .unwrap();
        }
        assert_eq!(gc.metrics_now().recalls_served, 1);

        // The figures survive save and restore.
        let saved = gc.save().unwrap();
        let restored = SelfGc::restore(&saved.state, Arc::new(Estimate)).unwrap();
        assert_eq!(restored.metrics(), gc.metrics());
        assert_eq!(restored.health(), gc.health());
        assert_eq!(restored.stats(), gc.stats());
    }

    #[test]
    fn state_saved_before_the_new_counters_loads_with_its_rejections_unclassified() {
        let files = Files::default();
        let mut gc = started(SelfGcOptions::default());
        let mut next = 0;
        for _ in 0..2 {
            let request = ask(&mut gc, &mut next, &files);
            gc.side_result(request.id, Ok("no plan".into()));
        }
        let mut state = gc.save().unwrap().state;
        let stats = state["stats"].as_object_mut().unwrap();
        stats.retain(|key, _| {
            ["rounds", "accepted", "rejected", "commits", "backstops"].contains(&key.as_str())
        });
        let old = SelfGc::restore(&state, Arc::new(Estimate)).unwrap();
        let metrics = old.metrics_now();
        assert_eq!(metrics.planner_failures.total, 0);
        assert_eq!(metrics.plans.unclassified, 2);
        assert_eq!(metrics.plans.answered, 2);
        assert!(old.view().eq(gc.view()));
        state["stats"] = serde_json::json!("many");
        let error = SelfGc::restore(&state, Arc::new(Estimate)).unwrap_err();
        assert!(error.contains("invalid type"), "{error}");
    }

    #[test]
    fn zones_utilisation_and_velocity_follow_the_prompt() {
        let files = Files::default();
        let mut gc = started(SelfGcOptions::default());
        let health = gc.health().unwrap();
        assert_eq!(health.zone, "below-trigger");
        assert_eq!((health.velocity, health.turns_until_red), (0.0, None));
        assert!(!health.provider_counted);
        for i in 0..7 {
            pass(&mut gc, &files);
            read(&mut gc, i);
        }
        let health = gc.health().unwrap();
        let tokens = gc.tokens();
        assert_eq!(health.utilisation, tokens as f64 / BUDGET as f64);
        // Each call pushed a response and its result, all alike but the
        // numbers in them.
        let per_call: usize = gc.transcript[gc.transcript.len() - 10..]
            .iter()
            .map(|m| message_tokens(&Estimate, m))
            .sum();
        assert_eq!(health.velocity, per_call as f64 / 5.0);
        let room = BUDGET.saturating_sub(tokens) as f64;
        assert_eq!(health.turns_until_red, Some(room / health.velocity));
        gc.calibrate(gc.counted_tokens(), gc.counted_tokens() + 100);
        assert!(gc.health().unwrap().provider_counted);
        // Over 90% of τ is critical; over τ (no pass yet) is over budget.
        gc.set_budget(gc.tokens() * 100 / 95);
        assert!(has_alert(&gc, "critical: the prompt takes 9"));
        gc.set_budget(gc.tokens() - 1);
        assert_eq!(gc.zone(), Zone::OverBudget);
        assert_eq!(gc.health().unwrap().turns_until_red, Some(0.0));
        pass(&mut gc, &files);
        assert_ne!(gc.zone(), Zone::OverBudget, "the backstop brought it under");
        let metrics = gc.metrics_now();
        assert_eq!(metrics.backstop_passes, 1);
        assert!(metrics.actions.backstop_prunes > 0);
        assert_eq!(metrics.evictions, 1);
    }
}
