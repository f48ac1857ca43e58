//! `cwl proxy --strategy cwm|self-gc`: the context-window manager and
//! Self-GC behind the same seam, through the Chat Completions route. The
//! upstream answers their side calls (summaries, notes, plans) with no
//! answer here (its scripted reply is not a Chat Completions response), so
//! eviction and Self-GC's budget backstop keep each conversation within
//! budget; `tests/integration/side.rs` answers them.

use crate::support;

use std::time::Duration;

use cwl_session::Settings;
use cwl_session::strategy::StrategyName;
use serde_json::Value;
use support::Scripted;
use support::porting::{self, TOOLS, assert_paired, content_tokens, opening};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwm_keeps_chat_completions_within_budget_and_is_stored_as_the_strategy() {
    within_budget_and_stored(StrategyName::Cwm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_gc_keeps_chat_completions_within_budget_and_is_stored_as_the_strategy() {
    let last = within_budget_and_stored(StrategyName::SelfGc).await;
    let results = last.iter().filter(|m| m["role"] == "tool").count();
    assert!(results < 40, "old results were pruned: {results} left");
}

/// Runs 40 reads through the proxy under `strategy`; returns the last
/// request's messages.
async fn within_budget_and_stored(strategy: StrategyName) -> Vec<Value> {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let store = tempfile::tempdir().unwrap();
    let budget = 3_000;
    let proxy = support::proxy_strategy(
        strategy,
        budget,
        &anthropic.url(),
        &openai.url(),
        Some(store.path()),
        None,
        Duration::from_secs(600),
    )
    .await;
    let client = reqwest::Client::new();
    let mut messages = opening();
    for step in 1..=40 {
        porting::step(&mut messages, step, 8);
        let body = format!(
            r#"{{"model": "gpt-test", "tools": {TOOLS}, "stream": true, "stream_options": {{"include_usage": true}}, "messages": [{}]}}"#,
            messages.join(", ")
        );
        let response = client
            .post(proxy.url("/v1/chat/completions"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let (seen, side): (Vec<_>, Vec<_>) = openai
        .seen()
        .into_iter()
        .partition(|s| s.json().get("tools").is_some());
    assert_eq!(seen.len(), 40);
    assert!(!side.is_empty(), "side calls were made, and failed");
    let full: usize = messages
        .iter()
        .map(|m| content_tokens(&serde_json::from_str(m).unwrap()))
        .sum();
    assert!(full > 2 * budget, "{full}");
    for (at, request) in seen.iter().enumerate() {
        let body = request.json();
        let sent = body["messages"].as_array().unwrap();
        let size: usize = sent.iter().map(content_tokens).sum();
        assert!(size <= budget, "request {at}: {size} tokens");
        assert_paired(at, sent);
        let users: Vec<&str> = sent
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        let expected: &[&str] = if at < 14 {
            &["Task: port the module"]
        } else {
            &["Task: port the module", "Task: the rest"]
        };
        assert_eq!(users, expected, "request {at} keeps every user turn");
    }
    let last = seen.last().unwrap().json();
    let last = last["messages"].as_array().unwrap().clone();
    let n = last.len();
    assert_eq!(
        last[n - 1]["tool_call_id"],
        "call_40",
        "the latest result is sent"
    );
    assert_eq!(
        last[n - 2]["content"],
        "step 40",
        "with its call, untouched"
    );
    assert!(
        proxy
            .events()
            .iter()
            .any(|e| !e.evicted.is_empty() || e.tokens_after < e.tokens_before)
    );

    let sessions = cwl_session::list(store.path()).unwrap();
    assert_eq!(sessions.len(), 1);
    let loaded = cwl_session::read(&sessions[0].path).unwrap();
    let settings = Settings::last(loaded.records.iter().map(|(_, r)| r)).unwrap();
    assert_eq!(settings.strategy, strategy);
    last
}
