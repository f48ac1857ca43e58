//! What makes a request valid for every provider, checked.

use std::collections::HashSet;
use std::sync::Arc;

use cwl::Message;

use crate::transcript::Entry;

/// Why a request is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// A tool result not directly after the assistant message holding its call.
    #[error(
        "message {index}: tool result for `{call_id}` does not follow the assistant message holding its call"
    )]
    OrphanResult {
        /// Position in the request.
        index: usize,
        /// The result's call id.
        call_id: String,
    },
    /// A tool call whose result does not follow it.
    #[error("message {index}: tool call `{call_id}` has no result after it")]
    MissingResult {
        /// Position of the assistant message.
        index: usize,
        /// The call's id.
        call_id: String,
    },
    /// An assistant message with no content.
    #[error("message {index}: assistant message is empty")]
    EmptyAssistant {
        /// Position in the request.
        index: usize,
    },
}

/// Checks that every tool result directly follows (with its siblings) the
/// assistant message holding its call, every call has its result, and no
/// assistant message is empty.
pub fn validate<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Result<(), ViewError> {
    let mut waiting: Vec<String> = Vec::new();
    let mut waiting_index = 0;
    let mut answered: HashSet<String> = HashSet::new();
    for (index, message) in messages.into_iter().enumerate() {
        match message {
            Message::ToolResult(result) => {
                let pos = waiting.iter().position(|id| *id == result.call_id);
                match pos {
                    Some(pos) if !answered.contains(&result.call_id) => {
                        answered.insert(waiting.remove(pos));
                    }
                    _ => {
                        return Err(ViewError::OrphanResult {
                            index,
                            call_id: result.call_id.clone(),
                        });
                    }
                }
            }
            other => {
                if let Some(call_id) = waiting.first() {
                    return Err(ViewError::MissingResult {
                        index: waiting_index,
                        call_id: call_id.clone(),
                    });
                }
                answered.clear();
                if let Message::Assistant { content } = other {
                    if content.is_empty() {
                        return Err(ViewError::EmptyAssistant { index });
                    }
                    waiting = other.tool_calls().map(|c| c.id.clone()).collect();
                    waiting_index = index;
                }
            }
        }
    }
    match waiting.first() {
        Some(call_id) => Err(ViewError::MissingResult {
            index: waiting_index,
            call_id: call_id.clone(),
        }),
        None => Ok(()),
    }
}

/// [`validate`] over entries.
pub fn validate_entries(entries: &[Arc<Entry>]) -> Result<(), ViewError> {
    validate(entries.iter().map(|e| e.message()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Block, ToolCall};

    fn calls(ids: &[&str]) -> Message {
        Message::Assistant {
            content: ids
                .iter()
                .map(|id| Block::ToolCall(ToolCall::new(*id, "read", "{}")))
                .collect(),
        }
    }

    fn result(id: &str) -> Message {
        Message::tool_result(id, "read", "x", false)
    }

    #[test]
    fn accepts_valid_requests() {
        let ok = [
            Message::system("s"),
            Message::user("u"),
            calls(&["a", "b"]),
            result("b"),
            result("a"),
            Message::assistant_text("done"),
            Message::user("next"),
        ];
        assert_eq!(validate(&ok), Ok(()));
    }

    #[test]
    fn rejects_orphans_missing_results_and_empty_messages() {
        assert!(matches!(
            validate(&[Message::user("u"), result("a")]),
            Err(ViewError::OrphanResult { index: 1, .. })
        ));
        assert!(matches!(
            validate(&[calls(&["a"]), Message::user("u"), result("a")]),
            Err(ViewError::MissingResult { index: 0, .. })
        ));
        assert!(matches!(
            validate(&[calls(&["a"])]),
            Err(ViewError::MissingResult { .. })
        ));
        assert!(matches!(
            validate(&[calls(&["a"]), result("a"), result("a")]),
            Err(ViewError::OrphanResult { index: 2, .. })
        ));
        assert!(matches!(
            validate(&[Message::Assistant { content: vec![] }]),
            Err(ViewError::EmptyAssistant { index: 0 })
        ));
    }
}
