//! A model that forgets the protocol: it reads 14 files with the shell,
//! one a turn, at a 12k budget, never calling `delimiter` (or calling it
//! around each read), on each provider. Its tool use becomes inferred
//! episodes: every request stays under budget, no call or result is
//! refused for lack of an episode, the task finishes, and a resume
//! applies the same episodes.

use std::path::Path;

use crate::support;

use cwl::{Message, Record, Usage};
use cwl_agent::agent::{Agent, Event};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::Provider;
use cwl_provider::testing::{Reply, ScriptedServer};
use serde_json::json;
use support::*;

const FILES: usize = 14;
const BUDGET: usize = 12_000;

/// A workspace of `FILES` files of about 1,500 tokens each: together far
/// over the budget.
fn notes() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("notes")).unwrap();
    for file in 0..FILES {
        let body: String = (0..120)
            .map(|line| format!("file {file} line {line}: value {}\n", file * 1000 + line))
            .collect();
        std::fs::write(dir.path().join(format!("notes/n{file}.txt")), body).unwrap();
    }
    dir
}

/// The model's replies: one `cat` a turn, then the answer; with
/// `delimiter`, each read in an episode of its own.
fn script(delimiter: bool) -> Vec<Message> {
    let mut replies = Vec::new();
    for file in 0..FILES {
        let mut blocks = Vec::new();
        if delimiter {
            if file > 0 {
                blocks.push(end(&format!("end_{file}"), Some("read a note")));
            }
            blocks.push(start(
                &format!("start_{file}"),
                &format!("read-{file}"),
                "expl",
                &[],
            ));
        }
        blocks.push(call(
            &format!("cat_{file}"),
            "bash",
            json!({"command": format!("cat notes/n{file}.txt")}),
        ));
        replies.push(assistant(blocks));
    }
    if delimiter {
        replies.push(assistant(vec![end("end_last", Some("read the notes"))]));
    }
    replies.push(assistant(vec![text("Read all 14 files.")]));
    replies
}

async fn run(
    reply: fn(&Message, Usage) -> Reply,
    provider: fn(&ScriptedServer) -> Box<dyn Provider>,
    delimiter: bool,
) {
    let replies: Vec<Reply> = script(delimiter)
        .iter()
        .map(|message| reply(message, Usage::default()))
        .collect();
    let server = ScriptedServer::start(replies).await.unwrap();
    let dir = notes();
    let sessions = tempfile::tempdir().unwrap();
    let (shared, observer) = collector();
    let mut options = options(BUDGET);
    options.max_turns = 40;
    let toolbox = Toolbox::new(dir.path(), ToolConfig::default()).unwrap();
    let mut agent = Agent::create(
        provider(&server),
        toolbox,
        options,
        sessions.path(),
        observer,
    )
    .unwrap();
    let outcome = agent.run_task("Read every file under notes/.").await;
    let label = format!("delimiter: {delimiter}, {}", server.url());
    assert!(outcome.is_ok(), "{label}: {outcome:?}");
    let events = events(&shared);
    let sizes: Vec<usize> = events
        .iter()
        .filter_map(|event| match event {
            Event::Response { request_tokens, .. } => Some(*request_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(sizes.len(), script(delimiter).len(), "{label}");
    assert!(
        sizes.iter().all(|&size| size <= BUDGET),
        "{label}: every request under budget: {sizes:?}"
    );
    let results: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            Event::ToolResult { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        results
            .iter()
            .all(|result| !result.contains("was not kept") && !result.starts_with("refused")),
        "{label}: nothing refused"
    );
    assert!(
        results.iter().any(|result| result.contains("value 13119")),
        "{label}: the last file was read"
    );
    let episodes = agent.context().graph().episodes().len();
    assert!(episodes >= FILES / 8, "{label}: {episodes} episodes");
    let reminders = server
        .requests()
        .iter()
        .filter(|request| request.body.contains("open an episode with `delimiter`"))
        .count();
    assert!(reminders <= 1, "{label}: reminded {reminders} times");
    check_resume(&agent.session_path(), &agent, delimiter);
}

/// The session replays to the same view and the same episodes.
fn check_resume(path: &Path, agent: &Agent, delimiter: bool) {
    let loaded = cwl_session::read(path).unwrap();
    let annotations = loaded
        .records
        .iter()
        .filter(|(_, record)| matches!(record, Record::Annotate { .. }))
        .count();
    if delimiter {
        assert_eq!(annotations, 0, "the model's own episodes need none");
    } else {
        assert!(annotations >= 2, "{annotations} inferred annotations");
    }
    let config = cwl_session::Settings::default()
        .session_config(options(BUDGET).engine_budget(), &loaded.info.model);
    let replayed = cwl_session::replay(
        &loaded,
        path,
        std::sync::Arc::new(cwl::O200k),
        config,
        cwl_session::ReplayOptions::from_start(),
    )
    .unwrap();
    assert!(replayed.warnings.is_empty(), "{:?}", replayed.warnings);
    let names = |graph: &cwl::Graph| -> Vec<String> {
        graph
            .episodes()
            .iter()
            .map(|e| e.name().to_string())
            .collect()
    };
    assert_eq!(
        names(replayed.context.graph()),
        names(agent.context().graph())
    );
    assert_eq!(
        replayed.context.view().cloned().collect::<Vec<_>>(),
        agent.context().view().cloned().collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_model_that_never_calls_delimiter_finishes_under_budget_on_each_provider() {
    run(Reply::openai, openai, false).await;
    run(Reply::responses, responses, false).await;
    run(Reply::anthropic, anthropic, false).await;
}

#[tokio::test]
async fn a_model_that_calls_delimiter_finishes_under_budget_on_each_provider() {
    run(Reply::openai, openai, true).await;
    run(Reply::responses, responses, true).await;
    run(Reply::anthropic, anthropic, true).await;
}
