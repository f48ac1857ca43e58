//! Sub-agent delegation (the context-window manager's fifth compression
//! strategy): under `--strategy cwm` the model may hand a self-contained
//! exploration subtask to a child run with a fresh context window of its
//! own (a new cwm, evicting under the same budget). The child may only
//! read (`read`, `grep`, `glob`, `ls`), so it never needs approval; its
//! final answer, cut to [`MAX_SUMMARY_CHARS`], is the `delegate` call's
//! result and everything else it saw is dropped. The result is recorded
//! like any tool result, so a resume never runs the child again.
//!
//! The child's model calls are the run's too: what they used is summed
//! into a [`ChildUsage`] call by call (so a child that fails or is
//! interrupted still counts what it spent), added to the run's totals,
//! told as an [`Event::Delegated`] and recorded as the `usage` and
//! `cost_usd` of the `delegate` call's result in the session file, once.

use std::sync::Arc;

use cwl::{Block, Config, Message, O200k, Strategy, ToolCall, ToolSpec, Usage};
use cwl_cwm::Cwm;
use serde::Serialize;
use serde_json::json;

use super::{Agent, Event};
use crate::tools::{ExecContext, Toolbox};
use cwl_provider::{ModelInfo, Provider, Request};

/// The tool's name.
pub use cwl_session::DELEGATE;

/// The tools a child may call.
pub const READ_ONLY: [&str; 4] = ["read", "grep", "glob", "ls"];

/// Model calls a child may take before it is stopped.
pub const MAX_CHILD_TURNS: usize = 20;

/// The longest summary a child hands back, in characters (about 2K
/// tokens, the document's condensed summary).
pub const MAX_SUMMARY_CHARS: usize = 8_000;

/// The child's system prompt.
pub const CHILD_SYSTEM: &str = "You are a sub-agent with a fresh context window, given one self-contained exploration task by another agent. Use the read-only tools (read, grep, glob, ls) to find what the task asks, then answer with a condensed summary of your findings: paths, names, line numbers, numbers and conclusions the other agent needs, nothing else. Your whole context is discarded once you answer.";

/// The `delegate` tool offered under the cwm strategy.
pub fn delegate_spec() -> ToolSpec {
    ToolSpec {
        name: DELEGATE.to_string(),
        description: "Hand a self-contained exploration subtask (say it in one or two sentences) to a sub-agent with a fresh context window of its own. It reads, searches and lists files (no writes, no commands) and returns a condensed summary of its findings; its exploration never enters your context. Worth it for searches that would take ten or more tool calls.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "what to find out, self-contained"}
            },
            "required": ["task"],
            "additionalProperties": false
        }),
    }
}

/// The task of a `delegate` call's arguments, or why there is none.
pub fn task(arguments: &str) -> Result<String, String> {
    let value: serde_json::Value = serde_json::from_str(arguments)
        .map_err(|e| format!("delegate: the arguments are not JSON: {e}"))?;
    value
        .get("task")
        .and_then(|t| t.as_str())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .ok_or_else(|| "delegate: give the subtask as a non-empty `task` string".to_string())
}

/// What one child's model calls used, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ChildUsage {
    /// Model calls that answered.
    pub requests: usize,
    /// Their usage, summed.
    pub usage: Usage,
    /// Their cost in US dollars (`None`: the model has no prices).
    pub cost_usd: Option<f64>,
}

impl ChildUsage {
    /// Books one answered call that used `usage`, priced by `model`.
    pub fn add(&mut self, model: &ModelInfo, usage: &Usage) {
        self.requests += 1;
        self.usage.input_tokens += usage.input_tokens;
        self.usage.cached_input_tokens += usage.cached_input_tokens;
        self.usage.cache_write_tokens += usage.cache_write_tokens;
        self.usage.output_tokens += usage.output_tokens;
        if let Some(cost) = model.cost(usage) {
            *self.cost_usd.get_or_insert(0.0) += cost;
        }
    }
}

/// Runs a child on `task` with its own window of `budget` tokens, booking
/// each answered call in `spent`: the summary it answers with and the
/// model calls it took, or why it failed.
pub async fn run_child(
    provider: &dyn Provider,
    model: &ModelInfo,
    toolbox: &Toolbox,
    budget: usize,
    task: &str,
    spent: &mut ChildUsage,
) -> Result<(String, usize), String> {
    let tools: Vec<ToolSpec> = toolbox
        .specs()
        .into_iter()
        .filter(|spec| READ_ONLY.contains(&spec.name.as_str()))
        .collect();
    let mut window = Cwm::new(Config::with_budget(budget), Arc::new(O200k), tools);
    let push = |window: &mut Cwm, message: Message| {
        window
            .push(message)
            .map(|_| ())
            .map_err(|e| format!("the sub-agent sent an invalid message: {e}"))
    };
    push(&mut window, Message::system(CHILD_SYSTEM))?;
    push(&mut window, Message::user(task))?;
    for turn in 1..=MAX_CHILD_TURNS {
        window.enforce();
        let messages: Vec<Message> = window.view().cloned().collect();
        let request = Request {
            model: &model.name,
            messages: &messages,
            tools: window.tools(),
            max_output_tokens: None,
            cache_breakpoint: None,
            reasoning: None,
        };
        let response = provider
            .complete(&request)
            .await
            .map_err(|e| format!("the sub-agent's model call failed: {e}"))?;
        spent.add(model, &response.usage);
        let Message::Assistant { content } = response.message else {
            return Err("the sub-agent sent no answer".to_string());
        };
        let content: Vec<Block> = content
            .into_iter()
            .filter(|b| !matches!(b, Block::Text { text } if text.trim().is_empty()))
            .collect();
        let calls: Vec<ToolCall> = content
            .iter()
            .filter_map(|b| match b {
                Block::ToolCall(call) => Some(call.clone()),
                _ => None,
            })
            .collect();
        if calls.is_empty() {
            let answer: String = content
                .iter()
                .filter_map(|b| match b {
                    Block::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            if answer.trim().is_empty() {
                return Err("the sub-agent answered with nothing".to_string());
            }
            return Ok((cut(&answer), turn));
        }
        push(&mut window, Message::Assistant { content })?;
        for call in calls {
            let output = if READ_ONLY.contains(&call.name.as_str()) {
                toolbox.execute(&call, &ExecContext::default()).await
            } else {
                crate::tools::ToolOutput::error(format!(
                    "a sub-agent may only call {}",
                    READ_ONLY.join(", ")
                ))
            };
            push(
                &mut window,
                Message::tool_result(&call.id, &call.name, output.content, output.is_error),
            )?;
        }
    }
    Err(format!(
        "the sub-agent took {MAX_CHILD_TURNS} model calls without answering"
    ))
}

impl Agent {
    /// Books what a child spent: into the run's totals and its delegated
    /// share, and as an [`Event::Delegated`] for call `call_id`.
    pub(super) fn book_delegated(&mut self, call_id: &str, spent: &ChildUsage) {
        let usage = &spent.usage;
        let stats = &mut self.stats;
        stats.input_tokens += usage.input_tokens;
        stats.cached_input_tokens += usage.cached_input_tokens;
        stats.output_tokens += usage.output_tokens;
        if let Some(cost) = spent.cost_usd {
            *stats.cost_usd.get_or_insert(0.0) += cost;
            *stats.delegated.cost_usd.get_or_insert(0.0) += cost;
        }
        let delegated = &mut stats.delegated;
        delegated.runs += 1;
        delegated.requests += spent.requests;
        delegated.input_tokens += usage.input_tokens;
        delegated.cached_input_tokens += usage.cached_input_tokens;
        delegated.output_tokens += usage.output_tokens;
        self.observer.event(&Event::Delegated {
            id: call_id.to_string(),
            requests: spent.requests,
            usage: spent.usage,
            cost_usd: spent.cost_usd,
        });
    }
}

/// `text` cut to [`MAX_SUMMARY_CHARS`], saying so.
fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_SUMMARY_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().take(MAX_SUMMARY_CHARS).collect();
    format!("{kept}\n[the sub-agent's answer was cut at {MAX_SUMMARY_CHARS} characters]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_read_from_the_arguments() {
        assert_eq!(
            task(r#"{"task":" find the parser "}"#),
            Ok("find the parser".into())
        );
        assert!(
            task(r#"{"task":""}"#)
                .unwrap_err()
                .contains("non-empty `task`")
        );
        assert!(task("nope").unwrap_err().contains("not JSON"));
        let long = "x".repeat(MAX_SUMMARY_CHARS + 10);
        assert!(cut(&long).ends_with("cut at 8000 characters]"));
        assert_eq!(cut("short"), "short");
    }
}
