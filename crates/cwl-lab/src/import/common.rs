//! Plumbing shared by the importers: located events, the output queue,
//! the held-back assistant message, and small conversions.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use ::cwl::{Block, Message, Usage};
use chrono::{DateTime, Utc};

use super::{Event, ImportError, ImportWarning};

/// What became of one record (line or document entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It went into the transcript or the metadata.
    Used,
    /// A known kind with nothing for the transcript.
    Ignored,
    /// Corrupt or unknown; a warning says why.
    Rejected,
}

/// An event and the line it came from.
#[derive(Debug, Clone)]
pub(crate) struct Located {
    pub line: Option<u64>,
    pub event: Event,
}

impl Located {
    /// A message with no call data (usage, model, cost) at `line`.
    pub(crate) fn message(
        line: Option<u64>,
        message: Message,
        timestamp: Option<DateTime<Utc>>,
    ) -> Self {
        Located {
            line,
            event: Event::Message {
                message,
                timestamp,
                usage: None,
                model: None,
                cost_usd: None,
            },
        }
    }
}

/// The queue importers write to, in transcript order.
pub(crate) struct Sink {
    path: PathBuf,
    items: VecDeque<Located>,
    /// The line of every message queued so far, in order.
    message_lines: Vec<u64>,
}

impl Sink {
    pub(crate) fn new(path: &Path) -> Self {
        Sink {
            path: path.to_path_buf(),
            items: VecDeque::new(),
            message_lines: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, item: Located) {
        if matches!(item.event, Event::Message { .. }) {
            self.message_lines.push(item.line.unwrap_or(0));
        }
        self.items.push_back(item);
    }

    /// Messages queued so far from lines at or after `line`.
    pub(crate) fn messages_from(&self, line: u64) -> usize {
        let before = self.message_lines.partition_point(|&at| at < line);
        self.message_lines.len() - before
    }

    /// Queues a non-assistant message (or an assistant one without call data).
    pub(crate) fn message(
        &mut self,
        line: Option<u64>,
        message: Message,
        timestamp: Option<DateTime<Utc>>,
    ) {
        self.push(Located::message(line, message, timestamp));
    }

    /// Queues a warning about `line`.
    pub(crate) fn warn(&mut self, line: Option<u64>, what: impl Into<String>) {
        let warning = warning(&self.path, line, what);
        self.push(Located {
            line,
            event: Event::Warning(warning),
        });
    }

    /// Queues a warning and reports the record as rejected.
    pub(crate) fn reject(&mut self, line: Option<u64>, what: impl Into<String>) -> Outcome {
        self.warn(line, what);
        Outcome::Rejected
    }

    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Located> + '_ {
        self.items.drain(..)
    }
}

/// A warning about `path`.
pub(crate) fn warning(path: &Path, line: Option<u64>, what: impl Into<String>) -> ImportWarning {
    ImportWarning {
        path: path.to_path_buf(),
        line,
        what: what.into(),
    }
}

/// An assistant message being assembled from several records.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    /// The line of its first record.
    pub line: u64,
    /// A key that later records of the same model call share (Claude Code's
    /// `message.id`).
    pub key: Option<String>,
    /// Whether more blocks may still be added.
    pub open: bool,
    pub timestamp: Option<DateTime<Utc>>,
    pub blocks: Vec<Block>,
    pub usage: Option<Usage>,
    pub model: Option<String>,
    /// Reasoning blocks whose logged content is opaque (encrypted), hence
    /// not counted as text.
    pub opaque_reasoning: u64,
    /// The reasoning tokens the provider reported for this call, if logged.
    pub reasoning_tokens: Option<u64>,
}

/// An assistant message held back with the tool results that followed it,
/// until the model call is known to be complete.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub draft: Option<Draft>,
    results: Vec<Located>,
    /// Opaque reasoning blocks emitted without a logged token count (they
    /// count as nothing).
    pub unpriced_reasoning: u64,
    /// The line of the first call that had such blocks.
    pub first_unpriced: Option<u64>,
}

impl Held {
    /// Queues a tool result behind the held assistant message, or straight
    /// to the sink when none is held.
    pub(crate) fn result(&mut self, item: Located, sink: &mut Sink) {
        if self.draft.is_some() {
            self.results.push(item);
        } else {
            sink.push(item);
        }
    }

    /// Appends `text` to the last tool result held behind the assistant
    /// message; false when none is held.
    pub(crate) fn append_to_last_result(&mut self, text: &str) -> bool {
        let last = self
            .results
            .iter_mut()
            .rev()
            .find_map(|item| match &mut item.event {
                Event::Message {
                    message: Message::ToolResult(result),
                    ..
                } => Some(result),
                _ => None,
            });
        match last {
            Some(result) => {
                result.content.push_str("\n\n");
                result.content.push_str(text);
                true
            }
            None => false,
        }
    }

    /// Emits the held assistant message, then its results.
    pub(crate) fn flush(&mut self, sink: &mut Sink) {
        if let Some(mut draft) = self.draft.take() {
            self.price_reasoning(&mut draft);
            if draft.blocks.is_empty() {
                sink.warn(
                    Some(draft.line),
                    "assistant message has no content blocks; skipped",
                );
            } else {
                sink.push(Located {
                    line: Some(draft.line),
                    event: Event::Message {
                        message: Message::Assistant {
                            content: draft.blocks,
                        },
                        timestamp: draft.timestamp,
                        usage: draft.usage,
                        model: draft.model,
                        cost_usd: None,
                    },
                });
            }
        }
        for item in self.results.drain(..) {
            sink.push(item);
        }
    }
}

impl Held {
    /// Makes the opaque reasoning of `draft` count as the reasoning tokens
    /// the log reported for its call, or records it as unpriced.
    fn price_reasoning(&mut self, draft: &mut Draft) {
        if draft.opaque_reasoning == 0 {
            return;
        }
        let Some(tokens) = draft.reasoning_tokens else {
            self.unpriced_reasoning += draft.opaque_reasoning;
            self.first_unpriced.get_or_insert(draft.line);
            return;
        };
        if let Some(Block::Reasoning { signature, .. }) = draft
            .blocks
            .iter_mut()
            .find(|b| matches!(b, Block::Reasoning { .. }))
        {
            *signature = (tokens > 0).then(|| opaque_stand_in(tokens));
        }
    }
}

/// The unit of [`opaque_stand_in`]: one o200k token, and four bytes (one
/// token for the byte-based estimate too).
const STAND_IN_UNIT: &str = " xxx";

/// A stand-in for `tokens` tokens of opaque provider data (encrypted
/// reasoning): the engine counts the text of a reasoning block and its
/// signature, and the ciphertext's length says nothing about its cost, so
/// the signature is replaced by filler that counts as the logged number.
pub(crate) fn opaque_stand_in(tokens: u64) -> String {
    STAND_IN_UNIT.repeat(usize::try_from(tokens).unwrap_or(usize::MAX / STAND_IN_UNIT.len()))
}

/// Parses an RFC 3339 timestamp.
pub(crate) fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Parses an optional RFC 3339 timestamp, warning when it is malformed.
pub(crate) fn time_or_warn(
    text: Option<&str>,
    line: Option<u64>,
    sink: &mut Sink,
) -> Option<DateTime<Utc>> {
    let text = text?;
    let time = parse_time(text);
    if time.is_none() {
        sink.warn(line, format!("timestamp `{text}` is not RFC 3339; ignored"));
    }
    time
}

pub(crate) use cwl::openai::{content_text, part_text};

/// A usage, or `None` when every count is zero (a call aborted before the
/// provider reported anything).
pub(crate) fn nonzero(usage: Usage) -> Option<Usage> {
    (usage != Usage::default()).then_some(usage)
}

/// Reads a whole file that must be UTF-8.
pub(crate) fn read_utf8(path: &Path) -> Result<String, ImportError> {
    let bytes = std::fs::read(path).map_err(|source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let (bytes, skipped) = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => (rest.to_vec(), 3),
        None => (bytes, 0),
    };
    String::from_utf8(bytes).map_err(|e| ImportError::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to() as u64 + skipped,
    })
}

#[cfg(test)]
mod tests {
    use ::cwl::tokens::{Estimate, O200k, TokenCounter};

    use super::*;

    #[test]
    fn a_stand_in_counts_as_its_tokens() {
        for tokens in [1, 2, 7, 64, 1000] {
            let filler = opaque_stand_in(tokens);
            assert_eq!(
                O200k::new().count(&filler),
                tokens as usize,
                "o200k {tokens}"
            );
            assert_eq!(
                Estimate.count(&filler),
                tokens as usize,
                "estimate {tokens}"
            );
        }
        assert_eq!(opaque_stand_in(0), "");
    }

    #[test]
    fn logged_reasoning_tokens_replace_the_ciphertext() {
        let mut held = Held::default();
        let mut sink = Sink::new(Path::new("t.jsonl"));
        let reasoning = |signature: Option<&str>| Block::Reasoning {
            text: "plan".into(),
            signature: signature.map(str::to_string),
        };
        held.draft = Some(Draft {
            line: 3,
            blocks: vec![reasoning(None)],
            opaque_reasoning: 1,
            reasoning_tokens: Some(5),
            ..Draft::default()
        });
        held.flush(&mut sink);
        held.draft = Some(Draft {
            line: 9,
            blocks: vec![reasoning(None)],
            opaque_reasoning: 1,
            ..Draft::default()
        });
        held.flush(&mut sink);
        let blocks: Vec<Block> = sink
            .drain()
            .filter_map(|item| match item.event {
                Event::Message {
                    message: Message::Assistant { content },
                    ..
                } => Some(content),
                _ => None,
            })
            .flatten()
            .collect();
        let five = opaque_stand_in(5);
        assert_eq!(
            blocks,
            vec![reasoning(Some(five.as_str())), reasoning(None)]
        );
        assert_eq!((held.unpriced_reasoning, held.first_unpriced), (1, Some(9)));
    }
}
