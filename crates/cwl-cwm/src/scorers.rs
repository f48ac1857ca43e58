//! The eviction scorers of the context-window-manager design (section 3,
//! "Code: EvictionEngine"), with its weights and definitions: 0 evicts
//! first, 1 keeps.
//!
//! - `fifo`: `exp(-age / 10)`;
//! - `lru`: `exp(-idle / 5)` where idle counts turns since a later turn
//!   last referenced the block; never referenced scores 0.3 ("cold
//!   start"). The document's code returns `1 - exp(-idle / 5)`, which
//!   evicts the most recently used first and contradicts its own docstring
//!   ("least-recently-referenced blocks score lowest"); this follows the
//!   docstring;
//! - `priority`: `0.30·recency(exp(-age/15)) + 0.25·semantic + 0.20·source
//!   + 0.15·reuse + 0.10·explicit`; semantic is the block's relevance to
//!   the current task when the caller measured it, else the document's
//!   no-embedding default 0.5; source prestige user 1.0 / assistant 0.5 /
//!   tool result 0.3 (others 0.5); reuse `min(references / 5, 1)`;
//! - `type`: per-type time to live, tool results 8 turns, assistant text
//!   30, thinking 2 (the design's YAML), others 50: past it 0, else
//!   `1 - age / ttl`;
//! - `weighted`: the `HybridScorer` composite, `0.15·fifo + 0.15·lru +
//!   0.40·priority + 0.30·type`.

/// Which scoring function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scorer {
    /// Oldest first.
    Fifo,
    /// Least recently referenced first.
    Lru,
    /// Weighted multi-signal priority.
    Priority,
    /// Per-type time to live.
    Type,
    /// Weighted composite of the four.
    Weighted,
}

/// What a block is, for the scorers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentType {
    /// A user turn.
    User,
    /// Assistant text.
    Assistant,
    /// Assistant reasoning.
    Thinking,
    /// A tool call and its result.
    ToolResult,
}

/// What the scorers know about a block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockInfo {
    /// Its type.
    pub content_type: ContentType,
    /// The turn it entered the context.
    pub created: u64,
    /// The last turn that referenced it.
    pub last_ref: Option<u64>,
    /// How many turns referenced it.
    pub refs: u32,
    /// Its relevance to the current task in [0, 1], when measured.
    pub relevance: Option<f64>,
    /// Flagged never to be evicted (scores the `explicit` term).
    pub do_not_evict: bool,
}

impl Scorer {
    /// The block's score at `current` turn: 0 evict first, 1 keep.
    pub fn score(self, block: &BlockInfo, current: u64) -> f64 {
        let age = current.saturating_sub(block.created) as f64;
        match self {
            Scorer::Fifo => (-age / 10.0).exp(),
            Scorer::Lru => match block.last_ref {
                None => 0.3,
                Some(last) => (-(current.saturating_sub(last) as f64) / 5.0).exp(),
            },
            Scorer::Priority => {
                let recency = (-age / 15.0).exp();
                let semantic = block.relevance.unwrap_or(0.5).clamp(0.0, 1.0);
                let source = match block.content_type {
                    ContentType::User => 1.0,
                    ContentType::Assistant => 0.5,
                    ContentType::ToolResult => 0.3,
                    ContentType::Thinking => 0.5,
                };
                let reuse = (f64::from(block.refs) / 5.0).min(1.0);
                let explicit = if block.do_not_evict { 1.0 } else { 0.0 };
                0.30 * recency + 0.25 * semantic + 0.20 * source + 0.15 * reuse + 0.10 * explicit
            }
            Scorer::Type => {
                let ttl = match block.content_type {
                    ContentType::ToolResult => 8.0,
                    ContentType::Assistant => 30.0,
                    ContentType::Thinking => 2.0,
                    ContentType::User => 50.0,
                };
                if age > ttl { 0.0 } else { 1.0 - age / ttl }
            }
            Scorer::Weighted => {
                0.15 * Scorer::Fifo.score(block, current)
                    + 0.15 * Scorer::Lru.score(block, current)
                    + 0.40 * Scorer::Priority.score(block, current)
                    + 0.30 * Scorer::Type.score(block, current)
            }
        }
    }

    /// The scorer's name in reports and `--policy`.
    pub fn name(self) -> &'static str {
        match self {
            Scorer::Fifo => "fifo",
            Scorer::Lru => "lru",
            Scorer::Priority => "priority",
            Scorer::Type => "type",
            Scorer::Weighted => "weighted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(content_type: ContentType, created: u64) -> BlockInfo {
        BlockInfo {
            content_type,
            created,
            last_ref: None,
            refs: 0,
            relevance: None,
            do_not_evict: false,
        }
    }

    #[test]
    fn the_documents_formulas() {
        let old = block(ContentType::ToolResult, 0);
        assert!((Scorer::Fifo.score(&old, 10) - (-1.0f64).exp()).abs() < 1e-12);
        assert_eq!(Scorer::Lru.score(&old, 10), 0.3, "cold start");
        assert_eq!(Scorer::Type.score(&old, 9), 0.0, "past the 8-turn ttl");
        let fresh = block(ContentType::ToolResult, 10);
        let priority = Scorer::Priority.score(&fresh, 10);
        assert!((priority - (0.30 + 0.25 * 0.5 + 0.20 * 0.3)).abs() < 1e-12);
        let weighted = 0.15 * Scorer::Fifo.score(&fresh, 10)
            + 0.15 * Scorer::Lru.score(&fresh, 10)
            + 0.40 * priority
            + 0.30 * Scorer::Type.score(&fresh, 10);
        assert!((Scorer::Weighted.score(&fresh, 10) - weighted).abs() < 1e-12);
    }

    #[test]
    fn relevance_and_the_explicit_flag_raise_priority() {
        let plain = block(ContentType::ToolResult, 5);
        let relevant = BlockInfo {
            relevance: Some(1.0),
            ..plain
        };
        let flagged = BlockInfo {
            do_not_evict: true,
            ..plain
        };
        let base = Scorer::Priority.score(&plain, 10);
        assert!((Scorer::Priority.score(&relevant, 10) - base - 0.125).abs() < 1e-12);
        assert!((Scorer::Priority.score(&flagged, 10) - base - 0.10).abs() < 1e-12);
        let referenced = BlockInfo {
            last_ref: Some(9),
            refs: 5,
            ..plain
        };
        assert!(Scorer::Lru.score(&referenced, 10) > Scorer::Lru.score(&plain, 10));
    }
}
