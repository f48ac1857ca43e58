//! Size limits on what the agent pushes, so one oversized call, result or
//! task can neither sink a request nor grow the protected prologue past
//! what the budget can hold.
//!
//! The engine never evicts the prologue (everything before the first
//! `delimiter` start). A tool call whose arguments are too large, or that
//! would not fit the prologue's room, is pushed with its arguments replaced
//! by a short refusal (the call never runs) and answered with a tool error
//! that says the size, the cap and what to do instead. Results over the cap
//! are cut to their head and tail; results that would not fit the prologue
//! are replaced by an error. A task text too large is refused before it is
//! pushed.

use cwl::tokens::{MESSAGE_OVERHEAD, block_tokens};
use cwl::{Annotation, Block, DELIMITER, Graph, Message, ToolCall};

use super::{Agent, AgentError};
use crate::tools::ToolOutput;

/// The largest arguments of one tool call, in bytes of JSON.
pub const MAX_ARGUMENT_BYTES: usize = 256 * 1024;
/// The largest tool result kept, in bytes; longer ones keep head and tail.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;
/// The largest text or reasoning block of a reply, and the largest task.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// The largest reply in all, in bytes; past it the largest calls are refused.
pub const MAX_REPLY_BYTES: usize = 1024 * 1024;
/// The share of the engine's budget the prologue may grow to through the
/// model's calls and their results (the rest is room for evictable work).
pub const PROLOGUE_SHARE: f64 = 0.5;
/// The share of the engine's budget one call or result may still add to a
/// prologue already past [`PROLOGUE_SHARE`] (but never past the budget).
pub const SMALL_SHARE: f64 = 0.02;

/// The key of the arguments object that replaces refused arguments.
const REFUSED_KEY: &str = "cwl_refused";

/// Advice for a call whose arguments are too large, by tool.
fn advice(tool: &str) -> &'static str {
    match tool {
        "write" => {
            "write the file in parts: `write` a first part, then add each further part with an `edit` call that replaces the current last line with itself plus the next part, each call under the cap"
        }
        "edit" => "make the change in several smaller `edit` calls, each under the cap",
        "bash" => {
            "put long scripts or data in a file first (`write`, then `edit` in parts), then run it with a short command"
        }
        _ => "split the work into several smaller calls, each under the cap",
    }
}

/// Why a call is refused before it runs.
enum Refusal {
    /// Its arguments alone are over [`MAX_ARGUMENT_BYTES`].
    Arguments,
    /// The reply as a whole is over [`MAX_REPLY_BYTES`].
    Reply,
    /// It would grow the prologue past its room (tokens left).
    Prologue(usize),
}

/// The arguments standing in for `call`'s refused ones: a JSON object that
/// [`refusal`] recognises, holding the error text the model gets.
fn refuse(call: &mut ToolCall, why: Refusal) {
    let bytes = call.arguments.len();
    let text = match why {
        Refusal::Arguments => format!(
            "refused: the arguments of this `{}` call are {bytes} bytes, over the cap of {MAX_ARGUMENT_BYTES} bytes for one tool call; the call did not run and its arguments were not kept. Instead, {}.",
            call.name,
            advice(&call.name)
        ),
        Refusal::Reply => format!(
            "refused: this reply holds over {MAX_REPLY_BYTES} bytes of tool calls and text, the cap for one reply; this `{}` call ({bytes} bytes of arguments) did not run and its arguments were not kept. Make fewer, smaller calls per reply; {}.",
            call.name,
            advice(&call.name)
        ),
        Refusal::Prologue(room) => format!(
            "refused: the arguments of this `{}` call are {bytes} bytes, and no episode has started yet: what comes before the first episode stays in the context for good, and only about {room} more tokens fit there. The call did not run and its arguments were not kept. Start an episode with `delimiter` first (its content can be evicted later), then make the call again; if it is still large, {}.",
            call.name,
            advice(&call.name)
        ),
    };
    call.arguments = serde_json::json!({ REFUSED_KEY: text }).to_string();
}

/// The error to answer `call` with when its arguments were refused (see
/// [`Agent::limit_reply`]); `None` for every other call.
pub(super) fn refusal(call: &ToolCall) -> Option<String> {
    if !call.arguments.starts_with(&format!("{{\"{REFUSED_KEY}\":")) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(&call.arguments).ok()?;
    let object = value.as_object().filter(|o| o.len() == 1)?;
    Some(object.get(REFUSED_KEY)?.as_str()?.to_string())
}

/// How many leading blocks of `content` would land in the prologue if it
/// were pushed now: all when no episode has started and none of its
/// delimiter calls would start one, none once one has.
fn prologue_blocks(graph: &Graph, content: &[Block]) -> usize {
    if graph.started() {
        return 0;
    }
    content
        .iter()
        .position(|block| match block {
            Block::ToolCall(call) if call.name == DELIMITER => Annotation::parse(&call.arguments)
                .is_ok_and(|annotation| {
                    matches!(annotation, Annotation::Start { .. })
                        && graph.check(&annotation).is_ok()
                }),
            _ => false,
        })
        .unwrap_or(content.len())
}

/// Whether `call` of `message` (already pushed) came before the first
/// episode started, so its result lands in the prologue.
fn in_prologue(graph: &Graph, message: &Message, call: &ToolCall) -> bool {
    if !graph.started() {
        return true;
    }
    let Some(first) = graph.episodes().first().and_then(|e| e.start_call()) else {
        return false;
    };
    let calls: Vec<&ToolCall> = message.tool_calls().collect();
    let start = calls.iter().position(|c| c.id == first);
    let this = calls.iter().position(|c| c.id == call.id);
    matches!((start, this), (Some(start), Some(this)) if this < start)
}

/// `text` cut to about `max` bytes at char boundaries: its head, a notice,
/// and its tail.
fn head_and_tail(text: &str, max: usize) -> String {
    let half = max / 2;
    let mut head = half.min(text.len());
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len().saturating_sub(half).max(head);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[… {} bytes omitted …]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// The start of `text`, at most `max` bytes, cut at a char boundary.
fn head(text: &str, max: usize) -> &str {
    let mut cut = max.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

impl Agent {
    /// Tokens the prologue may take: [`PROLOGUE_SHARE`] of the engine budget.
    fn prologue_limit(&self) -> usize {
        (self.options.engine_budget() as f64 * PROLOGUE_SHARE) as usize
    }

    /// Tokens that may still join the prologue: up to [`PROLOGUE_SHARE`]
    /// of the engine budget, and up to [`SMALL_SHARE`] of it past that (so
    /// a small call still works in a session whose system prompt and
    /// instructions already fill half a small budget), never past the
    /// budget itself.
    fn prologue_room(&self) -> usize {
        let budget = self.options.engine_budget();
        let now = self.context.tokens();
        let soft = self.prologue_limit().saturating_sub(now);
        let small = (budget as f64 * SMALL_SHARE) as usize;
        soft.max(small).min(budget.saturating_sub(now))
    }

    /// Refuses a task whose text is over [`MAX_TEXT_BYTES`] or over
    /// [`PROLOGUE_SHARE`] of the budget (a task's user turn is never
    /// evicted while it runs, and before the first episode never at all).
    pub(super) fn check_task(&self, text: &str) -> Result<(), AgentError> {
        let bytes = text.len();
        if bytes > MAX_TEXT_BYTES {
            return Err(AgentError::TaskTooLarge {
                bytes,
                limit: format!("{MAX_TEXT_BYTES} bytes"),
            });
        }
        let tokens = MESSAGE_OVERHEAD + self.counter.count(text);
        let limit = self.prologue_limit();
        if tokens > limit {
            return Err(AgentError::TaskTooLarge {
                bytes,
                limit: format!(
                    "{limit} tokens, half the budget of {}; it takes {tokens}",
                    self.options.engine_budget()
                ),
            });
        }
        Ok(())
    }

    /// Applies the limits to a model reply before it is pushed: oversized
    /// text is cut and oversized reasoning dropped (each with a note in the
    /// returned list); calls over [`MAX_ARGUMENT_BYTES`], the largest calls
    /// of a reply over [`MAX_REPLY_BYTES`], and calls that would grow the
    /// prologue past its room get refused arguments (see [`refusal`]).
    pub(super) fn limit_reply(&self, content: Vec<Block>) -> (Vec<Block>, Vec<String>) {
        let mut notes = Vec::new();
        let mut content: Vec<Block> = content
            .into_iter()
            .filter_map(|block| match block {
                Block::ToolCall(mut call) if call.arguments.len() > MAX_ARGUMENT_BYTES => {
                    notes.push(format!(
                        "refused a `{}` call with {} bytes of arguments (cap {MAX_ARGUMENT_BYTES})",
                        call.name,
                        call.arguments.len()
                    ));
                    refuse(&mut call, Refusal::Arguments);
                    Some(Block::ToolCall(call))
                }
                Block::Text { text } if text.len() > MAX_TEXT_BYTES => {
                    notes.push(format!(
                        "cut a reply text of {} bytes to the cap of {MAX_TEXT_BYTES}",
                        text.len()
                    ));
                    let cut = text.len() - head(&text, MAX_TEXT_BYTES).len();
                    Some(Block::Text {
                        text: format!(
                            "{}\n[… {cut} bytes cut: over the cap of {MAX_TEXT_BYTES} bytes for one text]",
                            head(&text, MAX_TEXT_BYTES)
                        ),
                    })
                }
                Block::Reasoning { text, .. } if text.len() > MAX_TEXT_BYTES => {
                    notes.push(format!(
                        "dropped reasoning of {} bytes (cap {MAX_TEXT_BYTES})",
                        text.len()
                    ));
                    None
                }
                other => Some(other),
            })
            .collect();
        let size = |content: &[Block]| -> usize {
            content
                .iter()
                .map(|block| match block {
                    Block::Text { text } | Block::Reasoning { text, .. } => text.len(),
                    Block::ToolCall(call) => call.arguments.len() + call.name.len(),
                })
                .sum()
        };
        while size(&content) > MAX_REPLY_BYTES {
            let Some(call) = largest_call(&mut content, usize::MAX) else {
                break;
            };
            notes.push(format!(
                "refused a `{}` call: the reply is over the cap of {MAX_REPLY_BYTES} bytes",
                call.name
            ));
            refuse(call, Refusal::Reply);
        }
        let split = if self.context.keeps_prologue() {
            prologue_blocks(self.context.graph(), &content)
        } else {
            0
        };
        let room = self.prologue_room().saturating_sub(MESSAGE_OVERHEAD);
        loop {
            let tokens: usize = content[..split]
                .iter()
                .map(|block| block_tokens(self.counter.as_ref(), block))
                .sum();
            if tokens <= room {
                break;
            }
            match largest_call(&mut content, split) {
                Some(call) => {
                    notes.push(format!(
                        "refused a `{}` call before the first episode: the prologue has room for about {room} more tokens",
                        call.name
                    ));
                    refuse(call, Refusal::Prologue(room));
                }
                None => {
                    for block in &mut content[..split] {
                        if let Block::Text { text } = block
                            && text.len() > 200
                        {
                            notes.push(format!(
                                "cut a reply text of {} bytes before the first episode: the prologue has room for about {room} more tokens",
                                text.len()
                            ));
                            *text = format!(
                                "{}\n[… cut: before the first episode, text stays in the context for good and this did not fit]",
                                head(text, 200)
                            );
                        }
                    }
                    break;
                }
            }
        }
        (content, notes)
    }

    /// Applies the limits to the result of `call` (of `message`, already
    /// pushed): a result over [`MAX_RESULT_BYTES`] keeps its head and tail
    /// and becomes an error saying so; one that would grow the prologue
    /// past its room is replaced by an error saying how to get it.
    pub(super) fn limit_result(
        &self,
        message: &Message,
        call: &ToolCall,
        output: ToolOutput,
    ) -> ToolOutput {
        let bytes = output.content.len();
        let output = if bytes > MAX_RESULT_BYTES {
            ToolOutput::error(format!(
                "the result of this `{}` call is {bytes} bytes, over the cap of {MAX_RESULT_BYTES} bytes for one tool result; only its start and end are kept below. The call did run. Ask for less at a time (read with offset and limit, filter command output with head, tail or grep).\n{}",
                call.name,
                head_and_tail(&output.content, MAX_RESULT_BYTES - 1024)
            ))
        } else {
            output
        };
        if !self.context.keeps_prologue() || !in_prologue(self.context.graph(), message, call) {
            return output;
        }
        let tokens = MESSAGE_OVERHEAD + self.counter.count(&output.content);
        let room = self.prologue_room();
        if tokens <= room {
            return output;
        }
        ToolOutput::error(format!(
            "the result of this `{}` call ({} bytes, {tokens} tokens) was not kept: no episode has started yet, and what comes before the first episode stays in the context for good; only about {room} more tokens fit there. The call did run. Start an episode with `delimiter` first (its content can be evicted later), then ask again, for less at a time if it is still large.",
            call.name,
            output.content.len()
        ))
    }
}

/// The not yet refused non-delimiter call with the largest arguments among
/// the first `within` blocks of `content`.
fn largest_call(content: &mut [Block], within: usize) -> Option<&mut ToolCall> {
    let within = within.min(content.len());
    content[..within]
        .iter_mut()
        .filter_map(|block| match block {
            Block::ToolCall(call) if call.name != DELIMITER && refusal(call).is_none() => {
                Some(call)
            }
            _ => None,
        })
        .max_by_key(|call| call.arguments.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_arguments_are_recognised_and_say_what_to_do() {
        let mut call = ToolCall::new("c1", "write", "x".repeat(MAX_ARGUMENT_BYTES + 1));
        assert_eq!(refusal(&call), None);
        refuse(&mut call, Refusal::Arguments);
        let text = refusal(&call).unwrap();
        assert!(
            text.contains(&format!("{} bytes", MAX_ARGUMENT_BYTES + 1)),
            "{text}"
        );
        assert!(
            text.contains(&format!("cap of {MAX_ARGUMENT_BYTES}")),
            "{text}"
        );
        assert!(text.contains("write the file in parts"), "{text}");
        assert!(call.arguments.len() < 1000);
        let forged = ToolCall::new("c2", "ls", r#"{"cwl_refused":"x","path":"."}"#);
        assert_eq!(refusal(&forged), None);
        let other = ToolCall::new("c3", "ls", r#"{"path":"."}"#);
        assert_eq!(refusal(&other), None);
    }

    #[test]
    fn head_and_tail_keep_both_ends_at_char_boundaries() {
        let text = format!("{}{}", "é".repeat(1000), "z".repeat(1000));
        let cut = head_and_tail(&text, 1001);
        assert!(cut.starts_with('é') && cut.ends_with('z'), "{cut}");
        assert!(cut.len() < 1100, "{}", cut.len());
        let (kept_head, rest) = cut.split_once("\n[… ").unwrap();
        let (omitted, kept_tail) = rest.split_once(" bytes omitted …]\n").unwrap();
        assert!(text.starts_with(kept_head) && text.ends_with(kept_tail));
        assert_eq!(
            kept_head.len() + omitted.parse::<usize>().unwrap() + kept_tail.len(),
            text.len()
        );
        assert_eq!(head("héllo", 2), "h");
    }
}
