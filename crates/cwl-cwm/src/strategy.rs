//! The context-window manager as a [`cwl::Strategy`]: the pressure
//! monitor watches the prompt, and once it passes the orange threshold
//! (75% of the budget) the lowest-scored content goes first, by the
//! weighted hybrid scorer with BM25 relevance to the latest user turn as
//! its semantic term, until the prompt is back at that threshold. The same
//! rule as the lab's `cwm` replay policy, so the figures agree.
//!
//! Blocks are an assistant message's reasoning, its text, and each tool
//! call with its result (they leave together). Never evicted: system and
//! user messages, and the latest response with its results. The
//! `delimiter` protocol still answers (the model may mark episodes; a
//! shadow CWL context of the messages' skeletons keeps the episode graph),
//! but episodes do not steer eviction.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cwl::strategy::{Health, Saved, Strategy};
use cwl::tokens::{block_tokens, message_tokens};
use cwl::{
    Accepted, Annotation, Block, Checkpoint, Config, Context, DELIMITER, DelimiterError,
    DelimiterOutcome, Graph, Message, PaperOrder, Report, Source, TokenCounter, ToolCall, ToolSpec,
    TranscriptError, TranscriptStore,
};
use serde::{Deserialize, Serialize};

use crate::pressure::{Monitor, PressureEvent, Reading, Thresholds, Zone};
use crate::relevance::{DEFAULT_AVGDL, RelevanceIndex};
use crate::scorers::{BlockInfo, ContentType, Scorer};

/// The strategy's name as `--strategy` spells it.
pub const NAME: &str = "cwm";

/// Version of the saved state's format.
const STATE_VERSION: u32 = 1;

/// Utilisation past which health raises a critical alert.
pub const CRITICAL: f64 = 0.90;

/// How often later calls repeated a tool call (same tool, same arguments):
/// the reuse and recency-of-reference signals of the scorers.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Refs {
    last: Option<u64>,
    count: u32,
}

/// One message of the view.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    /// Its push index (0-based).
    push: u64,
    message: Message,
    /// The model response count when it came in.
    created: u64,
    tokens: usize,
    altered: bool,
}

/// What one scored block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Thinking,
    Text,
    /// The `n`-th tool call block of the message, with its result.
    Call(usize),
}

/// The context-window manager's state for one session.
pub struct Cwm {
    config: Config,
    counter: Arc<dyn TokenCounter>,
    /// The messages' skeletons (texts emptied, delimiter calls kept):
    /// answers the delimiter protocol and checks call/result pairing.
    shadow: Context,
    entries: Vec<Entry>,
    pushes: u64,
    total: usize,
    offset: i64,
    calibrated: bool,
    turn: u64,
    refs: HashMap<String, Refs>,
    /// Calls evicted before their result came: the result is dropped.
    dropped: HashSet<String>,
    evictions: u64,
    thresholds: Thresholds,
    monitor: Monitor,
    reading: Option<Reading>,
}

impl std::fmt::Debug for Cwm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cwm")
            .field("budget", &self.config.budget)
            .field("tokens", &self.tokens())
            .field("messages", &self.entries.len())
            .field("evictions", &self.evictions)
            .finish_non_exhaustive()
    }
}

/// The saved state (the monitor's readings are health, not view: a
/// restored strategy starts measuring afresh).
#[derive(Debug, Serialize, Deserialize)]
struct State {
    strategy: String,
    version: u32,
    config: Config,
    shadow: Checkpoint,
    entries: Vec<Entry>,
    pushes: u64,
    total: usize,
    offset: i64,
    calibrated: bool,
    turn: u64,
    refs: HashMap<String, Refs>,
    dropped: HashSet<String>,
    evictions: u64,
}

impl Cwm {
    /// An empty context offering `tools`, under `config`'s budget.
    pub fn new(config: Config, counter: Arc<dyn TokenCounter>, tools: Vec<ToolSpec>) -> Self {
        let mut unbounded = config.clone();
        unbounded.budget = usize::MAX;
        let shadow = Context::new(unbounded, Arc::clone(&counter), tools);
        let total = shadow.tools_tokens();
        Cwm {
            monitor: Monitor::new(config.budget),
            config,
            counter,
            shadow,
            entries: Vec::new(),
            pushes: 0,
            total,
            offset: 0,
            calibrated: false,
            turn: 0,
            refs: HashMap::new(),
            dropped: HashSet::new(),
            evictions: 0,
            thresholds: Thresholds::default(),
            reading: None,
        }
    }

    /// The strategy saved as `state` by [`Strategy::save`]; the counter
    /// must be the one the session counted with.
    pub fn restore(
        state: &serde_json::Value,
        counter: Arc<dyn TokenCounter>,
    ) -> Result<Self, String> {
        let state = State::deserialize(state).map_err(|e| e.to_string())?;
        if state.strategy != NAME {
            return Err(format!(
                "it was saved by strategy `{}`, not `{NAME}`",
                state.strategy
            ));
        }
        if state.version != STATE_VERSION {
            return Err(format!(
                "its format {} is not supported (this build reads {STATE_VERSION})",
                state.version
            ));
        }
        let shadow = Context::restore(state.shadow, Arc::clone(&counter), Arc::new(PaperOrder))
            .map_err(|e| e.to_string())?;
        Ok(Cwm {
            monitor: Monitor::new(state.config.budget),
            config: state.config,
            counter,
            shadow,
            entries: state.entries,
            pushes: state.pushes,
            total: state.total,
            offset: state.offset,
            calibrated: state.calibrated,
            turn: state.turn,
            refs: state.refs,
            dropped: state.dropped,
            evictions: state.evictions,
            thresholds: Thresholds::default(),
            reading: None,
        })
    }

    /// Where eviction starts and what it frees down to.
    fn limit(&self) -> usize {
        (self.config.budget as f64 * self.thresholds.orange) as usize
    }

    /// Index of the latest response: it and what follows are in flight.
    fn in_flight(&self) -> usize {
        self.entries
            .iter()
            .rposition(|entry| matches!(entry.message, Message::Assistant { .. }))
            .unwrap_or(self.entries.len())
    }

    /// Every evictable block with its score, lowest first.
    fn ranked(&self, task: &str) -> Vec<(usize, Part, usize)> {
        let in_flight = self.in_flight();
        let results: HashMap<&str, usize> = self
            .entries
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| match &entry.message {
                Message::ToolResult(result) => Some((result.call_id.as_str(), index)),
                _ => None,
            })
            .collect();
        let mut index = RelevanceIndex::new(DEFAULT_AVGDL);
        let mut keys = Vec::new();
        let mut blocks = Vec::new();
        for (at, entry) in self.entries.iter().enumerate() {
            match &entry.message {
                Message::User { content } => {
                    index.insert(&(at, usize::MAX), content);
                }
                Message::ToolResult(result) => index.insert(&(at, usize::MAX), &result.content),
                Message::Assistant { content } => {
                    let join = |reasoning: bool| {
                        content
                            .iter()
                            .filter_map(|block| match block {
                                Block::Reasoning { text, .. } if reasoning => Some(text.as_str()),
                                Block::Text { text } if !reasoning => Some(text.as_str()),
                                _ => None,
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    };
                    index.insert(&(at, 0), &join(true));
                    index.insert(&(at, 1), &join(false));
                    if at >= in_flight {
                        continue;
                    }
                    let tokens = |keep: fn(&Block) -> bool| -> usize {
                        content
                            .iter()
                            .filter(|block| keep(block))
                            .map(|block| block_tokens(self.counter.as_ref(), block))
                            .sum()
                    };
                    let thinking = tokens(|b| matches!(b, Block::Reasoning { .. }));
                    if thinking > 0 {
                        blocks.push((at, Part::Thinking, thinking, (at, 0)));
                        keys.push((at, 0));
                    }
                    let text = tokens(|b| matches!(b, Block::Text { .. }));
                    if text > 0 {
                        blocks.push((at, Part::Text, text, (at, 1)));
                        keys.push((at, 1));
                    }
                    for (n, call) in calls(content).enumerate() {
                        let result = results.get(call.id.as_str()).copied();
                        let tokens =
                            block_tokens(self.counter.as_ref(), &Block::ToolCall(call.clone()))
                                + result.map_or(0, |r| self.entries[r].tokens);
                        let key = (result.unwrap_or(at), usize::MAX);
                        blocks.push((at, Part::Call(n), tokens, key));
                        keys.push(key);
                    }
                }
                Message::System { .. } => {}
            }
        }
        let relevance: HashMap<(usize, usize), f64> = keys
            .iter()
            .copied()
            .zip(index.scores(task, &keys))
            .collect();
        let current = self.turn + 1;
        let mut scored: Vec<(f64, u64, usize, usize, Part, usize)> = blocks
            .into_iter()
            .map(|(at, part, tokens, key)| {
                let entry = &self.entries[at];
                let (content_type, refs, order) = match part {
                    Part::Thinking => (ContentType::Thinking, Refs::default(), 0),
                    Part::Text => (ContentType::Assistant, Refs::default(), 1),
                    Part::Call(n) => {
                        let id = match &entry.message {
                            Message::Assistant { content } => {
                                calls(content).nth(n).map(|c| c.id.as_str())
                            }
                            _ => None,
                        };
                        let refs = id
                            .and_then(|id| self.refs.get(id))
                            .copied()
                            .unwrap_or_default();
                        (ContentType::ToolResult, refs, 2 + n)
                    }
                };
                let block = BlockInfo {
                    content_type,
                    created: entry.created,
                    last_ref: refs.last,
                    refs: refs.count,
                    relevance: relevance.get(&key).copied(),
                    do_not_evict: false,
                };
                (
                    Scorer::Weighted.score(&block, current),
                    entry.created,
                    at,
                    order,
                    part,
                    tokens,
                )
            })
            .collect();
        scored.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.cmp(&b.1))
                .then(a.2.cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        scored
            .into_iter()
            .map(|(_, _, at, _, part, tokens)| (at, part, tokens))
            .collect()
    }

    /// Evicts lowest score first until `target` tokens are freed; returns
    /// the index of the first entry changed.
    fn evict(&mut self, target: usize) -> Option<usize> {
        let task = self
            .entries
            .iter()
            .rev()
            .find_map(|entry| match &entry.message {
                Message::User { content } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let ranked = self.ranked(&task);
        // Call ids by (entry, n) before any block moves.
        let ids: HashMap<(usize, usize), String> = ranked
            .iter()
            .filter_map(|&(at, part, _)| match (part, &self.entries[at].message) {
                (Part::Call(n), Message::Assistant { content }) => {
                    calls(content).nth(n).map(|call| ((at, n), call.id.clone()))
                }
                _ => None,
            })
            .collect();
        let mut gone: HashSet<usize> = HashSet::new();
        let mut first: Option<usize> = None;
        let before = self.total;
        for (at, part, _) in ranked {
            if before - self.total >= target {
                break;
            }
            if gone.contains(&at) {
                continue;
            }
            let mut touched = vec![at];
            let Message::Assistant { content } = &mut self.entries[at].message else {
                continue;
            };
            match part {
                Part::Thinking => content.retain(|b| !matches!(b, Block::Reasoning { .. })),
                Part::Text => content.retain(|b| !matches!(b, Block::Text { .. })),
                Part::Call(n) => {
                    let id = &ids[&(at, n)];
                    self.refs.remove(id);
                    content.retain(|b| !matches!(b, Block::ToolCall(call) if &call.id == id));
                    match self.entries.iter().position(
                        |e| matches!(&e.message, Message::ToolResult(r) if &r.call_id == id),
                    ) {
                        Some(result) => {
                            gone.insert(result);
                            touched.push(result);
                        }
                        None => {
                            self.dropped.insert(id.clone());
                        }
                    }
                }
            }
            let Message::Assistant { content } = &mut self.entries[at].message else {
                continue;
            };
            if content.iter().all(|b| matches!(b, Block::Reasoning { .. })) {
                gone.insert(at);
            }
            for index in touched {
                first = Some(first.map_or(index, |f: usize| f.min(index)));
                self.recount(index, gone.contains(&index));
            }
        }
        let mut index = 0;
        self.entries.retain(|_| {
            let keep = !gone.contains(&index);
            index += 1;
            keep
        });
        first.map(|first| first - gone.iter().filter(|&&g| g < first).count())
    }

    /// Recounts an altered entry (`gone`: it leaves the view).
    fn recount(&mut self, index: usize, gone: bool) {
        let entry = &mut self.entries[index];
        let tokens = if gone {
            0
        } else {
            message_tokens(self.counter.as_ref(), &entry.message)
        };
        self.total = self.total - entry.tokens + tokens;
        entry.tokens = tokens;
        entry.altered = true;
    }
}

/// A zone as health events name it.
fn zone_name(zone: Zone) -> &'static str {
    match zone {
        Zone::Green => "green",
        Zone::Yellow => "yellow",
        Zone::Orange => "orange",
        Zone::Red => "red",
    }
}

/// The tool call blocks of an assistant message, in order.
fn calls(content: &[Block]) -> impl Iterator<Item = &ToolCall> {
    content.iter().filter_map(|block| match block {
        Block::ToolCall(call) => Some(call),
        _ => None,
    })
}

/// The message with every text emptied, delimiter calls kept: all the
/// shadow context needs to answer the protocol and pair calls.
fn skeleton(message: &Message) -> Message {
    match message {
        Message::System { .. } => Message::system(""),
        Message::User { .. } => Message::user(""),
        Message::Assistant { content } => Message::Assistant {
            content: content
                .iter()
                .map(|block| match block {
                    Block::ToolCall(call) if call.name == DELIMITER => block.clone(),
                    Block::ToolCall(call) => {
                        Block::ToolCall(ToolCall::new(&call.id, &call.name, "{}"))
                    }
                    Block::Text { .. } => Block::Text {
                        text: String::new(),
                    },
                    Block::Reasoning { .. } => Block::Reasoning {
                        text: String::new(),
                        signature: None,
                    },
                })
                .collect(),
        },
        Message::ToolResult(result) => {
            Message::tool_result(&result.call_id, &result.tool_name, "", result.is_error)
        }
    }
}

impl Strategy for Cwm {
    fn name(&self) -> &'static str {
        NAME
    }

    fn push(&mut self, message: Message) -> Result<Vec<DelimiterOutcome>, TranscriptError> {
        let outcomes = self.shadow.push(skeleton(&message))?;
        let push = self.pushes;
        self.pushes += 1;
        match &message {
            Message::Assistant { content } => {
                self.turn += 1;
                let turn = self.turn;
                let earlier: Vec<(String, String, String)> = self
                    .entries
                    .iter()
                    .filter_map(|entry| match &entry.message {
                        Message::Assistant { content } => Some(calls(content)),
                        _ => None,
                    })
                    .flatten()
                    .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
                    .collect();
                for call in calls(content).filter(|c| c.name != DELIMITER) {
                    for (id, _, _) in earlier.iter().filter(|(_, name, arguments)| {
                        *name == call.name && *arguments == call.arguments
                    }) {
                        let refs = self.refs.entry(id.clone()).or_default();
                        refs.last = Some(turn);
                        refs.count += 1;
                    }
                }
            }
            Message::ToolResult(result) if self.dropped.remove(&result.call_id) => {
                return Ok(outcomes);
            }
            _ => {}
        }
        let tokens = message_tokens(self.counter.as_ref(), &message);
        self.total += tokens;
        self.entries.push(Entry {
            push,
            message,
            created: self.turn,
            tokens,
            altered: false,
        });
        Ok(outcomes)
    }

    fn annotate(&mut self, annotation: Annotation) -> Result<Accepted, DelimiterError> {
        self.shadow.annotate(annotation)
    }

    fn enforce(&mut self) -> Report {
        let before = self.tokens();
        let limit = self.limit();
        let first_changed = if before > limit {
            self.evict(before - limit)
        } else {
            None
        };
        if first_changed.is_some() {
            self.evictions += 1;
        }
        let after = self.tokens();
        let reported = self.calibrated.then_some(after);
        self.reading = Some(self.monitor.measure(self.total, reported));
        let budget = self.config.budget;
        let met = after <= budget;
        let in_flight: usize = self.entries[self.in_flight()..]
            .iter()
            .map(|e| e.tokens)
            .sum();
        let mut warnings = Vec::new();
        if !met {
            warnings.push(format!(
                "budget cannot be met: {after} tokens remain over the budget of {budget} once everything the context-window manager may evict is gone (system and user messages, the latest response and its results stay)"
            ));
        }
        Report {
            tokens_before: before,
            tokens_after: after,
            budget,
            floor: limit,
            budget_met: met,
            deferred: !met && after.saturating_sub(in_flight) <= budget,
            first_changed,
            folded: 0,
            episodes: Vec::new(),
            warnings,
        }
    }

    fn view_sources(&self) -> Box<dyn Iterator<Item = (Source, &Message)> + '_> {
        Box::new(self.entries.iter().map(|entry| {
            let source = if entry.altered {
                Source::Altered(entry.push)
            } else {
                Source::Pushed(entry.push)
            };
            (source, &entry.message)
        }))
    }

    fn tools(&self) -> &[ToolSpec] {
        self.shadow.tools()
    }

    fn tokens(&self) -> usize {
        usize::try_from((self.total as i64).saturating_add(self.offset).max(0)).unwrap_or(0)
    }

    fn counted_tokens(&self) -> usize {
        self.total
    }

    fn budget(&self) -> usize {
        self.config.budget
    }

    fn set_budget(&mut self, budget: usize) {
        self.config.budget = budget;
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn calibration_offset(&self) -> i64 {
        self.offset
    }

    fn calibrate(&mut self, local: usize, reported: usize) {
        self.offset = reported as i64 - local as i64;
        self.calibrated = true;
    }

    fn graph(&self) -> &Graph {
        self.shadow.graph()
    }

    fn pending_calls(&self) -> Vec<&str> {
        self.shadow.pending_calls()
    }

    fn recall(&self, _: &str, _: &dyn TranscriptStore) -> Result<String, String> {
        Err(
            "recall is not available with the cwm strategy: it evicts single blocks, not episodes; run the tool again if you need its output"
                .to_string(),
        )
    }

    fn save(&self) -> Result<Saved, serde_json::Error> {
        let shadow = self.shadow.checkpoint();
        let state = State {
            strategy: NAME.to_string(),
            version: STATE_VERSION,
            config: self.config.clone(),
            shadow,
            entries: self.entries.clone(),
            pushes: self.pushes,
            total: self.total,
            offset: self.offset,
            calibrated: self.calibrated,
            turn: self.turn,
            refs: self.refs.clone(),
            dropped: self.dropped.clone(),
            evictions: self.evictions,
        };
        Ok(Saved {
            pushes: self.pushes,
            state: serde_json::to_value(&state)?,
        })
    }

    fn health(&self) -> Option<Health> {
        let reading = self.reading.as_ref()?;
        let utilisation = self.tokens() as f64 / self.config.budget.max(1) as f64;
        let mut alerts = Vec::new();
        if utilisation > CRITICAL {
            alerts.push(format!(
                "critical: the context is at {:.0}% of the budget (over {:.0}%)",
                utilisation * 100.0,
                CRITICAL * 100.0
            ));
        }
        for event in &reading.events {
            if let PressureEvent::VelocitySpike { velocity, baseline } = event {
                alerts.push(format!(
                    "velocity spike: {velocity:.0} tokens per call, over 3× the baseline of {baseline:.0}"
                ));
            }
        }
        Some(Health {
            utilisation,
            zone: zone_name(self.thresholds.zone(utilisation)).to_string(),
            velocity: reading.velocity,
            turns_until_red: reading.turns_until_red,
            provider_counted: self.calibrated,
            evictions: self.evictions,
            alerts,
        })
    }
}

#[cfg(test)]
mod tests {
    use cwl::{Estimate, delimiter_spec};

    use super::*;

    fn cwm(budget: usize) -> Cwm {
        Cwm::new(
            Config::with_budget(budget),
            Arc::new(Estimate),
            vec![delimiter_spec()],
        )
    }

    /// Step `i`: reasoning, text and a read of a file, with its result.
    fn step(strategy: &mut dyn Strategy, i: usize, topic: &str) {
        let call = ToolCall::new(
            format!("c{i}"),
            "read",
            format!("{{\"path\":\"{topic}{i}.rs\"}}"),
        );
        strategy
            .push(Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: format!("thinking about step {i} ").repeat(10),
                        signature: None,
                    },
                    Block::Text {
                        text: format!("reading {topic} file {i}"),
                    },
                    Block::ToolCall(call),
                ],
            })
            .unwrap();
        strategy
            .push(Message::tool_result(
                format!("c{i}"),
                "read",
                format!("fn {topic}_{i}() {{ {topic} handling code }}\n").repeat(20),
                false,
            ))
            .unwrap();
    }

    fn session(strategy: &mut dyn Strategy, steps: usize) -> Vec<Report> {
        strategy
            .push(Message::system("You are a coding agent."))
            .unwrap();
        let mut reports = Vec::new();
        for i in 0..steps {
            if i % 10 == 0 {
                strategy
                    .push(Message::user(format!("task {}: fix the parser", i / 10)))
                    .unwrap();
            }
            reports.push(strategy.enforce());
            step(strategy, i, if i % 3 == 0 { "parser" } else { "logger" });
        }
        reports.push(strategy.enforce());
        reports
    }

    /// The guarantees every strategy keeps, checked on a view.
    fn check_view(view: &[Message], users: usize) {
        assert_eq!(
            view.iter()
                .filter(|m| matches!(m, Message::User { .. }))
                .count(),
            users,
            "user turns kept"
        );
        let mut open: HashSet<String> = HashSet::new();
        for message in view {
            match message {
                Message::Assistant { content } => {
                    assert!(
                        content
                            .iter()
                            .any(|b| !matches!(b, Block::Reasoning { .. })),
                        "no empty or reasoning-only assistant message"
                    );
                    assert!(
                        open.is_empty(),
                        "every earlier call has its result: {open:?}"
                    );
                    open.extend(calls(content).map(|c| c.id.clone()));
                }
                Message::ToolResult(result) => {
                    assert!(
                        open.remove(&result.call_id),
                        "result {} has its call",
                        result.call_id
                    )
                }
                _ => {}
            }
        }
    }

    #[test]
    fn a_long_session_stays_under_the_orange_line_with_its_guarantees() {
        let mut strategy = cwm(3_000);
        let reports = session(&mut strategy, 60);
        assert!(reports.iter().any(|r| r.evicted()), "eviction happened");
        for report in &reports {
            assert!(report.budget_met, "{report:?}");
            if report.evicted() {
                assert!(report.tokens_after <= report.floor, "{report:?}");
            }
        }
        let view: Vec<Message> = strategy.view().cloned().collect();
        check_view(&view, 6);
        assert!(matches!(view[0], Message::System { .. }));
        // The latest response and its result are untouched.
        let n = view.len();
        assert!(matches!(&view[n - 2], Message::Assistant { content } if content.len() == 3));
        assert!(matches!(&view[n - 1], Message::ToolResult(r) if r.call_id == "c59"));
        assert!(
            strategy.tokens() <= 3_000 * 3 / 4 + 600,
            "{}",
            strategy.tokens()
        );
    }

    #[test]
    fn the_same_calls_give_the_same_view_and_a_restored_state_continues_alike() {
        let mut one = cwm(3_000);
        let mut two = cwm(3_000);
        session(&mut one, 40);
        session(&mut two, 40);
        assert!(one.view().eq(two.view()));
        let saved = one.save().unwrap();
        assert_eq!(saved.pushes, 1 + 4 + 80);
        let mut restored = Cwm::restore(&saved.state, Arc::new(Estimate)).unwrap();
        assert!(restored.view().eq(one.view()));
        assert_eq!(restored.tokens(), one.tokens());
        for strategy in [&mut one as &mut dyn Strategy, &mut restored] {
            strategy.push(Message::user("task 9: the logger")).unwrap();
            for i in 40..55 {
                strategy.enforce();
                step(strategy, i, "logger");
            }
            strategy.enforce();
        }
        assert!(restored.view().eq(one.view()));
        let wrong = serde_json::json!({"strategy": "cwl"});
        assert!(Cwm::restore(&wrong, Arc::new(Estimate)).is_err());
    }

    #[test]
    fn content_about_the_latest_task_outlives_newer_content_about_nothing() {
        let mut strategy = cwm(100_000);
        strategy.push(Message::user("fix the parser")).unwrap();
        step(&mut strategy, 0, "parser");
        step(&mut strategy, 1, "logger");
        step(&mut strategy, 2, "logger");
        let calls: Vec<usize> = strategy
            .ranked("fix the parser")
            .into_iter()
            .filter(|(_, part, _)| matches!(part, Part::Call(_)))
            .map(|(at, _, _)| at)
            .collect();
        // Entries: user 0, step 0 at 1, step 1 at 3, step 2 (in flight) at 5.
        assert_eq!(
            calls,
            [3, 1],
            "the newer logger read goes before the parser read"
        );
        let calls: Vec<usize> = strategy
            .ranked("fix the logger")
            .into_iter()
            .filter(|(_, part, _)| matches!(part, Part::Call(_)))
            .map(|(at, _, _)| at)
            .collect();
        assert_eq!(calls, [1, 3], "and the other way round");
    }

    #[test]
    fn delimiter_calls_are_answered_and_a_dropped_call_drops_its_result() {
        let mut strategy = cwm(1_000);
        strategy.push(Message::user("go")).unwrap();
        let start = r#"{"action":"start","name":"look","type":"expl"}"#;
        let outcomes = strategy
            .push(Message::Assistant {
                content: vec![Block::ToolCall(ToolCall::new("d1", DELIMITER, start))],
            })
            .unwrap();
        assert_eq!(outcomes.len(), 1);
        assert!(!outcomes[0].is_error());
        assert_eq!(strategy.active_episode().map(|(n, _)| n), Some("look"));
        assert_eq!(strategy.pending_calls(), ["d1"]);
        assert!(matches!(
            strategy.push(Message::tool_result("nope", "read", "x", false)),
            Err(TranscriptError::UnknownCall(_))
        ));
        assert_eq!(
            strategy.view().count(),
            2,
            "a refused message changes nothing"
        );
        strategy.dropped.insert("d1".to_string());
        strategy
            .push(Message::tool_result(
                "d1",
                DELIMITER,
                outcomes[0].text(),
                false,
            ))
            .unwrap();
        assert_eq!(
            strategy.view().count(),
            2,
            "the result of an evicted call is dropped"
        );
        assert!(strategy.pending_calls().is_empty());
    }

    #[test]
    fn health_reports_zone_velocity_and_a_critical_alert() {
        let mut strategy = cwm(10_000);
        assert!(
            strategy.health().is_none(),
            "no reading before the first pass"
        );
        strategy.push(Message::user("go")).unwrap();
        for i in 0..3 {
            strategy.enforce();
            step(&mut strategy, i, "parser");
        }
        strategy.enforce();
        let health = strategy.health().unwrap();
        assert_eq!(health.zone, "green");
        assert!(health.velocity > 0.0 && health.turns_until_red.is_some());
        assert!(health.alerts.is_empty() && !health.provider_counted);
        strategy.calibrate(strategy.counted_tokens(), 9_500);
        strategy.set_budget(10_000);
        let report = strategy.enforce();
        assert!(report.evicted(), "95% is past the orange line");
        strategy.calibrate(strategy.counted_tokens(), 9_500);
        let health = strategy.health().unwrap();
        assert!(health.provider_counted);
        assert_eq!(health.zone, "red");
        assert!(
            health.alerts[0].starts_with("critical"),
            "{:?}",
            health.alerts
        );
    }

    /// A tiny deterministic generator (xorshift), so the random sessions
    /// below are the same on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below
        }
    }

    /// One random step: sometimes a user turn, then a response with any
    /// mix of reasoning, text and calls (delimiter ones included), then
    /// its results.
    fn random_step(strategy: &mut dyn Strategy, rng: &mut Rng, step: u64) -> usize {
        let user = rng.next(6) == 0;
        if user {
            strategy
                .push(Message::user(format!(
                    "task {step}: check module {}",
                    rng.next(9)
                )))
                .unwrap();
        }
        let mut content = Vec::new();
        if rng.next(2) == 0 {
            content.push(Block::Reasoning {
                text: "think ".repeat(1 + rng.next(80) as usize),
                signature: (rng.next(3) == 0).then(|| "sig".to_string()),
            });
        }
        if rng.next(2) == 0 {
            content.push(Block::Text {
                text: format!("module {} ", rng.next(9)).repeat(1 + rng.next(20) as usize),
            });
        }
        let calls = rng.next(3);
        for n in 0..calls {
            let name = if rng.next(5) == 0 { DELIMITER } else { "read" };
            content.push(Block::ToolCall(ToolCall::new(
                format!("s{step}c{n}"),
                name,
                format!("{{\"path\":\"m{}.rs\"}}", rng.next(9)),
            )));
        }
        if content.iter().all(|b| matches!(b, Block::Reasoning { .. })) {
            content.push(Block::Text { text: "ok".into() });
        }
        let outcomes = strategy.push(Message::Assistant { content }).unwrap();
        for n in 0..calls {
            let id = format!("s{step}c{n}");
            let (name, text) = match outcomes.iter().find(|o| o.call_id == id) {
                Some(outcome) => (DELIMITER, outcome.text()),
                None => (
                    "read",
                    format!("fn f{step}() {{}} // module {}\n", rng.next(9))
                        .repeat(1 + rng.next(60) as usize),
                ),
            };
            strategy
                .push(Message::tool_result(id, name, text, false))
                .unwrap();
        }
        usize::from(user)
    }

    #[test]
    fn random_sessions_keep_every_guarantee_and_restore_anywhere() {
        for seed in 1..=12u64 {
            let budget = 1_500 + 500 * (seed as usize % 7);
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut strategy = cwm(budget);
            strategy.push(Message::system("system")).unwrap();
            strategy.push(Message::user("first task")).unwrap();
            let mut users = 1;
            let mut restored: Option<Cwm> = None;
            for step in 0..80 {
                let before = strategy
                    .view()
                    .filter(|m| matches!(m, Message::User { .. }))
                    .count();
                let latest: Vec<Message> = {
                    let view: Vec<Message> = strategy.view().cloned().collect();
                    let at = view
                        .iter()
                        .rposition(|m| matches!(m, Message::Assistant { .. }));
                    at.map(|at| view[at..].to_vec()).unwrap_or_default()
                };
                let report = strategy.enforce();
                let view: Vec<Message> = strategy.view().cloned().collect();
                assert!(
                    view.ends_with(&latest),
                    "seed {seed} step {step}: the latest response is untouched"
                );
                if report.evicted() {
                    assert!(
                        report.tokens_after < report.tokens_before,
                        "seed {seed} step {step}"
                    );
                }
                assert_eq!(report.budget_met, report.tokens_after <= budget);
                assert_eq!(report.tokens_after, strategy.tokens());
                assert_eq!(
                    strategy.total,
                    strategy.shadow.tools_tokens()
                        + view
                            .iter()
                            .map(|m| message_tokens(&Estimate, m))
                            .sum::<usize>(),
                    "seed {seed} step {step}: the count follows the view"
                );
                check_view(&view, before);
                if let Some(other) = restored.as_mut() {
                    other.enforce();
                    assert!(
                        other.view().eq(strategy.view()),
                        "seed {seed} step {step}: restored copy agrees"
                    );
                }
                if step == 40 {
                    let saved = strategy.save().unwrap();
                    restored = Some(Cwm::restore(&saved.state, Arc::new(Estimate)).unwrap());
                }
                let mut copy_rng = Rng(rng.0);
                users += random_step(&mut strategy, &mut rng, step);
                if let Some(other) = restored.as_mut() {
                    random_step(other, &mut copy_rng, step);
                }
            }
            let view: Vec<Message> = strategy.view().cloned().collect();
            check_view(&view, users);
            assert!(strategy.evictions > 0, "seed {seed}: eviction happened");
        }
    }
}
