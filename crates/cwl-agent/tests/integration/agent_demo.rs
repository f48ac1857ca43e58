//! `cwl demo`: the scripted model drives the real loop, tools and engine.

use std::sync::{Arc, Mutex};

use cwl::{Budget, O200k};
use cwl_agent::demo::{self, DemoOptions, TASKS};
use cwl_agent::render::{RenderOptions, capture};

async fn run(json: bool, keep: bool) -> (demo::DemoReport, String, String, tempfile::TempDir) {
    let sessions = tempfile::tempdir().unwrap();
    let (renderer, out, err) = capture::renderer(RenderOptions {
        json,
        ..RenderOptions::default()
    });
    let report = demo::run_with(
        DemoOptions {
            budget: Budget::Tokens(demo::DEFAULT_BUDGET),
            session_dir: Some(sessions.path().to_owned()),
            keep,
            json,
        },
        Arc::new(Mutex::new(renderer)),
    )
    .await
    .unwrap();
    (report, out.text(), err.text(), sessions)
}

#[tokio::test]
async fn the_demo_runs_every_task_with_eviction_inside_the_budget() {
    let (report, out, err, _sessions) = run(false, true).await;
    let repo = report.repo.clone().expect("kept");
    assert_eq!(report.tasks, TASKS.len());
    assert_eq!(report.budget, demo::DEFAULT_BUDGET);
    let stats = &report.stats;
    assert!(stats.eviction_passes >= 2, "eviction is visible: {stats:?}");
    assert!(stats.episodes_evicted >= 5, "in batches: {stats:?}");
    assert!(stats.max_request_tokens <= report.budget, "{stats:?}");
    assert_eq!(stats.over_budget_requests, 0);
    assert!(stats.requests >= 20);
    assert_eq!(
        stats.tool_errors, 1,
        "only the write refused inside an exploration"
    );

    // The tools really changed the repository.
    let read = |rel: &str| std::fs::read_to_string(repo.join(rel)).unwrap();
    assert!(read("src/greet.py").contains("return \"Hello, world!\""));
    assert!(read("CHANGELOG.md").contains("- The greeting now says \"Hello, world!\"."));
    assert_eq!(
        read("TODO.md")
            .lines()
            .filter(|l| l.starts_with("- src/"))
            .count(),
        4
    );
    assert!(
        !read("src/app.py").contains("add_numbers")
            && !read("src/mathutil.py").contains("add_numbers")
    );
    std::fs::remove_dir_all(&repo).unwrap();

    // What the user sees.
    assert!(out.contains("Hello, world!"));
    assert!(
        out.contains("(it was `19:    return \"Hi world\"`)"),
        "the recalled exploration shows the old line:\n{out}"
    );
    for needle in [
        "⟨expl⟩ find-greeting",
        "⟨act⟩ fix-greeting ← find-greeting",
        "evicted act",
        "↺ recall find-greeting · ",
        "✓ task 5 done",
        "session: ",
    ] {
        assert!(err.contains(needle), "stderr lacks {needle}:\n{err}");
    }
    assert!(err.contains(&report.session.display().to_string()));

    // The session replays to a view inside the budget.
    let loaded = cwl_session::read(&report.session).unwrap();
    assert!(loaded.warnings.is_empty());
    let engine_budget = report.budget - cwl_agent::agent::STATUS_RESERVE;
    let config = cwl_session::Settings::default().config(engine_budget);
    let replay = |options| {
        cwl_session::replay(
            &loaded,
            &report.session,
            Arc::new(O200k),
            config.clone(),
            options,
        )
        .unwrap()
    };
    let mut replayed = replay(cwl_session::ReplayOptions::default());
    assert!(replayed.checkpoint.is_some());
    let full = replay(cwl_session::ReplayOptions::from_start());
    assert!(full.warnings.is_empty(), "{:?}", full.warnings);
    assert!(
        replayed.context.view().eq(full.context.view()),
        "the checkpoint gives the full replay's view"
    );
    assert_eq!(replayed.context.tokens(), full.context.tokens());
    assert!(replayed.warnings.is_empty(), "{:?}", replayed.warnings);
    let next = replayed.context.enforce();
    assert!(next.budget_met, "{next:?}");
    assert!(replayed.context.tokens() <= engine_budget);
    assert_eq!(replayed.tasks, TASKS.len());
    assert!(replayed.pending.is_empty());
}

#[tokio::test]
async fn the_demo_is_deterministic_apart_from_paths() {
    // Notes and the summary name paths; the first request is counted
    // before the model's report calibrates away the path's tokens.
    let strip = |out: &str| -> Vec<serde_json::Value> {
        out.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["event"] != "note" && v["event"] != "summary")
            .map(|mut v| {
                if v["event"] == "response" && v["request"] == 1 {
                    v["request_tokens"] = serde_json::Value::Null;
                }
                v
            })
            .collect()
    };
    let (first, out1, err1, _s1) = run(true, false).await;
    let (second, out2, _, _s2) = run(true, false).await;
    assert!(
        err1.is_empty(),
        "JSON mode writes nothing on stderr: {err1}"
    );
    assert!(first.repo.is_none());
    let (a, b) = (strip(&out1), strip(&out2));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "event {i} differs");
    }
    assert_eq!(a.len(), b.len());
    assert_eq!(first.stats, second.stats);
    assert!(out1.lines().any(|l| l.contains("\"event\":\"evicted\"")));
    let summary: serde_json::Value = serde_json::from_str(out1.lines().last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["tasks"], TASKS.len());
}
