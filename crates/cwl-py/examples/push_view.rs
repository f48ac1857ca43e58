//! The Python bench's calls (`crates/cwl-py/bench/push_view.py`) without
//! Python: the same [`Core`] that `cwl.Context` drives takes a tool-using
//! history of about 1M tokens (reads of about 750 tokens, episodes
//! inferred, o200k counts) as OpenAI Chat messages with a view before
//! every model call, then 2,000 timed calls, each pushing a response and
//! its tool result, enforcing the budget and walking the view. What the
//! engine costs a Python caller before any conversion to or from Python
//! objects.
//!
//! Run: `cargo run --release -p cwl-py --example push_view`. It prints
//! figures; it asserts nothing.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use _cwl::core::{Core, Episodes};
use cwl::{Config, O200k, TokenCounter};
use serde_json::{Value, json};

const HISTORY: usize = 1_000_000;
const CALLS: usize = 2_000;
const LINES: usize = 40;

/// A small xorshift generator: the same history on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// One model call's messages: a tool call and its output, as the Python
/// bench writes them.
fn step(rng: &mut Rng, step: usize) -> [Value; 2] {
    let id = format!("call_{step}");
    let tool = if step.is_multiple_of(5) {
        "grep"
    } else {
        "read_file"
    };
    let output: Vec<String> = (0..LINES)
        .map(|n| {
            let (v, x) = (rng.below(1_000_000), rng.below(10_000));
            format!("src/mod_{step}.rs:{n}: let v{v} = f(x_{x});")
        })
        .collect();
    [
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": tool, "arguments": format!("{{\"path\":\"src/mod_{step}.rs\"}}")}}]}),
        json!({"role": "tool", "tool_call_id": id, "content": output.join("\n")}),
    ]
}

fn percentiles(label: &str, samples: &mut [Duration]) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!(
        "{label}: p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs",
        at(0.5),
        at(0.9),
        at(0.99)
    );
}

fn main() {
    let counter = Arc::new(O200k::new());
    let mut core = Core::new(
        Config::with_budget(80_000),
        counter.clone(),
        Vec::new(),
        Episodes::Inferred,
        None,
    );
    let push = |core: &mut Core, message: &Value| {
        core.push(message).expect("a valid message");
    };
    let view = |core: &mut Core| {
        core.enforce().expect("a pass");
        black_box(core.context().view().count())
    };
    push(
        &mut core,
        &json!({"role": "system", "content": "You are a coding agent."}),
    );
    push(
        &mut core,
        &json!({"role": "user", "content": "Read the whole repository."}),
    );
    let mut rng = Rng(1);
    let (mut pushed, mut at) = (0, 0);
    while pushed < HISTORY {
        at += 1;
        view(&mut core);
        for message in step(&mut rng, at) {
            let text = message["content"].as_str().unwrap_or("");
            pushed += counter.count(text) + 4;
            push(&mut core, &message);
        }
    }
    let steps: Vec<[Value; 2]> = (0..CALLS).map(|n| step(&mut rng, at + 1 + n)).collect();
    let (mut totals, mut pushes, mut views) = (Vec::new(), Vec::new(), Vec::new());
    for messages in &steps {
        let started = Instant::now();
        for message in messages {
            push(&mut core, message);
        }
        let pushed_at = started.elapsed();
        view(&mut core);
        let total = started.elapsed();
        totals.push(total);
        pushes.push(pushed_at);
        views.push(total - pushed_at);
    }
    println!(
        "history: {pushed} tokens in {at} model calls; view: {} tokens, {} messages",
        core.context().tokens(),
        core.context().view().count()
    );
    percentiles("push + view per call", &mut totals);
    percentiles("  push (response + result)", &mut pushes);
    percentiles("  view (enforce + walk)", &mut views);
}
