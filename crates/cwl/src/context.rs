//! The stateful engine a harness embeds: append messages as they happen,
//! enforce the budget before each model call, send the view.

use std::collections::HashMap;
use std::sync::Arc;

use thiserror::Error;

use serde::{Deserialize, Serialize};

use crate::classes::ToolClass;
use crate::config::{Config, RESTATED_MIN_TOKENS};
use crate::evictor::{Evictor, PaperOrder};
use crate::fold::Residues;
use crate::graph::{
    Applied, EpisodeId, Graph, HOLDS_BULK, HOLDS_INTERMEDIATE, HOLDS_REASONING, HOLDS_RESULTS,
    Origin,
};
use crate::message::{Block, Message, ToolSpec};
use crate::meter::Meter;
use crate::plans::Plans;
use crate::protocol::{Annotation, DELIMITER, DelimiterError, EpisodeKind};
use crate::reasoning::ReasoningScope;
use crate::recall::RECALL;
use crate::repeats::Repeats;
use crate::tokens::{self, MESSAGE_OVERHEAD, TokenCounter};
use crate::uses::Uses;

/// A message the transcript cannot take; the context is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TranscriptError {
    /// An assistant message with no blocks.
    #[error("assistant message has no content (no text, reasoning or tool call)")]
    EmptyAssistant,
    /// A tool call without an id.
    #[error("tool call `{0}` has an empty id")]
    EmptyCallId(String),
    /// Two calls share an id.
    #[error("tool call id `{0}` is used twice")]
    DuplicateCallId(String),
    /// A tool result that answers no waiting call.
    #[error(
        "tool result for unknown call `{0}` (no earlier tool call with this id is waiting for a result)"
    )]
    UnknownCall(String),
}

/// What became of one delimiter call in a pushed assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelimiterOutcome {
    /// The call's id: send the tool result under this id.
    pub call_id: String,
    /// Accepted, or why not (the graph is unchanged when rejected).
    pub result: Result<Accepted, DelimiterError>,
}

/// An accepted delimiter call. The protocol has exactly two actions, so
/// harnesses may match it exhaustively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// An episode was opened.
    Started {
        /// Its name.
        name: String,
        /// Its kind.
        kind: EpisodeKind,
        /// For an act: the expl episodes it declared it relies on.
        dependencies: Vec<String>,
    },
    /// The active episode was closed.
    Ended {
        /// Its name.
        name: String,
        /// Its kind.
        kind: EpisodeKind,
        /// For an expl: what it learned.
        description: Option<String>,
    },
}

impl DelimiterOutcome {
    /// Whether the call was rejected: its tool result must be an error.
    pub fn is_error(&self) -> bool {
        self.result.is_err()
    }

    /// The tool result text to send back to the model.
    pub fn text(&self) -> String {
        match &self.result {
            Ok(Accepted::Started { name, kind, .. }) => format!("Started {kind} episode `{name}`."),
            Ok(Accepted::Ended { name, kind, .. }) => format!("Ended {kind} episode `{name}`."),
            Err(error) => format!("Error: {error}"),
        }
    }
}

/// What a block or result is, for the strip levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Role {
    Text,
    Reasoning,
    Marker,
    Call(ToolClass),
    Residue,
}

/// Bookkeeping for one block of an assistant message (or one tool result).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Meta {
    /// `None`: protected (prologue, user and system content).
    pub(crate) owner: Option<EpisodeId>,
    pub(crate) role: Role,
    pub(crate) tokens: u32,
}

/// One message of the transcript, or its tombstone until the next cleanup.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub(crate) seq: u64,
    /// Boxed, so walking the view reads a small entry per message.
    pub(crate) message: Option<Box<Message>>,
    /// One per assistant block, one for a tool result, none otherwise.
    pub(crate) meta: Vec<Meta>,
    /// Tokens of the message itself (overhead, and content when protected).
    pub(crate) base: u32,
    /// Whether eviction removed or replaced some of its blocks.
    #[serde(default)]
    pub(crate) altered: bool,
}

impl Entry {
    /// Replaces a tool result's content with `stub`, which counts
    /// `stub_tokens`; returns the tokens freed (0 for any other message).
    pub(crate) fn stub_result(&mut self, stub: &str, stub_tokens: usize) -> usize {
        let Some(Message::ToolResult(result)) = self.message.as_deref_mut() else {
            return 0;
        };
        let freed = (self.meta[0].tokens as usize).saturating_sub(stub_tokens);
        result.content = stub.to_string();
        self.meta[0].tokens = clamp(stub_tokens);
        self.altered = true;
        freed
    }

    /// Drops an assistant message left with nothing but reasoning (no
    /// valid request holds one); returns the tokens freed.
    pub(crate) fn drop_if_only_reasoning(&mut self) -> usize {
        if !self
            .message
            .as_deref()
            .is_some_and(Message::is_reasoning_only)
        {
            return 0;
        }
        self.message = None;
        self.meta
            .iter()
            .map(|meta| meta.tokens as usize)
            .sum::<usize>()
            + self.base as usize
    }
}

/// Where a message of the view comes from, so a harness can map the view
/// back to its own copies of what it pushed (identical messages stay apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// The `n`-th pushed message (0-based), unchanged.
    Pushed(u64),
    /// The `n`-th pushed message with some blocks evicted or replaced by a
    /// residue.
    Altered(u64),
    /// A residue the engine wrote for an episode annotated out of band.
    Residue(EpisodeId),
    /// The index line of folded residues and user turns.
    Index,
}

/// A tool call waiting for its result.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) owner: Option<EpisodeId>,
    pub(crate) role: Role,
    pub(crate) seq: u64,
    pub(crate) evicted: bool,
}

/// The live context of one session: the view, its token count, the
/// episode graph and the eviction state.
///
/// Evicted content is dropped from memory; the full transcript is the
/// harness's to keep. The state is a pure function of the calls made on it,
/// so replaying the same pushes, annotations, calibrations and enforcements
/// rebuilds the same view byte for byte (that is how sessions resume).
pub struct Context {
    pub(crate) meter: Meter,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) evictor: Arc<dyn Evictor>,
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) tools_tokens: usize,
    pub(crate) entries: Vec<Entry>,
    pub(crate) graph: Graph,
    pub(crate) pending: HashMap<String, Pending>,
    pub(crate) residues: Residues,
    pub(crate) repeats: Repeats,
    /// Tool outputs by stream position, for [`Config::restated`].
    pub(crate) restated: Repeats<u64>,
    pub(crate) uses: Uses,
    /// Plan calls, for [`Config::superseded_plans`].
    pub(crate) plans: Plans,
    pub(crate) next_seq: u64,
    pub(crate) total: usize,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("budget", &self.meter.budget())
            .field("tokens", &self.tokens())
            .field("messages", &self.entries.len())
            .field("episodes", &self.graph.episodes().len())
            .finish_non_exhaustive()
    }
}

impl Context {
    /// An empty context offering `tools` to the model (their definitions
    /// count toward the prompt).
    pub fn new(config: Config, counter: Arc<dyn TokenCounter>, tools: Vec<ToolSpec>) -> Self {
        let tools_tokens = tokens::tools_tokens(counter.as_ref(), &tools);
        Context {
            meter: Meter::new(config),
            counter,
            evictor: Arc::new(PaperOrder),
            tools,
            tools_tokens,
            entries: Vec::new(),
            graph: Graph::default(),
            pending: HashMap::new(),
            residues: Residues::default(),
            repeats: Repeats::default(),
            restated: Repeats::default(),
            uses: Uses::default(),
            plans: Plans::default(),
            next_seq: 2,
            total: tools_tokens,
        }
    }

    /// Replaces the strategy that picks targets and levels (the paper's
    /// order by default).
    pub fn with_evictor(mut self, evictor: Arc<dyn Evictor>) -> Self {
        self.evictor = evictor;
        self
    }

    /// The strategy in force.
    pub fn evictor(&self) -> &dyn Evictor {
        self.evictor.as_ref()
    }

    /// Appends a message.
    ///
    /// Delimiter calls in an assistant message are validated and applied in
    /// order; the outcomes, one per delimiter call, say what tool result to
    /// send back. On error nothing changes.
    pub fn push(&mut self, message: Message) -> Result<Vec<DelimiterOutcome>, TranscriptError> {
        let seq = self.next_seq;
        match message {
            Message::System { .. } | Message::User { .. } => {
                let base = tokens::message_tokens(self.counter.as_ref(), &message);
                if matches!(message, Message::User { .. }) {
                    if self.meter.config().reasoning == ReasoningScope::CurrentTurn {
                        self.drop_earlier_reasoning();
                    }
                    if self.graph.started() {
                        self.residues.user_turn(seq, base);
                    }
                }
                self.insert_protected(seq, message, base);
                self.next_seq += 2;
                Ok(Vec::new())
            }
            Message::Assistant { content } => {
                self.check_assistant(&content)?;
                self.next_seq += 2;
                Ok(self.push_assistant(seq, content))
            }
            Message::ToolResult(result) => {
                let pending = self
                    .pending
                    .remove(&result.call_id)
                    .ok_or_else(|| TranscriptError::UnknownCall(result.call_id.clone()))?;
                self.next_seq += 2;
                if pending.evicted {
                    return Ok(Vec::new());
                }
                let tokens = self.counter.count(&result.content);
                self.uses.grow(pending.owner, MESSAGE_OVERHEAD + tokens);
                if let Some(owner) = pending.owner {
                    let holds = HOLDS_RESULTS | role_holds(pending.role);
                    self.graph
                        .touch(owner, seq, MESSAGE_OVERHEAD + tokens, holds);
                    if let (Some(share), Role::Call(_)) =
                        (self.meter.config().superseded, pending.role)
                    {
                        self.repeats.text(owner, &result.content, share);
                    }
                    if let Some(share) = self.meter.config().restated {
                        if tokens > RESTATED_MIN_TOKENS {
                            self.restated.text(seq, &result.content, share);
                        } else {
                            self.restated.held_only(seq, &result.content, share);
                        }
                    }
                    self.uses.hold(owner, &result.content);
                }
                let meta = Meta {
                    owner: pending.owner,
                    role: pending.role,
                    tokens: clamp(tokens),
                };
                self.total += MESSAGE_OVERHEAD + tokens;
                self.entries.push(Entry {
                    seq,
                    message: Some(Box::new(Message::ToolResult(result))),
                    meta: vec![meta],
                    base: clamp(MESSAGE_OVERHEAD),
                    altered: false,
                });
                Ok(Vec::new())
            }
        }
    }

    /// Applies an annotation out of band, between messages, for harnesses
    /// that infer episodes instead of letting the model call `delimiter`.
    /// Costs no tokens; the graph is unchanged on error.
    pub fn annotate(&mut self, annotation: Annotation) -> Result<Accepted, DelimiterError> {
        let anchor = self.next_seq - 1;
        let applied = self.graph.apply(annotation, anchor, None)?;
        Ok(self.accepted(applied))
    }

    /// The messages to send: system prompt, protected prologue, and what
    /// eviction left of the rest (with the index line of folded residues
    /// where the first of them stood), in order.
    pub fn view(&self) -> impl Iterator<Item = &Message> {
        let split = self.residues.index_at().map_or(self.entries.len(), |seq| {
            self.entries.partition_point(|entry| entry.seq < seq)
        });
        let (before, after) = self.entries.split_at(split);
        before
            .iter()
            .filter_map(|entry| entry.message.as_deref())
            .chain(self.residues.index_message())
            .chain(after.iter().filter_map(|entry| entry.message.as_deref()))
    }

    /// The view with where each message comes from.
    pub fn view_sources(&self) -> impl Iterator<Item = (Source, &Message)> {
        let split = self.residues.index_at().map_or(self.entries.len(), |seq| {
            self.entries.partition_point(|entry| entry.seq < seq)
        });
        let (before, after) = self.entries.split_at(split);
        fn source(entry: &Entry) -> Option<(Source, &Message)> {
            let source = if entry.seq % 2 == 1 {
                Source::Residue(entry.meta.first().and_then(|m| m.owner).unwrap_or(0))
            } else if entry.altered {
                Source::Altered(crate::graph::push_index(entry.seq))
            } else {
                Source::Pushed(crate::graph::push_index(entry.seq))
            };
            entry.message.as_deref().map(|message| (source, message))
        }
        before
            .iter()
            .filter_map(source)
            .chain(self.residues.index_message().map(|m| (Source::Index, m)))
            .chain(after.iter().filter_map(source))
    }

    /// The tool definitions offered with every request.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Tokens the tool definitions cost in every request.
    pub fn tools_tokens(&self) -> usize {
        self.tools_tokens
    }

    /// The prompt's token count: view plus tool definitions, calibrated by
    /// the provider's reports.
    pub fn tokens(&self) -> usize {
        self.meter.tokens(self.total)
    }

    /// The local count, before calibration.
    pub fn counted_tokens(&self) -> usize {
        self.total
    }

    /// The budget τ.
    pub fn budget(&self) -> usize {
        self.meter.budget()
    }

    /// Changes the budget for later passes.
    pub fn set_budget(&mut self, budget: usize) {
        self.meter.set_budget(budget);
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        self.meter.config()
    }

    /// The episode graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The annotated episode being worked in, if any.
    pub fn active_episode(&self) -> Option<(&str, EpisodeKind)> {
        self.graph.active().map(|id| {
            let episode = self.graph.episode(id);
            (episode.name(), episode.kind())
        })
    }

    /// Ids of tool calls still waiting for their result, oldest first.
    pub fn pending_calls(&self) -> Vec<&str> {
        let mut pending: Vec<(&str, u64)> = self
            .pending
            .iter()
            .map(|(id, pending)| (id.as_str(), pending.seq))
            .collect();
        pending.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
        pending.into_iter().map(|(id, _)| id).collect()
    }

    /// The calibration offset in force: provider count minus local count.
    pub fn calibration_offset(&self) -> i64 {
        self.meter.offset()
    }

    /// Calibrates the count with the provider's figure for a request the
    /// engine counted as `local` tokens; the difference applies from now on.
    pub fn calibrate(&mut self, local: usize, reported: usize) {
        self.meter.calibrate(local, reported);
    }

    /// Takes the reasoning of the turn that a new user message ends out of
    /// the view, as the provider does ([`Config::reasoning`]); earlier
    /// turns' went at their own end.
    fn drop_earlier_reasoning(&mut self) {
        let mut emptied = false;
        for entry in self.entries.iter_mut().rev() {
            let Some(Message::Assistant { content }) = entry.message.as_deref_mut() else {
                if matches!(entry.message.as_deref(), Some(Message::User { .. })) {
                    break;
                }
                continue;
            };
            if !entry.meta.iter().any(|meta| meta.role == Role::Reasoning) {
                continue;
            }
            let mut freed = 0;
            let mut kept = entry.meta.iter().map(|meta| meta.role != Role::Reasoning);
            content.retain(|_| kept.next().unwrap_or(true));
            entry.meta.retain(|meta| {
                if meta.role != Role::Reasoning {
                    return true;
                }
                if let Some(owner) = meta.owner {
                    self.graph.drop_reasoning(owner, meta.tokens as usize);
                }
                freed += meta.tokens as usize;
                false
            });
            entry.altered = true;
            freed += entry.drop_if_only_reasoning();
            emptied |= entry.message.is_none();
            self.total -= freed;
        }
        if emptied {
            self.entries.retain(|entry| entry.message.is_some());
        }
    }

    fn insert_protected(&mut self, seq: u64, message: Message, base: usize) {
        self.total += base;
        self.entries.push(Entry {
            seq,
            message: Some(Box::new(message)),
            meta: Vec::new(),
            base: clamp(base),
            altered: false,
        });
    }

    fn check_assistant(&self, content: &[Block]) -> Result<(), TranscriptError> {
        if content.is_empty() {
            return Err(TranscriptError::EmptyAssistant);
        }
        let mut seen: Vec<&str> = Vec::new();
        for block in content {
            if let Block::ToolCall(call) = block {
                if call.id.is_empty() {
                    return Err(TranscriptError::EmptyCallId(call.name.clone()));
                }
                if seen.contains(&call.id.as_str()) || self.pending.contains_key(&call.id) {
                    return Err(TranscriptError::DuplicateCallId(call.id.clone()));
                }
                seen.push(&call.id);
            }
        }
        Ok(())
    }

    fn push_assistant(&mut self, seq: u64, content: Vec<Block>) -> Vec<DelimiterOutcome> {
        self.graph.set_frontier(seq);
        if !content
            .iter()
            .any(|block| matches!(block, Block::ToolCall(_)))
        {
            self.residues.task_finished();
        }
        let mut outcomes = Vec::new();
        let mut meta = Vec::with_capacity(content.len());
        let mut total = MESSAGE_OVERHEAD;
        for block in &content {
            let (owner, role) = match block {
                Block::ToolCall(call) if call.name == DELIMITER => {
                    let result = Annotation::parse(&call.arguments).and_then(|annotation| {
                        self.graph.apply(annotation, seq, Some(call.id.clone()))
                    });
                    let placed = match result {
                        Ok(Applied::Started(id) | Applied::Ended(id)) => (Some(id), Role::Marker),
                        Err(_) => (
                            self.graph.owner_at(seq),
                            Role::Call(ToolClass::Intermediate),
                        ),
                    };
                    outcomes.push(DelimiterOutcome {
                        call_id: call.id.clone(),
                        result: result.map(|applied| self.accepted(applied)),
                    });
                    placed
                }
                Block::ToolCall(call) if call.name == RECALL => {
                    match self.recall_target(&call.arguments) {
                        Some(target) => {
                            let (name, description) = self.recall_label(target);
                            let id = self.graph.recalled(&name, description, seq, &call.id);
                            (Some(id), Role::Marker)
                        }
                        None => (
                            self.graph.owner_at(seq),
                            Role::Call(ToolClass::Intermediate),
                        ),
                    }
                }
                Block::ToolCall(call) => (
                    self.graph.owner_at(seq),
                    Role::Call(self.meter.config().classes.class(&call.name)),
                ),
                Block::Text { .. } => (self.graph.owner_at(seq), Role::Text),
                Block::Reasoning { .. } => (self.graph.owner_at(seq), Role::Reasoning),
            };
            if let Some(id) = owner
                && self.graph.episode(id).origin() == Origin::Unannotated
            {
                self.uses.unlist(id);
            }
            let tokens = tokens::block_tokens(self.counter.as_ref(), block);
            self.uses.grow(owner, tokens);
            let named = match block {
                Block::Text { text } => Some(text.as_str()),
                Block::ToolCall(call) => Some(call.arguments.as_str()),
                Block::Reasoning { .. } => None,
            };
            if let Some(text) = named {
                self.uses.refer(owner, text);
                if let Some(owner) = owner {
                    self.uses.hold(owner, text);
                }
            }
            let plan = match block {
                Block::ToolCall(call)
                    if self.meter.config().superseded_plans
                        && matches!(role, Role::Call(_))
                        && self.meter.config().classes.is_plan(&call.name) =>
                {
                    self.plans.called(&call.name, seq, &call.id);
                    true
                }
                _ => false,
            };
            if let Some(owner) = owner {
                self.graph.touch(owner, seq, tokens, role_holds(role));
                if let (Some(share), Role::Text | Role::Call(_), false) =
                    (self.meter.config().superseded, role, plan)
                {
                    self.repeats.block(owner, block, share);
                }
            }
            if let Block::ToolCall(call) = block {
                self.pending.insert(
                    call.id.clone(),
                    Pending {
                        owner,
                        role,
                        seq,
                        evicted: false,
                    },
                );
            }
            total += tokens;
            meta.push(Meta {
                owner,
                role,
                tokens: clamp(tokens),
            });
        }
        self.total += total;
        self.entries.push(Entry {
            seq,
            message: Some(Box::new(Message::Assistant { content })),
            meta,
            base: clamp(MESSAGE_OVERHEAD),
            altered: false,
        });
        outcomes
    }

    fn accepted(&self, applied: Applied) -> Accepted {
        match applied {
            Applied::Started(id) => {
                let episode = self.graph.episode(id);
                Accepted::Started {
                    name: episode.name().to_string(),
                    kind: episode.kind(),
                    dependencies: episode
                        .dependencies()
                        .iter()
                        .map(|&dependency| self.graph.episode(dependency).name().to_string())
                        .collect(),
                }
            }
            Applied::Ended(id) => {
                let episode = self.graph.episode(id);
                Accepted::Ended {
                    name: episode.name().to_string(),
                    kind: episode.kind(),
                    description: episode.description().map(str::to_string),
                }
            }
        }
    }
}

/// The content bit a block of this role gives its episode.
fn role_holds(role: Role) -> u8 {
    match role {
        Role::Reasoning => HOLDS_REASONING,
        Role::Call(ToolClass::Bulk) => HOLDS_BULK,
        Role::Call(_) => HOLDS_INTERMEDIATE,
        Role::Text | Role::Marker | Role::Residue => 0,
    }
}

pub(crate) fn clamp(tokens: usize) -> u32 {
    u32::try_from(tokens).unwrap_or(u32::MAX)
}
