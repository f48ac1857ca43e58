//! One pass over a long transcript: a context holding 32M tokens of
//! annotated history (4,400 tasks of expl and act episodes) is enforced
//! once at τ = 80k with the engine's defaults. Prints the time of the pass
//! alone (pushing and counting are excluded: they happen before the clock
//! starts), the median of five runs, and what the pass did.
//!
//! Run: `cargo bench -p cwl --bench one_pass` (status 1 when the median is
//! more than twice its baseline in `benches/baselines/one_pass.txt`).

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/baseline.rs"]
mod baseline;

use cwl::{Block, Config, Context, Estimate, Message, ToolCall, delimiter_spec};
use serde_json::json;

const TASKS: usize = 4_400;
const BUDGET: usize = 80_000;

/// About `tokens` tokens under the estimator (4 bytes a token).
fn text(seed: usize, tokens: usize) -> String {
    let unit = format!("src/m{}.rs:{} ", seed % 97, seed % 991);
    unit.repeat(tokens * 4 / unit.len() + 1)[..tokens * 4].to_string()
}

fn call(context: &mut Context, id: &mut usize, tool: &str, arguments: String, output: String) {
    *id += 1;
    let call_id = format!("call_{id}");
    context
        .push(Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new(&call_id, tool, arguments))],
        })
        .expect("call");
    context
        .push(Message::tool_result(&call_id, tool, output, false))
        .expect("result");
}

fn build() -> (Context, u64) {
    let mut context = Context::new(
        Config::with_budget(BUDGET),
        Arc::new(Estimate),
        vec![delimiter_spec()],
    );
    context
        .push(Message::system("You are a coding agent."))
        .unwrap();
    let mut id = 0;
    for task in 0..TASKS {
        context
            .push(Message::user(format!("task {task}: {}", text(task, 60))))
            .unwrap();
        let expl = format!("look-{task}");
        let start = json!({"action": "start", "name": expl, "type": "expl"}).to_string();
        call(&mut context, &mut id, "delimiter", start, "ok".into());
        for step in 0..4 {
            let tool = if step % 2 == 0 { "grep" } else { "read" };
            call(
                &mut context,
                &mut id,
                tool,
                json!({"q": step}).to_string(),
                text(task + step, 1_400),
            );
        }
        let end =
            json!({"action": "end", "description": format!("task {task} is in src/m{task}.rs")});
        call(
            &mut context,
            &mut id,
            "delimiter",
            end.to_string(),
            "ok".into(),
        );
        let act = json!({"action": "start", "name": format!("fix-{task}"), "type": "act", "dependencies": [expl]});
        call(
            &mut context,
            &mut id,
            "delimiter",
            act.to_string(),
            "ok".into(),
        );
        for step in 0..3 {
            let tool = if step % 2 == 0 { "edit" } else { "bash" };
            call(
                &mut context,
                &mut id,
                tool,
                json!({"p": step}).to_string(),
                text(task * 7 + step, 500),
            );
        }
        call(
            &mut context,
            &mut id,
            "delimiter",
            json!({"action": "end"}).to_string(),
            "ok".into(),
        );
        context
            .push(Message::assistant_text(format!("Task {task} done.")))
            .unwrap();
    }
    let tokens = context.tokens() as u64;
    (context, tokens)
}

fn main() {
    let mut times: Vec<Duration> = Vec::new();
    let mut last = None;
    for _ in 0..5 {
        let (mut context, tokens) = build();
        let started = Instant::now();
        let report = context.enforce();
        times.push(started.elapsed());
        last = Some((
            tokens,
            report,
            context.view().count(),
            context.graph().episodes().len(),
        ));
    }
    times.sort();
    let (tokens, report, messages, episodes) = last.expect("five runs");
    println!(
        "one pass over {:.1}M tokens ({episodes} episodes) to τ = {BUDGET}: median {:.1} ms (min {:.1}, max {:.1}) over 5 runs",
        tokens as f64 / 1e6,
        times[2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times[4].as_secs_f64() * 1e3,
    );
    println!(
        "  left {} tokens in {messages} messages; {} episodes touched, {} residues folded; budget met: {}",
        report.tokens_after,
        report.episodes.len(),
        report.folded,
        report.budget_met
    );
    baseline::check(
        "one_pass",
        &[("median_ms".to_string(), times[2].as_secs_f64() * 1e3)],
    );
}
