//! The table behind the use index: each term's hash to the most recent
//! episodes holding it, in one flat open-addressing array (linear
//! probing). A long tool output adds thousands of terms at once to a table
//! far larger than the cache; [`TermIndex::push`] loads the slots of the
//! next terms while it updates the current ones, so those cache misses
//! overlap instead of queueing. Saved as a JSON object from term to
//! holders, as the hash map it replaces was, so checkpoints are unchanged.

use std::fmt;

use serde::de::{Error, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::graph::EpisodeId;

/// Holders remembered per term.
pub const HOLDERS: usize = 3;

/// Terms whose slots are loaded ahead of their update.
const AHEAD: usize = 16;

/// The most recent episodes holding one term, newest last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Holders {
    ids: [EpisodeId; HOLDERS],
    len: u8,
}

impl Holders {
    pub(crate) fn as_slice(&self) -> &[EpisodeId] {
        &self.ids[..usize::from(self.len)]
    }

    /// Makes `owner` the newest holder: moved last if it holds already,
    /// else appended, the oldest dropped when full. Writes only the ids a
    /// shift through the array would (unused ones keep what they held).
    fn push(&mut self, owner: EpisodeId) {
        let [a, b, c] = self.ids;
        match self.len {
            0 => {
                self.ids[0] = owner;
                self.len = 1;
            }
            1 if a != owner => {
                self.ids[1] = owner;
                self.len = 2;
            }
            2 if b != owner => {
                if a == owner {
                    self.ids[0] = b;
                    self.ids[1] = owner;
                } else {
                    self.ids[2] = owner;
                    self.len = 3;
                }
            }
            3 if c != owner => {
                self.ids = if b == owner {
                    [a, c, owner]
                } else {
                    [b, c, owner]
                };
            }
            _ => {}
        }
    }
}

/// One slot: empty while its holders are (a stored term has at least one).
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    key: u64,
    holders: Holders,
}

impl Slot {
    fn is_empty(&self) -> bool {
        self.holders.len == 0
    }
}

/// Term hash → holders.
#[derive(Debug, Clone, Default)]
pub(crate) struct TermIndex {
    /// A power of two long (or empty), at most three quarters full.
    slots: Vec<Slot>,
    len: usize,
}

impl TermIndex {
    /// Terms stored.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The holders of `key`, if it is stored.
    pub(crate) fn get(&self, key: u64) -> Option<&Holders> {
        if self.slots.is_empty() {
            return None;
        }
        let slot = &self.slots[self.find(key)];
        (!slot.is_empty()).then_some(&slot.holders)
    }

    /// Records `owner` as the newest holder of each of `keys`, in order.
    pub(crate) fn push(&mut self, keys: &[u64], owner: EpisodeId) {
        self.reserve(keys.len());
        let mut chunks = keys.chunks(AHEAD);
        let mut homes = [0usize; AHEAD];
        let mut next = chunks.next();
        if let Some(chunk) = next {
            self.warm(chunk, &mut homes);
        }
        while let Some(chunk) = next {
            let here = homes;
            next = chunks.next();
            if let Some(ahead) = next {
                self.warm(ahead, &mut homes);
            }
            let mask = self.slots.len() - 1;
            for (&key, &home) in chunk.iter().zip(&here) {
                let mut at = home;
                while !self.slots[at].is_empty() && self.slots[at].key != key {
                    at = (at + 1) & mask;
                }
                let slot = &mut self.slots[at];
                if slot.is_empty() {
                    slot.key = key;
                    self.len += 1;
                }
                slot.holders.push(owner);
            }
        }
    }

    /// Inserts `key` with `holders`, replacing what it held.
    fn insert(&mut self, key: u64, holders: Holders) {
        if holders.len == 0 {
            return;
        }
        self.reserve(1);
        let at = self.find(key);
        let slot = &mut self.slots[at];
        if slot.is_empty() {
            self.len += 1;
        }
        *slot = Slot { key, holders };
    }

    /// Looks at `slots` slots from `at` on (wrapping round) and drops the
    /// terms whose holders fail `keep`; returns where to go on next time.
    pub(crate) fn sweep(
        &mut self,
        mut at: usize,
        slots: usize,
        mut keep: impl FnMut(&Holders) -> bool,
    ) -> usize {
        if self.slots.is_empty() {
            return 0;
        }
        let mask = self.slots.len() - 1;
        at &= mask;
        for _ in 0..slots {
            let slot = &self.slots[at];
            if !slot.is_empty() && !keep(&slot.holders) {
                // What moves into the hole is looked at next.
                self.delete(at);
            } else {
                at = (at + 1) & mask;
            }
        }
        at
    }

    /// Empties slot `hole`, moving back the later terms of its run whose
    /// probe would otherwise cross the new gap.
    fn delete(&mut self, mut hole: usize) {
        let mask = self.slots.len() - 1;
        let mut next = hole;
        loop {
            next = (next + 1) & mask;
            let slot = self.slots[next];
            if slot.is_empty() {
                break;
            }
            let home = self.home(slot.key);
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                self.slots[hole] = slot;
                hole = next;
            }
        }
        self.slots[hole] = Slot::default();
        self.len -= 1;
    }

    /// Every term and its holders, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Holders)> {
        self.slots
            .iter()
            .filter(|slot| !slot.is_empty())
            .map(|slot| (slot.key, &slot.holders))
    }

    /// Loads the slots of `keys`, so their misses overlap, and notes
    /// where each key's probe starts.
    fn warm(&self, keys: &[u64], homes: &mut [usize; AHEAD]) {
        let mut sum = 0u64;
        for (&key, home) in keys.iter().zip(homes.iter_mut()) {
            *home = self.home(key);
            sum ^= self.slots[*home].key;
        }
        std::hint::black_box(sum);
    }

    /// The slot holding `key`, or the empty one where it would go (the
    /// table is never full).
    fn find(&self, key: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = self.home(key);
        loop {
            let slot = &self.slots[at];
            if slot.is_empty() || slot.key == key {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    fn home(&self, key: u64) -> usize {
        let bits = self.slots.len().trailing_zeros();
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits) as u64) as usize
    }

    /// Grows the table so `more` new terms keep it at most 3/4 full.
    fn reserve(&mut self, more: usize) {
        let needed = self.len + more;
        let mut capacity = self.slots.len().max(16);
        while needed * 4 > capacity * 3 {
            capacity *= 2;
        }
        if capacity == self.slots.len() {
            return;
        }
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); capacity]);
        for slot in old.into_iter().filter(|slot| !slot.is_empty()) {
            let at = self.find(slot.key);
            self.slots[at] = slot;
        }
    }
}

impl Serialize for TermIndex {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len))?;
        for (key, holders) in self.iter() {
            map.serialize_entry(&key, holders)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for TermIndex {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Terms;
        impl<'de> Visitor<'de> for Terms {
            type Value = TermIndex;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a map from term hash to holders")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TermIndex, A::Error> {
                let mut index = TermIndex::default();
                while let Some((key, holders)) = map.next_entry::<u64, Holders>()? {
                    if usize::from(holders.len) > HOLDERS {
                        return Err(A::Error::custom(format!(
                            "term {key} lists {} holders; at most {HOLDERS} are kept",
                            holders.len
                        )));
                    }
                    index.insert(key, holders);
                }
                Ok(index)
            }
        }
        deserializer.deserialize_map(Terms)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rustc_hash::FxHashMap;

    use super::*;

    /// What the table stands for: the hash map it replaced.
    fn model(index: &TermIndex) -> FxHashMap<u64, Holders> {
        index.iter().map(|(key, holders)| (key, *holders)).collect()
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(Vec<u64>, EpisodeId),
        /// Sweep from a slot, so many slots, keeping terms with a holder
        /// at or above an id.
        Sweep(usize, usize, EpisodeId),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (prop::collection::vec(0u64..400, 0..60), 0u32..12)
                .prop_map(|(keys, owner)| Op::Push(keys, owner)),
            2 => (0usize..2048, 0usize..1200, 0u32..12)
                .prop_map(|(at, slots, below)| Op::Sweep(at, slots, below)),
        ]
    }

    proptest! {
        #[test]
        fn the_table_behaves_as_the_hash_map_it_replaced(ops in prop::collection::vec(op(), 1..80)) {
            let mut index = TermIndex::default();
            let mut map: FxHashMap<u64, Holders> = FxHashMap::default();
            for op in ops {
                match op {
                    Op::Push(keys, owner) => {
                        index.push(&keys, owner);
                        for key in keys {
                            map.entry(key).or_default().push(owner);
                        }
                    }
                    Op::Sweep(at, slots, below) => {
                        let keep = |holders: &Holders| holders.as_slice().iter().any(|&id| id >= below);
                        index.sweep(at, slots, keep);
                        // What went was dead; a sweep round the whole table takes all of it.
                        for (key, holders) in &map {
                            prop_assert!(index.get(*key).is_some() || !keep(holders));
                        }
                        map.retain(|key, _| index.get(*key).is_some());
                        if slots >= 2 * index.slots.len() {
                            prop_assert!(map.values().all(keep));
                        }
                    }
                }
                prop_assert_eq!(index.len(), map.len());
                prop_assert_eq!(&model(&index), &map);
                for key in 0..400 {
                    prop_assert_eq!(index.get(key), map.get(&key));
                }
            }
        }
    }

    /// `Holders::push` as first written, through the slice.
    fn reference_push(holders: &mut Holders, owner: EpisodeId) {
        let len = usize::from(holders.len);
        if holders.as_slice().last() == Some(&owner) {
            return;
        }
        if let Some(at) = holders.as_slice().iter().position(|&id| id == owner) {
            holders.ids.copy_within(at + 1..len, at);
            holders.ids[len - 1] = owner;
        } else if len < HOLDERS {
            holders.ids[len] = owner;
            holders.len += 1;
        } else {
            holders.ids.copy_within(1.., 0);
            holders.ids[HOLDERS - 1] = owner;
        }
    }

    proptest! {
        #[test]
        fn holders_move_as_the_first_push_moved_them(
            ids in prop::array::uniform3(0u32..5),
            len in 0u8..=3,
            owners in prop::collection::vec(0u32..5, 1..12),
        ) {
            let mut holders = Holders { ids, len };
            let mut reference = holders;
            for owner in owners {
                holders.push(owner);
                reference_push(&mut reference, owner);
                prop_assert_eq!(holders, reference);
            }
        }
    }

    #[test]
    fn saved_as_the_hash_map_was() {
        let mut map: FxHashMap<u64, Holders> = FxHashMap::default();
        let mut index = TermIndex::default();
        for (key, owner) in [(7, 1), (u64::MAX, 2), (0, 3), (7, 4), (7, 5), (7, 1)] {
            map.entry(key).or_default().push(owner);
            index.push(&[key], owner);
        }
        let saved = serde_json::to_value(&index).unwrap();
        assert_eq!(saved, serde_json::to_value(&map).unwrap());
        assert_eq!(saved["7"]["ids"], serde_json::json!([4, 5, 1]));
        let loaded: TermIndex = serde_json::from_value(saved).unwrap();
        assert_eq!(model(&loaded), map);
        let error = serde_json::from_str::<TermIndex>(r#"{"x": {"ids": [1, 0, 0], "len": 1}}"#)
            .unwrap_err();
        assert!(error.to_string().contains("x"), "{error}");
        let error = serde_json::from_str::<TermIndex>(r#"{"9": {"ids": [1, 2, 3], "len": 4}}"#)
            .unwrap_err();
        assert!(
            error.to_string().contains("term 9 lists 4 holders"),
            "{error}"
        );
    }
}
