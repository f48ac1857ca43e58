//! Many conversations, one after another: what the proxy holds for them
//! stays within its bounds, and one that left memory comes back from its
//! session file.

use crate::support;

use std::time::Duration;

use cwl_proxy::server::Footprint;
use cwl_session::strategy::StrategyName;
use support::Scripted;

/// Conversations served in all.
const CONVERSATIONS: usize = 20_000;
/// Conversations the proxy keeps in memory.
const LIVE: usize = 16;

fn body(messages: &[String]) -> String {
    format!(
        r#"{{"model": "claude-test", "max_tokens": 16, "messages": [{}]}}"#,
        messages.join(", ")
    )
}

fn user(text: &str) -> String {
    format!(r#"{{"role": "user", "content": "{text}"}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_conversations_stay_bounded_and_resume_from_their_files() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    // In memory where there is one: every new session file is synced once.
    let store = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let (mut options, events) = support::options(
        StrategyName::Cwl,
        cwl::Config::with_budget(4_000),
        &anthropic.url(),
        &openai.url(),
        Some(store.path()),
        None,
        Duration::from_secs(3_600),
        None,
        None,
    );
    options.max_conversations = LIVE;
    let proxy = support::start(options, events).await;
    let client = reqwest::Client::new();
    let mut largest = Footprint {
        live: 0,
        dormant: 0,
        stored: 0,
        identities: 0,
    };
    for n in 0..CONVERSATIONS {
        let response = client
            .post(proxy.url("/v1/messages"))
            .body(body(&[user(&format!("conversation {n}: fix the bug"))]))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        let now = proxy.proxy.footprint();
        assert!(now.live <= LIVE, "after {n}: {now:?}");
        assert!(now.stored <= now.live + now.dormant, "after {n}: {now:?}");
        largest.live = largest.live.max(now.live);
        largest.dormant = largest.dormant.max(now.dormant);
    }
    let end = proxy.proxy.footprint();
    assert_eq!(largest.live, LIVE);
    assert_eq!(end.dormant, CONVERSATIONS - LIVE, "each one that left");
    assert_eq!(end.stored, CONVERSATIONS, "a file each, live or not");
    assert!(end.identities <= CONVERSATIONS, "{end:?}");
    assert_eq!(
        std::fs::read_dir(store.path()).unwrap().count(),
        CONVERSATIONS
    );

    // The first conversation left memory long ago: it comes back from its file.
    let first = [
        user("conversation 0: fix the bug"),
        r#"{"role": "assistant", "content": "ok"}"#.to_string(),
        user("and the test"),
    ];
    let response = client
        .post(proxy.url("/v1/messages"))
        .body(body(&first))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let events = proxy.events();
    let last = events.last().unwrap();
    assert_eq!(last.route, "resume");
    assert_eq!(last.items, 3);
    assert_eq!(last.conversation, events[0].conversation, "its own session");
}
