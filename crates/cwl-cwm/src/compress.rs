//! The compression cascade (section 4 of the document): what to ask a
//! model to shrink, at which pressure, with which prompt, and which
//! answers to take.
//!
//! The cascade is routed by utilisation: from `prepare` (50%) large tool
//! results (over 500 tokens) are summarised; from
//! `active` (75%) aging turns are summarised progressively (key points,
//! then one line, then a title); from `emergency` (95%) the older history
//! is compacted into one structured summary. Working notes are brought up
//! to date every few responses at any pressure. Every summary is a model call
//! the harness makes; an answer that is empty, not smaller than what it
//! replaces, or shares no word with it changes nothing.

use std::collections::HashSet;

use cwl::Message;

use crate::budgets::Allocation;
use serde::{Deserialize, Serialize};

/// Utilisations at which each stage of the cascade begins.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cascade {
    /// Tool-result summaries from here (default 0.50).
    pub prepare: f64,
    /// Progressive summaries of aging turns from here (default 0.75).
    pub active: f64,
    /// Compaction of the older history from here (default 0.95).
    pub emergency: f64,
}

impl Default for Cascade {
    fn default() -> Self {
        Cascade {
            prepare: 0.50,
            active: 0.75,
            emergency: 0.95,
        }
    }
}

/// Thresholds out of order or outside (0, 1].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "cascade thresholds must rise within (0, 1]: prepare {prepare} < active {active} < emergency {emergency}"
)]
pub struct CascadeError {
    prepare: f64,
    active: f64,
    emergency: f64,
}

impl Cascade {
    /// Checked thresholds.
    pub fn new(prepare: f64, active: f64, emergency: f64) -> Result<Self, CascadeError> {
        if 0.0 < prepare && prepare < active && active < emergency && emergency <= 1.0 {
            Ok(Cascade {
                prepare,
                active,
                emergency,
            })
        } else {
            Err(CascadeError {
                prepare,
                active,
                emergency,
            })
        }
    }

    /// The stage of a utilisation.
    pub fn stage(&self, utilisation: f64) -> Stage {
        if utilisation >= self.emergency {
            Stage::Emergency
        } else if utilisation >= self.active {
            Stage::Active
        } else if utilisation >= self.prepare {
            Stage::Prepare
        } else {
            Stage::Idle
        }
    }
}

/// How far the cascade goes at a utilisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Nothing to do.
    Idle,
    /// Summarise large tool results.
    Prepare,
    /// Also summarise aging turns progressively.
    Active,
    /// Also compact the older history.
    Emergency,
}

/// How compressed a message of the view is (progressive summarisation).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// As pushed.
    #[default]
    Full,
    /// Key points (~30%): a summarised tool result.
    KeyPoints,
    /// One line (~5%).
    OneLine,
    /// A title (~1%).
    Title,
}

impl Level {
    /// Its name in markers and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Full => "full",
            Level::KeyPoints => "key points",
            Level::OneLine => "one line",
            Level::Title => "title",
        }
    }
}

/// The compression settings of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompressionOptions {
    /// Where each stage begins.
    pub cascade: Cascade,
    /// Tool results over this many tokens are summarised (default 500).
    pub summarise_over: usize,
    /// Turns of age from which a message is summarised to one line
    /// (default 5).
    pub one_line_after: u64,
    /// Turns of age from which a message is reduced to a title
    /// (default 20).
    pub title_after: u64,
    /// Messages under this many tokens are never worth a summary call
    /// (default 80).
    pub min_tokens: usize,
    /// Model responses kept whole by compaction (default 4).
    pub keep_recent: usize,
    /// Turns between two note updates (default 6).
    pub notes_every: u64,
    /// Longest wait for one answer, in milliseconds (default 60 s).
    pub timeout_ms: u64,
    /// Output limit of a summary call (default 1,024 tokens).
    pub max_output_tokens: u32,
    /// A summary must be under this share of what it replaces
    /// (default 0.8).
    pub max_ratio: f64,
    /// Whether summaries are asked at all (`false`: eviction only).
    pub enabled: bool,
    /// The component budgets' shares of the window.
    pub allocation: Allocation,
    /// Where the pressure zones begin (yellow 0.50, orange 0.75, red
    /// 0.90); eviction holds the prompt at the orange line.
    pub zones: crate::pressure::Thresholds,
    /// Whether each taken summary is judged for fidelity by one more
    /// call (default off).
    pub judge: bool,
}

impl Default for CompressionOptions {
    fn default() -> Self {
        CompressionOptions {
            cascade: Cascade::default(),
            summarise_over: 500,
            one_line_after: 5,
            title_after: 20,
            min_tokens: 80,
            keep_recent: 4,
            notes_every: 6,
            timeout_ms: 60_000,
            max_output_tokens: 1_024,
            max_ratio: 0.8,
            enabled: true,
            allocation: Allocation::default(),
            zones: crate::pressure::Thresholds::default(),
            judge: false,
        }
    }
}

impl CompressionOptions {
    /// The level a message of age `age` (in turns) should be at, at most.
    pub fn tier(&self, age: u64) -> Level {
        if age >= self.title_after {
            Level::Title
        } else if age >= self.one_line_after {
            Level::OneLine
        } else {
            Level::Full
        }
    }
}

/// What a summary job is for, as its side request's purpose.
pub mod purpose {
    /// A large tool result summarised to key points.
    pub const SUMMARY: &str = "summary";
    /// An aging message summarised further.
    pub const PROGRESSIVE: &str = "progressive";
    /// The older history compacted into one summary.
    pub const COMPACTION: &str = "compaction";
    /// The working notes updated.
    pub const NOTES: &str = "notes";
    /// A summary's fidelity judged against what it replaced.
    pub const JUDGE: &str = "judge";
}

/// The system prompt of a tool-result summary (the document's
/// `TOOL_SUMMARIZE_PROMPT`); scripted servers recognise summary calls by
/// its first words.
pub const TOOL_SUMMARY_SYSTEM: &str = "Summarize the following tool output. Extract:
1. The key finding or result (1 sentence)
2. Any numbers, paths, names, or identifiers mentioned
3. Any errors or warnings (type + key detail)
4. Any actionable information
Aim for under 20% of the original length. Answer with the summary only.";

/// The system prompt of a compaction (the document's `COMPACTION_SYSTEM`).
pub const COMPACTION_SYSTEM: &str = "You are a context-compaction engine. Compress conversation
history into a structured summary preserving all decision-critical information.
RULES:
1. PRESERVE (mandatory):
- Every architectural decision with rationale and alternatives
- Every unresolved bug, error, blocker -- include exact error messages
- Current task progress: completed steps, step in progress, remaining
- All user constraints and preferences (verbatim if short)
- Key file paths, function names, class names, data structures
- All numbers: counts, measurements, config values, versions
2. DROP:
- Verbose tool output where key finding fits in 1-2 sentences
- Redundant status confirmations
- Dead-end explorations yielding no useful information
- Boilerplate error messages (keep type + key detail)
- Intermediate reasoning superseded by a final decision
3. OUTPUT FORMAT:
Structured sections with clear headers. Bullet points preferred over prose.
This is a reference document, not a narrative.";

/// The system prompt of a progressive summary.
pub const PROGRESSIVE_SYSTEM: &str = "Compress this earlier part of an agent's work for its own context window. Keep paths, names, numbers and errors. Answer with the compressed text only.";

/// The system prompt of a notes update.
pub const NOTES_SYSTEM: &str = "Update the working notes of a coding agent. The notes live outside its context window and are shown to it again after older messages are gone, so a new session reading only them must be able to continue. Sections: Goal, Done, Current, Remaining, Decisions, Open issues, Key facts (paths, names, numbers, exact errors). Be concise; bullet points. Answer with the full updated notes only.";

/// The system prompt of a fidelity judgement (LLM-as-judge, section 7).
pub const JUDGE_SYSTEM: &str = "You judge context compression. Compare an original text with its compressed version: does the compressed version keep the key facts a coding agent would need later (decisions, errors, paths, names, numbers, progress)? Ignore wording. Reply with a score between 0 and 1 on the first line (1: nothing that matters is lost), then one line saying what is lost, if anything.";

/// A fidelity judgement request.
pub fn judge_prompt(original: &str, compressed: &str) -> Vec<Message> {
    vec![
        Message::system(JUDGE_SYSTEM),
        Message::user(format!(
            "Original:\n{original}\n\nCompressed:\n{compressed}\n\nScore:"
        )),
    ]
}

/// The score a judge's answer starts with, in [0, 1].
pub fn parse_fidelity(answer: &str) -> Option<f64> {
    let first = answer.trim().lines().next()?;
    let token = first
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .find(|t| !t.is_empty())?
        .trim_end_matches(['.', ':']);
    let score: f64 = token.parse().ok()?;
    (0.0..=1.0).contains(&score).then_some(score)
}

/// A tool-result summary request.
pub fn tool_summary_prompt(tool: &str, tokens: usize, output: &str) -> Vec<Message> {
    vec![
        Message::system(TOOL_SUMMARY_SYSTEM),
        Message::user(format!(
            "Tool: {tool}\nOutput ({tokens} tokens):\n{output}\n\nSummary:"
        )),
    ]
}

/// A progressive summary request to `level`.
pub fn progressive_prompt(level: Level, text: &str) -> Vec<Message> {
    let ask = match level {
        Level::Title => "Give a title of at most ten words for it",
        Level::OneLine => "Summarise it in one line (about 5% of its length)",
        _ => "Give its key points and decisions (about 30% of its length)",
    };
    vec![
        Message::system(PROGRESSIVE_SYSTEM),
        Message::user(format!("{ask}:\n\n{text}")),
    ]
}

/// A compaction request (the document's `COMPACTION_USER`).
pub fn compaction_prompt(task: &str, conversation: &str) -> Vec<Message> {
    vec![
        Message::system(COMPACTION_SYSTEM),
        Message::user(format!(
            "Compress the following conversation. Task goal:\n{task}\n\nConversation to compress:\n{conversation}\n\nProduce the structured summary. A new agent session with only this summary must be able to resume the task immediately."
        )),
    ]
}

/// A notes update request.
pub fn notes_prompt(task: &str, notes: &str, conversation: &str) -> Vec<Message> {
    let notes = if notes.is_empty() {
        "(none yet)"
    } else {
        notes
    };
    vec![
        Message::system(NOTES_SYSTEM),
        Message::user(format!(
            "Task goal:\n{task}\n\nCurrent notes:\n{notes}\n\nWork since the last update:\n{conversation}\n\nUpdated notes:"
        )),
    ]
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// Nothing but white space.
    #[error("the answer is empty")]
    Empty,
    /// Not smaller than what it would replace.
    #[error("the answer ({answer} tokens) is not under {limit} tokens, so it saves too little")]
    TooLong {
        /// Its tokens.
        answer: usize,
        /// The most it may take.
        limit: usize,
    },
    /// Not about the content at all.
    #[error("the answer shares no word with what it summarises")]
    Unrelated,
}

/// Words of four letters or more, lower-cased, for the overlap check.
fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|word| word.chars().count() >= 4)
        .map(str::to_lowercase)
        .collect()
}

/// The answer, trimmed, when it may replace `original`: not empty, under
/// `limit` tokens (`answer_tokens` counts it) and sharing a word with
/// the original.
pub fn check_answer(
    answer: &str,
    original: &str,
    answer_tokens: usize,
    limit: usize,
) -> Result<String, Rejection> {
    let answer = answer.trim();
    if answer.is_empty() {
        return Err(Rejection::Empty);
    }
    if answer_tokens >= limit {
        return Err(Rejection::TooLong {
            answer: answer_tokens,
            limit,
        });
    }
    let theirs = words(original);
    if !theirs.is_empty() && words(answer).is_disjoint(&theirs) {
        return Err(Rejection::Unrelated);
    }
    Ok(answer.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_follow_the_thresholds_and_bad_ones_are_refused() {
        let cascade = Cascade::default();
        assert_eq!(cascade.stage(0.2), Stage::Idle);
        assert_eq!(cascade.stage(0.5), Stage::Prepare);
        assert_eq!(cascade.stage(0.74), Stage::Prepare);
        assert_eq!(cascade.stage(0.75), Stage::Active);
        assert_eq!(cascade.stage(0.949), Stage::Active);
        assert_eq!(cascade.stage(0.95), Stage::Emergency);
        assert_eq!(cascade.stage(1.4), Stage::Emergency);
        let tight = Cascade::new(0.3, 0.6, 0.8).unwrap();
        assert_eq!(tight.stage(0.65), Stage::Active);
        let error = Cascade::new(0.6, 0.5, 0.9).unwrap_err().to_string();
        assert!(error.contains("prepare 0.6 < active 0.5"), "{error}");
        assert!(Cascade::new(0.5, 0.75, 1.2).is_err());
        assert!(Cascade::new(0.0, 0.75, 0.9).is_err());
    }

    #[test]
    fn tiers_by_age() {
        let options = CompressionOptions::default();
        assert_eq!(options.tier(0), Level::Full);
        assert_eq!(options.tier(4), Level::Full);
        assert_eq!(options.tier(5), Level::OneLine);
        assert_eq!(options.tier(19), Level::OneLine);
        assert_eq!(options.tier(20), Level::Title);
        assert!(Level::Title > Level::OneLine && Level::OneLine > Level::KeyPoints);
    }

    #[test]
    fn answers_are_checked() {
        let original = "fn parse_header() reads 42 bytes from src/parser.rs";
        assert_eq!(
            check_answer("  parse_header reads 42 bytes\n", original, 6, 10),
            Ok("parse_header reads 42 bytes".to_string())
        );
        assert_eq!(check_answer(" \n ", original, 0, 10), Err(Rejection::Empty));
        assert_eq!(
            check_answer("parser", original, 12, 10),
            Err(Rejection::TooLong {
                answer: 12,
                limit: 10
            })
        );
        assert_eq!(
            check_answer("lorem ipsum dolor", original, 3, 10),
            Err(Rejection::Unrelated)
        );
        assert!(check_answer("ok", "", 1, 10).is_ok(), "nothing to compare");
    }

    #[test]
    fn judge_scores_are_read_from_the_first_line() {
        assert_eq!(parse_fidelity("0.9\nnothing lost"), Some(0.9));
        assert_eq!(parse_fidelity("  1 — all kept"), Some(1.0));
        assert_eq!(parse_fidelity("0.5."), Some(0.5));
        assert_eq!(parse_fidelity("1.5"), None);
        assert_eq!(parse_fidelity("good\n0.9"), None);
        assert_eq!(parse_fidelity(""), None);
        let prompt = judge_prompt("orig text", "short");
        assert!(matches!(&prompt[1], Message::User { content }
            if content.starts_with("Original:\norig text") && content.contains("Compressed:\nshort")));
    }

    #[test]
    fn prompts_carry_their_content() {
        let prompt = tool_summary_prompt("read", 900, "line one");
        assert!(
            matches!(&prompt[0], Message::System { content } if content.starts_with("Summarize the following tool output"))
        );
        assert!(
            matches!(&prompt[1], Message::User { content } if content.contains("Tool: read") && content.contains("line one"))
        );
        let prompt = compaction_prompt("fix it", "user: fix it");
        assert!(
            matches!(&prompt[1], Message::User { content } if content.contains("Task goal:\nfix it"))
        );
        let prompt = progressive_prompt(Level::Title, "text");
        assert!(
            matches!(&prompt[1], Message::User { content } if content.starts_with("Give a title"))
        );
        let prompt = notes_prompt("goal", "", "work");
        assert!(matches!(&prompt[1], Message::User { content } if content.contains("(none yet)")));
    }
}
