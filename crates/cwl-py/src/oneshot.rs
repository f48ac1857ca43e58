//! `evict()`: one pass over a whole transcript in any shape, as
//! `cwl evict` runs it ([`cwl::evict`]), with inferred episodes on request.

use std::sync::Arc;

use cwl::{Config, EvictError, Message, Report, TokenCounter, ToolSpec};
use serde_json::Value;

use crate::core::Episodes;
use crate::shapes::{self, Names, Part, Shape};

/// The view after the pass, in the input's shape, and the pass's report.
#[derive(Debug)]
pub struct Evicted {
    /// The view, as engine messages.
    pub messages: Vec<Message>,
    /// What the pass did.
    pub report: Report,
    /// The shape the input was read in.
    pub shape: Shape,
}

/// Reads `values` (in `shape`, or the shape the first telling message
/// is in) and runs one pass over them.
pub fn evict(
    values: &[Value],
    tools: Vec<ToolSpec>,
    config: Config,
    counter: Arc<dyn TokenCounter>,
    episodes: Episodes,
    shape: Option<Shape>,
) -> Result<Evicted, String> {
    let shape = shape
        .or_else(|| values.iter().find_map(shapes::detect))
        .unwrap_or(Shape::Chat);
    let (messages, origins) = read(values, shape)?;
    let mut inferrer = episodes.inferrer();
    let mut annotate = |message: &Message| {
        inferrer
            .as_mut()
            .map(|inferrer| inferrer.before(message))
            .unwrap_or_default()
    };
    let evicted = cwl::evict_annotated(messages, tools, config, counter, &mut annotate)
        .map_err(|error| located(error, &origins))?;
    Ok(Evicted {
        messages: evicted.messages,
        report: evicted.report,
        shape,
    })
}

/// The engine messages of `values`, and for each the index of the value
/// it came from.
fn read(values: &[Value], shape: Shape) -> Result<(Vec<Message>, Vec<usize>), String> {
    let mut names = Names::new();
    let mut messages = Vec::with_capacity(values.len());
    let mut origins = Vec::with_capacity(values.len());
    let mut gathering: Option<(usize, Vec<cwl::Block>)> = None;
    for (index, value) in values.iter().enumerate() {
        let parts = shapes::parse(shape, value, &mut names)
            .map_err(|error| format!("messages[{index}]: {error}"))?;
        for part in parts {
            match part {
                Part::Assistant(blocks) => {
                    gathering
                        .get_or_insert_with(|| (index, Vec::new()))
                        .1
                        .extend(blocks);
                }
                Part::Message(message) => {
                    if let Some((at, content)) = gathering.take() {
                        messages.push(Message::Assistant { content });
                        origins.push(at);
                    }
                    messages.push(message);
                    origins.push(index);
                }
            }
        }
    }
    if let Some((at, content)) = gathering {
        messages.push(Message::Assistant { content });
        origins.push(at);
    }
    Ok((messages, origins))
}

/// The engine's error, naming the input message rather than the engine's.
fn located(error: EvictError, origins: &[usize]) -> String {
    let at = |index: usize| origins.get(index).copied().unwrap_or(index);
    match error {
        EvictError::Message { index, source } => format!("messages[{}]: {source}", at(index)),
        EvictError::MissingResult { index, call_id } => format!(
            "messages[{}]: tool call `{call_id}` has no tool result",
            at(index)
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_without_its_result_names_the_input_message() {
        let values = [
            json!({"role": "user", "content": "go"}),
            json!({"type": "function_call", "call_id": "a", "name": "ls", "arguments": "{}"}),
        ];
        let error = evict(
            &values,
            Vec::new(),
            Config::with_budget(1_000),
            Arc::new(cwl::Estimate),
            Episodes::Delimiter,
            None,
        )
        .unwrap_err();
        assert_eq!(error, "messages[1]: tool call `a` has no tool result");
    }

    #[test]
    fn inferred_episodes_let_a_transcript_without_delimiter_calls_be_evicted() {
        let mut values = vec![json!({"role": "user", "content": "read everything"})];
        for k in 0..40 {
            let id = format!("c{k}");
            values.push(json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "read_file", "arguments": format!("{{\"path\":\"f{k}.rs\"}}")}}]}));
            values.push(json!({"role": "tool", "tool_call_id": id, "content": "x ".repeat(400)}));
        }
        let run = |episodes| {
            evict(
                &values,
                Vec::new(),
                Config::with_budget(4_000),
                Arc::new(cwl::Estimate),
                episodes,
                None,
            )
            .unwrap()
        };
        let plain = run(Episodes::Delimiter);
        assert!(!plain.report.budget_met, "no episode, nothing may go");
        let inferred = run(Episodes::Inferred);
        assert!(inferred.report.budget_met && inferred.report.evicted());
        assert!(inferred.messages.len() < plain.messages.len());
    }
}
