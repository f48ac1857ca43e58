//! The context-window manager in the agent: `cwl run --strategy cwm` on a
//! long task against a scripted server that also answers the strategy's
//! summary calls (recognised by their content). Summaries replace large
//! tool results in the view, notes are kept in the session's notes file
//! and shown after the system prompt, the budget holds, and a model that
//! answers summaries with garbage or not at all leaves the session intact.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cwl::{Message, O200k, Record, Usage};
use cwl_agent::agent::{Agent, AgentOptions, Event};
use cwl_agent::cli::{self, AgentArgs, RunArgs};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::ProviderKind;
use cwl_provider::testing::{RecordedRequest, Reply, ScriptedServer};
use cwl_session::Settings;
use cwl_session::strategy::StrategyName;
use serde_json::{Value, json};
use support::*;

const BUDGET: usize = 10_000;
const READS: usize = 14;
const TASK: &str = "Check every data file for records with a negative balance.";

/// A workspace with `READS` data files of about 1,200 tokens each.
fn data_workspace() -> tempfile::TempDir {
    let dir = workspace();
    for i in 0..READS {
        let text: String = (0..120)
            .map(|j| format!("record {i}-{j}: account {j} balance {} EUR\n", j * 7 + i))
            .collect();
        std::fs::write(dir.path().join(format!("data{i}.txt")), text).unwrap();
    }
    dir
}

/// The main loop's script: one read per data file, then the answer.
fn script() -> Vec<Message> {
    let mut messages: Vec<Message> = (0..READS)
        .map(|i| {
            assistant(vec![
                text(&format!("Reading data{i}.txt.")),
                call(
                    &format!("r{i}"),
                    "read",
                    json!({"path": format!("data{i}.txt")}),
                ),
            ])
        })
        .collect();
    messages.push(assistant(vec![text("No negative balance anywhere.")]));
    messages
}

fn cwm_options() -> AgentOptions {
    let mut options = options(BUDGET);
    options.strategy = Some(StrategyName::Cwm);
    options
}

/// Whether a side request asks for a tool-result summary.
fn is_summary_call(request: &RecordedRequest) -> bool {
    is_side_call(request) && request.body.contains("Summarize the following tool output")
}

/// The tool messages of a main request body.
fn tool_messages(body: &Value) -> Vec<&str> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect()
}

/// Side-call records of a session file: (purpose, answered).
fn side_records(path: &Path) -> Vec<(String, Result<String, String>)> {
    cwl_session::read(path)
        .unwrap()
        .records
        .into_iter()
        .filter_map(|(_, record)| match record {
            Record::SideCall {
                purpose, result, ..
            } => Some((purpose, result)),
            _ => None,
        })
        .collect()
}

/// Replays the session from its checkpoint and from the start: both
/// without warnings and to `view`.
fn replays_to(path: &Path, view: &[Message]) {
    let loaded = cwl_session::read(path).unwrap();
    let config = Settings::default().config(cwm_options().engine_budget());
    let (from_checkpoint, full) = support::replay_both(&loaded, path, config.clone());
    assert!(
        from_checkpoint.warnings.is_empty(),
        "{:?}",
        from_checkpoint.warnings
    );
    assert_eq!(from_checkpoint.context.name(), "cwm");
    assert!(full.warnings.is_empty(), "{:?}", full.warnings);
    assert!(
        full.context.view().cloned().eq(view.iter().cloned()),
        "replayed from the start to the same view"
    );
    assert!(from_checkpoint.context.view().eq(full.context.view()));
}

fn run_args(server: &ScriptedServer, cwd: &Path, sessions: &Path) -> RunArgs {
    let config = sessions.join("config.toml");
    std::fs::write(&config, "").unwrap();
    RunArgs {
        agent: AgentArgs {
            provider: Some(ProviderKind::OpenAi),
            model: Some("gpt-test".into()),
            base_url: Some(format!("{}/v1", server.url())),
            cwd: Some(cwd.to_owned()),
            session_dir: Some(sessions.to_owned()),
            config: Some(config),
            approval: Some(cwl_agent::agent::ApprovalMode::Never),
            strategy: Some(StrategyName::Cwm),
            budget: Some(format!("{BUDGET}").parse().unwrap()),
            ..AgentArgs::default()
        },
        tasks: vec![TASK.into()],
        prompt: None,
    }
}

fn only_session(sessions: &Path) -> PathBuf {
    let listed = cwl_session::list(sessions).unwrap();
    assert_eq!(listed.len(), 1);
    listed[0].path.clone()
}

#[test]
fn cwl_run_with_cwm_summarises_large_results_keeps_notes_and_stays_within_budget() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(ScriptedServer::start(openai_replies(&script())))
        .unwrap();
    server.answer_side(gist_side);
    let work = data_workspace();
    let sessions = tempfile::tempdir().unwrap();
    cli::run_run(run_args(&server, work.path(), sessions.path())).unwrap();

    let requests = server.requests();
    let main: Vec<Value> = main_requests(&server).iter().map(|r| r.json()).collect();
    assert_eq!(main.len(), READS + 1, "every scripted reply was used once");
    for (index, body) in main.iter().enumerate() {
        check_openai_request(body);
        let tokens = openai_request_tokens(body);
        assert!(tokens <= BUDGET, "request {index}: {tokens} > {BUDGET}");
    }
    let summaries = requests.iter().filter(|r| is_summary_call(r)).count();
    assert!(summaries >= 3, "large results were summarised: {summaries}");
    assert!(
        requests
            .iter()
            .filter(|r| is_side_call(r))
            .all(|r| r.json()["model"] == "gpt-test"),
        "side calls go to the session's model"
    );

    // A summary replaces the result in the view; the call keeps its result.
    let last = main.last().unwrap();
    let results = tool_messages(last);
    let summarised = results
        .iter()
        .filter(|c| c.starts_with("[summary of a read output of "))
        .count();
    assert!(summarised >= 1, "{results:#?}");
    assert!(
        results
            .iter()
            .all(|c| c.starts_with('[') || c.contains("record ")),
        "{results:#?}"
    );
    // The notes follow the system prompt once the model has kept some.
    let path = only_session(sessions.path());
    let records = side_records(&path);
    assert!(
        records
            .iter()
            .any(|(purpose, result)| purpose == "summary" && result.is_ok())
    );
    let notes_taken = records
        .iter()
        .any(|(purpose, result)| purpose == "notes" && result.is_ok());
    assert!(notes_taken, "{records:?}");
    let notes_file = cwl_session::notes_path(&path);
    let notes = std::fs::read_to_string(&notes_file).unwrap();
    assert!(notes.starts_with("# Progress — window 1"), "{notes}");
    let (checkpoint, _) = cwl_cwm::TaskCheckpoint::parse(&notes).unwrap();
    assert_eq!(checkpoint.task_goal, TASK);
    assert!(
        last["messages"][1]["content"]
            .as_str()
            .unwrap()
            .starts_with("[working notes"),
        "{}",
        last["messages"][1]
    );

    // The session replays to the same view, summaries included.
    let loaded = cwl_session::read(&path).unwrap();
    let config = Settings::default().config(cwm_options().engine_budget());
    let full = cwl_session::replay(
        &loaded,
        &path,
        std::sync::Arc::new(O200k),
        config,
        cwl_session::ReplayOptions::from_start(),
    )
    .unwrap();
    let view: Vec<Message> = full.context.view().cloned().collect();
    replays_to(&path, &view);
    let metrics = full.context.metrics().unwrap();
    assert!(metrics["compression"]["accepted"].as_u64().unwrap() >= 3);
    assert!(metrics["compression_ratio"].as_f64().unwrap() > 2.0);

    // `cwl sessions show` prints the session's health.
    let report = cwl_agent::show::report(&path).unwrap();
    let text = cwl_agent::show::render(&report);
    assert!(text.contains("strategy cwm"), "{text}");
    assert!(text.contains("utilisation"), "{text}");
    assert!(text.contains("compression"), "{text}");
    assert!(text.contains(&notes_file.display().to_string()), "{text}");
    check_bootstrap(&runtime, &notes_file, work.path());

    cli::run_sessions(cli::SessionsArgs {
        session_dir: Some(sessions.path().to_owned()),
        config: Some(sessions.path().join("config.toml")),
        command: Some(cli::SessionsCommand::Show(cli::ShowArgs {
            id: report.id.clone(),
            json: false,
            ..cli::ShowArgs::default()
        })),
        ..cli::SessionsArgs::default()
    })
    .unwrap();
}

/// A finished run: the session file, the events, the server and the view
/// at the end.
struct Run {
    path: PathBuf,
    events: Vec<Event>,
    server: ScriptedServer,
    view: Vec<Message>,
    _sessions: tempfile::TempDir,
}

/// A fresh window from the notes file of the run: the bootstrap prompt
/// opens it; a bad checkpoint is refused before anything starts and stays
/// as it was.
fn check_bootstrap(runtime: &tokio::runtime::Runtime, notes_file: &Path, work: &Path) {
    let server = runtime
        .block_on(ScriptedServer::start(openai_replies(&[assistant(vec![
            text("Carrying on."),
        ])])))
        .unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let mut args = run_args(&server, work, sessions.path());
    args.agent.bootstrap = Some(notes_file.to_owned());
    args.tasks = vec!["Carry on.".into()];
    cli::run_run(args).unwrap();
    let body = main_requests(&server)[0].json();
    check_openai_request(&body);
    let opening = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        opening.starts_with("[CONTEXT_WINDOW_RESUME] Resuming from a checkpoint"),
        "{opening}"
    );
    assert!(opening.contains(&format!("Task: {TASK}")), "{opening}");
    let path = only_session(sessions.path());
    let records = cwl_session::read(&path).unwrap().records;
    assert!(
        records
            .iter()
            .any(|(_, r)| matches!(r, Record::Note { text, .. }
        if text.starts_with("started from the checkpoint of context window 1")))
    );

    let bad = sessions.path().join("bad.notes.md");
    let broken = "# Progress\n\n```json cwm-checkpoint\n{\"format\": 1, \"window_id\": 0, \"state_version\": 1, \"task_goal\": \"\"}\n```\n";
    std::fs::write(&bad, broken).unwrap();
    let mut args = run_args(&server, work, sessions.path());
    args.agent.bootstrap = Some(bad.clone());
    let error = format!("{:#}", cli::run_run(args).unwrap_err());
    assert!(
        error.contains("cannot start a window: it is not usable: task_goal is empty")
            && error.contains("window_id must be at least 1, not 0"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(&bad).unwrap(),
        broken,
        "left as it was"
    );
    let mut args = run_args(&server, work, sessions.path());
    args.agent.bootstrap = Some(sessions.path().join("missing.md"));
    let error = format!("{:#}", cli::run_run(args).unwrap_err());
    assert!(error.contains("cannot read the checkpoint"), "{error}");
    assert_eq!(
        cwl_session::list(sessions.path()).unwrap().len(),
        1,
        "no session started"
    );
    assert_eq!(main_requests(&server).len(), 1, "nothing more was sent");
}

/// Runs the long task with side calls answered by `side`.
async fn run_with_side(
    side: impl Fn(&RecordedRequest) -> Option<Reply> + Send + Sync + 'static,
    options: AgentOptions,
) -> Run {
    let server = ScriptedServer::start(openai_replies(&script()))
        .await
        .unwrap();
    server.answer_side(side);
    let work = data_workspace();
    let sessions = tempfile::tempdir().unwrap();
    let (mut agent, shared) = openai_agent(&server, work.path(), sessions.path(), options);
    agent.run_task(TASK).await.unwrap();
    let view: Vec<Message> = agent.context().view().cloned().collect();
    let path = agent.session_path();
    drop(agent);
    Run {
        path,
        events: events(&shared),
        server,
        view,
        _sessions: sessions,
    }
}

/// Checks a run whose summaries all failed: within budget, nothing
/// summarised, eviction carried it, the file replays.
fn check_intact(server: &ScriptedServer, path: &Path, view: &[Message]) {
    let main: Vec<Value> = main_requests(server).iter().map(|r| r.json()).collect();
    assert_eq!(main.len(), READS + 1);
    for (index, body) in main.iter().enumerate() {
        check_openai_request(body);
        let tokens = openai_request_tokens(body);
        assert!(tokens <= BUDGET, "request {index}: {tokens} > {BUDGET}");
        assert!(
            tool_messages(body).iter().all(|c| !c.starts_with('[')),
            "nothing was summarised"
        );
    }
    assert!(
        view.iter().all(
            |m| !matches!(m, Message::System { content } if content.starts_with("[working notes"))
        ),
        "no notes"
    );
    let results = view
        .iter()
        .filter(|m| matches!(m, Message::ToolResult(_)))
        .count();
    assert!(
        results < READS,
        "eviction kept the budget: {results} reads left"
    );
    replays_to(path, view);
}

#[tokio::test]
async fn summaries_answered_with_garbage_change_nothing() {
    let garbage = |request: &RecordedRequest| {
        is_side_call(request).then(|| {
            Reply::openai(
                &Message::assistant_text("zzzz qqqq lorem ipsum"),
                Usage::default(),
            )
        })
    };
    let run = run_with_side(garbage, cwm_options()).await;
    let (path, server, view) = (&run.path, &run.server, &run.view);
    let metrics: Vec<Value> = run
        .events
        .iter()
        .filter(|e| matches!(e, Event::Metrics { .. }))
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let health = run
        .events
        .iter()
        .filter(|e| matches!(e, Event::Health(_)))
        .count();
    assert_eq!(
        metrics.len(),
        health,
        "a metrics event with each health event"
    );
    let last = metrics.last().unwrap();
    assert_eq!(last["event"], "metrics");
    assert_eq!(last["strategy"], "cwm");
    assert!(last["metrics"]["tool_result_bloat"].is_number(), "{last}");
    assert!(
        last["metrics"]["compression"]["rejected"].as_u64().unwrap() > 0,
        "{last}"
    );
    let records = side_records(path);
    assert!(!records.is_empty(), "summaries were asked for");
    assert!(
        records
            .iter()
            .all(|(_, result)| result.as_deref() == Ok("zzzz qqqq lorem ipsum"))
    );
    check_intact(server, path, view);
    let loaded = cwl_session::read(path).unwrap();
    let config = Settings::default().config(cwm_options().engine_budget());
    let replayed = cwl_session::replay(
        &loaded,
        path,
        std::sync::Arc::new(O200k),
        config,
        cwl_session::ReplayOptions::default(),
    )
    .unwrap();
    let metrics = replayed.context.metrics().unwrap();
    assert_eq!(metrics["compression"]["accepted"], 0);
    assert_eq!(
        metrics["compression"]["rejected"].as_u64(),
        Some(records.len() as u64)
    );
    assert!(
        metrics["compression"]["last_rejection"]
            .as_str()
            .unwrap()
            .contains("shares no word"),
        "{metrics}"
    );
}

#[tokio::test]
async fn summaries_that_hang_time_out_once_per_call_and_change_nothing() {
    let silent = |request: &RecordedRequest| is_side_call(request).then_some(Reply::Silence);
    let mut options = cwm_options();
    options.side_timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let run = run_with_side(silent, options).await;
    let (path, server, view) = (&run.path, &run.server, &run.view);
    let events = run.events.clone();
    let records = side_records(path);
    assert!(!records.is_empty(), "summaries were asked for");
    assert!(
        records.iter().all(|(_, result)| result
            .as_ref()
            .is_err_and(|e| e.ends_with("timed out after 0.3s"))),
        "{records:?}"
    );
    assert!(
        records.len() <= READS + 1,
        "at most one hanging call per model call: {}",
        records.len()
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    let notes: Vec<String> = events
        .into_iter()
        .filter_map(|e| match e {
            Event::Note { text } if text.contains("timed out") => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), records.len());
    assert!(
        notes[0].ends_with("the cwm strategy goes on without it"),
        "{notes:?}"
    );
    check_intact(server, path, view);
}

#[tokio::test]
async fn a_resumed_session_shows_the_same_summaries_and_notes() {
    let run = run_with_side(gist_side, cwm_options()).await;
    let (path, view) = (run.path.clone(), run.view.clone());
    assert!(
        view.iter()
            .any(|m| matches!(m, Message::ToolResult(r) if r.content.starts_with("[summary"))),
        "summaries are in the view"
    );
    let next = ScriptedServer::start([Reply::openai(
        &assistant(vec![text("Still none.")]),
        Usage::default(),
    )])
    .await
    .unwrap();
    next.answer_side(gist_side);
    let work = data_workspace();
    let toolbox = Toolbox::new(work.path(), ToolConfig::default()).unwrap();
    let (_shared, observer) = collector();
    let resumed = Agent::resume(openai(&next), toolbox, cwm_options(), &path, observer).unwrap();
    assert!(resumed.context().view().cloned().eq(view.iter().cloned()));
    let notes = resumed.context().notes().expect("notes were kept");
    assert_eq!(
        std::fs::read_to_string(cwl_session::notes_path(&path)).unwrap(),
        notes,
        "the notes file holds the restored notes"
    );
}

#[tokio::test]
async fn a_delegated_subtask_runs_in_its_own_window_and_returns_only_its_summary() {
    let replies = openai_replies(&[
        // The parent hands the search to a sub-agent.
        assistant(vec![call(
            "d1",
            "delegate",
            json!({"task": "Find the balance of record 3-5 in data3.txt."}),
        )]),
        // The child reads, tries to write (refused), then answers.
        assistant(vec![call("c1", "read", json!({"path": "data3.txt"}))]),
        assistant(vec![call(
            "c2",
            "write",
            json!({"path": "x.txt", "content": "no"}),
        )]),
        assistant(vec![text(
            "record 3-5: account 5 balance 38 EUR (data3.txt line 6)",
        )]),
        // The parent answers.
        assistant(vec![text("Record 3-5 holds 38 EUR.")]),
    ]);
    let server = ScriptedServer::start(replies).await.unwrap();
    server.answer_side(gist_side);
    let work = data_workspace();
    let sessions = tempfile::tempdir().unwrap();
    let (mut agent, _shared) = openai_agent(&server, work.path(), sessions.path(), cwm_options());
    let outcome = agent
        .run_task("What is the balance of record 3-5?")
        .await
        .unwrap();
    assert_eq!(outcome.answer, "Record 3-5 holds 38 EUR.");
    assert!(
        !work.path().join("x.txt").exists(),
        "the child cannot write"
    );

    let main: Vec<Value> = main_requests(&server).iter().map(|r| r.json()).collect();
    assert_eq!(main.len(), 5);
    let offered = |body: &Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(offered(&main[0]).contains(&"delegate".to_string()));
    let child = &main[1];
    let mut tools = offered(child);
    tools.sort();
    assert_eq!(
        tools,
        ["glob", "grep", "ls", "read"],
        "the child only reads"
    );
    assert!(
        child["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You are a sub-agent with a fresh context window")
    );
    assert_eq!(
        child["messages"][1]["content"],
        "Find the balance of record 3-5 in data3.txt."
    );
    let refusal = tool_messages(&main[3]);
    assert!(
        refusal
            .last()
            .unwrap()
            .starts_with("a sub-agent may only call read"),
        "{refusal:?}"
    );
    let parent = &main[4];
    check_openai_request(parent);
    let results = tool_messages(parent);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].starts_with("[sub-agent summary after 3 model calls in its own context window]\nrecord 3-5: account 5 balance 38 EUR"),
        "{}",
        results[0]
    );
    assert!(
        !parent.to_string().contains("record 3-0: account 0"),
        "the child's reads never enter the parent's window"
    );
    drop(agent);
}

#[tokio::test]
async fn a_notes_file_that_cannot_be_written_is_noted_and_the_run_goes_on() {
    let server = ScriptedServer::start(openai_replies(&script()))
        .await
        .unwrap();
    server.answer_side(gist_side);
    let work = data_workspace();
    let sessions = tempfile::tempdir().unwrap();
    let (mut agent, shared) = openai_agent(&server, work.path(), sessions.path(), cwm_options());
    let blocked = cwl_session::notes_path(&agent.session_path());
    std::fs::create_dir(&blocked).unwrap();
    agent.run_task(TASK).await.unwrap();
    let notes: Vec<String> = events(&shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::Note { text } if text.starts_with("could not write the notes file") => {
                Some(text)
            }
            _ => None,
        })
        .collect();
    assert!(!notes.is_empty(), "the failure is told");
    assert!(
        notes[0].ends_with("the notes stay in the session file"),
        "{notes:?}"
    );
    assert!(agent.context().notes().is_some(), "the notes are kept");
    assert!(blocked.is_dir(), "nothing was written over it");
}

#[tokio::test]
async fn sessions_show_says_when_a_strategy_keeps_no_health() {
    let mut t = Scripted::start(
        openai_replies(&[assistant(vec![text("ok")])]),
        options(BUDGET),
    )
    .await;
    t.agent.run_task("hello").await.unwrap();
    let closed = t.close();
    let report = cwl_agent::show::report(&closed.path).unwrap();
    assert_eq!(report.strategy, "cwl");
    assert_eq!((report.tasks, report.side_calls), (1, 0));
    assert!(report.health.is_none() && report.notes.is_none());
    let text = cwl_agent::show::render(&report);
    assert!(
        text.contains("health: the cwl strategy reports none"),
        "{text}"
    );
    assert!(text.contains("1 tasks · view "), "{text}");
}
