//! Lexical relevance of context blocks to the current task: the
//! `semantic` term of the priority scorer without an embedding model.
//! BM25 (a maintained crate, English stemming and stop words, nothing
//! downloaded) with the blocks themselves as the corpus.

use std::fmt;
use std::hash::Hash;

use std::collections::HashMap;

use bm25::{Embedder, EmbedderBuilder, Language, Scorer};

/// Average block length in tokens assumed by a [`RelevanceIndex`] that
/// grows block by block (BM25 needs one; the document's tool outputs are
/// long).
pub const DEFAULT_AVGDL: f32 = 256.0;

/// An index of the blocks in a window, kept as they come and go, that
/// ranks them against the current task.
pub struct RelevanceIndex<K: Eq + Hash + Clone> {
    embedder: Embedder,
    scorer: Scorer<K>,
}

impl<K: Eq + Hash + Clone> fmt::Debug for RelevanceIndex<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelevanceIndex")
            .field("avgdl", &self.embedder.avgdl())
            .finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone> RelevanceIndex<K> {
    /// An empty index assuming blocks of `avgdl` tokens on average.
    pub fn new(avgdl: f32) -> Self {
        RelevanceIndex {
            embedder: EmbedderBuilder::with_avgdl(avgdl).build(),
            scorer: Scorer::new(),
        }
    }

    /// Adds (or replaces) a block.
    pub fn insert(&mut self, key: &K, text: &str) {
        self.scorer.upsert(key, self.embedder.embed(text));
    }

    /// Forgets a block (evicted).
    pub fn remove(&mut self, key: &K) {
        self.scorer.remove(key);
    }

    /// The relevance of each of `keys` to `task` in [0, 1], the best of
    /// them 1; all 0 when none shares a term with the task (or is
    /// unknown).
    pub fn scores(&self, task: &str, keys: &[K]) -> Vec<f64> {
        let query = self.embedder.embed(task);
        normalise(
            keys.iter()
                .map(|key| f64::from(self.scorer.score(key, &query).unwrap_or(0.0)))
                .collect(),
        )
    }
}

/// A window's relevance index kept from one ranking to the next: a
/// block is embedded again only when its text changed and leaves when it
/// left the window, so a ranking embeds only what is new (embedding,
/// splitting and stemming, is most of a ranking's time). Holding the same
/// blocks, it scores exactly as an index built afresh.
pub struct WindowIndex<K: Eq + Hash + Clone> {
    index: RelevanceIndex<K>,
    texts: HashMap<K, (usize, u64)>,
    present: std::collections::HashSet<K>,
}

impl<K: Eq + Hash + Clone> fmt::Debug for WindowIndex<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WindowIndex")
            .field("blocks", &self.texts.len())
            .finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone> Default for WindowIndex<K> {
    fn default() -> Self {
        WindowIndex {
            index: RelevanceIndex::new(DEFAULT_AVGDL),
            texts: HashMap::new(),
            present: std::collections::HashSet::new(),
        }
    }
}

impl<K: Eq + Hash + Clone> WindowIndex<K> {
    /// Starts listing the window's blocks.
    pub fn begin(&mut self) {
        self.present.clear();
    }

    /// Lists block `key` with `text`.
    pub fn put(&mut self, key: &K, text: &str) {
        let id = text_id(text);
        if self.texts.get(key) != Some(&id) {
            self.index.insert(key, text);
            self.texts.insert(key.clone(), id);
        }
        let first = self.present.insert(key.clone());
        debug_assert!(first, "a block listed twice in one window");
    }

    /// Ends the listing: blocks not listed since [`WindowIndex::begin`]
    /// leave the index.
    pub fn finish(&mut self) {
        let gone: Vec<K> = self
            .texts
            .keys()
            .filter(|key| !self.present.contains(*key))
            .cloned()
            .collect();
        for key in gone {
            self.index.remove(&key);
            self.texts.remove(&key);
        }
    }

    /// [`RelevanceIndex::scores`] over the blocks listed last.
    pub fn scores(&self, task: &str, keys: &[K]) -> Vec<f64> {
        self.index.scores(task, keys)
    }
}

/// A text's identity: its length and SipHash (fixed keys).
fn text_id(text: &str) -> (usize, u64) {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    (text.len(), hasher.finish())
}

/// Each block's relevance to `task` in [0, 1]: its BM25 score over the
/// blocks, divided by the best block's, so the most relevant block scores
/// 1; every block scores 0 when none shares a term with the task.
pub fn relevance(task: &str, blocks: &[&str]) -> Vec<f64> {
    if blocks.is_empty() {
        return Vec::new();
    }
    let embedder: Embedder = EmbedderBuilder::with_fit_to_corpus(Language::English, blocks).build();
    let mut index = RelevanceIndex {
        embedder,
        scorer: Scorer::new(),
    };
    for (key, block) in blocks.iter().enumerate() {
        index.insert(&key, block);
    }
    let keys: Vec<usize> = (0..blocks.len()).collect();
    index.scores(task, &keys)
}

fn normalise(scores: Vec<f64>) -> Vec<f64> {
    let best = scores.iter().copied().fold(0.0, f64::max);
    if best <= 0.0 {
        return vec![0.0; scores.len()];
    }
    scores.iter().map(|score| score / best).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_about_the_task_ranks_first() {
        let blocks = [
            "fn parse_header(input: &str) -> Header { /* parser for the HTTP header */ }",
            "total 48\ndrwxr-xr-x  src\n-rw-r--r-- Cargo.toml",
            "test result: ok. 12 passed; 0 failed",
        ];
        let scores = relevance("Fix the HTTP header parser", &blocks);
        assert_eq!(scores[0], 1.0, "{scores:?}");
        assert!(scores[1] < 0.5 && scores[2] < 0.5, "{scores:?}");
        assert_eq!(relevance("quantum chromodynamics", &blocks), [0.0; 3]);
        assert!(relevance("anything", &[]).is_empty());
    }

    #[test]
    fn a_window_index_kept_between_rankings_scores_as_one_built_afresh() {
        let texts = [
            "the login handler checks the password hash",
            "cargo build finished in 3.2s",
            "password reset emails go through the mailer",
            "the login page shows the password rules",
        ];
        let task = "why does login reject a valid password";
        let mut kept = WindowIndex::default();
        let windows: [&[(usize, usize)]; 4] = [
            &[(0, 0), (1, 1), (2, 2)],
            &[(1, 1), (2, 2), (3, 3)],
            &[(1, 1), (2, 0), (3, 3)],
            &[(3, 3)],
        ];
        for window in windows {
            let mut fresh = RelevanceIndex::new(DEFAULT_AVGDL);
            kept.begin();
            for &(key, text) in window {
                fresh.insert(&key, texts[text]);
                kept.put(&key, texts[text]);
            }
            kept.finish();
            let keys = [0, 1, 2, 3];
            assert_eq!(
                kept.scores(task, &keys),
                fresh.scores(task, &keys),
                "{window:?}"
            );
        }
        assert_eq!(kept.texts.len(), 1, "blocks that left are forgotten");
    }

    #[test]
    fn an_index_follows_the_window() {
        let mut index = RelevanceIndex::new(DEFAULT_AVGDL);
        index.insert(&1, "the login handler checks the password hash");
        index.insert(&2, "cargo build finished in 3.2s");
        index.insert(&3, "password reset emails go through the mailer");
        let scores = index.scores("why does login reject a valid password", &[1, 2, 3]);
        assert_eq!(scores[0], 1.0, "{scores:?}");
        assert_eq!(scores[1], 0.0);
        assert!(scores[2] > 0.0 && scores[2] < 1.0, "{scores:?}");
        index.remove(&1);
        let scores = index.scores("why does login reject a valid password", &[1, 2, 3]);
        assert_eq!(scores, [0.0, 0.0, 1.0], "an evicted block is unknown");
    }
}
