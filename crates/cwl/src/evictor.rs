//! The seam where eviction strategies plug in: which episode a step works
//! on and which levels it applies. The engine keeps everything else (the
//! candidate rules, pairing, residues, the report), so every strategy
//! keeps its guarantees.

use std::fmt;

use crate::graph::{Candidates, EpisodeId, Level};
use crate::protocol::EpisodeKind;

/// Chooses the target of each eviction step and the levels it gets.
pub trait Evictor: Send + Sync + fmt::Debug {
    /// A short name for reports.
    fn name(&self) -> &'static str;

    /// The episode to strip next, among the candidates; `None` ends the pass.
    fn select(&self, candidates: Candidates<'_>) -> Option<EpisodeId>;

    /// The levels applied to an episode of this kind, least destructive
    /// first. Removal always follows them, whether listed or not.
    fn levels(&self, kind: EpisodeKind) -> &'static [Level];

    /// An episode that may go as well once the pass has reached its floor,
    /// `first_changed` being the earliest history position the pass has
    /// altered: whatever comes after it is sent anew anyway, so a step
    /// there costs no extra cache write. `None` (the default) ends the pass.
    fn after_floor(&self, _candidates: Candidates<'_>, _first_changed: u64) -> Option<EpisodeId> {
        None
    }
}

/// The paper's order: the oldest act, else the oldest expl; levels
/// reasoning (expl only), bulk output, intermediate, removal. Episodes in
/// the recent working set ([`crate::Config::keep_recent`]) come after all
/// older ones, in the same order; old episodes a later one repeats
/// ([`crate::Config::superseded`]) before any other.
///
/// When old acts are reduced to their calls first
/// ([`crate::Config::stub_act_outputs`]), that comes before everything,
/// and the old episodes of both kinds then go least recently used first
/// ([`Candidates::last_use`]): what the model's own output keeps naming
/// (a file it listed, code it wrote and edits again) stays, whatever its
/// age, and what it never came back to goes; episodes holding little of
/// the view ([`Candidates::is_small`]) after the larger ones. A reduced
/// act no longer protects its expls. Once a pass has reached its floor,
/// what is left of superseded episodes after its first change goes too,
/// and old acts there are reduced ([`Evictor::after_floor`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PaperOrder;

impl Evictor for PaperOrder {
    fn name(&self) -> &'static str {
        "cwl"
    }

    fn select(&self, candidates: Candidates<'_>) -> Option<EpisodeId> {
        let old = |id: &EpisodeId| candidates.is_old(*id);
        if let Some(text) = candidates.text_over_cap() {
            return Some(text);
        }
        if candidates.reduces_acts() {
            return candidates
                .oldest_fresh_act()
                .or_else(|| candidates.oldest_superseded())
                .or_else(|| least_recently_used(&candidates))
                .or_else(|| candidates.oldest());
        }
        candidates
            .oldest_superseded()
            .or_else(|| candidates.oldest_act().filter(old))
            .or_else(|| candidates.oldest_expl().filter(old))
            .or_else(|| candidates.oldest_act())
            .or_else(|| candidates.oldest_expl())
    }

    fn levels(&self, _: EpisodeKind) -> &'static [Level] {
        &Level::ALL
    }

    /// After the pass's first change, what the next pass would otherwise
    /// start with: what is left of a superseded episode (its calls, once
    /// its outputs are stubbed), which shows nothing a later output does
    /// not, and an old act not yet reduced to its calls. Taking them now
    /// spares a later pass a change that far forward in the prompt.
    fn after_floor(&self, candidates: Candidates<'_>, first_changed: u64) -> Option<EpisodeId> {
        candidates
            .superseded_remnant_from(first_changed)
            .or_else(|| candidates.oldest_fresh_act_from(first_changed))
    }
}

/// In one walk of the use order: the least recently used old candidate
/// that is not small, else the least recently used old one, else the least
/// recently used of all.
fn least_recently_used(candidates: &Candidates<'_>) -> Option<EpisodeId> {
    let (mut old_small, mut any) = (None, None);
    for id in candidates.least_recently_used() {
        any.get_or_insert(id);
        if candidates.is_old(id) {
            if !candidates.is_small(id) {
                return Some(id);
            }
            old_small.get_or_insert(id);
        }
    }
    old_small.or(any)
}

/// The reference harness pi-cwl's order, offered for comparison: the
/// oldest candidate of either kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct OldestFirst;

impl Evictor for OldestFirst {
    fn name(&self) -> &'static str {
        "oldest-first"
    }

    fn select(&self, candidates: Candidates<'_>) -> Option<EpisodeId> {
        candidates
            .text_over_cap()
            .or_else(|| candidates.oldest().filter(|id| candidates.is_old(*id)))
            .or_else(|| candidates.oldest())
    }

    fn levels(&self, _: EpisodeKind) -> &'static [Level] {
        &Level::ALL
    }
}
