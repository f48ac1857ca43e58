//! The cache-aware commit on the provider cache's expiry: a pending plan
//! commits once the conversation sat idle for the cache's lifetime, not
//! before, and the gap survives save and restore.

use cwl::SideCalls;
use std::sync::Arc;

use cwl::strategy::Strategy;
use cwl::{Block, Config, Estimate, Message, ToolCall};
use cwl_selfgc::strategy::DEFAULT_CACHE_TTL_S;
use cwl_selfgc::{SelfGc, SelfGcOptions};

use crate::strategy::{BUDGET, step};

/// A session whose planner answered a plan too small to commit at once:
/// it waits, pending.
fn with_pending_plan() -> SelfGc {
    let options = SelfGcOptions {
        commit_prune: 0.95,
        ..SelfGcOptions::default()
    };
    let mut gc = SelfGc::with_options(
        Config::with_budget(BUDGET),
        Arc::new(Estimate),
        Vec::new(),
        options,
    );
    gc.push(Message::system("You are a coding agent.")).unwrap();
    gc.push(Message::user("task 0: read the files")).unwrap();
    for i in 0..40 {
        if let Some(request) = gc.side_request() {
            let plan = "<above_conversation_summary>Reads.</above_conversation_summary>\n<gc_plan>\n<fold kind=\"function\" reason=\"stable_artifact\">\nread:1\nread:2\n</fold>\n</gc_plan>";
            gc.side_result(request.id, Ok(plan.to_string()));
            assert!(gc.has_pending_plan(), "{:?}", gc.take_notes());
            let report = gc.enforce();
            assert!(report.first_changed.is_none(), "no commit yet");
            assert!(gc.has_pending_plan());
            gc.take_notes();
            return gc;
        }
        gc.enforce();
        step(&mut gc, i);
    }
    panic!("the planner was never asked: {gc:?}");
}

fn view(gc: &SelfGc) -> Vec<Message> {
    gc.view().cloned().collect()
}

#[test]
fn a_pending_plan_commits_after_the_cache_expired_and_not_before() {
    let mut gc = with_pending_plan();
    assert_eq!(gc.options().cache_ttl_s, DEFAULT_CACHE_TTL_S);
    let before = view(&gc);

    // A shorter gap: the cache is warm, the plan waits.
    assert!(!gc.idle(DEFAULT_CACHE_TTL_S - 1));
    let report = gc.enforce();
    assert!(report.first_changed.is_none());
    assert!(gc.has_pending_plan());
    assert_eq!(view(&gc), before);
    assert_eq!(gc.stats().commits, 0);

    // A gap as long as the cache's lifetime: the prefix breaks anyway.
    assert!(gc.idle(DEFAULT_CACHE_TTL_S));
    let report = gc.enforce();
    assert!(report.first_changed.is_some(), "{report:?}");
    assert!(report.tokens_after < report.tokens_before);
    assert!(!gc.has_pending_plan());
    assert_eq!(gc.stats().commits, 1);
    let notes = gc.take_notes();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("plan committed") && n.contains("cache had expired (300 s idle")),
        "{notes:?}"
    );
    let sidecars = gc.take_sidecars();
    assert_eq!(sidecars.len(), 2, "the two folded reads");

    // With nothing pending, a gap changes nothing and asks for no record.
    assert!(!gc.idle(10 * DEFAULT_CACHE_TTL_S));
}

#[test]
fn the_expiry_is_consumed_by_one_pass() {
    let mut gc = with_pending_plan();
    assert!(gc.idle(DEFAULT_CACHE_TTL_S + 5));
    // A save between the gap and the pass keeps it.
    let saved = gc.save().unwrap();
    let mut restored = SelfGc::restore(&saved.state, Arc::new(Estimate)).unwrap();
    gc.enforce();
    restored.enforce();
    assert_eq!(view(&gc), view(&restored));
    assert_eq!(restored.stats().commits, 1);

    // A gap told before a pass that could not commit does not linger.
    let mut gc = with_pending_plan();
    gc.push(Message::Assistant {
        content: vec![Block::ToolCall(ToolCall::new("w", "read", "{}"))],
    })
    .unwrap();
    assert!(gc.idle(DEFAULT_CACHE_TTL_S));
    gc.enforce();
    assert!(
        gc.has_pending_plan(),
        "a call waits for its result: no commit"
    );
    gc.push(Message::tool_result("w", "read", "ok", false))
        .unwrap();
    gc.enforce();
    assert!(gc.has_pending_plan(), "the expiry was used up");
}

#[test]
fn a_shorter_cache_lifetime_is_an_option_and_old_options_read_the_default() {
    let options: SelfGcOptions = serde_json::from_value(serde_json::json!({
        "trigger": 0.3, "regrowth": 0.2, "min_prune": 0.05,
        "commit_prune": 0.3, "planner_timeout_ms": 60000
    }))
    .unwrap();
    assert_eq!(options.cache_ttl_s, DEFAULT_CACHE_TTL_S);
    let mut gc = with_pending_plan();
    let saved = gc.save().unwrap();
    let mut state = saved.state.clone();
    state["options"]["cache_ttl_s"] = serde_json::json!(60);
    let mut short = SelfGc::restore(&state, Arc::new(Estimate)).unwrap();
    assert!(!gc.idle(60));
    assert!(short.idle(60));
    short.enforce();
    assert_eq!(short.stats().commits, 1);
}
