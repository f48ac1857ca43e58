//! Identity check for engine optimisations: grows the steady-state
//! session under several configurations and prints one digest per run of
//! every enforce report, every view's sources and token count, the full
//! view after every pass that changed it, and periodic checkpoints; a
//! second context restored from a checkpoint mid-run is driven in
//! lockstep and must agree turn by turn. Two builds that print the same
//! digests made the same decisions.
//!
//! Run: `cargo bench -p cwl --bench view_digest` (`CWL_DIGEST_HISTORY`:
//! tokens of history per run, 8M by default).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use cwl::{Checkpoint, Config, Context, Estimate, Evictor, Message, OldestFirst, PaperOrder};

#[path = "support/session.rs"]
mod session;

use session::{Session, tools};

const BUDGET: usize = 80_000;
const TASKS: usize = 89;
/// Turns between checkpoint digests.
const CHECKPOINT_EVERY: usize = 1_000;
/// The turn at which the lockstep twin is restored.
const RESTORE_AT: usize = 2_500;

/// What one turn left: the report, and the view's sources and size.
fn turn_digest(context: &Context, report: &cwl::Report, full: bool) -> u64 {
    let mut hasher = DefaultHasher::new();
    serde_json::to_string(report)
        .expect("report")
        .hash(&mut hasher);
    context.tokens().hash(&mut hasher);
    for (source, message) in context.view_sources() {
        format!("{source:?}").hash(&mut hasher);
        if full {
            serde_json::to_string(message)
                .expect("message")
                .hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// A checkpoint's digest with its maps' keys sorted: the JSON as written
/// lists the pending calls in a random order, so only content can count.
fn checkpoint_digest(context: &Context) -> u64 {
    let raw = serde_json::to_string(&context.checkpoint()).expect("checkpoint");
    let canonical: serde_json::Value = serde_json::from_str(&raw).expect("json");
    let mut hasher = DefaultHasher::new();
    canonical.to_string().hash(&mut hasher);
    hasher.finish()
}

fn run(label: &str, config: Config, evictor: Arc<dyn Evictor>, names: Option<u64>, history: u64) {
    let mut context =
        Context::new(config, Arc::new(Estimate), tools()).with_evictor(Arc::clone(&evictor));
    context
        .push(Message::system("You are a coding agent."))
        .expect("system");
    let mut session = Session::new(0x5eed, names);
    let mut twin: Option<Context> = None;
    let (mut all, mut checkpoints) = (DefaultHasher::new(), 0u64);
    let (mut turns, mut passes, mut disagreements, mut task, mut grown) = (0usize, 0, 0, 0, 0u64);
    let size = |message: &Message| cwl::tokens::message_tokens(&Estimate, message) as u64;
    'run: loop {
        let (user, task_turns) = session.task(task % TASKS);
        task += 1;
        grown += size(&user);
        if let Some(twin) = twin.as_mut() {
            twin.push(user.clone()).expect("user");
        }
        context.push(user).expect("user");
        for turn in task_turns {
            grown += turn.results.iter().map(size).sum::<u64>() + size(&turn.reply);
            for result in turn.results {
                if let Some(twin) = twin.as_mut() {
                    twin.push(result.clone()).expect("result");
                }
                context.push(result).expect("result");
            }
            let report = context.enforce();
            let full = report.first_changed.is_some() || turns % 97 == 0;
            passes += usize::from(report.first_changed.is_some());
            let digest = turn_digest(&context, &report, full);
            digest.hash(&mut all);
            if let Some(twin) = twin.as_mut() {
                let report = twin.enforce();
                disagreements += usize::from(turn_digest(twin, &report, full) != digest);
                twin.push(turn.reply.clone()).expect("reply");
            }
            let outcomes = context.push(turn.reply).expect("reply");
            format!("{outcomes:?}").hash(&mut all);
            turns += 1;
            if turns % CHECKPOINT_EVERY == 0 {
                checkpoints = checkpoints.rotate_left(7) ^ checkpoint_digest(&context);
            }
            if turns == RESTORE_AT {
                let text = serde_json::to_string(&context.checkpoint()).expect("checkpoint");
                let checkpoint: Checkpoint = serde_json::from_str(&text).expect("checkpoint");
                twin = Some(
                    Context::restore(checkpoint, Arc::new(Estimate), Arc::clone(&evictor))
                        .expect("restore"),
                );
            }
            if grown >= history && task >= TASKS {
                break 'run;
            }
        }
    }
    println!(
        "{label}: {turns} turns, {passes} passes changed the view; digest {:016x}; checkpoints {checkpoints:016x}; restored twin disagreed on {disagreements} turns",
        all.finish()
    );
}

fn main() {
    let history: u64 = std::env::var("CWL_DIGEST_HISTORY")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(8_000_000);
    let paper: Arc<dyn Evictor> = Arc::new(PaperOrder);
    let oldest: Arc<dyn Evictor> = Arc::new(OldestFirst);
    let config = || Config::with_budget(BUDGET);
    run("defaults", config(), Arc::clone(&paper), None, history);
    run(
        "defaults, named",
        config(),
        Arc::clone(&paper),
        Some(7),
        history,
    );
    run(
        "paper, named",
        Config::paper(BUDGET),
        Arc::clone(&paper),
        Some(11),
        history,
    );
    run("oldest-first, named", config(), oldest, Some(13), history);
}
