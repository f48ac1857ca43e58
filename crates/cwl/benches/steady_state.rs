//! Steady state: one synthetic session of sequential tasks (89 distinct
//! shapes, repeated) grown turn by turn until its history holds 32M tokens,
//! τ = 80k, once with the engine's defaults (low water, residue cap, least
//! recently used order) and once with `Config::paper` (`--preset paper`).
//! Prints the engine's time per turn (push, enforce, walk the view;
//! counting is the trivial estimator, so tokenizing the new content is
//! excluded) around 0.5M, 2M, 8M and 32M tokens of history, where a turn's
//! time goes, and the run's peak memory.
//!
//! Run: `cargo bench -p cwl --bench steady_state`. It exits with status 1
//! when a figure is more than twice its baseline in
//! `benches/baselines/steady_state.txt`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cwl::{Config, Context, Estimate, Message};

#[path = "support/session.rs"]
mod session;

#[path = "support/baseline.rs"]
mod baseline;

use session::Session;

const BUDGET: usize = 80_000;
const TASKS: usize = 89;
const TARGET: u64 = 32_000_000;
const MILESTONES: [(u64, &str); 4] = [
    (500_000, "0.5M"),
    (2_000_000, "2M"),
    (8_000_000, "8M"),
    (32_000_000, "32M"),
];
const PHASES: [&str; 4] = ["push results", "enforce", "walk the view", "push the reply"];

fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// One turn's time, phase by phase, at a history length.
struct Sample {
    history: u64,
    phases: [Duration; 4],
}

impl Sample {
    fn total(&self) -> Duration {
        self.phases.iter().sum()
    }
}

/// Grows the session under `config` and prints its figures; returns them
/// for the baseline, named with `prefix`.
fn run(label: &str, prefix: &str, config: Config) -> Vec<(String, f64)> {
    let mut context = Context::new(config, Arc::new(Estimate), session::tools());
    context
        .push(Message::system("You are a coding agent."))
        .expect("system");
    let mut session = Session::new(0x5eed, None);
    let (mut cumulative, mut history) = (0u64, 0u64);
    let mut samples: Vec<Sample> = Vec::new();
    let (mut task, mut evictions, mut max_request) = (0usize, 0usize, 0usize);
    let size = |message: &Message| cwl::tokens::message_tokens(&Estimate, message) as u64;
    'run: while history < TARGET || task < TASKS {
        let (user, task_turns) = session.task(task % TASKS);
        task += 1;
        history += size(&user);
        context.push(user).expect("user");
        for turn in task_turns {
            history += turn.results.iter().map(size).sum::<u64>() + size(&turn.reply);
            let started = Instant::now();
            for result in turn.results {
                context.push(result).expect("result");
            }
            let pushed = started.elapsed();
            let report = context.enforce();
            let enforced = started.elapsed();
            let request: Vec<&Message> = context.view().collect();
            black_box(&request);
            drop(request);
            let walked = started.elapsed();
            context.push(turn.reply).expect("reply");
            let done = started.elapsed();
            evictions += usize::from(report.evicted());
            max_request = max_request.max(report.tokens_after);
            cumulative += report.tokens_after as u64;
            samples.push(Sample {
                history,
                phases: [pushed, enforced - pushed, walked - enforced, done - walked],
            });
            if history >= TARGET && task >= TASKS {
                break 'run;
            }
        }
    }
    println!(
        "{label}: {} turns over {task} tasks ({TASKS} distinct), τ = {BUDGET}, {evictions} turns with eviction",
        samples.len()
    );
    println!(
        "  history: {:.1}M tokens; cumulative request tokens: {:.1}M; largest request: {max_request} tokens",
        history as f64 / 1e6,
        cumulative as f64 / 1e6
    );
    let mut figures = Vec::new();
    for (milestone, name) in MILESTONES {
        let start = samples
            .iter()
            .position(|sample| sample.history >= milestone)
            .unwrap_or(samples.len())
            .min(samples.len().saturating_sub(100));
        let mut window: Vec<Duration> = samples[start..(start + 100).min(samples.len())]
            .iter()
            .map(Sample::total)
            .collect();
        window.sort();
        let (p50, p99) = (
            micros(percentile(&window, 0.5)),
            micros(percentile(&window, 0.99)),
        );
        figures.push((format!("{prefix}p50_us_at_{name}"), p50));
        figures.push((format!("{prefix}p99_us_at_{name}"), p99));
        println!(
            "  at {name:>4} history: per-turn engine time p50 {p50:>7.1} µs, p99 {p99:>7.1} µs (100 turns)"
        );
    }
    let mut all: Vec<Duration> = samples.iter().map(Sample::total).collect();
    all.sort();
    println!(
        "  whole run: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        micros(percentile(&all, 0.5)),
        micros(percentile(&all, 0.99)),
        all.last().map_or(0.0, |d| micros(*d))
    );
    for (at, phase) in PHASES.iter().enumerate() {
        let mut times: Vec<Duration> = samples.iter().map(|sample| sample.phases[at]).collect();
        times.sort();
        println!(
            "    {phase}: p50 {:.1} µs, p99 {:.1} µs",
            micros(percentile(&times, 0.5)),
            micros(percentile(&times, 0.99))
        );
    }
    println!(
        "  engine state at end: {} messages in view, {} episodes",
        context.view().count(),
        context.graph().episodes().len()
    );
    figures
}

fn main() {
    let mut figures = run("defaults", "", Config::with_budget(BUDGET));
    figures.extend(run("--preset paper", "paper_", Config::paper(BUDGET)));
    match peak_memory_kib() {
        Some(kib) => println!(
            "peak memory (VmHWM, whole process): {:.1} MiB",
            kib as f64 / 1024.0
        ),
        None => println!("peak memory: unavailable on this platform"),
    }
    baseline::check("steady_state", &figures);
}
