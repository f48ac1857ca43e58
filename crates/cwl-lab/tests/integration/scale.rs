//! Scale: generated sessions stream through the importer and the engine.
//!
//! The paper-scale run (80M tokens, o200k) is `#[ignore]`d because it is
//! only meaningful in release mode:
//! `cargo test -p cwl-lab --release --test integration -- --ignored --nocapture scale::`.

use std::sync::Arc;
use std::time::Instant;

use cwl::{Estimate, O200k, TokenCounter};
use cwl_lab::metrics::cost;
use cwl_lab::policy::{PolicyConfig, PolicyKind};
use cwl_lab::replay::{ReplayConfig, replay};
use cwl_lab::session::Session;
use cwl_lab::synth::{SynthConfig, generate};

fn run(
    tokens: u64,
    counter: Arc<dyn TokenCounter>,
) -> (
    cwl_lab::synth::SynthSummary,
    cwl_lab::replay::FileReport,
    f64,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let config = SynthConfig {
        tasks: 89,
        tokens,
        budget: 80_000,
        seed: 42,
        model: "claude-sonnet-4-5".into(),
    };
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let summary = generate(&config, counter.as_ref(), &mut file).unwrap();
    drop(file);
    let session = Session::open(&path).unwrap();
    assert_eq!(session.info.format, "cwl");
    assert!(session.info.annotated());
    assert_eq!(session.info.bytes, Some(summary.bytes));
    let replay_config = ReplayConfig {
        policies: vec![PolicyKind::Cwl],
        policy: PolicyConfig {
            budget: 80_000,
            ..PolicyConfig::default()
        },
        pricing: Arc::new(cost::lookup("claude-sonnet-4-5").unwrap()),
        counter,
        side: Arc::new(cwl_lab::side::NoModel),
        judge: None,
        check: false,
        losses: false,
    };
    let started = Instant::now();
    let report = replay(session, "session.jsonl", &replay_config, &mut || {});
    let seconds = started.elapsed().as_secs_f64();
    (summary, report, seconds)
}

#[test]
fn a_generated_session_streams_through_the_engine_within_budget() {
    let (summary, report, _) = run(6_000_000, Arc::new(Estimate));
    assert!(report.annotated);
    assert_eq!(report.requests, summary.calls);
    assert!(
        report.warnings.is_empty(),
        "{:?}",
        &report.warnings[..report.warnings.len().min(3)]
    );
    let stats = report.policies[0].stats.summary();
    assert_eq!(stats.requests, summary.calls);
    assert_eq!(
        stats.tokens_max as usize <= 80_000,
        stats.budget_unmet == Some(0)
    );
    assert!(stats.evictions_total > 0);
    assert!(
        stats.tokens_mean > 40_000.0,
        "the session runs near the budget: {}",
        stats.tokens_mean
    );
}

fn peak_mib() -> Option<f64> {
    cwl_lab::cli::peak_memory_mib()
}

#[test]
#[ignore = "paper scale; run in release: cargo test -p cwl-lab --release --test integration -- --ignored --nocapture scale::"]
fn paper_scale_session_replays_in_bounded_memory() {
    let (summary, report, seconds) = run(80_000_000, Arc::new(O200k::new()));
    let stats = report.policies[0].stats.summary();
    let megabytes = summary.bytes as f64 / 1e6;
    let peak = peak_mib().unwrap_or(0.0);
    eprintln!(
        "80M session: {} calls, {megabytes:.1} MB; cwl replay {seconds:.2} s ({:.1} MB/s); peak memory {peak:.0} MiB; cwl mean {} max {}",
        summary.calls,
        megabytes / seconds,
        stats.tokens_mean,
        stats.tokens_max
    );
    assert!(summary.sent_tokens >= 80_000_000);
    assert_eq!(stats.budget_unmet, Some(0));
    assert!(peak < 256.0, "peak memory {peak} MiB");
}
