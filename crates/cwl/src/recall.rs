//! `recall`: evicted content comes back from the session store, so nothing
//! eviction drops is lost for good. The engine keeps no evicted bytes; the
//! harness lends it a [`TranscriptStore`] that reads what it persisted.

use serde_json::{Value, json};
use thiserror::Error;

use crate::context::Context;
use crate::graph::EpisodeId;
use crate::message::{Block, Message, ToolSpec};
use crate::protocol::DELIMITER;

/// The tool's name.
pub const RECALL: &str = "recall";

/// Where a harness keeps every message it pushed, in push order: the
/// engine asks it for the messages an evicted episode spanned.
pub trait TranscriptStore {
    /// The messages pushed at positions `first..=last` (0-based, in push
    /// order, as [`crate::Episode::span`] gives them).
    fn messages(&self, first: u64, last: u64) -> Result<Vec<Message>, String>;
}

/// A transcript kept in memory (tests, short-lived embedders) is its own
/// store.
impl TranscriptStore for Vec<Message> {
    fn messages(&self, first: u64, last: u64) -> Result<Vec<Message>, String> {
        usize::try_from(first)
            .ok()
            .zip(usize::try_from(last).ok())
            .filter(|(first, last)| first <= last)
            .and_then(|(first, last)| self.get(first..=last))
            .map(<[Message]>::to_vec)
            .ok_or_else(|| {
                format!(
                    "messages {first} to {last} are not in the transcript ({} messages)",
                    self.len()
                )
            })
    }
}

/// Why a recall failed; the message is the tool result to send back.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RecallError {
    /// The arguments are not `{"episode": "..."}`.
    #[error(
        "recall needs {{\"episode\": NAME}} with an episode name or an id shown in the context (#12, u41)"
    )]
    BadArguments,
    /// No episode or folded user turn has that name or id.
    #[error(
        "nothing named `{0}` was evicted; use a name or id shown in a residue or the index line"
    )]
    Unknown(String),
    /// The episode is still whole in the context.
    #[error("episode `{0}` is still in the context; nothing to recall")]
    NotEvicted(String),
    /// The store could not read it back.
    #[error("cannot read `{reference}` back from the session: {error}")]
    Store {
        /// What was asked for.
        reference: String,
        /// The store's error.
        error: String,
    },
}

/// What a `recall` call brings back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecallTarget {
    /// An evicted episode's content.
    Episode(EpisodeId),
    /// A folded user turn, by push position.
    User(u64),
}

/// The tool definition to offer the model alongside `delimiter`.
pub fn recall_spec() -> ToolSpec {
    ToolSpec {
        name: RECALL.to_string(),
        description: "Bring back the full content of an evicted episode or a folded user turn, \
by the name or id shown in its residue or in the index line (`find-auth`, `#12`, `u41`). \
The content returns as a new expl episode and can be evicted again."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "episode": {"type": "string",
                    "description": "episode name, episode id like #12, or folded user turn like u41"}
            },
            "required": ["episode"],
            "additionalProperties": false
        }),
    }
}

fn reference(arguments: &str) -> Option<String> {
    let value: Value = serde_json::from_str(arguments).ok()?;
    let reference = value.get("episode")?.as_str()?.trim();
    (!reference.is_empty()).then(|| reference.to_string())
}

impl Context {
    /// What a recall call's arguments name, if it has evicted content.
    pub(crate) fn recall_target(&self, arguments: &str) -> Option<RecallTarget> {
        self.resolve_recall(&reference(arguments)?).ok()
    }

    fn resolve_recall(&self, reference: &str) -> Result<RecallTarget, RecallError> {
        if let Some(push) = reference
            .strip_prefix('u')
            .and_then(|digits| digits.parse::<u64>().ok())
            .filter(|&push| self.residues.folded_user(push))
        {
            return Ok(RecallTarget::User(push));
        }
        let id = self
            .graph
            .resolve(reference)
            .ok_or_else(|| RecallError::Unknown(reference.to_string()))?;
        let episode = self.graph.episode(id);
        if episode.level().is_none() && !episode.is_folded() {
            return Err(RecallError::NotEvicted(episode.name().to_string()));
        }
        Ok(RecallTarget::Episode(id))
    }

    /// The name and description of the expl that will hold recalled content.
    pub(crate) fn recall_label(&self, target: RecallTarget) -> (String, String) {
        match target {
            RecallTarget::User(push) => (format!("u{push}"), format!("user turn u{push}")),
            RecallTarget::Episode(id) => {
                let episode = self.graph.episode(id);
                let description = episode.description().map_or_else(
                    || format!("content of `{}`", episode.name()),
                    str::to_string,
                );
                (episode.name().to_string(), description)
            }
        }
    }

    /// Runs a `recall` call: reads the named content back from `store` and
    /// returns the tool result text. Call it after pushing the assistant
    /// message that holds the call; the result then belongs to a new expl
    /// episode, evictable like any other.
    pub fn recall(
        &self,
        arguments: &str,
        store: &dyn TranscriptStore,
    ) -> Result<String, RecallError> {
        let reference = reference(arguments).ok_or(RecallError::BadArguments)?;
        let target = self.resolve_recall(&reference)?;
        let read = |first: u64, last: u64| {
            store
                .messages(first, last)
                .map_err(|error| RecallError::Store {
                    reference: reference.clone(),
                    error,
                })
        };
        match target {
            RecallTarget::User(push) => {
                let messages = read(push, push)?;
                let text = messages.iter().find_map(|message| match message {
                    Message::User { content } => Some(content.clone()),
                    _ => None,
                });
                text.map(|text| format!("Recalled user turn u{push}:\n{text}"))
                    .ok_or_else(|| RecallError::Store {
                        reference,
                        error: format!("message {push} is not a user turn"),
                    })
            }
            RecallTarget::Episode(id) => {
                let episode = self.graph.episode(id);
                let (first, last) = episode.span();
                let mut text = format!(
                    "Recalled {} episode `{}` (#{id}){}\n",
                    episode.kind(),
                    episode.name(),
                    episode
                        .description()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                );
                for message in read(first, last)? {
                    render(&message, &mut text);
                }
                Ok(text)
            }
        }
    }
}

/// Appends what the model did and saw in `message`, protocol calls left out.
fn render(message: &Message, out: &mut String) {
    let protocol = |name: &str| name == DELIMITER || name == RECALL;
    match message {
        Message::Assistant { content } => {
            for block in content {
                match block {
                    Block::Text { text } => {
                        out.push_str(text);
                        out.push('\n');
                    }
                    Block::ToolCall(call) if !protocol(&call.name) => {
                        out.push_str(&format!("▸ {} {}\n", call.name, call.arguments));
                    }
                    _ => {}
                }
            }
        }
        Message::ToolResult(result) if !protocol(&result.tool_name) => {
            if result.is_error {
                out.push_str("(error) ");
            }
            out.push_str(&result.content);
            out.push('\n');
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_in_memory_gives_its_span_or_says_what_is_missing() {
        let transcript = vec![Message::user("a"), Message::user("b"), Message::user("c")];
        assert_eq!(transcript.messages(1, 2).unwrap(), transcript[1..].to_vec());
        let error = transcript.messages(2, 3).unwrap_err();
        assert_eq!(
            error,
            "messages 2 to 3 are not in the transcript (3 messages)"
        );
        assert!(transcript.messages(2, 1).is_err(), "a reversed span");
    }
}
