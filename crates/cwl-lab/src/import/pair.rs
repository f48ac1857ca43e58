//! Pairs tool calls with their results so the transcript is always a valid
//! request: the results of an assistant message's calls follow it directly,
//! one per call; unknown results are dropped and missing ones are filled in.
//! A user or system message logged while calls were still unanswered is
//! moved after their results (no provider accepts it before them).

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use ::cwl::{Block, Message, ToolResult};

use super::common::{Located, warning};
use super::{Event, MISSING_RESULT};

struct OpenCall {
    id: String,
    name: String,
    line: Option<u64>,
}

/// The pairing stage between a format's parser and the consumer.
pub(crate) struct Pairer {
    path: PathBuf,
    open: Vec<OpenCall>,
    answered: HashSet<String>,
    deferred: Vec<Event>,
    out: VecDeque<Event>,
    /// Synthetic results inserted so far.
    pub synthetic: u64,
    /// Results dropped so far.
    pub dropped: u64,
}

impl Pairer {
    pub(crate) fn new(path: &Path) -> Self {
        Pairer {
            path: path.to_path_buf(),
            open: Vec::new(),
            answered: HashSet::new(),
            deferred: Vec::new(),
            out: VecDeque::new(),
            synthetic: 0,
            dropped: 0,
        }
    }

    /// Takes the next event.
    pub(crate) fn push(&mut self, item: Located) {
        match item.event {
            Event::Warning(_) => self.out.push_back(item.event),
            Event::Message {
                message: Message::ToolResult(result),
                timestamp,
                usage,
                model,
                cost_usd,
            } => {
                if let Some(result) = self.accept(result, item.line) {
                    self.out.push_back(Event::Message {
                        message: Message::ToolResult(result),
                        timestamp,
                        usage,
                        model,
                        cost_usd,
                    });
                    if !self.waiting() {
                        self.out.extend(self.deferred.drain(..));
                    }
                }
            }
            event @ Event::Message {
                message: Message::User { .. } | Message::System { .. },
                ..
            } if self.waiting() => self.deferred.push(event),
            mut event => {
                self.close();
                if let Event::Message {
                    message: Message::Assistant { content },
                    ..
                } = &mut event
                {
                    self.open_calls(content, item.line);
                }
                self.out.push_back(event);
            }
        }
    }

    /// Opens the calls of an assistant message; a repeated call id would
    /// make the request invalid, so its later calls are dropped.
    fn open_calls(&mut self, content: &mut Vec<Block>, line: Option<u64>) {
        let mut seen = HashSet::new();
        let mut repeated = Vec::new();
        content.retain(|block| match block {
            Block::ToolCall(call) if !seen.insert(call.id.clone()) => {
                repeated.push(call.id.clone());
                false
            }
            _ => true,
        });
        for id in repeated {
            self.out.push_back(Event::Warning(warning(
                &self.path,
                line,
                format!(
                    "tool call id `{id}` repeated in one assistant message; later call dropped"
                ),
            )));
        }
        self.open = content
            .iter()
            .filter_map(|block| match block {
                Block::ToolCall(call) => Some(OpenCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    line,
                }),
                _ => None,
            })
            .collect();
    }

    /// Whether some open call has no result yet.
    fn waiting(&self) -> bool {
        self.open
            .iter()
            .any(|call| !self.answered.contains(&call.id))
    }

    /// Checks a result against the open calls; fills in its tool name.
    fn accept(&mut self, mut result: ToolResult, line: Option<u64>) -> Option<ToolResult> {
        let Some(call) = self.open.iter().find(|call| call.id == result.call_id) else {
            self.drop_result(
                line,
                format!(
                    "result for unknown tool call `{}` (no call with this id in the preceding assistant message); dropped",
                    result.call_id
                ),
            );
            return None;
        };
        if !self.answered.insert(result.call_id.clone()) {
            self.drop_result(
                line,
                format!("second result for tool call `{}`; dropped", result.call_id),
            );
            return None;
        }
        if result.tool_name.is_empty() {
            result.tool_name = call.name.clone();
        }
        Some(result)
    }

    fn drop_result(&mut self, line: Option<u64>, what: String) {
        self.dropped += 1;
        self.out
            .push_back(Event::Warning(warning(&self.path, line, what)));
    }

    /// Ends the run of results: every open call without one gets a synthetic
    /// error result.
    fn close(&mut self) {
        for call in std::mem::take(&mut self.open) {
            if self.answered.contains(&call.id) {
                continue;
            }
            self.synthetic += 1;
            self.out.push_back(Event::Message {
                message: Message::tool_result(
                    call.id.clone(),
                    call.name.clone(),
                    MISSING_RESULT,
                    true,
                ),
                timestamp: None,
                usage: None,
                model: None,
                cost_usd: None,
            });
            self.out.push_back(Event::Warning(warning(
                &self.path,
                call.line,
                format!(
                    "tool call `{}` ({}) has no recorded result; inserted an error result",
                    call.id, call.name
                ),
            )));
        }
        self.answered.clear();
        self.out.extend(self.deferred.drain(..));
    }

    /// End of input.
    pub(crate) fn finish(&mut self) {
        self.close();
    }

    pub(crate) fn pop(&mut self) -> Option<Event> {
        self.out.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use ::cwl::{Message, ToolCall};

    use super::*;

    fn feed(messages: Vec<Message>) -> (Vec<Message>, Vec<String>) {
        let mut pairer = Pairer::new(Path::new("t.jsonl"));
        for (n, message) in messages.into_iter().enumerate() {
            pairer.push(Located {
                line: Some(n as u64 + 1),
                event: Event::Message {
                    message,
                    timestamp: None,
                    usage: None,
                    model: None,
                    cost_usd: None,
                },
            });
        }
        pairer.finish();
        let mut out = (Vec::new(), Vec::new());
        while let Some(event) = pairer.pop() {
            match event {
                Event::Message { message, .. } => out.0.push(message),
                Event::Warning(w) => out.1.push(format!("{}: {}", w.line.unwrap_or(0), w.what)),
                Event::Compaction { .. } => {}
            }
        }
        out
    }

    fn calls(ids: &[&str]) -> Message {
        Message::Assistant {
            content: ids
                .iter()
                .map(|id| Block::ToolCall(ToolCall::new(*id, "read", "{}")))
                .collect(),
        }
    }

    #[test]
    fn missing_results_follow_the_recorded_ones() {
        let (messages, warnings) = feed(vec![
            calls(&["a", "b", "c"]),
            Message::tool_result("b", "", "B", false),
            Message::user("next"),
        ]);
        assert_eq!(
            messages,
            vec![
                calls(&["a", "b", "c"]),
                Message::tool_result("b", "read", "B", false),
                Message::tool_result("a", "read", MISSING_RESULT, true),
                Message::tool_result("c", "read", MISSING_RESULT, true),
                Message::user("next"),
            ]
        );
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].starts_with("1: tool call `a` (read) has no recorded result"));
    }

    #[test]
    fn unknown_late_and_repeated_results_are_dropped() {
        let (messages, warnings) = feed(vec![
            Message::tool_result("x", "read", "before any call", false),
            calls(&["a"]),
            Message::tool_result("a", "read", "A", false),
            Message::tool_result("a", "read", "again", false),
            Message::user("next"),
            Message::tool_result("a", "read", "late", false),
        ]);
        assert_eq!(
            messages,
            vec![
                calls(&["a"]),
                Message::tool_result("a", "read", "A", false),
                Message::user("next"),
            ]
        );
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].starts_with("1: result for unknown tool call `x`"));
        assert!(warnings[1].starts_with("4: second result for tool call `a`"));
        assert!(warnings[2].starts_with("6: result for unknown tool call `a`"));
    }

    #[test]
    fn a_repeated_call_id_in_one_message_is_dropped() {
        let (messages, warnings) = feed(vec![
            calls(&["a", "a"]),
            Message::tool_result("a", "read", "A", false),
        ]);
        assert_eq!(
            messages,
            vec![calls(&["a"]), Message::tool_result("a", "read", "A", false)]
        );
        assert_eq!(
            warnings,
            vec!["1: tool call id `a` repeated in one assistant message; later call dropped"]
        );
    }

    #[test]
    fn a_user_message_logged_before_the_results_moves_after_them() {
        let (messages, warnings) = feed(vec![
            calls(&["a", "b"]),
            Message::tool_result("a", "read", "A", false),
            Message::user("steer"),
            Message::tool_result("b", "read", "B", false),
            Message::user("next"),
            calls(&["c"]),
            Message::user("interrupt"),
            calls(&[]),
        ]);
        assert_eq!(
            messages,
            vec![
                calls(&["a", "b"]),
                Message::tool_result("a", "read", "A", false),
                Message::tool_result("b", "read", "B", false),
                Message::user("steer"),
                Message::user("next"),
                calls(&["c"]),
                Message::tool_result("c", "read", MISSING_RESULT, true),
                Message::user("interrupt"),
                calls(&[]),
            ]
        );
        assert_eq!(warnings.len(), 1);
    }
}
