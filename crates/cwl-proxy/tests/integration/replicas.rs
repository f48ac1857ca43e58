//! Replicas sharing a session directory (`--shared-sessions`): a
//! conversation whose requests alternate between two proxies goes
//! upstream exactly as through one proxy, each request under budget and
//! its latest turn whole.

use crate::support;

use std::time::Duration;

use cwl_proxy::heads::Heads;
use cwl_session::strategy::StrategyName::Cwl;
use serde_json::{Value, json};
use support::porting::{self, content_tokens, opening, output};
use support::{Reply, Running, Scripted};

const BUDGET: usize = 3_000;

/// A Chat Completions answer reporting the prompt's true size (its
/// content tokens and a little more), as a provider would.
fn answer(seen: &support::Seen) -> Option<Reply> {
    let prompt: usize = seen.json()["messages"]
        .as_array()?
        .iter()
        .map(content_tokens)
        .sum();
    Some(Reply::Whole {
        status: 200,
        headers: vec![("content-type", "application/json")],
        body: json!({
            "choices": [{"message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": prompt + prompt / 10, "completion_tokens": 5},
        })
        .to_string(),
    })
}

/// A proxy in front of `upstream` storing in `store`, sharing it with
/// other replicas when `shared`.
async fn replica(upstream: &Scripted, store: &std::path::Path, shared: bool) -> Running {
    let config = cwl::Config::with_budget(BUDGET).residue_share(None);
    let (url, idle) = (upstream.url(), Duration::from_secs(600));
    let (mut options, events) =
        support::options(Cwl, config, &url, &url, Some(store), None, idle, None, None);
    options.heads = shared.then(|| Heads::open(store).unwrap());
    support::start(options, events).await
}

/// The forwarded requests' messages.
fn forwarded(upstream: &Scripted) -> Vec<Vec<Value>> {
    upstream
        .seen()
        .iter()
        .map(|s| s.json()["messages"].as_array().unwrap().clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_alternating_between_replicas_goes_upstream_as_through_one() {
    let (shared_upstream, alone_upstream) = (Scripted::start().await, Scripted::start().await);
    shared_upstream.respond(answer);
    alone_upstream.respond(answer);
    let (shared_dir, alone_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let replicas = [
        replica(&shared_upstream, shared_dir.path(), true).await,
        replica(&shared_upstream, shared_dir.path(), true).await,
    ];
    let alone = replica(&alone_upstream, alone_dir.path(), false).await;
    let mut messages = opening();
    for step in 1..=40 {
        porting::step(&mut messages, step, 8);
        // One replica alone until the conversation is well over budget,
        // then round robin, then runs of three on one replica.
        let at = match step {
            ..=20 => 0,
            21..=30 => step % 2,
            _ => (step / 3) % 2,
        };
        replicas[at].chat(&messages).await;
        alone.chat(&messages).await;
    }
    let (through_two, through_one) = (forwarded(&shared_upstream), forwarded(&alone_upstream));
    assert_eq!(through_two.len(), 40);
    for (at, (two, one)) in through_two.iter().zip(&through_one).enumerate() {
        let size: usize = two.iter().map(content_tokens).sum();
        assert!(size <= BUDGET, "request {at}: {size} tokens");
        assert!(
            two == one,
            "request {at} differs from the one-proxy run ({} and {} messages)",
            two.len(),
            one.len()
        );
        if at != 14 {
            assert_eq!(two.last().unwrap()["content"], output(at + 1, 8));
        }
    }
    let full: usize = messages
        .iter()
        .map(|m| content_tokens(&serde_json::from_str(m).unwrap()))
        .sum();
    assert!(full > 2 * BUDGET, "eviction was needed: {full}");
    let events: Vec<_> = replicas.iter().flat_map(|r| r.events()).collect();
    assert!(
        events
            .iter()
            .all(|e| e.timing.parse_us > 0 && e.timing.serialise_us > 0),
        "each request says where the proxy's time went"
    );
    let routes: Vec<String> = events.iter().map(|e| e.route.to_string()).collect();
    assert!(
        routes.iter().filter(|r| *r == "shared").count() >= 10,
        "{routes:?}"
    );
    let sessions = std::fs::read_dir(shared_dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "jsonl")
        })
        .count();
    assert_eq!(sessions, 1, "one conversation, one session file");
}
