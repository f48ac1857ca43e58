//! Prices and provider caching rules, so a replay can say what each
//! policy's requests would have cost.
//!
//! List prices come from the one model table the agent and the proxy also
//! read ([`cwl_provider::models`]); `--price` overrides any row.

use cwl_provider::models::ModelTable;

pub use cwl_provider::models::CacheRules;

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

/// The known model names, for help texts.
pub fn known_models() -> Vec<&'static str> {
    cwl_provider::models::builtin_names()
}

/// The price of `model` in the one model table ([`cwl_provider::models`]):
/// `anthropic/claude-sonnet-4-5-20250929` finds `claude-sonnet-4-5`, while
/// `gpt-5-pro` or `gpt-5.2-pro`, priced differently, are unknown rather
/// than priced as `gpt-5` (see [`ModelTable::find`]).
pub fn lookup(model: &str) -> Option<Pricing> {
    let table = ModelTable::builtin();
    let row = table.find(model)?;
    let input = row.input_price?;
    let rules = row.cache_rules.unwrap_or(CacheRules::None);
    Some(Pricing {
        model: model.to_string(),
        priced_as: row.name.clone(),
        rules,
        input,
        output: row.output_price?,
        cache_read: row.cached_input_price.unwrap_or(input),
        cache_write: row.cache_write_price.unwrap_or(input),
        window: usize::try_from(row.context_window).unwrap_or(usize::MAX),
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
