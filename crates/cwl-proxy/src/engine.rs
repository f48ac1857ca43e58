//! One conversation's engine: what the proxy pushed, the episodes it
//! inferred, and where each engine message came from on the wire.

use cwl::{
    Block, Message, RECALL, Record, Report, SideRequest, SidecarFile, SidecarStore, Source,
    Strategy, TranscriptError,
};
use cwl_infer::Inferrer;
use rustc_hash::FxHashMap;

use crate::event::RecallEvent;
use crate::recall::Transcript;
use crate::side::Asks;
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
        };
        for record in records {
            match record {
                Record::Message { message, .. } => engine
                    .push(message.clone())
                    .map_err(|e| format!("a stored message cannot be replayed: {e}"))?,
                Record::Enforce { .. } => {
                    engine.enforce();
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
    /// engine counted as `local`; false when that changes nothing.
    pub fn calibrate(&mut self, local: usize, reported: usize) -> bool {
        let offset = reported as i64 - local as i64;
        let changes = offset != self.context.calibration_offset();
        if changes {
            self.context.calibrate(local, reported);
        }
        changes
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
    pub fn enforce(&mut self) -> Report {
        let mut report = self.context.enforce();
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
impl Asks for Engine {
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
    use cwl_agent::strategy::StrategyName;

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
