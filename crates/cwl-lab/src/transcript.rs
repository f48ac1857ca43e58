//! The replayed transcript as policies see it: messages counted and
//! scanned once ([`Entry`]), grouped into [`Unit`]s that always leave a
//! request valid, and the [`Pairing`] that turns a raw message stream into
//! such units.

use std::collections::HashSet;
use std::sync::Arc;

use cwl::tokens::{message_tokens, tools_tokens};
use cwl::{Block, Message, ReasoningScope, TokenCounter, ToolResult, ToolSpec};

use crate::metrics::anchors::{AnchorId, AnchorTable, Scope};
use crate::metrics::content::{self, LineKey, Seen};
use crate::metrics::sent::reasoning_tokens;

/// One message of a request, with what the lab needs to know about it,
/// computed once: its token count, the anchors it holds, and the logged
/// content it carries (see [`crate::metrics::content`]).
///
/// Entries are shared (`Arc`) between every policy that keeps them, so a
/// transcript is held once however many policies replay it.
#[derive(Debug)]
pub struct Entry {
    id: u64,
    message: Message,
    tokens: usize,
    reasoning: usize,
    /// The logged user turn it belongs to ([`Lab::billed`]).
    turn: u32,
    anchors: Box<[AnchorId]>,
    content_anchors: Box<[AnchorId]>,
    lines: Box<[LineKey]>,
    /// The same facts without its reasoning blocks, when it has any.
    bare: Option<Box<Bare>>,
}

/// An entry's anchors and logged content without its reasoning blocks.
#[derive(Debug)]
struct Bare {
    anchors: Box<[AnchorId]>,
    content_anchors: Box<[AnchorId]>,
    lines: Box<[LineKey]>,
}

/// An entry as the model saw it in one request: whole, or without its
/// reasoning where the provider dropped that ([`crate::metrics::sent`]).
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    entry: &'a Entry,
    bare: Option<&'a Bare>,
}

impl Shown<'_> {
    /// Whether the model saw `anchor` in it.
    pub fn has_anchor(&self, anchor: AnchorId) -> bool {
        let anchors = self.bare.map_or(&self.entry.anchors, |b| &b.anchors);
        anchors.binary_search(&anchor).is_ok()
    }

    /// Whether the model saw `anchor` in text the log wrote.
    pub fn keeps_anchor(&self, anchor: AnchorId) -> bool {
        let anchors = self
            .bare
            .map_or(&self.entry.content_anchors, |b| &b.content_anchors);
        anchors.binary_search(&anchor).is_ok()
    }

    /// Whether the model saw the line `key` in text the log wrote.
    pub fn keeps_line(&self, key: LineKey) -> bool {
        let lines = self.bare.map_or(&self.entry.lines, |b| &b.lines);
        lines.binary_search(&key).is_ok()
    }
}

impl Entry {
    /// Identity within one replay: two requests share a piece when they hold
    /// entries with the same id (what prefix caching compares).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The message sent.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// Tokens the message costs in a request (overhead included). For
    /// modeled entries (a compaction summary) the modeled size.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Of [`Entry::tokens`], those of its reasoning blocks (text and
    /// opaque part): what a provider that keeps only the current turn's
    /// reasoning stops counting once a later user message follows.
    pub fn reasoning_tokens(&self) -> usize {
        self.reasoning
    }

    /// The anchors it holds, sorted.
    pub fn anchors(&self) -> &[AnchorId] {
        &self.anchors
    }

    /// Whether it holds `anchor`.
    pub fn has_anchor(&self, anchor: AnchorId) -> bool {
        self.anchors.binary_search(&anchor).is_ok()
    }

    /// Whether it carries `anchor` in text the log wrote (not in a residue,
    /// placeholder or summary a policy wrote).
    pub fn keeps_anchor(&self, anchor: AnchorId) -> bool {
        self.content_anchors.binary_search(&anchor).is_ok()
    }

    /// Whether it carries the line `key` in text the log wrote.
    pub fn keeps_line(&self, key: LineKey) -> bool {
        self.lines.binary_search(&key).is_ok()
    }

    /// It as the model saw it: whole, or without its reasoning blocks when
    /// `reasoning_dropped`.
    pub fn shown(&self, reasoning_dropped: bool) -> Shown<'_> {
        Shown {
            entry: self,
            bare: if reasoning_dropped {
                self.bare.as_deref()
            } else {
                None
            },
        }
    }
}

/// An assistant message and the results of its tool calls: the smallest
/// piece of transcript that can be dropped or kept without breaking a
/// request.
#[derive(Debug, Clone)]
pub struct Step {
    /// The model's message.
    pub assistant: Arc<Entry>,
    /// One result per tool call, directly after it.
    pub results: Vec<Arc<Entry>>,
    /// The anchors the model wrote in this message (its text and call
    /// arguments): what it *used*, for reference tracking.
    pub used: Arc<[AnchorId]>,
}

impl Step {
    /// Tokens of the message and its results.
    pub fn tokens(&self) -> usize {
        self.assistant.tokens() + self.results.iter().map(|r| r.tokens()).sum::<usize>()
    }

    /// Of [`Step::tokens`], those the provider bills now ([`Lab::billed`]).
    pub fn billed(&self, lab: &Lab) -> usize {
        lab.billed(&self.assistant) + self.results.iter().map(|r| r.tokens()).sum::<usize>()
    }
}

/// What the transcript grows by: a system or user message, or a step.
#[derive(Debug, Clone)]
pub enum Unit {
    /// A system or user message.
    Message(Arc<Entry>),
    /// An assistant message with its tool results.
    Step(Step),
}

impl Unit {
    /// Its entries in order.
    pub fn entries(&self) -> impl Iterator<Item = &Arc<Entry>> {
        let (first, rest): (&Arc<Entry>, &[Arc<Entry>]) = match self {
            Unit::Message(entry) => (entry, &[]),
            Unit::Step(step) => (&step.assistant, &step.results),
        };
        std::iter::once(first).chain(rest.iter())
    }

    /// Tokens of all its entries.
    pub fn tokens(&self) -> usize {
        match self {
            Unit::Message(entry) => entry.tokens(),
            Unit::Step(step) => step.tokens(),
        }
    }

    /// Of [`Unit::tokens`], those the provider bills now ([`Lab::billed`]).
    pub fn billed(&self, lab: &Lab) -> usize {
        match self {
            Unit::Message(entry) => lab.billed(entry),
            Unit::Step(step) => step.billed(lab),
        }
    }

    /// Whether it is a user message.
    pub fn is_user(&self) -> bool {
        matches!(self, Unit::Message(e) if matches!(e.message(), Message::User { .. }))
    }

    /// Whether it is a system message.
    pub fn is_system(&self) -> bool {
        matches!(self, Unit::Message(e) if matches!(e.message(), Message::System { .. }))
    }
}

/// Per-replay services shared by the driver and the policies: the token
/// counter, the anchor table, entry ids, and which entries' reasoning the
/// provider no longer bills.
pub struct Lab {
    counter: Arc<dyn TokenCounter>,
    anchors: AnchorTable,
    next_id: u64,
    reasoning: ReasoningScope,
    /// Logged user messages so far.
    turn: u32,
    tools: Vec<ToolSpec>,
    tools_tokens: usize,
    seen: Seen,
    calls: u64,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("anchors", &self.anchors.len())
            .field("next_id", &self.next_id)
            .field("tools_tokens", &self.tools_tokens)
            .finish_non_exhaustive()
    }
}

impl Lab {
    /// Services for replaying a session that offers `tools`.
    pub fn new(counter: Arc<dyn TokenCounter>, tools: &[ToolSpec]) -> Self {
        let tools_tokens = tools_tokens(counter.as_ref(), tools);
        Lab {
            counter,
            anchors: AnchorTable::new(),
            next_id: 1,
            reasoning: ReasoningScope::AllTurns,
            turn: 0,
            tools: tools.to_vec(),
            tools_tokens,
            seen: Seen::default(),
            calls: 0,
        }
    }

    /// The same, for a log whose provider keeps `scope` of the reasoning
    /// ([`Lab::billed`]).
    pub fn with_reasoning(mut self, scope: ReasoningScope) -> Self {
        self.reasoning = scope;
        self
    }

    /// Tokens of `entry` that a request sent now is billed for: all of
    /// them, but its reasoning's once a later user message has been logged
    /// and the provider keeps only the current turn's. Every policy keeps
    /// the latest user message, so this holds in each of their requests;
    /// budgeted baselines count with it, as a harness that reads the
    /// provider's reported usage does.
    pub fn billed(&self, entry: &Entry) -> usize {
        if self.reasoning_dropped(entry) {
            entry.tokens - entry.reasoning
        } else {
            entry.tokens
        }
    }

    /// Whether the provider no longer bills `entry`'s reasoning
    /// ([`Lab::billed`]).
    pub fn reasoning_dropped(&self, entry: &Entry) -> bool {
        self.reasoning == ReasoningScope::CurrentTurn && entry.turn < self.turn
    }

    /// Records that a model call was made: what appears from now on
    /// appeared after it ([`AnchorTable::last_seen`]). Returns the calls
    /// made so far.
    pub fn called(&mut self) -> u64 {
        self.calls += 1;
        self.calls
    }

    /// The token counter.
    pub fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    /// A shared handle on the token counter.
    pub fn counter_arc(&self) -> Arc<dyn TokenCounter> {
        Arc::clone(&self.counter)
    }

    /// The anchor table.
    pub fn anchors(&self) -> &AnchorTable {
        &self.anchors
    }

    /// The anchor table, to intern or mark anchors.
    pub fn anchors_mut(&mut self) -> &mut AnchorTable {
        &mut self.anchors
    }

    /// The tool definitions offered with every request.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Tokens the tool definitions add to every request.
    pub fn tools_tokens(&self) -> usize {
        self.tools_tokens
    }

    /// A new entry for `message` from the log: counted and scanned now,
    /// with a fresh id; all of its text is logged content.
    pub fn entry(&mut self, message: Message) -> Arc<Entry> {
        if matches!(message, Message::User { .. }) {
            self.turn += 1;
        }
        let tokens = message_tokens(self.counter.as_ref(), &message);
        let anchors = self.anchors.extract(&message, Scope::All);
        let lines = content::message_lines(&message);
        self.build(message, tokens, self.turn, anchors.clone(), anchors, lines)
    }

    /// A new entry for text a policy wrote (a residue, placeholder or
    /// pointer): counted and scanned for anchors, but it carries no logged
    /// content, whatever names it repeats.
    pub fn written(&mut self, message: Message) -> Arc<Entry> {
        let tokens = message_tokens(self.counter.as_ref(), &message);
        let anchors = self.anchors.extract(&message, Scope::All);
        self.build(message, tokens, self.turn, anchors, Vec::new(), Vec::new())
    }

    /// A new entry for a policy's rewrite of `original` (blocks dropped):
    /// its logged content is that of the blocks it kept verbatim from
    /// `original`; any other block is written text.
    pub fn derived(&mut self, message: Message, original: &Entry) -> Arc<Entry> {
        let tokens = message_tokens(self.counter.as_ref(), &message);
        let anchors = self.anchors.extract(&message, Scope::All);
        let kept = match (&message, original.message()) {
            (Message::Assistant { content }, Message::Assistant { content: was }) => {
                Some(Message::Assistant {
                    content: content
                        .iter()
                        .filter(|b| was.contains(b))
                        .cloned()
                        .collect(),
                })
            }
            (now, was) if now == was => Some(message.clone()),
            _ => None,
        };
        let (content_anchors, lines) = match kept {
            Some(kept) => (
                self.anchors.extract(&kept, Scope::All),
                content::message_lines(&kept),
            ),
            None => (Vec::new(), Vec::new()),
        };
        self.build(
            message,
            tokens,
            original.turn,
            anchors,
            content_anchors,
            lines,
        )
    }

    /// A new entry whose size and anchors are given rather than measured
    /// (a modeled compaction summary stands for text that was never
    /// written). It carries no logged content.
    pub fn modeled(
        &mut self,
        message: Message,
        tokens: usize,
        anchors: Vec<AnchorId>,
    ) -> Arc<Entry> {
        self.build(message, tokens, self.turn, anchors, Vec::new(), Vec::new())
    }

    fn build(
        &mut self,
        message: Message,
        tokens: usize,
        turn: u32,
        mut anchors: Vec<AnchorId>,
        mut content_anchors: Vec<AnchorId>,
        lines: Vec<LineKey>,
    ) -> Arc<Entry> {
        anchors.sort_unstable();
        anchors.dedup();
        content_anchors.sort_unstable();
        content_anchors.dedup();
        let id = self.next_id;
        self.next_id += 1;
        let reasoning = reasoning_tokens(self.counter.as_ref(), &message).min(tokens);
        let bare = self.bare(&message, &content_anchors, &lines);
        Arc::new(Entry {
            id,
            message,
            tokens,
            reasoning,
            turn,
            anchors: anchors.into_boxed_slice(),
            content_anchors: content_anchors.into_boxed_slice(),
            lines: lines.into_boxed_slice(),
            bare,
        })
    }

    /// The facts of `message` without its reasoning blocks (`None` when it
    /// has none): what it holds elsewhere, of its `content_anchors` and
    /// `lines`.
    fn bare(
        &mut self,
        message: &Message,
        content_anchors: &[AnchorId],
        lines: &[LineKey],
    ) -> Option<Box<Bare>> {
        let Message::Assistant { content } = message else {
            return None;
        };
        if !content.iter().any(|b| matches!(b, Block::Reasoning { .. })) {
            return None;
        }
        let rest = message.without_reasoning();
        let mut anchors = self.anchors.extract(&rest, Scope::All);
        anchors.sort_unstable();
        anchors.dedup();
        let rest_lines = content::message_lines(&rest);
        Some(Box::new(Bare {
            content_anchors: content_anchors
                .iter()
                .copied()
                .filter(|a| anchors.binary_search(a).is_ok())
                .collect(),
            lines: lines
                .iter()
                .copied()
                .filter(|k| rest_lines.binary_search(k).is_ok())
                .collect(),
            anchors: anchors.into_boxed_slice(),
        }))
    }

    /// Records a logged entry as part of the transcript so far: its
    /// anchors and lines have now appeared (what later calls may rely on).
    pub fn note_logged(&mut self, entry: &Entry) {
        self.anchors.mark_seen(entry.anchors(), self.calls);
        let in_tool_output = matches!(entry.message(), Message::ToolResult(_));
        self.seen
            .note(entry.anchors(), &entry.lines, in_tool_output);
    }

    /// What the transcript so far has shown, for content at risk.
    pub fn seen(&self) -> &Seen {
        &self.seen
    }
}

/// Groups a raw message stream into [`Unit`]s, repairing what would make a
/// request invalid: results that answer no waiting call are dropped, calls
/// that never got a result are removed from their message, and an assistant
/// message left empty is dropped. Each repair is reported as a warning.
#[derive(Debug, Default)]
pub struct Pairing {
    pending: Option<(Message, Vec<ToolResult>)>,
    warnings: Vec<String>,
}

impl Pairing {
    /// An empty pairing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a new step with `assistant`; returns the previous step, if
    /// any, completed.
    pub fn begin(&mut self, assistant: Message) -> Option<(Message, Vec<Message>)> {
        let done = self.finish();
        self.pending = Some((assistant, Vec::new()));
        done
    }

    /// Attaches a tool result to the open step, or drops it with a warning.
    pub fn result(&mut self, result: ToolResult) {
        let Some((assistant, results)) = &mut self.pending else {
            self.warnings.push(format!(
                "tool result for call `{}` follows no assistant message; dropped",
                result.call_id
            ));
            return;
        };
        let called = assistant.tool_calls().any(|c| c.id == result.call_id);
        let answered = results.iter().any(|r| r.call_id == result.call_id);
        if !called || answered {
            self.warnings.push(format!(
                "tool result for call `{}` answers no waiting call; dropped",
                result.call_id
            ));
            return;
        }
        results.push(result);
    }

    /// Completes the open step (before a user or system message, or at the end).
    pub fn finish(&mut self) -> Option<(Message, Vec<Message>)> {
        let (assistant, results) = self.pending.take()?;
        let answered: HashSet<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
        let Message::Assistant { content } = &assistant else {
            return None;
        };
        let mut kept = Vec::with_capacity(content.len());
        let mut seen = HashSet::new();
        for block in content {
            if let Block::ToolCall(call) = block
                && (!answered.contains(call.id.as_str()) || !seen.insert(call.id.as_str()))
            {
                self.warnings.push(format!(
                    "tool call `{}` ({}) has no result; removed from the replay",
                    call.id, call.name
                ));
                continue;
            }
            kept.push(block.clone());
        }
        if kept.is_empty() {
            self.warnings
                .push("assistant message left empty after repairs; dropped".to_string());
            return None;
        }
        let results = results.into_iter().map(Message::ToolResult).collect();
        Some((Message::Assistant { content: kept }, results))
    }

    /// Takes the warnings gathered so far.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Estimate, ToolCall};

    fn call(id: &str) -> Block {
        Block::ToolCall(ToolCall::new(id, "read", "{}"))
    }

    fn result(id: &str) -> ToolResult {
        ToolResult {
            call_id: id.into(),
            tool_name: "read".into(),
            content: "x".into(),
            is_error: false,
        }
    }

    #[test]
    fn pairs_results_with_their_calls() {
        let mut pairing = Pairing::new();
        assert!(
            pairing
                .begin(Message::Assistant {
                    content: vec![call("a"), call("b")]
                })
                .is_none()
        );
        pairing.result(result("b"));
        pairing.result(result("a"));
        let (assistant, results) = pairing.finish().unwrap();
        assert_eq!(assistant.tool_calls().count(), 2);
        assert_eq!(results.len(), 2);
        assert!(pairing.take_warnings().is_empty());
    }

    #[test]
    fn repairs_orphans_duplicates_and_unanswered_calls() {
        let mut pairing = Pairing::new();
        pairing.result(result("x"));
        pairing.begin(Message::Assistant {
            content: vec![Block::Text { text: "hi".into() }, call("a"), call("b")],
        });
        pairing.result(result("a"));
        pairing.result(result("a"));
        pairing.result(result("zzz"));
        let (assistant, results) = pairing.finish().unwrap();
        assert_eq!(
            assistant
                .tool_calls()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(results.len(), 1);
        assert_eq!(pairing.take_warnings().len(), 4);
    }

    #[test]
    fn drops_an_assistant_left_empty() {
        let mut pairing = Pairing::new();
        pairing.begin(Message::Assistant {
            content: vec![call("a")],
        });
        assert!(pairing.finish().is_none());
        assert_eq!(pairing.take_warnings().len(), 2);
    }

    #[test]
    fn entries_are_counted_once_with_fresh_ids() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let a = lab.entry(Message::user("edit src/main.rs please"));
        let b = lab.entry(Message::user("edit src/main.rs please"));
        assert_ne!(a.id(), b.id());
        assert_eq!(a.tokens(), cwl::tokens::MESSAGE_OVERHEAD + 6);
        let path = lab.anchors_mut().intern("src/main.rs");
        assert!(a.has_anchor(path));
        let modeled = lab.modeled(Message::user("summary"), 500, vec![path, path]);
        assert_eq!(modeled.tokens(), 500);
        assert_eq!(modeled.anchors(), &[path]);
    }
}
