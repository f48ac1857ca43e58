//! Message identities ([`message_hash`]) computed once per distinct
//! message bytes: a request repeats the whole history, and all but its
//! newest messages (and the one whose cache marker moved) are byte for
//! byte what an earlier request sent, so they are hashed as bytes, not
//! parsed again.

use std::hash::Hasher;
use std::sync::Mutex;

use rustc_hash::{FxHashMap, FxHasher};

use crate::conversations::message_hash;
use crate::wire::Item;

/// Identities held at most; past this the cache starts over.
pub const CAPACITY: usize = 1 << 20;

/// The identities of messages seen, by a hash of their bytes.
#[derive(Debug, Default)]
pub struct Identities {
    known: Mutex<FxHashMap<u64, u64>>,
}

fn bytes_hash(raw: &str) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write_usize(raw.len());
    hasher.write(raw.as_bytes());
    hasher.finish()
}

impl Identities {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The identity of each item, parsing only those whose bytes are new.
    pub fn of(&self, items: &[Item]) -> Vec<u64> {
        let raw: Vec<u64> = items
            .iter()
            .map(|item| bytes_hash(item.raw.get()))
            .collect();
        let mut out: Vec<Option<u64>> = {
            let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            raw.iter().map(|r| known.get(r).copied()).collect()
        };
        let mut fresh = Vec::new();
        for (at, slot) in out.iter_mut().enumerate() {
            if slot.is_none() {
                let hash = message_hash(items[at].value());
                *slot = Some(hash);
                fresh.push((raw[at], hash));
            }
        }
        if !fresh.is_empty() {
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            if known.len() + fresh.len() > CAPACITY {
                known.clear();
            }
            known.extend(fresh);
        }
        out.into_iter().map(Option::unwrap_or_default).collect()
    }

    /// Identities held.
    pub fn len(&self) -> usize {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(text: &str) -> Item {
        Item::new(serde_json::value::RawValue::from_string(text.to_string()).unwrap())
    }

    #[test]
    fn identities_match_the_parsed_hash_and_are_parsed_once() {
        let identities = Identities::new();
        let a = r#"{"role": "user", "content": "a"}"#;
        let b = r#"{"content":"a","role":"user"}"#;
        let first = identities.of(&[item(a), item(b)]);
        assert_eq!(
            first[0],
            message_hash(&json!({"role": "user", "content": "a"}))
        );
        assert_eq!(first[0], first[1], "same message, other bytes");
        assert_eq!(identities.len(), 2);
        let known = item(a);
        let again = identities.of(std::slice::from_ref(&known));
        assert_eq!(again, [first[0]]);
        assert!(!known.parsed(), "a known message is not parsed");
        assert_ne!(
            identities.of(&[item(r#"{"role":"user","content":"b"}"#)])[0],
            first[0]
        );
    }
}
