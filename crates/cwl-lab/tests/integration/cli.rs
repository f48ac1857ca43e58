//! The command-line entry points, end to end on files.

use clap::Parser;
use cwl_lab::cli::{GenArgs, ReplayArgs, run_gen, run_replay};

#[derive(Parser)]
struct Replay {
    #[command(flatten)]
    args: ReplayArgs,
}

#[derive(Parser)]
struct Gen {
    #[command(flatten)]
    args: GenArgs,
}

#[test]
fn gen_then_replay_with_a_plot() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    let session_arg = session.to_str().unwrap();
    let gen_args = || {
        Gen::try_parse_from([
            "gen",
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
        .unwrap()
        .args
    };
    let generate = gen_args();
    run_gen(generate).unwrap();
    let first = std::fs::read(&session).unwrap();
    assert!(first.starts_with(b"{\"type\":\"session\""));
    let again = gen_args();
    run_gen(again).unwrap();
    assert_eq!(
        std::fs::read(&session).unwrap(),
        first,
        "same seed, same bytes"
    );

    let plot = dir.path().join("tokens.svg");
    let replay = Replay::try_parse_from([
        "replay",
        session_arg,
        "--budget",
        "10k",
        "--tokenizer",
        "estimate",
        "--json",
        "--plot",
        plot.to_str().unwrap(),
    ])
    .unwrap()
    .args;
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
    let args = Replay::try_parse_from(["replay", missing.to_str().unwrap()])
        .unwrap()
        .args;
    let error = format!("{:#}", run_replay(args).unwrap_err());
    assert!(error.contains("missing.jsonl"), "{error}");

    let args = Replay::try_parse_from(["replay", "x.jsonl", "--plot", "out.png"])
        .unwrap()
        .args;
    let error = run_replay(args).unwrap_err().to_string();
    assert!(error.contains("only .svg"), "{error}");

    let args = Gen::try_parse_from(["gen", "--tokens", "50%"])
        .unwrap()
        .args;
    assert!(run_gen(args).unwrap_err().to_string().contains("--tokens"));
}
