//! A harness's own clearing of old tool results from what it sends,
//! which its log does not record: Claude Code 2.0's "microcompact".
//!
//! Claude Code 2.0.77 (its `cli.js`, and the requests it sent our scripted
//! server in `scripts/real-clients/run.sh` sessions) replaces the content
//! of old Read, Bash, Grep, Glob, WebSearch, WebFetch, Edit and Write
//! results with `[Old tool result content cleared]` once its prompt nears
//! the compaction threshold: it keeps the latest three such results and
//! clears the oldest until the rest hold at most 40,000 tokens (estimated
//! as bytes / 4), and only when that saves at least 20,000. The session
//! log keeps every result whole. When the logged prompt of a Claude Code
//! log shrinks with no compaction, [`super::AsSent`] applies this rule and
//! lets the next call tell whether it explains the cut.

/// What a clearing puts in place of a result's content.
pub const PLACEHOLDER: &str = "[Old tool result content cleared]";

/// One harness's rule for clearing old tool results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClearRule {
    /// Tools whose results may be cleared.
    pub tools: &'static [&'static str],
    /// The latest results of those tools never cleared.
    pub keep: usize,
    /// Estimated tokens the uncleared results may hold after a clearing.
    pub target: usize,
    /// Estimated tokens a clearing must save to happen at all.
    pub min_saving: usize,
}

/// Claude Code 2.0's rule.
pub const CLAUDE_CODE: ClearRule = ClearRule {
    tools: &[
        "Read",
        "Bash",
        "Grep",
        "Glob",
        "WebSearch",
        "WebFetch",
        "Edit",
        "Write",
    ],
    keep: 3,
    target: 40_000,
    min_saving: 20_000,
};

impl ClearRule {
    /// The rule of the harness that writes logs of `format`, if it clears.
    pub fn of_format(format: &str) -> Option<ClearRule> {
        (format == "claude-code").then_some(CLAUDE_CODE)
    }

    /// Whether results of `tool` may be cleared.
    pub fn clears(&self, tool: &str) -> bool {
        self.tools.contains(&tool)
    }

    /// The harness's size estimate of a result of `bytes` bytes.
    pub fn estimate(bytes: usize) -> usize {
        bytes / 4
    }

    /// Which of the clearable results, given oldest first as
    /// `(estimate, cleared)`, a clearing clears now (their indices), or
    /// none when it would save too little.
    pub fn select(&self, results: &[(usize, bool)]) -> Vec<usize> {
        let protected = results.len().saturating_sub(self.keep);
        let mut held: usize = results
            .iter()
            .filter(|(_, cleared)| !cleared)
            .map(|(estimate, _)| estimate)
            .sum();
        let mut chosen = Vec::new();
        let mut saved = 0;
        for (index, &(estimate, cleared)) in results[..protected].iter().enumerate() {
            if held <= self.target {
                break;
            }
            if cleared {
                continue;
            }
            held -= estimate;
            saved += estimate;
            chosen.push(index);
        }
        if saved < self.min_saving {
            chosen.clear();
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clears_the_oldest_down_to_the_target_and_keeps_the_latest_three() {
        let results = [
            (15_000, false),
            (2_000, true),
            (20_000, false),
            (10_000, false),
            (9_000, false),
            (9_000, false),
            (9_000, false),
        ];
        // Held 72k; clearing 15k then 20k brings it to 37k.
        assert_eq!(CLAUDE_CODE.select(&results), vec![0, 2]);
        let small = [
            (12_000, false),
            (30_000, false),
            (1, false),
            (1, false),
            (1, false),
        ];
        assert_eq!(
            CLAUDE_CODE.select(&small),
            Vec::<usize>::new(),
            "12k is under the 20k saving a clearing needs"
        );
        let latest = [(50_000, false), (50_000, false), (50_000, false)];
        assert!(
            CLAUDE_CODE.select(&latest).is_empty(),
            "the latest three stay"
        );
        assert!(ClearRule::of_format("claude-code").is_some());
        assert!(ClearRule::of_format("codex").is_none());
        assert!(CLAUDE_CODE.clears("Read") && !CLAUDE_CODE.clears("TodoWrite"));
    }
}
