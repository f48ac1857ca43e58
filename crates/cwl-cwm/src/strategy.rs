//! The context-window manager as a [`cwl::Strategy`]: the pressure
//! monitor watches the prompt, and once it passes the orange threshold
//! (75% of the budget) the lowest-scored content goes first, by the
//! weighted hybrid scorer with BM25 relevance to the latest user turn as
//! its semantic term, until the prompt is back at that threshold. The lab's
//! `cwm` replay policy drives this very strategy, so the figures agree.
//!
//! Blocks are an assistant message's reasoning, its text, and each tool
//! call with its result (they leave together). Never evicted: system and
//! user messages, and the latest response with its results. The
//! `delimiter` protocol still answers (the model may mark episodes; a
//! shadow CWL context of the messages' skeletons keeps the episode graph),
//! but episodes do not steer eviction.
//!
//! Under [`ReasoningScope::CurrentTurn`] (`Config::reasoning`) a user
//! message takes the reasoning of earlier turns out of the view, as the
//! engine's context does: the provider would neither show nor bill it, so
//! the totals, the zones and eviction count the prompt as billed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use cwl::Meter;
use cwl::strategy::{Health, Saved, SideCalls, SideRequest, Strategy};
use cwl::tokens::{block_tokens, message_tokens};
use cwl::{
    Block, Checkpoint, Config, Context, DELIMITER, DelimiterOutcome, Message, PaperOrder,
    ReasoningScope, Report, Source, TokenCounter, ToolCall, ToolSpec, TranscriptError,
    TranscriptStore,
};
use serde::{Deserialize, Serialize};

use crate::compress::{CompressionOptions, Level};
use crate::pressure::{Monitor, PressureEvent, Reading, Thresholds, Zone};
use crate::relevance::WindowIndex;
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
    /// How far progressive summarisation took it.
    #[serde(default)]
    level: Level,
    /// A compaction summary standing for earlier messages.
    #[serde(default)]
    summary: bool,
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
    meter: Meter,
    counter: Arc<dyn TokenCounter>,
    /// The messages' skeletons (texts emptied, delimiter calls kept):
    /// answers the delimiter protocol and checks call/result pairing.
    shadow: Context,
    entries: Vec<Entry>,
    pushes: u64,
    total: usize,
    turn: u64,
    refs: HashMap<String, Refs>,
    /// Calls evicted before their result came: the result is dropped.
    dropped: HashSet<String>,
    evictions: u64,
    thresholds: Thresholds,
    monitor: Monitor,
    reading: Option<Reading>,
    compression: CompressionOptions,
    jobs: Jobs,
    /// The working notes as shown in the view (a system message after the
    /// leading ones), and their text.
    notes: Option<(Message, usize)>,
    notes_text: String,
    samples: VecDeque<Sample>,
    /// Tokens pushed so far, for the burn rate.
    pushed_tokens: u64,
    /// Blocks evicted so far, for the eviction rate.
    evicted_blocks: u64,
    /// The window this one continues, when a bootstrap prompt opened it.
    bootstrapped_from: Option<u32>,
    /// The window's relevance index, by push and part, kept from one
    /// ranking to the next (a cache: not saved).
    relevance: std::sync::Mutex<WindowIndex<(u64, usize)>>,
}

impl std::fmt::Debug for Cwm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cwm")
            .field("budget", &self.meter.budget())
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
    #[serde(default)]
    compression: CompressionOptions,
    #[serde(default)]
    jobs: Jobs,
    #[serde(default)]
    notes_text: String,
    #[serde(default)]
    samples: VecDeque<Sample>,
    #[serde(default)]
    pushed_tokens: u64,
    #[serde(default)]
    evicted_blocks: u64,
    #[serde(default)]
    bootstrapped_from: Option<u32>,
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
            meter: Meter::new(config),
            counter,
            shadow,
            entries: Vec::new(),
            pushes: 0,
            total,
            turn: 0,
            refs: HashMap::new(),
            dropped: HashSet::new(),
            evictions: 0,
            thresholds: Thresholds::default(),
            reading: None,
            compression: CompressionOptions::default(),
            jobs: Jobs::default(),
            notes: None,
            notes_text: String::new(),
            samples: VecDeque::new(),
            pushed_tokens: 0,
            evicted_blocks: 0,
            bootstrapped_from: None,
            relevance: std::sync::Mutex::default(),
        }
    }

    /// The same with other compression settings (the cascade's
    /// thresholds, summary sizes, timeouts; `enabled: false` evicts only).
    pub fn with_compression(mut self, options: CompressionOptions) -> Self {
        self.thresholds = options.zones;
        self.monitor = Monitor::new(self.meter.budget()).with_thresholds(options.zones);
        self.compression = options;
        self
    }

    /// The compression settings in force.
    pub fn compression(&self) -> &CompressionOptions {
        &self.compression
    }

    /// The working notes kept outside the window (empty before the first
    /// update).
    pub fn notes_text(&self) -> &str {
        &self.notes_text
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
            monitor: Monitor::new(state.config.budget).with_thresholds(state.compression.zones),
            meter: Meter::restore(state.config, state.offset, state.calibrated),
            counter,
            shadow,
            entries: state.entries,
            pushes: state.pushes,
            total: state.total,
            turn: state.turn,
            refs: state.refs,
            dropped: state.dropped,
            evictions: state.evictions,
            thresholds: state.compression.zones,
            reading: None,
            compression: state.compression,
            jobs: state.jobs,
            notes: None,
            notes_text: String::new(),
            samples: state.samples,
            pushed_tokens: state.pushed_tokens,
            evicted_blocks: state.evicted_blocks,
            bootstrapped_from: state.bootstrapped_from,
            relevance: std::sync::Mutex::default(),
        }
        .with_notes(state.notes_text))
    }

    /// How many system messages lead the view (the notes follow them).
    fn lead(&self) -> usize {
        self.entries
            .iter()
            .take_while(|entry| matches!(entry.message, Message::System { .. }))
            .count()
    }

    /// Where eviction starts and what it frees down to.
    fn limit(&self) -> usize {
        (self.meter.budget() as f64 * self.thresholds.orange) as usize
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
        let mut index = self
            .relevance
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        index.begin();
        let push = |at: usize| self.entries[at].push;
        let mut keys = Vec::new();
        let mut blocks = Vec::new();
        for (at, entry) in self.entries.iter().enumerate() {
            match &entry.message {
                Message::User { content } => {
                    index.put(&(push(at), usize::MAX), content);
                }
                Message::ToolResult(result) => {
                    index.put(&(push(at), usize::MAX), &result.content);
                }
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
                    index.put(&(push(at), 0), &join(true));
                    index.put(&(push(at), 1), &join(false));
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
        index.finish();
        let stable: Vec<(u64, usize)> = keys.iter().map(|&(at, part)| (push(at), part)).collect();
        let relevance: HashMap<(usize, usize), f64> = keys
            .iter()
            .copied()
            .zip(index.scores(task, &stable))
            .collect();
        drop(index);
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
        let task = self.task();
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
            self.evicted_blocks += 1;
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

    /// Takes the reasoning of every assistant message before the user
    /// message being pushed out of the view, as a provider that keeps only
    /// the current turn's does ([`ReasoningScope::CurrentTurn`]); a message
    /// left with nothing goes. Each entry is recounted, so the total stays
    /// the sum of the view's messages and later passes free only what is
    /// still there.
    fn drop_earlier_reasoning(&mut self) {
        let mut gone: HashSet<usize> = HashSet::new();
        for index in 0..self.entries.len() {
            let Message::Assistant { content } = &mut self.entries[index].message else {
                continue;
            };
            if !content.iter().any(|b| matches!(b, Block::Reasoning { .. })) {
                continue;
            }
            content.retain(|b| !matches!(b, Block::Reasoning { .. }));
            let empty = content.is_empty();
            if empty {
                gone.insert(index);
            }
            self.recount(index, empty);
        }
        if !gone.is_empty() {
            let mut index = 0;
            self.entries.retain(|_| {
                let keep = !gone.contains(&index);
                index += 1;
                keep
            });
        }
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

mod cascade;
mod metrics;

pub use cascade::CompressionStats;
use cascade::Jobs;
pub use metrics::{Metrics, Sample};

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

impl Strategy for Cwm {
    fn name(&self) -> &'static str {
        NAME
    }

    fn push(&mut self, message: Message) -> Result<Vec<DelimiterOutcome>, TranscriptError> {
        let outcomes = self.shadow.push(message.skeleton())?;
        let push = self.pushes;
        self.pushes += 1;
        match &message {
            Message::Assistant { content } => {
                self.sample();
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
            Message::User { .. }
                if self.meter.config().reasoning == ReasoningScope::CurrentTurn =>
            {
                self.drop_earlier_reasoning();
            }
            Message::System { content } => {
                if let Some(window) = crate::checkpoint::bootstrapped_window(content) {
                    self.bootstrapped_from = Some(window);
                }
            }
            _ => {}
        }
        let tokens = message_tokens(self.counter.as_ref(), &message);
        self.total += tokens;
        self.pushed_tokens += tokens as u64;
        self.entries.push(Entry {
            push,
            message,
            created: self.turn,
            tokens,
            altered: false,
            level: Level::Full,
            summary: false,
        });
        Ok(outcomes)
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
        let reported = self.meter.calibrated().then_some(after);
        self.reading = Some(self.monitor.measure(self.total, reported));
        let budget = self.meter.budget();
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
        let lead = self.lead();
        fn entry(entry: &Entry) -> (Source, &Message) {
            let source = if entry.summary {
                Source::Index
            } else if entry.altered {
                Source::Altered(entry.push)
            } else {
                Source::Pushed(entry.push)
            };
            (source, &entry.message)
        }
        let notes = self
            .notes
            .as_ref()
            .map(|(message, _)| (Source::Index, message));
        Box::new(
            self.entries[..lead]
                .iter()
                .map(entry)
                .chain(notes)
                .chain(self.entries[lead..].iter().map(entry)),
        )
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }

    fn meter_mut(&mut self) -> &mut Meter {
        &mut self.meter
    }

    fn episodes(&self) -> &Context {
        &self.shadow
    }

    fn episodes_mut(&mut self) -> &mut Context {
        &mut self.shadow
    }

    fn counted_tokens(&self) -> usize {
        self.total
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
            config: self.meter.config().clone(),
            shadow,
            entries: self.entries.clone(),
            pushes: self.pushes,
            total: self.total,
            offset: self.meter.offset(),
            calibrated: self.meter.calibrated(),
            turn: self.turn,
            refs: self.refs.clone(),
            dropped: self.dropped.clone(),
            evictions: self.evictions,
            compression: self.compression.clone(),
            jobs: self.jobs.clone(),
            notes_text: self.notes_text.clone(),
            samples: self.samples.clone(),
            pushed_tokens: self.pushed_tokens,
            evicted_blocks: self.evicted_blocks,
            bootstrapped_from: self.bootstrapped_from,
        };
        Ok(Saved {
            pushes: self.pushes,
            state: serde_json::to_value(&state)?,
        })
    }

    fn health(&self) -> Option<Health> {
        let reading = self.reading.as_ref()?;
        let metrics = self.metrics();
        let mut alerts = metrics.alerts;
        for event in &reading.events {
            if let PressureEvent::VelocitySpike { velocity, baseline } = event {
                alerts.push(format!(
                    "velocity spike: {velocity:.0} tokens per call, over 3× the baseline of {baseline:.0}"
                ));
            }
        }
        Some(Health {
            utilisation: metrics.utilisation,
            zone: metrics.zone,
            velocity: reading.velocity,
            turns_until_red: reading.turns_until_red,
            provider_counted: self.meter.calibrated(),
            evictions: self.evictions,
            alerts,
        })
    }

    fn notes(&self) -> Option<String> {
        let checkpoint = self.task_checkpoint();
        (!checkpoint.notes.is_empty() || !checkpoint.summary.is_empty())
            .then(|| checkpoint.progress_log())
    }

    fn metrics(&self) -> Option<serde_json::Value> {
        serde_json::to_value(Cwm::metrics(self)).ok()
    }
}

impl SideCalls for Cwm {
    fn side_request(&mut self) -> Option<SideRequest> {
        self.ask()
    }

    fn side_result(&mut self, id: u64, result: Result<String, String>) {
        self.answer(id, result);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use cwl::{Estimate, delimiter_spec};

    use super::*;
    use crate::checkpoint::TaskCheckpoint;

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
    /// The tools and `view` as the strategy should count them.
    fn counted(strategy: &Cwm, view: &[Message]) -> usize {
        strategy.shadow.tools_tokens()
            + view
                .iter()
                .map(|m| message_tokens(&Estimate, m))
                .sum::<usize>()
    }

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
        assert!(!health.provider_counted);
        assert_eq!(
            health.alerts.len(),
            1,
            "reads are most of this context: {:?}",
            health.alerts
        );
        assert!(
            health.alerts[0].starts_with("warning: tool results take"),
            "{:?}",
            health.alerts
        );
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

    /// A read of `lines` lines of parser code, with its result.
    fn big_step(strategy: &mut dyn Strategy, i: usize, lines: usize) {
        strategy
            .push(Message::Assistant {
                content: vec![Block::ToolCall(ToolCall::new(
                    format!("c{i}"),
                    "read",
                    format!("{{\"path\":\"parser{i}.rs\"}}"),
                ))],
            })
            .unwrap();
        strategy
            .push(Message::tool_result(
                format!("c{i}"),
                "read",
                format!("fn parser_{i}() {{ parser handling code }}\n").repeat(lines),
                false,
            ))
            .unwrap();
    }

    /// The budget at which the strategy's prompt is `share` of it.
    fn budget_at(strategy: &Cwm, share: f64) -> usize {
        (strategy.tokens() as f64 / share) as usize
    }

    #[test]
    fn the_cascade_is_routed_by_zone_and_answers_replace_content() {
        let mut strategy = cwm(100_000).with_compression(CompressionOptions {
            min_tokens: 40,
            ..CompressionOptions::default()
        });
        strategy
            .push(Message::system("You are a coding agent."))
            .unwrap();
        strategy.push(Message::user("fix the parser")).unwrap();
        big_step(&mut strategy, 0, 100);
        for i in 1..8 {
            step(&mut strategy, i, "logger");
        }
        let budget = budget_at(&strategy, 0.02);
        strategy.set_budget(budget);
        let request = strategy.side_request().unwrap();
        assert_eq!(
            request.purpose, "notes",
            "green: only the notes, every six responses"
        );
        assert!(matches!(&request.messages[1], Message::User { content }
            if content.starts_with("Task goal:\nfix the parser") && content.contains("(none yet)")));
        strategy.side_result(
            request.id,
            Ok("Goal: fix the parser. Done: read parser0.rs and the logger files.".into()),
        );
        let notes: Vec<Message> = strategy.view().cloned().collect();
        assert!(matches!(&notes[1], Message::System { content }
            if content.starts_with("[working notes") && content.ends_with("the logger files.")));
        assert_eq!(
            strategy.notes_text(),
            "Goal: fix the parser. Done: read parser0.rs and the logger files."
        );
        assert!(
            strategy
                .notes()
                .unwrap()
                .contains("## Notes (after 8 responses)")
        );
        strategy.set_budget(budget_at(&strategy, 0.02));
        assert!(strategy.side_request().is_none(), "green: nothing more");

        // Prepare: the large result (its result is not in flight).
        strategy.set_budget(budget_at(&strategy, 0.6));
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "summary");
        assert!(matches!(&request.messages[1], Message::User { content }
            if content.starts_with("Tool: read\nOutput (") && content.contains("fn parser_0()")));
        let view: Vec<Message> = strategy.view().cloned().collect();
        strategy.side_result(request.id, Err("the summary call timed out".into()));
        assert!(
            strategy.view().cloned().eq(view.iter().cloned()),
            "a failure changes nothing"
        );
        assert!(
            strategy.side_request().is_none(),
            "nothing more until the next response"
        );
        step(&mut strategy, 8, "logger");
        strategy.set_budget(budget_at(&strategy, 0.6));
        assert!(
            strategy.side_request().is_none(),
            "the failed summary is not asked again"
        );

        // Active: aging messages go to one line, oldest first.
        strategy.set_budget(budget_at(&strategy, 0.8));
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "progressive");
        assert!(matches!(&request.messages[1], Message::User { content }
            if content.starts_with("Summarise it in one line") && content.contains("parser_0")));
        let before = strategy.tokens();
        strategy.side_result(
            request.id,
            Ok("read parser0.rs: 100 parser functions".into()),
        );
        assert!(strategy.tokens() < before);
        let view: Vec<Message> = strategy.view().cloned().collect();
        let Message::ToolResult(result) = &view[4] else {
            panic!("{:?}", view[4])
        };
        assert_eq!(result.call_id, "c0", "the result keeps its call");
        assert!(
            result
                .content
                .starts_with("[one-line summary of a read output of "),
            "{}",
            result.content
        );
        assert!(
            result
                .content
                .ends_with("read parser0.rs: 100 parser functions")
        );
        assert!(
            strategy.side_request().is_none(),
            "back under the active line"
        );
        strategy.set_budget(budget_at(&strategy, 0.8));
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "progressive");
        assert!(
            matches!(&request.messages[1], Message::User { content }
            if content.contains("thinking about step 1")),
            "then step 1's reasoning"
        );
        strategy.side_result(request.id, Ok("considered logger1 step".into()));
        let view: Vec<Message> = strategy.view().cloned().collect();
        let Message::Assistant { content } = &view[5] else {
            panic!("{:?}", view[5])
        };
        assert_eq!(
            content.len(),
            2,
            "text summary and the call, reasoning gone"
        );
        assert!(matches!(&content[1], Block::ToolCall(call) if call.id == "c1"));

        // Emergency: compaction of everything before the latest four responses.
        strategy.set_budget(budget_at(&strategy, 0.96));
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "compaction");
        assert!(matches!(&request.messages[0], Message::System { content }
            if content.starts_with("You are a context-compaction engine")));
        assert!(matches!(&request.messages[1], Message::User { content }
            if content.contains("Task goal:\nfix the parser") && content.contains("logger4") && !content.contains("logger5")));
        let before = strategy.tokens();
        strategy.side_result(
            request.id,
            Ok("- read parser0.rs and logger1-4\n- next: logger5".into()),
        );
        assert!(strategy.tokens() < before);
        let view: Vec<Message> = strategy.view().cloned().collect();
        check_view(&view, 1);
        assert!(matches!(&view[3], Message::Assistant { content }
            if matches!(&content[0], Block::Text { text } if text.starts_with("[compacted summary of 10 earlier messages"))));
        assert!(matches!(&view[4], Message::Assistant { content }
            if matches!(content.last(), Some(Block::ToolCall(call)) if call.id == "c5")));
        assert_eq!(
            view.len(),
            4 + 4 * 2,
            "system, notes, user, summary, four steps"
        );
        let saved = strategy.save().unwrap();
        let restored = Cwm::restore(&saved.state, Arc::new(Estimate)).unwrap();
        assert!(
            restored.view().eq(strategy.view()),
            "summaries and notes restore"
        );
        assert_eq!(restored.tokens(), strategy.tokens());
        let stats = &strategy.jobs.stats;
        assert_eq!(
            (stats.asked, stats.accepted, stats.failed, stats.rejected),
            (5, 4, 1, 0)
        );
        let metrics = strategy.metrics();
        assert!(metrics.compression_ratio.unwrap() > 2.0, "{metrics:?}");
    }

    #[test]
    fn component_budgets_follow_the_view_and_gate_summaries_and_notes() {
        use crate::budgets::{Check, Component};
        let mut strategy = cwm(10_000).with_compression(CompressionOptions {
            notes_every: 1,
            ..CompressionOptions::default()
        });
        strategy
            .push(Message::system("You are a coding agent."))
            .unwrap();
        strategy.push(Message::user("fix the parser")).unwrap();
        big_step(&mut strategy, 0, 100);
        step(&mut strategy, 1, "logger");
        let report = strategy.budget_report();
        let used = |component: Component| {
            report
                .components
                .iter()
                .find(|(c, _)| *c == component)
                .map(|(_, b)| (b.used, b.limit))
                .unwrap()
        };
        assert_eq!(
            used(Component::SystemPrompt).0,
            message_tokens(&Estimate, &Message::system("You are a coding agent."))
        );
        assert_eq!(used(Component::ToolResults).1, 1_200, "12% of 10,000");
        assert_eq!(used(Component::MemoryInjection), (0, 800));
        assert_eq!(
            report.total_used, strategy.total,
            "every token has a component"
        );
        assert!(report.burn_rate > 0.0 && report.turns_until_exhausted.is_some());
        assert!(strategy.utilisation() < 0.5, "green");
        assert!(matches!(
            strategy.check_before_add(Component::ToolResults, 0),
            Check::Warning { .. } | Check::Blocked { .. }
        ));
        assert!(matches!(
            strategy.check_before_add(Component::ToolResults, 2_000),
            Check::Blocked { .. }
        ));
        let request = strategy.side_request().unwrap();
        assert_eq!(
            request.purpose, "summary",
            "tool results past their soft limit are summarised even in green"
        );
        strategy.side_result(request.id, Ok("parser_0 .. parser_99 read".into()));
        assert_eq!(
            strategy.check_before_add(Component::ToolResults, 0),
            Check::Allowed
        );
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "notes");
        let view: Vec<Message> = strategy.view().cloned().collect();
        strategy.side_result(request.id, Ok("parser notes ".repeat(400)));
        assert!(strategy.view().cloned().eq(view.iter().cloned()));
        let reason = strategy.jobs.stats.last_rejection.clone().unwrap();
        assert!(reason.starts_with("notes: the notes ("), "{reason}");
        assert!(
            reason.contains("would pass the memory budget (0 of 800"),
            "{reason}"
        );
    }

    #[test]
    fn a_window_checkpoints_and_a_fresh_one_bootstraps_from_it() {
        let every = CompressionOptions {
            notes_every: 1,
            ..CompressionOptions::default()
        };
        let mut strategy = cwm(100_000).with_compression(every.clone());
        strategy
            .push(Message::system("You are a coding agent."))
            .unwrap();
        strategy
            .push(Message::user("task 1: read the parser"))
            .unwrap();
        step(&mut strategy, 0, "parser");
        strategy
            .push(Message::user("task 2: fix the parser"))
            .unwrap();
        step(&mut strategy, 1, "parser");
        assert!(strategy.notes().is_none(), "no notes yet, no notes file");
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "notes");
        let notes = "- Done: read parser0.rs\n- Next: fix parser_1";
        strategy.side_result(request.id, Ok(notes.into()));
        let checkpoint = strategy.task_checkpoint();
        assert_eq!(
            (
                checkpoint.window_id,
                checkpoint.state_version,
                checkpoint.responses
            ),
            (1, 2, 2)
        );
        assert_eq!(checkpoint.task_goal, "task 2: fix the parser");
        assert_eq!(checkpoint.earlier_tasks, ["task 1: read the parser"]);
        assert_eq!(checkpoint.notes, notes);
        let log = strategy.notes().unwrap();
        let (parsed, warnings) = TaskCheckpoint::parse(&log).unwrap();
        assert_eq!(parsed, checkpoint, "the notes file carries the checkpoint");
        assert!(warnings.is_empty());

        // A fresh window opened by the bootstrap prompt.
        let mut fresh = cwm(100_000).with_compression(every);
        fresh
            .push(Message::system("You are a coding agent."))
            .unwrap();
        fresh
            .push(Message::system(parsed.bootstrap_prompt()))
            .unwrap();
        fresh.push(Message::user("carry on")).unwrap();
        let next = fresh.task_checkpoint();
        assert_eq!(next.window_id, 2);
        assert!(
            next.notes.contains("- Next: fix parser_1"),
            "{}",
            next.notes
        );
        assert!(
            fresh
                .notes()
                .unwrap()
                .starts_with("# Progress — window 2 (v1)")
        );
        step(&mut fresh, 0, "parser");
        step(&mut fresh, 1, "parser");
        let request = fresh.side_request().unwrap();
        assert_eq!(request.purpose, "notes");
        assert!(
            matches!(&request.messages[1], Message::User { content }
                if content.contains("Current notes:\n[CONTEXT_WINDOW_RESUME]")),
            "the first notes of the new window start from the old ones"
        );
        let saved = fresh.save().unwrap();
        let restored = Cwm::restore(&saved.state, Arc::new(Estimate)).unwrap();
        assert_eq!(restored.task_checkpoint(), fresh.task_checkpoint());
    }

    #[test]
    fn the_optional_judge_scores_taken_summaries_and_changes_nothing() {
        let mut strategy = cwm(100_000).with_compression(CompressionOptions {
            judge: true,
            ..CompressionOptions::default()
        });
        strategy.push(Message::user("fix the parser")).unwrap();
        big_step(&mut strategy, 0, 100);
        step(&mut strategy, 1, "logger");
        strategy.set_budget(budget_at(&strategy, 0.6));
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "summary");
        strategy.side_result(
            request.id,
            Ok("parser_0 to parser_99, parser handling".into()),
        );
        let view: Vec<Message> = strategy.view().cloned().collect();
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "judge");
        assert!(matches!(&request.messages[1], Message::User { content }
            if content.starts_with("Original:\nfn parser_0()")
                && content.contains("Compressed:\nparser_0 to parser_99, parser handling")));
        strategy.side_result(request.id, Ok("0.5\nthe function bodies are gone".into()));
        assert!(
            strategy.view().cloned().eq(view.iter().cloned()),
            "judging changes no view"
        );
        let metrics = strategy.metrics();
        assert_eq!(metrics.fidelity, Some(0.5));
        assert!(
            metrics
                .alerts
                .iter()
                .any(|a| a.starts_with("warning: compression fidelity 0.50")),
            "{:?}",
            metrics.alerts
        );
        assert_ne!(
            strategy.side_request().map(|r| r.purpose),
            Some("judge".to_string()),
            "each summary is judged once"
        );
        // A judge answering without a score is refused; nothing changes.
        big_step(&mut strategy, 2, 100);
        step(&mut strategy, 3, "logger");
        strategy.set_budget(budget_at(&strategy, 0.6));
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "summary");
        strategy.side_result(request.id, Ok("parser_2 read, parser handling".into()));
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "judge");
        strategy.side_result(request.id, Ok("looks fine to me".into()));
        assert_eq!(strategy.jobs.stats.fidelity, [0.5]);
        assert!(
            strategy
                .jobs
                .stats
                .last_rejection
                .as_deref()
                .unwrap()
                .starts_with("judge:")
        );
        let saved = strategy.save().unwrap();
        let restored = Cwm::restore(&saved.state, Arc::new(Estimate)).unwrap();
        assert_eq!(restored.metrics().fidelity, Some(0.5));
    }

    #[test]
    fn empty_long_or_unrelated_answers_change_nothing() {
        let mut strategy = cwm(100_000);
        strategy.push(Message::user("fix the parser")).unwrap();
        big_step(&mut strategy, 0, 100);
        step(&mut strategy, 1, "logger");
        strategy.set_budget(budget_at(&strategy, 0.6));
        for (n, answer) in [
            "  \n".to_string(),
            "parser ".repeat(2_000),
            "zzzz qqqq lorem ipsum".to_string(),
        ]
        .into_iter()
        .enumerate()
        {
            let view: Vec<Message> = strategy.view().cloned().collect();
            let request = strategy.side_request().unwrap();
            assert_eq!(request.purpose, "summary");
            strategy.side_result(request.id, Ok(answer));
            assert!(
                strategy.view().cloned().eq(view.iter().cloned()),
                "answer {n}"
            );
            let reason = strategy.jobs.stats.last_rejection.clone().unwrap();
            assert!(
                reason.starts_with("summary: ")
                    && reason.contains(["empty", "saves too little", "no word"][n]),
                "{reason}"
            );
            assert!(
                strategy.side_request().is_none(),
                "a refusal waits for the next response"
            );
            // The job was tried: a fresh copy of the result asks again.
            big_step(&mut strategy, 10 + n, 100);
            step(&mut strategy, 20 + n, "logger");
            strategy.set_budget(budget_at(&strategy, 0.6));
        }
        assert_eq!(strategy.jobs.stats.rejected, 3);
        let request = strategy.side_request().unwrap();
        assert_eq!(request.purpose, "summary");
        assert!(
            matches!(&request.messages[1], Message::User { content } if content.contains("fn parser_12()")),
            "the results refused before are not asked again"
        );
        // Answers to ids never asked, or asked already, are ignored.
        let view: Vec<Message> = strategy.view().cloned().collect();
        strategy.side_result(999, Ok("parser".into()));
        assert!(strategy.view().cloned().eq(view.iter().cloned()));
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
                    format!("fn f{step}() {{}} // module {}\n", rng.next(9)).repeat(
                        if rng.next(8) == 0 {
                            150
                        } else {
                            1 + rng.next(60) as usize
                        },
                    ),
                ),
            };
            strategy
                .push(Message::tool_result(id, name, text, false))
                .unwrap();
        }
        usize::from(user)
    }

    /// How the model answers side requests in a test session.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Model {
        /// No side calls are made.
        Off,
        /// Every call times out.
        Silent,
        /// Each answer is a gist of the prompt's content.
        Gist,
        /// Errors, empty answers, garbage and gists in turn.
        Mixed,
    }

    /// A short answer made of the prompt's own words.
    fn gist(request: &SideRequest) -> String {
        let Some(Message::User { content }) = request.messages.last() else {
            panic!("a side request ends with a user message");
        };
        content
            .split_whitespace()
            .skip(3)
            .take(12)
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn answer(model: Model, request: &SideRequest) -> Result<String, String> {
        match (model, request.id % 4) {
            (Model::Off, _) => unreachable!(),
            (Model::Silent, _) | (Model::Mixed, 0) => Err(format!(
                "the {} call timed out after 60.0s",
                request.purpose
            )),
            (Model::Mixed, 1) => Ok("   ".to_string()),
            (Model::Mixed, 2) => Ok("zzzz qqqq lorem ipsum".to_string()),
            _ => Ok(gist(request)),
        }
    }

    /// Runs the side calls the strategy asks for (at most four, as the
    /// harness does); gives their purposes.
    fn side_calls(strategy: &mut dyn Strategy, model: Model) -> Vec<String> {
        let mut purposes = Vec::new();
        if model == Model::Off {
            return purposes;
        }
        for _ in 0..4 {
            let Some(request) = strategy.side_request() else {
                break;
            };
            purposes.push(request.purpose.clone());
            let result = answer(model, &request);
            strategy.side_result(request.id, result);
        }
        purposes
    }

    #[test]
    fn random_sessions_keep_every_guarantee_and_restore_anywhere() {
        let scopes = [ReasoningScope::AllTurns, ReasoningScope::CurrentTurn];
        for (model, scope) in [Model::Off, Model::Silent, Model::Gist, Model::Mixed]
            .into_iter()
            .flat_map(|model| scopes.map(|scope| (model, scope)))
        {
            let accepted = random_sessions_under(model, scope);
            if model == Model::Gist {
                let purposes: Vec<&str> = accepted.keys().map(String::as_str).collect();
                assert_eq!(
                    purposes,
                    ["compaction", "notes", "progressive", "summary"],
                    "every kind of summary was taken somewhere: {accepted:?}"
                );
            }
        }
    }

    /// Twelve random sessions under a reasoning scope; gives the answers
    /// taken, by purpose.
    fn random_sessions_under(model: Model, scope: ReasoningScope) -> BTreeMap<String, u64> {
        let mut accepted: BTreeMap<String, u64> = BTreeMap::new();
        for seed in 1..=12u64 {
            let budget = 1_500 + 500 * (seed as usize % 7);
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut strategy = Cwm::new(
                Config::with_budget(budget).reasoning(scope),
                Arc::new(Estimate),
                vec![delimiter_spec()],
            )
            .with_compression(CompressionOptions {
                judge: model == Model::Mixed,
                ..CompressionOptions::default()
            });
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
                let asked = side_calls(&mut strategy, model);
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
                    counted(&strategy, &view),
                    "seed {seed} step {step}: the count follows the view"
                );
                check_view(&view, before);
                if scope == ReasoningScope::CurrentTurn {
                    assert!(
                        view[..view.len() - latest_turn(&view)]
                            .iter()
                            .all(|m| !has_reasoning(m)),
                        "seed {seed} step {step}: no earlier turn's reasoning"
                    );
                }
                if let Some(other) = restored.as_mut() {
                    assert_eq!(side_calls(other, model), asked, "seed {seed} step {step}");
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
            let stats = &strategy.jobs.stats;
            match model {
                Model::Off => assert_eq!(stats.asked, 0),
                Model::Silent => {
                    assert!(stats.asked > 0 && stats.failed == stats.asked, "{stats:?}");
                    assert!(strategy.evictions > 0, "seed {seed}: eviction carried it");
                }
                Model::Gist => assert!(stats.accepted > 0, "seed {seed}: {stats:?}"),
                Model::Mixed => {
                    assert!(
                        stats.accepted > 0 && stats.rejected > 0 && stats.failed > 0,
                        "seed {seed}: {stats:?}"
                    );
                    // Under CurrentTurn the requests fall otherwise on the
                    // mixed answers: a seed may take only notes (not judged).
                    assert!(
                        strategy.jobs.judged > 0 || !scope.is_all_turns(),
                        "seed {seed}: the judge was asked"
                    );
                }
            }
            if model != Model::Gist {
                assert!(strategy.evictions > 0, "seed {seed}: eviction happened");
            }
            for (purpose, count) in &stats.accepted_by {
                *accepted.entry(purpose.clone()).or_default() += count;
            }
        }
        accepted
    }

    /// The strategy under `budget` whose provider keeps only the current
    /// turn's reasoning.
    fn current_turn(budget: usize) -> Cwm {
        Cwm::new(
            Config::with_budget(budget).reasoning(ReasoningScope::CurrentTurn),
            Arc::new(Estimate),
            vec![delimiter_spec()],
        )
    }

    fn has_reasoning(message: &Message) -> bool {
        matches!(message, Message::Assistant { content }
            if content.iter().any(|b| matches!(b, Block::Reasoning { .. })))
    }

    /// How many messages the latest user turn holds, its user message
    /// included (all of them when there is none).
    fn latest_turn(messages: &[Message]) -> usize {
        messages.len()
            - messages
                .iter()
                .rposition(|m| matches!(m, Message::User { .. }))
                .unwrap_or(0)
    }

    /// The prompt as a provider keeping only the current turn's reasoning
    /// bills it: `pushed` with the reasoning of every assistant message
    /// before the latest user message taken out (a message left with
    /// nothing gone).
    fn billed(pushed: &[Message]) -> Vec<Message> {
        let earlier = pushed.len() - latest_turn(pushed);
        pushed
            .iter()
            .enumerate()
            .map(|(at, m)| {
                if at < earlier {
                    m.without_reasoning()
                } else {
                    m.clone()
                }
            })
            .filter(|m| !matches!(m, Message::Assistant { content } if content.is_empty()))
            .collect()
    }

    /// `turns` user turns, each answered by a response with large
    /// reasoning and a read, its result, and a closing response with large
    /// reasoning and text; the first turn ends with a response of
    /// reasoning alone. Gives every message pushed.
    fn thinking_turns(strategies: &mut [&mut dyn Strategy], turns: usize) -> Vec<Message> {
        let thinking = |i: usize| Block::Reasoning {
            text: format!("weighing option {i} against the others ").repeat(40),
            signature: Some(format!("sig{i}")),
        };
        let mut pushed = vec![Message::system("You are a coding agent.")];
        for t in 0..turns {
            pushed.push(Message::user(format!("task {t}: fix the parser")));
            pushed.push(Message::Assistant {
                content: vec![
                    thinking(2 * t),
                    Block::Text {
                        text: format!("reading parser{t}.rs"),
                    },
                    Block::ToolCall(ToolCall::new(
                        format!("c{t}"),
                        "read",
                        format!("{{\"path\":\"parser{t}.rs\"}}"),
                    )),
                ],
            });
            pushed.push(Message::tool_result(
                format!("c{t}"),
                "read",
                format!("fn parser_{t}() {{ parser handling code }}\n").repeat(5),
                false,
            ));
            pushed.push(Message::Assistant {
                content: vec![
                    thinking(2 * t + 1),
                    Block::Text {
                        text: format!("task {t} is done"),
                    },
                ],
            });
            if t == 0 {
                pushed.push(Message::Assistant {
                    content: vec![thinking(99)],
                });
            }
        }
        for strategy in strategies.iter_mut() {
            for message in &pushed {
                strategy.push(message.clone()).unwrap();
            }
        }
        pushed
    }

    #[test]
    fn under_current_turn_the_count_is_the_billed_prompt_and_spares_eviction() {
        let mut all = cwm(1_000_000);
        let mut current = current_turn(1_000_000);
        let pushed = thinking_turns(&mut [&mut all, &mut current], 4);
        let tools = cwm(1).tokens();
        let count = |messages: &[Message]| {
            tools
                + messages
                    .iter()
                    .map(|m| message_tokens(&Estimate, m))
                    .sum::<usize>()
        };
        let billed_view = billed(&pushed);
        let (full, billed) = (count(&pushed), count(&billed_view));
        assert!(
            2 * billed < full,
            "reasoning is most of it: {billed} of {full}"
        );
        assert_eq!(all.tokens(), full);
        assert_eq!(current.tokens(), billed, "the count is the billed prompt");
        assert_eq!(current.counted_tokens(), billed);
        assert!(
            current.view().cloned().eq(billed_view.iter().cloned()),
            "earlier turns' reasoning (and the response of reasoning alone) left the view; the current turn's stayed"
        );
        assert_eq!(
            current.budget_report().total_used,
            billed,
            "the component budgets count it alike"
        );

        // Over the budget in full, within the orange line as billed.
        let budget = billed * 4 / 3 + 10;
        assert!(full > budget && billed <= budget * 3 / 4);
        all.set_budget(budget);
        current.set_budget(budget);
        let report = current.enforce();
        assert!(!report.evicted(), "{report:?}");
        assert!(report.budget_met);
        assert_eq!(
            (report.tokens_before, report.tokens_after),
            (billed, billed)
        );
        assert!(current.view().cloned().eq(billed_view.iter().cloned()));
        assert!(current.utilisation() <= 0.75);
        assert_ne!(current.metrics().zone, "red");
        let report = all.enforce();
        assert!(report.evicted(), "counted in full it is over: {report:?}");
        assert!(report.tokens_before == full && report.tokens_after <= budget * 3 / 4);
    }

    #[test]
    fn current_turn_reasoning_leaves_once_and_the_state_restores() {
        let mut strategy = current_turn(1_000_000);
        let mut pushed = thinking_turns(&mut [&mut strategy], 3);
        let saved = strategy.save().unwrap();
        let mut restored = Cwm::restore(&saved.state, Arc::new(Estimate)).unwrap();
        assert_eq!(restored.config().reasoning, ReasoningScope::CurrentTurn);
        assert!(restored.view().eq(strategy.view()));
        assert_eq!(restored.tokens(), strategy.tokens());
        // A new turn takes the restored current turn's reasoning out too.
        let next = Message::user("task 3: the logger");
        pushed.push(next.clone());
        for copy in [&mut strategy, &mut restored] {
            copy.push(next.clone()).unwrap();
            step(copy, 3, "logger");
        }
        pushed.extend(strategy.view().skip(billed(&pushed).len()).cloned());
        let view: Vec<Message> = strategy.view().cloned().collect();
        assert_eq!(view, billed(&pushed));
        assert!(restored.view().eq(strategy.view()));
        // Eviction then frees what is left, counted once.
        let before = strategy.tokens();
        strategy.set_budget(before);
        let report = strategy.enforce();
        assert!(report.evicted());
        let view: Vec<Message> = strategy.view().cloned().collect();
        assert_eq!(
            strategy.total,
            counted(&strategy, &view),
            "the count follows the view"
        );
        assert_eq!(report.tokens_after, strategy.tokens());
        assert!(report.tokens_after <= before * 3 / 4);
        check_view(&view, 4);
    }
}
