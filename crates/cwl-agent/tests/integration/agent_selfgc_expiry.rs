//! Self-GC commits a pending plan when the provider's prefix cache has
//! expired: the user left an approval prompt for ten minutes (told by an
//! injected clock), the plan that waited commits at the next model call,
//! the gap is recorded, and a replay or a resume rebuilds the same view.
//! Without the gap the same run leaves the plan pending. A task
//! continued hours after it stopped commits its waiting plan too.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use cwl::{Message, Record, Usage};
use cwl_agent::agent::{
    Agent, AgentOptions, ApprovalMode, ApprovalRequest, Approver, Decision, Event, InvalidAnswer,
    ManualClock,
};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_session::Settings;
use cwl_session::strategy::StrategyName;
use futures_util::future::BoxFuture;
use serde_json::json;
use support::selfgc::*;
use support::*;

const BUDGET: usize = 8_000;
const TASK: &str = "Survey the auth helpers, note what you found, then read on.";
/// How long the user leaves the approval prompt: past the 5-minute cache.
const AWAY: Duration = Duration::from_secs(600);

fn read(i: usize) -> Message {
    let path = if i.is_multiple_of(2) {
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
}

/// Six reads, a write the user must approve, two more reads, the answer.
fn script() -> Vec<Message> {
    let mut script: Vec<Message> = (0..6).map(read).collect();
    script.push(assistant(vec![call(
        "w1",
        "write",
        json!({"path": "NOTES.md", "content": "auth: 40 checks\n"}),
    )]));
    script.extend((6..8).map(read));
    script.push(assistant(vec![text("Noted and read on.")]));
    script
}

fn options() -> AgentOptions {
    let mut options = selfgc_options(BUDGET, Duration::from_millis(500));
    // Plans this small never commit at once: they wait.
    options.strategy_options = Some(json!({"commit_prune": 0.95}));
    options
}

/// Approves every call; the user takes `away` to answer.
struct SlowUser {
    clock: Arc<ManualClock>,
    away: Duration,
}

impl Approver for SlowUser {
    fn ask<'a>(
        &'a mut self,
        _: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<Decision, InvalidAnswer>> {
        self.clock.advance(self.away);
        Box::pin(async { Ok(Decision::Approve) })
    }
}

struct Run {
    closed: Closed,
    notes: Vec<String>,
    view: Vec<Message>,
}

async fn run(away: Duration) -> Run {
    let replies = script()
        .iter()
        .map(|m| Reply::openai(m, Usage::default()))
        .collect::<Vec<_>>();
    let mut t = Scripted::start(replies, options()).await;
    t.server
        .answer_side(|request| request.body.contains(PLANNER).then(|| fold_reads(3)));
    let clock = Arc::new(ManualClock::new());
    t.agent.set_clock(clock.clone());
    t.agent.set_approval(
        ApprovalMode::OnMutate,
        Box::new(SlowUser {
            clock: clock.clone(),
            away,
        }),
    );
    t.agent.run_task(TASK).await.unwrap();
    let view = t.agent.context().view().cloned().collect();
    let notes = events(&t.shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::Note { text } => Some(text),
            _ => None,
        })
        .collect();
    Run {
        closed: t.close(),
        notes,
        view,
    }
}

fn position(records: &[(usize, Record)], what: impl Fn(&Record) -> bool) -> Option<usize> {
    records.iter().position(|(_, r)| what(r))
}

fn note_with(text: &str) -> impl Fn(&Record) -> bool + '_ {
    move |r| matches!(r, Record::Note { text: t, .. } if t.contains(text))
}

fn config() -> cwl::Config {
    Settings {
        strategy: StrategyName::SelfGc,
        ..Settings::default()
    }
    .config(support::options(BUDGET).engine_budget())
}

#[tokio::test]
async fn a_pending_plan_commits_once_the_cache_expired_and_resume_rebuilds_the_view() {
    let Run {
        closed,
        notes,
        view,
    } = run(AWAY).await;
    let loaded = cwl_session::read(&closed.path).unwrap();
    let records = &loaded.records;

    // The plan waited, the user was away, the gap was recorded, the plan
    // committed at the next model call, for that reason.
    let accepted = position(records, note_with("plan accepted")).expect("a plan was accepted");
    let idle: Vec<(usize, u64)> = records
        .iter()
        .enumerate()
        .filter_map(|(at, (_, r))| match r {
            Record::Idle { seconds } => Some((at, *seconds)),
            _ => None,
        })
        .collect();
    assert_eq!(idle.len(), 1, "one gap minded: {idle:?}");
    let (idle_at, seconds) = idle[0];
    assert!(seconds >= AWAY.as_secs(), "{seconds}");
    let committed = position(records, note_with("plan committed")).expect("{notes:?}");
    assert!(accepted < idle_at && idle_at < committed, "{notes:?}");
    assert!(
        position(records, note_with("pending until")).is_some_and(|p| p < idle_at),
        "the plan was pending before the gap: {notes:?}"
    );
    let why = &notes.iter().find(|n| n.contains("plan committed")).unwrap();
    assert!(why.contains("the provider cache had expired"), "{why}");
    let write = position(records, |r| {
        matches!(r, Record::Message { message: Message::ToolResult(result), .. } if result.call_id == "w1")
    })
    .unwrap();
    assert!(write < idle_at, "the gap follows the approved write");

    // The requests: reads folded only after the gap.
    let requests = main_requests(&closed.server);
    assert_eq!(requests.len(), script().len());
    let folded = |body: &serde_json::Value| body.to_string().contains("[folded as function:read:1");
    let bodies: Vec<serde_json::Value> = requests.iter().map(|r| r.json()).collect();
    assert!(!folded(&bodies[6]), "the write's request: still pending");
    assert!(folded(&bodies[7]), "the request after the gap");
    for body in &bodies {
        assert!(openai_request_tokens(body) <= BUDGET);
    }

    // Replays from the checkpoint and from the start give the same view.
    let counter = Arc::new(cwl::O200k);
    let (replayed, full) = support::replay_both(&loaded, &closed.path, config());
    assert!(replayed.warnings.is_empty(), "{:?}", replayed.warnings);
    assert!(replayed.context.view().cloned().eq(view.iter().cloned()));
    assert!(full.warnings.is_empty(), "{:?}", full.warnings);
    assert!(full.context.view().cloned().eq(view.iter().cloned()));
    // The gap is what made it: the file without it replays to another view.
    let mut without = cwl_session::read(&closed.path).unwrap();
    without
        .records
        .retain(|(_, r)| !matches!(r, Record::Idle { .. }));
    let other = cwl_session::replay(
        &without,
        &closed.path,
        counter,
        config(),
        cwl_session::ReplayOptions::from_start(),
    )
    .unwrap();
    assert!(!other.context.view().cloned().eq(view.iter().cloned()));

    // Resumed: the same view.
    let next = ScriptedServer::start([Reply::openai(
        &assistant(vec![text("Resumed.")]),
        Usage::default(),
    )])
    .await
    .unwrap();
    let (_shared, observer) = collector();
    let toolbox = Toolbox::new(closed.dir.path(), ToolConfig::default()).unwrap();
    let resumed = Agent::resume(
        openai(&next),
        toolbox,
        support::options(BUDGET),
        &closed.path,
        observer,
    )
    .unwrap();
    assert!(resumed.context().view().cloned().eq(view.iter().cloned()));
}

#[tokio::test]
async fn without_the_gap_the_plan_stays_pending_and_nothing_is_recorded() {
    let Run { closed, notes, .. } = run(Duration::from_secs(2)).await;
    let loaded = cwl_session::read(&closed.path).unwrap();
    assert!(
        !loaded
            .records
            .iter()
            .any(|(_, r)| matches!(r, Record::Idle { .. })),
        "a warm cache's gap is not recorded"
    );
    assert!(
        notes.iter().any(|n| n.contains("plan accepted")),
        "{notes:?}"
    );
    assert!(
        !notes.iter().any(|n| n.contains("plan committed")),
        "{notes:?}"
    );
    let requests = main_requests(&closed.server);
    assert!(
        !requests
            .iter()
            .any(|r| r.body.contains("[folded as function:read:1")),
        "nothing folded"
    );
}

/// Sets the time of every message record of the session at `path` to
/// `ago` before now, as if the session had stopped then.
fn age_session(path: &std::path::Path, ago: chrono::TimeDelta) {
    let stamp = (chrono::Utc::now() - ago).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
            if record["type"] == "message" {
                record["timestamp"] = json!(stamp);
            }
            record.to_string()
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[tokio::test]
async fn a_task_continued_after_the_cache_expired_commits_the_plan_that_waited() {
    // The task stops at the call after the write (the server has no
    // reply left), with a plan waiting.
    let replies: Vec<Reply> = script()[..7]
        .iter()
        .map(|m| Reply::openai(m, Usage::default()))
        .collect();
    let mut t = Scripted::start(replies, options()).await;
    t.server
        .answer_side(|request| request.body.contains(PLANNER).then(|| fold_reads(3)));
    t.agent.set_approval(
        ApprovalMode::OnMutate,
        Box::new(SlowUser {
            clock: Arc::new(ManualClock::new()),
            away: Duration::ZERO,
        }),
    );
    assert!(t.agent.run_task(TASK).await.is_err());
    let notes: Vec<String> = events(&t.shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::Note { text } => Some(text),
            _ => None,
        })
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("plan accepted")),
        "{notes:?}"
    );
    assert!(
        !notes.iter().any(|n| n.contains("plan committed")),
        "{notes:?}"
    );
    let closed = t.close();

    // Two hours later the task is continued.
    age_session(&closed.path, chrono::TimeDelta::hours(2));
    let next = ScriptedServer::start([Reply::openai(
        &assistant(vec![text("Noted and read on.")]),
        Usage::default(),
    )])
    .await
    .unwrap();
    let (shared, observer) = collector();
    let toolbox = Toolbox::new(closed.dir.path(), ToolConfig::default()).unwrap();
    let mut resumed = Agent::resume(
        openai(&next),
        toolbox,
        support::options(BUDGET),
        &closed.path,
        observer,
    )
    .unwrap();
    resumed.continue_task().await.unwrap();
    let notes: Vec<String> = events(&shared)
        .into_iter()
        .filter_map(|e| match e {
            Event::Note { text } => Some(text),
            _ => None,
        })
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("plan committed") && n.contains("the provider cache had expired")),
        "{notes:?}"
    );
    let sent = main_requests(&next);
    assert!(sent[0].body.contains("[folded as function:read:1"));
    let view: Vec<Message> = resumed.context().view().cloned().collect();
    drop(resumed);

    let loaded = cwl_session::read(&closed.path).unwrap();
    let gaps: Vec<u64> = loaded
        .records
        .iter()
        .filter_map(|(_, r)| match r {
            Record::Idle { seconds } => Some(*seconds),
            _ => None,
        })
        .collect();
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert!((7_200..7_300).contains(&gaps[0]), "{gaps:?}");
    let replayed = cwl_session::replay(
        &loaded,
        &closed.path,
        Arc::new(cwl::O200k),
        config(),
        cwl_session::ReplayOptions::from_start(),
    )
    .unwrap();
    assert!(replayed.warnings.is_empty(), "{:?}", replayed.warnings);
    assert!(replayed.context.view().cloned().eq(view));
}
