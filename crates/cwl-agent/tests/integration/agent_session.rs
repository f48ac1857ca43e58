//! Multi-task sessions through the real HTTP clients against a scripted
//! server: budgets, user turns, request validity, the session file and
//! resuming with an identical view.

use crate::support;

use cwl::{Block, Message, Record, Usage};
use cwl_agent::agent::{Agent, AgentOptions, Event};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_provider::{OpenAiConfig, OpenAiProvider, Request};
use serde_json::{Value, json};
use support::*;

const T1: &str = "Find the login function and mark it as checked.";
const T2: &str = "Now survey the store functions.";
const T3: &str = "Write a summary file.";

/// The scripted model's replies per task.
fn script() -> Vec<Vec<Message>> {
    vec![
        vec![
            assistant(vec![
                text("Looking for login."),
                start("c1|a", "find-login", "expl", &[]),
                call("c1|b", "grep", json!({"pattern": "fn login"})),
            ]),
            assistant(vec![call("c2", "read", json!({"path": "src/auth.rs"}))]),
            assistant(vec![
                end("c3:a", Some("login is in src/auth.rs line 3")),
                start("c3:b", "mark-login", "act", &["find-login"]),
            ]),
            assistant(vec![call(
                "c4",
                "edit",
                json!({"path": "src/auth.rs", "old_text": "pub fn login(", "new_text": "// checked\npub fn login("}),
            )]),
            assistant(vec![call(
                "c5",
                "bash",
                json!({"command": "grep -c checked src/auth.rs"}),
            )]),
            assistant(vec![end("c6", None)]),
            assistant(vec![text("Marked login as checked.")]),
        ],
        vec![
            assistant(vec![
                start("d1", "survey-store", "expl", &[]),
                call("d1b", "read", json!({"path": "src/store.rs"})),
            ]),
            assistant(vec![
                call("d2", "ls", json!({"path": "src"})),
                call("d2b", "glob", json!({"pattern": "**/*.rs"})),
            ]),
            assistant(vec![end(
                "d3",
                Some("src/store.rs has save and load_0..load_39"),
            )]),
            assistant(vec![text("store.rs has save and 40 load functions.")]),
        ],
        vec![
            assistant(vec![
                start("e1", "write-summary", "act", &["survey-store"]),
                call(
                    "e1b",
                    "write",
                    json!({"path": "SUMMARY.md", "content": "# Summary\n\nsave, load_0..load_39\n"}),
                ),
            ]),
            assistant(vec![end("e2", None)]),
            assistant(vec![text("Wrote SUMMARY.md.")]),
        ],
    ]
}

const BUDGET: usize = 4_200;

/// Runs the three tasks; `usage(i)` is the usage reported for reply `i`.
async fn run_session(
    usage: impl Fn(usize) -> Usage,
) -> (
    ScriptedServer,
    Agent,
    tempfile::TempDir,
    tempfile::TempDir,
    Vec<Event>,
) {
    let replies: Vec<Reply> = script()
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, m)| Reply::openai(m, usage(i)))
        .collect();
    let mut t = Scripted::start(replies, options(BUDGET)).await;
    for (task, expected) in [T1, T2, T3].iter().zip([
        "Marked login as checked.",
        "store.rs has save and 40 load functions.",
        "Wrote SUMMARY.md.",
    ]) {
        let outcome = t.agent.run_task(task).await.unwrap();
        assert_eq!(outcome.answer, expected);
    }
    let events = events(&t.shared);
    (t.server, t.agent, t.dir, t.sessions, events)
}

#[tokio::test]
async fn a_multi_task_session_stays_within_budget_and_keeps_every_user_turn() {
    let (server, agent, dir, _sessions, events) = run_session(|_| Usage::default()).await;
    let requests = server.requests();
    let per_task: Vec<usize> = script().iter().map(Vec::len).collect();
    assert_eq!(requests.len(), per_task.iter().sum::<usize>());
    assert_eq!(server.remaining(), 0);

    let mut index = 0;
    for (task, count) in per_task.iter().enumerate() {
        for _ in 0..*count {
            let body = requests[index].json();
            check_openai_request(&body);
            let tokens = openai_request_tokens(&body);
            assert!(
                tokens <= BUDGET,
                "request {index} has {tokens} tokens, over {BUDGET}"
            );
            assert_eq!(
                user_turns(&body),
                [T1, T2, T3][..=task],
                "request {index} keeps every user turn"
            );
            index += 1;
        }
    }

    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::BudgetUnmet { .. })),
        "the budget can always be met in this session: {:?}",
        events
            .iter()
            .filter(|e| matches!(e, Event::BudgetUnmet { .. } | Event::Evicted { .. }))
            .collect::<Vec<_>>()
    );
    let evictions = events
        .iter()
        .filter(|e| matches!(e, Event::Evicted { .. }))
        .count();
    assert!(evictions > 0, "the budget forced evictions");
    assert!(agent.stats().eviction_passes > 0);
    assert!(agent.stats().max_request_tokens <= BUDGET);
    assert_eq!(agent.stats().requests, requests.len());
    assert_eq!(agent.stats().tasks, 3);

    // Tool-call ids reach the server exactly as the model sent them.
    let second = requests[1].json();
    let assistant = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    let ids: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c1|a", "c1|b"]);
    let results: Vec<&str> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["c1|a", "c1|b"]);

    // The tools really ran.
    let auth = std::fs::read_to_string(dir.path().join("src/auth.rs")).unwrap();
    assert!(auth.contains("// checked\npub fn login("));
    assert!(dir.path().join("SUMMARY.md").is_file());

    // The session file keeps the full transcript, evicted parts included,
    // and never an API key.
    let path = agent.session_path();
    let raw = std::fs::read_to_string(&path).unwrap();
    assert!(!raw.contains("sk-test-secret-key"));
    assert!(
        !raw.contains("<status>\\n"),
        "status blocks are never recorded"
    );
    let loaded = cwl_session::read(&path).unwrap();
    assert_eq!(loaded.info.budget, BUDGET as u64);
    assert!(loaded.info.tools.iter().any(|t| t.name == "delimiter"));
    let messages: Vec<&Message> = loaded
        .records
        .iter()
        .filter_map(|(_, r)| match r {
            Record::Message { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    let assistants = messages
        .iter()
        .filter(|m| matches!(m, Message::Assistant { .. }))
        .count();
    assert_eq!(assistants, requests.len());
    let view_assistants = agent
        .context()
        .view()
        .filter(|m| matches!(m, Message::Assistant { .. }))
        .count();
    assert!(
        view_assistants < assistants,
        "some assistant messages were evicted from the view"
    );
    let evicted_read = &script()[0][1];
    assert!(
        messages.contains(&evicted_read),
        "the full transcript is on disk"
    );
    let enforces = loaded
        .records
        .iter()
        .filter(|(_, r)| matches!(r, Record::Enforce { .. }))
        .count();
    assert_eq!(enforces, agent.stats().eviction_passes);
    let usages = loaded
        .records
        .iter()
        .filter(|(_, r)| {
            matches!(
                r,
                Record::Message {
                    usage: Some(_),
                    cost_usd: Some(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(usages, requests.len(), "usage and cost recorded per call");
}

#[tokio::test]
async fn resuming_rebuilds_the_identical_view() {
    // Reported prompt sizes differ from the local count, so calibrations
    // shift the count and change where eviction happens.
    let (_server, agent, dir, _sessions, _events) = run_session(|i| Usage {
        input_tokens: if i % 3 == 1 {
            0
        } else {
            2_000 + 150 * i as u64
        },
        output_tokens: 20,
        ..Usage::default()
    })
    .await;
    let path = agent.session_path();
    let loaded = cwl_session::read(&path).unwrap();
    assert!(
        loaded
            .records
            .iter()
            .any(|(_, r)| matches!(r, Record::Calibrate { .. }))
    );
    assert!(
        loaded
            .records
            .iter()
            .any(|(_, r)| matches!(r, Record::Enforce { .. }))
    );

    let original: Vec<Message> = agent.context().view().cloned().collect();
    let original_tokens = agent.context().tokens();
    let original_active = agent
        .context()
        .active_episode()
        .map(|(n, k)| (n.to_string(), k));
    drop(agent);

    let next = ScriptedServer::start([Reply::openai(
        &assistant(vec![text("Still here.")]),
        Usage::default(),
    )])
    .await
    .unwrap();
    let (shared, observer) = collector();
    let toolbox = Toolbox::new(dir.path(), ToolConfig::default()).unwrap();
    let mut resumed =
        Agent::resume(openai(&next), toolbox, options(BUDGET), &path, observer).unwrap();
    let view: Vec<Message> = resumed.context().view().cloned().collect();
    assert_eq!(view, original, "the resumed view is identical");
    assert_eq!(resumed.context().tokens(), original_tokens);
    assert_eq!(
        resumed
            .context()
            .active_episode()
            .map(|(n, k)| (n.to_string(), k)),
        original_active
    );
    assert!(
        events(&shared)
            .iter()
            .any(|e| matches!(e, Event::Note { text } if text.contains("resumed session")))
    );

    resumed.run_task("One more thing.").await.unwrap();
    let body = next.requests()[0].json();
    check_openai_request(&body);
    assert_eq!(user_turns(&body), [T1, T2, T3, "One more thing."]);
    // The request is the resumed engine's view (then the status block).
    let live: Vec<Message> = resumed.context().view().cloned().collect();
    assert_eq!(live.last(), Some(&assistant(vec![text("Still here.")])));
    let provider = OpenAiProvider::new(OpenAiConfig::new("http://127.0.0.1:9")).unwrap();
    let expected = provider.request_body(&Request::new("test-model", &live[..live.len() - 1], &[]));
    let expected = expected["messages"].as_array().unwrap();
    let sent = body["messages"].as_array().unwrap();
    assert_eq!(&sent[..expected.len()], &expected[..]);
    assert_eq!(sent.len(), expected.len() + 1);

    // The file is one session: replaying it again matches the live state.
    let reloaded = cwl_session::read(&path).unwrap();
    assert!(reloaded.warnings.is_empty());
    let config = cwl_session::Settings::default().config(resumed.options().engine_budget());
    let (replayed, full) = support::replay_both(&reloaded, &path, config.clone());
    assert!(
        replayed.checkpoint.is_some(),
        "a task end left a checkpoint"
    );
    assert!(replayed.warnings.is_empty(), "{:?}", replayed.warnings);
    let live: Vec<Message> = resumed.context().view().cloned().collect();
    assert_eq!(replayed.context.view().cloned().collect::<Vec<_>>(), live);
    assert_eq!(replayed.context.tokens(), resumed.context().tokens());
    assert_eq!(full.context.view().cloned().collect::<Vec<_>>(), live);
    assert_eq!(full.context.tokens(), resumed.context().tokens());
}

/// A one-task run whose first response reports a prompt of `reported`
/// tokens, and the local token count of each request, in order.
async fn run_reporting(reported: u64) -> (Scripted, Vec<usize>) {
    let replies = [
        Reply::openai(
            &assistant(vec![call("k1", "ls", json!({}))]),
            Usage {
                input_tokens: reported,
                output_tokens: 5,
                ..Usage::default()
            },
        ),
        Reply::openai(&assistant(vec![text("ok")]), Usage::default()),
    ];
    let mut t = Scripted::start(replies, options(20_000)).await;
    t.agent.run_task("list").await.unwrap();
    let requests = events(&t.shared)
        .iter()
        .filter_map(|e| match e {
            Event::Response { request_tokens, .. } => Some(*request_tokens),
            _ => None,
        })
        .collect();
    (t, requests)
}

#[tokio::test]
async fn calibration_uses_the_provider_count() {
    // The request counts about 1.8k tokens here; 3k is within what a
    // tokenizer difference explains.
    let (t, responses) = run_reporting(3_000).await;
    let local = cwl_session::read(&t.agent.session_path())
        .unwrap()
        .records
        .iter()
        .find_map(|(_, r)| match r {
            Record::Calibrate { local, reported } => Some((*local, *reported)),
            _ => None,
        })
        .expect("a calibration record");
    assert_eq!(local.1, 3_000);
    let first_request = openai_request_tokens(&t.server.requests()[0].json());
    assert_eq!(
        local.0 as usize, first_request,
        "the local count is the request's own count"
    );
    assert_eq!(
        t.agent.context().tokens() as i64 - t.agent.context().counted_tokens() as i64,
        3_000 - local.0 as i64
    );
    assert!(
        responses[1] > 3_000,
        "the second request is counted calibrated: {responses:?}"
    );
    assert!((t.agent.stats().cost_usd.unwrap() - (3_000.0 + 2.0 * 5.0) / 1e6).abs() < 1e-12);
}

#[tokio::test]
async fn a_model_without_prices_has_an_unknown_cost_everywhere() {
    let replies = [Reply::openai(
        &assistant(vec![text("ok")]),
        Usage {
            input_tokens: 2_000,
            output_tokens: 5,
            ..Usage::default()
        },
    )];
    let mut options = options(20_000);
    options.model.input_price = None;
    options.model.output_price = None;
    let mut t = Scripted::start(replies, options).await;
    t.agent.run_task("hi").await.unwrap();
    let stats = t.agent.stats();
    assert_eq!(stats.cost_usd, None);
    let json = serde_json::to_value(stats).unwrap();
    assert_eq!(json["cost_usd"], serde_json::Value::Null, "{json}");
    let listed = cwl_session::list(t.agent.session_path().parent().unwrap()).unwrap();
    assert_eq!(listed[0].cost_usd, None);
    let line = serde_json::to_value(&listed[0]).unwrap();
    assert_eq!(line["cost_usd"], serde_json::Value::Null, "{line}");
}

#[tokio::test]
async fn a_reported_size_no_tokenizer_explains_is_noted_and_not_trusted() {
    let (t, responses) = run_reporting(10_000_000).await;
    let records = cwl_session::read(&t.agent.session_path()).unwrap().records;
    assert!(
        records
            .iter()
            .any(|(_, r)| matches!(r, Record::Note { text, .. }
            if text.contains("10000000 tokens") && text.contains("not used to calibrate"))),
        "{records:?}"
    );
    assert!(
        !records
            .iter()
            .any(|(_, r)| matches!(r, Record::Calibrate { .. }))
    );
    assert_eq!(t.agent.context().calibration_offset(), 0);
    assert!(responses[1] < 20_000, "nothing over budget: {responses:?}");
    assert!(
        !events(&t.shared)
            .iter()
            .any(|e| matches!(e, Event::Evicted { .. })),
        "nothing evicted"
    );
}

#[tokio::test]
async fn an_anthropic_session_sends_valid_messages_requests() {
    let replies: Vec<Reply> = [
        assistant(vec![
            Block::Reasoning {
                text: "think".into(),
                signature: Some("sig-1".into()),
            },
            start("toolu_01", "find", "expl", &[]),
            call("toolu_02", "grep", json!({"pattern": "fn save"})),
            call(
                "toolu_03",
                "read",
                json!({"path": "src/store.rs", "limit": 5}),
            ),
        ]),
        assistant(vec![
            end("toolu_04", Some("save is in src/store.rs")),
            start("toolu_05", "touch", "act", &["find"]),
            call("toolu_06", "bash", json!({"command": "echo hi"})),
        ]),
        assistant(vec![end("toolu_07", None)]),
        assistant(vec![text("Done.")]),
        assistant(vec![call("toolu_08", "ls", json!({}))]),
        assistant(vec![text("Listed.")]),
    ]
    .iter()
    .map(|m| {
        Reply::anthropic(
            m,
            Usage {
                input_tokens: 1_000,
                output_tokens: 10,
                ..Usage::default()
            },
        )
    })
    .collect();
    let server = ScriptedServer::start(replies).await.unwrap();
    let (mut agent, _dirs) = anthropic_agent(&server, options(50_000));
    agent.run_task("Find save and echo.").await.unwrap();
    agent.run_task("List the files.").await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    for request in &requests {
        let body = request.json();
        check_anthropic_request(&body);
        assert_eq!(request.header("x-api-key"), Some("ak-test-secret-key"));
    }
    // The thinking block is sent back with its signature.
    let second = requests[1].json();
    let first_assistant = &second["messages"][1]["content"];
    assert_eq!(first_assistant[0]["type"], "thinking");
    assert_eq!(first_assistant[0]["signature"], "sig-1");
    // The last user turn of a later request holds tool results, then the status.
    let third = requests[2].json();
    let last = third["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_array()
        .unwrap()
        .clone();
    let kinds: Vec<&str> = last.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tool_result", "tool_result", "tool_result", "text"]);
    let cached: Vec<Value> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b.get("cache_control").is_some())
        .collect();
    assert_eq!(
        cached.len(),
        1,
        "one breakpoint in the messages, before the status block"
    );
    assert!(
        cached[0]["text"]
            .as_str()
            .is_none_or(|t| !t.starts_with("<status>"))
    );
}

/// Two tasks on Anthropic's `model`, the first thinking before its call:
/// the thinking signatures each request sends back, and the agent.
async fn thinking_session(model: &str) -> (Vec<Vec<String>>, Agent, [tempfile::TempDir; 2]) {
    let replies: Vec<Reply> = [
        assistant(vec![
            Block::Reasoning {
                text: "think".into(),
                signature: Some("sig-1".into()),
            },
            call("toolu_01", "ls", json!({})),
        ]),
        assistant(vec![text("Listed.")]),
        assistant(vec![text("Again.")]),
    ]
    .iter()
    .map(|m| Reply::anthropic(m, Usage::default()))
    .collect();
    let server = ScriptedServer::start(replies).await.unwrap();
    let mut options = options(50_000);
    options.model.name = model.into();
    let (mut agent, dirs) = anthropic_agent(&server, options);
    agent.run_task("List the files.").await.unwrap();
    agent.run_task("List them again.").await.unwrap();
    let signatures = server
        .requests()
        .iter()
        .map(|request| {
            request.json()["messages"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .filter(|b| b["type"] == "thinking")
                .map(|b| b["signature"].as_str().unwrap().to_string())
                .collect()
        })
        .collect();
    (signatures, agent, dirs)
}

#[tokio::test]
async fn earlier_tasks_thinking_goes_where_the_model_drops_it() {
    // Claude Sonnet 4.5 keeps only the current turn's thinking: the next
    // task's request goes without the first's, as the API would read it.
    let (sonnet, agent, _dirs) = thinking_session("claude-sonnet-4-5").await;
    assert_eq!(sonnet, [vec![], vec!["sig-1".to_string()], vec![]]);
    let view: Vec<Message> = agent.context().view().cloned().collect();
    let path = agent.session_path();
    drop(agent);
    // The session replays to the same view.
    let loaded = cwl_session::read(&path).unwrap();
    let config = cwl_session::Settings::default()
        .session_config(options(50_000).engine_budget(), &loaded.info.model);
    let replayed = cwl_session::replay(
        &loaded,
        &path,
        std::sync::Arc::new(cwl::O200k),
        config,
        cwl_session::ReplayOptions::from_start(),
    )
    .unwrap();
    assert_eq!(replayed.context.view().cloned().collect::<Vec<_>>(), view);

    // Claude Opus 4.5 keeps every turn's.
    let (opus, _, _) = thinking_session("claude-opus-4-5").await;
    assert_eq!(
        opus,
        [vec![], vec!["sig-1".to_string()], vec!["sig-1".to_string()]]
    );
}

/// An agent on the server's Anthropic API in a fresh workspace, with the
/// workspace and session directories it needs kept alive.
fn anthropic_agent(
    server: &ScriptedServer,
    options: AgentOptions,
) -> (Agent, [tempfile::TempDir; 2]) {
    let dir = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let (_shared, observer) = collector();
    let toolbox = Toolbox::new(dir.path(), ToolConfig::default()).unwrap();
    let agent = Agent::create(
        anthropic(server),
        toolbox,
        options,
        sessions.path(),
        observer,
    )
    .unwrap();
    (agent, [dir, sessions])
}

/// Two tasks on the Responses API with gpt-5.1-codex: episodes opened and
/// closed through `delimiter`, reasoning kept encrypted within a task and
/// gone from the next task's requests (the model drops it there), every
/// call answered, usage and cost taken from the stream.
#[tokio::test]
async fn a_responses_session_sends_valid_requests_and_drops_reasoning_where_the_model_does() {
    let replies: Vec<Reply> = [
        assistant(vec![
            Block::Reasoning {
                text: "look first".into(),
                signature: Some("enc-1".into()),
            },
            start("call_01", "find", "expl", &[]),
            call("call_02", "grep", json!({"pattern": "fn save"})),
        ]),
        assistant(vec![end("call_03", Some("save is in src/store.rs"))]),
        assistant(vec![text("Found it.")]),
        assistant(vec![call("call_04", "ls", json!({}))]),
        assistant(vec![text("Listed.")]),
    ]
    .iter()
    .map(|m| {
        Reply::responses(
            m,
            Usage {
                input_tokens: 2_000,
                cached_input_tokens: 1_000,
                output_tokens: 20,
                ..Usage::default()
            },
        )
    })
    .collect();
    let server = ScriptedServer::start(replies).await.unwrap();
    let dir = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let (shared, observer) = collector();
    let mut options = options(50_000);
    options.model = cwl_provider::ModelTable::builtin().lookup("gpt-5.1-codex");
    let toolbox = Toolbox::new(dir.path(), ToolConfig::default()).unwrap();
    let mut agent = Agent::create(
        responses(&server),
        toolbox,
        options,
        sessions.path(),
        observer,
    )
    .unwrap();
    agent.run_task("Find save.").await.unwrap();
    agent.run_task("List the files.").await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    let mut encrypted = Vec::new();
    for request in &requests {
        assert_eq!(request.path, "/v1/responses");
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-test-secret-key")
        );
        let body = request.json();
        assert_eq!(body["model"], "gpt-5.1-codex");
        assert_eq!(body["store"], false);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert!(body["instructions"].as_str().is_some_and(|i| !i.is_empty()));
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(
            tools.contains(&"delimiter") && tools.contains(&"recall"),
            "{tools:?}"
        );
        let items = body["input"].as_array().unwrap();
        let ids = |kind: &str| -> Vec<String> {
            items
                .iter()
                .filter(|item| item["type"] == kind)
                .map(|item| item["call_id"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            ids("function_call"),
            ids("function_call_output"),
            "every call answered"
        );
        encrypted.push(
            items
                .iter()
                .filter(|item| item["type"] == "reasoning")
                .map(|item| item["encrypted_content"].as_str().unwrap().to_string())
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        encrypted,
        [
            vec![],
            vec!["enc-1".to_string()],
            vec!["enc-1".to_string()],
            vec![],
            vec![]
        ],
        "sent back within its task, dropped at the next user turn"
    );
    let episodes: Vec<&str> = agent
        .context()
        .graph()
        .episodes()
        .iter()
        .map(|episode| episode.name())
        .collect();
    assert!(episodes.contains(&"find"), "{episodes:?}");
    let priced: Vec<(u64, Option<f64>)> = events(&shared)
        .iter()
        .filter_map(|event| match event {
            Event::Response {
                usage, cost_usd, ..
            } => Some((usage.input_tokens, *cost_usd)),
            _ => None,
        })
        .collect();
    assert_eq!(priced.len(), 5);
    assert!(
        priced
            .iter()
            .all(|(input, cost)| *input == 2_000 && cost.is_some_and(|c| c > 0.0)),
        "usage and cost from the stream: {priced:?}"
    );
}
