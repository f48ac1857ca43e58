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
//! Only the [`HOLDERS`](crate::term_index::HOLDERS) most recent episodes holding a term are
//! remembered, and a term none of whose holders is still in the view is
//! dropped, so the index follows the view, not the history.
//!
//! Time is the history position in tokens: an episode's clock is the
//! position of its last use, or of its own latest content when the model
//! has not named it since.

use std::collections::BTreeSet;
use std::hash::Hasher;

use rustc_hash::FxHasher;
use serde::{Deserialize, Serialize, Serializer};

use crate::graph::EpisodeId;
use crate::term_index::TermIndex;

/// Shortest term, in bytes, that counts.
pub const MIN_TERM: usize = 5;

/// Longest term, in bytes, that counts (longer runs are data, not names).
const MAX_TERM: usize = 200;

/// Terms the index holds before dead ones are swept.
const SWEEP_FROM: usize = 4096;

/// Terms held for each slot of the index swept.
const SWEEP_EVERY: usize = 4;

/// The term index of the view and each episode's clock.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Uses {
    holders: TermIndex,
    /// Per episode: history position (tokens) of its last use or content.
    clocks: Vec<u64>,
    /// The episodes still in the view by clock, least recently used first,
    /// but for the unlisted ones.
    order: BTreeSet<(u64, EpisodeId)>,
    /// Per episode: removed from the view.
    gone: Vec<bool>,
    /// Per episode: kept out of `order` (unannotated segments, which are
    /// candidates only past the last live act, so the graph lists them by
    /// id and [`crate::graph::Candidates`] merges them in by clock).
    /// Saved within `order`, as before they were kept apart; a restored
    /// context unlists them again ([`crate::checkpoint`]).
    #[serde(skip)]
    unlisted: Vec<bool>,
    /// History position: tokens pushed so far.
    now: u64,
    /// The slot of the term index where the sweep of dead terms goes on
    /// (saved under its earlier name; any value is a valid start).
    #[serde(rename = "swept_at")]
    sweep_at: usize,
    /// Scratch: the terms of the text being held.
    #[serde(skip)]
    terms: Vec<u64>,
}

/// The saved form: every episode still in the view in `order`, the
/// unlisted ones too.
#[derive(Serialize)]
struct Saved<'a> {
    holders: &'a TermIndex,
    clocks: &'a [u64],
    order: Vec<(u64, EpisodeId)>,
    gone: &'a [bool],
    now: u64,
    swept_at: usize,
}

impl Serialize for Uses {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut order: Vec<(u64, EpisodeId)> = self.order.iter().copied().collect();
        order.extend(
            self.unlisted
                .iter()
                .enumerate()
                .filter(|&(at, &unlisted)| unlisted && self.knows(at as EpisodeId))
                .map(|(at, _)| (self.clocks[at], at as EpisodeId)),
        );
        order.sort_unstable();
        Saved {
            holders: &self.holders,
            clocks: &self.clocks,
            order,
            gone: &self.gone,
            now: self.now,
            swept_at: self.sweep_at,
        }
        .serialize(serializer)
    }
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
        self.terms.clear();
        let terms = &mut self.terms;
        each_term(text, |term| terms.push(term));
        self.holders.push(&self.terms, owner);
        if self.holders.len() > SWEEP_FROM {
            self.sweep(self.terms.len().div_ceil(SWEEP_EVERY));
        }
    }

    /// Records that the model's output `text`, written in episode
    /// `writer`, names the terms it has: their other holders are used now.
    pub(crate) fn refer(&mut self, writer: Option<EpisodeId>, text: &str) {
        let mut used = Vec::new();
        each_term(text, |term| {
            if let Some(holders) = self.holders.get(term) {
                used.extend(
                    holders
                        .as_slice()
                        .iter()
                        .copied()
                        .filter(|&id| Some(id) != writer),
                );
            }
        });
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

    /// Keeps `id` out of [`Uses::least_recent`] from now on; its clock is
    /// still kept.
    pub(crate) fn unlist(&mut self, id: EpisodeId) {
        let at = id as usize;
        if self.unlisted.get(at).copied().unwrap_or(false) {
            return;
        }
        if self.unlisted.len() <= at {
            self.unlisted.resize(at + 1, false);
        }
        self.unlisted[at] = true;
        if let Some(&clock) = self.clocks.get(at) {
            self.order.remove(&(clock, id));
        }
    }

    /// The listed episodes still in the view with their clocks, least
    /// recently used first.
    pub(crate) fn least_recent(&self) -> impl Iterator<Item = (u64, EpisodeId)> + '_ {
        self.order.iter().copied()
    }

    /// History position of the episode's last use or content (0 when
    /// unknown: older than anything recorded).
    pub(crate) fn clock(&self, id: EpisodeId) -> u64 {
        self.clocks.get(id as usize).copied().unwrap_or(0)
    }

    /// Whether the episode has a clock: it held content while in the view.
    pub(crate) fn knows(&self, id: EpisodeId) -> bool {
        let at = id as usize;
        at < self.clocks.len() && !self.gone.get(at).copied().unwrap_or(false)
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
        if self.unlisted.get(at).copied().unwrap_or(false) {
            return;
        }
        if old != self.now {
            self.order.remove(&(old, id));
        }
        self.order.insert((self.now, id));
    }

    /// Looks at the next `slots` slots of the term index and drops the
    /// terms none of whose holders is still in the view: a little each
    /// time, so no call pays for a whole table.
    fn sweep(&mut self, slots: usize) {
        let gone = &self.gone;
        let live = |id: &EpisodeId| !gone.get(*id as usize).copied().unwrap_or(false);
        self.sweep_at = self.holders.sweep(self.sweep_at, slots, |holders| {
            holders.as_slice().iter().any(live)
        });
    }
}

/// The terms of `text`, hashed, in order. A path also gives its last
/// component (`data/events.log` names `events.log`, an absolute path the
/// file a listing shows by its bare name). One pass over the bytes, each
/// classed by a table lookup.
fn each_term(text: &str, mut found: impl FnMut(u64)) {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let Some(start) = bytes[at..]
            .iter()
            .position(|&byte| class(byte) & PART != 0)
            .map(|offset| at + offset)
        else {
            break;
        };
        let first = class(bytes[start]);
        let mut inner = 0;
        let mut end = start + 1;
        while let Some(&byte) = bytes.get(end) {
            let class = class(byte);
            if class & PART == 0 {
                break;
            }
            inner |= class;
            end += 1;
        }
        at = end;
        let (word, classes) = if (first | class(bytes[end - 1])) & EDGE == 0 {
            let word = &bytes[start..end];
            (word, name_classes(word.len(), first, inner))
        } else {
            let word = trim(&bytes[start..end]);
            (word, term_classes(word))
        };
        let Some(classes) = classes else {
            continue;
        };
        found(hash(word));
        if classes & SLASH != 0 {
            let slash = word.iter().rposition(|&byte| byte == b'/').unwrap_or(0);
            let name = &word[slash + 1..];
            if term_classes(name).is_some() {
                found(hash(name));
            }
        }
    }
}

fn hash(word: &[u8]) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(word);
    hasher.finish()
}

/// Byte classes: letters and digits (any non-ASCII byte counts as one)
/// and `_ . / - :` make terms.
const PART: u8 = 1;
/// Trimmed from a term's ends: `. / - :`.
const EDGE: u8 = 2;
/// Makes a word a name: `. / _ :`.
const SEPARATOR: u8 = 4;
const UPPER: u8 = 8;
const DIGIT: u8 = 16;
/// An ASCII letter or a non-ASCII byte.
const LETTER: u8 = 32;
const SLASH: u8 = 64;

const CLASSES: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut at = 0;
    while at < 256 {
        let byte = at as u8;
        let mut class = 0;
        let letter = byte.is_ascii_alphabetic() || byte >= 0x80;
        if letter || byte.is_ascii_digit() || matches!(byte, b'_' | b'.' | b'/' | b'-' | b':') {
            class |= PART;
        }
        if matches!(byte, b'.' | b'/' | b'-' | b':') {
            class |= EDGE;
        }
        if matches!(byte, b'.' | b'/' | b'_' | b':') {
            class |= SEPARATOR;
        }
        if byte.is_ascii_uppercase() {
            class |= UPPER;
        }
        if byte.is_ascii_digit() {
            class |= DIGIT;
        }
        if letter {
            class |= LETTER;
        }
        if byte == b'/' {
            class |= SLASH;
        }
        table[at] = class;
        at += 1;
    }
    table
}

fn class(byte: u8) -> u8 {
    CLASSES[usize::from(byte)]
}

fn trim(mut word: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = word
        && class(*first) & EDGE != 0
    {
        word = rest;
    }
    while let [rest @ .., last] = word
        && class(*last) & EDGE != 0
    {
        word = rest;
    }
    word
}

/// The classes of a term's bytes (a capital only after the first), or
/// `None` when the word is no term: at least [`MIN_TERM`] bytes, at most
/// `MAX_TERM`, with a separator, a capital after its first letter, or
/// both letters and digits.
fn term_classes(word: &[u8]) -> Option<u8> {
    let [first, rest @ ..] = word else {
        return None;
    };
    let inner = rest.iter().fold(0, |classes, &byte| classes | class(byte));
    name_classes(word.len(), class(*first), inner)
}

/// [`term_classes`] from a word's length, its first byte's classes and
/// the union of the others'.
fn name_classes(len: usize, first: u8, inner: u8) -> Option<u8> {
    if !(MIN_TERM..=MAX_TERM).contains(&len) {
        return None;
    }
    let all = inner | (first & !UPPER);
    let names =
        all & SEPARATOR != 0 || inner & UPPER != 0 || (all & DIGIT != 0 && all & LETTER != 0);
    names.then_some(all)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn terms(text: &str) -> Vec<u64> {
        let mut found = Vec::new();
        each_term(text, |term| found.push(term));
        found
    }

    mod reference {
        //! The scanner as first written, which [`super::each_term`] must match.
        use super::super::{MAX_TERM, MIN_TERM};
        use rustc_hash::FxHasher;
        use std::hash::Hasher;

        /// The terms of `text`, hashed. A path also gives its last component
        /// (`data/events.log` names `events.log`, an absolute path the file a
        /// listing shows by its bare name).
        pub(super) fn reference_terms(text: &str) -> impl Iterator<Item = u64> + '_ {
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
            byte.is_ascii_alphanumeric()
                || byte >= 0x80
                || matches!(byte, b'_' | b'.' | b'/' | b'-' | b':')
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
    }

    proptest! {
        #[test]
        fn the_scanner_finds_the_terms_the_first_one_did(
            text in r"([a-zA-Z0-9_./:\- \n(),éß`]{0,12}|[a-z./]{190,210}){0,20}"
        ) {
            let found = terms(&text);
            prop_assert_eq!(found, reference::reference_terms(&text).collect::<Vec<u64>>());
        }
    }

    #[test]
    fn the_scanner_matches_the_first_one_on_code() {
        let text = include_str!("uses.rs");
        let found = terms(text);
        assert!(found.len() > 200, "{}", found.len());
        assert_eq!(
            found,
            reference::reference_terms(text).collect::<Vec<u64>>()
        );
    }

    fn words(text: &str) -> usize {
        terms(text).len()
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
        let (_, holders) = uses.holders.iter().next().unwrap();
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
        let ids = |uses: &Uses| uses.least_recent().map(|(_, id)| id).collect::<Vec<_>>();
        assert_eq!(ids(&uses), [1, 2, 0]);
        uses.removed(2);
        uses.refer(None, "term_2");
        assert_eq!(ids(&uses), [1, 0], "gone for good");
        uses.unlist(1);
        uses.refer(None, "term_1");
        assert_eq!(ids(&uses), [0], "unlisted, with its clock kept");
        assert_eq!(uses.clock(1), uses.clock(0));
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
