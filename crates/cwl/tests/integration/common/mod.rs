//! A small transcript builder for the engine's tests.
#![allow(dead_code)]

use std::sync::Arc;

use cwl::{Block, Config, Context, Estimate, Message, TokenCounter, ToolCall};
use serde_json::json;

/// Builds transcripts with unique call ids.
#[derive(Default)]
pub struct Script {
    pub messages: Vec<Message>,
    next: usize,
}

impl Script {
    pub fn new() -> Self {
        Script::default()
    }

    fn id(&mut self) -> String {
        self.next += 1;
        format!("call_{}", self.next)
    }

    pub fn system(&mut self, text: &str) -> &mut Self {
        self.messages.push(Message::system(text));
        self
    }

    pub fn user(&mut self, text: &str) -> &mut Self {
        self.messages.push(Message::user(text));
        self
    }

    pub fn say(&mut self, text: &str) -> &mut Self {
        self.messages.push(Message::assistant_text(text));
        self
    }

    /// An assistant message with a reasoning block and a tool call, then its result.
    pub fn tool_with_reasoning(&mut self, reasoning: &str, tool: &str, output: &str) -> &mut Self {
        let id = self.id();
        self.messages.push(Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: reasoning.into(),
                    signature: None,
                },
                Block::ToolCall(ToolCall::new(&id, tool, json!({"q": tool}).to_string())),
            ],
        });
        self.messages
            .push(Message::tool_result(&id, tool, output, false));
        self
    }

    /// A tool call and its result.
    pub fn tool(&mut self, tool: &str, output: &str) -> &mut Self {
        let id = self.id();
        self.messages.push(Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new(
                &id,
                tool,
                json!({"q": tool}).to_string(),
            ))],
        });
        self.messages
            .push(Message::tool_result(&id, tool, output, false));
        self
    }

    /// A delimiter call with raw arguments, and an acknowledging result.
    pub fn delimiter(&mut self, arguments: serde_json::Value) -> &mut Self {
        let id = self.id();
        self.messages.push(Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new(
                &id,
                "delimiter",
                arguments.to_string(),
            ))],
        });
        self.messages
            .push(Message::tool_result(&id, "delimiter", "ok", false));
        self
    }

    pub fn start_expl(&mut self, name: &str) -> &mut Self {
        self.delimiter(json!({"action": "start", "name": name, "type": "expl"}))
    }

    pub fn start_act(&mut self, name: &str, deps: &[&str]) -> &mut Self {
        self.delimiter(
            json!({"action": "start", "name": name, "type": "act", "dependencies": deps}),
        )
    }

    pub fn end_expl(&mut self, description: &str) -> &mut Self {
        self.delimiter(json!({"action": "end", "description": description}))
    }

    pub fn end_act(&mut self) -> &mut Self {
        self.delimiter(json!({"action": "end"}))
    }

    pub fn build(&self) -> Vec<Message> {
        self.messages.clone()
    }
}

pub fn counter() -> Arc<dyn TokenCounter> {
    Arc::new(Estimate)
}

/// A context holding `messages`, with the given budget.
pub fn context(messages: &[Message], budget: usize) -> Context {
    let mut context = Context::new(Config::paper(budget), counter(), Vec::new());
    for message in messages {
        context.push(message.clone()).expect("valid transcript");
    }
    context
}

/// A text of about `tokens` tokens under the estimator.
pub fn bulk(tokens: usize) -> String {
    "x".repeat(tokens * 4)
}

/// Whether the messages form a valid request: every tool result directly
/// follows (within the run of results) the assistant message that called it,
/// every call has exactly one result, no assistant message is empty.
pub fn validate(messages: &[Message]) -> Result<(), String> {
    let mut waiting: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        match message {
            Message::ToolResult(result) => {
                let Some(at) = waiting.iter().position(|id| *id == result.call_id) else {
                    return Err(format!("message {index}: orphan result {}", result.call_id));
                };
                waiting.remove(at);
            }
            other => {
                if !waiting.is_empty() {
                    return Err(format!("message {index}: calls {waiting:?} have no result"));
                }
                if let Message::Assistant { content } = other {
                    if content.is_empty() {
                        return Err(format!("message {index}: empty assistant message"));
                    }
                    waiting = other.tool_calls().map(|call| call.id.clone()).collect();
                }
            }
        }
    }
    if waiting.is_empty() {
        Ok(())
    } else {
        Err(format!("calls {waiting:?} have no result at the end"))
    }
}

/// The prompt tokens of a view counted from scratch.
pub fn recount(context: &Context) -> usize {
    let counter = Estimate;
    context
        .view()
        .map(|message| cwl::tokens::message_tokens(&counter, message))
        .sum::<usize>()
        + context.tools_tokens()
}

/// Whether a view contains a tool result with this content.
pub fn has_output(messages: &[Message], output: &str) -> bool {
    messages
        .iter()
        .any(|message| matches!(message, Message::ToolResult(result) if result.content == output))
}

/// All texts of assistant messages in a view.
pub fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|message| match message {
            Message::Assistant { content } => content
                .iter()
                .filter_map(|block| match block {
                    Block::Text { text } => Some(text.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}
