//! Recall, checkpoints and eviction settings through the real HTTP client
//! against a scripted server: evicted content comes back from the session
//! file (also across a resume), a resume from a checkpoint equals a full
//! replay, a bad checkpoint or an old file still resumes, and the settings
//! stay with the session.

use crate::support;

use std::sync::Arc;

use cwl::{Message, Record, ResidueCap, Share};
use cwl_agent::agent::{Agent, AgentOptions, Event};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::testing::ScriptedServer;
use cwl_session::Settings;
use serde_json::json;
use support::*;

const BUDGET: usize = 4_200;

/// One exploration task: read `path` inside episode `name`, end it, answer.
fn explore(prefix: &str, name: &str, path: &str) -> Vec<Message> {
    vec![
        assistant(vec![
            start(&format!("{prefix}1"), name, "expl", &[]),
            call(&format!("{prefix}2"), "read", json!({"path": path})),
        ]),
        assistant(vec![end(
            &format!("{prefix}3"),
            Some(&format!("{path} was read")),
        )]),
        assistant(vec![text(&format!("Read {path}."))]),
    ]
}

/// A task that recalls `name` and answers.
fn recall(prefix: &str, name: &str) -> Vec<Message> {
    vec![
        assistant(vec![call(
            &format!("{prefix}1"),
            "recall",
            json!({"episode": name}),
        )]),
        assistant(vec![text("Recalled.")]),
    ]
}

/// The results of recall calls so far, as (content, is error).
fn recalls(events: &[Event]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::ToolResult {
                name,
                content,
                is_error,
                ..
            } if name == "recall" => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

fn resume(server: &ScriptedServer, t: &Closed, options: AgentOptions) -> (Agent, Vec<Event>) {
    let (shared, observer) = collector();
    let toolbox = Toolbox::new(t.dir.path(), ToolConfig::default()).unwrap();
    let agent = Agent::resume(openai(server), toolbox, options, &t.path, observer).unwrap();
    (agent, events(&shared))
}

fn messages(loaded: &cwl_session::Loaded) -> usize {
    loaded
        .records
        .iter()
        .filter(|(_, record)| matches!(record, Record::Message { .. }))
        .count()
}

#[tokio::test]
async fn recall_brings_evicted_episodes_back_before_and_after_a_resume() {
    let first: Vec<Message> = explore("a", "find-login", "src/auth.rs");
    let mut t = Scripted::start(openai_replies(&first), options(BUDGET)).await;
    t.agent.run_task("Read the auth code.").await.unwrap();
    assert!(
        t.agent
            .context()
            .tools()
            .iter()
            .any(|tool| tool.name == "recall"),
        "recall is offered beside delimiter"
    );

    // A resume pushes nothing here, but later pushes must still line up
    // with the file's message records.
    let script: Vec<Message> = [
        explore("b", "survey-store", "src/store.rs"),
        explore("c", "reread-auth", "src/auth.rs"),
        recall("d", "find-login"),
        recall("e", "survey-store"),
        recall("f", "no-such-episode"),
    ]
    .concat();
    let server = ScriptedServer::start(openai_replies(&script))
        .await
        .unwrap();
    let t = t.close();
    let (shared, observer) = collector();
    let toolbox = Toolbox::new(t.dir.path(), ToolConfig::default()).unwrap();
    let path = t.path.clone();
    let mut agent =
        Agent::resume(openai(&server), toolbox, options(BUDGET), &path, observer).unwrap();
    for task in [
        "Survey the store.",
        "Read auth again.",
        "Recall login.",
        "Recall store.",
        "Recall nothing.",
    ] {
        agent.run_task(task).await.unwrap();
    }
    let events = events(&shared);
    let recalled = recalls(&events);
    assert_eq!(recalled.len(), 3, "{events:#?}");

    let (login, error) = &recalled[0];
    assert!(!error, "{login}");
    assert!(
        login.starts_with("Recalled expl episode `find-login`"),
        "{login}"
    );
    assert!(
        login.contains("pub fn check_7"),
        "pushed before the resume: {login}"
    );
    let (store, error) = &recalled[1];
    assert!(!error, "{store}");
    assert!(
        store.contains("pub fn load_7"),
        "pushed after the resume: {store}"
    );
    let (unknown, error) = &recalled[2];
    assert!(error);
    assert!(unknown.contains("no-such-episode"), "{unknown}");

    // The recalled content is sent to the model in the next request.
    let requests = server.requests();
    let after_recall = requests[7].json().to_string();
    assert!(after_recall.contains("Recalled expl episode `find-login`"));

    // Push positions are message records: a full replay pushed exactly
    // the file's messages.
    let loaded = cwl_session::read(&path).unwrap();
    let replayed = cwl_session::replay(
        &loaded,
        &path,
        Arc::new(cwl::O200k),
        Settings::default().config(agent.options().engine_budget()),
        cwl_session::ReplayOptions::from_start(),
    )
    .unwrap();
    assert_eq!(
        replayed.context.save().unwrap().pushes,
        messages(&loaded) as u64
    );
    assert!(replayed.context.view().eq(agent.context().view()));
}

#[tokio::test]
async fn a_resume_from_the_checkpoint_equals_a_full_replay_and_a_bad_one_falls_back() {
    let script: Vec<Message> = [
        explore("a", "find-login", "src/auth.rs"),
        explore("b", "survey-store", "src/store.rs"),
    ]
    .concat();
    let mut t = Scripted::start(openai_replies(&script), options(BUDGET)).await;
    t.agent.run_task("Read the auth code.").await.unwrap();
    t.agent.run_task("Survey the store.").await.unwrap();
    let view: Vec<Message> = t.agent.context().view().cloned().collect();
    let tokens = t.agent.context().tokens();
    let t = t.close();
    let path = t.path.clone();
    let original = std::fs::read_to_string(&path).unwrap();
    let (checkpoints, rest): (Vec<&str>, Vec<&str>) = original
        .lines()
        .partition(|line| line.starts_with(r#"{"type":"checkpoint""#));
    assert!(
        !checkpoints.is_empty(),
        "the first task ends with a checkpoint"
    );
    let size = |lines: &[&str]| lines.iter().map(|l| l.len() + 1).sum::<usize>();
    let largest = checkpoints.iter().map(|l| l.len() + 1).max().unwrap_or(0);
    assert!(
        size(&checkpoints) <= size(&rest) + largest,
        "checkpoints take about as much room as the rest at most"
    );

    let server = ScriptedServer::start([]).await.unwrap();
    let (agent, notes) = resume(&server, &t, options(BUDGET));
    assert!(agent.context().view().cloned().eq(view.iter().cloned()));
    assert_eq!(agent.context().tokens(), tokens);
    assert!(
        notes.iter().any(
            |e| matches!(e, Event::Note { text } if text.contains("from the checkpoint on line"))
        ),
        "{notes:?}"
    );
    drop(agent);

    // A checkpoint that does not deserialize: full replay, with a warning.
    let broken: String = original
        .lines()
        .map(|line| {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            if value["type"] == "checkpoint" {
                value["checkpoint"]["entries"] = json!(7);
            }
            format!("{value}\n")
        })
        .collect();
    std::fs::write(&path, &broken).unwrap();
    let (agent, notes) = resume(&server, &t, options(BUDGET));
    assert!(agent.context().view().cloned().eq(view.iter().cloned()));
    assert_eq!(agent.context().tokens(), tokens);
    assert!(
        notes
            .iter()
            .any(|e| matches!(e, Event::Note { text } if text.contains("checkpoint not used"))),
        "{notes:?}"
    );
    drop(agent);

    // A checkpoint line that is not even JSON: skipped with a warning.
    let torn: String = original
        .lines()
        .map(|line| {
            if line.starts_with(r#"{"type":"checkpoint""#) {
                format!("{}\n", &line[..line.len() / 2])
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    std::fs::write(&path, &torn).unwrap();
    let loaded = cwl_session::read(&path).unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("unreadable checkpoint skipped")),
        "{:?}",
        loaded.warnings
    );
    let (agent, _) = resume(&server, &t, options(BUDGET));
    assert!(agent.context().view().cloned().eq(view.iter().cloned()));
    assert_eq!(agent.context().tokens(), tokens);
}

#[tokio::test]
async fn old_session_files_without_checkpoints_or_settings_still_resume() {
    let script = explore("a", "find-login", "src/auth.rs");
    let mut t = Scripted::start(openai_replies(&script), options(BUDGET)).await;
    t.agent.run_task("Read the auth code.").await.unwrap();
    let view: Vec<Message> = t.agent.context().view().cloned().collect();
    let t = t.close();
    let path = t.path.clone();
    let old: String = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|line| {
            !line.starts_with(r#"{"type":"checkpoint""#)
                && !line.starts_with(r#"{"type":"settings""#)
        })
        .map(|line| {
            let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
            if record["type"] == "session" {
                let tools = record["tools"].as_array_mut().unwrap();
                tools.retain(|tool| tool["name"] != "recall");
                return format!("{record}\n");
            }
            format!("{line}\n")
        })
        .collect();
    std::fs::write(&path, old).unwrap();

    let server = ScriptedServer::start([]).await.unwrap();
    let (agent, notes) = resume(&server, &t, options(BUDGET));
    assert!(agent.context().view().cloned().eq(view.iter().cloned()));
    assert!(
        notes
            .iter()
            .any(|e| matches!(e, Event::Note { text } if text.contains("replayed from the start"))),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(
            |e| matches!(e, Event::Note { text } if text.contains("predates the recall tool"))
        ),
        "{notes:?}"
    );
    assert!(
        agent
            .context()
            .tools()
            .iter()
            .any(|tool| tool.name == "recall")
    );
    let loaded = cwl_session::read(&path).unwrap();
    assert!(
        !loaded.info.tools.iter().any(|tool| tool.name == "recall"),
        "the header is kept"
    );
    let written = Settings::last(loaded.records.iter().map(|(_, record)| record));
    assert_eq!(
        written,
        Some(Settings::default()),
        "the resume fixes the settings in the file"
    );
}

#[tokio::test]
async fn eviction_settings_are_recorded_and_kept_on_resume() {
    let mut custom = options(BUDGET);
    custom.engine.low_water = Some(Share::new(0.5).unwrap());
    custom.engine.residue_share = Some(ResidueCap(None));
    custom.engine.superseded = Some(ResidueCap(Some(Share::new(0.3).unwrap())));
    custom.engine.restated = Some(ResidueCap(None));
    custom.engine.answer_share = Some(ResidueCap(Some(Share::new(0.2).unwrap())));
    let script = explore("a", "find-login", "src/auth.rs");
    let mut t = Scripted::start(openai_replies(&script), custom).await;
    t.agent.run_task("Read the auth code.").await.unwrap();
    let wanted = Settings {
        low_water: Share::new(0.5).unwrap(),
        residue_share: None,
        keep_recent: cwl::Config::default().keep_recent,
        superseded: Some(Share::new(0.3).unwrap()),
        restated: None,
        answer_share: Some(Share::new(0.2).unwrap()),
        stub_act_outputs: true,
        superseded_plans: true,
        strategy: cwl_session::strategy::StrategyName::Cwl,
        strategy_options: serde_json::Value::Null,
    };
    assert_eq!(Settings::of(t.agent.context().config()), wanted);
    let t = t.close();
    let loaded = cwl_session::read(&t.path).unwrap();
    assert!(
        matches!(loaded.records[0].1, Record::Settings { .. }),
        "settings follow the header"
    );

    // No flags: the session's own settings, nothing changed.
    let server = ScriptedServer::start([]).await.unwrap();
    let (agent, notes) = resume(&server, &t, options(BUDGET));
    assert_eq!(Settings::of(agent.context().config()), wanted);
    assert!(
        !notes
            .iter()
            .any(|e| matches!(e, Event::Note { text } if text.contains("settings changed")))
    );
    drop(agent);
    let after = cwl_session::read(&t.path).unwrap();
    assert_eq!(
        after.records.len(),
        loaded.records.len() + 1,
        "only the resume note was added"
    );

    // A flag changes one of them: noted and recorded for later resumes.
    let mut changed = options(BUDGET);
    changed.engine.residue_share = Some(ResidueCap(Some(Share::new(0.2).unwrap())));
    let (agent, notes) = resume(&server, &t, changed);
    let now = Settings {
        residue_share: Some(Share::new(0.2).unwrap()),
        ..wanted.clone()
    };
    assert_eq!(Settings::of(agent.context().config()), now);
    assert!(
        notes.iter().any(|e| matches!(e, Event::Note { text } if text.contains("eviction settings changed from low-water 50%, residue share off, keep recent 10%, superseded 30%, restated off, answer share 20%, act outputs stub, plans drop to low-water 50%, residue share 20%, keep recent 10%, superseded 30%, restated off, answer share 20%, act outputs stub, plans drop"))),
        "{notes:?}"
    );
    drop(agent);
    let (agent, _) = resume(&server, &t, options(BUDGET));
    assert_eq!(Settings::of(agent.context().config()), now);
}

/// Recall through the Responses API: an evicted exploration comes back as
/// a `function_call_output` the next request carries.
#[tokio::test]
async fn recall_works_through_the_responses_api() {
    let script: Vec<Message> = [
        explore("a", "find-login", "src/auth.rs"),
        explore("b", "survey-store", "src/store.rs"),
        explore("c", "reread-auth", "src/auth.rs"),
        recall("d", "find-login"),
    ]
    .concat();
    let replies = script
        .iter()
        .map(|m| cwl_provider::testing::Reply::responses(m, cwl::Usage::default()));
    let server = ScriptedServer::start(replies).await.unwrap();
    let dir = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let (shared, observer) = collector();
    let toolbox = Toolbox::new(dir.path(), ToolConfig::default()).unwrap();
    let mut agent = Agent::create(
        responses(&server),
        toolbox,
        options(BUDGET),
        sessions.path(),
        observer,
    )
    .unwrap();
    for task in [
        "Read auth.",
        "Survey the store.",
        "Read auth again.",
        "Recall login.",
    ] {
        agent.run_task(task).await.unwrap();
    }
    let evicted: Vec<String> = events(&shared)
        .iter()
        .filter_map(|event| match event {
            Event::Evicted { episodes, .. } => Some(episodes.iter().map(|e| e.name.clone())),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(
        evicted.iter().any(|name| name == "find-login"),
        "{evicted:?}"
    );
    let recalled = recalls(&events(&shared));
    assert_eq!(recalled.len(), 1);
    assert!(!recalled[0].1, "{}", recalled[0].0);
    assert!(recalled[0].0.contains("pub fn login"), "{}", recalled[0].0);
    let last = server.requests().last().unwrap().json();
    let outputs: Vec<String> = last["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| item["output"].as_str().unwrap().to_string())
        .collect();
    assert!(
        outputs.iter().any(|output| output.contains("pub fn login")),
        "the recalled content reaches the model"
    );
}
