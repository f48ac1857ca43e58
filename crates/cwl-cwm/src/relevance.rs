//! Lexical relevance of context blocks to the current task: the
//! `semantic` term of the priority scorer without an embedding model.
//! BM25 (a maintained crate, English stemming and stop words, nothing
//! downloaded) with the blocks themselves as the corpus.

use bm25::{Embedder, EmbedderBuilder, Language, Scorer};

/// Each block's relevance to `task` in [0, 1]: its BM25 score over the
/// blocks, divided by the best block's, so the most relevant block scores
/// 1; every block scores 0 when none shares a term with the task.
pub fn relevance(task: &str, blocks: &[&str]) -> Vec<f64> {
    if blocks.is_empty() {
        return Vec::new();
    }
    let embedder: Embedder = EmbedderBuilder::with_fit_to_corpus(Language::English, blocks).build();
    let mut scorer = Scorer::<usize>::new();
    for (index, block) in blocks.iter().enumerate() {
        scorer.upsert(&index, embedder.embed(block));
    }
    let query = embedder.embed(task);
    let scores: Vec<f64> = (0..blocks.len())
        .map(|index| f64::from(scorer.score(&index, &query).unwrap_or(0.0)))
        .collect();
    let best = scores.iter().copied().fold(0.0, f64::max);
    if best <= 0.0 {
        return vec![0.0; blocks.len()];
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
}
