//! The episode graph: episodes, their dependency edges and the rules that
//! keep it a DAG of expl → act edges with at most one active episode.
//!
//! The graph also keeps the eviction candidates in ordered sets, so the
//! next target is found in O(log E) however long the session.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::id_set::IdSet;
use crate::protocol::{Annotation, DelimiterError, EpisodeKind};
use crate::repeats::Repeats;
use crate::uses::Uses;

/// Index of an episode in its session, in order of creation (= age).
pub type EpisodeId = u32;

/// Content bits of an episode: tool results.
pub(crate) const HOLDS_RESULTS: u8 = 1;
/// Content bits of an episode: reasoning.
pub(crate) const HOLDS_REASONING: u8 = 2;
/// Content bits of an episode: calls of bulk tools.
pub(crate) const HOLDS_BULK: u8 = 4;
/// Content bits of an episode: calls of other tools.
pub(crate) const HOLDS_INTERMEDIATE: u8 = 8;

/// The strip levels of the eviction policy, least destructive first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Level {
    /// Single tool outputs that a later output still in the view repeats,
    /// each replaced by a short stub ([`crate::Config::restated`]). Not a
    /// stage of the episode: it can happen at any level, to any episode.
    Restated,
    /// A plan tool's call and its result, once a later call of the same
    /// tool carries the plan ([`crate::Config::superseded_plans`]). Like
    /// [`Level::Restated`], not a stage of the episode.
    Plan,
    /// An act reduced to its calls: the results of its tool calls (test
    /// runs, command output) each replaced by a short stub, and the text
    /// and reasoning around its calls dropped; the calls, the record of
    /// what changed, stay. The act then no longer protects the expl
    /// episodes it depends on (act episodes only, when
    /// [`crate::Config::stub_act_outputs`] is on).
    Output,
    /// Reasoning traces (expl episodes only).
    Reasoning,
    /// Calls and results of enumerating tools.
    Bulk,
    /// Calls and results of every other tool.
    Intermediate,
    /// The calls whose outputs were too large to keep and were stubbed,
    /// with the episode's text: an expl keeps only its small outputs
    /// (at most [`crate::SMALL_TOKENS`]: a listing, a short status) and
    /// their calls until removal (expl episodes only, when
    /// [`crate::Config::stub_act_outputs`] is on).
    Large,
    /// The whole episode, leaving an expl's description as residue.
    Removed,
}

impl Level {
    /// All levels, least destructive first: Algorithm 1's four, with the
    /// act-output stub first and the large outputs before removal.
    pub const ALL: [Level; 6] = [
        Level::Output,
        Level::Reasoning,
        Level::Bulk,
        Level::Intermediate,
        Level::Large,
        Level::Removed,
    ];

    /// What the level removes, in words for people.
    pub fn label(self) -> &'static str {
        match self {
            Level::Restated => "restated output",
            Level::Plan => "superseded plan",
            Level::Output => "act output",
            Level::Reasoning => "reasoning",
            Level::Bulk => "bulk output",
            Level::Intermediate => "tool output",
            Level::Large => "large outputs",
            Level::Removed => "removed",
        }
    }

    /// The content bit a level strips ([`Level::Removed`]: none needed).
    pub(crate) fn needs(self) -> u8 {
        match self {
            Level::Restated | Level::Plan | Level::Output => 0,
            Level::Reasoning => HOLDS_REASONING,
            Level::Bulk => HOLDS_BULK,
            Level::Intermediate => HOLDS_INTERMEDIATE,
            Level::Large => 0,
            Level::Removed => 0,
        }
    }

    /// Whether the level applies to an episode of this kind.
    pub fn applies_to(self, kind: EpisodeKind) -> bool {
        match self {
            Level::Output => kind == EpisodeKind::Act,
            Level::Reasoning | Level::Large => kind == EpisodeKind::Expl,
            _ => true,
        }
    }
}

/// Whether an episode is still being worked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EpisodeState {
    /// Started and not ended: never evicted.
    Active,
    /// Ended: may be evicted.
    Closed,
}

/// What made an episode: the model, the harness, or the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Origin {
    /// Opened and closed by `delimiter` calls (or out-of-band annotations).
    Annotated,
    /// One model response outside every episode: an implicit expl that
    /// every later act depends on.
    Unannotated,
    /// Content brought back by `recall`: an expl, evictable like any other.
    Recalled,
}

/// One episode of the session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Episode {
    name: String,
    kind: EpisodeKind,
    origin: Origin,
    dependencies: Vec<EpisodeId>,
    description: Option<String>,
    state: EpisodeState,
    level: Option<Level>,
    folded: bool,
    tokens: usize,
    /// Which kinds of content it holds ([`Level::needs`] bits), so levels
    /// with nothing to strip are skipped; `None` (a checkpoint from before
    /// it was kept): unknown, every level applies.
    #[serde(default)]
    contents: Option<u8>,
    live_dependents: u32,
    /// Whether it no longer protects its dependencies: an act reduced to
    /// its calls ([`Level::Output`]) or removed.
    #[serde(default)]
    released: bool,
    pub(crate) first_seq: u64,
    pub(crate) last_seq: u64,
    pub(crate) start_call: Option<String>,
}

impl Episode {
    /// Whether it holds tool use (calls or their results): something an
    /// act may depend on. An unannotated segment of text and reasoning
    /// alone (an agent's answer between episodes) explored nothing.
    pub(crate) fn explores(&self) -> bool {
        self.contents
            .is_none_or(|held| held & (HOLDS_RESULTS | HOLDS_BULK | HOLDS_INTERMEDIATE) != 0)
    }

    /// The episode's name (unannotated segments get a generated one).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Exploration or action.
    pub fn kind(&self) -> EpisodeKind {
        self.kind
    }
    /// What made the episode.
    pub fn origin(&self) -> Origin {
        self.origin
    }
    /// False for an unannotated segment (an implicit expl episode).
    pub fn is_annotated(&self) -> bool {
        self.origin != Origin::Unannotated
    }
    /// The expl episodes this act declared it relies on.
    pub fn dependencies(&self) -> &[EpisodeId] {
        &self.dependencies
    }
    /// What an expl episode learned, given when it ended.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// Active or closed.
    pub fn state(&self) -> EpisodeState {
        self.state
    }
    /// The last eviction level applied, if any.
    pub fn level(&self) -> Option<Level> {
        self.level
    }
    /// The id of the delimiter call that opened it (`None` when it was
    /// opened out of band or is an unannotated segment).
    pub fn start_call(&self) -> Option<&str> {
        self.start_call.as_deref()
    }
    /// Whether the episode has been removed entirely.
    pub fn is_removed(&self) -> bool {
        self.level == Some(Level::Removed)
    }
    /// Tokens of its content still in the view (residue excluded).
    pub fn tokens(&self) -> usize {
        self.tokens
    }
    /// Whether its residue was folded into the index line.
    pub fn is_folded(&self) -> bool {
        self.folded
    }
    /// Push positions (0-based, in push order) of the first and last
    /// message the episode spans: where a session store finds its content.
    pub fn span(&self) -> (u64, u64) {
        (
            self.first_seq.saturating_sub(1) / 2,
            push_index(self.last_seq),
        )
    }
}

/// The push position of a message's stream position (`Context` numbers
/// pushes 2, 4, … and out-of-band annotations the odd positions between).
pub(crate) fn push_index(seq: u64) -> u64 {
    seq.saturating_sub(2) / 2
}

/// The episodes of a session and the protocol state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Graph {
    episodes: Vec<Episode>,
    /// The most recent episode of each name.
    names: HashMap<String, EpisodeId>,
    active: Option<EpisodeId>,
    gap: Option<EpisodeId>,
    gaps_opened: u32,
    /// Closed acts not yet removed.
    acts: IdSet,
    /// Closed acts no level has touched yet.
    #[serde(default)]
    fresh_acts: BTreeSet<EpisodeId>,
    /// Acts not yet removed, active ones included.
    live_acts: BTreeSet<EpisodeId>,
    /// Closed annotated or recalled expls not yet removed that no act
    /// protects (every dependent act removed or reduced to its calls).
    expls: IdSet,
    /// Closed unannotated segments not yet removed.
    gaps: IdSet,
    frontier: u64,
    /// Episodes below this index are closed and removed or without
    /// reasoning, so [`Graph::oldest_reasoning_before`] starts here.
    #[serde(skip)]
    reasoning_done: usize,
}

/// The effect of an accepted annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    Started(EpisodeId),
    Ended(EpisodeId),
}

/// The episodes an eviction step may operate on, oldest first within each
/// kind: closed, not in flight, not removed, and (for expl) with every
/// dependent act removed or reduced to its calls ([`Level::Output`]).
#[derive(Debug, Clone, Copy)]
pub struct Candidates<'a> {
    graph: &'a Graph,
    frontier: u64,
    recent: u64,
    repeats: Option<&'a Repeats>,
    uses: Option<&'a Uses>,
    stub_outputs: bool,
    /// Whether the unannotated segments of text alone hold more than
    /// their cap ([`crate::Config::answer_share`]), so the oldest goes
    /// first.
    text_over: bool,
}

impl Candidates<'_> {
    /// The candidates by last use ([`Candidates::last_use`]), least
    /// recently used first; episodes the use index does not know (a
    /// checkpoint from before it was kept) are not listed.
    pub fn least_recently_used(&self) -> impl Iterator<Item = EpisodeId> + '_ {
        let graph = self.graph;
        let mut open: Vec<(u64, EpisodeId)> = self
            .uses
            .into_iter()
            .flat_map(|uses| {
                graph
                    .gaps
                    .range(graph.open_gaps_from()..)
                    .copied()
                    .filter(|&id| uses.knows(id) && self.settled(id))
                    .map(|id| (uses.clock(id), id))
            })
            .collect();
        open.sort_unstable();
        let listed = self
            .uses
            .into_iter()
            .flat_map(Uses::least_recent)
            .filter(move |&(_, id)| !graph.gaps.contains(&id) && self.contains(id));
        merge_sorted(listed, open.into_iter()).map(|(_, id)| id)
    }

    /// [`Candidates::least_recently_used`] by sorting every candidate the
    /// use index knows, to check the merged walk against.
    pub(crate) fn least_recently_used_by_sorting(&self) -> Vec<EpisodeId> {
        let Some(uses) = self.uses else {
            return Vec::new();
        };
        let mut known: Vec<(u64, EpisodeId)> = (0..self.graph.episodes.len() as EpisodeId)
            .filter(|&id| uses.knows(id) && self.contains(id))
            .map(|id| (uses.clock(id), id))
            .collect();
        known.sort_unstable();
        known.into_iter().map(|(_, id)| id).collect()
    }

    /// History position, in tokens, of the last time the model's output
    /// named something the episode holds, or of its own latest content if
    /// later (0 when unknown). See [`crate::Config::stub_act_outputs`].
    pub fn last_use(&self, id: EpisodeId) -> u64 {
        self.uses.map_or(0, |uses| uses.clock(id))
    }

    /// The oldest closed unannotated segment of text and reasoning alone
    /// outside the recent working set, once such segments hold more than
    /// their cap ([`crate::Config::answer_share`]).
    pub fn text_over_cap(&self) -> Option<EpisodeId> {
        if !self.text_over {
            return None;
        }
        let graph = self.graph;
        graph
            .gaps
            .iter()
            .copied()
            .find(|&id| graph.is_loose_text(id) && self.settled(id) && self.is_old(id))
    }

    /// The oldest candidate act.
    pub fn oldest_act(&self) -> Option<EpisodeId> {
        self.graph.acts.iter().copied().find(|&id| self.settled(id))
    }

    /// The oldest candidate expl (unannotated segments included once no
    /// later act remains).
    pub fn oldest_expl(&self) -> Option<EpisodeId> {
        let graph = self.graph;
        let annotated = graph.expls.iter().copied().find(|&id| self.settled(id));
        let gap = graph
            .gaps
            .range(graph.open_gaps_from()..)
            .copied()
            .find(|&id| self.settled(id));
        match (annotated, gap) {
            (Some(a), Some(g)) => Some(a.min(g)),
            (a, g) => a.or(g),
        }
    }

    /// The oldest candidate of either kind.
    pub fn oldest(&self) -> Option<EpisodeId> {
        match (self.oldest_act(), self.oldest_expl()) {
            (Some(a), Some(e)) => Some(a.min(e)),
            (a, e) => a.or(e),
        }
    }

    /// The oldest candidate outside the recent working set most of whose
    /// lines a later episode still in the view repeats
    /// ([`crate::Config::superseded`]).
    pub fn oldest_superseded(&self) -> Option<EpisodeId> {
        self.repeats?
            .superseded()
            .find(|&id| self.is_old(id) && self.contains(id))
    }

    /// The oldest superseded old candidate that starts at or after `seq`
    /// and holds at most [`crate::SMALL_TOKENS`]: the remnant of an episode
    /// a later one repeats.
    pub fn superseded_remnant_from(&self, seq: u64) -> Option<EpisodeId> {
        self.repeats?.superseded().find(|&id| {
            let episode = self.graph.episode(id);
            episode.first_seq >= seq
                && episode.tokens <= crate::SMALL_TOKENS
                && self.is_old(id)
                && self.contains(id)
        })
    }

    /// Like [`Candidates::oldest_fresh_act`], among the acts that start at
    /// or after `seq`.
    pub fn oldest_fresh_act_from(&self, seq: u64) -> Option<EpisodeId> {
        if !self.stub_outputs {
            return None;
        }
        self.graph.fresh_acts.iter().copied().find(|&id| {
            self.graph.episode(id).first_seq >= seq && self.settled(id) && self.is_old(id)
        })
    }

    /// The oldest candidate act outside the recent working set that no
    /// level has touched yet, when act outputs are stubbed first
    /// ([`crate::Config::stub_act_outputs`]); `None` otherwise.
    pub fn oldest_fresh_act(&self) -> Option<EpisodeId> {
        if !self.stub_outputs {
            return None;
        }
        self.graph
            .fresh_acts
            .iter()
            .copied()
            .find(|&id| self.settled(id) && self.is_old(id))
    }

    /// Whether the episode holds at most [`crate::SMALL_TOKENS`] of the
    /// view while old acts are reduced first: cheap to keep, so it goes
    /// after the larger old candidates.
    pub fn is_small(&self, id: EpisodeId) -> bool {
        self.stub_outputs && self.graph.episode(id).tokens <= crate::SMALL_TOKENS
    }

    /// Whether old acts are reduced to their calls before anything else
    /// ([`crate::Config::stub_act_outputs`], and not a catch-up pass).
    pub fn reduces_acts(&self) -> bool {
        self.stub_outputs
    }

    /// Whether `id` is a candidate.
    pub fn contains(&self, id: EpisodeId) -> bool {
        let graph = self.graph;
        let gap_open = || graph.gaps.contains(&id) && id >= graph.open_gaps_from();
        (graph.acts.contains(&id) || graph.expls.contains(&id) || gap_open()) && self.settled(id)
    }

    /// Whether the episode ended before the recent working set (the last
    /// `keep_recent` tokens of the view): strategies take such episodes
    /// before any that reach into it.
    pub fn is_old(&self, id: EpisodeId) -> bool {
        self.graph.episode(id).last_seq < self.recent
    }

    /// The graph the candidates come from.
    pub fn graph(&self) -> &Graph {
        self.graph
    }

    fn settled(&self, id: EpisodeId) -> bool {
        self.graph.episode(id).last_seq < self.frontier
    }
}

/// Merges two ascending streams into one ascending stream.
fn merge_sorted<T: Ord>(
    first: impl Iterator<Item = T>,
    second: impl Iterator<Item = T>,
) -> impl Iterator<Item = T> {
    let (mut first, mut second) = (first.peekable(), second.peekable());
    std::iter::from_fn(move || match (first.peek(), second.peek()) {
        (Some(a), Some(b)) if b < a => second.next(),
        (Some(_), _) => first.next(),
        (None, _) => second.next(),
    })
}

impl Graph {
    /// The first id an unannotated segment may have to be a candidate:
    /// past the last live act, which may depend on any earlier one.
    fn open_gaps_from(&self) -> EpisodeId {
        self.live_acts.last().map_or(0, |act| act + 1)
    }

    /// Whether `id` is a closed unannotated segment of text and reasoning
    /// alone ([`Candidates::text_over_cap`]).
    pub(crate) fn is_loose_text(&self, id: EpisodeId) -> bool {
        self.gaps.contains(&id) && !self.episode(id).explores()
    }

    /// The tokens `id` holds if it is loose text, else 0.
    pub(crate) fn loose_tokens(&self, id: EpisodeId) -> usize {
        if self.is_loose_text(id) {
            self.episode(id).tokens
        } else {
            0
        }
    }

    /// The tokens all loose text holds ([`Graph::is_loose_text`]).
    pub(crate) fn loose_text_tokens(&self) -> usize {
        self.gaps.iter().map(|&id| self.loose_tokens(id)).sum()
    }

    /// Applies `change` to episode `id`, keeping `loose`, a running
    /// [`Graph::loose_text_tokens`], current.
    pub(crate) fn change_tracking_loose(
        &mut self,
        id: EpisodeId,
        loose: &mut usize,
        change: impl FnOnce(&mut Graph),
    ) {
        let before = self.loose_tokens(id);
        change(self);
        *loose = *loose - before + self.loose_tokens(id);
    }

    /// All episodes, oldest first.
    pub fn episodes(&self) -> &[Episode] {
        &self.episodes
    }

    /// An episode by id.
    pub fn episode(&self, id: EpisodeId) -> &Episode {
        &self.episodes[id as usize]
    }

    /// The most recent episode with this name.
    pub fn by_name(&self, name: &str) -> Option<EpisodeId> {
        self.names.get(name).copied()
    }

    /// The annotated episode being worked in, if any.
    pub fn active(&self) -> Option<EpisodeId> {
        self.active
    }

    /// Whether the prologue is over (a first episode has started).
    pub fn started(&self) -> bool {
        !self.episodes.is_empty()
    }

    /// The candidates of the next eviction step (with no working set). An
    /// episode that reaches
    /// into the latest model response is in flight and no candidate: that
    /// response must reach the model again unmodified (providers such as
    /// Anthropic reject an altered last assistant turn, and the model must
    /// see the results of its own last calls). It keeps only the expl
    /// episodes it depends on.
    pub fn candidates(&self) -> Candidates<'_> {
        Candidates {
            graph: self,
            frontier: self.frontier,
            recent: u64::MAX,
            repeats: None,
            uses: None,
            stub_outputs: false,
            text_over: false,
        }
    }

    /// The candidates, with the recent working set beginning at stream
    /// position `recent`.
    pub(crate) fn candidates_with_recent<'a>(
        &'a self,
        recent: u64,
        repeats: &'a Repeats,
        uses: &'a Uses,
        stub_outputs: bool,
        text_over: bool,
    ) -> Candidates<'a> {
        Candidates {
            graph: self,
            frontier: self.frontier,
            recent,
            repeats: Some(repeats),
            uses: Some(uses),
            stub_outputs,
            text_over,
        }
    }

    /// Whether something would be a candidate once the latest response is
    /// settled (or the unannotated stretch it opened is closed by the
    /// next one), though nothing is now.
    pub fn waiting_on_response(&self) -> bool {
        let now = self.candidates();
        let later = Candidates {
            graph: self,
            frontier: u64::MAX,
            recent: u64::MAX,
            repeats: None,
            uses: None,
            stub_outputs: false,
            text_over: false,
        };
        now.oldest().is_none() && (later.oldest().is_some() || self.gap.is_some())
    }

    /// Tokens held by closed episodes and the open unannotated stretch that
    /// reach into the latest response, and by the expl episodes they pin:
    /// about what becomes evictable after that response.
    pub fn in_flight_tokens(&self) -> usize {
        let mut ids: Vec<EpisodeId> = Vec::new();
        for (id, episode) in self.episodes.iter().enumerate().rev() {
            if episode.last_seq < self.frontier {
                break;
            }
            let waiting =
                episode.state == EpisodeState::Closed || episode.origin == Origin::Unannotated;
            if waiting && !episode.is_removed() {
                ids.push(id as EpisodeId);
                ids.extend(episode.dependencies.iter().copied());
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids.iter().map(|&id| self.episode(id).tokens).sum()
    }

    /// A name that no episode still in the view uses, derived from `name`.
    pub fn free_name(&self, name: &str) -> String {
        if !self.name_in_use(name) {
            return name.to_string();
        }
        (2..)
            .map(|n| format!("{name}-{n}"))
            .find(|candidate| !self.name_in_use(candidate))
            .unwrap_or_else(|| name.to_string())
    }

    fn name_in_use(&self, name: &str) -> bool {
        self.names
            .get(name)
            .is_some_and(|&id| !self.episode(id).is_removed())
    }

    /// Checks an annotation against the graph without changing it.
    pub fn check(&self, annotation: &Annotation) -> Result<(), DelimiterError> {
        match annotation {
            Annotation::Start {
                name,
                kind,
                dependencies,
            } => {
                if let Some(active) = self.active {
                    return Err(DelimiterError::AlreadyActive(
                        self.episode(active).name.clone(),
                    ));
                }
                if self.name_in_use(name) {
                    return Err(DelimiterError::DuplicateName {
                        name: name.clone(),
                        suggestion: self.free_name(name),
                    });
                }
                match kind {
                    EpisodeKind::Expl if !dependencies.is_empty() => {
                        return Err(DelimiterError::ExplDependencies(name.clone()));
                    }
                    EpisodeKind::Act if dependencies.is_empty() => {
                        return Err(DelimiterError::MissingDependencies(name.clone()));
                    }
                    _ => {}
                }
                for dependency in dependencies {
                    if dependency == name {
                        return Err(DelimiterError::SelfDependency(name.clone()));
                    }
                    let Some(&id) = self.names.get(dependency) else {
                        return Err(DelimiterError::UnknownDependency(dependency.clone()));
                    };
                    // Not yet closed means active, which the one-active rule
                    // above already refused: every dependency is closed.
                    if self.episode(id).kind != EpisodeKind::Expl {
                        return Err(DelimiterError::DependencyNotExpl(dependency.clone()));
                    }
                }
                Ok(())
            }
            Annotation::End { name, description } => {
                let active = self.active.ok_or(DelimiterError::NothingActive)?;
                let episode = self.episode(active);
                if let Some(given) = name.as_ref().filter(|given| **given != episode.name) {
                    return Err(DelimiterError::EndNameMismatch {
                        given: given.clone(),
                        active: episode.name.clone(),
                    });
                }
                match (episode.kind, description) {
                    (EpisodeKind::Expl, None) => {
                        Err(DelimiterError::MissingDescription(episode.name.clone()))
                    }
                    (EpisodeKind::Act, Some(_)) => {
                        Err(DelimiterError::ActDescription(episode.name.clone()))
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// Applies a valid annotation at stream position `seq`.
    pub(crate) fn apply(
        &mut self,
        annotation: Annotation,
        seq: u64,
        start_call: Option<String>,
    ) -> Result<Applied, DelimiterError> {
        self.check(&annotation)?;
        match annotation {
            Annotation::Start {
                name,
                kind,
                dependencies,
            } => {
                self.close_gap();
                let dependencies: Vec<EpisodeId> =
                    dependencies.iter().map(|name| self.names[name]).collect();
                for &dependency in &dependencies {
                    let episode = &mut self.episodes[dependency as usize];
                    if !episode.is_removed() {
                        episode.live_dependents += 1;
                        self.expls.remove(&dependency);
                    }
                }
                let id = self.push_episode(name.clone(), kind, Origin::Annotated, seq);
                let episode = &mut self.episodes[id as usize];
                episode.dependencies = dependencies;
                episode.start_call = start_call;
                self.names.insert(name, id);
                self.active = Some(id);
                if kind == EpisodeKind::Act {
                    self.live_acts.insert(id);
                }
                Ok(Applied::Started(id))
            }
            Annotation::End { description, .. } => {
                let id = self.active.take().ok_or(DelimiterError::NothingActive)?;
                let episode = &mut self.episodes[id as usize];
                episode.description = description;
                episode.last_seq = episode.last_seq.max(seq);
                self.close(id);
                Ok(Applied::Ended(id))
            }
        }
    }

    /// Opens and closes at once an expl holding recalled content, named
    /// after what it brings back; the `recall` call is its marker, which
    /// full removal replaces with the residue.
    pub(crate) fn recalled(
        &mut self,
        of: &str,
        description: String,
        seq: u64,
        call: &str,
    ) -> EpisodeId {
        let name = self.free_name(&format!("recall-{of}"));
        let id = self.push_episode(name.clone(), EpisodeKind::Expl, Origin::Recalled, seq);
        self.episodes[id as usize].description = Some(description);
        self.episodes[id as usize].start_call = Some(call.to_string());
        self.names.insert(name, id);
        self.close(id);
        id
    }

    /// The episode that owns non-user content of the response at `seq`,
    /// opening an unannotated segment for it when no episode is active;
    /// `None` in the prologue.
    pub(crate) fn owner_at(&mut self, seq: u64) -> Option<EpisodeId> {
        if !self.started() {
            return None;
        }
        if let Some(active) = self.active {
            return Some(active);
        }
        if let Some(gap) = self.gap.filter(|&gap| self.episode(gap).first_seq == seq) {
            return Some(gap);
        }
        self.close_gap();
        self.gaps_opened += 1;
        let name = format!("(unannotated #{})", self.gaps_opened);
        let id = self.push_episode(name, EpisodeKind::Expl, Origin::Unannotated, seq);
        self.gap = Some(id);
        Some(id)
    }

    /// Extends an episode's span to cover content of `tokens` at `seq`.
    pub(crate) fn touch(&mut self, id: EpisodeId, seq: u64, tokens: usize, holds: u8) {
        let episode = &mut self.episodes[id as usize];
        episode.last_seq = episode.last_seq.max(seq);
        episode.tokens += tokens;
        if let Some(contents) = episode.contents.as_mut() {
            *contents |= holds;
        }
    }

    /// The stream position of the latest model response: it and the results
    /// that follow it are sent as they came.
    pub(crate) fn frontier(&self) -> u64 {
        self.frontier
    }

    /// Records that the latest model response sits at `seq`: the stretch of
    /// unannotated content before it is complete.
    pub(crate) fn set_frontier(&mut self, seq: u64) {
        if self
            .gap
            .is_some_and(|gap| self.episode(gap).first_seq != seq)
        {
            self.close_gap();
        }
        self.frontier = seq;
    }

    fn close_gap(&mut self) {
        if let Some(gap) = self.gap.take() {
            self.close(gap);
        }
    }

    fn close(&mut self, id: EpisodeId) {
        let episode = &mut self.episodes[id as usize];
        episode.state = EpisodeState::Closed;
        if episode.is_removed() {
            return;
        }
        match (episode.kind, episode.origin) {
            (EpisodeKind::Act, _) => {
                self.acts.insert(id);
                if episode.level.is_none() {
                    self.fresh_acts.insert(id);
                }
            }
            (EpisodeKind::Expl, Origin::Unannotated) => {
                self.gaps.insert(id);
            }
            (EpisodeKind::Expl, _) if episode.live_dependents == 0 => {
                self.expls.insert(id);
            }
            (EpisodeKind::Expl, _) => {}
        }
    }

    fn push_episode(
        &mut self,
        name: String,
        kind: EpisodeKind,
        origin: Origin,
        seq: u64,
    ) -> EpisodeId {
        let id = EpisodeId::try_from(self.episodes.len()).unwrap_or(EpisodeId::MAX);
        self.episodes.push(Episode {
            name,
            kind,
            origin,
            dependencies: Vec::new(),
            description: None,
            state: EpisodeState::Active,
            level: None,
            folded: false,
            tokens: 0,
            contents: Some(0),
            live_dependents: 0,
            released: false,
            first_seq: seq,
            last_seq: seq,
            start_call: None,
        });
        id
    }

    /// The next level to apply to `id` among `levels`, which always end
    /// with removal, if any is left; the act-output stub only when
    /// `stub_outputs`.
    pub(crate) fn next_level(
        &self,
        id: EpisodeId,
        levels: &[Level],
        stub_outputs: bool,
    ) -> Option<Level> {
        let episode = self.episode(id);
        levels
            .iter()
            .copied()
            .chain(std::iter::once(Level::Removed))
            .filter(|level| level.applies_to(episode.kind))
            .filter(|level| stub_outputs || !matches!(level, Level::Output | Level::Large))
            .filter(|level| {
                let needs = level.needs();
                needs == 0 || episode.contents.is_none_or(|held| held & needs != 0)
            })
            .find(|level| episode.level.is_none_or(|done| *level > done))
    }

    /// The oldest closed episode that ended before stream position
    /// `before` (and before the latest response) and still holds
    /// reasoning.
    pub(crate) fn oldest_reasoning_before(&mut self, before: u64) -> Option<EpisodeId> {
        let before = before.min(self.frontier);
        let holds = |episode: &Episode| {
            !episode.is_removed()
                && episode
                    .contents
                    .is_none_or(|held| held & HOLDS_REASONING != 0)
        };
        // A closed episode never gains reasoning, nor comes back once removed.
        while self
            .episodes
            .get(self.reasoning_done)
            .is_some_and(|episode| episode.state == EpisodeState::Closed && !holds(episode))
        {
            self.reasoning_done += 1;
        }
        let start = self.reasoning_done;
        self.episodes[start..]
            .iter()
            .enumerate()
            .take_while(|(_, episode)| episode.first_seq < before)
            .find(|(_, episode)| {
                episode.state == EpisodeState::Closed && episode.last_seq < before && holds(episode)
            })
            .map(|(at, _)| (start + at) as EpisodeId)
    }

    /// Records that the reasoning `id` held, `freed` tokens, left the view
    /// without a change of level (an earlier turn's, which the provider
    /// drops, or an old episode's, which a pass takes first): until it
    /// reasons again, it has none left to strip.
    pub(crate) fn drop_reasoning(&mut self, id: EpisodeId, freed: usize) {
        let episode = &mut self.episodes[id as usize];
        episode.tokens = episode.tokens.saturating_sub(freed);
        // Unknown contents (an old checkpoint): everything but reasoning.
        let held = episode.contents.get_or_insert(u8::MAX);
        *held &= !HOLDS_REASONING;
    }

    /// Records that `freed` tokens of `id` left the view without a change
    /// of level (a restated output stubbed).
    pub(crate) fn shrink(&mut self, id: EpisodeId, freed: usize) {
        let episode = &mut self.episodes[id as usize];
        episode.tokens = episode.tokens.saturating_sub(freed);
    }

    /// Records that `level` was applied to `id`.
    pub(crate) fn mark(&mut self, id: EpisodeId, level: Level, freed: usize) {
        self.fresh_acts.remove(&id);
        let episode = &mut self.episodes[id as usize];
        episode.level = Some(level);
        episode.tokens = episode.tokens.saturating_sub(freed);
        if level == Level::Removed {
            episode.tokens = 0;
            self.acts.remove(&id);
            self.live_acts.remove(&id);
            self.expls.remove(&id);
            self.gaps.remove(&id);
        } else if level != Level::Output {
            return;
        }
        if std::mem::replace(&mut self.episodes[id as usize].released, true) {
            return;
        }
        let dependencies = std::mem::take(&mut self.episodes[id as usize].dependencies);
        for &dependency in &dependencies {
            let episode = &mut self.episodes[dependency as usize];
            episode.live_dependents = episode.live_dependents.saturating_sub(1);
            if episode.live_dependents == 0
                && episode.state == EpisodeState::Closed
                && !episode.is_removed()
                && episode.origin != Origin::Unannotated
            {
                self.expls.insert(dependency);
            }
        }
        self.episodes[id as usize].dependencies = dependencies;
    }

    /// Records that an episode's residue went into the index line.
    pub(crate) fn fold(&mut self, id: EpisodeId) {
        self.episodes[id as usize].folded = true;
    }

    /// The episode a `recall` argument names: a name (the most recent
    /// episode of that name) or an id as shown in residues (`#12`).
    pub fn resolve(&self, reference: &str) -> Option<EpisodeId> {
        let reference = reference.trim();
        if let Some(id) = reference
            .strip_prefix('#')
            .and_then(|digits| digits.parse::<EpisodeId>().ok())
        {
            return ((id as usize) < self.episodes.len()).then_some(id);
        }
        self.by_name(reference)
    }
}
