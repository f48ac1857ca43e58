//! Prices and provider caching rules, so a replay can say what each
//! policy's requests would have cost.
//!
//! A small table of list prices in US dollars per million tokens, as
//! published on the providers' pricing pages (2025). The agent crate has
//! its own table; the lab keeps this one so it does not depend on the
//! agent. `--price` overrides any row.

use std::fmt;

/// How a provider caches prompt prefixes and bills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheRules {
    /// Anthropic prompt caching: a write costs 1.25× input, a read 0.1×;
    /// entries live 5 minutes after their last use; prefixes under 1,024
    /// tokens are not cached. The replay assumes a cache breakpoint at the
    /// end of every request, so the longest common prefix is readable.
    Anthropic,
    /// OpenAI automatic caching: prefixes of at least 1,024 tokens are
    /// read at the model's cached-input price in 128-token steps, with no
    /// write surcharge; entries are taken to live 5 minutes (the low end of
    /// the documented 5–10 minutes of inactivity).
    OpenAi,
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
        1024
    }

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CacheRules::Anthropic => "anthropic",
            CacheRules::OpenAi => "openai",
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
    /// The model's name.
    pub model: String,
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

/// The model used when neither `--model` nor the log names one.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

/// Context window assumed for a model the table does not know.
pub const DEFAULT_WINDOW: usize = 200_000;

/// (name prefix, rules, input, output, cached input, window)
const TABLE: &[(&str, CacheRules, f64, f64, f64, usize)] = &[
    (
        "claude-opus-4-5",
        CacheRules::Anthropic,
        5.0,
        25.0,
        0.0,
        200_000,
    ),
    (
        "claude-opus-4-1",
        CacheRules::Anthropic,
        15.0,
        75.0,
        0.0,
        200_000,
    ),
    (
        "claude-opus-4",
        CacheRules::Anthropic,
        15.0,
        75.0,
        0.0,
        200_000,
    ),
    (
        "claude-sonnet-4-5",
        CacheRules::Anthropic,
        3.0,
        15.0,
        0.0,
        200_000,
    ),
    (
        "claude-sonnet-4",
        CacheRules::Anthropic,
        3.0,
        15.0,
        0.0,
        200_000,
    ),
    (
        "claude-3-7-sonnet",
        CacheRules::Anthropic,
        3.0,
        15.0,
        0.0,
        200_000,
    ),
    (
        "claude-haiku-4-5",
        CacheRules::Anthropic,
        1.0,
        5.0,
        0.0,
        200_000,
    ),
    (
        "claude-3-5-haiku",
        CacheRules::Anthropic,
        0.8,
        4.0,
        0.0,
        200_000,
    ),
    ("gpt-5.1", CacheRules::OpenAi, 1.25, 10.0, 0.125, 400_000),
    ("gpt-5-mini", CacheRules::OpenAi, 0.25, 2.0, 0.025, 400_000),
    ("gpt-5-nano", CacheRules::OpenAi, 0.05, 0.40, 0.005, 400_000),
    ("gpt-5", CacheRules::OpenAi, 1.25, 10.0, 0.125, 400_000),
    (
        "gpt-4.1-mini",
        CacheRules::OpenAi,
        0.40,
        1.60,
        0.10,
        1_047_576,
    ),
    ("gpt-4.1", CacheRules::OpenAi, 2.0, 8.0, 0.50, 1_047_576),
    (
        "gpt-4o-mini",
        CacheRules::OpenAi,
        0.15,
        0.60,
        0.075,
        128_000,
    ),
    ("gpt-4o", CacheRules::OpenAi, 2.50, 10.0, 1.25, 128_000),
    ("o4-mini", CacheRules::OpenAi, 1.10, 4.40, 0.275, 200_000),
    ("o3", CacheRules::OpenAi, 2.0, 8.0, 0.50, 200_000),
];

/// The known model names, for help texts.
pub fn known_models() -> Vec<&'static str> {
    TABLE.iter().map(|row| row.0).collect()
}

/// The price of `model`: the longest table name it starts with, after any
/// `provider/` prefix, when what follows is only a release date, `-latest`
/// or `-codex` (same list price): `anthropic/claude-sonnet-4-5-20250929`
/// finds `claude-sonnet-4-5`, while `gpt-5-pro` or `gpt-5.1-codex-mini`,
/// priced differently, are unknown rather than priced as `gpt-5`.
pub fn lookup(model: &str) -> Option<Pricing> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let same_model = |rest: &str| {
        rest.is_empty()
            || rest == "-latest"
            || rest == "-codex"
            || (rest.starts_with('-') && rest[1..].chars().all(|c| c.is_ascii_digit() || c == '-'))
    };
    let row = TABLE
        .iter()
        .filter(|row| name.strip_prefix(row.0).is_some_and(same_model))
        .max_by_key(|row| row.0.len())?;
    let (prefix, rules, input, output, cached, window) = *row;
    let (cache_read, cache_write) = match rules {
        CacheRules::Anthropic => (input * 0.1, input * 1.25),
        CacheRules::OpenAi => (cached, input),
        CacheRules::None => (input, input),
    };
    Some(Pricing {
        model: prefix.to_string(),
        rules,
        input,
        output,
        cache_read,
        cache_write,
        window,
        known: true,
    })
}

/// A `--price` text that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// Malformed.
    #[error(
        "invalid --price `{0}`: expected comma-separated KEY=VALUE in US dollars per million tokens, keys in, out, read, write, window, cache (anthropic|openai|none), e.g. `in=3,out=15,cache=anthropic`"
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
        (CacheRules::OpenAi | CacheRules::None, None) => (input, input),
    };
    Ok(Pricing {
        model: base
            .as_ref()
            .map_or_else(|| model.to_string(), |b| b.model.clone()),
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
    /// Neither: [`DEFAULT_MODEL`].
    Default,
}

/// The pricing of one log: `--model` when given (`flag`), else the model
/// the log names, else [`DEFAULT_MODEL`]; `--price` applies on top. A
/// model the log names that the table does not know gets
/// [`Pricing::unknown`] (unless `--price` gives its prices); an unknown
/// `--model` is an error.
pub fn for_log(
    flag: Option<&str>,
    logged: Option<&str>,
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
        (None, None) => Ok((resolve(DEFAULT_MODEL, price)?, ModelSource::Default)),
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
    fn looks_up_by_longest_prefix() {
        let p = lookup("anthropic/claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(p.model, "claude-sonnet-4-5");
        assert_eq!(p.rules, CacheRules::Anthropic);
        assert!((p.cache_write - 3.75).abs() < 1e-12);
        assert!((p.cache_read - 0.3).abs() < 1e-12);
        assert_eq!(
            lookup("gpt-4o-mini-2024-07-18").unwrap().model,
            "gpt-4o-mini"
        );
        assert_eq!(lookup("gpt-5-mini").unwrap().model, "gpt-5-mini");
        assert_eq!(
            lookup("claude-3-7-sonnet-latest").unwrap().model,
            "claude-3-7-sonnet"
        );
        assert!(lookup("llama-3").is_none());
        assert!(
            lookup("gpt-5-pro").is_none(),
            "a costlier variant is not gpt-5"
        );
        assert!(lookup("gpt-5.1-codex-mini").is_none());
        assert!(lookup("o3-pro").is_none());
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
        let (p, from) = for_log(None, Some("gpt-5.1-codex"), None).unwrap();
        assert_eq!(
            (p.model.as_str(), from, p.known),
            ("gpt-5.1", ModelSource::Log, true)
        );
        assert_eq!(p.rules, CacheRules::OpenAi);
        let (p, from) = for_log(Some("claude-opus-4-5"), Some("gpt-5"), None).unwrap();
        assert_eq!(
            (p.model.as_str(), from),
            ("claude-opus-4-5", ModelSource::Flag)
        );
        let (p, from) = for_log(None, None, None).unwrap();
        assert_eq!(
            (p.model.as_str(), from),
            (DEFAULT_MODEL, ModelSource::Default)
        );
        let (p, from) = for_log(None, Some("gemini-3-pro-preview"), None).unwrap();
        assert_eq!(from, ModelSource::Log);
        assert!(!p.known, "never priced as another model");
        assert_eq!(p.model, "gemini-3-pro-preview");
        assert_eq!(p.cost(1000, 0, 0, 1000), 0.0);
        let (p, _) = for_log(None, Some("gemini-3-pro-preview"), Some("in=2,out=12")).unwrap();
        assert!(p.known && p.input == 2.0);
        assert!(for_log(Some("mystery"), None, None).is_err());
    }
}
