//! The agent loop when things go wrong: retried and fatal provider errors,
//! broken streams, tool errors, runaway models, oversized requests, empty
//! replies and crashed sessions.

use crate::support;

use cwl::{Block, Message, Record, ToolCall, Usage};
use cwl_agent::agent::{Agent, AgentError, Event};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::testing::{Reply, ScriptedServer, openai_sse};
use serde_json::json;
use support::*;

fn tool_contents(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

fn status_of(body: &serde_json::Value) -> String {
    body["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn notes(path: &std::path::Path) -> Vec<String> {
    cwl_session::read(path)
        .unwrap()
        .records
        .into_iter()
        .filter_map(|(_, r)| match r {
            Record::Note { text, .. } => Some(text),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn transient_failures_are_retried_and_tools_run_once() {
    let append = assistant(vec![call(
        "a1",
        "bash",
        json!({"command": "echo ran >> count.txt"}),
    )]);
    let answer = assistant(vec![text("All done.")]);
    let partial: String = openai_sse(&answer, Usage::default())
        .split_inclusive("\n\n")
        .take(3)
        .collect();
    let mut t = Scripted::start(
        [
            Reply::status(429, r#"{"error":{"message":"slow down"}}"#)
                .with_header("retry-after", "0"),
            Reply::status(500, r#"{"error":{"message":"boom"}}"#),
            Reply::openai(&append, Usage::default()),
            Reply::Drop(partial),
            Reply::openai(&answer, Usage::default()),
        ],
        options(50_000),
    )
    .await;
    let outcome = t.agent.run_task("count").await.unwrap();
    assert_eq!(outcome.answer, "All done.");
    assert_eq!(t.server.requests().len(), 5);
    assert_eq!(
        std::fs::read_to_string(t.dir.path().join("count.txt")).unwrap(),
        "ran\n"
    );
    let retries: Vec<(u32, bool)> = events(&t.shared)
        .iter()
        .filter_map(|e| match e {
            Event::Retrying {
                attempt,
                discarded_output,
                ..
            } => Some((*attempt, *discarded_output)),
            _ => None,
        })
        .collect();
    assert_eq!(retries, [(1, false), (2, false), (1, true)]);
    // The answer's text was streamed twice (partial, then whole) but
    // recorded once.
    let loaded = cwl_session::read(&t.agent.session_path()).unwrap();
    let answers = loaded
        .records
        .iter()
        .filter(|(_, r)| matches!(r, Record::Message { message, .. } if *message == answer))
        .count();
    assert_eq!(answers, 1);
    for request in t.server.requests() {
        check_openai_request(&request.json());
    }
}

#[tokio::test]
async fn an_auth_failure_stops_with_a_clear_error_and_the_session_saved() {
    let mut t = Scripted::start(
        [Reply::status(
            401,
            r#"{"error":{"message":"invalid api key"}}"#,
        )],
        options(50_000),
    )
    .await;
    let error = t.agent.run_task("anything").await.unwrap_err();
    assert!(matches!(error, AgentError::Provider(_)));
    let text = error.to_string();
    assert!(text.contains("authentication failed (HTTP 401)"), "{text}");
    assert!(
        text.contains("OPENAI_API_KEY") && text.contains("invalid api key"),
        "{text}"
    );
    assert_eq!(t.server.requests().len(), 1, "not retried");
    let path = t.agent.session_path();
    assert!(
        notes(&path)
            .iter()
            .any(|n| n.contains("authentication failed"))
    );
    let loaded = cwl_session::read(&path).unwrap();
    assert!(loaded.records.iter().any(|(_, r)| matches!(r, Record::Message { message: Message::User { content }, .. } if content == "anything")));
    assert!(
        !std::fs::read_to_string(&path)
            .unwrap()
            .contains("sk-test-secret-key")
    );
}

#[tokio::test]
async fn a_malformed_stream_fails_clearly() {
    let mut t = Scripted::start(
        [Reply::Sse("data: {\"choices\": [oops\n\n".into())],
        options(50_000),
    )
    .await;
    let text = t.agent.run_task("anything").await.unwrap_err().to_string();
    assert!(text.contains("malformed response"), "{text}");
    assert_eq!(t.server.requests().len(), 1);
    assert!(
        notes(&t.agent.session_path())
            .iter()
            .any(|n| n.contains("malformed"))
    );
}

#[tokio::test]
async fn tool_errors_go_back_to_the_model_and_the_task_goes_on() {
    let first = assistant(vec![
        start("t1", "look", "expl", &[]),
        call("t2", "read", json!({"path": "missing.txt"})),
        call("t3", "frobnicate", json!({})),
        Block::ToolCall(ToolCall::new("t4", "read", "{not json")),
        call("t5", "write", json!({"path": "x.txt", "content": "x"})),
    ]);
    let second = assistant(vec![
        start("u1", "change", "act", &[]),
        end("u2", None),
        end("u3", Some("nothing to find")),
        start("u4", "change", "act", &["look"]),
        call("u5", "write", json!({"path": "x.txt", "content": "x"})),
        call(
            "u6",
            "write",
            json!({"path": "../outside.txt", "content": "x"}),
        ),
        end("u7", None),
    ]);
    let third = assistant(vec![text("Recovered.")]);
    let mut t = Scripted::start(openai_replies(&[first, second, third]), options(50_000)).await;
    assert_eq!(
        t.agent.run_task("try things").await.unwrap().answer,
        "Recovered."
    );

    let requests = t.server.requests();
    let results = tool_contents(&requests[1].json());
    assert_eq!(results.len(), 5);
    assert!(
        results[0].starts_with("Started expl episode `look`"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("missing.txt"), "{}", results[1]);
    assert!(results[2].contains("frobnicate"), "{}", results[2]);
    assert!(results[3].contains("not valid JSON"), "{}", results[3]);
    assert!(
        results[4].contains("exploration episode `look`"),
        "{}",
        results[4]
    );

    let results = tool_contents(&requests[2].json());
    let later = &results[results.len() - 7..];
    assert!(later[0].contains("`look` is still active"), "{}", later[0]);
    assert!(
        later[1].contains("needs a non-empty `description`"),
        "{}",
        later[1]
    );
    assert!(
        later[2].starts_with("Ended expl episode `look`"),
        "{}",
        later[2]
    );
    assert!(
        later[3].starts_with("Started act episode `change`"),
        "{}",
        later[3]
    );
    assert!(later[4].contains("x.txt"), "{}", later[4]);
    assert!(later[5].contains("outside the workspace"), "{}", later[5]);
    assert_eq!(
        std::fs::read_to_string(t.dir.path().join("x.txt")).unwrap(),
        "x"
    );
    assert!(!t.dir.path().parent().unwrap().join("outside.txt").exists());

    let rejected = events(&t.shared)
        .iter()
        .filter(|e| matches!(e, Event::DelimiterRejected { .. }))
        .count();
    assert_eq!(rejected, 2);
    assert_eq!(t.agent.stats().tool_errors, 7);
    let errors = cwl_session::read(&t.agent.session_path())
        .unwrap()
        .records
        .iter()
        .filter(|(_, r)| matches!(r, Record::Message { message: Message::ToolResult(t), .. } if t.is_error))
        .count();
    assert_eq!(errors, 7, "error flags are kept in the session");
    for request in &requests {
        check_openai_request(&request.json());
    }
}

#[tokio::test]
async fn max_turns_stops_a_looping_model() {
    let looping: Vec<Message> = (0..3)
        .map(|i| assistant(vec![call(&format!("l{i}"), "ls", json!({}))]))
        .collect();
    let mut opts = options(50_000);
    opts.max_turns = 3;
    let mut t = Scripted::start(openai_replies(&looping), opts).await;
    let error = t.agent.run_task("loop").await.unwrap_err();
    assert!(matches!(error, AgentError::MaxTurns { limit: 3 }));
    assert!(error.to_string().contains("--max-turns 3"), "{error}");
    assert_eq!(t.server.requests().len(), 3);
    assert!(
        notes(&t.agent.session_path())
            .iter()
            .any(|n| n.contains("--max-turns 3"))
    );
}

#[tokio::test]
async fn a_request_over_the_window_is_never_sent() {
    let reply = assistant(vec![
        start("w1", "read-all", "expl", &[]),
        call("w2", "read", json!({"path": "src/auth.rs"})),
    ]);
    let mut opts = options(2_800);
    opts.model = model(3_000);
    let mut t = Scripted::start(openai_replies(&[reply]), opts).await;
    let error = t.agent.run_task("read everything").await.unwrap_err();
    let AgentError::WindowExceeded { tokens, limit } = error else {
        panic!("expected WindowExceeded, got {error}");
    };
    assert_eq!(limit, 3_000);
    assert!(tokens > 3_000);
    assert_eq!(
        t.server.requests().len(),
        1,
        "the oversized request was not sent"
    );
    assert!(
        events(&t.shared)
            .iter()
            .any(|e| matches!(e, Event::BudgetUnmet { .. }))
    );
    assert!(
        notes(&t.agent.session_path())
            .iter()
            .any(|n| n.contains("window"))
    );
}

#[tokio::test]
async fn an_unmet_budget_is_shown_and_reminded_until_the_episode_closes() {
    let replies = [
        assistant(vec![
            start("b1", "read-all", "expl", &[]),
            call("b2", "read", json!({"path": "src/auth.rs"})),
        ]),
        assistant(vec![end(
            "b3",
            Some("auth.rs has login and check_0..check_39"),
        )]),
        assistant(vec![text("Done.")]),
        assistant(vec![text("Nothing else.")]),
    ];
    let mut t = Scripted::start(openai_replies(&replies), options(2_800)).await;
    t.agent.run_task("read everything").await.unwrap();
    t.agent.run_task("anything else?").await.unwrap();
    let requests = t.server.requests();
    assert!(!status_of(&requests[0].json()).contains("close your episode"));
    assert!(status_of(&requests[1].json()).contains("close your episode"));
    assert!(status_of(&requests[1].json()).contains("episode: expl `read-all` is active"));
    let last = status_of(&requests[2].json());
    assert!(!last.contains("close your episode"), "{last}");
    let events = events(&t.shared);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::BudgetUnmet { .. }))
            .count(),
        1
    );
    assert!(events.iter().any(|e| matches!(e, Event::Evicted { .. })));
    // Request 2 still carries the episode its own latest response closed;
    // it is evicted before request 3.
    assert_eq!(t.agent.stats().over_budget_requests, 2);
    assert!(openai_request_tokens(&requests[2].json()) > 2_800);
    assert!(openai_request_tokens(&requests[3].json()) <= 2_800);
}

#[tokio::test]
async fn an_empty_reply_ends_the_task_without_touching_the_transcript() {
    let replies = [assistant(vec![]), assistant(vec![text("Second.")])];
    let mut t = Scripted::start(openai_replies(&replies), options(50_000)).await;
    let outcome = t.agent.run_task("first").await.unwrap();
    assert_eq!((outcome.turns, outcome.answer.as_str()), (1, ""));
    t.agent.run_task("second").await.unwrap();
    let body = t.server.requests()[1].json();
    check_openai_request(&body);
    assert_eq!(user_turns(&body), ["first", "second"]);
    assert!(
        notes(&t.agent.session_path())
            .iter()
            .any(|n| n.contains("empty reply"))
    );
    assert_eq!(
        t.agent
            .context()
            .view()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count(),
        1
    );
}

#[tokio::test]
async fn resume_answers_unrun_calls_and_skips_a_torn_line() {
    let replies = [
        assistant(vec![call(
            "r1",
            "bash",
            json!({"command": "echo ran >> count.txt"}),
        )]),
        assistant(vec![text("Ran it.")]),
    ];
    let mut t = Scripted::start(openai_replies(&replies), options(50_000)).await;
    t.agent.run_task("run it").await.unwrap();
    let path = t.agent.session_path();
    drop(t.agent);

    // Simulate a crash right after the model asked for the call: cut the
    // file after that message and leave half a line behind.
    let file = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = file.lines().collect();
    let cut = lines
        .iter()
        .position(|l| l.contains("\"call_id\":\"r1\""))
        .unwrap();
    let mut crashed = lines[..cut].join("\n");
    crashed.push('\n');
    crashed.push_str(&lines[cut][..lines[cut].len() / 2]);
    std::fs::write(&path, crashed).unwrap();

    let next = ScriptedServer::start(openai_replies(&[assistant(vec![text("Resumed.")])]))
        .await
        .unwrap();
    let (shared, observer) = collector();
    let toolbox = Toolbox::new(t.dir.path(), ToolConfig::default()).unwrap();
    let mut resumed =
        Agent::resume(openai(&next), toolbox, options(50_000), &path, observer).unwrap();
    assert!(resumed.context().pending_calls().is_empty());
    resumed.run_task("go on").await.unwrap();
    let body = next.requests()[0].json();
    check_openai_request(&body);
    assert!(
        tool_contents(&body)[0].starts_with("Not run"),
        "{:?}",
        tool_contents(&body)
    );
    assert_eq!(
        std::fs::read_to_string(t.dir.path().join("count.txt")).unwrap(),
        "ran\n",
        "the call is never run twice"
    );
    let events = events(&shared);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Note { text } if text.contains("incomplete")))
    );
    let reloaded = cwl_session::read(&path).unwrap();
    assert!(
        reloaded.warnings.is_empty(),
        "the torn line was cut before appending"
    );
}
