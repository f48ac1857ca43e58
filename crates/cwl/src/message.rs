//! The provider-neutral transcript model.
//!
//! Every harness, importer and provider speaks in these types; the engine
//! never sees a provider's wire format. Serialization uses an internal,
//! stable shape (see [`crate::openai`] for the OpenAI interchange shape).

use serde::{Deserialize, Serialize};

/// One message of a transcript.
///
/// Exhaustive on purpose, like [`Block`]: every harness and importer must
/// place every kind of content, so a new kind is a breaking change that
/// each of them has to handle, never one a wildcard arm drops unseen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions from the harness; part of the protected prologue.
    System {
        /// The prompt text.
        content: String,
    },
    /// A turn written by the human. Never evicted.
    User {
        /// The turn's text.
        content: String,
    },
    /// A model response: text, reasoning and tool calls, in order.
    Assistant {
        /// The response's blocks, in the order the model produced them.
        content: Vec<Block>,
    },
    /// The result of one tool call.
    ToolResult(ToolResult),
}

/// One block of an assistant message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Visible text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning (chain of thought), kept with any opaque provider signature.
    Reasoning {
        /// The reasoning text (may be empty when only a signature exists).
        text: String,
        /// Opaque provider data that must be sent back unchanged
        /// (e.g. an Anthropic thinking signature).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A request to run a tool.
    ToolCall(ToolCall),
}

/// A tool call as the model emitted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id, kept exactly as sent.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as raw JSON text, kept byte for byte (models sometimes
    /// emit invalid JSON; the tool reports that, the transcript keeps it).
    pub arguments: String,
}

/// The result of a tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The name of the tool that ran.
    pub tool_name: String,
    /// The output shown to the model.
    pub content: String,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// A tool definition offered to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

impl Message {
    /// The message with every text emptied and every call's arguments
    /// dropped, `delimiter` calls kept whole: all a shadow [`crate::Context`]
    /// needs to answer the protocol, pair calls and keep the episode graph
    /// of a transcript another strategy manages.
    pub fn skeleton(&self) -> Message {
        match self {
            Message::System { .. } => Message::system(""),
            Message::User { .. } => Message::user(""),
            Message::Assistant { content } => Message::Assistant {
                content: content
                    .iter()
                    .map(|block| match block {
                        Block::ToolCall(call) if call.name == crate::DELIMITER => block.clone(),
                        Block::ToolCall(call) => {
                            Block::ToolCall(ToolCall::new(&call.id, &call.name, "{}"))
                        }
                        Block::Text { .. } => Block::Text {
                            text: String::new(),
                        },
                        Block::Reasoning { .. } => Block::Reasoning {
                            text: String::new(),
                            signature: None,
                        },
                    })
                    .collect(),
            },
            Message::ToolResult(result) => {
                Message::tool_result(&result.call_id, &result.tool_name, "", result.is_error)
            }
        }
    }

    /// The message without its reasoning blocks: what a provider that
    /// drops an earlier turn's reasoning shows of it
    /// ([`crate::ReasoningScope`]).
    pub fn without_reasoning(&self) -> Message {
        match self {
            Message::Assistant { content } => Message::Assistant {
                content: content
                    .iter()
                    .filter(|block| !matches!(block, Block::Reasoning { .. }))
                    .cloned()
                    .collect(),
            },
            other => other.clone(),
        }
    }

    /// Whether it is an assistant message with nothing but reasoning, or
    /// nothing at all (no valid request holds one).
    pub fn is_reasoning_only(&self) -> bool {
        matches!(self, Message::Assistant { content }
            if content.iter().all(|block| matches!(block, Block::Reasoning { .. })))
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// An assistant message made of one text block.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Message::Assistant {
            content: vec![Block::Text { text: text.into() }],
        }
    }

    /// A tool result message.
    pub fn tool_result(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Message::ToolResult(ToolResult {
            call_id: call_id.into(),
            tool_name: tool_name.into(),
            content: content.into(),
            is_error,
        })
    }

    /// The tool calls of an assistant message (empty for other roles).
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        let blocks: &[Block] = match self {
            Message::Assistant { content } => content,
            _ => &[],
        };
        blocks.iter().filter_map(|b| match b {
            Block::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The role name, as used in error messages and reports.
    pub fn role(&self) -> &'static str {
        match self {
            Message::System { .. } => "system",
            Message::User { .. } => "user",
            Message::Assistant { .. } => "assistant",
            Message::ToolResult(_) => "tool",
        }
    }
}

impl ToolCall {
    /// A tool call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}
