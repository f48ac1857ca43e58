//! Self-GC through the proxy on the provider cache's expiry: a plan that
//! waits commits at the first request after a gap as long as the cache's
//! lifetime (`cache_ttl_s`, two seconds here), the gap is stored, and a
//! conversation rebuilt from the store after leaving memory shows the
//! committed view, or, rebuilt after the cache expired, commits the plan
//! that waited (the gap since its file was last written).

use crate::support;

use std::time::Duration;

use cwl::Record;
use cwl_session::strategy::StrategyName;
use serde_json::json;
use support::porting::{chat_answer, plan_folding, push_read};
use support::{Reply, Running, Scripted, Seen};

const PLANNER: &str = "context garbage collector";
const FOLDED: &str = "[folded as function:read:1;";
const BUDGET: usize = 3_000;
/// How long a conversation stays in memory.
const FORGET: Duration = Duration::from_secs(4);

/// Folds the first two reads.
fn plan() -> Reply {
    chat_answer(&plan_folding(&["read:1".into(), "read:2".into()]))
}

async fn start(openai: &Scripted, anthropic: &Scripted, store: &std::path::Path) -> Running {
    let config = cwl::Config::with_budget(BUDGET).residue_share(None);
    let (mut options, events) = support::options(
        StrategyName::SelfGc,
        config,
        &anthropic.url(),
        &openai.url(),
        Some(store),
        None,
        FORGET,
        None,
        Some(Duration::from_secs(5)),
    );
    // Plans wait; the cache lives two seconds.
    options.strategy_options = json!({"commit_prune": 0.95, "cache_ttl_s": 2});
    support::start(options, events).await
}

/// Sends the history with read `step` added.
async fn step(proxy: &Running, messages: &mut Vec<String>, step: usize) {
    push_read(messages, step, 8);
    proxy.chat(messages).await;
}

fn main_requests(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .filter(|s| s.json().get("tools").is_some())
        .map(Seen::text)
        .collect()
}

/// A conversation of ten reads through a proxy whose planner folds the
/// first two: the scripted upstreams, the store, the proxy and the
/// messages sent so far.
async fn ten_reads() -> (Scripted, Scripted, tempfile::TempDir, Running, Vec<String>) {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    openai.respond(|seen| seen.text().contains(PLANNER).then(plan));
    let store = tempfile::tempdir().unwrap();
    let proxy = start(&openai, &anthropic, store.path()).await;
    let mut messages = vec![
        r#"{"role": "system", "content": "You are pi."}"#.to_string(),
        r#"{"role": "user", "content": "Task: port the module"}"#.to_string(),
    ];
    for n in 1..=10 {
        step(&proxy, &mut messages, n).await;
    }
    (openai, anthropic, store, proxy, messages)
}

/// The idle gaps a stored session recorded.
fn gaps(loaded: &cwl_session::Loaded) -> Vec<u64> {
    loaded
        .records
        .iter()
        .filter_map(|(_, r)| match r {
            Record::Idle { seconds } => Some(*seconds),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_plan_commits_after_the_cache_expired_and_a_rebuild_keeps_it() {
    let (openai, _anthropic, store, proxy, mut messages) = ten_reads().await;
    let before = main_requests(&openai.seen());
    assert_eq!(before.len(), 10);
    assert!(
        openai.seen().iter().any(|s| s.text().contains(PLANNER)),
        "the planner was asked"
    );
    assert!(
        !before.iter().any(|r| r.contains(FOLDED)),
        "the plan waits while the cache is warm"
    );

    // The cache's lifetime passes: the next request commits the plan.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    step(&proxy, &mut messages, 11).await;
    let after = main_requests(&openai.seen());
    assert!(after[10].contains(FOLDED), "{}", after[10]);

    let sessions = cwl_session::list(store.path()).unwrap();
    assert_eq!(sessions.len(), 1);
    let loaded = cwl_session::read(&sessions[0].path).unwrap();
    let gaps = gaps(&loaded);
    assert_eq!(gaps, [2], "the one gap that mattered is stored");
    assert!(loaded.records.iter().any(|(_, r)| matches!(
        r,
        Record::Note { text, .. } if text.contains("provider cache had expired")
    )));

    // The conversation leaves memory; the next request rebuilds it from
    // the store, gap included, and the fold stays.
    tokio::time::sleep(FORGET + Duration::from_millis(300)).await;
    step(&proxy, &mut messages, 12).await;
    let routes: Vec<&str> = proxy.events().iter().map(|e| e.route).collect();
    assert_eq!(routes.last(), Some(&"resume"), "{routes:?}");
    let last = main_requests(&openai.seen()).pop().unwrap();
    assert!(last.contains(FOLDED), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_rebuilt_after_the_cache_expired_commits_the_waiting_plan() {
    let (openai, _anthropic, store, proxy, mut messages) = ten_reads().await;
    assert!(
        !main_requests(&openai.seen())
            .iter()
            .any(|r| r.contains(FOLDED)),
        "the plan waits while the cache is warm"
    );

    // The conversation leaves memory, longer than the cache lives: the
    // request that rebuilds it from the store commits the plan.
    tokio::time::sleep(FORGET + Duration::from_millis(300)).await;
    step(&proxy, &mut messages, 11).await;
    let routes: Vec<&str> = proxy.events().iter().map(|e| e.route).collect();
    assert_eq!(routes.last(), Some(&"resume"), "{routes:?}");
    let last = main_requests(&openai.seen()).pop().unwrap();
    assert!(last.contains(FOLDED), "{last}");
    let sessions = cwl_session::list(store.path()).unwrap();
    let loaded = cwl_session::read(&sessions[0].path).unwrap();
    let gaps = gaps(&loaded);
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert!(gaps[0] >= FORGET.as_secs(), "{gaps:?}");
}
