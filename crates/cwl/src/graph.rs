//! The episode graph: episodes, their dependency edges and the rules that
//! keep it a DAG of expl → act edges with at most one active episode.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::protocol::{Annotation, DelimiterError, EpisodeKind};

/// Index of an episode in its session, in order of creation (= age).
pub type EpisodeId = u32;

/// The strip levels of the eviction policy, least destructive first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Reasoning traces (expl episodes only).
    Reasoning,
    /// Calls and results of enumerating tools.
    Bulk,
    /// Calls and results of every other tool.
    Intermediate,
    /// The whole episode, leaving an expl's description as residue.
    Removed,
}

impl Level {
    /// All levels, in the order Algorithm 1 applies them.
    pub const ALL: [Level; 4] = [
        Level::Reasoning,
        Level::Bulk,
        Level::Intermediate,
        Level::Removed,
    ];

    /// Whether the level applies to an episode of this kind.
    pub fn applies_to(self, kind: EpisodeKind) -> bool {
        self != Level::Reasoning || kind == EpisodeKind::Expl
    }
}

/// Whether an episode is still being worked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeState {
    /// Started and not ended: never evicted.
    Active,
    /// Ended: may be evicted.
    Closed,
}

/// One episode of the session.
#[derive(Debug, Clone)]
pub struct Episode {
    name: String,
    kind: EpisodeKind,
    annotated: bool,
    dependencies: Vec<EpisodeId>,
    description: Option<String>,
    state: EpisodeState,
    level: Option<Level>,
    live_dependents: u32,
    pub(crate) first_seq: u64,
    pub(crate) last_seq: u64,
    pub(crate) start_call: Option<String>,
}

impl Episode {
    /// The episode's name (unannotated segments get a generated one).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Exploration or action.
    pub fn kind(&self) -> EpisodeKind {
        self.kind
    }
    /// False for an unannotated segment (an implicit expl episode).
    pub fn is_annotated(&self) -> bool {
        self.annotated
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
}

/// The episodes of a session and the protocol state.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    episodes: Vec<Episode>,
    names: HashMap<String, EpisodeId>,
    active: Option<EpisodeId>,
    gap: Option<EpisodeId>,
    gaps: u32,
    live: Vec<EpisodeId>,
    frontier: u64,
}

/// The effect of an accepted annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    Started(EpisodeId),
    Ended(EpisodeId),
}

impl Graph {
    /// All episodes, oldest first.
    pub fn episodes(&self) -> &[Episode] {
        &self.episodes
    }

    /// An episode by id.
    pub fn episode(&self, id: EpisodeId) -> &Episode {
        &self.episodes[id as usize]
    }

    /// The annotated episode being worked in, if any.
    pub fn active(&self) -> Option<EpisodeId> {
        self.active
    }

    /// Whether the prologue is over (a first episode has started).
    pub fn started(&self) -> bool {
        !self.episodes.is_empty()
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
                if self.names.contains_key(name) {
                    return Err(DelimiterError::DuplicateName(name.clone()));
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
                    let episode = self.episode(id);
                    // Not yet closed means active, which the one-active rule
                    // above already refused: every dependency is closed.
                    if episode.kind != EpisodeKind::Expl {
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
                    if !self.episodes[dependency as usize].is_removed() {
                        self.episodes[dependency as usize].live_dependents += 1;
                    }
                }
                let id = self.push_episode(name.clone(), kind, true, seq);
                let episode = &mut self.episodes[id as usize];
                episode.dependencies = dependencies;
                episode.start_call = start_call;
                self.names.insert(name, id);
                self.active = Some(id);
                Ok(Applied::Started(id))
            }
            Annotation::End { description, .. } => {
                let id = self.active.take().ok_or(DelimiterError::NothingActive)?;
                let episode = &mut self.episodes[id as usize];
                episode.state = EpisodeState::Closed;
                episode.description = description;
                episode.last_seq = episode.last_seq.max(seq);
                Ok(Applied::Ended(id))
            }
        }
    }

    /// The episode that owns non-user content arriving at `seq`, opening an
    /// unannotated segment when no episode is active; `None` in the prologue.
    pub(crate) fn owner_at(&mut self, seq: u64) -> Option<EpisodeId> {
        if !self.started() {
            return None;
        }
        if let Some(active) = self.active {
            return Some(active);
        }
        if let Some(gap) = self.gap {
            return Some(gap);
        }
        self.gaps += 1;
        let name = format!("(unannotated #{})", self.gaps);
        let id = self.push_episode(name, EpisodeKind::Expl, false, seq);
        self.gap = Some(id);
        Some(id)
    }

    /// Extends an episode's span to cover `seq`.
    pub(crate) fn touch(&mut self, id: EpisodeId, seq: u64) {
        let episode = &mut self.episodes[id as usize];
        episode.last_seq = episode.last_seq.max(seq);
    }

    fn close_gap(&mut self) {
        if let Some(gap) = self.gap.take() {
            self.episodes[gap as usize].state = EpisodeState::Closed;
        }
    }

    fn push_episode(
        &mut self,
        name: String,
        kind: EpisodeKind,
        annotated: bool,
        seq: u64,
    ) -> EpisodeId {
        let id = EpisodeId::try_from(self.episodes.len()).unwrap_or(EpisodeId::MAX);
        self.episodes.push(Episode {
            name,
            kind,
            annotated,
            dependencies: Vec::new(),
            description: None,
            state: EpisodeState::Active,
            level: None,
            live_dependents: 0,
            first_seq: seq,
            last_seq: seq,
            start_call: None,
        });
        self.live.push(id);
        id
    }

    /// The episode the next eviction step would operate on: the oldest
    /// closed act, else the oldest closed expl whose dependents are all
    /// fully evicted; `None` when nothing is evictable.
    ///
    /// An episode that reaches into the latest model response is in flight:
    /// that response must reach the model again unmodified (providers such
    /// as Anthropic reject an altered last assistant turn, and the model
    /// must see that it just finished the work). It becomes a candidate
    /// after the next response. While an act is in flight no expl is
    /// chosen either, so acts still go first.
    pub fn next_target(&self) -> Option<EpisodeId> {
        self.target(self.frontier)
    }

    /// Whether an episode that reaches into the latest response would be a
    /// candidate if that response were settled.
    pub fn waiting_on_response(&self) -> bool {
        self.next_target().is_none() && self.target(u64::MAX).is_some()
    }

    fn target(&self, frontier: u64) -> Option<EpisodeId> {
        let episodes = &self.episodes;
        let closed = |id: &&EpisodeId| episodes[**id as usize].state == EpisodeState::Closed;
        let settled = |id: EpisodeId| episodes[id as usize].last_seq < frontier;
        let mut acts = self
            .live
            .iter()
            .filter(closed)
            .copied()
            .filter(|id| episodes[*id as usize].kind == EpisodeKind::Act)
            .peekable();
        if acts.peek().is_some() {
            return acts.find(|&id| settled(id));
        }
        let newest_live_act = self
            .live
            .iter()
            .rev()
            .find(|id| episodes[**id as usize].kind == EpisodeKind::Act)
            .copied();
        self.live.iter().filter(closed).copied().find(|&id| {
            let episode = &episodes[id as usize];
            settled(id)
                && episode.live_dependents == 0
                && (episode.annotated || newest_live_act.is_none_or(|act| act < id))
        })
    }

    /// Records that the latest model response sits at `seq`.
    pub(crate) fn set_frontier(&mut self, seq: u64) {
        self.frontier = seq;
    }

    /// The next level to apply to `id`, if any is left.
    pub(crate) fn next_level(&self, id: EpisodeId) -> Option<Level> {
        let episode = self.episode(id);
        Level::ALL
            .into_iter()
            .filter(|level| level.applies_to(episode.kind))
            .find(|level| episode.level.is_none_or(|done| *level > done))
    }

    /// Records that `level` was applied to `id`.
    pub(crate) fn mark(&mut self, id: EpisodeId, level: Level) {
        self.episodes[id as usize].level = Some(level);
        if level != Level::Removed {
            return;
        }
        self.live.retain(|live| *live != id);
        let dependencies = std::mem::take(&mut self.episodes[id as usize].dependencies);
        for &dependency in &dependencies {
            let episode = &mut self.episodes[dependency as usize];
            episode.live_dependents = episode.live_dependents.saturating_sub(1);
        }
        self.episodes[id as usize].dependencies = dependencies;
    }
}
