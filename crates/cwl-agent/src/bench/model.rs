//! The bench's scripted model: solves each built-in task in three replies
//! (read the module in an expl episode, edit it in an act episode that
//! depends on the read, answer), working out where it is from the request
//! alone, so it serves one long session and fresh ones alike.

use cwl::{Annotation, Block, DELIMITER, EpisodeKind, Message, O200k, ToolCall};
use futures_util::future::BoxFuture;
use serde_json::json;

use super::suite::parse_builtin;
use crate::agent::status::is_status;
use crate::demo::scripted_response;
use cwl_provider::{ModelInfo, Provider, ProviderError, Request, Response, StreamEvent};

/// The scripted model's name.
pub const MODEL: &str = "cwl-bench-scripted";

/// Its table entry: a 32k window, priced like a small hosted model so the
/// report's costs mean something.
pub fn model_info() -> ModelInfo {
    ModelInfo {
        name: MODEL.to_string(),
        context_window: 32_000,
        max_output_tokens: Some(1_000),
        input_price: Some(1.0),
        cached_input_price: Some(0.1),
        cache_write_price: None,
        output_price: Some(4.0),
        cache_rules: None,
    }
}

/// The scripted model (stateless: each reply follows from the request).
#[derive(Debug, Clone, Copy, Default)]
pub struct BenchModel;

impl BenchModel {
    fn reply(request: &Request<'_>) -> Vec<Block> {
        let task = request
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }) && !is_status(m));
        let Some((at, Message::User { content })) = task.map(|at| (at, &request.messages[at]))
        else {
            return text("There is no task.");
        };
        let Some((path, from, to)) = parse_builtin(content) else {
            return text(
                "I am the scripted bench model and only solve the built-in suite's tasks.",
            );
        };
        let step = request.messages[at..]
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let stem = path.trim_start_matches("src/").trim_end_matches(".py");
        let (read, fix) = (format!("read-{stem}"), format!("fix-{stem}"));
        let id = |n: usize| format!("call_{stem}_{step}_{n}");
        match step {
            0 => vec![
                delimiter(id(0), start(&read, EpisodeKind::Expl, &[])),
                call(id(1), "read", json!({ "path": path })),
            ],
            1 => vec![
                delimiter(
                    id(0),
                    Annotation::End {
                        name: None,
                        description: Some(format!("{path}: value returns {from}")),
                    },
                ),
                delimiter(id(1), start(&fix, EpisodeKind::Act, &[&read])),
                call(
                    id(2),
                    "edit",
                    json!({
                        "path": path,
                        "old_text": format!("    return {from}\n"),
                        "new_text": format!("    return {to}\n"),
                    }),
                ),
            ],
            2 => vec![delimiter(
                id(0),
                Annotation::End {
                    name: None,
                    description: None,
                },
            )],
            _ => text(&format!("Done: {path} now returns {to}.")),
        }
    }
}

fn text(text: &str) -> Vec<Block> {
    vec![Block::Text {
        text: text.to_string(),
    }]
}

fn start(name: &str, kind: EpisodeKind, dependencies: &[&str]) -> Annotation {
    Annotation::Start {
        name: name.to_string(),
        kind,
        dependencies: dependencies.iter().map(|d| d.to_string()).collect(),
    }
}

fn delimiter(id: String, annotation: Annotation) -> Block {
    Block::ToolCall(ToolCall::new(id, DELIMITER, annotation.to_arguments()))
}

fn call(id: String, name: &str, arguments: serde_json::Value) -> Block {
    Block::ToolCall(ToolCall::new(id, name, arguments.to_string()))
}

impl Provider for BenchModel {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn stream<'a>(
        &'a self,
        request: &'a Request<'a>,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let count = |m: &Message| cwl::tokens::message_tokens(&O200k, m);
            Ok(scripted_response(
                Self::reply(request),
                request,
                count,
                on_event,
            ))
        })
    }
}
