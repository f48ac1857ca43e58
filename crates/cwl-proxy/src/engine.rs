//! One conversation's engine: what the proxy pushed, the episodes it
//! inferred, and where each engine message came from on the wire.

use cwl::{
    Block, Message, RECALL, Record, Report, SideCalls, SideRequest, SidecarFile, SidecarStore,
    Source, Strategy, TranscriptError,
};
use cwl_infer::Inferrer;
use rustc_hash::FxHashMap;

use crate::event::RecallEvent;
use crate::recall::Transcript;
use crate::wire::{CallNames, Item, Layout, Mark, Unit, Wire, render};

/// A `recall` result the proxy answered in place of the client's: where
/// it is in the history, and the answer.
#[derive(Debug, Clone)]
struct Answer {
    item: usize,
    call_id: String,
    content: String,
    is_error: bool,
}

impl Answer {
    /// Puts the answer in its item of `items`, if that item holds its result.
    fn apply(&self, wire: &dyn Wire, items: &mut [Item]) {
        let Some(item) = items.get_mut(self.item) else {
            return;
        };
        if let Some(value) = wire.answer(item.value(), &self.call_id, &self.content, self.is_error)
        {
            *item = Item::of(value);
        }
    }
}

/// A view past this fraction (1/n) of its headroom, from the low-water
/// mark up to τ, takes its pass early at a request whose prefix the client
/// or its provider breaks anyway. Measured on Codex CLI 0.80 traffic at
/// τ 40k: a quarter keeps the proxy's own breaks within 5 points of the
/// client's, a half leaves one more, and none loses content.
const EARLY_PASS_DIVISOR: usize = 4;

/// A pass at a request whose prefix breaks anyway runs at this share of τ
/// (in percent), so down to the low-water share of that: rewriting more
/// there costs no extra cache write, and leaves room for more requests
/// before a pass of the proxy's own breaks the prefix again. Measured on
/// Codex CLI 0.80 and Claude Code 2.0.77 traffic at τ 40k (docs/results.md):
/// 70% takes 2.1–2.9 points off the proxy's breaks on Claude Code and
/// keeps more content there (87.1% against 80.0% on 24 rounds); 100% is
/// the pass at τ, and below 70% nothing more changes. At τ 60k it costs
/// a short Claude Code session two requests' content.
const BREAK_PASS_PERCENT: usize = 70;

/// What a reported prompt size did to a conversation's count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Calibrated {
    /// The count now follows it.
    Changed,
    /// It gave the calibration already in force.
    Unchanged,
    /// It was not trusted, for the reason given; `first` for the
    /// conversation's first such figure (the one worth a warning: a
    /// client that sends side requests with other tools under one history
    /// gets one per request).
    Ignored {
        /// Why.
        why: String,
        /// Whether no figure of this conversation was refused before.
        first: bool,
    },
}

/// The engine of one conversation.
pub struct Engine {
    context: Box<dyn Strategy>,
    inferrer: Inferrer,
    layout: Layout,
    names: CallNames,
    rejected: Vec<String>,
    breakpoint: Option<Source>,
    /// The system prompt pushed before the first item, if any.
    system: Option<Message>,
    /// Arguments of the `recall` calls pushed and not yet answered, by id.
    recalls: FxHashMap<String, String>,
    /// The `recall` results answered for the client, in history order.
    answers: Vec<Answer>,
    /// A hash of each item of the client's previous request, to tell when
    /// the client edits what it sent before.
    sent: Vec<u64>,
    /// Whether a reported prompt size was refused for calibration yet.
    refused: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("context", &self.context)
            .field("items", &self.layout.items())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A new conversation managed by `context` (a fresh strategy), whose
    /// system prompt (sent in its own field) counts toward the budget.
    pub fn new(mut context: Box<dyn Strategy>, system: Option<String>) -> Self {
        let system = system.map(Message::system);
        if let Some(system) = &system {
            // A system message is always accepted.
            let _ = context.push(system.clone());
        }
        Engine {
            context,
            inferrer: Inferrer::new(),
            layout: Layout::new(u64::from(system.is_some())),
            names: CallNames::default(),
            rejected: Vec::new(),
            breakpoint: None,
            system,
            recalls: FxHashMap::default(),
            answers: Vec::new(),
            sent: Vec::new(),
            refused: false,
        }
    }

    /// Rebuilds a conversation that left memory from its stored records:
    /// the same pushes, inferred episodes, passes and calibrations in the
    /// same order give
    /// the same engine, view and cache breakpoint. The stored messages must
    /// be exactly those of `items` (after the system prompt, if the
    /// conversation had one); otherwise nothing is rebuilt. With `recall`,
    /// the `recall` results among `items` are first given the answers
    /// stored for them (see [`Engine::extend`]).
    pub fn rebuild(
        context: Box<dyn Strategy>,
        wire: &dyn Wire,
        items: &mut [Item],
        records: &[Record],
        recall: bool,
    ) -> Result<Engine, String> {
        let stored: Vec<&Message> = records
            .iter()
            .filter_map(|record| match record {
                Record::Message { message, .. } => Some(message),
                _ => None,
            })
            .collect();
        let answers = if recall {
            restore_answers(wire, items, &stored)
        } else {
            Vec::new()
        };
        let mut names = CallNames::default();
        let units = wire.units(items, &mut names);
        let expected: Vec<&Message> = units.iter().flat_map(|u| &u.messages).collect();
        let prologue = stored
            .len()
            .checked_sub(expected.len())
            .filter(|&p| p == 0 || (p == 1 && matches!(stored[0], Message::System { .. })))
            .ok_or_else(|| {
                format!(
                    "the stored conversation has {} messages where the request's history makes {}",
                    stored.len(),
                    expected.len()
                )
            })?;
        if stored[prologue..] != expected[..] {
            return Err("the stored messages differ from the request's history".into());
        }
        let mut engine = Engine {
            context,
            inferrer: Inferrer::new(),
            layout: Layout::new(prologue as u64),
            names,
            rejected: Vec::new(),
            breakpoint: None,
            system: (prologue == 1).then(|| Message::clone(stored[0])),
            recalls: FxHashMap::default(),
            answers,
            sent: Vec::new(),
            refused: false,
        };
        for record in records {
            match record {
                Record::Message { message, .. } => engine
                    .push(message.clone())
                    .map_err(|e| format!("a stored message cannot be replayed: {e}"))?,
                // At the budget it ran at: a pass that came early ran
                // below the configured one.
                Record::Enforce { budget, .. } => {
                    let budget = usize::try_from(*budget)
                        .ok()
                        .filter(|&budget| budget > 0)
                        .unwrap_or_else(|| engine.context.budget());
                    engine.enforce_at(budget);
                }
                // Stored because the strategy minded it; if it does not
                // now, the stored state cannot be reached.
                Record::Idle { seconds } if !engine.idle(*seconds) => {
                    return Err(format!(
                        "the strategy does not mind the stored idle gap of {seconds} s"
                    ));
                }
                Record::Calibrate { local, reported } => {
                    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
                    engine.context.calibrate(size(*local), size(*reported));
                }
                Record::SideCall { id, result, .. } => {
                    // The strategy asks again at the same point and gets
                    // the stored answer; asking anything else means the
                    // stored state cannot be reached.
                    match engine.context.side_request() {
                        Some(request) if request.id == *id => {}
                        Some(request) => {
                            return Err(format!(
                                "the strategy asks for side call {} where the store answers {id}",
                                request.id
                            ));
                        }
                        None => {
                            return Err(format!(
                                "the strategy does not ask for the stored side call {id}"
                            ));
                        }
                    }
                    engine.context.side_result(*id, result.clone());
                }
                _ => {}
            }
        }
        engine.rejected.clear();
        // What the client sent before is what it sends now: no break.
        engine.sent = items.iter().map(Item::content_hash).collect();
        // Written or logged when they first came.
        engine.context.take_notes();
        engine.context.take_sidecars();
        for unit in &units {
            engine.layout.add(unit);
        }
        Ok(engine)
    }

    /// Tokens the engine counts for the view, before calibration.
    pub fn counted(&self) -> usize {
        self.context.counted_tokens()
    }

    /// Calibrates the count with the provider's figure for a request the
    /// engine counted as `local`, unless no tokenizer difference explains
    /// it ([`cwl::untrusted_report`]; `window` is the model's context
    /// window): a single wrong `usage` would otherwise make the next pass
    /// evict for good.
    pub fn calibrate(
        &mut self,
        local: usize,
        reported: usize,
        window: Option<usize>,
    ) -> Calibrated {
        if let Some(why) = cwl::untrusted_report(local, reported, window) {
            let first = !std::mem::replace(&mut self.refused, true);
            return Calibrated::Ignored { why, first };
        }
        let offset = reported as i64 - local as i64;
        if offset == self.context.calibration_offset() {
            return Calibrated::Unchanged;
        }
        self.context.calibrate(local, reported);
        Calibrated::Changed
    }

    /// Wire items pushed so far.
    pub fn items(&self) -> usize {
        self.layout.items()
    }

    /// How many `recall` results were answered for the client so far.
    pub fn recalls(&self) -> usize {
        self.answers.len()
    }

    /// The `recall` results answered for the client, from the `from`th on.
    pub fn recall_events(&self, from: usize) -> Vec<RecallEvent> {
        self.answers
            .iter()
            .skip(from)
            .map(|answer| RecallEvent {
                call_id: answer.call_id.clone(),
                ok: !answer.is_error,
                bytes: answer.content.len(),
            })
            .collect()
    }

    /// Gives the `recall` results among the items already pushed the
    /// answers they got when they were pushed (the client resends its own
    /// error text for them with every request).
    pub fn restate(&self, wire: &dyn Wire, items: &mut [Item]) {
        let known = self.layout.items().min(items.len());
        for answer in self.answers.iter().filter(|a| a.item < known) {
            answer.apply(wire, items);
        }
    }

    /// Pushes the items after those already pushed, with the episodes the
    /// inferrer finds before each message; returns the messages pushed.
    /// With `recall` (the proxy offered the tool), each result answering a
    /// `recall` call is first answered by the strategy (reading folded
    /// payloads from these sidecars): its item in `items` and the message
    /// pushed carry the answer instead of the client's text.
    /// On error the conversation cannot go on (its engine no longer
    /// matches the client's history).
    pub fn extend(
        &mut self,
        wire: &dyn Wire,
        items: &mut [Item],
        recall: Option<&dyn SidecarStore>,
    ) -> Result<Vec<Message>, TranscriptError> {
        let from = self.layout.items().min(items.len());
        let mut at = from;
        let mut pushed = Vec::new();
        for mut unit in wire.units(&items[from..], &mut self.names) {
            if let Some(sidecars) = recall {
                self.answer_recalls(wire, items, at, &mut unit, sidecars);
            }
            for message in &unit.messages {
                self.push(message.clone())?;
                pushed.push(message.clone());
            }
            self.layout.add(&unit);
            at += unit.items;
        }
        Ok(pushed)
    }

    /// Answers the `recall` results of `unit` (whose items start at
    /// `at`) as the agent would, after the call and before its result are
    /// pushed: rewrites their items and converts the unit again.
    fn answer_recalls(
        &mut self,
        wire: &dyn Wire,
        items: &mut [Item],
        at: usize,
        unit: &mut Unit,
        sidecars: &dyn SidecarStore,
    ) {
        let asked: Vec<(String, String)> = unit
            .messages
            .iter()
            .filter_map(|message| match message {
                Message::ToolResult(result) if result.tool_name == RECALL => self
                    .recalls
                    .get(&result.call_id)
                    .map(|arguments| (result.call_id.clone(), arguments.clone())),
                _ => None,
            })
            .collect();
        if asked.is_empty() {
            return;
        }
        let span = at..at + unit.items;
        let answers: Vec<Answer> = {
            let transcript = Transcript::new(self.system.as_ref(), wire, &items[..at]);
            asked
                .into_iter()
                .filter_map(|(call_id, arguments)| {
                    let (content, is_error) =
                        match self.context.recall_with(&arguments, &transcript, sidecars) {
                            Ok(text) => (text, false),
                            Err(error) => (error, true),
                        };
                    let item = span
                        .clone()
                        .find(|&k| wire.answer(items[k].value(), &call_id, "", false).is_some())?;
                    Some(Answer {
                        item,
                        call_id,
                        content,
                        is_error,
                    })
                })
                .collect()
        };
        let originals: Vec<Item> = span
            .clone()
            .map(|k| Item::new(items[k].raw.clone()))
            .collect();
        for answer in &answers {
            answer.apply(wire, items);
        }
        let mut names: CallNames = unit
            .messages
            .iter()
            .filter_map(|message| match message {
                Message::ToolResult(result) => {
                    Some((result.call_id.clone(), result.tool_name.clone()))
                }
                _ => None,
            })
            .collect();
        let mut again = wire.units(&items[span.clone()], &mut names);
        if again.len() == 1 && again[0].items == unit.items {
            *unit = again.remove(0);
            self.answers.extend(answers);
        } else {
            for (k, original) in span.zip(originals) {
                items[k] = original;
            }
            self.rejected.push(
                "a recall result could not be answered in the client's format; it goes as the client sent it"
                    .to_string(),
            );
        }
    }

    /// Pushes one message after the annotations inferred before it.
    fn push(&mut self, message: Message) -> Result<(), TranscriptError> {
        for annotation in self.inferrer.before(&message) {
            if let Err(error) = self.context.annotate(annotation.clone()) {
                self.rejected
                    .push(format!("inferred {annotation:?} rejected: {error}"));
            }
        }
        match &message {
            Message::Assistant { content } => {
                for block in content {
                    if let Block::ToolCall(call) = block
                        && call.name == RECALL
                    {
                        self.recalls.insert(call.id.clone(), call.arguments.clone());
                    }
                }
            }
            Message::ToolResult(result) => {
                self.recalls.remove(&result.call_id);
            }
            _ => {}
        }
        self.context.push(message).map(|_| ())
    }

    /// Tells the strategy the conversation sat idle `seconds` since its
    /// previous request, before the pass; true when the strategy minded
    /// it (then the gap is stored, for a rebuild).
    pub fn idle(&mut self, seconds: u64) -> bool {
        self.context.idle(seconds)
    }

    /// Enforces the budget before the request goes upstream. When the
    /// pass changed the view, the cache breakpoint moves to the last
    /// changed message (or the one before the first change): eviction
    /// takes the oldest episodes first, so the next pass changes what
    /// comes after it and the prefix up to it stays cached.
    ///
    /// When this request breaks the cached prefix anyway (`prefix_breaks`,
    /// from [`Engine::prefix_breaks`]), the pass goes deeper: a view past
    /// τ, or past a quarter of its headroom (from the low-water mark up to
    /// τ), takes its pass now at [`BREAK_PASS_PERCENT`] of τ (so down to
    /// the low-water share of that), rather than break the prefix again a
    /// few requests later.
    pub fn enforce(&mut self, prefix_breaks: bool) -> Report {
        let config = self.context.config();
        let (budget, floor) = (config.budget, config.floor());
        let tokens = self.context.tokens();
        let due =
            tokens > budget || tokens > floor + (budget - floor.min(budget)) / EARLY_PASS_DIVISOR;
        let deep = prefix_breaks && self.context.keeps_prologue() && due;
        let budget = if deep {
            (tokens - 1).min(budget * BREAK_PASS_PERCENT / 100)
        } else {
            budget
        };
        self.enforce_at(budget)
    }

    /// Whether this request's prompt breaks the previous one's cached
    /// prefix before any pass: it is the first this engine sees (a new
    /// conversation or a branch; a rebuilt one knows what was sent), the
    /// client changed an item it sent before (`items` is its history as it
    /// now sends it; cache breakpoints moved are no change), or `pushed`,
    /// the messages it added, start a user turn for a model whose provider
    /// then drops the earlier turns' reasoning. Remembers `items` for the
    /// next request.
    pub fn prefix_breaks(&mut self, items: &[Item], pushed: &[Message]) -> bool {
        // Only CWL passes early; the others need no hashing.
        if !self.context.keeps_prologue() {
            return false;
        }
        let hashes: Vec<u64> = items.iter().map(Item::content_hash).collect();
        let edited = self.sent.is_empty()
            || hashes.len() < self.sent.len()
            || self.sent.iter().zip(&hashes).any(|(was, now)| was != now);
        self.sent = hashes;
        let drops_reasoning = self.context.config().reasoning == cwl::ReasoningScope::CurrentTurn
            && pushed
                .iter()
                .any(|message| matches!(message, Message::User { .. }));
        edited || drops_reasoning
    }

    /// The pass at `budget` (the configured one unless a pass came early).
    fn enforce_at(&mut self, budget: usize) -> Report {
        let configured = self.context.budget();
        if budget != configured {
            self.context.set_budget(budget);
        }
        let mut report = self.context.enforce();
        if budget != configured {
            self.context.set_budget(configured);
        }
        report.warnings.append(&mut self.rejected);
        if report.evicted() {
            let view: Vec<Source> = self.context.view_sources().map(|(s, _)| s).collect();
            let changed = view.iter().rposition(|s| !matches!(s, Source::Pushed(_)));
            let before = report.first_changed.and_then(|at| at.checked_sub(1));
            self.breakpoint = changed.max(before).and_then(|at| view.get(at).copied());
        }
        report
    }

    /// The history to send: the view in wire form (see [`render()`]), with
    /// a cache breakpoint of this `cache_control` value when one is given.
    pub fn render(
        &self,
        wire: &dyn Wire,
        items: &[Item],
        cache: Option<&serde_json::Value>,
    ) -> String {
        let mark = self
            .breakpoint
            .zip(cache)
            .map(|(source, control)| Mark { source, control });
        render(wire, items, &self.layout, self.context.view_sources(), mark)
    }

    /// Sidecar files to write before the view pointing to them is sent.
    pub fn take_sidecars(&mut self) -> Vec<SidecarFile> {
        self.context.take_sidecars()
    }

    /// What the strategy wants logged since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        self.context.take_notes()
    }

    /// The engine's context strategy, for inspection.
    pub fn context(&self) -> &dyn Strategy {
        self.context.as_ref()
    }
}

/// Gives the `recall` results among `items` the answers `stored` holds
/// for them (the messages as pushed), and says where they are.
fn restore_answers(wire: &dyn Wire, items: &mut [Item], stored: &[&Message]) -> Vec<Answer> {
    let mut calls: Vec<&str> = Vec::new();
    let mut results: FxHashMap<&str, (&str, bool)> = FxHashMap::default();
    for message in stored {
        match message {
            Message::Assistant { content } => {
                calls.extend(content.iter().filter_map(|block| match block {
                    Block::ToolCall(call) if call.name == RECALL => Some(call.id.as_str()),
                    _ => None,
                }));
            }
            Message::ToolResult(result) if calls.contains(&result.call_id.as_str()) => {
                results.insert(&result.call_id, (&result.content, result.is_error));
            }
            _ => {}
        }
    }
    if results.is_empty() {
        return Vec::new();
    }
    let mut at = 0;
    let mut answers = Vec::new();
    for unit in wire.units(items, &mut CallNames::default()) {
        for message in &unit.messages {
            let Message::ToolResult(result) = message else {
                continue;
            };
            let Some(&(content, is_error)) = results.get(result.call_id.as_str()) else {
                continue;
            };
            let held = (at..at + unit.items).find(|&k| {
                wire.answer(items[k].value(), &result.call_id, "", false)
                    .is_some()
            });
            if let Some(item) = held {
                let answer = Answer {
                    item,
                    call_id: result.call_id.clone(),
                    content: content.to_string(),
                    is_error,
                };
                answer.apply(wire, items);
                answers.push(answer);
            }
        }
        at += unit.items;
    }
    answers
}

/// The strategy's side calls, asked and answered through the engine.
impl SideCalls for Engine {
    fn side_request(&mut self) -> Option<SideRequest> {
        self.context.side_request()
    }

    fn side_result(&mut self, id: u64, result: Result<String, String>) {
        self.context.side_result(id, result);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cwl::Config;
    use cwl_session::strategy::StrategyName;

    use super::*;
    use crate::wire::openai_chat::OpenAiChat;

    fn rebuild(strategy: StrategyName, records: &[Record]) -> Result<Engine, String> {
        let raw = serde_json::value::RawValue::from_string(
            r#"{"role": "user", "content": "hi"}"#.to_string(),
        )
        .unwrap();
        Engine::rebuild(
            strategy.create(
                Config::with_budget(1_000),
                Arc::new(cwl::Estimate),
                Vec::new(),
            ),
            &OpenAiChat,
            &mut [Item::new(raw)],
            records,
            false,
        )
    }

    fn message() -> Record {
        Record::Message {
            timestamp: None,
            message: Message::user("hi"),
            usage: None,
            cost_usd: None,
        }
    }

    #[test]
    fn a_stored_side_call_the_strategy_does_not_ask_for_is_no_rebuild() {
        let side_call = Record::SideCall {
            id: 1,
            purpose: "planner".into(),
            result: Ok("<gc_plan></gc_plan>".into()),
        };
        let error = rebuild(StrategyName::Cwl, &[message(), side_call.clone()]).unwrap_err();
        assert_eq!(
            error,
            "the strategy does not ask for the stored side call 1"
        );
        for strategy in StrategyName::ALL {
            assert!(rebuild(strategy, &[message()]).is_ok(), "{strategy}");
        }
    }

    /// A task, then six rounds of a shell read of about 280 tokens and a
    /// write, as Chat Completions items.
    fn reads() -> Vec<Item> {
        let mut values = vec![serde_json::json!({"role": "user", "content": "tidy the package"})];
        let call = |values: &mut Vec<serde_json::Value>,
                    id: String,
                    command: String,
                    output: String| {
            let arguments = serde_json::json!({"command": command}).to_string();
            values.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": "shell", "arguments": arguments}}
            ]}));
            values.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": output}));
        };
        for k in 0..6 {
            let output: String = (0..40)
                .map(|line| format!("def f{k}_{line}(): pass\n"))
                .collect();
            call(
                &mut values,
                format!("call_r{k}"),
                format!("cat src/m{k}.py"),
                output,
            );
            call(
                &mut values,
                format!("call_w{k}"),
                format!("sed -i 's/pass/return {k}/' src/m{k}.py"),
                String::new(),
            );
        }
        values.into_iter().map(Item::of).collect()
    }

    /// A fresh CWL engine at `budget` for a model whose provider drops
    /// earlier turns' reasoning.
    fn drops_reasoning(budget: usize) -> Engine {
        let config = Config::with_budget(budget).reasoning(cwl::ReasoningScope::CurrentTurn);
        Engine::new(
            StrategyName::Cwl.create(config, Arc::new(cwl::Estimate), Vec::new()),
            None,
        )
    }

    #[test]
    fn a_pass_comes_early_only_where_the_prefix_breaks_anyway() {
        let mut items = reads();
        let tokens = {
            let mut engine = drops_reasoning(100_000);
            engine.extend(&OpenAiChat, &mut items, None).unwrap();
            engine.context().tokens()
        };
        // Past a quarter of the headroom between the floor (80%) and τ.
        let budget = tokens * 100 / 90;
        for (breaks, early) in [(true, true), (false, false)] {
            let mut engine = drops_reasoning(budget);
            let pushed = engine.extend(&OpenAiChat, &mut items, None).unwrap();
            assert!(engine.prefix_breaks(&items, &pushed), "a new user turn");
            let report = engine.enforce(breaks);
            assert_eq!(report.evicted(), early, "breaks: {breaks}");
            assert_eq!(engine.context().budget(), budget, "the budget is restored");
        }
        // Below a quarter of the headroom, no pass comes early.
        let mut engine = drops_reasoning(tokens * 100 / 84);
        let pushed = engine.extend(&OpenAiChat, &mut items, None).unwrap();
        assert!(engine.prefix_breaks(&items, &pushed));
        assert!(!engine.enforce(true).evicted());
    }

    #[test]
    fn only_a_first_request_a_changed_item_or_a_reasoning_drop_breaks_the_prefix() {
        let mut items = reads();
        let config = Config::with_budget(100_000);
        let mut engine = Engine::new(
            StrategyName::Cwl.create(config, Arc::new(cwl::Estimate), Vec::new()),
            None,
        );
        let pushed = engine.extend(&OpenAiChat, &mut items, None).unwrap();
        assert!(engine.prefix_breaks(&items, &pushed), "the first request");
        assert!(!engine.prefix_breaks(&items, &[]), "the same items");
        let mut edited = reads();
        edited[2] = Item::of(
            serde_json::json!({"role": "tool", "tool_call_id": "call_r0", "content": "[cleared]"}),
        );
        assert!(engine.prefix_breaks(&edited, &[]), "a result cleared");
        assert!(engine.prefix_breaks(&items[..4], &[]), "items dropped");
    }

    #[test]
    fn a_reported_size_no_tokenizer_explains_is_not_trusted() {
        let mut engine = drops_reasoning(100_000);
        engine.extend(&OpenAiChat, &mut reads(), None).unwrap();
        let local = engine.counted();
        let ignored = |c: Calibrated| match c {
            Calibrated::Ignored { first, .. } => Some(first),
            _ => None,
        };
        assert_eq!(
            ignored(engine.calibrate(local, 2 * local + 1, None)),
            Some(true)
        );
        assert_eq!(
            ignored(engine.calibrate(local, 10_000_000, Some(200_000))),
            Some(false),
            "warned about once"
        );
        assert_eq!(
            ignored(engine.calibrate(local, local + 10, Some(local))),
            Some(false)
        );
        assert_eq!(engine.context().calibration_offset(), 0, "nothing applied");
        assert_eq!(
            engine.calibrate(local, 2 * local, Some(local * 3)),
            Calibrated::Changed
        );
        assert_eq!(engine.context().calibration_offset(), local as i64);
        assert_eq!(
            engine.calibrate(local, 2 * local, None),
            Calibrated::Unchanged
        );
    }

    #[test]
    fn a_pass_due_where_the_prefix_breaks_anyway_goes_deeper() {
        let mut items = reads();
        let tokens = {
            let mut engine = drops_reasoning(100_000);
            engine.extend(&OpenAiChat, &mut items, None).unwrap();
            engine.context().tokens()
        };
        let budget = tokens * 100 / 110;
        let mut after = Vec::new();
        for breaks in [false, true] {
            let mut engine = drops_reasoning(budget);
            engine.extend(&OpenAiChat, &mut items, None).unwrap();
            let report = engine.enforce(breaks);
            assert!(report.evicted(), "breaks: {breaks}");
            let expected = if breaks {
                budget * BREAK_PASS_PERCENT / 100
            } else {
                budget
            };
            assert_eq!(report.budget, expected, "breaks: {breaks}");
            assert!(engine.context().tokens() <= expected);
            assert_eq!(engine.context().budget(), budget, "the budget is restored");
            after.push(engine.context().tokens());
        }
        assert!(after[1] < after[0], "{after:?}");
    }

    #[test]
    fn a_rebuild_replays_an_early_pass_at_its_own_budget() {
        let mut items = reads();
        let mut tokens_engine = drops_reasoning(100_000);
        tokens_engine.extend(&OpenAiChat, &mut items, None).unwrap();
        let budget = tokens_engine.context().tokens() * 100 / 90;
        let mut engine = drops_reasoning(budget);
        let pushed = engine.extend(&OpenAiChat, &mut items, None).unwrap();
        let breaks = engine.prefix_breaks(&items, &pushed);
        let report = engine.enforce(breaks);
        assert!(report.evicted());
        let mut records: Vec<Record> = pushed
            .iter()
            .map(|message| Record::Message {
                timestamp: None,
                message: message.clone(),
                usage: None,
                cost_usd: None,
            })
            .collect();
        records.push(Record::Enforce {
            budget: report.budget as u64,
            report: serde_json::to_value(&report).unwrap(),
        });
        let config = Config::with_budget(budget).reasoning(cwl::ReasoningScope::CurrentTurn);
        let rebuilt = Engine::rebuild(
            StrategyName::Cwl.create(config, Arc::new(cwl::Estimate), Vec::new()),
            &OpenAiChat,
            &mut items,
            &records,
            false,
        )
        .unwrap();
        let view = |engine: &Engine| engine.context().view().cloned().collect::<Vec<Message>>();
        assert_eq!(view(&rebuilt), view(&engine));
        assert_eq!(rebuilt.context().budget(), budget);
    }

    #[test]
    fn a_stored_idle_gap_the_strategy_does_not_mind_is_no_rebuild() {
        // No strategy minds a gap without a plan waiting for the cache.
        for strategy in StrategyName::ALL {
            let error = rebuild(strategy, &[message(), Record::Idle { seconds: 600 }]).unwrap_err();
            assert_eq!(
                error, "the strategy does not mind the stored idle gap of 600 s",
                "{strategy}"
            );
        }
    }
}
