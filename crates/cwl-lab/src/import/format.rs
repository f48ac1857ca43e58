//! The formats the importers understand and their stable names.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use thiserror::Error;

/// A session log format the importers understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(into = "&'static str")]
pub enum Format {
    /// This project's own session files: JSONL of [`::cwl::Record`].
    Cwl,
    /// OpenAI Chat Completions JSON: `{"messages": [...], "tools": [...]}`.
    OpenAi,
    /// pi coding agent session JSONL.
    Pi,
    /// Claude Code session JSONL (`~/.claude/projects/...`).
    ClaudeCode,
    /// OpenAI Codex CLI rollout JSONL (`~/.codex/sessions/...`).
    Codex,
    /// mini-swe-agent trajectory (`*.traj.json`).
    MiniSweAgent,
}

impl Format {
    /// The model a log of this format is priced as when it names none:
    /// `gpt-5` for Codex rollouts (rollouts from before Codex logged its
    /// model; it was the CLI's default), else
    /// [`crate::metrics::cost::DEFAULT_MODEL`].
    pub fn default_model(self) -> &'static str {
        match self {
            Format::Codex => "gpt-5",
            _ => crate::metrics::cost::DEFAULT_MODEL,
        }
    }

    /// Every format, in a stable order.
    pub const ALL: [Format; 6] = [
        Format::Cwl,
        Format::OpenAi,
        Format::Pi,
        Format::ClaudeCode,
        Format::Codex,
        Format::MiniSweAgent,
    ];

    /// The stable lowercase name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Cwl => "cwl",
            Format::OpenAi => "openai",
            Format::Pi => "pi",
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::MiniSweAgent => "mini-swe-agent",
        }
    }

    /// Whether the format is one JSON document (parsed whole) rather than JSONL.
    pub fn is_document(self) -> bool {
        matches!(self, Format::OpenAi | Format::MiniSweAgent)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Format> for &'static str {
    fn from(format: Format) -> Self {
        format.name()
    }
}

/// A format name that is not one of [`Format::name`]'s.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown format `{0}` (expected cwl, openai, pi, claude-code, codex or mini-swe-agent)")]
pub struct UnknownFormatName(pub String);

impl FromStr for Format {
    type Err = UnknownFormatName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|format| format.name() == s)
            .ok_or_else(|| UnknownFormatName(s.to_string()))
    }
}
