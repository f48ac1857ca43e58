//! Counts of what an import read and produced.

use ::cwl::Message;
use serde::Serialize;

use super::Event;
use super::common::Outcome;

/// Counts of what an import read and produced so far (final once the
/// [`Import`](super::Import) iterator is exhausted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Non-blank lines read (JSONL) or entries of the message list (documents).
    pub records: u64,
    /// Records that went into the transcript or the metadata.
    pub used: u64,
    /// Records of known kinds that carry nothing for the transcript
    /// (bookkeeping, UI events, duplicates, sidechains).
    pub ignored: u64,
    /// Records that were corrupt or of an unknown kind (each has a warning).
    pub rejected: u64,
    /// Message events produced.
    pub messages: u64,
    /// Assistant messages produced (= model calls).
    pub assistant_messages: u64,
    /// Tool calls in those assistant messages.
    pub tool_calls: u64,
    /// Tool results produced, synthetic ones included.
    pub tool_results: u64,
    /// Synthetic results inserted for calls that had none.
    pub synthetic_results: u64,
    /// Results dropped because their call was unknown or already answered.
    pub dropped_results: u64,
    /// Compaction events produced.
    pub compactions: u64,
    /// Warning events produced.
    pub warnings: u64,
}

impl Stats {
    pub(crate) fn count_record(&mut self, outcome: Outcome) {
        self.records += 1;
        match outcome {
            Outcome::Used => self.used += 1,
            Outcome::Ignored => self.ignored += 1,
            Outcome::Rejected => self.rejected += 1,
        }
    }

    pub(crate) fn count_event(&mut self, event: &Event) {
        match event {
            Event::Message { message, .. } => {
                self.messages += 1;
                match message {
                    Message::Assistant { .. } => {
                        self.assistant_messages += 1;
                        self.tool_calls += message.tool_calls().count() as u64;
                    }
                    Message::ToolResult(_) => self.tool_results += 1,
                    _ => {}
                }
            }
            Event::Compaction { .. } => self.compactions += 1,
            Event::Warning(_) => self.warnings += 1,
        }
    }
}
