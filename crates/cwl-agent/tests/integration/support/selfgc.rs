//! Helpers for the Self-GC tests: options, planner answers and the
//! planner's calls told apart from the main loop's.

use std::time::Duration;

use cwl::{Message, Usage};
use cwl_agent::agent::AgentOptions;
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_session::strategy::StrategyName;

/// A phrase of the planner contract: how a request is told to be the
/// planner's.
pub const PLANNER: &str = "context garbage collector";

/// Agent options under `--strategy self-gc` with a short planner timeout.
pub fn selfgc_options(budget: usize, side_timeout: Duration) -> AgentOptions {
    let mut options = super::options(budget);
    options.strategy = Some(StrategyName::SelfGc);
    options.side_timeout = side_timeout;
    options
}

/// A planner answer folding reads `1..=last`, whatever is shown
/// (rehearsal drops what does not exist yet, the latest turn and what is
/// folded).
pub fn fold_reads(last: usize) -> Reply {
    let ids: Vec<String> = (1..=last).map(|n| format!("read:{n}")).collect();
    let plan = format!(
        "<above_conversation_summary>A code survey; later turns may quote the reads.</above_conversation_summary>\n<gc_plan>\n<fold kind=\"function\" reason=\"stable_artifact\">\n{}\n</fold>\n</gc_plan>",
        ids.join("\n")
    );
    Reply::openai(&Message::assistant_text(plan), Usage::default())
}

/// Answers planner calls with `replies`, in order (HTTP 400 once they
/// run out); other requests follow the script.
pub fn planner_answers(server: &ScriptedServer, replies: impl IntoIterator<Item = Reply>) {
    let queue = std::sync::Mutex::new(
        replies
            .into_iter()
            .collect::<std::collections::VecDeque<_>>(),
    );
    server.answer_side(move |request| {
        request.body.contains(PLANNER).then(|| {
            queue.lock().unwrap().pop_front().unwrap_or_else(|| {
                Reply::status(400, r#"{"error":{"message":"no planner reply left"}}"#)
            })
        })
    });
}
