//! What the model goes back to: which episodes its own later output names.
//!
//! An agent that writes `config.ts`, `detectColorMode` or
//! `Error::billing` in a reply or a tool call is relying on something it
//! saw: a file listing, a read, an earlier edit. The episode that showed
//! it is *used* at that moment. Old episodes then leave the view least
//! recently used first: what the model keeps naming stays, what it never
//! came back to goes, whatever its age. Only the model's own output counts
//! as a use (a tool result naming a path is content, not a use), and an
//! episode does not use itself.
//!
//! A *term* is a word that names something: at least [`MIN_TERM`]
//! characters of letters, digits and `_ . / - :`, with a separator in it,
//! a capital after its first letter, or both letters and digits (so
//! `stock.py`, `map_err`, `detectColorMode`, `v2beta`, not `return`);
//! a path also names its last component, so `data/events.log` or an
//! absolute path reaches the listing that showed `events.log`.
//! Only the [`HOLDERS`] most recent episodes holding a term are
//! remembered, and a term none of whose holders is still in the view is
//! dropped, so the index follows the view, not the history.
//!
//! Time is the history position in tokens: an episode's clock is the
//! position of its last use, or of its own latest content when the model
//! has not named it since.

use std::collections::BTreeSet;
use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHasher};
use serde::{Deserialize, Serialize};

use crate::graph::EpisodeId;

/// Shortest term, in bytes, that counts.
pub const MIN_TERM: usize = 5;

/// Longest term, in bytes, that counts (longer runs are data, not names).
const MAX_TERM: usize = 200;

/// Holders remembered per term.
pub const HOLDERS: usize = 3;

/// The most recent episodes holding one term, newest last.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Holders {
    ids: [EpisodeId; HOLDERS],
    len: u8,
}

impl Holders {
    fn as_slice(&self) -> &[EpisodeId] {
        &self.ids[..usize::from(self.len)]
    }

    fn push(&mut self, owner: EpisodeId) {
        let len = usize::from(self.len);
        if self.as_slice().last() == Some(&owner) {
            return;
        }
        if let Some(at) = self.as_slice().iter().position(|&id| id == owner) {
            self.ids.copy_within(at + 1..len, at);
            self.ids[len - 1] = owner;
        } else if len < HOLDERS {
            self.ids[len] = owner;
            self.len += 1;
        } else {
            self.ids.copy_within(1.., 0);
            self.ids[HOLDERS - 1] = owner;
        }
    }
}

/// The term index of the view and each episode's clock.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Uses {
    holders: FxHashMap<u64, Holders>,
    /// Per episode: history position (tokens) of its last use or content.
    clocks: Vec<u64>,
    /// The episodes still in the view by clock, least recently used first.
    order: BTreeSet<(u64, EpisodeId)>,
    /// Per episode: removed from the view.
    gone: Vec<bool>,
    /// History position: tokens pushed so far.
    now: u64,
    /// Terms after the last sweep of dead ones.
    swept_at: usize,
}

impl Uses {
    /// Advances the history position by `tokens` of content pushed for
    /// `owner`, which now holds content that recent.
    pub(crate) fn grow(&mut self, owner: Option<EpisodeId>, tokens: usize) {
        self.now += tokens as u64;
        if let Some(owner) = owner {
            self.set_clock(owner);
        }
    }

    /// Records the terms of `text` (a tool result, a text block, a call's
    /// arguments) as held by `owner`.
    pub(crate) fn hold(&mut self, owner: EpisodeId, text: &str) {
        for term in terms(text) {
            self.holders.entry(term).or_default().push(owner);
        }
        if self.holders.len() > 2 * self.swept_at.max(4096) {
            self.sweep();
        }
    }

    /// Records that the model's output `text`, written in episode
    /// `writer`, names the terms it has: their other holders are used now.
    pub(crate) fn refer(&mut self, writer: Option<EpisodeId>, text: &str) {
        let mut used = Vec::new();
        for term in terms(text) {
            if let Some(holders) = self.holders.get(&term) {
                used.extend(
                    holders
                        .as_slice()
                        .iter()
                        .copied()
                        .filter(|&id| Some(id) != writer),
                );
            }
        }
        for id in used {
            self.set_clock(id);
        }
    }

    /// Forgets a removed episode's terms (lazily).
    pub(crate) fn removed(&mut self, id: EpisodeId) {
        let at = id as usize;
        if self.gone.len() <= at {
            self.gone.resize(at + 1, false);
        }
        self.gone[at] = true;
        if let Some(&clock) = self.clocks.get(at) {
            self.order.remove(&(clock, id));
        }
    }

    /// The episodes still in the view, least recently used first.
    pub(crate) fn least_recent(&self) -> impl Iterator<Item = EpisodeId> + '_ {
        self.order.iter().map(|&(_, id)| id)
    }

    /// History position of the episode's last use or content (0 when
    /// unknown: older than anything recorded).
    pub(crate) fn clock(&self, id: EpisodeId) -> u64 {
        self.clocks.get(id as usize).copied().unwrap_or(0)
    }

    fn set_clock(&mut self, id: EpisodeId) {
        let at = id as usize;
        if self.gone.get(at).copied().unwrap_or(false) {
            return;
        }
        if self.clocks.len() <= at {
            self.clocks.resize(at + 1, 0);
        }
        let old = std::mem::replace(&mut self.clocks[at], self.now);
        if old != self.now {
            self.order.remove(&(old, id));
        }
        self.order.insert((self.now, id));
    }

    fn sweep(&mut self) {
        let gone = &self.gone;
        let live = |id: &EpisodeId| !gone.get(*id as usize).copied().unwrap_or(false);
        self.holders
            .retain(|_, holders| holders.as_slice().iter().any(live));
        self.swept_at = self.holders.len();
    }
}

/// The terms of `text`, hashed. A path also gives its last component
/// (`data/events.log` names `events.log`, an absolute path the file a
/// listing shows by its bare name).
fn terms(text: &str) -> impl Iterator<Item = u64> + '_ {
    text.as_bytes()
        .split(|&byte| !in_term(byte))
        .map(trim)
        .filter(|word| is_term(word))
        .flat_map(|word| {
            let name = word
                .iter()
                .rposition(|&byte| byte == b'/')
                .map(|at| &word[at + 1..])
                .filter(|name| is_term(name));
            std::iter::once(word).chain(name)
        })
        .map(|word| {
            let mut hasher = FxHasher::default();
            hasher.write(word);
            hasher.finish()
        })
}

fn is_term(word: &[u8]) -> bool {
    (MIN_TERM..=MAX_TERM).contains(&word.len()) && names_something(word)
}

/// Letters and digits (any non-ASCII byte counts as one) and `_ . / - :`.
fn in_term(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte >= 0x80 || matches!(byte, b'_' | b'.' | b'/' | b'-' | b':')
}

fn trim(mut word: &[u8]) -> &[u8] {
    let edge = |byte: &u8| matches!(byte, b'.' | b'/' | b'-' | b':');
    while word.first().is_some_and(edge) {
        word = &word[1..];
    }
    while word.last().is_some_and(edge) {
        word = &word[..word.len() - 1];
    }
    word
}

fn names_something(word: &[u8]) -> bool {
    let separated = word.iter().any(|b| matches!(b, b'.' | b'/' | b'_' | b':'));
    let inner_capital = word[1..].iter().any(u8::is_ascii_uppercase);
    let digits = word.iter().any(u8::is_ascii_digit);
    let letters = word.iter().any(|b| b.is_ascii_alphabetic() || *b >= 0x80);
    separated || inner_capital || (digits && letters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> usize {
        terms(text).count()
    }

    #[test]
    fn names_are_terms_and_prose_is_not() {
        assert_eq!(words("the function returns nothing useful here"), 0);
        assert_eq!(words("see stock.py and map_err"), 2);
        assert_eq!(words("call detectColorMode(x) on v2beta"), 2);
        assert_eq!(words("Error::billing, src/inventory/orders.py."), 3);
        assert_eq!(words("a.b x_y"), 0, "too short");
        assert_eq!(words("data/events.log"), 2, "the path and its file name");
        assert_eq!(words("src/io/mod"), 1, "a short last component is no term");
    }

    #[test]
    fn output_naming_a_term_uses_its_holders_but_not_its_writer() {
        let mut uses = Uses::default();
        uses.grow(Some(0), 100);
        uses.hold(0, "orders.py\nstock.py\nreports.py");
        uses.grow(Some(1), 100);
        uses.hold(1, "total = sum(amounts)");
        uses.grow(Some(2), 50);
        assert_eq!((uses.clock(0), uses.clock(1)), (100, 200));
        uses.refer(Some(2), "I will edit `stock.py` next");
        assert_eq!(uses.clock(0), 250, "named: used now");
        assert_eq!(uses.clock(1), 200, "not named: unchanged");
        uses.hold(2, "stock.py");
        uses.grow(Some(3), 10);
        uses.refer(Some(2), "stock.py again");
        assert_eq!(uses.clock(2), 250, "a writer does not use itself");
        assert_eq!(uses.clock(0), 260);
        assert_eq!(uses.clock(9), 0, "unknown episodes are oldest");
    }

    #[test]
    fn a_path_names_the_file_a_listing_shows_by_name() {
        let mut uses = Uses::default();
        uses.grow(Some(0), 100);
        uses.hold(0, "data:\nevents.log\nsrc:\norders.py");
        uses.grow(Some(1), 100);
        uses.refer(Some(1), "grep -c rejected data/events.log");
        assert_eq!(uses.clock(0), 200, "`data/events.log` uses the listing");
        uses.grow(Some(2), 100);
        uses.refer(Some(2), "Read /tmp/repo/src/orders.py");
        assert_eq!(uses.clock(0), 300, "so does an absolute path");
    }

    #[test]
    fn only_the_latest_holders_are_remembered() {
        let mut uses = Uses::default();
        for id in 0..5 {
            uses.grow(Some(id), 10);
            uses.hold(id, "config.ts");
        }
        uses.grow(None, 10);
        uses.refer(None, "config.ts");
        let clocks: Vec<u64> = (0..5).map(|id| uses.clock(id)).collect();
        assert_eq!(clocks, [10, 20, 60, 60, 60]);
        uses.hold(2, "config.ts");
        let holders = uses.holders.values().next().unwrap();
        assert_eq!(holders.as_slice(), [3, 4, 2], "a holder again moves last");
    }

    #[test]
    fn episodes_are_listed_least_recently_used_first_until_removed() {
        let mut uses = Uses::default();
        for id in 0..3 {
            uses.grow(Some(id), 10);
            uses.hold(id, &format!("term_{id}"));
        }
        uses.grow(None, 10);
        uses.refer(None, "term_0");
        assert_eq!(uses.least_recent().collect::<Vec<_>>(), [1, 2, 0]);
        uses.removed(2);
        uses.refer(None, "term_2");
        assert_eq!(
            uses.least_recent().collect::<Vec<_>>(),
            [1, 0],
            "gone for good"
        );
    }

    #[test]
    fn terms_only_removed_episodes_hold_are_swept() {
        let mut uses = Uses::default();
        for id in 0..5000u32 {
            uses.hold(id, &format!("file{id}.rs"));
            uses.removed(id);
        }
        uses.hold(5000, "kept_term");
        for id in 5001..9000u32 {
            uses.hold(id, &format!("file{id}.rs"));
        }
        assert!(uses.holders.len() < 9000, "dead terms were dropped");
        uses.grow(None, 1);
        uses.refer(None, "kept_term");
        assert_eq!(uses.clock(5000), 1, "live terms survive a sweep");
    }
}
