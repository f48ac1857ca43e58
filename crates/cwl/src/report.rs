//! What an eviction pass did, for logs, session files and the lab.

use serde::{Deserialize, Serialize};

use crate::graph::Level;
use crate::protocol::EpisodeKind;

/// The outcome of one eviction pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Counted prompt tokens before the pass.
    pub tokens_before: usize,
    /// Counted prompt tokens after the pass.
    pub tokens_after: usize,
    /// The budget τ.
    pub budget: usize,
    /// The low-water mark a triggered pass evicts down to.
    #[serde(default)]
    pub floor: usize,
    /// Whether the prompt now fits the budget.
    pub budget_met: bool,
    /// Set when the budget was missed only because what could go reaches
    /// into the latest model response: it becomes evictable after the next
    /// response, so the overshoot lasts one model call.
    #[serde(default)]
    pub deferred: bool,
    /// Index in the new view of the first message the pass changed: the
    /// prefix before it is byte-identical to the previous request's, so a
    /// provider's cache breakpoint belongs there. `None` when nothing changed.
    #[serde(default)]
    pub first_changed: Option<usize>,
    /// Residues and finished user turns folded into the index line.
    #[serde(default)]
    pub folded: usize,
    /// The episodes touched, in the order they were touched.
    pub episodes: Vec<EpisodeReport>,
    /// Anything the caller should know ("budget cannot be met", ignored
    /// delimiter calls...).
    pub warnings: Vec<String>,
}

impl Report {
    /// Tokens the pass removed (net of residues left behind).
    pub fn tokens_removed(&self) -> usize {
        self.tokens_before.saturating_sub(self.tokens_after)
    }

    /// Whether the pass changed the view.
    pub fn evicted(&self) -> bool {
        self.first_changed.is_some()
    }
}

/// What a pass did to one episode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodeReport {
    /// The episode's name.
    pub name: String,
    /// Exploration or action.
    pub kind: EpisodeKind,
    /// False for an unannotated segment.
    pub annotated: bool,
    /// The levels applied in this pass, in order.
    pub levels: Vec<LevelReport>,
}

/// What one level removed from one episode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelReport {
    /// The level.
    pub level: Level,
    /// Tokens removed (net of any residue left).
    pub tokens: usize,
    /// Tool calls removed, each with its result.
    pub tool_calls: usize,
    /// Other blocks removed (reasoning, text, delimiter markers).
    pub blocks: usize,
}
