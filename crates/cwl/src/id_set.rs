//! An ordered set of episode ids that also answers membership in O(1):
//! the eviction step asks whether an episode is a candidate for every
//! episode of the use order, thousands per step in a long session. Saved
//! as the ordered set alone (a JSON array of ids, as before); the bits are
//! rebuilt on load.

use std::collections::BTreeSet;
use std::collections::btree_set;
use std::ops::RangeBounds;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::graph::EpisodeId;

/// Episode ids, ordered, with a membership bit per id.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdSet {
    ids: BTreeSet<EpisodeId>,
    /// Bit `id % 64` of word `id / 64` is set when `id` is in the set.
    bits: Vec<u64>,
}

impl IdSet {
    /// Adds `id`; whether it was new.
    pub(crate) fn insert(&mut self, id: EpisodeId) -> bool {
        let (word, bit) = Self::place(id);
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= bit;
        self.ids.insert(id)
    }

    /// Removes `id`; whether it was there.
    pub(crate) fn remove(&mut self, id: &EpisodeId) -> bool {
        let (word, bit) = Self::place(*id);
        if let Some(bits) = self.bits.get_mut(word) {
            *bits &= !bit;
        }
        self.ids.remove(id)
    }

    /// Whether `id` is in the set.
    pub(crate) fn contains(&self, id: &EpisodeId) -> bool {
        let (word, bit) = Self::place(*id);
        self.bits.get(word).is_some_and(|bits| bits & bit != 0)
    }

    /// The ids in ascending order.
    pub(crate) fn iter(&self) -> btree_set::Iter<'_, EpisodeId> {
        self.ids.iter()
    }

    /// The ids in `range`, in ascending order.
    pub(crate) fn range<R: RangeBounds<EpisodeId>>(
        &self,
        range: R,
    ) -> btree_set::Range<'_, EpisodeId> {
        self.ids.range(range)
    }

    fn place(id: EpisodeId) -> (usize, u64) {
        (id as usize / 64, 1 << (id % 64))
    }
}

impl Serialize for IdSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.ids.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for IdSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ids = BTreeSet::<EpisodeId>::deserialize(deserializer)?;
        let mut set = IdSet::default();
        for id in ids {
            set.insert(id);
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn answers_as_the_ordered_set_alone(ops in prop::collection::vec((any::<bool>(), 0u32..300), 0..200)) {
            let mut set = IdSet::default();
            let mut model = BTreeSet::new();
            for (insert, id) in ops {
                if insert {
                    prop_assert_eq!(set.insert(id), model.insert(id));
                } else {
                    prop_assert_eq!(set.remove(&id), model.remove(&id));
                }
                for probe in 0..310 {
                    prop_assert_eq!(set.contains(&probe), model.contains(&probe));
                }
                prop_assert!(set.iter().eq(model.iter()));
                prop_assert!(set.range(100..).eq(model.range(100..)));
            }
        }
    }

    #[test]
    fn saved_as_the_ordered_set_was() {
        let mut set = IdSet::default();
        for id in [70, 3, 64, 200] {
            set.insert(id);
        }
        set.remove(&64);
        let saved = serde_json::to_string(&set).unwrap();
        assert_eq!(saved, "[3,70,200]");
        let loaded: IdSet = serde_json::from_str(&saved).unwrap();
        assert!(loaded.contains(&70) && !loaded.contains(&64) && !loaded.contains(&4));
        assert!(loaded.iter().eq([3, 70, 200].iter()));
        let error = serde_json::from_str::<IdSet>("[1, -2]").unwrap_err();
        assert!(error.to_string().contains("-2"), "{error}");
    }
}
