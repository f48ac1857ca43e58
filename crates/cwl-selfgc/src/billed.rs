//! Tokens as the provider bills them.
//!
//! Under [`ReasoningScope::CurrentTurn`] the provider drops the reasoning
//! blocks of every assistant message before the latest user message: the
//! view still sends them, but they are neither shown nor billed, so the
//! budget arithmetic does not count them. Under
//! [`ReasoningScope::AllTurns`] every message counts in full.

use cwl::tokens::{MESSAGE_OVERHEAD, block_tokens, message_tokens};
use cwl::{Block, Message, ReasoningScope, TokenCounter};

/// Tokens of `message` as billed: when `stale` (before the latest user
/// message under [`ReasoningScope::CurrentTurn`]) an assistant message
/// counts as `message_tokens(&message.without_reasoning())`, without
/// cloning it.
pub(crate) fn message_billed(counter: &dyn TokenCounter, message: &Message, stale: bool) -> usize {
    match message {
        Message::Assistant { content } if stale => {
            MESSAGE_OVERHEAD
                + content
                    .iter()
                    .filter(|block| !matches!(block, Block::Reasoning { .. }))
                    .map(|block| block_tokens(counter, block))
                    .sum::<usize>()
        }
        _ => message_tokens(counter, message),
    }
}

/// Tokens of `messages` (a request, in order) as a provider of `scope`
/// bills them.
pub(crate) fn billed_tokens(
    counter: &dyn TokenCounter,
    messages: &[Message],
    scope: ReasoningScope,
) -> usize {
    let start = scope.turn_start(messages);
    messages
        .iter()
        .enumerate()
        .map(|(at, message)| message_billed(counter, message, at < start))
        .sum()
}

#[cfg(test)]
mod tests {
    use cwl::{Estimate, ToolCall};

    use super::*;

    fn thought(text: &str) -> Message {
        Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "thinking hard about it ".repeat(20),
                    signature: Some("sig".repeat(10)),
                },
                Block::Text {
                    text: text.to_string(),
                },
                Block::ToolCall(ToolCall::new("c", "read", "{}")),
            ],
        }
    }

    #[test]
    fn earlier_turns_count_without_their_reasoning() {
        let messages = vec![
            Message::system("system"),
            Message::user("one"),
            thought("first"),
            Message::user("two"),
            thought("second"),
        ];
        let full: usize = messages.iter().map(|m| message_tokens(&Estimate, m)).sum();
        assert_eq!(
            billed_tokens(&Estimate, &messages, ReasoningScope::AllTurns),
            full
        );
        assert_eq!(ReasoningScope::CurrentTurn.turn_start(&messages), 3);
        let billed: usize = messages
            .iter()
            .enumerate()
            .map(|(at, m)| {
                if at < 3 {
                    message_tokens(&Estimate, &m.without_reasoning())
                } else {
                    message_tokens(&Estimate, m)
                }
            })
            .sum();
        assert_eq!(
            billed_tokens(&Estimate, &messages, ReasoningScope::CurrentTurn),
            billed
        );
        assert!(billed < full);
        assert_eq!(ReasoningScope::CurrentTurn.turn_start(&messages[..1]), 0);
    }
}
