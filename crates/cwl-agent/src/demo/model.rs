//! The demo model: a [`Provider`] that needs no network. It reads the
//! request (which task is current, what the last tool returned) and plays
//! the next step of that task's script.

use std::sync::{Arc, Mutex};

use cwl::{Block, Message, O200k, Usage};
use futures_util::future::BoxFuture;

use super::script::{self, Memory, TASKS, Turn};
use crate::agent::status::is_status;
use cwl_provider::{
    ModelInfo, Provider, ProviderError, Request, Response, StopReason, StreamEvent,
};

/// The demo model's name.
pub const MODEL: &str = "cwl-demo-scripted";

/// The demo model's table entry: a small window, free.
pub fn model_info() -> ModelInfo {
    ModelInfo {
        name: MODEL.to_string(),
        context_window: 16_000,
        max_output_tokens: Some(1_000),
        input_price: Some(0.0),
        cached_input_price: Some(0.0),
        cache_write_price: None,
        output_price: Some(0.0),
        cache_rules: None,
    }
}

#[derive(Debug, Default)]
struct State {
    task: Option<usize>,
    step: usize,
    memory: Memory,
}

/// The scripted model.
///
/// It reports as prompt tokens its own count of the request with the
/// workspace path replaced by a fixed placeholder, so the engine's
/// calibrated count, and with it every eviction, is the same whatever the
/// temporary directory is called.
#[derive(Debug, Clone, Default)]
pub struct DemoModel {
    state: Arc<Mutex<State>>,
    workspace: String,
}

impl DemoModel {
    /// A model at the start of its script, working in `workspace`.
    pub fn new(workspace: &std::path::Path) -> Self {
        DemoModel {
            state: Arc::default(),
            workspace: workspace.display().to_string(),
        }
    }

    /// Tokens of `message` with the workspace path replaced.
    fn tokens(&self, message: &Message) -> usize {
        let counter = O200k;
        match message {
            Message::System { content } if !self.workspace.is_empty() => {
                let fixed = Message::system(content.replace(&self.workspace, "/workspace"));
                cwl::tokens::message_tokens(&counter, &fixed)
            }
            other => cwl::tokens::message_tokens(&counter, other),
        }
    }

    fn reply(&self, request: &Request<'_>) -> Vec<Block> {
        let task_text = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User { content } if !is_status(m) => Some(content.as_str()),
                _ => None,
            })
            .unwrap_or("");
        let Some(task) = TASKS.iter().position(|t| *t == task_text) else {
            return vec![Block::Text {
                text: "I am the scripted demo model and only know the demo's tasks.".into(),
            }];
        };
        let last_result = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::ToolResult(result) => Some(result.content.as_str()),
                _ => None,
            })
            .unwrap_or("");
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.task != Some(task) {
            *state = State {
                task: Some(task),
                ..State::default()
            };
        }
        let step = state.step;
        state.step += 1;
        let mut turn = Turn::new(
            format!("call_{}_{step}", task + 1),
            last_result,
            &mut state.memory,
        );
        if script::step(task, step, &mut turn) {
            turn.finish()
        } else {
            vec![Block::Text {
                text: "Done.".into(),
            }]
        }
    }
}

impl Provider for DemoModel {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn stream<'a>(
        &'a self,
        request: &'a Request<'a>,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let content = self.reply(request);
            Ok(scripted_response(
                content,
                request,
                |m| self.tokens(m),
                on_event,
            ))
        })
    }
}

/// A scripted model's reply as a provider returns it: its blocks told as
/// stream events (text by words), the usage of `request` with each message
/// counted by `count` (o200k counts) and the stop reason its calls give.
pub(crate) fn scripted_response(
    content: Vec<Block>,
    request: &Request<'_>,
    count: impl Fn(&Message) -> usize,
    on_event: &mut (dyn FnMut(StreamEvent) + Send),
) -> Response {
    let input = request.messages.iter().map(count).sum::<usize>()
        + cwl::tokens::tools_tokens(&O200k, request.tools);
    for block in &content {
        match block {
            Block::Text { text } => {
                for piece in text.split_inclusive(' ') {
                    on_event(StreamEvent::TextDelta(piece.to_string()));
                }
            }
            Block::Reasoning { text, .. } => on_event(StreamEvent::ReasoningDelta(text.clone())),
            Block::ToolCall(call) => on_event(StreamEvent::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
            }),
        }
    }
    let output: usize = content
        .iter()
        .map(|b| cwl::tokens::block_tokens(&O200k, b))
        .sum();
    let calls = content.iter().any(|b| matches!(b, Block::ToolCall(_)));
    Response {
        message: Message::Assistant { content },
        usage: Usage {
            input_tokens: input as u64,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
            output_tokens: output as u64,
        },
        stop_reason: if calls {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        },
        attempts: 1,
    }
}
