//! What the harness knows about models: context window, output limit and
//! list prices, for the budget and the cost column of a session.
//!
//! The built-in prices are the providers' published list prices (US dollars
//! per million tokens) as checked in November 2026. They change; a config
//! file can override any entry or add new ones with [`ModelInfo`] records
//! (see [`ModelTable::with_overrides`]). Unknown models still work: they get
//! [`DEFAULT_CONTEXT_WINDOW`] and no price, so their cost is `None`.

use std::fmt;

use cwl::Usage;
use serde::{Deserialize, Serialize};

/// Context window assumed for a model the table does not know.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// One model's limits and prices. Prices are US dollars per million tokens.
///
/// This is also the shape of a model entry in the CLI's config file; an
/// entry there replaces the built-in entry of the same name entirely.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelInfo {
    /// The model name; also matches dated snapshots of it (see
    /// [`ModelTable::find`]).
    pub name: String,
    /// Prompt plus output tokens the model accepts.
    #[serde(default = "default_window")]
    pub context_window: u64,
    /// The most tokens one response may have, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Price of uncached prompt tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_price: Option<f64>,
    /// Price of prompt tokens read from the cache (default: `input_price`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_price: Option<f64>,
    /// Price of prompt tokens written to the cache (default: `input_price`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_price: Option<f64>,
    /// Price of generated tokens, reasoning included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_price: Option<f64>,
    /// How the provider caches and bills prompt prefixes, if known (the
    /// lab's cost model reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_rules: Option<CacheRules>,
}

fn default_window() -> u64 {
    DEFAULT_CONTEXT_WINDOW
}

impl ModelInfo {
    /// An entry for a model nobody described: default window, no prices.
    pub fn unknown(name: impl Into<String>) -> Self {
        ModelInfo {
            name: name.into(),
            context_window: DEFAULT_CONTEXT_WINDOW,
            max_output_tokens: None,
            input_price: None,
            cached_input_price: None,
            cache_write_price: None,
            output_price: None,
            cache_rules: None,
        }
    }

    /// The cost in US dollars of a call with `usage`, or `None` when the
    /// input or output price is unknown. Cached and cache-write tokens are
    /// part of `usage.input_tokens` and are priced at their own rates.
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        let input = self.input_price?;
        let output = self.output_price?;
        let cached = self.cached_input_price.unwrap_or(input);
        let write = self.cache_write_price.unwrap_or(input);
        let plain = usage
            .input_tokens
            .saturating_sub(usage.cached_input_tokens)
            .saturating_sub(usage.cache_write_tokens);
        let dollars = plain as f64 * input
            + usage.cached_input_tokens as f64 * cached
            + usage.cache_write_tokens as f64 * write
            + usage.output_tokens as f64 * output;
        Some(dollars / 1_000_000.0)
    }
}

/// How a provider caches prompt prefixes and bills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CacheRules {
    /// Anthropic prompt caching: a write costs 1.25× input, a read 0.1×;
    /// entries live 5 minutes after their last use; prefixes under 1,024
    /// tokens are not cached. Reads come only from prefixes cached at an
    /// earlier request's breakpoints: the end of the tools and system
    /// prompt, and the end of the whole request (where clients put their
    /// sliding breakpoint). So a request edited inside what the previous
    /// one sent reads up to the last such prefix before the edit, and
    /// writes the rest.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI automatic caching: prefixes of at least 1,024 tokens are
    /// read at the model's cached-input price in 128-token steps, with no
    /// write surcharge; entries are taken to live 5 minutes (the low end of
    /// the documented 5–10 minutes of inactivity).
    #[serde(rename = "openai")]
    OpenAi,
    /// OpenAI caching as it bills from GPT-5.6 on: reads as
    /// [`CacheRules::OpenAi`], and the prompt past the reused prefix is
    /// billed as a cache write (at the model's cache-write price).
    #[serde(rename = "openai-writes")]
    OpenAiWrites,
    /// Google Gemini implicit caching: prefixes of at least 2,048 tokens
    /// are read at the model's cached-input price, with no write
    /// surcharge and no storage fee; entries are taken to live 5 minutes.
    #[serde(rename = "google")]
    Google,
    /// No caching.
    #[serde(rename = "none")]
    None,
}

impl CacheRules {
    /// Seconds a cached prefix stays readable after its last use.
    pub fn ttl_seconds(self) -> i64 {
        300
    }

    /// Smallest cacheable prefix, in tokens.
    pub fn min_prefix(self) -> usize {
        match self {
            CacheRules::Google => 2048,
            _ => 1024,
        }
    }

    /// How much of a warm shared prefix of `prefix` tokens the provider
    /// reads: nothing under its smallest cacheable prefix, OpenAI's in
    /// 128-token steps past it, the whole prefix otherwise.
    pub fn readable(self, prefix: usize) -> usize {
        let min = self.min_prefix();
        match self {
            _ if prefix < min => 0,
            CacheRules::OpenAi | CacheRules::OpenAiWrites => min + (prefix - min) / 128 * 128,
            CacheRules::None => 0,
            CacheRules::Anthropic | CacheRules::Google => prefix,
        }
    }

    /// The name used on the command line and in config files.
    pub fn name(self) -> &'static str {
        match self {
            CacheRules::Anthropic => "anthropic",
            CacheRules::OpenAi => "openai",
            CacheRules::OpenAiWrites => "openai-writes",
            CacheRules::Google => "google",
            CacheRules::None => "none",
        }
    }
}

impl fmt::Display for CacheRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One built-in row: name, caching rules, context window, max output, then
/// prices of input, cached input, cache write (`None`: no surcharge) and
/// output.
type Row = (
    &'static str,
    CacheRules,
    u64,
    Option<u32>,
    f64,
    f64,
    Option<f64>,
    f64,
);

/// An OpenAI row: automatic caching with no write surcharge.
const fn openai(
    name: &'static str,
    window: u64,
    max_out: u32,
    input: f64,
    cached: f64,
    output: f64,
) -> Row {
    let rules = CacheRules::OpenAi;
    (
        name,
        rules,
        window,
        Some(max_out),
        input,
        cached,
        None,
        output,
    )
}

/// An OpenAI row from GPT-5.6 on, which bills cache writes.
const fn openai_written(
    name: &'static str,
    input: f64,
    cached: f64,
    write: f64,
    output: f64,
) -> Row {
    let rules = CacheRules::OpenAiWrites;
    (
        name,
        rules,
        400_000,
        Some(128_000),
        input,
        cached,
        Some(write),
        output,
    )
}

/// An Anthropic row: cache reads at 0.1× input, 5-minute writes at 1.25×.
const fn anthropic(name: &'static str, window: u64, max_out: u32, input: f64, output: f64) -> Row {
    let (read, write) = (input / 10.0, input * 1.25);
    let rules = CacheRules::Anthropic;
    (
        name,
        rules,
        window,
        Some(max_out),
        input,
        read,
        Some(write),
        output,
    )
}

/// A Google row: implicit caching with no write surcharge.
const fn google(name: &'static str, input: f64, cached: f64, output: f64) -> Row {
    let rules = CacheRules::Google;
    (name, rules, 1_048_576, None, input, cached, None, output)
}

/// List prices (standard tier, prompts up to the long-context threshold:
/// GPT-5.4 and later bill more above 272k prompt tokens, which no budgeted
/// policy reaches), as published by the providers and cross-checked
/// against GitHub's per-token table of Copilot models (November 2026).
/// A `-codex` model of the same list price has no row of its own (see
/// [`ModelTable::find`]).
const BUILTIN: &[Row] = &[
    openai("gpt-5", 400_000, 128_000, 1.25, 0.125, 10.0),
    openai("gpt-5.1", 400_000, 128_000, 1.25, 0.125, 10.0),
    openai("gpt-5-mini", 400_000, 128_000, 0.25, 0.025, 2.0),
    openai("gpt-5-nano", 400_000, 128_000, 0.05, 0.005, 0.40),
    openai("gpt-5.1-codex-max", 400_000, 128_000, 1.25, 0.125, 10.0),
    openai("gpt-5.1-codex-mini", 400_000, 128_000, 0.25, 0.025, 2.0),
    openai("gpt-5.2", 400_000, 128_000, 1.75, 0.175, 14.0),
    openai("gpt-5.3-codex", 400_000, 128_000, 1.75, 0.175, 14.0),
    openai("gpt-5.4", 1_050_000, 128_000, 2.50, 0.25, 15.0),
    openai("gpt-5.4-mini", 400_000, 128_000, 0.75, 0.075, 4.50),
    openai("gpt-5.4-nano", 400_000, 128_000, 0.20, 0.02, 1.25),
    openai("gpt-5.5", 400_000, 128_000, 5.0, 0.50, 30.0),
    openai_written("gpt-5.6-sol", 5.0, 0.50, 6.25, 30.0),
    openai_written("gpt-5.6-terra", 2.0, 0.20, 2.50, 12.0),
    openai_written("gpt-5.6-luna", 0.20, 0.02, 0.25, 1.20),
    openai("gpt-4.1", 1_047_576, 32_768, 2.0, 0.50, 8.0),
    openai("gpt-4.1-mini", 1_047_576, 32_768, 0.40, 0.10, 1.60),
    openai("gpt-4.1-nano", 1_047_576, 32_768, 0.10, 0.025, 0.40),
    openai("gpt-4o", 128_000, 16_384, 2.50, 1.25, 10.0),
    openai("gpt-4o-mini", 128_000, 16_384, 0.15, 0.075, 0.60),
    openai("o1", 200_000, 100_000, 15.0, 7.50, 60.0),
    openai("o3", 200_000, 100_000, 2.0, 0.50, 8.0),
    openai("o3-mini", 200_000, 100_000, 1.10, 0.55, 4.40),
    openai("o4-mini", 200_000, 100_000, 1.10, 0.275, 4.40),
    anthropic("claude-opus-5", 1_000_000, 128_000, 5.0, 25.0),
    anthropic("claude-sonnet-5", 1_000_000, 64_000, 2.0, 10.0),
    anthropic("claude-opus-4-8", 1_000_000, 128_000, 5.0, 25.0),
    anthropic("claude-opus-4-7", 1_000_000, 128_000, 5.0, 25.0),
    anthropic("claude-opus-4-6", 1_000_000, 128_000, 5.0, 25.0),
    anthropic("claude-sonnet-4-6", 1_000_000, 64_000, 3.0, 15.0),
    anthropic("claude-opus-4-5", 200_000, 64_000, 5.0, 25.0),
    anthropic("claude-opus-4-1", 200_000, 32_000, 15.0, 75.0),
    anthropic("claude-opus-4-0", 200_000, 32_000, 15.0, 75.0),
    anthropic("claude-opus-4", 200_000, 32_000, 15.0, 75.0),
    anthropic("claude-sonnet-4-5", 200_000, 64_000, 3.0, 15.0),
    anthropic("claude-sonnet-4-0", 200_000, 64_000, 3.0, 15.0),
    anthropic("claude-sonnet-4", 200_000, 64_000, 3.0, 15.0),
    anthropic("claude-3-7-sonnet", 200_000, 64_000, 3.0, 15.0),
    anthropic("claude-haiku-4-5", 200_000, 64_000, 1.0, 5.0),
    anthropic("claude-3-5-haiku", 200_000, 8_192, 0.80, 4.0),
    google("gemini-3.1-pro", 2.0, 0.20, 12.0),
    google("gemini-3-pro", 2.0, 0.20, 12.0),
    google("gemini-2.5-pro", 1.25, 0.125, 10.0),
    google("gemini-2.5-flash", 0.30, 0.03, 2.50),
];

/// The built-in model entries.
pub fn builtin() -> Vec<ModelInfo> {
    BUILTIN
        .iter()
        .map(
            |&(name, rules, window, max_out, input, cached, write, output)| ModelInfo {
                name: name.to_string(),
                context_window: window,
                max_output_tokens: max_out,
                input_price: Some(input),
                cached_input_price: Some(cached),
                cache_write_price: write,
                output_price: Some(output),
                cache_rules: Some(rules),
            },
        )
        .collect()
}

/// The built-in model names, for help texts and errors.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|row| row.0).collect()
}

/// The models the harness knows: configured overrides first, then the
/// built-in entries.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTable {
    overrides: Vec<ModelInfo>,
    builtin: Vec<ModelInfo>,
}

impl Default for ModelTable {
    fn default() -> Self {
        ModelTable::builtin()
    }
}

impl ModelTable {
    /// The built-in table.
    pub fn builtin() -> Self {
        ModelTable {
            overrides: Vec::new(),
            builtin: builtin(),
        }
    }

    /// The built-in table with `overrides` (e.g. from a config file) taking
    /// precedence over built-in entries.
    pub fn with_overrides(overrides: impl IntoIterator<Item = ModelInfo>) -> Self {
        ModelTable {
            overrides: overrides.into_iter().collect(),
            builtin: builtin(),
        }
    }

    /// The entry for `model`, if any. A provider route prefix
    /// (`openai/gpt-4o`) is ignored; then an exact name matches (ignoring
    /// case), else the longest name followed by the suffix of a snapshot
    /// (`-2025-04-14`, `-20250929`, `-latest`, after an optional
    /// `-preview`) or of a `-codex` model at the same list price. Other
    /// suffixes do not match, so `gpt-5-pro` is not priced as `gpt-5`. For
    /// Claude models dots count as dashes (`claude-sonnet-4.5`). Overrides
    /// win.
    pub fn find(&self, model: &str) -> Option<&ModelInfo> {
        let name = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let dashed = name.starts_with("claude").then(|| name.replace('.', "-"));
        [&self.overrides, &self.builtin]
            .into_iter()
            .find_map(|entries| {
                std::iter::once(&name)
                    .chain(dashed.as_ref())
                    .find_map(|n| best_match(entries, n))
            })
    }

    /// The entry for `model`, or [`ModelInfo::unknown`].
    pub fn lookup(&self, model: &str) -> ModelInfo {
        match self.find(model) {
            Some(info) => ModelInfo {
                name: model.to_string(),
                ..info.clone()
            },
            None => ModelInfo::unknown(model),
        }
    }
}

fn best_match<'a>(entries: &'a [ModelInfo], name: &str) -> Option<&'a ModelInfo> {
    if let Some(exact) = entries.iter().find(|e| e.name.eq_ignore_ascii_case(name)) {
        return Some(exact);
    }
    entries
        .iter()
        .filter(|e| {
            let entry = e.name.to_ascii_lowercase();
            name.strip_prefix(entry.as_str())
                .is_some_and(is_snapshot_suffix)
        })
        .max_by_key(|e| e.name.len())
}

/// `-codex`; `-latest`, `-YYYYMMDD` or `-YYYY-MM-DD`; or `-preview`,
/// alone or before one of those or a `-MM-DD`.
fn is_snapshot_suffix(suffix: &str) -> bool {
    if suffix == "-codex" {
        return true;
    }
    let (suffix, preview) = match suffix.strip_prefix("-preview") {
        Some("") => return true,
        Some(rest) => (rest, true),
        None => (suffix, false),
    };
    let Some(rest) = suffix.strip_prefix('-') else {
        return false;
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if rest == "latest" || digits(rest, 8) {
        return true;
    }
    let parts: Vec<&str> = rest.split('-').collect();
    match parts.as_slice() {
        [y, m, d] => digits(y, 4) && digits(m, 2) && digits(d, 2),
        [m, d] => preview && digits(m, 2) && digits(d, 2),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_prefix_and_unknown() {
        let table = ModelTable::builtin();
        assert_eq!(table.lookup("gpt-4.1").input_price, Some(2.0));
        assert_eq!(
            table.lookup("gpt-4.1-mini-2025-04-14").input_price,
            Some(0.40)
        );
        assert_eq!(
            table.lookup("claude-sonnet-4-5-20250929").name,
            "claude-sonnet-4-5-20250929"
        );
        assert_eq!(
            table.lookup("claude-sonnet-4-5-20250929").output_price,
            Some(15.0)
        );
        assert_eq!(
            table.lookup("claude-opus-4-1-20250805").input_price,
            Some(15.0)
        );
        assert_eq!(
            table.lookup("claude-opus-4-5-20251101").input_price,
            Some(5.0)
        );
        assert_eq!(
            table.lookup("claude-3-5-haiku-latest").output_price,
            Some(4.0)
        );
        assert_eq!(table.lookup("openai/GPT-4o").output_price, Some(10.0));
        assert_eq!(
            table.lookup("anthropic/claude-sonnet-4.5").input_price,
            Some(3.0)
        );
        assert_eq!(table.lookup("gpt-5.3-codex").output_price, Some(14.0));
        assert_eq!(table.lookup("gpt-5.2-codex").input_price, Some(1.75));
        assert_eq!(table.lookup("gpt-5-codex").cached_input_price, Some(0.125));
        assert_eq!(
            table
                .lookup("google/gemini-2.5-pro-preview-06-05")
                .cache_rules,
            Some(CacheRules::Google)
        );
        assert_eq!(table.find("gemini-2.5-pro-06-05"), None);
        assert_eq!(table.find("gpt-5-codex-max"), None);
        assert_eq!(table.lookup("gpt-5.4").context_window, 1_050_000);
        assert_eq!(table.lookup("gpt-5.6-terra").cache_write_price, Some(2.50));
        assert_eq!(
            table.lookup("claude-opus-4-6-20260205").input_price,
            Some(5.0)
        );
        assert_eq!(
            table
                .lookup("anthropic/claude-sonnet-4.6")
                .cache_write_price,
            Some(3.75)
        );
        let unknown = table.lookup("gpt-5-pro");
        assert_eq!(unknown.input_price, None);
        assert_eq!(unknown.context_window, DEFAULT_CONTEXT_WINDOW);
        assert_eq!(unknown.cost(&Usage::default()), None);
        assert!(table.find("qwen3-coder:30b").is_none());
    }

    #[test]
    fn overrides_win_and_parse_from_config() {
        let custom: ModelInfo = serde_json::from_str(
            r#"{"name": "gpt-4o", "context_window": 64000, "input_price": 1.0, "output_price": 2.0}"#,
        )
        .unwrap();
        let local: ModelInfo = serde_json::from_str(r#"{"name": "qwen3-coder"}"#).unwrap();
        assert_eq!(local.context_window, DEFAULT_CONTEXT_WINDOW);
        let table = ModelTable::with_overrides([custom, local]);
        let info = table.lookup("gpt-4o-2024-08-06");
        assert_eq!(info.context_window, 64_000);
        assert_eq!(info.cached_input_price, None);
        assert!(table.find("qwen3-coder").is_some());
        assert!(serde_json::from_str::<ModelInfo>(r#"{"name": "x", "window": 1}"#).is_err());
    }

    #[test]
    fn cost_prices_each_kind_of_token() {
        let info = ModelTable::builtin().lookup("claude-sonnet-4-5");
        let usage = Usage {
            input_tokens: 1_000_000 + 2_000_000 + 100_000,
            cached_input_tokens: 2_000_000,
            cache_write_tokens: 100_000,
            output_tokens: 10_000,
        };
        let cost = info.cost(&usage).unwrap();
        let expected = 3.0 + 2.0 * 0.30 + 0.1 * 3.75 + 0.01 * 15.0;
        assert!((cost - expected).abs() < 1e-9, "{cost} vs {expected}");
        let openai = ModelTable::builtin().lookup("gpt-4o-mini");
        let plain = Usage {
            input_tokens: 1_000_000,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
            output_tokens: 1_000_000,
        };
        assert!((openai.cost(&plain).unwrap() - 0.75).abs() < 1e-9);
    }
}
