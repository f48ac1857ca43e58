//! Conversations stored as sessions that `cwl sessions` lists.

use crate::support;

use cwl::{Message, Record};
use support::Scripted;

/// Posts an Anthropic Messages request for `model` with `messages` (JSON
/// objects) through `proxy`, streamed or not.
fn post_messages(
    client: &reqwest::Client,
    proxy: &support::Running,
    model: &str,
    stream: bool,
    messages: &[&str],
) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> + use<> {
    client
        .post(proxy.url("/v1/messages"))
        .body(format!(
            r#"{{"model": "{model}", "stream": {stream}, "messages": [{}]}}"#,
            messages.join(", ")
        ))
        .send()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_conversation_is_a_session_with_its_passes() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = support::proxy(80_000, &anthropic, &openai, Some(dir.path()), None).await;
    let client = reqwest::Client::new();
    let first = r#"{"role": "user", "content": "fix the parser"}"#;
    let call = r#"{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "p.rs"}}]}"#;
    let result = r#"{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "fn parse() {}"}]}"#;
    for messages in [vec![first], vec![first, call, result]] {
        let body = format!(
            r#"{{"model": "claude-test", "system": "be careful", "tools": [{{"name": "Read", "input_schema": {{}}}}], "messages": [{}]}}"#,
            messages.join(",")
        );
        let response = client
            .post(proxy.url("/v1/messages"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    // Another conversation.
    client
        .post(proxy.url("/v1/messages"))
        .body(r#"{"model": "claude-test", "messages": [{"role": "user", "content": "other"}]}"#)
        .send()
        .await
        .unwrap();

    let sessions = cwl_session::list(dir.path()).unwrap();
    assert_eq!(sessions.len(), 2);
    let events = proxy.events();
    let session = sessions
        .iter()
        .find(|s| s.id == events[0].conversation)
        .expect("the event names the session");
    assert_eq!(session.provider, "anthropic");
    assert_eq!(session.model, "claude-test");
    assert_eq!(
        (session.tasks, session.messages, session.requests),
        (1, 4, 1)
    );
    assert_eq!(session.first_task.as_deref(), Some("fix the parser"));

    let loaded = cwl_session::read(&session.path).unwrap();
    assert_eq!(loaded.info.tools[0].name, "Read");
    let records: Vec<&Record> = loaded.records.iter().map(|(_, r)| r).collect();
    assert!(matches!(records[0], Record::Settings { .. }));
    let messages: Vec<&Message> = records
        .iter()
        .filter_map(|r| match r {
            Record::Message { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(messages[0], &Message::system("be careful"));
    assert_eq!(
        messages[3],
        &Message::tool_result("t1", "Read", "fn parse() {}", false)
    );
    let passes: Vec<u64> = records
        .iter()
        .filter_map(|r| match r {
            Record::Enforce { report, .. } => report["tokens_after"].as_u64(),
            _ => None,
        })
        .collect();
    assert_eq!(passes.len(), 2, "one pass per request");
    assert_eq!(passes[0] as usize, events[0].tokens_after);
    assert!(passes[1] > passes[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_conversation_whose_session_is_gone_starts_afresh() {
    let anthropic = Scripted::start().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = support::proxy_idle(
        80_000,
        &anthropic.url(),
        &support::dead_url().await,
        Some(dir.path()),
        None,
        std::time::Duration::ZERO,
    )
    .await;
    let client = reqwest::Client::new();
    let first = r#"{"role": "user", "content": "hello"}"#;
    let more = [
        first,
        r#"{"role": "assistant", "content": "hi"}"#,
        r#"{"role": "user", "content": "again"}"#,
    ];
    let post = |messages: &[&str]| post_messages(&client, &proxy, "m", false, messages);
    assert_eq!(post(&[first]).await.unwrap().status(), 200);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    assert_eq!(post(&more).await.unwrap().status(), 200);
    let events = proxy.events();
    assert_eq!(events[1].route, "new");
    assert_eq!(events[1].pushed, 3);
    assert_ne!(events[1].conversation, events[0].conversation);
    assert!(anthropic.seen()[1].text().contains("again"));
}

/// Waits until the only session in `dir` holds a `calibrate` record.
async fn calibrated(dir: &std::path::Path) -> (u64, u64) {
    for _ in 0..200 {
        let sessions = cwl_session::list(dir).unwrap();
        if let Some(session) = sessions.first() {
            let loaded = cwl_session::read(&session.path).unwrap();
            let found = loaded.records.iter().find_map(|(_, r)| match r {
                Record::Calibrate { local, reported } => Some((*local, *reported)),
                _ => None,
            });
            if let Some(found) = found {
                return found;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("no calibrate record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reported_prompt_size_calibrates_the_count_and_survives_a_rebuild() {
    for idle in [
        std::time::Duration::from_secs(600),
        std::time::Duration::ZERO,
    ] {
        let anthropic = Scripted::start().await;
        let dir = tempfile::tempdir().unwrap();
        let proxy = support::proxy_idle(
            80_000,
            &anthropic.url(),
            &support::dead_url().await,
            Some(dir.path()),
            None,
            idle,
        )
        .await;
        let client = reqwest::Client::new();
        anthropic.reply(support::Reply::Chunks {
            chunks: vec![
                "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":59990}}}\n\n".into(),
                "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
            ],
            gate: None,
            drop: false,
        });
        // About 40k tokens here, so 60k reported is within what a
        // tokenizer difference explains.
        let first = format!(
            r#"{{"role": "user", "content": "{}"}}"#,
            "hello world ".repeat(20_000)
        );
        let first = first.as_str();
        let post = |messages: &[&str]| post_messages(&client, &proxy, "m", true, messages);
        let response = post(&[first]).await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.text().await.unwrap().contains("message_stop"));
        let (local, reported) = calibrated(dir.path()).await;
        assert_eq!(reported, 60_000);
        let events = proxy.events();
        assert_eq!(local as usize, events[0].tokens_after);
        let more = [
            first,
            r#"{"role": "assistant", "content": "hi"}"#,
            r#"{"role": "user", "content": "again"}"#,
        ];
        post(&more).await.unwrap().text().await.unwrap();
        let events = proxy.events();
        let expected_route = if idle.is_zero() { "resume" } else { "continue" };
        assert_eq!(events[1].route, expected_route);
        assert!(
            events[1].tokens_before > 60_000,
            "{idle:?}: the provider's count applies: {:?}",
            events[1]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_prompt_size_no_tokenizer_explains_changes_nothing() {
    let anthropic = Scripted::start().await;
    let dir = tempfile::tempdir().unwrap();
    let dead = support::dead_url().await;
    let proxy = support::proxy_to(80_000, &anthropic.url(), &dead, Some(dir.path()), None).await;
    let client = reqwest::Client::new();
    anthropic.reply(support::Reply::Chunks {
        chunks: vec![
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10000000}}}\n\n".into(),
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
        ],
        gate: None,
        drop: false,
    });
    let first = r#"{"role": "user", "content": "hello"}"#;
    let post =
        |messages: &[&str]| post_messages(&client, &proxy, "claude-sonnet-4-5", true, messages);
    post(&[first]).await.unwrap().text().await.unwrap();
    let session = || {
        let sessions = cwl_session::list(dir.path()).unwrap();
        cwl_session::read(&sessions[0].path).unwrap().records
    };
    let mut noted = false;
    for _ in 0..200 {
        noted = session().iter().any(|(_, record)| {
            matches!(record, Record::Note { text, .. } if text.contains("not used to calibrate"))
        });
        if noted {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(noted, "the lie is noted in the session");
    assert!(
        !session()
            .iter()
            .any(|(_, record)| matches!(record, Record::Calibrate { .. })),
        "and not stored as a calibration"
    );
    let more = [
        first,
        r#"{"role": "assistant", "content": "hi"}"#,
        r#"{"role": "user", "content": "again"}"#,
    ];
    post(&more).await.unwrap().text().await.unwrap();
    let events = proxy.events();
    assert!(events[1].tokens_before < 1_000, "{:?}", events[1]);
    assert!(
        events[1].evicted.is_empty(),
        "nothing evicted: {:?}",
        events[1]
    );
}
