//! Anthropic Messages through the proxy, against a scripted upstream.

use crate::support;

use std::sync::Arc;

use cwl::TokenCounter;
use cwl_proxy::body::Body;
use serde_json::Value;
use serde_json::value::RawValue;
use support::{Reply, Scripted, quoted};
use tokio::sync::Notify;

const SYSTEM: &str = r#"[{"type": "text", "text": "You are a coding agent."}]"#;
const TOOLS: &str = r#"[{"name": "Read", "description": "Reads a file", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}, {"name": "Edit", "description": "Edits a file", "input_schema": {"type": "object"}}]"#;
const THINKING: &str = r#"{"type": "enabled", "budget_tokens": 2000}"#;
const METADATA: &str = r#"{"user_id": "user-1"}"#;

/// One message of a scripted Claude-Code-like client, written with
/// spaces (not the compact form serde writes) so a re-serialized message
/// cannot pass for the client's own bytes.
#[derive(Clone)]
enum Msg {
    User(String),
    Call {
        step: usize,
        name: &'static str,
        input: String,
    },
    Result {
        step: usize,
        text: String,
    },
    Done(String),
}

impl Msg {
    fn raw(&self, mark: bool) -> String {
        let cache = if mark {
            r#", "cache_control": {"type": "ephemeral"}"#
        } else {
            ""
        };
        match self {
            Msg::User(text) => format!(
                r#"{{"role": "user", "content": [{{"type": "text", "text": {}{cache}}}]}}"#,
                quoted(text)
            ),
            Msg::Call { step, name, input } => format!(
                r#"{{"role": "assistant", "content": [{{"type": "thinking", "thinking": "step {step}: use {name}", "signature": "sig-{step}"}}, {{"type": "tool_use", "id": "toolu_{step}", "name": "{name}", "input": {input}{cache}}}]}}"#
            ),
            Msg::Result { step, text } => format!(
                r#"{{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "toolu_{step}", "content": {}{cache}}}]}}"#,
                quoted(text)
            ),
            Msg::Done(text) => format!(
                r#"{{"role": "assistant", "content": [{{"type": "text", "text": {}{cache}}}]}}"#,
                quoted(text)
            ),
        }
    }
}

/// The client's messages as sent: the last one marked for caching.
fn raws(history: &[Msg]) -> Vec<String> {
    raws_with(history, true)
}

fn raws_with(history: &[Msg], caching: bool) -> Vec<String> {
    history
        .iter()
        .enumerate()
        .map(|(at, m)| m.raw(caching && at + 1 == history.len()))
        .collect()
}

fn body(history: &[Msg], stream: bool) -> String {
    body_with(history, stream, true)
}

fn body_with(history: &[Msg], stream: bool, caching: bool) -> String {
    format!(
        r#"{{"model": "claude-test", "max_tokens": 1024, "system": {SYSTEM}, "tools": {TOOLS}, "thinking": {THINKING}, "metadata": {METADATA}, "messages": [{}], "stream": {stream}}}"#,
        raws_with(history, caching).join(", ")
    )
}

/// A `Read` of `path` at `step` and its result `text`.
fn read(step: usize, path: &str, text: &str) -> [Msg; 2] {
    [
        Msg::Call {
            step,
            name: "Read",
            input: format!(r#"{{"file_path": {}}}"#, quoted(path)),
        },
        Msg::Result {
            step,
            text: text.into(),
        },
    ]
}

fn output(step: usize) -> String {
    lines(step, 40)
}

fn lines(step: usize, count: usize) -> String {
    (0..count)
        .map(|j| {
            format!(
                "    let value_{step}_{j} = compute_{j}(input_{step}); // src/file_{step}.rs:{j}"
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn forwarded(seen: &support::Seen) -> Vec<Box<RawValue>> {
    let body: Value = seen.json();
    serde_json::from_value::<Vec<Value>>(body["messages"].clone()).unwrap();
    let text = seen.text();
    #[derive(serde::Deserialize)]
    struct Messages {
        messages: Vec<Box<RawValue>>,
    }
    serde_json::from_str::<Messages>(&text).unwrap().messages
}

fn blocks(message: &Value) -> Vec<Value> {
    message["content"].as_array().cloned().unwrap_or_default()
}

fn ids(message: &Value, kind: &str, key: &str) -> Vec<String> {
    blocks(message)
        .iter()
        .filter(|b| b["type"] == kind)
        .map(|b| b[key].as_str().unwrap().to_string())
        .collect()
}

/// Every tool_use is answered in the next message and every tool_result
/// answers a tool_use of the message before.
fn assert_paired(messages: &[Value]) {
    for (at, message) in messages.iter().enumerate() {
        let results = ids(message, "tool_result", "tool_use_id");
        if !results.is_empty() {
            let calls = ids(&messages[at - 1], "tool_use", "id");
            for id in &results {
                assert!(
                    calls.contains(id),
                    "result {id} at {at} has no call before it"
                );
            }
        }
        let calls = ids(message, "tool_use", "id");
        if !calls.is_empty() && at + 1 < messages.len() {
            let answered = ids(&messages[at + 1], "tool_result", "tool_use_id");
            for id in &calls {
                assert!(answered.contains(id), "call {id} at {at} is not answered");
            }
        }
    }
}

/// Tokens of the content the model reads (texts, thinking, inputs, results).
fn content_tokens(messages: &[Value]) -> usize {
    let counter = cwl::O200k::new();
    messages
        .iter()
        .flat_map(blocks)
        .map(|b| {
            let text = match b["type"].as_str().unwrap() {
                "text" => b["text"].as_str().unwrap().to_string(),
                "thinking" => b["thinking"].as_str().unwrap().to_string(),
                "tool_use" => b["input"].to_string(),
                "tool_result" => b["content"].as_str().unwrap().to_string(),
                other => panic!("unexpected block {other}"),
            };
            counter.count(&text)
        })
        .sum()
}

async fn send(client: &reqwest::Client, url: &str, body: String) -> reqwest::Response {
    client
        .post(url)
        .header("x-api-key", "sk-ant-secret")
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Marks placed on the forwarded messages: where, by message index.
fn marks(messages: &[Value]) -> Vec<usize> {
    messages
        .iter()
        .enumerate()
        .filter(|(_, m)| blocks(m).iter().any(|b| b.get("cache_control").is_some()))
        .map(|(at, _)| at)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_tool_using_conversation_stays_within_budget() {
    long_conversation(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_breakpoint_is_added_when_the_client_does_not_cache() {
    let seen = long_conversation(false).await;
    for request in seen {
        assert!(!request.text().contains("cache_control"));
    }
}

async fn long_conversation(caching: bool) -> Vec<support::Seen> {
    let upstream = Scripted::start().await;
    let openai = Scripted::start().await;
    let budget = 4_000;
    let proxy = support::proxy(budget, &upstream, &openai, None, None).await;
    let client = reqwest::Client::new();
    let url = proxy.url("/v1/messages?beta=true");
    let mut history = Vec::new();
    let mut step = 0;
    let mut tasks = Vec::new();
    let mut requests = 0;
    for task in 0..4 {
        let text = format!("Task {task}: fix module {task}");
        tasks.push(text.clone());
        history.push(Msg::User(text));
        send(&client, &url, body_with(&history, false, caching)).await;
        requests += 1;
        for i in 0..15 {
            step += 1;
            let (name, input) = if i % 3 == 2 {
                (
                    "Edit",
                    format!(
                        r#"{{"file_path": "src/file_{}.rs", "old_string": "compute_1", "new_string": "compute_one"}}"#,
                        step - 1
                    ),
                )
            } else {
                ("Read", format!(r#"{{"file_path": "src/file_{step}.rs"}}"#))
            };
            history.push(Msg::Call { step, name, input });
            history.push(Msg::Result {
                step,
                text: output(step),
            });
            let response = send(&client, &url, body_with(&history, false, caching)).await;
            assert_eq!(response.status(), 200);
            requests += 1;
        }
        history.push(Msg::Done(format!("Done with task {task}.")));
    }
    let seen = upstream.seen();
    assert_eq!(seen.len(), requests);
    assert!(openai.seen().is_empty());
    let full: Vec<Value> = raws_with(&history, caching)
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    assert!(
        content_tokens(&full) > 5 * budget,
        "the history must be far over budget"
    );

    for (at, request) in seen.iter().enumerate() {
        assert_eq!(request.path, "/v1/messages?beta=true");
        assert_eq!(request.headers["x-api-key"], "sk-ant-secret");
        let text = request.text();
        for field in [
            format!(r#""system":{SYSTEM}"#),
            format!(r#""tools":{TOOLS}"#),
            format!(r#""thinking":{THINKING}"#),
            format!(r#""metadata":{METADATA}"#),
        ] {
            assert!(text.contains(&field), "request {at} lost {field}");
        }
        let raw = forwarded(request);
        let messages: Vec<Value> = raw
            .iter()
            .map(|r| serde_json::from_str(r.get()).unwrap())
            .collect();
        assert_paired(&messages);
        assert!(
            content_tokens(&messages) <= budget,
            "request {at}: {} tokens of content",
            content_tokens(&messages)
        );
    }
    let events = proxy.events();
    assert_eq!(events.len(), requests);
    assert!(
        events
            .iter()
            .all(|e| e.conversation == events[0].conversation)
    );
    assert!(
        events.iter().all(|e| e.tokens_after <= budget),
        "{events:#?}"
    );
    assert!(events.iter().any(|e| !e.evicted.is_empty()));
    assert!(events.iter().skip(1).all(|e| e.route == "continue"));

    // The last request: its latest assistant turn and results byte for
    // byte, every user turn kept.
    let last = seen.last().unwrap();
    let raw = forwarded(last);
    let sent = raws_with(&history[..history.len() - 1], caching);
    let n = raw.len();
    assert_eq!(raw[n - 1].get(), sent[sent.len() - 1]);
    assert_eq!(raw[n - 2].get(), sent[sent.len() - 2]);
    assert!(raw.len() < sent.len());
    let text = last.text();
    for task in &tasks {
        assert!(text.contains(task), "user turn {task} lost");
    }

    // A caching client gets one more breakpoint, where the last pass
    // changed the view, once a pass has evicted; it stays there while
    // nothing else is evicted.
    if caching {
        let first = events.iter().position(|e| !e.evicted.is_empty()).unwrap();
        let mut previous: Option<String> = None;
        for (at, request) in seen.iter().enumerate() {
            let messages: Vec<Value> = forwarded(request)
                .iter()
                .map(|r| serde_json::from_str(r.get()).unwrap())
                .collect();
            let placed = marks(&messages);
            if at < first {
                assert_eq!(placed, [messages.len() - 1], "request {at}");
                continue;
            }
            assert_eq!(placed.len(), 2, "request {at}: {placed:?}");
            assert!(placed[0] < messages.len() - 2);
            let ours = messages[placed[0]].to_string();
            if events[at].evicted.is_empty()
                && let Some(previous) = &previous
            {
                assert_eq!(&ours, previous, "request {at}: the breakpoint moved");
            }
            previous = Some(ours);
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_conversation_goes_through_byte_for_byte() {
    let upstream = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &upstream, &openai, None, None).await;
    let client = reqwest::Client::new();
    let [call, result] = read(1, "a.rs", "fn main() {}");
    let history = vec![Msg::User("hello".into()), call, result];
    let sent = body(&history, true);
    send(&client, &proxy.url("/v1/messages"), sent.clone()).await;
    let seen = upstream.seen();
    // Every field's value and every message as the client wrote them.
    let (ours, theirs) = (
        Body::parse(sent.as_bytes()).unwrap(),
        Body::parse(&seen[0].body).unwrap(),
    );
    for key in [
        "model",
        "max_tokens",
        "system",
        "tools",
        "thinking",
        "metadata",
        "stream",
    ] {
        assert_eq!(
            ours.get(key).unwrap().get(),
            theirs.get(key).unwrap().get(),
            "{key}"
        );
    }
    let raw: Vec<String> = forwarded(&seen[0])
        .iter()
        .map(|r| r.get().to_string())
        .collect();
    assert_eq!(raw, raws(&history));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_relayed_as_they_arrive_and_in_order() {
    let upstream = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &upstream, &openai, None, None).await;
    let gate = Arc::new(Notify::new());
    let chunks: Vec<String> = (0..5)
        .map(|i| format!("event: content_block_delta\ndata: {{\"index\":{i}}}\n\n"))
        .collect();
    upstream.reply(Reply::Chunks {
        chunks: chunks.clone(),
        gate: Some(Arc::clone(&gate)),
        drop: false,
    });
    let client = reqwest::Client::new();
    let mut response = send(
        &client,
        &proxy.url("/v1/messages"),
        body(&[Msg::User("hi".into())], true),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    // The first chunk arrives while the upstream still holds the rest.
    let first = response.chunk().await.unwrap().unwrap();
    assert_eq!(first, chunks[0].as_bytes());
    gate.notify_one();
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert_eq!(String::from_utf8(rest).unwrap(), chunks[1..].concat());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_and_drops_are_relayed() {
    let upstream = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &upstream, &openai, None, None).await;
    let client = reqwest::Client::new();
    let url = proxy.url("/v1/messages");
    let history = [Msg::User("hi".into())];
    for (status, body_text) in [
        (
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        ),
        (
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
        ),
        (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
        ),
    ] {
        upstream.reply(Reply::Whole {
            status,
            headers: vec![("retry-after", "7"), ("content-type", "application/json")],
            body: body_text.into(),
        });
        let response = send(&client, &url, body(&history, false)).await;
        assert_eq!(response.status().as_u16(), status);
        assert_eq!(response.headers()["retry-after"], "7");
        assert_eq!(response.text().await.unwrap(), body_text);
    }
    // A redirect is the client's to follow, not the proxy's.
    upstream.reply(Reply::Whole {
        status: 307,
        headers: vec![("location", "http://127.0.0.1:9/elsewhere")],
        body: String::new(),
    });
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = send(&plain, &url, body(&history, false)).await;
    assert_eq!(response.status(), 307);
    assert_eq!(
        response.headers()["location"],
        "http://127.0.0.1:9/elsewhere"
    );

    let gate = Arc::new(Notify::new());
    upstream.reply(Reply::Chunks {
        chunks: vec!["event: message_start\n\n".into()],
        gate: Some(Arc::clone(&gate)),
        drop: true,
    });
    let mut response = send(&client, &url, body(&history, true)).await;
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().unwrap();
    assert_eq!(first, "event: message_start\n\n".as_bytes());
    gate.notify_one();
    let mut ended = false;
    loop {
        match response.chunk().await {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(_) => {
                ended = true;
                break;
            }
        }
    }
    assert!(
        ended,
        "a dropped upstream stream must reach the client as an error"
    );

    // An upstream that is not there: a provider-shaped 502.
    let dead = support::proxy_to(
        80_000,
        &support::dead_url().await,
        &openai.url(),
        None,
        None,
    )
    .await;
    let response = send(&client, &dead.url("/v1/messages"), body(&history, false)).await;
    assert_eq!(response.status(), 502);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "api_error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_history_starts_a_new_conversation() {
    let upstream = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &upstream, &openai, None, None).await;
    let client = reqwest::Client::new();
    let url = proxy.url("/v1/messages");
    let mut history = vec![
        Msg::User("first".into()),
        Msg::Done("answer".into()),
        Msg::User("second".into()),
    ];
    send(&client, &url, body(&history, false)).await;
    history.push(Msg::Done("answer two".into()));
    history.push(Msg::User("third".into()));
    send(&client, &url, body(&history, false)).await;
    history[2] = Msg::User("second, rephrased".into());
    history.truncate(3);
    send(&client, &url, body(&history, false)).await;
    let events = proxy.events();
    let routes: Vec<&str> = events.iter().map(|e| e.route).collect();
    assert_eq!(routes, ["new", "continue", "branch"]);
    assert_eq!(events[0].conversation, events[1].conversation);
    assert_ne!(events[2].conversation, events[0].conversation);
    assert_eq!(events[2].pushed, 3);
    let last = upstream.seen().pop().unwrap();
    assert!(last.text().contains("second, rephrased"));
    assert!(!last.text().contains("third"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_clients_at_once_keep_their_own_conversations() {
    let upstream = Scripted::start().await;
    let openai = Scripted::start().await;
    let budget = 3_000;
    let proxy = support::proxy(budget, &upstream, &openai, None, None).await;
    let url = proxy.url("/v1/messages");
    let run = |who: &'static str| {
        let url = url.clone();
        async move {
            let client = reqwest::Client::new();
            let mut history = vec![Msg::User(format!("{who}: start"))];
            for step in 1..=30 {
                history.push(Msg::Call {
                    step,
                    name: "Read",
                    input: format!(r#"{{"file_path": "{who}/{step}.rs"}}"#),
                });
                history.push(Msg::Result {
                    step,
                    text: format!("{who} says\n{}", lines(step, 10)),
                });
                let response = send(&client, &url, body(&history, false)).await;
                assert_eq!(response.status(), 200);
            }
        }
    };
    tokio::join!(run("alice"), run("bob"));
    let events = proxy.events();
    assert_eq!(events.len(), 60);
    let conversations: std::collections::BTreeSet<&str> =
        events.iter().map(|e| e.conversation.as_str()).collect();
    assert_eq!(conversations.len(), 2);
    assert!(
        events.iter().all(|e| e.tokens_after <= budget),
        "{events:#?}"
    );
    assert!(events.iter().any(|e| !e.evicted.is_empty()));
    for seen in upstream.seen() {
        let text = seen.text();
        assert!(
            text.contains("alice") != text.contains("bob"),
            "a request mixes two conversations"
        );
        let messages: Vec<Value> = forwarded(&seen)
            .iter()
            .map(|r| serde_json::from_str(r.get()).unwrap())
            .collect();
        assert_paired(&messages);
    }
}

/// The histories a scripted client sends, one per request: two tasks of
/// reads and edits.
fn script() -> Vec<Vec<Msg>> {
    let mut history = Vec::new();
    let mut out = Vec::new();
    let mut step = 0;
    for task in 0..2 {
        history.push(Msg::User(format!("Task {task}: tidy module {task}")));
        out.push(history.clone());
        for i in 0..12 {
            step += 1;
            let (name, input) = if i % 4 == 3 {
                (
                    "Edit",
                    format!(
                        r#"{{"file_path": "src/file_{}.rs", "old_string": "a", "new_string": "b"}}"#,
                        step - 1
                    ),
                )
            } else {
                ("Read", format!(r#"{{"file_path": "src/file_{step}.rs"}}"#))
            };
            history.push(Msg::Call { step, name, input });
            history.push(Msg::Result {
                step,
                text: output(step),
            });
            out.push(history.clone());
        }
        history.push(Msg::Done(format!("Done with task {task}.")));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_conversation_is_rebuilt_from_its_session_to_the_same_view() {
    let budget = 4_000;
    let client = reqwest::Client::new();
    let mut bodies = Vec::new();
    let mut runs = Vec::new();
    for idle in [
        std::time::Duration::from_secs(600),
        std::time::Duration::ZERO,
    ] {
        let upstream = Scripted::start().await;
        let dir = tempfile::tempdir().unwrap();
        let proxy = support::proxy_idle(
            budget,
            &upstream.url(),
            &support::dead_url().await,
            Some(dir.path()),
            None,
            idle,
        )
        .await;
        for history in script() {
            let response = send(&client, &proxy.url("/v1/messages"), body(&history, false)).await;
            assert_eq!(response.status(), 200);
        }
        bodies.push(
            upstream
                .seen()
                .into_iter()
                .map(|s| s.text())
                .collect::<Vec<_>>(),
        );
        runs.push((proxy.events(), cwl_session::list(dir.path()).unwrap()));
    }
    let (kept, resumed) = (&runs[0], &runs[1]);
    assert!(kept.0.iter().any(|e| !e.evicted.is_empty()));
    assert!(kept.0.iter().skip(1).all(|e| e.route == "continue"));
    // With no idle time at all, every request after the first rebuilds the
    // conversation from its session file, and the views are the same.
    assert!(
        resumed.0.iter().skip(1).all(|e| e.route == "resume"),
        "{:?}",
        resumed.0
    );
    assert_eq!(bodies[0], bodies[1]);
    assert_eq!(resumed.1.len(), 1, "one session, resumed in place");
    assert!(resumed.0.iter().all(|e| e.conversation == resumed.1[0].id));
    assert_eq!(resumed.1[0].messages, kept.1[0].messages);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_request_goes_out_the_same() {
    let upstream = Scripted::start().await;
    let proxy = support::proxy_to(
        80_000,
        &upstream.url(),
        &support::dead_url().await,
        None,
        None,
    )
    .await;
    let client = reqwest::Client::new();
    let history = script().pop().unwrap();
    for _ in 0..2 {
        let response = send(&client, &proxy.url("/v1/messages"), body(&history, true)).await;
        assert_eq!(response.status(), 200);
    }
    let events = proxy.events();
    assert_eq!((events[1].route, events[1].pushed), ("continue", 0));
    assert_eq!(events[0].tokens_after, events[1].tokens_after);
    let seen = upstream.seen();
    assert_eq!(seen[0].text(), seen[1].text());
}

/// A conversation of two user turns, each with a thinking call, as a
/// client asking for `model` sends it: what the upstream receives.
async fn two_turns_with_thinking(model: &str) -> Vec<Value> {
    let upstream = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &upstream, &openai, None, None).await;
    let client = reqwest::Client::new();
    let [first_call, first_result] = read(1, "a.rs", "fn main() {}");
    let [second_call, second_result] = read(2, "b.rs", "fn b() {}");
    let history = [
        Msg::User("first".into()),
        first_call,
        first_result,
        Msg::Done("read it".into()),
        Msg::User("second".into()),
        second_call,
        second_result,
    ];
    let url = proxy.url("/v1/messages");
    for end in [3, 5, 7] {
        let sent = body(&history[..end], false).replace("claude-test", model);
        send(&client, &url, sent).await;
    }
    let seen = upstream.seen();
    let last: Value = seen.last().unwrap().json();
    serde_json::from_value(last["messages"].clone()).unwrap()
}

fn thinking_steps(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .flat_map(blocks)
        .filter(|b| b["type"] == "thinking")
        .map(|b| b["signature"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earlier_turns_thinking_goes_where_the_model_drops_it() {
    // Claude Sonnet 4.5 keeps only the current turn's thinking: the proxy
    // takes the first turn's out, as the API would.
    let sonnet = two_turns_with_thinking("claude-sonnet-4-5-20250929").await;
    assert_eq!(thinking_steps(&sonnet), vec!["sig-2"]);
    assert_eq!(sonnet.len(), 7, "every message stays: {sonnet:?}");
    assert_paired(&sonnet);
    // Claude Opus 4.5 keeps every turn's: nothing changes.
    let opus = two_turns_with_thinking("claude-opus-4-5").await;
    assert_eq!(thinking_steps(&opus), vec!["sig-1", "sig-2"]);
}
