//! The context strategy behind the seam: `--strategy cwm` on a long task
//! within budget, kept across resumes, and bad names refused with the
//! choices.

use crate::support;

use clap::Parser;
use cwl::{Message, Record, Usage};
use cwl_agent::agent::Agent;
use cwl_agent::cli::{self, AgentArgs, RunArgs};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::ProviderKind;
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_session::Settings;
use cwl_session::strategy::StrategyName;
use serde_json::json;
use support::*;

const BUDGET: usize = 5_000;
const T1: &str = "Survey the auth helpers and the store loaders.";
const T2: &str = "Now list the source files.";

/// A long first task (many reads, each a few hundred tokens, no episodes)
/// and a short second one.
fn script() -> Vec<Vec<Message>> {
    let mut first = Vec::new();
    for i in 0..16 {
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
    let second = vec![
        assistant(vec![call("l1", "ls", json!({"path": "src"}))]),
        assistant(vec![text("src has auth.rs and store.rs.")]),
    ];
    vec![first, second]
}

fn replies() -> Vec<Reply> {
    script()
        .iter()
        .flatten()
        .map(|m| Reply::openai(m, Usage::default()))
        .collect()
}

fn cwm_options() -> cwl_agent::agent::AgentOptions {
    let mut options = options(BUDGET);
    options.strategy = Some(StrategyName::Cwm);
    options
}

#[tokio::test]
async fn cwm_keeps_a_long_task_within_budget_and_a_resume_shows_the_same_view() {
    let mut t = Scripted::start(replies(), cwm_options()).await;
    t.server.answer_side(gist_side);
    assert_eq!(t.agent.context().name(), "cwm");
    t.agent.run_task(T1).await.unwrap();
    t.agent.run_task(T2).await.unwrap();
    let requests = main_requests(&t.server);
    assert_eq!(requests.len(), 19);
    let firsts = script()[0].len();
    for (index, request) in requests.iter().enumerate() {
        let body = request.json();
        check_openai_request(&body);
        let tokens = openai_request_tokens(&body);
        assert!(tokens <= BUDGET, "request {index}: {tokens} > {BUDGET}");
        let tasks = if index < firsts { 1 } else { 2 };
        assert_eq!(user_turns(&body), [T1, T2][..tasks], "request {index}");
    }
    let stats = t.agent.stats().clone();
    assert!(stats.eviction_passes > 0, "the budget forced evictions");
    assert_eq!(stats.over_budget_requests, 0);
    let view: Vec<Message> = t.agent.context().view().cloned().collect();
    let results = view
        .iter()
        .filter(|m| matches!(m, Message::ToolResult(_)))
        .count();
    assert!(results < 17, "some reads were evicted: {results} left");
    assert!(
        matches!(view.last(), Some(Message::Assistant { .. })),
        "the final answer is in view"
    );
    let tokens = t.agent.context().tokens();
    let notes: Vec<String> = events(&t.shared)
        .into_iter()
        .filter_map(|e| match e {
            cwl_agent::agent::Event::Note { text } if text.starts_with("context pressure") => {
                Some(text)
            }
            _ => None,
        })
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("context pressure: zone yellow")),
        "{notes:?}"
    );
    assert!(
        notes.len() < 19,
        "told when the zone changes, not every call: {notes:?}"
    );
    let health: Vec<serde_json::Value> = events(&t.shared)
        .into_iter()
        .filter(|e| matches!(e, cwl_agent::agent::Event::Health(_)))
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    assert_eq!(health.len(), notes.len(), "one health event per note");
    assert!(
        health.iter().any(|h| h["event"] == "health"
            && h["zone"] == "yellow"
            && h["utilisation"].is_number()),
        "{health:?}"
    );

    let closed = t.close();
    let loaded = cwl_session::read(&closed.path).unwrap();
    let settings = Settings::last(loaded.records.iter().map(|(_, r)| r)).unwrap();
    assert_eq!(settings.strategy, StrategyName::Cwm);
    assert!(
        loaded
            .records
            .iter()
            .any(|(_, r)| matches!(r, Record::Checkpoint { checkpoint, .. } if checkpoint["strategy"] == "cwm"))
    );

    // Resumed without naming a strategy: the session's own, the same view.
    let next = ScriptedServer::start([Reply::openai(
        &assistant(vec![text("Still here.")]),
        Usage::default(),
    )])
    .await
    .unwrap();
    next.answer_side(gist_side);
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
    assert_eq!(resumed.context().name(), "cwm");
    assert!(resumed.context().view().cloned().eq(view.iter().cloned()));
    assert_eq!(resumed.context().tokens(), tokens);
    resumed.run_task("One more thing.").await.unwrap();
    let body = main_requests(&next)[0].json();
    check_openai_request(&body);
    assert_eq!(user_turns(&body), [T1, T2, "One more thing."]);
    drop(resumed);

    // The file replays to the same state from its checkpoint and from the start.
    let reloaded = cwl_session::read(&closed.path).unwrap();
    let config = Settings::default().config(options(BUDGET).engine_budget());
    let (replayed, full) = support::replay_both(&reloaded, &closed.path, config.clone());
    assert!(replayed.warnings.is_empty(), "{:?}", replayed.warnings);
    assert_eq!(replayed.context.name(), "cwm");
    assert!(full.warnings.is_empty(), "{:?}", full.warnings);
    assert!(full.context.view().eq(replayed.context.view()));
}

fn server(replies: Vec<Reply>) -> (tokio::runtime::Runtime, ScriptedServer) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(ScriptedServer::start(replies)).unwrap();
    (runtime, server)
}

fn agent_args(
    server: &ScriptedServer,
    cwd: &std::path::Path,
    sessions: &std::path::Path,
    config: &std::path::Path,
) -> AgentArgs {
    AgentArgs {
        provider: Some(ProviderKind::OpenAi),
        model: Some("gpt-test".into()),
        base_url: Some(format!("{}/v1", server.url())),
        cwd: Some(cwd.to_owned()),
        session_dir: Some(sessions.to_owned()),
        config: Some(config.to_owned()),
        approval: Some(cwl_agent::agent::ApprovalMode::Never),
        ..AgentArgs::default()
    }
}

#[test]
fn run_takes_the_strategy_from_the_flag_or_the_config_file_and_resume_keeps_it() {
    let answer = |t: &str| Reply::openai(&assistant(vec![text(t)]), Usage::default());
    let (_rt, server) = server(vec![answer("one"), answer("two"), answer("three")]);
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = sessions.path().join("config.toml");
    std::fs::write(&config, "strategy = \"cwm\"\n").unwrap();
    cli::run_run(RunArgs {
        agent: agent_args(&server, work.path(), sessions.path(), &config),
        tasks: vec!["first".into()],
        prompt: None,
    })
    .unwrap();
    let mut flagged = agent_args(&server, work.path(), sessions.path(), &config);
    flagged.strategy = Some(StrategyName::Cwl);
    cli::run_run(RunArgs {
        agent: flagged,
        tasks: vec!["second".into()],
        prompt: None,
    })
    .unwrap();
    let strategies = |sessions: &std::path::Path| -> Vec<(String, Vec<StrategyName>)> {
        let mut all: Vec<_> = cwl_session::list(sessions)
            .unwrap()
            .iter()
            .map(|listed| {
                let loaded = cwl_session::read(&listed.path).unwrap();
                let names = loaded
                    .records
                    .iter()
                    .filter_map(|(_, r)| Settings::last([r]))
                    .map(|s| s.strategy)
                    .collect();
                (listed.first_task.clone().unwrap_or_default(), names)
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    };
    assert_eq!(
        strategies(sessions.path()),
        [
            ("first".to_string(), vec![StrategyName::Cwm]),
            ("second".to_string(), vec![StrategyName::Cwl]),
        ],
        "the config file's strategy, then the flag's"
    );

    // A resume takes the session's strategy, not the config file's.
    std::fs::write(&config, "strategy = \"cwl\"\n").unwrap();
    let first = cwl_session::list(sessions.path())
        .unwrap()
        .into_iter()
        .find(|s| s.first_task.as_deref() == Some("first"))
        .unwrap();
    let mut resume = agent_args(&server, work.path(), sessions.path(), &config);
    resume.resume = Some(first.id.clone());
    resume.model = None;
    cli::run_run(RunArgs {
        agent: resume,
        tasks: vec!["third".into()],
        prompt: None,
    })
    .unwrap();
    let resumed = strategies(sessions.path());
    assert_eq!(resumed[0], ("first".to_string(), vec![StrategyName::Cwm]));
}

#[derive(Parser)]
struct Command {
    #[command(flatten)]
    agent: AgentArgs,
}

#[test]
fn a_bad_strategy_is_refused_with_the_choices() {
    let error = Command::try_parse_from(["cwl", "--strategy", "foo"])
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("unknown strategy `foo` (choices: cwl, cwm, self-gc)"),
        "{error}"
    );
    let parsed = Command::try_parse_from(["cwl", "--strategy", "cwm"]).unwrap();
    assert_eq!(parsed.agent.strategy, Some(StrategyName::Cwm));

    let (_rt, server) = server(Vec::new());
    let work = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let config = sessions.path().join("config.toml");
    std::fs::write(&config, "strategy = \"later\"\n").unwrap();
    let error = cli::run_run(RunArgs {
        agent: agent_args(&server, work.path(), sessions.path(), &config),
        tasks: vec!["go".into()],
        prompt: None,
    })
    .unwrap_err();
    let text = format!("{error:#}");
    assert!(text.contains("strategy"), "{text}");
    assert!(
        text.contains("unknown strategy `later` (choices: cwl, cwm, self-gc)"),
        "{text}"
    );
    assert!(server.requests().is_empty(), "nothing was sent");
    assert!(cwl_session::list(sessions.path()).unwrap().is_empty());
}

#[tokio::test]
async fn a_session_naming_an_unknown_strategy_is_not_resumed_and_stays_intact() {
    let t = Scripted::start(
        [Reply::openai(
            &assistant(vec![text("ok")]),
            Usage::default(),
        )],
        options(BUDGET),
    )
    .await;
    let closed = t.close();
    let raw = std::fs::read_to_string(&closed.path).unwrap();
    let edited = raw.replacen("\"strategy\":\"cwl\"", "\"strategy\":\"later\"", 1);
    assert_ne!(raw, edited, "the settings record names its strategy");
    std::fs::write(&closed.path, &edited).unwrap();
    let toolbox = Toolbox::new(closed.dir.path(), ToolConfig::default()).unwrap();
    let (_shared, observer) = collector();
    let error = Agent::resume(
        openai(&closed.server),
        toolbox,
        options(BUDGET),
        &closed.path,
        observer,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("unknown strategy `later` (choices: cwl, cwm, self-gc)"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&closed.path).unwrap(), edited);
}

#[tokio::test]
async fn cwm_keeps_a_large_result_before_any_episode_since_it_can_evict_it_later() {
    let budget = 12_000;
    let replies = vec![
        Reply::openai(
            &assistant(vec![call("r1", "read", json!({"path": "data.txt"}))]),
            Usage::default(),
        ),
        Reply::openai(&assistant(vec![text("done")]), Usage::default()),
    ];
    let mut options = options(budget);
    options.strategy = Some(StrategyName::Cwm);
    let server = ScriptedServer::start(replies).await.unwrap();
    let dir = workspace();
    let data: String = (0..400)
        .map(|i| format!("line {i}: the quick brown fox jumps over the lazy dog\n"))
        .collect();
    std::fs::write(dir.path().join("data.txt"), data).unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let (mut agent, shared) = openai_agent(&server, dir.path(), sessions.path(), options);
    agent.run_task("read data.txt").await.unwrap();
    let read = events(&shared)
        .into_iter()
        .find_map(|e| match e {
            cwl_agent::agent::Event::ToolResult {
                id,
                is_error,
                content,
                ..
            } if id == "r1" => Some((is_error, content)),
            _ => None,
        })
        .unwrap();
    assert!(
        !read.0,
        "kept, not refused: {}",
        &read.1[..200.min(read.1.len())]
    );
    assert!(read.1.contains("line 399: the quick brown fox"));
    let second = openai_request_tokens(&server.requests()[1].json());
    assert!(second > budget / 2, "the whole read was sent: {second}");
    assert!(second <= budget, "{second}");
}
