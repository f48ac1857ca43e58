//! Helpers shared by the importer tests.

#![allow(dead_code)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use cwl::{Message, Usage};
use cwl_lab::import::{Event, Import, ImportWarning, Stats};

/// Path of a fixture under `tests/fixtures/import/`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name)
}

/// Everything an import produced, split by kind.
pub struct Imported {
    pub events: Vec<Event>,
    pub messages: Vec<Message>,
    pub warnings: Vec<ImportWarning>,
    pub stats: Stats,
}

/// Runs an import to the end.
pub fn run(mut import: Import) -> Imported {
    let events: Vec<Event> = import.by_ref().collect();
    let messages = events
        .iter()
        .filter_map(|e| match e {
            Event::Message { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect();
    let warnings = events
        .iter()
        .filter_map(|e| match e {
            Event::Warning(w) => Some(w.clone()),
            _ => None,
        })
        .collect();
    Imported {
        events,
        messages,
        warnings,
        stats: *import.stats(),
    }
}

/// Asserts the transcript is a valid request: the calls of each assistant
/// message are answered, exactly once each, by the results that directly
/// follow it, and no result appears anywhere else.
pub fn assert_paired(messages: &[Message]) {
    let mut open: Vec<String> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        match message {
            Message::ToolResult(result) => {
                assert!(
                    open.contains(&result.call_id),
                    "message {index}: result for `{}` does not follow its call",
                    result.call_id
                );
                assert!(
                    answered.insert(result.call_id.clone()),
                    "message {index}: second result for `{}`",
                    result.call_id
                );
                assert!(
                    !result.tool_name.is_empty(),
                    "message {index}: result without tool name"
                );
            }
            other => {
                let missing: Vec<_> = open.iter().filter(|id| !answered.contains(*id)).collect();
                assert!(
                    missing.is_empty(),
                    "message {index}: calls {missing:?} were not answered"
                );
                open = other.tool_calls().map(|c| c.id.clone()).collect();
                answered.clear();
                if let Message::Assistant { content } = other {
                    assert!(
                        !content.is_empty(),
                        "message {index}: empty assistant message"
                    );
                }
            }
        }
    }
    let missing: Vec<_> = open.iter().filter(|id| !answered.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "end: calls {missing:?} were not answered"
    );
}

/// Warnings whose text contains `needle`.
pub fn warnings_with<'a>(warnings: &'a [ImportWarning], needle: &str) -> Vec<&'a ImportWarning> {
    warnings
        .iter()
        .filter(|w| w.what.contains(needle))
        .collect()
}

/// The (usage, model) of each model call (assistant message event), in
/// order.
pub fn calls(events: &[Event]) -> Vec<(Option<Usage>, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Message {
                message: Message::Assistant { .. },
                usage,
                model,
                ..
            } => Some((*usage, model.clone())),
            _ => None,
        })
        .collect()
}
