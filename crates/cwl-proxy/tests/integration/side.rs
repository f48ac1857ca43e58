//! Side calls through the proxy: Self-GC's planner and cwm's summaries go
//! to the client's upstream with its headers before its request is
//! forwarded, their answers are stored so a rebuilt conversation replays
//! them, and an upstream that fails them leaves the conversation intact.

use crate::support;

use std::time::Duration;

use cwl::Record;
use cwl_proxy::event::Event;
use cwl_session::strategy::StrategyName;
use serde_json::{Value, json};
use support::porting::{
    self, assert_paired, chat_answer, chat_body, content_tokens, fold_plan, opening, output,
};
use support::{Reply, Running, Scripted, Seen, quoted};

const PLANNER: &str = "context garbage collector";
const SUMMARY: &str = "Summarize the following tool output";

/// A proxy managing every conversation with `strategy` at `budget` in
/// front of the `(anthropic, openai)` upstreams, storing in `store`; its
/// side calls ask `planner` (else the client's model) and wait at most
/// `timeout`.
async fn side_proxy(
    strategy: StrategyName,
    budget: usize,
    (anthropic, openai): (&Scripted, &Scripted),
    store: Option<&std::path::Path>,
    planner: Option<&str>,
    timeout: Duration,
) -> Running {
    let idle = Duration::from_secs(600);
    let (anthropic, openai) = (anthropic.url(), openai.url());
    support::proxy_side(
        strategy,
        budget,
        &anthropic,
        &openai,
        store,
        None,
        idle,
        planner,
        Some(timeout),
    )
    .await
}

/// Sends the 40-step porting task (outputs `lines` lines long) through
/// `proxy`, as pi would; returns the messages of the last request.
async fn drive(proxy: &Running, lines: usize) -> Vec<String> {
    let client = reqwest::Client::new();
    let mut messages = opening();
    for step in 1..=40 {
        porting::step(&mut messages, step, lines);
        let response = client
            .post(proxy.url("/v1/chat/completions"))
            .header("authorization", "Bearer sk-client")
            .body(chat_body(&messages))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    messages
}

/// The client's requests as forwarded, and the side calls, apart.
fn split(seen: &[Seen]) -> (Vec<Value>, Vec<Seen>) {
    let (side, main): (Vec<Seen>, Vec<Seen>) = seen
        .iter()
        .cloned()
        .partition(|s| s.json().get("tools").is_none());
    (main.iter().map(Seen::json).collect(), side)
}

/// Every forwarded request within `budget`, calls paired, the client's
/// user turns kept (strategies may add notes), the latest result (outputs
/// `lines` long) sent whole when the request ends with it.
fn assert_intact(main: &[Value], budget: usize, lines: usize) {
    assert_eq!(main.len(), 40);
    for (at, body) in main.iter().enumerate() {
        let sent = body["messages"].as_array().unwrap();
        let size: usize = sent.iter().map(content_tokens).sum();
        assert!(size <= budget, "request {at}: {size} tokens");
        assert_paired(at, sent);
        let tasks: Vec<&Value> = sent
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| &m["content"])
            .filter(|c| c.as_str().is_some_and(|c| c.starts_with("Task: ")))
            .collect();
        assert_eq!(tasks.len(), if at < 14 { 1 } else { 2 }, "request {at}");
        let last = sent.last().unwrap();
        if at != 14 {
            assert_eq!(last["tool_call_id"], format!("call_{}", at + 1));
            assert_eq!(last["content"], output(at + 1, lines), "request {at}");
        }
    }
}

fn side_events(proxy: &Running) -> Vec<cwl_proxy::side::SideCallEvent> {
    proxy
        .events()
        .iter()
        .flat_map(|e: &Event| e.side_calls.clone())
        .collect()
}

fn stored(dir: &std::path::Path) -> (std::path::PathBuf, Vec<Record>) {
    let sessions = cwl_session::list(dir).unwrap();
    assert_eq!(sessions.len(), 1);
    let path = sessions[0].path.clone();
    let loaded = cwl_session::read(&path).unwrap();
    (path, loaded.records.into_iter().map(|(_, r)| r).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_gc_plans_through_the_proxy_and_forwards_the_fold_pointer() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    openai.respond(|seen| {
        seen.text()
            .contains(PLANNER)
            .then(|| chat_answer(&fold_plan(seen)))
    });
    let store = tempfile::tempdir().unwrap();
    let budget = 3_000;
    let proxy = side_proxy(
        StrategyName::SelfGc,
        budget,
        (&anthropic, &openai),
        Some(store.path()),
        None,
        Duration::from_secs(5),
    )
    .await;
    drive(&proxy, 8).await;
    let seen = openai.seen();
    let (main, side) = split(&seen);
    assert_intact(&main, budget, 8);
    assert!(!side.is_empty(), "the planner was asked");
    for call in &side {
        let body = call.json();
        assert!(call.text().contains(PLANNER), "only planner calls: {body}");
        assert_eq!(call.path, "/v1/chat/completions");
        assert_eq!(body["model"], "gpt-test", "the client's model by default");
        assert_eq!(body["stream"], false);
        assert_eq!(call.headers["authorization"], "Bearer sk-client");
    }
    let first_planner = seen
        .iter()
        .position(|s| s.text().contains(PLANNER))
        .unwrap();
    let pointer = "Folded to sidecars; the recall tool restores each exactly: function:read:1";
    assert!(
        !seen[..first_planner]
            .iter()
            .any(|s| s.text().contains(pointer)),
        "no fold before a plan"
    );
    let pointed = main
        .iter()
        .filter(|b| b.to_string().contains(pointer))
        .count();
    assert!(pointed > 0, "the fold pointer is forwarded");
    let last = main.last().unwrap();
    let users: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        users[0].starts_with("Task: port the module") && users[0].contains(pointer),
        "the pointer rides on the user message: {users:?}"
    );
    assert!(
        last.to_string()
            .contains("[folded as function:read:30; the recall tool restores it exactly]"),
        "{last}"
    );

    let events = side_events(&proxy);
    assert_eq!(events.len(), side.len());
    assert!(events.iter().all(|e| e.ok && e.purpose == "planner"));
    assert_eq!(events[0].input_tokens, Some(1234));
    assert_eq!(events[0].output_tokens, Some(56));

    let (path, records) = stored(store.path());
    let answers: Vec<&Result<String, String>> = records
        .iter()
        .filter_map(|r| match r {
            Record::SideCall {
                result, purpose, ..
            } if purpose == "planner" => Some(result),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), side.len());
    assert!(
        answers
            .iter()
            .all(|a| a.as_ref().is_ok_and(|t| t.contains("<gc_plan>")))
    );
    let sidecars = path.with_extension("sidecars");
    let first = std::fs::read_to_string(sidecars.join("function-read-1.txt")).unwrap();
    assert_eq!(first, output(1, 8), "the folded payload, byte for byte");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_rebuilt_from_the_store_replays_the_planner_answers() {
    let budget = 3_000;
    let mut forwarded = Vec::new();
    let mut asked = Vec::new();
    for idle in [Duration::from_secs(600), Duration::ZERO] {
        let anthropic = Scripted::start().await;
        let openai = Scripted::start().await;
        openai.respond(|seen| {
            seen.text()
                .contains(PLANNER)
                .then(|| chat_answer(&fold_plan(seen)))
        });
        let store = tempfile::tempdir().unwrap();
        let proxy = support::proxy_side(
            StrategyName::SelfGc,
            budget,
            &anthropic.url(),
            &openai.url(),
            Some(store.path()),
            None,
            idle,
            None,
            Some(Duration::from_secs(5)),
        )
        .await;
        drive(&proxy, 8).await;
        let (main, side) = split(&openai.seen());
        if idle == Duration::ZERO {
            let routes: Vec<&str> = proxy.events().iter().map(|e| e.route).collect();
            assert!(
                routes[1..].iter().all(|r| *r == "resume"),
                "every request rebuilds the conversation: {routes:?}"
            );
        }
        forwarded.push(main);
        asked.push(side.len());
    }
    assert!(asked[0] > 0);
    assert_eq!(asked[0], asked[1], "stored answers are not asked again");
    assert_eq!(forwarded[0], forwarded[1], "the same views are forwarded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_side_calls_change_nothing_and_the_planner_model_reaches_them_only() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let calls = std::sync::atomic::AtomicUsize::new(0);
    openai.respond(move |seen| {
        if !seen.text().contains(PLANNER) {
            return None;
        }
        Some(
            match calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 3 {
                0 => Reply::Whole {
                    status: 200,
                    headers: vec![("content-type", "text/html")],
                    body: "<html>not a model</html>".into(),
                },
                1 => Reply::Whole {
                    status: 500,
                    headers: vec![("content-type", "application/json")],
                    body: r#"{"error":{"message":"boom"}}"#.into(),
                },
                _ => Reply::Hang,
            },
        )
    });
    let store = tempfile::tempdir().unwrap();
    let budget = 3_000;
    let proxy = side_proxy(
        StrategyName::SelfGc,
        budget,
        (&anthropic, &openai),
        Some(store.path()),
        Some("planner-x"),
        Duration::from_secs(1),
    )
    .await;
    drive(&proxy, 8).await;
    let (main, side) = split(&openai.seen());
    assert_intact(&main, budget, 8);
    assert!(
        side.len() >= 3,
        "garbage, an error and a hang: {}",
        side.len()
    );
    assert!(side.iter().all(|s| s.json()["model"] == "planner-x"));
    assert!(main.iter().all(|b| b["model"] == "gpt-test"));
    assert!(
        !main
            .iter()
            .any(|b| b.to_string().contains("Folded to sidecars"))
    );
    let events = side_events(&proxy);
    assert_eq!(events.len(), side.len());
    let errors: Vec<&str> = events.iter().map(|e| e.error.as_deref().unwrap()).collect();
    assert!(errors[0].contains("not JSON"), "{errors:?}");
    assert!(
        errors[1].contains("500") && errors[1].contains("boom"),
        "{errors:?}"
    );
    assert_eq!(errors[2], "the planner call timed out after 1.0s");
    let (_, records) = stored(store.path());
    let failed = records
        .iter()
        .filter(|r| matches!(r, Record::SideCall { result: Err(_), .. }))
        .count();
    assert_eq!(failed, side.len());
    assert!(
        records
            .iter()
            .any(|r| matches!(r, Record::Note { text, .. } if text.contains("goes on without it")))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planner_that_always_hangs_holds_a_conversation_three_timeouts_in_all() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    openai.respond(|seen| seen.text().contains(PLANNER).then_some(Reply::Hang));
    let store = tempfile::tempdir().unwrap();
    let budget = 3_000;
    let proxy = side_proxy(
        StrategyName::SelfGc,
        budget,
        (&anthropic, &openai),
        Some(store.path()),
        None,
        Duration::from_millis(500),
    )
    .await;
    let started = std::time::Instant::now();
    drive(&proxy, 8).await;
    let (main, side) = split(&openai.seen());
    assert_intact(&main, budget, 8);
    assert_eq!(
        side.len(),
        3,
        "three stalls shut the conversation's side calls"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?} for 40 requests",
        started.elapsed()
    );
    let (_, records) = stored(store.path());
    let notes: Vec<&str> = records
        .iter()
        .filter_map(|r| match r {
            Record::Note { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        notes.contains(
            &"side calls are off for the rest of this session: failed ones took 1.5s in all"
        ),
        "{notes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwm_asks_for_summaries_through_the_proxy_and_forwards_them() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    openai.respond(|seen| {
        let body = seen.json();
        if body.get("tools").is_some() {
            return None;
        }
        let text = seen.text();
        if text.contains(SUMMARY) {
            let prompt = body["messages"][1]["content"].as_str().unwrap_or_default();
            let first = prompt.lines().nth(2).unwrap_or_default();
            Some(chat_answer(&format!("KEY POINTS: {first}")))
        } else {
            Some(chat_answer("Goal: port the module"))
        }
    });
    let store = tempfile::tempdir().unwrap();
    let budget = 6_000;
    let proxy = side_proxy(
        StrategyName::Cwm,
        budget,
        (&anthropic, &openai),
        Some(store.path()),
        None,
        Duration::from_secs(5),
    )
    .await;
    drive(&proxy, 40).await;
    let (main, side) = split(&openai.seen());
    assert_intact(&main, budget, 40);
    let summaries = side.iter().filter(|s| s.text().contains(SUMMARY)).count();
    assert!(summaries > 0, "summary calls were sent");
    let events = side_events(&proxy);
    assert!(events.iter().any(|e| e.purpose == "summary" && e.ok));
    assert!(
        main.iter()
            .any(|b| b.to_string().contains("KEY POINTS: value_")),
        "a summary replaced a result in a forwarded request"
    );
    let (path, records) = stored(store.path());
    assert!(records.iter().any(
        |r| matches!(r, Record::SideCall { purpose, result: Ok(_), .. } if purpose == "summary")
    ));
    let notes = std::fs::read_to_string(path.with_extension("notes.md")).unwrap();
    assert!(notes.contains("Goal: port the module"), "{notes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_gc_plans_over_anthropic_messages_with_the_clients_key() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    anthropic.respond(|seen| {
        seen.text().contains(PLANNER).then(|| Reply::Whole {
            status: 200,
            headers: vec![("content-type", "application/json")],
            body: json!({
                "type": "message",
                "content": [{"type": "text", "text": fold_plan(seen)}],
                "usage": {"input_tokens": 900, "output_tokens": 40},
            })
            .to_string(),
        })
    });
    let budget = 3_000;
    let proxy = side_proxy(
        StrategyName::SelfGc,
        budget,
        (&anthropic, &openai),
        None,
        None,
        Duration::from_secs(5),
    )
    .await;
    let client = reqwest::Client::new();
    let tools =
        r#"[{"name": "read", "description": "Reads a file", "input_schema": {"type": "object"}}]"#;
    let mut messages = vec![r#"{"role": "user", "content": "Task: port the module"}"#.to_string()];
    for step in 1..=30 {
        let id = format!("toolu_{step}");
        messages.push(format!(
            r#"{{"role": "assistant", "content": [{{"type": "text", "text": "step {step}"}}, {{"type": "tool_use", "id": "{id}", "name": "read", "input": {{"path": "src/mod_{step}.py"}}}}]}}"#
        ));
        messages.push(format!(
            r#"{{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "{id}", "content": {}}}]}}"#,
            quoted(&output(step, 8))
        ));
        let body = format!(
            r#"{{"model": "claude-test", "max_tokens": 1000, "system": "You are Claude Code.", "tools": {tools}, "stream": true, "messages": [{}]}}"#,
            messages.join(", ")
        );
        let response = client
            .post(proxy.url("/v1/messages?beta=true"))
            .header("x-api-key", "sk-ant-client")
            .header("anthropic-version", "2023-06-01")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let (main, side) = split(&anthropic.seen());
    assert_eq!(main.len(), 30);
    assert!(!side.is_empty(), "the planner was asked");
    let planner = anthropic
        .seen()
        .into_iter()
        .find(|s| s.text().contains(PLANNER))
        .unwrap();
    assert_eq!(planner.path, "/v1/messages?beta=true");
    assert_eq!(planner.headers["x-api-key"], "sk-ant-client");
    assert_eq!(planner.headers["anthropic-version"], "2023-06-01");
    let body = planner.json();
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["stream"], false);
    assert_eq!(
        body["system"][0]["text"], "You are Claude Code.",
        "the planner's fork keeps the system prompt"
    );
    assert!(body.get("tools").is_none());
    for (at, body) in main.iter().enumerate() {
        let size: usize = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(content_tokens)
            .sum();
        assert!(size <= budget, "request {at}: {size} tokens");
    }
    let last = main.last().unwrap();
    let first = &last["messages"][0];
    assert_eq!(first["role"], "user");
    assert_eq!(first["content"][0]["text"], "Task: port the module");
    let reminder = first["content"][1]["text"].as_str().unwrap();
    assert!(
        reminder.contains("Folded to sidecars") && reminder.contains("function:read:1"),
        "{reminder}"
    );
    assert!(
        last.to_string().contains("[folded as function:read:"),
        "{last}"
    );
    let events = side_events(&proxy);
    assert!(events.iter().all(|e| e.ok));
    assert_eq!(events[0].input_tokens, Some(900));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_gc_plans_over_openai_responses() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    openai.respond(|seen| {
        seen.text().contains(PLANNER).then(|| Reply::Whole {
            status: 200,
            headers: vec![("content-type", "application/json")],
            body: json!({
                "output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": fold_plan(seen)}]}],
                "usage": {"input_tokens": 700, "output_tokens": 30},
            })
            .to_string(),
        })
    });
    let budget = 3_000;
    let proxy = side_proxy(
        StrategyName::SelfGc,
        budget,
        (&anthropic, &openai),
        None,
        None,
        Duration::from_secs(5),
    )
    .await;
    let client = reqwest::Client::new();
    let tools = r#"[{"type": "function", "name": "read", "parameters": {"type": "object"}}]"#;
    let mut input = vec![
        r#"{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Task: port the module"}]}"#.to_string(),
    ];
    for step in 1..=30 {
        let id = format!("call_{step}");
        input.push(format!(
            r#"{{"type": "function_call", "call_id": "{id}", "name": "read", "arguments": {}}}"#,
            quoted(&format!(r#"{{"path": "src/mod_{step}.py"}}"#))
        ));
        input.push(format!(
            r#"{{"type": "function_call_output", "call_id": "{id}", "output": {}}}"#,
            quoted(&output(step, 8))
        ));
        let body = format!(
            r#"{{"model": "codex-test", "instructions": "You are Codex.", "tools": {tools}, "stream": true, "store": false, "input": [{}]}}"#,
            input.join(", ")
        );
        let response = client
            .post(proxy.url("/v1/responses"))
            .header("authorization", "Bearer sk-codex")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let (main, side) = split(&openai.seen());
    assert_eq!(main.len(), 30);
    assert!(!side.is_empty(), "the planner was asked");
    let planner = &side[0];
    assert_eq!(planner.path, "/v1/responses");
    assert_eq!(planner.headers["authorization"], "Bearer sk-codex");
    let body = planner.json();
    assert_eq!(body["model"], "codex-test");
    assert_eq!(body["stream"], false);
    assert_eq!(body["store"], false);
    assert_eq!(body["instructions"], "You are Codex.");
    let last = main.last().unwrap();
    let first = &last["input"][0];
    assert_eq!(first["content"][0]["text"], "Task: port the module");
    let reminder = first["content"][1]["text"].as_str().unwrap();
    assert!(
        reminder.contains("Folded to sidecars") && reminder.contains("function:read:1"),
        "{reminder}"
    );
    assert!(last.to_string().contains("[folded as function:read:"));
    let events = side_events(&proxy);
    assert!(events.iter().all(|e| e.ok));
    assert_eq!(events[0].input_tokens, Some(700));
}
