//! `--strategy self-gc` end to end against a scripted server that also
//! answers the planner's side calls (recognised by the planner contract
//! in their content): a long task stays within budget, folded payloads
//! are sidecar files beside the session, `recall` restores one byte-exact,
//! a resume shows the same view; a planner that answers garbage, fails or
//! hangs leaves the session intact and the run finishes.

use crate::support;

use std::time::Duration;

use clap::Parser;
use cwl::{Message, Record, Usage};
use cwl_agent::agent::{Agent, Event};
use cwl_agent::cli::AgentArgs;
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_session::Settings;
use cwl_session::strategy::StrategyName;
use serde_json::json;
use support::selfgc::*;
use support::*;

const BUDGET: usize = 6_000;
const T1: &str = "Survey the auth helpers and the store loaders.";
const T2: &str = "Show me the first part of auth.rs again, exactly.";

/// A long first task (many reads of a few hundred tokens each), then a
/// second one that recalls the first read.
fn script() -> Vec<Vec<Message>> {
    let second = vec![
        assistant(vec![call("k1", "recall", json!({"id": "function:read:1"}))]),
        assistant(vec![text("Here it is.")]),
    ];
    vec![first_task(16), second]
}

/// The first task: `reads` reads of a few hundred tokens each, then the
/// answer.
fn first_task(reads: usize) -> Vec<Message> {
    let mut first = Vec::new();
    for i in 0..reads {
        let path = if i % 2 == 0 {
            "src/auth.rs"
        } else {
            "src/store.rs"
        };
        first.push(assistant(vec![
            text(&format!("Reading part {i} of {path}.")),
            call(
                &format!("r{i}"),
                "read",
                json!({"path": path, "offset": 1 + (i / 2) * 20, "limit": 25}),
            ),
        ]));
    }
    first.push(assistant(vec![text(
        "auth has 40 checks, store 40 loaders.",
    )]));
    first
}

fn replies() -> Vec<Reply> {
    script()
        .iter()
        .flatten()
        .map(|m| Reply::openai(m, Usage::default()))
        .collect()
}

/// The main loop's requests (planner calls left out).
fn main_requests(server: &ScriptedServer) -> Vec<serde_json::Value> {
    server
        .requests()
        .iter()
        .filter(|r| !r.body.contains(PLANNER))
        .map(|r| r.json())
        .collect()
}

fn notes(shared: &std::sync::Arc<std::sync::Mutex<cwl_agent::agent::Collect>>) -> Vec<String> {
    events(shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::Note { text } => Some(text),
            _ => None,
        })
        .collect()
}

/// The content of the tool result answering call `id` in the session.
fn recorded_result(records: &[(usize, Record)], id: &str) -> String {
    records
        .iter()
        .find_map(|(_, r)| match r {
            Record::Message {
                message: Message::ToolResult(result),
                ..
            } if result.call_id == id => Some(result.content.clone()),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn self_gc_folds_to_sidecars_recalls_byte_exact_and_resumes_with_the_same_view() {
    let t = Scripted::start(
        replies(),
        selfgc_options(BUDGET, Duration::from_millis(500)),
    )
    .await;
    planner_answers(&t.server, (0..40).map(|_| fold_reads(16)));
    let mut t = t;
    assert_eq!(t.agent.context().name(), "self-gc");
    t.agent.run_task(T1).await.unwrap();
    t.agent.run_task(T2).await.unwrap();

    let requests = main_requests(&t.server);
    assert_eq!(requests.len(), 19);
    for (index, body) in requests.iter().enumerate() {
        check_openai_request(body);
        let tokens = openai_request_tokens(body);
        assert!(tokens <= BUDGET, "request {index}: {tokens} > {BUDGET}");
        let tasks = if index < 17 { 1 } else { 2 };
        assert_eq!(user_turns(body).len(), tasks, "request {index}");
        assert!(user_turns(body)[0].starts_with(T1), "user turns kept");
    }
    let planner: Vec<serde_json::Value> = t
        .server
        .requests()
        .iter()
        .filter(|r| r.body.contains(PLANNER))
        .map(|r| r.json())
        .collect();
    assert!(!planner.is_empty(), "the planner was asked");
    let first = planner[0].to_string();
    assert!(first.contains("Header metadata"), "{first}");
    assert!(
        first.contains(r#"<turn id=\"function:read:1\" />"#),
        "{first}"
    );
    assert!(
        planner[0].get("tools").is_none(),
        "no tools for the planner"
    );
    assert_eq!(planner[0]["model"], "test-model", "the session's model");

    let notes = notes(&t.shared);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("self-gc: plan committed")),
        "{notes:?}"
    );
    // The recall came back exact: the request after it holds the original.
    let closed = t.close();
    let loaded = cwl_session::read(&closed.path).unwrap();
    let original = recorded_result(&loaded.records, "r0");
    assert_eq!(recorded_result(&loaded.records, "k1"), original);
    let after_recall = &requests[18];
    let messages = after_recall["messages"].as_array().unwrap();
    let recalled = messages.iter().find(|m| m["tool_call_id"] == "k1").unwrap();
    assert_eq!(recalled["content"], original.as_str(), "byte-exact");
    let earlier = messages.iter().find(|m| m["tool_call_id"] == "r0").unwrap();
    assert_eq!(
        earlier["content"],
        "[folded as function:read:1; the recall tool restores it exactly]"
    );
    assert!(
        messages.iter().any(|m| m["role"] == "user"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.contains("<system-reminder>Folded to sidecars")
                    && c.contains("function:read:1 (read"))),
        "the pointer rides on the user turn"
    );
    // Sidecars on disk, byte for byte.
    let sidecars = closed.path.with_extension("sidecars");
    let file = std::fs::read_to_string(sidecars.join("function-read-1.txt")).unwrap();
    assert_eq!(file, original);
    let count = std::fs::read_dir(&sidecars).unwrap().count();
    assert!(count >= 2, "{count} sidecars");

    let settings = Settings::last(loaded.records.iter().map(|(_, r)| r)).unwrap();
    assert_eq!(settings.strategy, StrategyName::SelfGc);
    assert!(loaded.records.iter().any(|(_, r)| matches!(r, Record::SideCall { purpose, result: Ok(_), .. } if purpose == "planner")));
    assert!(loaded.records.iter().any(
        |(_, r)| matches!(r, Record::Checkpoint { checkpoint, .. } if checkpoint["strategy"] == "self-gc")
    ));

    // The file replays to the same view from its checkpoint and from the start.
    let config = Settings {
        strategy: StrategyName::SelfGc,
        ..Settings::default()
    }
    .config(options(BUDGET).engine_budget());
    let (replayed, full) = support::replay_both(&loaded, &closed.path, config.clone());
    assert!(replayed.warnings.is_empty(), "{:?}", replayed.warnings);
    assert_eq!(replayed.context.name(), "self-gc");
    assert!(full.warnings.is_empty(), "{:?}", full.warnings);
    assert!(full.context.view().eq(replayed.context.view()));
    let last_request: Vec<Message> = replayed.context.view().cloned().collect();

    // Resumed: the same view, a lost sidecar written again, recall works.
    std::fs::remove_file(sidecars.join("function-read-1.txt")).unwrap();
    let next = ScriptedServer::start([
        Reply::openai(
            &assistant(vec![call("k2", "recall", json!({"id": "read:1"}))]),
            Usage::default(),
        ),
        Reply::openai(&assistant(vec![text("Still here.")]), Usage::default()),
    ])
    .await
    .unwrap();
    planner_answers(&next, (0..5).map(|_| fold_reads(16)));
    let (_shared, observer) = collector();
    let toolbox = Toolbox::new(closed.dir.path(), ToolConfig::default()).unwrap();
    let mut resumed = Agent::resume(
        openai(&next),
        toolbox,
        options(BUDGET),
        &closed.path,
        observer,
    )
    .unwrap();
    assert_eq!(resumed.context().name(), "self-gc");
    assert!(resumed.context().view().cloned().eq(last_request));
    resumed.run_task("Once more, please.").await.unwrap();
    let bodies = main_requests(&next);
    let messages = bodies[1]["messages"].as_array().unwrap();
    let again = messages.iter().find(|m| m["tool_call_id"] == "k2").unwrap();
    assert_eq!(
        again["content"],
        original.as_str(),
        "a lost sidecar is read from the transcript"
    );
}

#[tokio::test]
async fn a_planner_that_answers_garbage_fails_or_hangs_changes_nothing_and_the_run_finishes() {
    let mut chosen = selfgc_options(BUDGET, Duration::from_millis(500));
    chosen.planner_model = Some("small-planner".into());
    let long = first_task(30);
    let t = Scripted::start(
        long.iter().map(|m| Reply::openai(m, Usage::default())),
        chosen,
    )
    .await;
    let mut answers = vec![
        Reply::openai(
            &Message::assistant_text("Sure! I would fold read:1 and read:2."),
            Usage::default(),
        ),
        Reply::Silence,
        Reply::openai(
            &Message::assistant_text("<gc_plan><fold>read:1</prune></gc_plan>"),
            Usage::default(),
        ),
        Reply::openai(
            &Message::assistant_text("<gc_plan><prune>read:99 user:7</prune></gc_plan>"),
            Usage::default(),
        ),
    ];
    answers.extend((0..8).map(|_| Reply::status(500, r#"{"error":{"message":"boom"}}"#)));
    planner_answers(&t.server, answers);
    let mut t = t;
    let started = std::time::Instant::now();
    t.agent.run_task(T1).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the hang cost one timeout"
    );
    let requests = main_requests(&t.server);
    assert_eq!(requests.len(), 31);
    for (index, body) in requests.iter().enumerate() {
        check_openai_request(body);
        let tokens = openai_request_tokens(body);
        assert!(tokens <= BUDGET, "request {index}: {tokens} > {BUDGET}");
        assert!(
            !body.to_string().contains("[folded as"),
            "no plan was committed"
        );
    }
    let planner_calls = t.server.requests().len() - requests.len();
    assert!(planner_calls >= 4, "{planner_calls}");
    for request in t.server.requests() {
        let model = if request.body.contains(PLANNER) {
            "small-planner"
        } else {
            "test-model"
        };
        assert_eq!(request.json()["model"], model, "--planner-model");
    }
    let notes = notes(&t.shared);
    for expected in [
        "self-gc: the planner's answer is no plan: the answer has no <gc_plan> element; the view is unchanged",
        "the planner call timed out after 0.5s; the self-gc strategy goes on without it",
        "self-gc: the planner's answer is no plan: the <gc_plan> element is malformed",
        "self-gc: plan rejected: no target of the plan could be applied",
    ] {
        assert!(
            notes.iter().any(|n| n.starts_with(expected)),
            "{expected}: {notes:?}"
        );
    }
    assert!(
        notes
            .iter()
            .any(|n| n.contains("the budget backstop pruned")),
        "the backstop kept the budget: {notes:?}"
    );
    let closed = t.close();
    assert!(!closed.path.with_extension("sidecars").exists());
    let loaded = cwl_session::read(&closed.path).unwrap();
    let failed = loaded
        .records
        .iter()
        .filter(|(_, r)| matches!(r, Record::SideCall { result: Err(_), .. }))
        .count();
    assert!(failed >= 1);
    // Every message is still in the transcript on disk.
    let results = loaded
        .records
        .iter()
        .filter(|(_, r)| {
            matches!(
                r,
                Record::Message {
                    message: Message::ToolResult(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(results, 30);
    let config = Settings {
        strategy: StrategyName::SelfGc,
        ..Settings::default()
    }
    .config(options(BUDGET).engine_budget());
    let replayed = cwl_session::replay(
        &loaded,
        &closed.path,
        std::sync::Arc::new(cwl::O200k),
        config,
        cwl_session::ReplayOptions::from_start(),
    )
    .unwrap();
    assert!(replayed.warnings.is_empty(), "{:?}", replayed.warnings);
}

#[tokio::test]
async fn a_planner_that_never_answers_costs_three_timeouts_in_all_and_four_tasks_finish() {
    let timeout = Duration::from_millis(400);
    let tasks: Vec<Vec<Message>> = (0..4).map(|_| first_task(12)).collect();
    let t = Scripted::start(
        tasks
            .iter()
            .flatten()
            .map(|m| Reply::openai(m, Usage::default())),
        selfgc_options(BUDGET, timeout),
    )
    .await;
    planner_answers(&t.server, (0..200).map(|_| Reply::Silence));
    let mut t = t;
    for task in 0..4 {
        t.agent
            .run_task(&format!("task {task}: {T1}"))
            .await
            .unwrap();
    }
    let requests = main_requests(&t.server);
    assert_eq!(requests.len(), 4 * 13, "every task ran to its answer");
    for (index, body) in requests.iter().enumerate() {
        let tokens = openai_request_tokens(body);
        assert!(tokens <= BUDGET, "request {index}: {tokens} > {BUDGET}");
    }
    let planner_calls = t.server.requests().len() - requests.len();
    assert_eq!(
        planner_calls, 3,
        "a stall skips the next model calls' side calls, and three stalls shut them"
    );
    let notes = notes(&t.shared);
    assert!(
        notes.iter().any(|n| n
            == "side calls are off for the rest of this session: failed ones took 1.2s in all"),
        "{notes:?}"
    );
    let closed = t.close();
    let loaded = cwl_session::read(&closed.path).unwrap();
    let timed_out = loaded
        .records
        .iter()
        .filter(|(_, r)| {
            matches!(r, Record::SideCall { result: Err(e), .. } if e.contains("timed out after 0.4s"))
        })
        .count();
    assert_eq!(timed_out, 3, "1.2s stalled in all, for 52 model calls");
}

#[derive(Parser)]
struct Command {
    #[command(flatten)]
    agent: AgentArgs,
}

#[test]
fn the_flags_name_the_strategy_and_the_planner_model() {
    let parsed = Command::try_parse_from([
        "cwl",
        "--strategy",
        "self-gc",
        "--planner-model",
        "small-planner",
    ])
    .unwrap();
    assert_eq!(parsed.agent.strategy, Some(StrategyName::SelfGc));
    assert_eq!(parsed.agent.planner_model.as_deref(), Some("small-planner"));
    let config =
        cwl_agent::config::parse("strategy = \"self-gc\"\nplanner_model = \"small\"\n").unwrap();
    assert_eq!(config.planner_model.as_deref(), Some("small"));
}

#[test]
fn cwl_run_with_strategy_self_gc_takes_the_planner_model_from_the_config_file() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let first = script().into_iter().next().unwrap();
    let server = runtime
        .block_on(ScriptedServer::start(
            first.iter().map(|m| Reply::openai(m, Usage::default())),
        ))
        .unwrap();
    planner_answers(&server, (0..40).map(|_| fold_reads(16)));
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = sessions.path().join("config.toml");
    std::fs::write(&config, "planner_model = \"small-planner\"\n").unwrap();
    cwl_agent::cli::run_run(cwl_agent::cli::RunArgs {
        agent: AgentArgs {
            provider: Some(cwl_provider::ProviderKind::OpenAi),
            model: Some("gpt-test".into()),
            base_url: Some(format!("{}/v1", server.url())),
            cwd: Some(work.path().to_owned()),
            session_dir: Some(sessions.path().to_owned()),
            config: Some(config),
            approval: Some(cwl_agent::agent::ApprovalMode::Never),
            budget: Some("6000".parse().unwrap()),
            strategy: Some(StrategyName::SelfGc),
            ..AgentArgs::default()
        },
        tasks: vec![T1.into()],
        prompt: None,
    })
    .unwrap();
    let requests = server.requests();
    let planner: Vec<_> = requests
        .iter()
        .filter(|r| r.body.contains(PLANNER))
        .collect();
    assert!(!planner.is_empty());
    for request in &planner {
        assert_eq!(request.json()["model"], "small-planner");
    }
    for request in requests.iter().filter(|r| !r.body.contains(PLANNER)) {
        let body = request.json();
        assert_eq!(body["model"], "gpt-test");
        check_openai_request(&body);
        assert!(openai_request_tokens(&body) <= 6_000);
    }
    let listed = cwl_session::list(sessions.path()).unwrap();
    let sidecars = listed[0].path.with_extension("sidecars");
    assert!(
        std::fs::read_dir(&sidecars).unwrap().count() > 0,
        "sidecars beside the session file"
    );
}

/// Runs the first script under self-gc with `options`, returning the
/// number of planner calls and the session's settings record.
fn run_with_options(options: &[&str]) -> Result<(usize, cwl::Record), String> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let first = script().into_iter().next().unwrap();
    let server = runtime
        .block_on(ScriptedServer::start(
            first.iter().map(|m| Reply::openai(m, Usage::default())),
        ))
        .unwrap();
    planner_answers(&server, (0..40).map(|_| fold_reads(16)));
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    cwl_agent::cli::run_run(cwl_agent::cli::RunArgs {
        agent: AgentArgs {
            provider: Some(cwl_provider::ProviderKind::OpenAi),
            model: Some("gpt-test".into()),
            base_url: Some(format!("{}/v1", server.url())),
            cwd: Some(work.path().to_owned()),
            session_dir: Some(sessions.path().to_owned()),
            approval: Some(cwl_agent::agent::ApprovalMode::Never),
            budget: Some("6000".parse().unwrap()),
            strategy: Some(StrategyName::SelfGc),
            strategy_options: options.iter().map(|o| o.to_string()).collect(),
            ..AgentArgs::default()
        },
        tasks: vec![T1.into()],
        prompt: None,
    })
    .map_err(|error| format!("{error:#}"))?;
    let planner = server
        .requests()
        .iter()
        .filter(|r| r.body.contains(PLANNER))
        .count();
    let listed = cwl_session::list(sessions.path()).unwrap();
    let loaded = cwl_session::read(&listed[0].path).unwrap();
    let settings = loaded
        .records
        .iter()
        .map(|(_, record)| record.clone())
        .find(|record| matches!(record, cwl::Record::Settings { .. }))
        .unwrap();
    Ok((planner, settings))
}

#[test]
fn strategy_options_are_recorded_and_change_the_run_and_bad_ones_are_refused() {
    let (default_calls, settings) = run_with_options(&[]).unwrap();
    assert!(
        matches!(&settings, cwl::Record::Settings { strategy_options, .. } if strategy_options.is_null()),
        "{settings:?}"
    );
    let (late_calls, settings) = run_with_options(&["trigger=0.95", "regrowth=0.5"]).unwrap();
    let cwl::Record::Settings {
        strategy_options, ..
    } = &settings
    else {
        unreachable!()
    };
    assert_eq!(
        strategy_options,
        &serde_json::json!({"trigger": 0.95, "regrowth": 0.5})
    );
    assert!(
        late_calls < default_calls,
        "a later trigger asks the planner less: {late_calls} vs {default_calls}"
    );

    let error = run_with_options(&["trigr=0.5"]).unwrap_err();
    assert!(
        error.contains("self-gc has no option `trigr`") && error.contains("trigger"),
        "{error}"
    );
    let error = run_with_options(&["trigger=1.5"]).unwrap_err();
    assert!(error.contains("trigger 1.5 must be a share"), "{error}");
    let error = run_with_options(&["trigger"]).unwrap_err();
    assert!(error.contains("is not KEY=VALUE"), "{error}");
}
