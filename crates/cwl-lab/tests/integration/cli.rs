//! The command-line entry points, end to end on files.

use clap::Parser;
use cwl_lab::cli::{GenArgs, ReplayArgs, run_gen, run_replay};

/// The lab's two commands, as the `cwl` binary mounts them.
#[derive(Parser)]
enum Lab {
    Replay(Box<ReplayArgs>),
    Gen(GenArgs),
}

/// The arguments of `cwl replay ARGS...`.
fn replay_args(args: &[&str]) -> ReplayArgs {
    match Lab::try_parse_from(["cwl", "replay"].iter().chain(args)).unwrap() {
        Lab::Replay(args) => *args,
        Lab::Gen(_) => unreachable!("parsed as replay"),
    }
}

/// The arguments of `cwl gen ARGS...`.
fn gen_args(args: &[&str]) -> GenArgs {
    match Lab::try_parse_from(["cwl", "gen"].iter().chain(args)).unwrap() {
        Lab::Gen(args) => args,
        Lab::Replay(_) => unreachable!("parsed as gen"),
    }
}

#[test]
fn gen_then_replay_with_a_plot() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    let session_arg = session.to_str().unwrap();
    let generated = || {
        gen_args(&[
            "--tasks",
            "3",
            "--tokens",
            "150k",
            "--budget",
            "10k",
            "--tokenizer",
            "estimate",
            "-o",
            session_arg,
        ])
    };
    let generate = generated();
    run_gen(generate).unwrap();
    let first = std::fs::read(&session).unwrap();
    assert!(first.starts_with(b"{\"type\":\"session\""));
    let again = generated();
    run_gen(again).unwrap();
    assert_eq!(
        std::fs::read(&session).unwrap(),
        first,
        "same seed, same bytes"
    );

    let plot = dir.path().join("tokens.svg");
    let replay = replay_args(&[
        session_arg,
        "--budget",
        "10k",
        "--tokenizer",
        "estimate",
        "--json",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    run_replay(replay).unwrap();
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("budget 10k"), "the budget as typed");
    assert!(svg.contains("s.jsonl"));
    for name in ["cwl", "tool-mask-prune", "weighted"] {
        assert!(svg.contains(name), "legend lacks {name}");
    }
}

#[test]
fn replay_errors_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.jsonl");
    let args = replay_args(&[missing.to_str().unwrap()]);
    let error = format!("{:#}", run_replay(args).unwrap_err());
    assert!(error.contains("missing.jsonl"), "{error}");

    let args = replay_args(&["x.jsonl", "--plot", "out.png"]);
    let error = run_replay(args).unwrap_err().to_string();
    assert!(error.contains("only .svg"), "{error}");

    let args = gen_args(&["--tokens", "50%"]);
    assert!(run_gen(args).unwrap_err().to_string().contains("--tokens"));
}
