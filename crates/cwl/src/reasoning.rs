//! Which turns' reasoning a provider keeps in the prompt it bills.
//!
//! OpenAI's reasoning models before GPT-5.6 drop the reasoning items of
//! earlier user turns from the prompt. The client sends them back (Codex
//! CLI, encrypted), but they are neither seen nor counted in
//! `input_tokens`; reasoning from the current turn is counted. Codex CLI
//! adds its own estimate of that earlier reasoning to the API's figure for
//! exactly this reason (openai/codex#6161, #7113), and a live probe found
//! the same (UKGovernmentBEIS/inspect_ai#3809).
//!
//! Anthropic documents the same for its older thinking models: Claude
//! Sonnet 4.5 and earlier Sonnets, Opus 4.1 and earlier Opuses and every
//! Haiku through 4.5 keep only the current turn's thinking; the API strips
//! earlier turns' blocks and bills only the blocks the model is shown.
//! Claude Opus 4.5 and later Opuses and Sonnet 4.6 and later Sonnets keep
//! every turn's (a pi log with Opus 4.5 agrees: each call after a user
//! turn reads the whole previous prompt from cache).
//!
//! Every other model's reasoning counts as sent.

use serde::{Deserialize, Serialize};

use crate::message::Message;

/// Which turns' reasoning a provider keeps in the prompt it bills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningScope {
    /// Every turn's, as sent.
    #[default]
    AllTurns,
    /// Only that of the current user turn: reasoning in an assistant
    /// message before the latest user message is dropped.
    CurrentTurn,
}

impl ReasoningScope {
    /// Whether every turn's reasoning is kept (the default).
    pub fn is_all_turns(&self) -> bool {
        *self == ReasoningScope::AllTurns
    }

    /// How many of `messages` (a request, in order) come before its latest
    /// user message: the ones whose reasoning a provider of this scope
    /// drops (0 when it keeps every turn's, or there is no user message).
    pub fn turn_start<'a>(self, messages: impl IntoIterator<Item = &'a Message>) -> usize {
        match self {
            ReasoningScope::AllTurns => 0,
            ReasoningScope::CurrentTurn => messages
                .into_iter()
                .enumerate()
                .filter(|(_, message)| matches!(message, Message::User { .. }))
                .last()
                .map_or(0, |(at, _)| at),
        }
    }

    /// The scope of the provider serving `model`: [`CurrentTurn`] for
    /// OpenAI's reasoning models before GPT-5.6 (`o1`, `o3`, `o4-mini`,
    /// `codex-mini`, `gpt-5`, `gpt-5-codex`, `gpt-5.1` to `gpt-5.5`, with
    /// or without an `openai/` prefix) and for Anthropic's thinking models
    /// before Opus 4.5 and Sonnet 4.6 (Claude 3.7 Sonnet, Sonnet 4 and 4.5,
    /// Opus 4 and 4.1, Haiku through 4.5, under any provider prefix or
    /// date suffix), [`AllTurns`] for every other.
    ///
    /// [`CurrentTurn`]: ReasoningScope::CurrentTurn
    /// [`AllTurns`]: ReasoningScope::AllTurns
    pub fn of_model(model: &str) -> Self {
        let model = model.trim().to_ascii_lowercase();
        if let Some(at) = model.find("claude-") {
            return claude_scope(&model[at + "claude-".len()..]);
        }
        let model = model.strip_prefix("openai/").unwrap_or(&model);
        let o_series = ["o1", "o3", "o4", "codex-mini"]
            .iter()
            .any(|family| model.starts_with(family));
        let before_5_6 =
            model
                .strip_prefix("gpt-5")
                .is_some_and(|rest| match rest.strip_prefix('.') {
                    Some(minor) => {
                        let digits: String =
                            minor.chars().take_while(char::is_ascii_digit).collect();
                        digits.parse::<u32>().is_ok_and(|minor| minor < 6)
                    }
                    None => rest.is_empty() || rest.starts_with('-'),
                });
        if o_series || before_5_6 {
            ReasoningScope::CurrentTurn
        } else {
            ReasoningScope::AllTurns
        }
    }
}

/// The scope of a Claude model, given its name after `claude-`
/// (`sonnet-4-5-20250929`, `opus-4.1`, `3-7-sonnet-latest`).
fn claude_scope(name: &str) -> ReasoningScope {
    let parts: Vec<&str> = name.split(['-', '.', '@', ':']).collect();
    let family = parts
        .iter()
        .find(|part| matches!(**part, "opus" | "sonnet" | "haiku"));
    let version: Vec<u32> = parts
        .iter()
        .skip_while(|part| !is_version_number(part))
        .take_while(|part| is_version_number(part))
        .filter_map(|part| part.parse().ok())
        .collect();
    let (Some(family), Some(&major)) = (family, version.first()) else {
        return ReasoningScope::AllTurns;
    };
    let version = (major, version.get(1).copied().unwrap_or(0));
    let keeps_only_current = match *family {
        "opus" => version < (4, 5),
        "sonnet" => version < (4, 6),
        _ => version <= (4, 5),
    };
    if keeps_only_current {
        ReasoningScope::CurrentTurn
    } else {
        ReasoningScope::AllTurns
    }
}

/// A model version component: one or two digits (not a date).
fn is_version_number(part: &str) -> bool {
    (1..=2).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_reasoning_models_before_5_6_keep_the_current_turn_only() {
        for model in [
            "gpt-5",
            "gpt-5-codex",
            "gpt-5-mini",
            "GPT-5.1-codex-max",
            "gpt-5.2",
            "gpt-5.5",
            "openai/gpt-5.4-mini",
            "o3",
            "o4-mini",
            "codex-mini-latest",
        ] {
            assert_eq!(
                ReasoningScope::of_model(model),
                ReasoningScope::CurrentTurn,
                "{model}"
            );
        }
        for model in [
            "gpt-5.6",
            "gpt-5.6-sol",
            "gpt-5.10",
            "gpt-6",
            "gpt-4.1",
            "gpt-50",
            "gemini-2.5-pro",
            "",
        ] {
            assert_eq!(
                ReasoningScope::of_model(model),
                ReasoningScope::AllTurns,
                "{model}"
            );
        }
    }

    #[test]
    fn claude_models_before_opus_4_5_and_sonnet_4_6_keep_the_current_turn_only() {
        for model in [
            "claude-sonnet-4-5",
            "claude-sonnet-4-5-20250929",
            "claude-sonnet-4.5",
            "anthropic/claude-sonnet-4-5",
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "claude-sonnet-4-5@20250929",
            "claude-sonnet-4-20250514",
            "claude-opus-4-1-20250805",
            "claude-opus-4-20250514",
            "claude-opus-4-20250514-v1:0",
            "claude-haiku-4-5",
            "claude-3-7-sonnet-20250219",
            "claude-3-7-sonnet-latest",
            "claude-3-5-haiku-20241022",
        ] {
            assert_eq!(
                ReasoningScope::of_model(model),
                ReasoningScope::CurrentTurn,
                "{model}"
            );
        }
        for model in [
            "claude-opus-4-5",
            "claude-opus-4-5-20251101",
            "claude-opus-4-6",
            "claude-sonnet-4-6",
            "claude-opus-5",
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
            "claude-fable-5-1",
            "claude-mythos-preview",
            "claude-instant",
        ] {
            assert_eq!(
                ReasoningScope::of_model(model),
                ReasoningScope::AllTurns,
                "{model}"
            );
        }
    }
}
