//! Self-GC's health in the agent: `--json` health and metrics events
//! carry Self-GC's own figures (zone by its trigger and τ, plans, planner
//! failures, folds, sidecars, recalls, the pruning rate), and
//! `cwl sessions show` prints the same figures as the live session, from
//! the file, as a resume does.

use crate::support;

use std::time::Duration;

use cwl::{Message, Usage};
use cwl_agent::agent::{Agent, Event};
use cwl_agent::cli;
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::testing::{Reply, ScriptedServer};
use serde_json::{Value, json};
use support::selfgc::*;
use support::*;

const BUDGET: usize = 6_000;

/// `reads` reads of a few hundred tokens each, then the answer.
fn reads(reads: usize) -> Vec<Message> {
    let mut messages: Vec<Message> = (0..reads)
        .map(|i| {
            let path = if i % 2 == 0 {
                "src/auth.rs"
            } else {
                "src/store.rs"
            };
            assistant(vec![
                text(&format!("Reading part {i} of {path}.")),
                call(
                    &format!("r{i}"),
                    "read",
                    json!({"path": path, "offset": 1 + (i / 2) * 20, "limit": 25}),
                ),
            ])
        })
        .collect();
    messages.push(assistant(vec![text("Done reading.")]));
    messages
}

/// The health and metrics events, as `--json` prints them.
fn health_lines(events: &[Event]) -> (Vec<Value>, Vec<Value>) {
    let json = |e: &Event| serde_json::to_value(e).unwrap();
    let health = events
        .iter()
        .filter(|e| matches!(e, Event::Health(_)))
        .map(json)
        .collect();
    let metrics = events
        .iter()
        .filter(|e| matches!(e, Event::Metrics { .. }))
        .map(json)
        .collect();
    (health, metrics)
}

#[tokio::test]
async fn health_events_and_sessions_show_carry_self_gcs_figures_and_a_resume_agrees() {
    let mut script = reads(16);
    script.push(assistant(vec![call(
        "k1",
        "recall",
        json!({"id": "function:read:1"}),
    )]));
    script.push(assistant(vec![text("Here it is.")]));
    let t = Scripted::start(
        openai_replies(&script),
        selfgc_options(BUDGET, Duration::from_millis(400)),
    )
    .await;
    planner_answers(&t.server, (0..40).map(|_| fold_reads(16)));
    let mut t = t;
    t.agent
        .run_task("Survey the auth helpers and the store loaders.")
        .await
        .unwrap();
    t.agent
        .run_task("Show me the first part of auth.rs again.")
        .await
        .unwrap();
    let live = t.agent.context().metrics().expect("self-gc keeps metrics");
    let closed = t.close();

    let (health, metrics) = health_lines(&events(&closed.shared));
    assert!(!health.is_empty(), "health was reported");
    assert_eq!(
        health.len(),
        metrics.len(),
        "metrics with each health event"
    );
    let zones: Vec<&str> = health.iter().map(|h| h["zone"].as_str().unwrap()).collect();
    assert_eq!(zones[0], "over-trigger", "{zones:?}");
    for line in &metrics {
        assert_eq!(line["event"], "metrics");
        assert_eq!(line["strategy"], "self-gc");
    }
    for (h, m) in health.iter().zip(&metrics) {
        assert_eq!(h["event"], "health");
        assert_eq!(h["zone"], m["metrics"]["zone"]);
        assert_eq!(h["evictions"], m["metrics"]["evictions"]);
    }
    // The figures are true of the run.
    let sidecars = closed.path.with_extension("sidecars");
    let files: Vec<std::fs::DirEntry> = std::fs::read_dir(&sidecars)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let bytes: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    assert_eq!(live["sidecars"].as_u64(), Some(files.len() as u64));
    assert_eq!(live["sidecar_bytes"].as_u64(), Some(bytes));
    assert_eq!(live["actions"]["folds"].as_u64(), Some(files.len() as u64));
    assert_eq!(live["recalls_served"], 1);
    let committed = live["plans"]["committed"].as_u64().unwrap();
    assert!(committed >= 1, "{live}");
    let commits = events(&closed.shared)
        .iter()
        .filter(
            |e| matches!(e, Event::Note { text } if text.starts_with("self-gc: plan committed")),
        )
        .count() as u64;
    assert_eq!(committed, commits);
    let cumulative = live["prune"]["cumulative"].as_f64().unwrap();
    let last = live["prune"]["last"].as_f64().unwrap();
    assert!(cumulative > 0.3 && last > 0.0, "{live}");
    assert_eq!(
        live["evictions"].as_u64().unwrap(),
        committed + live["backstop_passes"].as_u64().unwrap()
    );
    assert_eq!(live["planner_failures"]["total"], 0);

    // `cwl sessions show` replays the file to the same figures.
    let report = cwl_agent::show::report(&closed.path).unwrap();
    assert_eq!(report.strategy, "self-gc");
    assert_eq!(report.health.as_ref(), Some(&live));
    let shown = cwl_agent::show::render(&report);
    for expected in [
        "health\n",
        "  utilisation   ",
        &format!("zone {}", live["zone"].as_str().unwrap()),
        &format!("cumulative {:.0}%", cumulative * 100.0),
        &format!("{committed} committed"),
        "  planner       0 gave no plan (0 timed out, 0 failed, 0 malformed), 0 in a row",
        &format!(
            "  sidecars      {} files, {bytes} bytes; 1 recalls served",
            files.len()
        ),
    ] {
        assert!(shown.contains(expected), "{expected}\n{shown}");
    }
    assert!(!shown.contains("compression"), "no cwm figures: {shown}");
    std::fs::write(closed.sessions.path().join("config.toml"), "").unwrap();
    cli::run_sessions(cli::SessionsArgs {
        session_dir: Some(closed.sessions.path().to_owned()),
        config: Some(closed.sessions.path().join("config.toml")),
        command: Some(cli::SessionsCommand::Show(cli::ShowArgs {
            id: report.id.clone(),
            json: true,
            ..cli::ShowArgs::default()
        })),
        ..cli::SessionsArgs::default()
    })
    .unwrap();

    // A resume restores the same figures.
    let next = ScriptedServer::start(openai_replies(&[assistant(vec![text("ok")])]))
        .await
        .unwrap();
    let (_shared, observer) = collector();
    let toolbox = Toolbox::new(closed.dir.path(), ToolConfig::default()).unwrap();
    let resumed = Agent::resume(
        openai(&next),
        toolbox,
        selfgc_options(BUDGET, Duration::from_millis(400)),
        &closed.path,
        observer,
    )
    .unwrap();
    assert_eq!(resumed.context().metrics(), Some(live));
}

#[tokio::test]
async fn a_failing_planner_is_counted_by_kind_and_raises_an_alert() {
    let t = Scripted::start(
        openai_replies(&reads(24)),
        selfgc_options(BUDGET, Duration::from_millis(400)),
    )
    .await;
    let mut answers = vec![
        Reply::openai(
            &Message::assistant_text("Sure, fold read:1."),
            Usage::default(),
        ),
        Reply::Silence,
    ];
    answers.extend((0..8).map(|_| Reply::status(500, r#"{"error":{"message":"boom"}}"#)));
    planner_answers(&t.server, answers);
    let mut t = t;
    t.agent.run_task("Read everything.").await.unwrap();
    let live = t.agent.context().metrics().unwrap();
    let closed = t.close();
    let failures = &live["planner_failures"];
    assert_eq!(failures["malformed"], 1, "{live}");
    assert_eq!(failures["timeout"], 1, "{live}");
    let errors = failures["error"].as_u64().unwrap();
    assert!(errors >= 1, "{live}");
    assert_eq!(failures["total"].as_u64(), Some(2 + errors));
    assert_eq!(failures["in_a_row"].as_u64(), Some(2 + errors));
    // Every planner call recorded in the file was answered (the server
    // saw more requests: the provider retried the 500s).
    let recorded = cwl_session::read(&closed.path)
        .unwrap()
        .records
        .iter()
        .filter(|(_, r)| matches!(r, cwl::Record::SideCall { purpose, .. } if purpose == "planner"))
        .count() as u64;
    assert_eq!(live["plans"]["answered"].as_u64(), Some(recorded));
    assert_eq!(live["plans"]["asked"].as_u64(), Some(recorded));
    assert_eq!(live["plans"]["committed"], 0);
    assert!(live["backstop_passes"].as_u64().unwrap() > 0, "{live}");
    assert_eq!(live["actions"]["folds"], 0);

    let (health, metrics) = health_lines(&events(&closed.shared));
    let warned = health.iter().position(|h| {
        h["alerts"].as_array().unwrap().iter().any(|a| {
            a.as_str()
                .unwrap()
                .starts_with("warning: the planner gave no plan 3 times in a row")
        })
    });
    let warned = warned.unwrap_or_else(|| panic!("{health:?}"));
    assert_eq!(
        metrics[warned]["metrics"]["planner_failures"]["in_a_row"], 3,
        "the metrics event beside it"
    );

    let report = cwl_agent::show::report(&closed.path).unwrap();
    assert_eq!(report.health.as_ref(), Some(&live));
    let shown = cwl_agent::show::render(&report);
    let line = format!(
        "  planner       {} gave no plan (1 timed out, {errors} failed, 1 malformed), {} in a row",
        2 + errors,
        2 + errors
    );
    assert!(shown.contains(&line), "{line}\n{shown}");
    assert!(
        shown.contains("alert         warning: the planner gave no plan"),
        "{shown}"
    );
}
