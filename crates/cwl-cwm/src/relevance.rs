//! Lexical relevance of context blocks to the current task: the
//! `semantic` term of the priority scorer without an embedding model.
//! BM25 (a maintained crate, English stemming and stop words, nothing
//! downloaded) with the blocks themselves as the corpus.

use std::fmt;
use std::hash::Hash;

use std::collections::HashMap;

use bm25::{Embedder, EmbedderBuilder, Embedding, Language};

/// Average block length in tokens assumed by a [`RelevanceIndex`] that
/// grows block by block (BM25 needs one; the document's tool outputs are
/// long).
pub const DEFAULT_AVGDL: f32 = 256.0;

/// An index of the blocks in a window, kept as they come and go, that
/// ranks them against the current task.
pub struct RelevanceIndex<K: Eq + Hash + Clone> {
    embedder: Embedder,
    scorer: Blocks<K>,
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
            scorer: Blocks::default(),
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
            self.scorer
                .scores(&query, keys)
                .into_iter()
                .map(f64::from)
                .collect(),
        )
    }
}

/// Query terms past which a block's terms are looked up in a table of the
/// query's rather than the query's terms searched in the block.
const SCAN_TERMS: usize = 16;

/// BM25 over the blocks' embeddings, scoring exactly as `bm25::Scorer`
/// does (the same products summed in the same order), in time linear in a
/// block's terms: the crate searches the block for each query term, which
/// is quadratic for the long user turns coding agents get.
struct Blocks<K> {
    embeddings: HashMap<K, Embedding>,
    /// Per term: how many blocks hold it.
    holding: HashMap<u32, usize>,
}

impl<K> Default for Blocks<K> {
    fn default() -> Self {
        Blocks {
            embeddings: HashMap::new(),
            holding: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash + Clone> Blocks<K> {
    fn upsert(&mut self, key: &K, embedding: Embedding) {
        self.remove(key);
        for term in distinct(&embedding) {
            *self.holding.entry(term).or_default() += 1;
        }
        self.embeddings.insert(key.clone(), embedding);
    }

    fn remove(&mut self, key: &K) {
        if let Some(embedding) = self.embeddings.remove(key) {
            for term in distinct(&embedding) {
                if let Some(count) = self.holding.get_mut(&term) {
                    *count -= 1;
                }
            }
        }
    }

    fn idf(&self, term: u32) -> f32 {
        let frequency = self.holding.get(&term).copied().unwrap_or(0) as f32;
        let numerator = self.embeddings.len() as f32 - frequency + 0.5;
        let denominator = frequency + 0.5;
        (1f32 + (numerator / denominator)).ln()
    }

    /// Each key's score against `query` (0 for an unknown key).
    fn scores(&self, query: &Embedding, keys: &[K]) -> Vec<f32> {
        let terms: Vec<u32> = query.indices().copied().collect();
        let idf: Vec<f32> = terms.iter().map(|&term| self.idf(term)).collect();
        let mut positions: HashMap<u32, Vec<usize>> = HashMap::new();
        if terms.len() > SCAN_TERMS {
            for (at, &term) in terms.iter().enumerate() {
                positions.entry(term).or_default().push(at);
            }
        }
        let mut values = vec![0f32; terms.len()];
        let mut found = vec![false; terms.len()];
        keys.iter()
            .map(|key| {
                let Some(block) = self.embeddings.get(key) else {
                    return 0.0;
                };
                if terms.len() <= SCAN_TERMS {
                    for (value, term) in values.iter_mut().zip(&terms) {
                        *value = block
                            .iter()
                            .find(|token| token.index == *term)
                            .map_or(0.0, |token| token.value);
                    }
                } else {
                    values.fill(0.0);
                    found.fill(false);
                    for token in block.iter() {
                        for &at in positions.get(&token.index).into_iter().flatten() {
                            if !found[at] {
                                found[at] = true;
                                values[at] = token.value;
                            }
                        }
                    }
                }
                let mut score = 0f32;
                for (idf, value) in idf.iter().zip(&values) {
                    score += idf * value;
                }
                score
            })
            .collect()
    }
}

/// The distinct terms of an embedding.
fn distinct(embedding: &Embedding) -> std::collections::HashSet<u32> {
    embedding.indices().copied().collect()
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
        scorer: Blocks::default(),
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

    use proptest::prelude::*;

    const WORDS: [&str; 30] = [
        "parser", "token", "login", "store", "record", "ledger", "bucket", "error", "value",
        "module", "cache", "index", "socket", "thread", "window", "budget", "episode", "session",
        "channel", "buffer", "cursor", "packet", "router", "schema", "tensor", "vector", "widget",
        "kernel", "daemon", "plugin",
    ];

    /// Up to 60 words of 30: queries of fewer and of more distinct terms
    /// than [`SCAN_TERMS`], so both lookups are tried.
    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(0usize..WORDS.len(), 0..60).prop_map(|words| {
            words
                .iter()
                .map(|&w| WORDS[w])
                .collect::<Vec<_>>()
                .join(" ")
        })
    }

    proptest! {
        /// The linear scorer gives the crate's scores bit for bit, after
        /// any inserts, replacements and removals, for short and long queries.
        #[test]
        fn blocks_score_as_the_crate_scores(
            ops in prop::collection::vec((0usize..6, prop::option::of(text())), 1..20),
            query in text(),
        ) {
            let embedder: Embedder = EmbedderBuilder::with_avgdl(DEFAULT_AVGDL).build();
            let mut ours: Blocks<usize> = Blocks::default();
            let mut theirs: bm25::Scorer<usize> = bm25::Scorer::new();
            for (key, op) in &ops {
                match op {
                    Some(text) => {
                        ours.upsert(key, embedder.embed(text));
                        theirs.upsert(key, embedder.embed(text));
                    }
                    None => {
                        ours.remove(key);
                        theirs.remove(key);
                    }
                }
            }
            let query = embedder.embed(&query);
            let keys: Vec<usize> = (0..7).collect();
            let expected: Vec<u32> = keys
                .iter()
                .map(|key| theirs.score(key, &query).unwrap_or(0.0).to_bits())
                .collect();
            let got: Vec<u32> = ours.scores(&query, &keys).iter().map(|s| s.to_bits()).collect();
            prop_assert_eq!(got, expected);
        }
    }
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
