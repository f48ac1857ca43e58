//! `cwl replay` with and without `--model-url`: the report gives every
//! policy's prune rate and side requests; a model URL with no model to ask
//! is a usage error.

use std::path::Path;
use std::process::{Command, Output};

use cwl::{Message, Usage};
use cwl_provider::testing::{Reply, ScriptedServer};

fn cwl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cwl"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("run cwl")
}

fn session(dir: &Path) -> String {
    let path = dir.join("s.jsonl");
    let path = path.to_str().unwrap().to_string();
    let out = cwl(&[
        "gen",
        "--tasks",
        "3",
        "--tokens",
        "300k",
        "--budget",
        "20k",
        "--tokenizer",
        "estimate",
        "-o",
        &path,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn replay_json(policies: &str, extra: &[&str], path: &str) -> serde_json::Value {
    let mut args = vec![
        "replay",
        path,
        "--policy",
        policies,
        "--budget",
        "20k",
        "--tokenizer",
        "estimate",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = cwl(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn prune_and_side_requests_are_reported_with_and_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = session(dir.path());
    let without = replay_json("cwl,none,cwm", &[], &path);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime
        .block_on(ScriptedServer::start([Reply::openai(
            &Message::assistant_text("<gc_plan/>"),
            Usage::default(),
        )]))
        .unwrap();
    let with = replay_json(
        "cwl,none,cwm",
        &["--model-url", server.url(), "--side-model", "m"],
        &path,
    );
    let requests = server.requests();
    assert!(!requests.is_empty(), "cwm asks for summaries");
    assert!(requests.iter().all(|r| r.json()["model"] == "m"));
    for report in [&without, &with] {
        let aggregate = &report["aggregate"];
        assert_eq!(aggregate["none"]["prune"], 0.0);
        assert_eq!(aggregate["cwm"]["over_budget_share"], 0.0);
        for name in ["cwl", "cwm"] {
            let prune = aggregate[name]["prune"].as_f64().unwrap();
            assert!(prune > 0.1 && prune < 1.0, "{name}: {prune}");
        }
        assert_eq!(aggregate["cwl"]["side_requests_skipped"], 0);
        assert_eq!(aggregate["cwl"]["side_requests_failed"], 0);
    }
    let skipped = |report: &serde_json::Value| {
        report["aggregate"]["cwm"]["side_requests_skipped"]
            .as_u64()
            .unwrap()
    };
    assert!(skipped(&without) > 0, "no model: cwm's summaries skipped");
    assert_eq!(skipped(&with), 0, "with a model none is skipped");
    assert!(
        with["aggregate"]["cwm"]["side_requests_failed"]
            .as_u64()
            .unwrap()
            > 0,
        "the script ran out: the rest failed, and were counted"
    );
    assert_eq!(
        without["aggregate"]["cwl"], with["aggregate"]["cwl"],
        "cwl asks nothing of a model"
    );
}

#[test]
fn the_table_has_a_prune_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = session(dir.path());
    let out = cwl(&[
        "replay",
        &path,
        "--policy",
        "none,cwm",
        "--budget",
        "20k",
        "--tokenizer",
        "estimate",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("prune"), "{text}");
    assert!(
        text.contains("cwm: ") && text.contains("side requests skipped (no --model-url)"),
        "{text}"
    );
}

#[test]
fn a_model_url_without_a_model_is_a_usage_error() {
    let out = cwl(&[
        "replay",
        "missing.jsonl",
        "--model-url",
        "http://127.0.0.1:9",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--side-model"), "{stderr}");
    let out = cwl(&[
        "replay",
        "x.jsonl",
        "--model-url",
        "http://127.0.0.1:9",
        "--model-api",
        "gemini",
        "--side-model",
        "m",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = cwl(&["replay", "x.jsonl", "--policy", "cwm,nope"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("weighted, cwm"),
        "the error lists every policy: {stderr}"
    );
}

#[test]
fn judge_measures_no_impact_through_the_model_url() {
    let dir = tempfile::tempdir().unwrap();
    let path = session(dir.path());
    let verdict = |valid: bool| {
        Reply::openai(
            &Message::assistant_text(format!(
                r#"{{"valid": {valid}, "uncertain": false, "overall_score": 3, "summary": "s", "dimension_scores": {{}}, "failure_culprit": null}}"#
            )),
            Usage::default(),
        )
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime
        .block_on(ScriptedServer::start([verdict(true)]))
        .unwrap();
    // One judgment (cwl's first pruned request), then the script is out
    // and the server answers 400: the rest would fail, so sample sparsely
    // enough that there is none.
    let report = replay_json(
        "cwl,none",
        &[
            "--model-url",
            server.url(),
            "--side-model",
            "judge-m",
            "--judge",
            "--judge-every",
            "1000",
        ],
        &path,
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "cwl judged once; none never prunes");
    for request in &requests {
        let body = request.json();
        assert_eq!(body["model"], "judge-m");
        let text = body["messages"].to_string();
        assert!(text.contains("<retained_prefix>") && text.contains("<future_turn>"));
    }
    let aggregate = &report["aggregate"];
    assert_eq!(aggregate["cwl"]["judged"], 1);
    assert_eq!(aggregate["cwl"]["no_impact_rate"], 1.0);
    assert_eq!(aggregate["cwl"]["judge_failed"], 0);
    assert_eq!(aggregate["none"]["judged"], 0);
    assert!(aggregate["none"]["no_impact_rate"].is_null());

    let out = cwl(&["replay", &path, "--judge"]);
    assert_eq!(out.status.code(), Some(2), "--judge needs --model-url");
}

#[test]
fn the_help_describes_every_strategy_of_the_table() {
    let out = cwl(&["replay", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for entry in cwl_lab::policy::strategies::STRATEGIES {
        assert!(
            text.contains(&format!("{} ({})", entry.name, entry.about)),
            "{}: {text}",
            entry.name
        );
    }
    assert!(text.contains("--model-url <URL>") && text.contains("--judge-every <N>"));
}
