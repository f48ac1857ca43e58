//! This project's own session files: JSONL of [`::cwl::Record`], the first
//! line a `session` record.

use ::cwl::{Message, Record};
use serde_json::Value;

use super::common::{Located, Outcome, Sink, parse_time, time_or_warn};
use super::{Event, Meta};

/// Fills `meta` from a `session` record; true once found.
pub(crate) fn scan(meta: &mut Meta, line: &Value) -> bool {
    let Ok(Record::Session {
        id,
        timestamp,
        cwd,
        provider,
        model,
        budget,
        tools,
        ..
    }) = serde_json::from_value::<Record>(line.clone())
    else {
        return false;
    };
    meta.session_id = Some(id);
    meta.started = parse_time(&timestamp);
    meta.cwd = Some(cwd);
    meta.provider = Some(provider);
    meta.model = Some(model);
    meta.budget = Some(budget);
    meta.tools = tools;
    true
}

/// Line parser for cwl session files.
#[derive(Default)]
pub(crate) struct Parser {
    seen_line: bool,
    model: Option<String>,
}

impl super::LineParser for Parser {
    fn line(&mut self, line: u64, text: &str, sink: &mut Sink) -> Outcome {
        let first = !self.seen_line;
        self.seen_line = true;
        let record: Record = match serde_json::from_str(text) {
            Ok(record) => record,
            Err(e) => {
                return sink.reject(
                    Some(line),
                    format!("not a cwl session record: {e}; skipped"),
                );
            }
        };
        if first && !matches!(record, Record::Session { .. }) {
            sink.warn(
                Some(line),
                "first line is not a `session` record; session metadata unknown",
            );
        }
        match record {
            Record::Session { model, .. } => {
                if !first {
                    sink.warn(
                        Some(line),
                        "second `session` record; only its model is used",
                    );
                }
                self.model = Some(model);
                Outcome::Used
            }
            Record::Message {
                timestamp,
                message,
                usage,
                cost_usd,
            } => {
                let timestamp = time_or_warn(timestamp.as_deref(), Some(line), sink);
                if let Message::Assistant { content } = &message
                    && content.is_empty()
                {
                    return sink.reject(
                        Some(line),
                        "assistant message has no content blocks; skipped",
                    );
                }
                let model = matches!(message, Message::Assistant { .. })
                    .then(|| self.model.clone())
                    .flatten();
                sink.push(Located {
                    line: Some(line),
                    event: Event::Message {
                        message,
                        timestamp,
                        usage,
                        model,
                        cost_usd,
                    },
                });
                Outcome::Used
            }
            _ => Outcome::Ignored,
        }
    }

    fn finish(&mut self, _sink: &mut Sink) {}
}
