//! Content the view holds twice: which episodes later episodes repeat.
//!
//! Coding agents read a file again after editing it, rerun the same
//! command, paste back what they wrote. The older copy then adds nothing
//! the newer one does not show, yet a recency policy keeps both and an
//! age-ordered one drops the newer copy of something else first. An
//! episode most of whose lines a later, still present episode repeats is
//! *superseded*: strategies may take it before anything else, losing no
//! content the view does not still hold.
//!
//! Lines are compared after trimming and dropping a leading line number
//! (`12\t`, `12→`, `12:`, `12|`, as file readers print them); lines shorter
//! than [`MIN_LINE`] characters (braces, `Ok(())`) identify nothing and do
//! not count. Only the newest holder of a line and the one before it are
//! remembered, so the bookkeeping follows the view, not the history.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

use serde::{Deserialize, Serialize};

use crate::config::Share;
use crate::graph::EpisodeId;
use crate::message::Block;

/// Shortest line, in characters after trimming, that counts.
pub const MIN_LINE: usize = 10;

/// Fewest counted lines an episode needs before it can be superseded.
pub const MIN_LINES: u32 = 5;

/// A normalized line, hashed.
type LineKey = u64;

/// Who holds a line: its newest holder and the one it took it from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Holders<K> {
    latest: K,
    previous: Option<K>,
}

/// Per holder: its counted lines and how many a later holder repeats.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Tally {
    lines: Vec<LineKey>,
    repeated: u32,
    /// Its lines supersede older copies, but it is never superseded itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    holder_only: bool,
}

/// The line index of the live view and the set of superseded holders:
/// episodes (keyed by [`EpisodeId`]) or single tool outputs (keyed by
/// their stream position).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(
    serialize = "K: Serialize + Eq + Hash + Ord",
    deserialize = "K: Deserialize<'de> + Eq + Hash + Ord"
))]
pub(crate) struct Repeats<K = EpisodeId> {
    holders: FxHashMap<LineKey, Holders<K>>,
    tallies: FxHashMap<K, Tally>,
    superseded: BTreeSet<K>,
}

impl<K> Default for Repeats<K> {
    fn default() -> Self {
        Repeats {
            holders: FxHashMap::default(),
            tallies: FxHashMap::default(),
            superseded: BTreeSet::new(),
        }
    }
}

impl<K: Copy + Eq + Hash + Ord> Repeats<K> {
    /// Whether no holder's lines are recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.tallies.is_empty()
    }

    /// Records the lines of `block` (a text block or a tool call's
    /// arguments) as content of `owner`.
    pub(crate) fn block(&mut self, owner: K, block: &Block, share: Share) {
        match block {
            Block::Text { text } => self.text(owner, text, share),
            Block::ToolCall(call) => match serde_json::from_str(&call.arguments) {
                Ok(value) => self.json(owner, &value, share),
                Err(_) => self.text(owner, &call.arguments, share),
            },
            Block::Reasoning { .. } => {}
        }
    }

    /// Records the lines of `text` as content of `owner` that can repeat
    /// older content but is never listed as superseded itself (too small
    /// to be worth taking first).
    pub(crate) fn held_only(&mut self, owner: K, text: &str, share: Share) {
        self.tallies.entry(owner).or_default().holder_only = true;
        self.text(owner, text, share);
    }

    /// Records the lines of `text` as content of `owner`.
    pub(crate) fn text(&mut self, owner: K, text: &str, share: Share) {
        for key in text.lines().filter_map(line_key) {
            self.line(owner, key, share);
        }
    }

    fn json(&mut self, owner: K, value: &serde_json::Value, share: Share) {
        match value {
            serde_json::Value::String(text) => self.text(owner, text, share),
            serde_json::Value::Array(items) => {
                items.iter().for_each(|item| self.json(owner, item, share))
            }
            serde_json::Value::Object(map) => {
                map.values().for_each(|item| self.json(owner, item, share))
            }
            _ => {}
        }
    }

    fn line(&mut self, owner: K, key: LineKey, share: Share) {
        let previous = match self.holders.get(&key) {
            Some(holders) if holders.latest == owner => return,
            Some(holders) => Some(holders.latest),
            None => None,
        };
        self.holders.insert(
            key,
            Holders {
                latest: owner,
                previous,
            },
        );
        self.tallies.entry(owner).or_default().lines.push(key);
        self.update(owner, share);
        if let Some(previous) = previous {
            if let Some(tally) = self.tallies.get_mut(&previous) {
                tally.repeated += 1;
            }
            self.update(previous, share);
        }
    }

    /// Forgets a removed holder (an episode, or an output stubbed or
    /// removed): lines it was the newest holder of go back to the holder
    /// before it, whose copy is no longer repeated.
    pub(crate) fn removed(&mut self, episode: K, share: Share) {
        self.superseded.remove(&episode);
        let Some(tally) = self.tallies.remove(&episode) else {
            return;
        };
        for key in tally.lines {
            let Some(holders) = self.holders.get(&key).copied() else {
                continue;
            };
            if holders.latest != episode {
                continue;
            }
            match holders.previous.filter(|p| self.tallies.contains_key(p)) {
                Some(previous) => {
                    self.holders.insert(
                        key,
                        Holders {
                            latest: previous,
                            previous: None,
                        },
                    );
                    if let Some(tally) = self.tallies.get_mut(&previous) {
                        tally.repeated = tally.repeated.saturating_sub(1);
                    }
                    self.update(previous, share);
                }
                None => {
                    self.holders.remove(&key);
                }
            }
        }
    }

    /// Whether a later episode still in the view repeats at least the
    /// configured share of `episode`'s lines.
    #[cfg(test)]
    pub(crate) fn is_superseded(&self, episode: K) -> bool {
        self.superseded.contains(&episode)
    }

    /// Superseded holders, oldest first.
    pub(crate) fn superseded(&self) -> impl Iterator<Item = K> + '_ {
        self.superseded.iter().copied()
    }

    fn update(&mut self, episode: K, share: Share) {
        let Some(tally) = self.tallies.get(&episode) else {
            return;
        };
        let lines = u32::try_from(tally.lines.len()).unwrap_or(u32::MAX);
        let repeated = f64::from(tally.repeated.min(lines));
        if !tally.holder_only && lines >= MIN_LINES && repeated >= share.get() * f64::from(lines) {
            self.superseded.insert(episode);
        } else {
            self.superseded.remove(&episode);
        }
    }
}

/// The key of `line`, or `None` when it is too short to identify content.
fn line_key(line: &str) -> Option<LineKey> {
    let line = line.trim();
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    let line = if digits > 0 {
        let rest = &line[digits..];
        ['\t', '→', ':', '|']
            .iter()
            .find_map(|sep| rest.strip_prefix(*sep))
            .map_or(line, str::trim)
    } else {
        line
    };
    if line.chars().count() < MIN_LINE {
        return None;
    }
    let mut hasher = FxHasher::default();
    line.hash(&mut hasher);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn half() -> Share {
        Share::new(0.5).unwrap()
    }

    fn file(lines: std::ops::Range<u32>) -> String {
        lines
            .map(|n| format!("{n:>4}\tlet value_{n} = compute({n});\n"))
            .collect()
    }

    #[test]
    fn a_later_copy_supersedes_and_its_removal_restores() {
        let mut repeats = Repeats::default();
        repeats.text(1, &file(0..10), half());
        assert!(!repeats.is_superseded(1));
        repeats.text(2, &file(0..4), half());
        assert!(!repeats.is_superseded(1), "4 of 10 lines repeated");
        repeats.text(3, &file(3..8), half());
        assert!(repeats.is_superseded(1), "lines 0..8 repeated later");
        assert!(!repeats.is_superseded(2) && !repeats.is_superseded(3));
        repeats.removed(3, half());
        assert!(!repeats.is_superseded(1), "the copy of 4..8 is gone");
        assert_eq!(repeats.superseded().collect::<Vec<_>>(), Vec::<u32>::new());
    }

    #[test]
    fn line_numbers_short_lines_and_json_arguments() {
        assert_eq!(
            line_key("  12\tlet x = 1234567;"),
            line_key("let x = 1234567;")
        );
        assert_eq!(
            line_key("12→let x = 1234567;"),
            line_key("let x = 1234567;")
        );
        assert_eq!(line_key("    }"), None);
        let mut repeats = Repeats::default();
        let body: String = (0..6).map(|n| format!("fn handler_{n}() {{}}\n")).collect();
        let call = crate::message::ToolCall::new(
            "c1",
            "write",
            serde_json::json!({"path": "src/a.rs", "content": body}).to_string(),
        );
        repeats.block(1, &Block::ToolCall(call), half());
        repeats.text(2, &body, half());
        assert!(repeats.is_superseded(1), "escaped newlines split lines");
    }

    #[test]
    fn a_held_only_copy_supersedes_older_ones_but_never_goes_first() {
        let mut repeats: Repeats<u64> = Repeats::default();
        repeats.held_only(1, &file(0..10), half());
        repeats.text(2, &file(0..10), half());
        repeats.held_only(3, &file(0..10), half());
        assert_eq!(repeats.superseded().collect::<Vec<_>>(), [2]);
        repeats.removed(3, half());
        assert!(
            repeats.superseded().next().is_none(),
            "the copy of 2 is gone"
        );
    }

    #[test]
    fn small_episodes_and_own_repeats_never_supersede() {
        let mut repeats = Repeats::default();
        repeats.text(1, &file(0..3), half());
        repeats.text(2, &file(0..3), half());
        assert!(!repeats.is_superseded(1), "fewer than MIN_LINES lines");
        repeats.text(3, &file(10..20), half());
        repeats.text(3, &file(10..20), half());
        assert!(!repeats.is_superseded(3));
    }
}
