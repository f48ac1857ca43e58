//! What to tell the user after a task failed: how to continue, and when
//! resuming as is would fail the same way.

use crate::agent::status::human_tokens;
use crate::agent::{Agent, AgentError};

/// The advice after `error` stopped a task of `agent`'s session; `command`
/// is the one to continue with (`cwl run` or `cwl chat`).
pub fn after_failure(error: &AgentError, agent: &Agent, command: &str) -> String {
    let id = agent.session_id();
    match error {
        AgentError::WindowExceeded { tokens, limit } => {
            let options = agent.options();
            if agent.context().tokens() <= options.engine_budget() {
                // The view met its budget, yet the request did not fit: the
                // budget sits too close to the window, or the status block is
                // large.
                let lower = options
                    .budget
                    .min(options.hard_limit())
                    .saturating_sub(tokens.saturating_sub(*limit) * 2);
                format!(
                    "resuming this session as it is would stop the same way: the request passes \
                     the window although the conversation is within its budget ({}). Continue \
                     with a lower budget so more is evicted (`{command} --resume {id} --budget {}`), \
                     with a model whose window is larger (`--model NAME`), or start a new session",
                    human_tokens(options.budget),
                    human_tokens(lower.max(1)),
                )
            } else {
                format!(
                    "resuming this session as it is would stop the same way: what cannot be \
                     evicted (the open episode, the task texts) already needs {} of the {} \
                     the window allows. Start a new session (`{command}` without --resume) and \
                     give large content as a file the agent reads in parts, or resume with a \
                     model whose window is larger (`{command} --resume {id} --model NAME`)",
                    human_tokens(*tokens),
                    human_tokens(*limit),
                )
            }
        }
        AgentError::BudgetTooSmall { .. } => format!(
            "the session is saved; continue it with a larger budget: `{command} --resume {id} --budget 80k`"
        ),
        _ => format!("the session is saved; continue it with `{command} --resume {id}`"),
    }
}
