//! What the harness knows about models: context window, output limit and
//! list prices, for the budget and the cost column of a session.
//!
//! The built-in prices are the providers' published list prices (US dollars
//! per million tokens) as checked in November 2026. They change; a config
//! file can override any entry or add new ones with [`ModelInfo`] records
//! (see [`ModelTable::with_overrides`]). Unknown models still work: they get
//! [`DEFAULT_CONTEXT_WINDOW`] and no price, so their cost is `None`.

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

/// Built-in entries: name, context window, max output, then prices of
/// input, cached input, cache write (`None`: no surcharge) and output.
type Row = (&'static str, u64, u32, f64, f64, Option<f64>, f64);

/// An OpenAI row: automatic caching with no write surcharge.
const fn openai(
    name: &'static str,
    window: u64,
    max_out: u32,
    input: f64,
    cached: f64,
    output: f64,
) -> Row {
    (name, window, max_out, input, cached, None, output)
}

/// An Anthropic row: cache reads at 0.1× input, 5-minute writes at 1.25×.
const fn anthropic(name: &'static str, window: u64, max_out: u32, input: f64, output: f64) -> Row {
    (
        name,
        window,
        max_out,
        input,
        input / 10.0,
        Some(input * 1.25),
        output,
    )
}

const BUILTIN: &[Row] = &[
    openai("gpt-5", 400_000, 128_000, 1.25, 0.125, 10.0),
    openai("gpt-5.1", 400_000, 128_000, 1.25, 0.125, 10.0),
    openai("gpt-5-codex", 400_000, 128_000, 1.25, 0.125, 10.0),
    openai("gpt-5-mini", 400_000, 128_000, 0.25, 0.025, 2.0),
    openai("gpt-5-nano", 400_000, 128_000, 0.05, 0.005, 0.40),
    openai("gpt-5.1-codex", 400_000, 128_000, 1.25, 0.125, 10.0),
    openai("gpt-5.1-codex-max", 400_000, 128_000, 1.25, 0.125, 10.0),
    openai("gpt-5.1-codex-mini", 400_000, 128_000, 0.25, 0.025, 2.0),
    openai("gpt-5.2", 400_000, 128_000, 1.75, 0.175, 14.0),
    openai("gpt-5.2-codex", 400_000, 128_000, 1.75, 0.175, 14.0),
    openai("gpt-5.3-codex", 400_000, 128_000, 1.75, 0.175, 14.0),
    openai("gpt-5.4", 1_050_000, 128_000, 2.50, 0.25, 15.0),
    openai("gpt-5.4-mini", 400_000, 128_000, 0.75, 0.075, 4.50),
    openai("gpt-5.4-nano", 400_000, 128_000, 0.20, 0.02, 1.25),
    openai("gpt-5.5", 400_000, 128_000, 5.0, 0.50, 30.0),
    // From GPT-5.6 OpenAI bills cache writes.
    ("gpt-5.6-sol", 400_000, 128_000, 5.0, 0.50, Some(6.25), 30.0),
    (
        "gpt-5.6-terra",
        400_000,
        128_000,
        2.0,
        0.20,
        Some(2.50),
        12.0,
    ),
    (
        "gpt-5.6-luna",
        400_000,
        128_000,
        0.20,
        0.02,
        Some(0.25),
        1.20,
    ),
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
];

/// The built-in model entries.
pub fn builtin() -> Vec<ModelInfo> {
    BUILTIN
        .iter()
        .map(
            |&(name, window, max_out, input, cached, write, output)| ModelInfo {
                name: name.to_string(),
                context_window: window,
                max_output_tokens: Some(max_out),
                input_price: Some(input),
                cached_input_price: Some(cached),
                cache_write_price: write,
                output_price: Some(output),
            },
        )
        .collect()
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
    /// case), else the longest name followed by a snapshot suffix
    /// (`-2025-04-14`, `-20250929`, `-latest`). Other suffixes do not
    /// match, so `gpt-5-pro` is not priced as `gpt-5`. For Claude models
    /// dots count as dashes (`claude-sonnet-4.5`). Overrides win.
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

/// `-latest`, `-YYYYMMDD` or `-YYYY-MM-DD`.
fn is_snapshot_suffix(suffix: &str) -> bool {
    let Some(rest) = suffix.strip_prefix('-') else {
        return false;
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if rest == "latest" || digits(rest, 8) {
        return true;
    }
    let parts: Vec<&str> = rest.split('-').collect();
    matches!(parts.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2))
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
