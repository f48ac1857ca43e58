//! Steady state: one synthetic session of sequential tasks (89 distinct
//! shapes, repeated) grown turn by turn until its history holds 32M tokens,
//! τ = 80k with the engine's defaults (low water, residue cap). Prints the
//! engine's time per turn (push, enforce, walk the view; counting is the
//! trivial estimator, so tokenizing the new content is excluded) around
//! 1M, 4M, 16M and 32M tokens of history, and the run's peak memory.
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

fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let tools = session::tools();
    let mut context = Context::new(Config::with_budget(BUDGET), Arc::new(Estimate), tools);
    context
        .push(Message::system("You are a coding agent."))
        .expect("system");
    let mut session = Session::new(0x5eed, None);

    let mut cumulative: u64 = 0;
    let mut history: u64 = 0;
    let mut samples: Vec<(u64, Duration)> = Vec::new();
    let mut turns = 0usize;
    let mut evictions = 0usize;
    let mut max_request = 0usize;
    let mut task = 0usize;
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
            let report = context.enforce();
            let request: Vec<&Message> = context.view().collect();
            black_box(&request);
            drop(request);
            context.push(turn.reply).expect("reply");
            let elapsed = started.elapsed();
            evictions += usize::from(report.evicted());
            let sent = report.tokens_after;
            max_request = max_request.max(sent);
            cumulative += sent as u64;
            turns += 1;
            samples.push((history, elapsed));
            if history >= TARGET && task >= TASKS {
                break 'run;
            }
        }
    }

    println!(
        "steady state: {turns} turns over {task} tasks ({TASKS} distinct), τ = {BUDGET}, {evictions} turns with eviction"
    );
    println!(
        "history: {:.1}M tokens; cumulative request tokens: {:.1}M; largest request: {max_request} tokens",
        history as f64 / 1e6,
        cumulative as f64 / 1e6
    );
    let mut figures = Vec::new();
    for milestone in [1_000_000u64, 4_000_000, 16_000_000, 32_000_000] {
        let start = samples
            .iter()
            .position(|(at, _)| *at >= milestone)
            .unwrap_or(samples.len().saturating_sub(100));
        let start = start.min(samples.len().saturating_sub(100));
        let mut window: Vec<Duration> = samples[start..(start + 100).min(samples.len())]
            .iter()
            .map(|(_, d)| *d)
            .collect();
        window.sort();
        let millions = milestone / 1_000_000;
        figures.push((
            format!("p50_us_at_{millions}M"),
            percentile(&window, 0.5).as_secs_f64() * 1e6,
        ));
        figures.push((
            format!("p99_us_at_{millions}M"),
            percentile(&window, 0.99).as_secs_f64() * 1e6,
        ));
        println!(
            "  at {:>3}M history: per-turn engine time p50 {:>7.1} µs, p99 {:>7.1} µs (100 turns)",
            milestone / 1_000_000,
            percentile(&window, 0.5).as_secs_f64() * 1e6,
            percentile(&window, 0.99).as_secs_f64() * 1e6,
        );
    }
    let mut all: Vec<Duration> = samples.iter().map(|(_, d)| *d).collect();
    all.sort();
    println!(
        "  whole run: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        percentile(&all, 0.5).as_secs_f64() * 1e6,
        percentile(&all, 0.99).as_secs_f64() * 1e6,
        all.last().map_or(0.0, |d| d.as_secs_f64() * 1e6)
    );
    println!(
        "  engine state at end: {} messages in view, {} episodes",
        context.view().count(),
        context.graph().episodes().len()
    );
    match peak_memory_kib() {
        Some(kib) => println!(
            "peak memory (VmHWM, whole process): {:.1} MiB",
            kib as f64 / 1024.0
        ),
        None => println!("peak memory: unavailable on this platform"),
    }
    baseline::check("steady_state", &figures);
}
