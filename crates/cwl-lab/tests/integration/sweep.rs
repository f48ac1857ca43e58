//! `cwl sweep`: the engine at several low-water marks against baselines on
//! a synthetic multi-task session.

use clap::Parser;
use cwl::Estimate;
use cwl_lab::sweep::{SweepArgs, render, sweep, write_svg};
use cwl_lab::synth::{SynthConfig, generate};

#[derive(Parser)]
struct Sweep {
    #[command(flatten)]
    args: SweepArgs,
}

fn session(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("session.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    let config = SynthConfig {
        tasks: 12,
        tokens: 400_000,
        budget: 8_000,
        seed: 7,
        model: "claude-sonnet-4-5".into(),
    };
    generate(&config, &Estimate, &mut file).unwrap();
    path
}

#[test]
fn a_sweep_replays_the_engine_per_point_and_each_baseline_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = session(dir.path());
    let argv = [
        "sweep",
        log.to_str().unwrap(),
        "--tokenizer",
        "estimate",
        "--budget",
        "8k",
        "--points",
        "0.5,1",
        "--policy",
        "cwl,fifo,oldest-turn",
    ];
    let args = Sweep::try_parse_from(argv).unwrap().args;
    let result = sweep(&args).unwrap();
    let names: Vec<(&str, Option<f64>)> = result
        .rows
        .iter()
        .map(|r| (r.policy.as_str(), r.low_water))
        .collect();
    assert_eq!(
        names,
        [
            ("cwl", Some(0.5)),
            ("cwl", Some(1.0)),
            ("fifo", None),
            ("oldest-turn", None)
        ]
    );
    let (low, high) = (&result.rows[0].summary, &result.rows[1].summary);
    assert!(low.requests > 50 && low.requests == high.requests);
    assert!(
        low.view_changes < high.view_changes,
        "a lower mark changes the view less often: {} vs {}",
        low.view_changes,
        high.view_changes
    );
    assert!(low.tokens_mean < high.tokens_mean);
    assert_eq!(result.budget, "8k");
    let table = render(&result.rows, &result.budget, "claude-sonnet-4-5");
    assert!(table.contains("budget 8k"), "{table}");
    assert_eq!(table.lines().count(), 2 + result.rows.len());

    let plot = dir.path().join("sweep.svg");
    write_svg(&result.rows, &plot).unwrap();
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.contains("\n0.50\n")
            && svg.contains("oldest-turn")
            && svg.contains("cwl by low-water mark")
    );
}

#[test]
fn a_sweep_needs_points_and_known_policies() {
    let dir = tempfile::tempdir().unwrap();
    let log = session(dir.path());
    let file = log.to_str().unwrap();
    assert!(Sweep::try_parse_from(["sweep", file, "--points", "0"]).is_err());
    assert!(Sweep::try_parse_from(["sweep", file, "--points", "2"]).is_err());
    let args = Sweep::try_parse_from(["sweep", file, "--policy", "cwl,bogus"])
        .unwrap()
        .args;
    let error = sweep(&args).unwrap_err().to_string();
    assert!(error.contains("bogus"), "{error}");
}

#[test]
fn a_sweep_refuses_losses_it_cannot_list() {
    let args = Sweep::try_parse_from(["sweep", "a.jsonl", "--losses"])
        .unwrap()
        .args;
    let error = sweep(&args).unwrap_err();
    assert!(
        error.to_string().contains("give it to `cwl replay`"),
        "{error}"
    );
    assert!(error.chain().any(cwl_lab::cli::is_usage));
}

#[test]
fn a_sweep_refuses_a_model_url_rather_than_skip_it() {
    let args = Sweep::try_parse_from([
        "sweep",
        "a.jsonl",
        "--model-url",
        "http://127.0.0.1:9",
        "--side-model",
        "m",
        "--judge",
    ])
    .unwrap()
    .args;
    let error = sweep(&args).unwrap_err();
    assert!(error.to_string().contains("for `cwl replay`"), "{error}");
    assert!(error.chain().any(cwl_lab::cli::is_usage));
}
