//! `cwl replay` with and without `--model-url`: the report gives every
//! policy's prune rate and side requests; a model URL with no model to ask
//! is a usage error.

use std::path::Path;
use std::process::{Command, Output};

use cwl::{Message, Usage};
use cwl_agent::provider::testing::{Reply, ScriptedServer};

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

fn replay_json(extra: &[&str], path: &str) -> serde_json::Value {
    let mut args = vec![
        "replay",
        path,
        "--policy",
        "cwl,none,cwm",
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
    let without = replay_json(&[], &path);
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
    let with = replay_json(&["--model-url", server.url(), "--side-model", "m"], &path);
    assert!(
        server.requests().is_empty(),
        "neither cwl nor cwm asks for a side request"
    );
    for report in [&without, &with] {
        let aggregate = &report["aggregate"];
        assert_eq!(aggregate["none"]["prune"], 0.0);
        assert_eq!(aggregate["cwm"]["over_budget_share"], 0.0);
        for name in ["cwl", "cwm"] {
            let prune = aggregate[name]["prune"].as_f64().unwrap();
            assert!(prune > 0.1 && prune < 1.0, "{name}: {prune}");
            assert_eq!(aggregate[name]["side_requests_skipped"], 0);
            assert_eq!(aggregate[name]["side_requests_failed"], 0);
        }
    }
    assert_eq!(without["aggregate"], with["aggregate"]);
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
    assert!(!text.contains("side requests skipped"), "{text}");
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
