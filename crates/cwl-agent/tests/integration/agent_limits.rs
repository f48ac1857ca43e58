//! Size limits and stalled streams, end to end against the scripted
//! server: oversized calls, results and tasks are refused with errors the
//! model (or user) can act on, nothing oversized lands in the protected
//! prologue, and a silent stream is retried.

use crate::support;

use std::path::Path;
use std::time::Duration;

use cwl::{Message, Record, Usage};
use cwl_agent::agent::limits::{MAX_ARGUMENT_BYTES, MAX_REPLY_BYTES, MAX_RESULT_BYTES};
use cwl_agent::agent::{Agent, AgentError, Event};
use cwl_agent::cli::{self, AgentArgs, RunArgs};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::ProviderKind;
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_provider::{OpenAiConfig, OpenAiProvider};
use serde_json::{Value, json};
use support::*;

/// An OpenAI stream whose reply is one tool call with `arguments` sent in
/// 64 kB pieces (the scripted helper splits arguments into 7-byte pieces,
/// far too many for megabytes). `arguments` must be ASCII.
fn one_call(id: &str, name: &str, arguments: &str) -> Reply {
    calls(&[(id, name, arguments)])
}

/// [`one_call`] for several calls in one reply.
fn calls(calls: &[(&str, &str, &str)]) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "c", "object": "chat.completion.chunk", "model": "scripted",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut body = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        body += &chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        );
        for piece in arguments.as_bytes().chunks(64 * 1024) {
            let piece = std::str::from_utf8(piece).expect("ASCII arguments");
            body += &chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            );
        }
    }
    body += &chunk(json!({}), json!("tool_calls"));
    body += "data: [DONE]\n\n";
    Reply::Sse(body)
}

fn answer(text_: &str) -> Reply {
    Reply::openai(&assistant(vec![text(text_)]), Usage::default())
}

/// The results the agent reported, as (call id, is_error, content).
fn results(events: &[Event]) -> Vec<(String, bool, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult {
                id,
                is_error,
                content,
                ..
            } => Some((id.clone(), *is_error, content.clone())),
            _ => None,
        })
        .collect()
}

fn notes(path: &Path) -> Vec<String> {
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

/// Varied text of about `bytes` bytes (about one token per 4 bytes).
fn prose(bytes: usize) -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(&format!(
            "line {i}: the quick brown fox {} jumps\n",
            i * 7919
        ));
        i += 1;
    }
    out
}

#[tokio::test]
async fn a_20_mb_write_before_any_episode_is_refused_and_the_session_stays_resumable() {
    let content = "x".repeat(20 * 1024 * 1024);
    let args = json!({"path": "big.txt", "content": content}).to_string();
    let budget = 80_000;
    let mut t = Scripted::start(
        [
            one_call("w1", "write", &args),
            answer("I will write it in parts."),
        ],
        options(budget),
    )
    .await;
    let outcome = t.agent.run_task("write a huge file").await.unwrap();
    assert_eq!(outcome.answer, "I will write it in parts.");
    assert!(
        !t.dir.path().join("big.txt").exists(),
        "the call must not run"
    );

    let results = results(&events(&t.shared));
    assert_eq!(results.len(), 1);
    let (id, is_error, error) = &results[0];
    assert_eq!(id, "w1");
    assert!(is_error);
    assert!(error.contains(&format!("{} bytes", args.len())), "{error}");
    assert!(
        error.contains(&format!("cap of {MAX_ARGUMENT_BYTES} bytes")),
        "{error}"
    );
    assert!(error.contains("write the file in parts"), "{error}");

    let second = t.server.requests()[1].json();
    check_openai_request(&second);
    assert!(second.to_string().len() < 100_000);
    assert!(openai_request_tokens(&second) < budget);
    let path = t.agent.session_path();
    assert!(std::fs::metadata(&path).unwrap().len() < 200_000);
    assert!(
        notes(&path)
            .iter()
            .any(|n| n.contains("refused a `write` call with")),
        "{:?}",
        notes(&path)
    );
    drop(t.agent);

    let next = ScriptedServer::start([answer("resumed")]).await.unwrap();
    let (_, observer) = collector();
    let toolbox = Toolbox::new(t.dir.path(), ToolConfig::default()).unwrap();
    let mut resumed = Agent::resume(openai(&next), toolbox, options(budget), &path, observer)
        .expect("the session resumes");
    resumed.run_task("go on").await.unwrap();
    let body = next.requests()[0].json();
    check_openai_request(&body);
    assert!(openai_request_tokens(&body) < budget);
}

#[tokio::test]
async fn a_write_under_the_cap_that_would_not_fit_the_prologue_waits_for_an_episode() {
    let budget = 20_000;
    let content = prose(60_000);
    let write = |id: &str| call(id, "write", json!({"path": "big.txt", "content": content}));
    let replies = vec![
        Reply::openai(&assistant(vec![write("w1")]), Usage::default()),
        Reply::openai(
            &assistant(vec![
                start("d1", "survey", "expl", &[]),
                end("d2", Some("nothing to read")),
                start("d3", "big-file", "act", &["survey"]),
                write("w2"),
            ]),
            Usage::default(),
        ),
        Reply::openai(&assistant(vec![end("d4", None)]), Usage::default()),
        answer("done"),
    ];
    let mut t = Scripted::start(replies, options(budget)).await;
    let prologue = t.agent.context().tokens();
    t.agent.run_task("write big.txt").await.unwrap();

    let results = results(&events(&t.shared));
    let (_, is_error, error) = results.iter().find(|r| r.0 == "w1").unwrap();
    assert!(is_error);
    assert!(error.contains("no episode has started yet"), "{error}");
    assert!(
        error.contains("Start an episode with `delimiter` first"),
        "{error}"
    );
    let (_, is_error, ok) = results.iter().find(|r| r.0 == "w2").unwrap();
    assert!(!is_error, "{ok}");
    assert_eq!(
        std::fs::read_to_string(t.dir.path().join("big.txt")).unwrap(),
        content
    );
    // The refused call left only its short refusal in the prologue: the
    // second request is the first plus a few hundred tokens.
    let first = openai_request_tokens(&t.server.requests()[0].json());
    let second = openai_request_tokens(&t.server.requests()[1].json());
    assert!(second < first + 1_000, "{first} -> {second}");
    assert!(prologue < budget / 2);
}

/// A large read before any episode is no longer refused for want of one:
/// it goes into an inferred episode (see `agent::inferred`), which is
/// evicted like any other once the model's own episode needs the room.
#[tokio::test]
async fn a_large_read_before_any_episode_is_kept_in_an_inferred_episode() {
    let budget = 12_000;
    let replies = vec![
        Reply::openai(
            &assistant(vec![call("r1", "read", json!({"path": "data.txt"}))]),
            Usage::default(),
        ),
        Reply::openai(
            &assistant(vec![
                start("d1", "read-data", "expl", &[]),
                call("r2", "read", json!({"path": "data.txt"})),
            ]),
            Usage::default(),
        ),
        Reply::openai(
            &assistant(vec![end("d2", Some("read it"))]),
            Usage::default(),
        ),
        answer("done"),
    ];
    let server = ScriptedServer::start(replies).await.unwrap();
    let dir = workspace();
    std::fs::write(dir.path().join("data.txt"), prose(20_000)).unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let (mut agent, shared) = openai_agent(&server, dir.path(), sessions.path(), options(budget));
    agent.run_task("read data.txt").await.unwrap();

    let results = results(&events(&shared));
    for id in ["r1", "r2"] {
        let (_, is_error, read) = results.iter().find(|r| r.0 == id).unwrap();
        assert!(!is_error, "{id}: {read}");
        assert!(read.contains("line 1: the quick brown fox"), "{id}: {read}");
    }
    let names: Vec<&str> = agent
        .context()
        .graph()
        .episodes()
        .iter()
        .map(|episode| episode.name())
        .collect();
    assert_eq!(names[..2], ["t1-expl-1", "read-data"], "then the answer");
    let sizes: Vec<usize> = server
        .requests()
        .iter()
        .map(|request| openai_request_tokens(&request.json()))
        .collect();
    assert!(sizes.iter().all(|&size| size <= budget), "{sizes:?}");
}

#[tokio::test]
async fn an_oversized_result_keeps_head_and_tail_with_an_error() {
    let replies = vec![
        Reply::openai(
            &assistant(vec![
                start("d1", "big-output", "expl", &[]),
                call(
                    "b1",
                    "bash",
                    json!({"command": "printf 'first line\\n'; head -c 400000 /dev/zero | tr '\\0' 'a'; printf '\\nlast line\\n'"}),
                ),
            ]),
            Usage::default(),
        ),
        Reply::openai(&assistant(vec![end("d2", Some("ran"))]), Usage::default()),
        answer("done"),
    ];
    let server = ScriptedServer::start(replies).await.unwrap();
    let dir = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let (shared, observer) = collector();
    let config = ToolConfig {
        bash_max_bytes: 1_000_000,
        ..ToolConfig::default()
    };
    let toolbox = Toolbox::new(dir.path(), config).unwrap();
    let mut agent = Agent::create(
        openai(&server),
        toolbox,
        options(200_000),
        sessions.path(),
        observer,
    )
    .unwrap();
    agent.run_task("print a lot").await.unwrap();
    let results = results(&events(&shared));
    let (_, is_error, content) = results.iter().find(|r| r.0 == "b1").unwrap();
    assert!(is_error);
    assert!(content.len() <= MAX_RESULT_BYTES, "{}", content.len());
    assert!(
        content.contains(&format!("over the cap of {MAX_RESULT_BYTES} bytes")),
        "{}",
        &content[..300]
    );
    assert!(content.contains("The call did run"));
    assert!(content.contains("first line") && content.contains("last line"));
    assert!(content.contains("bytes omitted"));
}

#[tokio::test]
async fn a_task_too_large_for_the_session_is_refused_before_anything_is_sent() {
    let mut t = Scripted::start([answer("small")], options(10_000)).await;
    let before = std::fs::metadata(t.agent.session_path()).unwrap().len();
    let error = t.agent.run_task(&prose(40_000)).await.unwrap_err();
    assert!(matches!(error, AgentError::TaskTooLarge { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("Put the text in a file"), "{message}");
    assert!(message.contains("half the budget of"), "{message}");
    let error = t.agent.run_task(&"y".repeat(300_000)).await.unwrap_err();
    assert!(
        error.to_string().contains("at most 262144 bytes"),
        "{error}"
    );
    assert!(t.server.requests().is_empty());
    assert_eq!(
        std::fs::metadata(t.agent.session_path()).unwrap().len(),
        before
    );
    let outcome = t.agent.run_task("a small task").await.unwrap();
    assert_eq!(outcome.answer, "small");
    let users = user_turns(&t.server.requests()[0].json());
    assert_eq!(users.len(), 1, "{users:?}");
}

#[tokio::test]
async fn a_stalled_stream_is_retried_and_the_task_completes() {
    let partial = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hal\"},\"finish_reason\":null}]}\n\n";
    let server = ScriptedServer::start([Reply::Stall(partial.into()), answer("complete")])
        .await
        .unwrap();
    let provider = OpenAiProvider::new(
        OpenAiConfig::new(format!("{}/v1", server.url()))
            .with_retry(fast_retry())
            .with_idle_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let dir = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let (shared, observer) = collector();
    let toolbox = Toolbox::new(dir.path(), ToolConfig::default()).unwrap();
    let mut agent = Agent::create(
        Box::new(provider),
        toolbox,
        options(50_000),
        sessions.path(),
        observer,
    )
    .unwrap();
    let outcome = agent.run_task("say something").await.unwrap();
    assert_eq!(outcome.answer, "complete");
    let retries: Vec<(u32, String, bool)> = events(&shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::Retrying {
                attempt,
                reason,
                discarded_output,
                ..
            } => Some((attempt, reason, discarded_output)),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0].0, 1);
    assert!(
        retries[0].1.contains("stream idle timeout"),
        "{}",
        retries[0].1
    );
    assert!(retries[0].2, "the partial text is void");
    assert_eq!(server.requests().len(), 2);
    let messages: Vec<Message> = agent.context().view().cloned().collect();
    assert_eq!(
        messages.last(),
        Some(&assistant(vec![text("complete")])),
        "only the retried answer is kept"
    );
}

/// `cwl run` against a server whose first answer stalls: with the timeout
/// from `flag` or from the config file `config`, the run retries and
/// finishes.
fn run_cli_with_stall(flag: Option<Duration>, config: &str) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(ScriptedServer::start([
            Reply::Stall(String::new()),
            answer("finished"),
        ]))
        .unwrap();
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config_path = sessions.path().join("config.toml");
    std::fs::write(&config_path, config).unwrap();
    let result = cli::run_run(RunArgs {
        agent: AgentArgs {
            provider: Some(ProviderKind::OpenAi),
            model: Some("gpt-test".into()),
            base_url: Some(format!("{}/v1", server.url())),
            cwd: Some(work.path().to_owned()),
            session_dir: Some(sessions.path().to_owned()),
            config: Some(config_path),
            stream_idle_timeout: flag,
            // Never asks, even when the test runs with a terminal on stdin.
            approval: Some(cwl_agent::agent::ApprovalMode::Never),
            ..AgentArgs::default()
        },
        tasks: Vec::new(),
        prompt: Some("go".into()),
    });
    if result.is_ok() {
        assert_eq!(server.requests().len(), 2);
        let listed = cwl_session::list(sessions.path()).unwrap();
        assert_eq!((listed[0].tasks, listed[0].requests), (1, 1));
    }
    result
}

#[test]
fn the_stream_idle_timeout_comes_from_the_flag_or_the_config_file() {
    let started = std::time::Instant::now();
    run_cli_with_stall(Some(Duration::from_millis(200)), "").unwrap();
    run_cli_with_stall(None, "stream_idle_timeout = \"200ms\"\n").unwrap();
    // The flag wins over the file (30 s would fail the time check).
    run_cli_with_stall(
        Some(Duration::from_millis(200)),
        "stream_idle_timeout = \"30s\"\n",
    )
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    let error = run_cli_with_stall(None, "stream_idle_timeout = \"soon\"\n").unwrap_err();
    let text = format!("{error:#}");
    assert!(text.contains("stream_idle_timeout"), "{text}");
    assert!(text.contains("\"soon\""), "{text}");
}

#[tokio::test]
async fn small_calls_before_any_episode_still_work_when_the_prologue_fills_half_a_small_budget() {
    let budget = 3_000;
    let replies = vec![
        Reply::openai(
            &assistant(vec![call("l1", "ls", json!({"path": "."}))]),
            Usage::default(),
        ),
        answer("listed"),
    ];
    let mut t = Scripted::start(replies, options(budget)).await;
    let engine_budget = t.agent.options().engine_budget();
    assert!(
        t.agent.context().tokens() > engine_budget / 2,
        "the prologue ({}) must fill half the budget for this test",
        t.agent.context().tokens()
    );
    t.agent.run_task("list").await.unwrap();
    let results = results(&events(&t.shared));
    let (_, is_error, listing) = results.iter().find(|r| r.0 == "l1").unwrap();
    assert!(!is_error, "{listing}");
    assert!(listing.contains("README.md"), "{listing}");
}

#[tokio::test]
async fn a_reply_over_the_cap_loses_its_largest_calls_only() {
    let sizes = [200_000, 210_000, 220_000, 230_000, 240_000];
    let args: Vec<(String, String)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            (
                format!("w{i}"),
                json!({"path": format!("f{i}.txt"), "content": "x".repeat(size)}).to_string(),
            )
        })
        .collect();
    let writes: Vec<(&str, &str, &str)> = args
        .iter()
        .map(|(id, a)| (id.as_str(), "write", a.as_str()))
        .collect();
    let replies = vec![
        Reply::openai(
            &assistant(vec![
                start("d1", "plan", "expl", &[]),
                end("d2", Some("files to write")),
                start("d3", "write-files", "act", &["plan"]),
            ]),
            Usage::default(),
        ),
        calls(&writes),
        Reply::openai(&assistant(vec![end("d4", None)]), Usage::default()),
        answer("done"),
    ];
    let mut options = options(1_500_000);
    options.model.context_window = 2_000_000;
    let mut t = Scripted::start(replies, options).await;
    t.agent.run_task("write five files").await.unwrap();
    let results = results(&events(&t.shared));
    for (i, size) in sizes.iter().enumerate() {
        let (_, is_error, content) = results.iter().find(|r| r.0 == format!("w{i}")).unwrap();
        let path = t.dir.path().join(format!("f{i}.txt"));
        if i == 4 {
            assert!(is_error);
            assert!(
                content.contains(&format!("over {MAX_REPLY_BYTES} bytes")),
                "{content}"
            );
            assert!(!path.exists());
        } else {
            assert!(!is_error, "{content}");
            assert_eq!(std::fs::metadata(&path).unwrap().len(), *size as u64);
        }
    }
}
