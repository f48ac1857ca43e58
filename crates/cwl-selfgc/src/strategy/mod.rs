//! Self-GC as a [`cwl::Strategy`].
//!
//! The strategy keeps the whole transcript, indexes it into objects
//! (`conversation:user:k`, `function:<tool>:n`) and shows the agent the
//! projection of every action it committed. A governance round starts when
//! the prompt passes the trigger share of the budget τ (and, after a
//! round, once it has grown by another regrowth share): the strategy asks
//! the harness for a `planner` side call over a fork of the current view,
//! annotated as in Listing 1, with the planner contract appended. The
//! answer is parsed (Listing 2) and rehearsed; an accepted plan waits
//! until a safe turn boundary (no tool call waiting for its result) and is
//! committed there by the cache-aware rule: at once when it prunes at
//! least the commit share of the view, else at the next task boundary (a
//! new user request), when the provider's prefix cache has expired (an
//! idle gap of at least `cache_ttl_s` before the model call, told through
//! [`Strategy::idle`]) or when the prompt passes τ. Folded payloads leave as
//! sidecar files the harness writes ([`SideCalls::take_sidecars`](cwl::SideCalls::take_sidecars));
//! `recall` reads them back byte-exact, from the transcript when a sidecar
//! is missing or damaged.
//!
//! A planner that errs, times out or answers no valid plan changes
//! nothing. The budget is a hard line: when the prompt is over τ and no
//! plan brought it under, the oldest tool results go (pruned, oldest
//! first, down to the low-water mark), then whole old conversations; only
//! if that is not enough, protected work (instruction reads, the active
//! episode) and folded or masked results go the same way. The planner is
//! a refinement, never what the budget depends on.
//!
//! Sizes compared with the budget (the view's tokens, the backstop's
//! estimates, the pruning rates of plans and commits) count tokens as the
//! provider bills them: under [`cwl::ReasoningScope::CurrentTurn`] the
//! reasoning of assistant messages before the latest user message counts
//! for nothing, though the view still sends it.
//!
//! The state (transcript, committed actions, pending plan, counters) saves
//! to JSON; every state change happens in a call the harness records
//! (a push, a side result, a pass that changed the view), so a resumed
//! session shows the same view, and the same health: Self-GC's zones are
//! its own lines (the trigger and τ), its metrics the paper's pruning rate
//! and what became of each plan (see [`SelfGcMetrics`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cwl::Meter;
use cwl::strategy::{
    Health, NoSidecars, Saved, SideCalls, SideRequest, SidecarFile, SidecarStore, Strategy,
};
use cwl::tokens::message_tokens;
use cwl::{
    Checkpoint, Config, Context, DelimiterOutcome, Message, PaperOrder, ReasoningScope, Report,
    Source, TokenCounter, ToolSpec, TranscriptError, TranscriptStore,
};
use serde::{Deserialize, Serialize};

mod backstop;
mod health;
mod recall;
mod round;

pub use health::{
    ActionCounts, PLANNER_FAILURE_ALERT, PlanCounts, PlannerFailures, PruneRates, Rejections,
    SelfGcMetrics, Zone,
};

use crate::annotate::annotate_ids;
use crate::billed::{billed_tokens, message_billed};
use crate::commit::DEFAULT_COMMIT_PRUNE;
use crate::contract::PLANNER_CONTRACT;
use crate::fold::FoldRecord;
use crate::objects::{ObjectId, ObjectTable};
use crate::plan::{Action, Target};
use crate::rehearsal::project;

/// The strategy's name as `--strategy` spells it.
pub const NAME: &str = "self-gc";

/// Version of the saved state's format.
const STATE_VERSION: u32 = 1;

/// Files whose reads are instruction files no plan may touch.
pub const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// The share of τ the prompt must pass for a governance round (our
/// reading of the paper's 30% compression threshold; see the README).
pub const DEFAULT_TRIGGER: f64 = 0.3;

/// The share of τ the prompt must grow by after a round before the next.
pub const DEFAULT_REGROWTH: f64 = 0.2;

/// The least growth, as a share of τ, between two planner rounds.
const MIN_REGROWTH: f64 = 0.02;

/// The smallest pruning rate a plan must reach to be accepted at all.
pub const DEFAULT_MIN_PRUNE: f64 = 0.05;

/// The longest the harness may wait for the planner.
pub const DEFAULT_PLANNER_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the provider keeps a prompt prefix cached (Anthropic's
/// default cache lives 5 minutes): a longer idle gap breaks the prefix
/// anyway, so a pending plan commits then.
pub const DEFAULT_CACHE_TTL_S: u64 = 300;

fn default_cache_ttl_s() -> u64 {
    DEFAULT_CACHE_TTL_S
}

/// The planner's output limit.
pub const PLANNER_MAX_OUTPUT_TOKENS: u32 = 2_048;

/// The channel named in the planner's header metadata.
const LABEL: &str = "cli";

/// The reason the budget backstop gives its prunes.
pub const BACKSTOP_REASON: &str = "budget_backstop";

/// Self-GC's tunables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfGcOptions {
    /// The share of τ the prompt must pass before the planner is asked.
    pub trigger: f64,
    /// The share of τ the prompt must grow by after a round before the
    /// planner is asked again (or half the way to τ, if that is less).
    pub regrowth: f64,
    /// The smallest pruning rate a plan must reach to be accepted.
    pub min_prune: f64,
    /// The pruning rate from which an accepted plan is committed at once.
    pub commit_prune: f64,
    /// The longest the harness may wait for the planner, in milliseconds.
    pub planner_timeout_ms: u64,
    /// How long the provider's prefix cache lives, in seconds: an idle
    /// gap this long before a model call (see [`Strategy::idle`]) counts
    /// as a broken prefix, and a pending plan commits. Options saved
    /// before it existed read the default.
    #[serde(default = "default_cache_ttl_s")]
    pub cache_ttl_s: u64,
}

impl Default for SelfGcOptions {
    fn default() -> Self {
        SelfGcOptions {
            trigger: DEFAULT_TRIGGER,
            regrowth: DEFAULT_REGROWTH,
            min_prune: DEFAULT_MIN_PRUNE,
            commit_prune: DEFAULT_COMMIT_PRUNE,
            planner_timeout_ms: u64::try_from(DEFAULT_PLANNER_TIMEOUT.as_millis())
                .unwrap_or(u64::MAX),
            cache_ttl_s: DEFAULT_CACHE_TTL_S,
        }
    }
}

/// The planner call waiting for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Asked {
    id: u64,
}

/// An accepted plan waiting for its commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pending {
    targets: Vec<Target>,
    summary: String,
    prune: f64,
}

/// What the strategy did so far. Saved with the state; fields added
/// after the first format read as zero from older session files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SelfGcStats {
    /// Planner calls answered (plans or errors).
    pub rounds: u64,
    /// Plans accepted by rehearsal.
    pub accepted: u64,
    /// Answers that changed nothing (errors, malformed, rejected).
    pub rejected: u64,
    /// Plans committed.
    pub commits: u64,
    /// Passes of the budget backstop.
    pub backstops: u64,
    /// Of the rejected: planner calls that timed out.
    pub timeouts: u64,
    /// Of the rejected: planner calls that failed otherwise (the
    /// provider's error).
    pub errors: u64,
    /// Of the rejected: answers that were no valid Listing 2 plan.
    pub malformed: u64,
    /// Of the rejected: plans of which rehearsal could apply no target.
    pub no_target: u64,
    /// Of the rejected: plans that would prune less than the minimum.
    pub too_little: u64,
    /// Accepted plans replaced by a later one before their commit.
    pub superseded: u64,
    /// Planner answers in a row that were failures (timeouts, errors,
    /// malformed answers); a parsed plan ends the run.
    pub failure_streak: u64,
    /// View tokens before and after the last commit.
    pub last_commit: Option<CommitTokens>,
}

/// The view's tokens around one commit, for its pruning rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitTokens {
    /// Tokens of the view before, |C|.
    pub before: u64,
    /// Tokens of the projected view, |C′|.
    pub after: u64,
}

/// Self-GC's state for one session.
pub struct SelfGc {
    meter: Meter,
    options: SelfGcOptions,
    counter: Arc<dyn TokenCounter>,
    /// The messages' skeletons: answers the delimiter protocol and pairs
    /// calls with results.
    shadow: Context,
    transcript: Vec<Message>,
    table: ObjectTable,
    committed: Vec<Target>,
    folds: BTreeMap<ObjectId, FoldRecord>,
    view: Vec<Message>,
    origins: Vec<(usize, bool)>,
    /// Tokens of the view's messages as billed (`crate::billed`).
    view_tokens: usize,
    next_request: u64,
    asked: Option<Asked>,
    pending: Option<Pending>,
    last_round: Option<usize>,
    /// The idle gap, in seconds, that outlived the cache before the next
    /// pass (set by [`Strategy::idle`], cleared by the pass).
    cache_expired: Option<u64>,
    stats: SelfGcStats,
    sidecars_out: Vec<SidecarFile>,
    notes: Vec<String>,
}

impl std::fmt::Debug for SelfGc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfGc")
            .field("budget", &self.meter.budget())
            .field("tokens", &self.tokens())
            .field("messages", &self.transcript.len())
            .field("committed", &self.committed.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The saved state; the object table and view are rebuilt from it.
#[derive(Debug, Serialize, Deserialize)]
struct State {
    strategy: String,
    version: u32,
    config: Config,
    options: SelfGcOptions,
    shadow: Checkpoint,
    transcript: Vec<Message>,
    committed: Vec<Target>,
    folds: BTreeMap<ObjectId, FoldRecord>,
    offset: i64,
    calibrated: bool,
    next_request: u64,
    asked: Option<Asked>,
    pending: Option<Pending>,
    last_round: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cache_expired: Option<u64>,
    stats: SelfGcStats,
}

impl SelfGc {
    /// An empty session offering `tools`, under `config`'s budget, with
    /// the default options.
    pub fn new(config: Config, counter: Arc<dyn TokenCounter>, tools: Vec<ToolSpec>) -> Self {
        SelfGc::with_options(config, counter, tools, SelfGcOptions::default())
    }

    /// An empty session with `options`.
    pub fn with_options(
        config: Config,
        counter: Arc<dyn TokenCounter>,
        tools: Vec<ToolSpec>,
        options: SelfGcOptions,
    ) -> Self {
        let mut unbounded = config.clone();
        unbounded.budget = usize::MAX;
        let shadow = Context::new(unbounded, Arc::clone(&counter), tools);
        SelfGc {
            meter: Meter::new(config),
            options,
            counter,
            shadow,
            transcript: Vec::new(),
            table: ObjectTable::new(),
            committed: Vec::new(),
            folds: BTreeMap::new(),
            view: Vec::new(),
            origins: Vec::new(),
            view_tokens: 0,
            next_request: 0,
            asked: None,
            pending: None,
            last_round: None,
            cache_expired: None,
            stats: SelfGcStats::default(),
            sidecars_out: Vec::new(),
            notes: Vec::new(),
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
        let table = ObjectTable::of(&state.transcript);
        let mut restored = SelfGc {
            meter: Meter::restore(state.config, state.offset, state.calibrated),
            options: state.options,
            counter,
            shadow,
            transcript: state.transcript,
            table,
            committed: state.committed,
            folds: state.folds,
            view: Vec::new(),
            origins: Vec::new(),
            view_tokens: 0,
            next_request: state.next_request,
            asked: state.asked,
            pending: state.pending,
            last_round: state.last_round,
            cache_expired: state.cache_expired,
            stats: state.stats,
            sidecars_out: Vec::new(),
            notes: Vec::new(),
        };
        restored.rebuild_view();
        Ok(restored)
    }

    /// The options in force.
    pub fn options(&self) -> &SelfGcOptions {
        &self.options
    }

    /// What the strategy did so far.
    pub fn stats(&self) -> SelfGcStats {
        self.stats
    }

    /// The actions committed so far, in order.
    pub fn committed(&self) -> &[Target] {
        &self.committed
    }

    /// The objects of the session, with the allocator's state.
    pub fn objects(&self) -> &ObjectTable {
        &self.table
    }

    /// Whether an accepted plan waits for its commit.
    pub fn has_pending_plan(&self) -> bool {
        self.pending.is_some()
    }

    /// The planner's fork of the current view: every object marked with
    /// its id (Listing 1), the planner contract appended.
    pub fn planner_messages(&self) -> Vec<Message> {
        let ids: Vec<Option<&ObjectId>> = self
            .origins
            .iter()
            .map(|&(at, _)| self.table.id_at(at))
            .collect();
        let mut messages = annotate_ids(&self.view, &ids, LABEL);
        match messages.last_mut() {
            Some(Message::User { content }) => {
                content.push_str("\n\n");
                content.push_str(PLANNER_CONTRACT);
            }
            _ => messages.push(Message::user(PLANNER_CONTRACT)),
        }
        messages
    }

    fn rebuild_view(&mut self) {
        let projection = project(
            &self.transcript,
            &self.table,
            self.counter.as_ref(),
            &self.committed,
        );
        self.view_tokens = billed_tokens(
            self.counter.as_ref(),
            &projection.messages,
            self.meter.config().reasoning,
        );
        self.view = projection.messages;
        self.origins = projection.origins;
    }

    /// Index of the latest model response: it and what follows go back
    /// unmodified.
    fn in_flight(&self) -> usize {
        self.transcript
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
            .unwrap_or(self.transcript.len())
    }
}

impl Strategy for SelfGc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn push(&mut self, message: Message) -> Result<Vec<DelimiterOutcome>, TranscriptError> {
        let outcomes = self.shadow.push(message.skeleton())?;
        let at = self.transcript.len();
        self.table.push(&message);
        let user = matches!(message, Message::User { .. });
        let tokens = message_tokens(self.counter.as_ref(), &message);
        self.view.push(message.clone());
        self.origins.push((at, false));
        self.transcript.push(message);
        if user && self.meter.config().reasoning == ReasoningScope::CurrentTurn {
            // A new turn: the reasoning before it is no longer billed.
            self.view_tokens = billed_tokens(
                self.counter.as_ref(),
                &self.view,
                self.meter.config().reasoning,
            );
        } else {
            // After the latest user message: billed in full.
            self.view_tokens += tokens;
        }
        Ok(outcomes)
    }

    fn enforce(&mut self) -> Report {
        let before = self.tokens();
        let mut warnings = Vec::new();
        let old =
            (self.pending.is_some() || before > self.meter.budget()).then(|| self.view.clone());
        warnings.extend(self.commit_pending());
        self.cache_expired = None;
        if !warnings.is_empty() {
            self.rebuild_view();
        }
        // Each round prunes at least one object, so this ends.
        while let Some(text) = self.backstop() {
            warnings.push(text);
            self.rebuild_view();
        }
        if !warnings.is_empty() {
            // The next planner round waits for growth from the smaller view.
            let now = self.tokens();
            self.last_round = self.last_round.map(|last| last.min(now));
        }
        let first_changed = old.and_then(|old| {
            old.iter()
                .zip(&self.view)
                .position(|(was, now)| was != now)
                .or_else(|| (old.len() != self.view.len()).then(|| old.len().min(self.view.len())))
        });
        for warning in &warnings {
            self.note(warning.clone());
        }
        let after = self.tokens();
        let budget = self.meter.budget();
        let met = after <= budget;
        let in_flight = self.in_flight();
        let turn_start = self.meter.config().reasoning.turn_start(&self.view);
        let in_flight_tokens: usize = self
            .origins
            .iter()
            .zip(&self.view)
            .enumerate()
            .filter(|(_, ((at, _), _))| *at >= in_flight)
            .map(|(pos, (_, m))| message_billed(self.counter.as_ref(), m, pos < turn_start))
            .sum();
        if !met {
            warnings.push(format!(
                "budget cannot be met: {after} tokens remain over the budget of {budget} once everything Self-GC may prune is gone (system and user messages, instruction files, the active work, the latest response and its results stay)"
            ));
        }
        Report {
            tokens_before: before,
            tokens_after: after,
            budget,
            floor: (budget as f64 * self.meter.config().low_water.get()) as usize,
            budget_met: met,
            deferred: !met && after.saturating_sub(in_flight_tokens) <= budget,
            first_changed,
            folded: 0,
            episodes: Vec::new(),
            warnings,
        }
    }

    fn idle(&mut self, seconds: u64) -> bool {
        // Only a waiting plan minds the cache; other gaps change nothing.
        let expired = self.pending.is_some() && seconds >= self.options.cache_ttl_s;
        if expired {
            self.cache_expired = Some(seconds);
        }
        expired
    }

    fn view_sources(&self) -> Box<dyn Iterator<Item = (Source, &Message)> + '_> {
        Box::new(
            self.origins
                .iter()
                .zip(&self.view)
                .map(|(&(at, altered), message)| {
                    let push = at as u64;
                    let source = if altered {
                        Source::Altered(push)
                    } else {
                        Source::Pushed(push)
                    };
                    (source, message)
                }),
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
        self.shadow.tools_tokens() + self.view_tokens
    }

    fn recall(&self, arguments: &str, store: &dyn TranscriptStore) -> Result<String, String> {
        self.recall_with(arguments, store, &NoSidecars)
    }

    fn recall_with(
        &self,
        arguments: &str,
        _: &dyn TranscriptStore,
        sidecars: &dyn SidecarStore,
    ) -> Result<String, String> {
        let id = recall::recall_id(arguments)?;
        let (action, by) = self.collected(&id)?;
        if action == Action::Fold
            && by == &id
            && let Some(record) = self.folds.get(&id)
        {
            match sidecars.read_sidecar(&record.file) {
                Ok(text) if record.matches(&text) => return Ok(text),
                Ok(_) => {
                    tracing::warn!(target: "cwl_selfgc", "sidecar {} does not match its fold; recalled from the transcript", record.file)
                }
                Err(error) => {
                    tracing::warn!(target: "cwl_selfgc", "sidecar {}: {error}; recalled from the transcript", record.file)
                }
            }
        }
        self.payload(&id)
            .ok_or_else(|| format!("`{id}` cannot be read back from the transcript"))
    }

    fn save(&self) -> Result<Saved, serde_json::Error> {
        let state = State {
            strategy: NAME.to_string(),
            version: STATE_VERSION,
            config: self.meter.config().clone(),
            options: self.options.clone(),
            shadow: self.shadow.checkpoint(),
            transcript: self.transcript.clone(),
            committed: self.committed.clone(),
            folds: self.folds.clone(),
            offset: self.meter.offset(),
            calibrated: self.meter.calibrated(),
            next_request: self.next_request,
            asked: self.asked,
            pending: self.pending.clone(),
            last_round: self.last_round,
            cache_expired: self.cache_expired,
            stats: self.stats,
        };
        Ok(Saved {
            pushes: self.transcript.len() as u64,
            state: serde_json::to_value(&state)?,
        })
    }

    fn health(&self) -> Option<Health> {
        Some(self.health_now())
    }

    fn metrics(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self.metrics_now()).ok()
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}

impl SideCalls for SelfGc {
    fn side_request(&mut self) -> Option<SideRequest> {
        if self.asked.is_some() {
            return None;
        }
        let tokens = self.tokens();
        let budget = self.meter.budget() as f64;
        if (tokens as f64) < self.options.trigger * budget {
            return None;
        }
        // After a round: once the prompt grew by the regrowth share, or
        // got half-way from that round's level to the budget, if sooner;
        // never with no growth at all.
        let next = self.last_round.map(|last| {
            let last = last as f64;
            let growth = (self.options.regrowth * budget)
                .min((budget - last) / 2.0)
                .max(MIN_REGROWTH * budget);
            last + growth
        });
        if next.is_some_and(|next| (tokens as f64) < next) {
            return None;
        }
        if !self.collectable() {
            return None;
        }
        self.next_request += 1;
        let id = self.next_request;
        self.asked = Some(Asked { id });
        Some(SideRequest {
            id,
            purpose: "planner".to_string(),
            messages: self.planner_messages(),
            timeout: Duration::from_millis(self.options.planner_timeout_ms),
            max_output_tokens: Some(PLANNER_MAX_OUTPUT_TOKENS),
        })
    }

    fn side_result(&mut self, id: u64, result: Result<String, String>) {
        if self.asked.map(|a| a.id) != Some(id) {
            self.note(format!(
                "self-gc: an answer to side call {id}, which is not the planner call waiting, was ignored"
            ));
            return;
        }
        self.asked = None;
        self.last_round = Some(self.tokens());
        self.stats.rounds += 1;
        self.take_answer(result);
    }

    fn take_sidecars(&mut self) -> Vec<SidecarFile> {
        std::mem::take(&mut self.sidecars_out)
    }
}
