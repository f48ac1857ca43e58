//! Prices and provider caching rules, so a replay can say what each
//! policy's requests would have cost.
//!
//! A small table of list prices in US dollars per million tokens, as
//! published on the providers' pricing pages (checked November 2026). The agent crate has
//! its own table; the lab keeps this one so it does not depend on the
//! agent. `--price` overrides any row.

use std::fmt;

/// How a provider caches prompt prefixes and bills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheRules {
    /// Anthropic prompt caching: a write costs 1.25× input, a read 0.1×;
    /// entries live 5 minutes after their last use; prefixes under 1,024
    /// tokens are not cached. Reads come only from prefixes cached at an
    /// earlier request's breakpoints: the end of the tools and system
    /// prompt, and the end of the whole request (where clients put their
    /// sliding breakpoint). So a request edited inside what the previous
    /// one sent reads up to the last such prefix before the edit, and
    /// writes the rest.
    Anthropic,
    /// OpenAI automatic caching: prefixes of at least 1,024 tokens are
    /// read at the model's cached-input price in 128-token steps, with no
    /// write surcharge; entries are taken to live 5 minutes (the low end of
    /// the documented 5–10 minutes of inactivity).
    OpenAi,
    /// OpenAI caching as it bills from GPT-5.6 on: reads as
    /// [`CacheRules::OpenAi`], and the prompt past the reused prefix is
    /// billed as a cache write (at the model's cache-write price).
    OpenAiWrites,
    /// Google Gemini implicit caching: prefixes of at least 2,048 tokens
    /// are read at the model's cached-input price, with no write
    /// surcharge and no storage fee; entries are taken to live 5 minutes.
    Google,
    /// No caching.
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

    /// The name used on the command line.
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

/// What one model's tokens cost, in US dollars per million.
#[derive(Debug, Clone, PartialEq)]
pub struct Pricing {
    /// The model's name, as the log or `--model` gave it.
    pub model: String,
    /// The price table row that priced it (`gpt-5` for `gpt-5-codex`);
    /// the model itself for a `--price` entry or an unknown model.
    pub priced_as: String,
    /// The provider's caching rules.
    pub rules: CacheRules,
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Input read from the cache.
    pub cache_read: f64,
    /// Input written to the cache.
    pub cache_write: f64,
    /// Context window in tokens.
    pub window: usize,
    /// Whether these are real prices: false for a model the table does not
    /// know, whose costs are then reported unknown rather than guessed.
    pub known: bool,
}

impl Pricing {
    /// A model missing from the table: no prices (costs unknown), no
    /// caching rules, and the default model's context window.
    pub fn unknown(model: &str) -> Self {
        Pricing {
            model: model.to_string(),
            priced_as: model.to_string(),
            rules: CacheRules::None,
            input: 0.0,
            output: 0.0,
            cache_read: 0.0,
            cache_write: 0.0,
            window: DEFAULT_WINDOW,
            known: false,
        }
    }

    /// Dollars for one call.
    pub fn cost(&self, uncached: usize, read: usize, write: usize, output: usize) -> f64 {
        (uncached as f64 * self.input
            + read as f64 * self.cache_read
            + write as f64 * self.cache_write
            + output as f64 * self.output)
            / 1_000_000.0
    }
}

/// The model used when neither `--model` nor the log names one, for
/// every format but Codex rollouts.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

/// Context window assumed for a model the table does not know.
pub const DEFAULT_WINDOW: usize = 200_000;

/// One row of the price table.
#[derive(Debug, Clone, Copy)]
struct Row {
    /// Name prefix a model must match.
    name: &'static str,
    rules: CacheRules,
    input: f64,
    output: f64,
    /// Cached input (OpenAI, Google); Anthropic reads cost 0.1× input.
    cached: f64,
    /// The cache-write price, for [`CacheRules::OpenAiWrites`].
    write: Option<f64>,
    window: usize,
}

const fn anthropic(name: &'static str, input: f64, output: f64, window: usize) -> Row {
    Row {
        name,
        rules: CacheRules::Anthropic,
        input,
        output,
        cached: 0.0,
        write: None,
        window,
    }
}

const fn openai(name: &'static str, input: f64, output: f64, cached: f64, window: usize) -> Row {
    Row {
        name,
        rules: CacheRules::OpenAi,
        input,
        output,
        cached,
        write: None,
        window,
    }
}

const fn openai_written(
    name: &'static str,
    input: f64,
    output: f64,
    cached: f64,
    write: f64,
    window: usize,
) -> Row {
    Row {
        rules: CacheRules::OpenAiWrites,
        write: Some(write),
        ..openai(name, input, output, cached, window)
    }
}

const fn google(name: &'static str, input: f64, output: f64, cached: f64, window: usize) -> Row {
    Row {
        rules: CacheRules::Google,
        ..openai(name, input, output, cached, window)
    }
}

/// List prices (standard tier, prompts up to the long-context threshold:
/// GPT-5.4 and later bill more above 272k prompt tokens, which no budgeted
/// policy reaches), as published by the providers and cross-checked
/// against GitHub's per-token table of Copilot models (November 2026).
const TABLE: &[Row] = &[
    anthropic("claude-opus-5", 5.0, 25.0, 1_000_000),
    anthropic("claude-sonnet-5", 2.0, 10.0, 1_000_000),
    anthropic("claude-opus-4-8", 5.0, 25.0, 1_000_000),
    anthropic("claude-opus-4-7", 5.0, 25.0, 1_000_000),
    anthropic("claude-opus-4-6", 5.0, 25.0, 1_000_000),
    anthropic("claude-sonnet-4-6", 3.0, 15.0, 1_000_000),
    anthropic("claude-opus-4-5", 5.0, 25.0, 200_000),
    anthropic("claude-opus-4-1", 15.0, 75.0, 200_000),
    anthropic("claude-opus-4", 15.0, 75.0, 200_000),
    anthropic("claude-sonnet-4-5", 3.0, 15.0, 200_000),
    anthropic("claude-sonnet-4", 3.0, 15.0, 200_000),
    anthropic("claude-3-7-sonnet", 3.0, 15.0, 200_000),
    anthropic("claude-haiku-4-5", 1.0, 5.0, 200_000),
    anthropic("claude-3-5-haiku", 0.8, 4.0, 200_000),
    openai_written("gpt-5.6-sol", 5.0, 30.0, 0.50, 6.25, 400_000),
    openai_written("gpt-5.6-terra", 2.0, 12.0, 0.20, 2.50, 400_000),
    openai_written("gpt-5.6-luna", 0.20, 1.20, 0.02, 0.25, 400_000),
    openai("gpt-5.5", 5.0, 30.0, 0.50, 400_000),
    openai("gpt-5.4", 2.50, 15.0, 0.25, 1_050_000),
    openai("gpt-5.4-mini", 0.75, 4.50, 0.075, 400_000),
    openai("gpt-5.4-nano", 0.20, 1.25, 0.02, 400_000),
    openai("gpt-5.3-codex", 1.75, 14.0, 0.175, 400_000),
    openai("gpt-5.2", 1.75, 14.0, 0.175, 400_000),
    openai("gpt-5.1-codex-max", 1.25, 10.0, 0.125, 400_000),
    openai("gpt-5.1-codex-mini", 0.25, 2.0, 0.025, 400_000),
    openai("gpt-5.1", 1.25, 10.0, 0.125, 400_000),
    openai("gpt-5-mini", 0.25, 2.0, 0.025, 400_000),
    openai("gpt-5-nano", 0.05, 0.40, 0.005, 400_000),
    openai("gpt-5", 1.25, 10.0, 0.125, 400_000),
    openai("gpt-4.1-mini", 0.40, 1.60, 0.10, 1_047_576),
    openai("gpt-4.1", 2.0, 8.0, 0.50, 1_047_576),
    openai("gpt-4o-mini", 0.15, 0.60, 0.075, 128_000),
    openai("gpt-4o", 2.50, 10.0, 1.25, 128_000),
    openai("o4-mini", 1.10, 4.40, 0.275, 200_000),
    openai("o3", 2.0, 8.0, 0.50, 200_000),
    google("gemini-3.1-pro", 2.0, 12.0, 0.20, 1_048_576),
    google("gemini-3-pro", 2.0, 12.0, 0.20, 1_048_576),
    google("gemini-2.5-pro", 1.25, 10.0, 0.125, 1_048_576),
    google("gemini-2.5-flash", 0.30, 2.50, 0.03, 1_048_576),
];

/// The known model names, for help texts.
pub fn known_models() -> Vec<&'static str> {
    TABLE.iter().map(|row| row.name).collect()
}

/// The price of `model`: the longest table name it starts with, after any
/// `provider/` prefix, when what follows is only a release date, `-latest`
/// or `-codex` (same list price): `anthropic/claude-sonnet-4-5-20250929`
/// finds `claude-sonnet-4-5`, while `gpt-5-pro` or `gpt-5.2-pro`,
/// priced differently, are unknown rather than priced as `gpt-5`.
pub fn lookup(model: &str) -> Option<Pricing> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let same_model = |rest: &str| {
        let rest = rest.strip_prefix("-preview").unwrap_or(rest);
        rest.is_empty()
            || rest == "-latest"
            || rest == "-codex"
            || (rest.starts_with('-') && rest[1..].chars().all(|c| c.is_ascii_digit() || c == '-'))
    };
    let row = TABLE
        .iter()
        .filter(|row| name.strip_prefix(row.name).is_some_and(same_model))
        .max_by_key(|row| row.name.len())?;
    let (cache_read, cache_write) = match row.rules {
        CacheRules::Anthropic => (row.input * 0.1, row.input * 1.25),
        CacheRules::OpenAi | CacheRules::OpenAiWrites | CacheRules::Google => {
            (row.cached, row.write.unwrap_or(row.input))
        }
        CacheRules::None => (row.input, row.input),
    };
    Some(Pricing {
        model: model.to_string(),
        priced_as: row.name.to_string(),
        rules: row.rules,
        input: row.input,
        output: row.output,
        cache_read,
        cache_write,
        window: row.window,
        known: true,
    })
}

/// A `--price` text that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// Malformed.
    #[error(
        "invalid --price `{0}`: expected comma-separated KEY=VALUE in US dollars per million tokens, keys in, out, read, write, window, cache (anthropic|openai|openai-writes|google|none), e.g. `in=3,out=15,cache=anthropic`"
    )]
    Invalid(String),
    /// A model that is not in the table.
    #[error("unknown model `{0}` (known: {known}); give its prices with --price in=...,out=...", known = known_models().join(", "))]
    UnknownModel(String),
}

/// Applies a `--price` override (`in=3,out=15,read=0.3,write=3.75,
/// cache=anthropic,window=200000`) on top of `base` (a table row, or
/// nothing). Cache read/write prices left out follow the cache rules
/// (Anthropic 0.1×/1.25× input; OpenAI: read at input price unless given,
/// no write surcharge).
pub fn with_override(
    base: Option<Pricing>,
    model: &str,
    text: &str,
) -> Result<Pricing, PriceError> {
    let invalid = || PriceError::Invalid(text.to_string());
    let (mut input, mut output, mut read, mut write) = (None, None, None, None);
    let mut rules = None;
    let mut window = None;
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').ok_or_else(invalid)?;
        let number = || {
            value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(invalid)
        };
        match key.trim() {
            "in" | "input" => input = Some(number()?),
            "out" | "output" => output = Some(number()?),
            "read" | "cache_read" => read = Some(number()?),
            "write" | "cache_write" => write = Some(number()?),
            "window" => window = Some(value.trim().parse::<usize>().map_err(|_| invalid())?),
            "cache" => {
                rules = Some(match value.trim() {
                    "anthropic" => CacheRules::Anthropic,
                    "openai" => CacheRules::OpenAi,
                    "openai-writes" => CacheRules::OpenAiWrites,
                    "google" => CacheRules::Google,
                    "none" => CacheRules::None,
                    _ => return Err(invalid()),
                })
            }
            _ => return Err(invalid()),
        }
    }
    let input = input
        .or(base.as_ref().map(|b| b.input))
        .ok_or_else(invalid)?;
    let output = output
        .or(base.as_ref().map(|b| b.output))
        .ok_or_else(invalid)?;
    let rules = rules
        .or(base.as_ref().map(|b| b.rules))
        .unwrap_or(CacheRules::Anthropic);
    let base_same_input = base
        .as_ref()
        .filter(|b| b.input == input && b.rules == rules);
    let (default_read, default_write) = match (rules, base_same_input) {
        (_, Some(b)) => (b.cache_read, b.cache_write),
        (CacheRules::Anthropic, None) => (input * 0.1, input * 1.25),
        (
            CacheRules::OpenAi | CacheRules::OpenAiWrites | CacheRules::Google | CacheRules::None,
            None,
        ) => (input, input),
    };
    Ok(Pricing {
        model: base
            .as_ref()
            .map_or_else(|| model.to_string(), |b| b.model.clone()),
        priced_as: base
            .as_ref()
            .map_or_else(|| model.to_string(), |b| b.priced_as.clone()),
        rules,
        input,
        output,
        cache_read: read.unwrap_or(default_read),
        cache_write: write.unwrap_or(default_write),
        window: window
            .or(base.as_ref().map(|b| b.window))
            .unwrap_or(DEFAULT_WINDOW),
        known: true,
    })
}

/// Where a file's model came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// `--model` on the command line.
    Flag,
    /// The log's own session header.
    Log,
    /// Neither: the format's default model.
    Default,
}

/// The pricing of one log: `--model` when given (`flag`), else the model
/// the log names, else `default` (its format's, see
/// [`crate::import::Format::default_model`]); `--price` applies on top. A
/// model the log names that the table does not know gets
/// [`Pricing::unknown`] (unless `--price` gives its prices); an unknown
/// `--model` is an error.
pub fn for_log(
    flag: Option<&str>,
    logged: Option<&str>,
    default: &str,
    price: Option<&str>,
) -> Result<(Pricing, ModelSource), PriceError> {
    match (flag, logged) {
        (Some(model), _) => Ok((resolve(model, price)?, ModelSource::Flag)),
        (None, Some(model)) => {
            let pricing = match (lookup(model), price) {
                (base, Some(text)) => with_override(base, model, text)?,
                (Some(base), None) => base,
                (None, None) => Pricing::unknown(model),
            };
            Ok((pricing, ModelSource::Log))
        }
        (None, None) => Ok((resolve(default, price)?, ModelSource::Default)),
    }
}

/// The pricing for `model`, with an optional `--price` override.
pub fn resolve(model: &str, price: Option<&str>) -> Result<Pricing, PriceError> {
    let base = lookup(model);
    match price {
        Some(text) => with_override(base, model, text),
        None => base.ok_or_else(|| PriceError::UnknownModel(model.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_reads_what_its_rules_let_it_of_a_shared_prefix() {
        assert_eq!(CacheRules::Anthropic.readable(5000), 5000);
        assert_eq!(CacheRules::Anthropic.readable(1000), 0, "under 1,024");
        assert_eq!(CacheRules::OpenAi.readable(5000), 1024 + 31 * 128);
        assert_eq!(CacheRules::OpenAiWrites.readable(1024), 1024);
        assert_eq!(CacheRules::Google.readable(2000), 0, "under 2,048");
        assert_eq!(CacheRules::Google.readable(3000), 3000);
        assert_eq!(CacheRules::None.readable(5000), 0);
    }

    #[test]
    fn looks_up_by_longest_prefix() {
        let p = lookup("anthropic/claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(p.priced_as, "claude-sonnet-4-5");
        assert_eq!(p.model, "anthropic/claude-sonnet-4-5-20250929");
        assert_eq!(p.rules, CacheRules::Anthropic);
        assert!((p.cache_write - 3.75).abs() < 1e-12);
        assert!((p.cache_read - 0.3).abs() < 1e-12);
        assert_eq!(
            lookup("gpt-4o-mini-2024-07-18").unwrap().priced_as,
            "gpt-4o-mini"
        );
        assert_eq!(lookup("gpt-5-mini").unwrap().priced_as, "gpt-5-mini");
        assert_eq!(
            lookup("claude-3-7-sonnet-latest").unwrap().priced_as,
            "claude-3-7-sonnet"
        );
        assert!(lookup("llama-3").is_none());
        assert!(
            lookup("gpt-5-pro").is_none(),
            "a costlier variant is not gpt-5"
        );
        assert_eq!(
            lookup("gpt-5.1-codex-mini").unwrap().output,
            2.0,
            "priced as itself, not as gpt-5.1"
        );
        assert!(lookup("gpt-5.2-pro").is_none());
        assert!(lookup("o3-pro").is_none());
    }

    #[test]
    fn knows_the_2026_models() {
        let p = lookup("gpt-5.2-codex").unwrap();
        assert_eq!(
            (p.priced_as.as_str(), p.cache_read, p.cache_write),
            ("gpt-5.2", 0.175, 1.75)
        );
        assert_eq!(lookup("gpt-5.3-codex").unwrap().input, 1.75);
        assert_eq!(
            lookup("gpt-5.1-codex-max").unwrap().priced_as,
            "gpt-5.1-codex-max"
        );
        let p = lookup("gpt-5.4").unwrap();
        assert_eq!((p.input, p.output, p.window), (2.5, 15.0, 1_050_000));
        let p = lookup("gpt-5.6-sol").unwrap();
        assert_eq!(
            (p.rules, p.cache_read, p.cache_write),
            (CacheRules::OpenAiWrites, 0.5, 6.25)
        );
        let p = lookup("claude-opus-4-6-20260205").unwrap();
        assert_eq!(
            (p.priced_as.as_str(), p.input, p.cache_write),
            ("claude-opus-4-6", 5.0, 6.25)
        );
        assert_eq!(lookup("claude-sonnet-4-6").unwrap().output, 15.0);
        let p = lookup("google/gemini-3-pro-preview").unwrap();
        assert_eq!(
            (p.priced_as.as_str(), p.rules, p.cache_read, p.cache_write),
            ("gemini-3-pro", CacheRules::Google, 0.20, 2.0)
        );
        assert_eq!(
            lookup("gemini-2.5-pro-preview-06-05").unwrap().priced_as,
            "gemini-2.5-pro"
        );
        assert!(lookup("gemini-2.5-flash-lite").is_none());
        let p = resolve("x", Some("in=1,out=2,cache=google")).unwrap();
        assert_eq!(p.rules, CacheRules::Google);
    }

    #[test]
    fn costs_add_up() {
        let p = lookup("claude-sonnet-4-5").unwrap();
        let c = p.cost(1_000_000, 1_000_000, 1_000_000, 1_000_000);
        assert!((c - (3.0 + 0.3 + 3.75 + 15.0)).abs() < 1e-9);
    }

    #[test]
    fn overrides_and_errors() {
        let p = resolve("my-model", Some("in=1,out=2,cache=openai,read=0.5")).unwrap();
        assert_eq!(
            (p.input, p.output, p.cache_read, p.cache_write),
            (1.0, 2.0, 0.5, 1.0)
        );
        assert_eq!(p.rules, CacheRules::OpenAi);
        let p = resolve("claude-haiku-4-5", Some("out=6")).unwrap();
        assert_eq!((p.input, p.output), (1.0, 6.0));
        assert!((p.cache_write - 1.25).abs() < 1e-12);
        assert!(matches!(
            resolve("nope", None),
            Err(PriceError::UnknownModel(_))
        ));
        assert!(matches!(
            resolve("nope", Some("out=1")),
            Err(PriceError::Invalid(_))
        ));
        assert!(matches!(
            resolve("gpt-5", Some("in=-1")),
            Err(PriceError::Invalid(_))
        ));
        assert!(matches!(
            resolve("gpt-5", Some("bogus")),
            Err(PriceError::Invalid(_))
        ));
        assert!(
            resolve("nope", None)
                .unwrap_err()
                .to_string()
                .contains("claude-sonnet-4-5")
        );
    }

    #[test]
    fn a_log_is_priced_by_its_own_model() {
        let (p, from) = for_log(None, Some("gpt-5.1-codex"), DEFAULT_MODEL, None).unwrap();
        assert_eq!(
            (p.model.as_str(), p.priced_as.as_str(), from, p.known),
            ("gpt-5.1-codex", "gpt-5.1", ModelSource::Log, true)
        );
        assert_eq!(p.rules, CacheRules::OpenAi);
        let (p, from) =
            for_log(Some("claude-opus-4-5"), Some("gpt-5"), DEFAULT_MODEL, None).unwrap();
        assert_eq!(
            (p.model.as_str(), from),
            ("claude-opus-4-5", ModelSource::Flag)
        );
        let (p, from) = for_log(None, None, DEFAULT_MODEL, None).unwrap();
        assert_eq!(
            (p.model.as_str(), from),
            (DEFAULT_MODEL, ModelSource::Default)
        );
        let (p, from) = for_log(None, Some("gemini-4-neon"), DEFAULT_MODEL, None).unwrap();
        assert_eq!(from, ModelSource::Log);
        assert!(!p.known, "never priced as another model");
        assert_eq!(p.model, "gemini-4-neon");
        assert_eq!(p.cost(1000, 0, 0, 1000), 0.0);
        let (p, _) = for_log(
            None,
            Some("gemini-4-neon"),
            DEFAULT_MODEL,
            Some("in=3,out=15"),
        )
        .unwrap();
        assert!(p.known && p.input == 3.0);
        assert!(for_log(Some("mystery"), None, DEFAULT_MODEL, None).is_err());
    }
}
