//! The optional config file: defaults for the command line and model table
//! entries.
//!
//! Read from `--config FILE` (or `CWL_CONFIG`), else from
//! `<config dir>/cwl/config.toml` (`~/.config/cwl/config.toml` on Linux)
//! when it exists. Every key is optional; command-line flags win.
//!
//! ```toml
//! provider = "anthropic"          # or "openai"
//! model = "claude-sonnet-4-5"
//! base_url = "http://localhost:8080/v1"   # for the configured provider
//! budget = "80k"                  # tokens, 80k, 1.5M or 50% of the window
//! session_dir = "/home/me/cwl-sessions"
//! max_turns = 200
//! preset = "default"              # eviction settings to start from: "default" or "paper"
//! low_water = "80%"               # where an eviction pass stops (share of budget)
//! residue_share = "15%"           # room for residues and old user turns, or "off"
//! keep_recent = "10%"             # recent work evicted last, or "off"
//! superseded = "50%"              # repeated old content evicted first, or "off"
//! restated = "100%"               # tool outputs a later one repeats stubbed first, or "off"
//! answer_share = "15%"            # room for answers between episodes, or "off"
//! act_outputs = "stub"            # old acts reduced to their calls first, or "keep"
//! plans = "drop"                  # a plan tool's earlier calls go first, or "keep"
//! strategy = "cwl"                # what manages the context: "cwl", "cwm" or "self-gc"
//! planner_model = "gpt-4o-mini"   # the model of side calls (Self-GC's planner)
//! strategy_options = { trigger = 0.4 }  # the strategy's own settings (see --strategy-option)
//! env_deny = ["*_API_KEY", "*_TOKEN", "*SECRET*"]  # variables `bash` does not get
//! stream_idle_timeout = "90s"     # a model stream silent this long is retried
//! side_timeout = "20s"            # the longest one side call (a plan, a summary) waits
//! approval = "on-mutate"          # or "never", "always": which tool calls ask first
//! sandbox = "workspace-write"     # what bash may write: off, workspace-write, read-only
//!
//! [[models]]                      # add or replace model table entries
//! name = "qwen3-coder"
//! context_window = 262144
//! max_output_tokens = 32768
//! input_price = 0.30              # US dollars per million tokens
//! output_price = 1.20
//!
//! [[mcp_servers]]                 # tools from MCP servers (see crate::mcp)
//! name = "fs"                     # tools are offered as fs__<tool>
//! command = "npx"                 # a stdio server; or url = "http://…/mcp"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
//! ```
//!
//! API keys are not read from this file: they come from the environment
//! (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`) only. Child processes never get
//! them, nor the variables `env_deny` names (see [`cwl_provider::secrets`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::mcp::McpServerConfig;
use cwl_provider::ModelInfo;
use cwl_provider::secrets::EnvDeny;

/// The config file's contents.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Default provider (`openai` or `anthropic`).
    pub provider: Option<String>,
    /// Default model.
    pub model: Option<String>,
    /// Base URL for the configured provider (a flag or the provider's
    /// environment variable overrides it).
    pub base_url: Option<String>,
    /// Default budget (`80000`, `80k`, `50%`).
    pub budget: Option<String>,
    /// Where sessions are stored.
    pub session_dir: Option<PathBuf>,
    /// Model calls a task may take.
    pub max_turns: Option<usize>,
    /// Where the eviction settings start (`default` or `paper`).
    pub preset: Option<String>,
    /// Low-water mark (`0.8`, `80%`).
    pub low_water: Option<String>,
    /// Residue cap (`0.15`, `15%`, `off`).
    pub residue_share: Option<String>,
    /// Recent working set (`0.1`, `10%`, `off`).
    pub keep_recent: Option<String>,
    /// Superseded share (`0.5`, `50%`, `off`).
    pub superseded: Option<String>,
    /// Restated share (`1`, `100%`, `off`).
    pub restated: Option<String>,
    /// Answer cap (`0.15`, `15%`, `off`).
    pub answer_share: Option<String>,
    /// Old acts' outputs first (`stub` or `keep`).
    pub act_outputs: Option<String>,
    /// A plan tool's earlier calls first (`drop` or `keep`).
    pub plans: Option<String>,
    /// What manages the context (`cwl`, `cwm` or `self-gc`).
    pub strategy: Option<String>,
    /// The model of the strategy's side calls (Self-GC's planner).
    pub planner_model: Option<String>,
    /// The strategy's own settings (`[strategy_options]`; see
    /// `--strategy-option`).
    pub strategy_options: Option<serde_json::Value>,
    /// Name patterns of environment variables withheld from child
    /// processes and redacted (`None`: [`cwl_provider::secrets::DEFAULT_ENV_DENY`]).
    pub env_deny: Option<EnvDeny>,
    /// How long a model stream may stay silent before it counts as a lost
    /// connection and is retried (`90s`, `500ms`, `2m`; a bare number is
    /// seconds, as a TOML number too).
    #[serde(default, deserialize_with = "duration_text")]
    pub stream_idle_timeout: Option<String>,
    /// The longest one of the strategy's side calls may wait (`20s`; as
    /// `stream_idle_timeout`).
    #[serde(default, deserialize_with = "duration_text")]
    pub side_timeout: Option<String>,
    /// Which tool calls ask for approval (`never`, `on-mutate`, `always`;
    /// `None`: on-mutate when stdin is a terminal, else never).
    pub approval: Option<String>,
    /// What `bash` commands may write: `off`, `workspace-write` or
    /// `read-only` (see [`crate::tools::sandbox`]).
    pub sandbox: Option<String>,
    /// Model table entries; each replaces the built-in entry of that name.
    #[serde(default)]
    pub models: Vec<ModelInfo>,
    /// MCP servers whose tools the agent offers (see [`crate::mcp`]).
    #[serde(default)]
    pub mcp_servers: Vec<McpServerConfig>,
}

/// A config file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the line and key).
        message: String,
    },
}

/// The default config file: `<config dir>/cwl/config.toml`.
pub fn default_path() -> Option<PathBuf> {
    dirs::config_dir().map(|dir| dir.join("cwl").join("config.toml"))
}

/// Loads `explicit` (which must exist), else the default file if there is
/// one, else an empty config.
pub fn load(explicit: Option<&Path>) -> Result<FileConfig, ConfigError> {
    let path = match explicit {
        Some(path) => path.to_owned(),
        None => match default_path() {
            Some(path) if path.is_file() => path,
            _ => return Ok(FileConfig::default()),
        },
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
        path: path.clone(),
        source,
    })?;
    parse(&text).map_err(|message| ConfigError::Parse { path, message })
}

/// Parses config text.
pub fn parse(text: &str) -> Result<FileConfig, String> {
    toml::from_str(text).map_err(|e| e.to_string().trim().to_string())
}

/// Reads a duration given as a string (`"90s"`) or a number of seconds
/// (`90`, `0.5`) as text for [`parse_duration`].
pub(crate) fn duration_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Text(String),
        Whole(i64),
        Seconds(f64),
    }
    Ok(Some(
        match Given::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected a duration such as \"90s\", \"500ms\" or a number of seconds",
            )
        })? {
            Given::Text(text) => text,
            Given::Whole(n) => n.to_string(),
            Given::Seconds(x) => x.to_string(),
        },
    ))
}

/// Parses a duration: a number of seconds (`90`, `1.5`) or a number with
/// the unit `ms`, `s` or `m` (`200ms`, `90s`, `2m`). It must be positive.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let (number, scale) = if let Some(n) = trimmed.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = trimmed.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = trimmed.strip_suffix('m') {
        (n, 60.0)
    } else {
        (trimmed, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| {
        format!(
            "expected a duration such as 90s, 500ms or 2m (a bare number is seconds), not {text:?}"
        )
    })?;
    match Duration::try_from_secs_f64(value * scale) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(format!("the duration must be positive, not {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_timeout_may_be_a_number_of_seconds() {
        let seconds = |text: &str| parse(text).unwrap().stream_idle_timeout;
        assert_eq!(seconds("stream_idle_timeout = 90"), Some("90".into()));
        assert_eq!(seconds("stream_idle_timeout = 0.5"), Some("0.5".into()));
        assert_eq!(seconds("stream_idle_timeout = \"2m\""), Some("2m".into()));
        let error = parse("stream_idle_timeout = [1]").unwrap_err();
        assert!(error.contains("stream_idle_timeout"), "{error}");
        assert!(error.contains("expected a duration"), "{error}");
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 90s "), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
        for bad in ["", "soon", "0", "-5s", "90h", "NaN"] {
            let error = parse_duration(bad).unwrap_err();
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
    }

    #[test]
    fn parses_every_key() {
        let config = parse(
            r#"
provider = "anthropic"
model = "claude-sonnet-4-5"
base_url = "http://localhost:1/v1"
budget = "50%"
session_dir = "/tmp/s"
max_turns = 12
low_water = "60%"
residue_share = "off"
stream_idle_timeout = "45s"
side_timeout = "15s"
sandbox = "read-only"

[[models]]
name = "local-model"
context_window = 32000
input_price = 0.5
output_price = 1.5
"#,
        )
        .unwrap();
        assert_eq!(config.provider.as_deref(), Some("anthropic"));
        assert_eq!(config.budget.as_deref(), Some("50%"));
        assert_eq!(config.max_turns, Some(12));
        assert_eq!(config.low_water.as_deref(), Some("60%"));
        assert_eq!(config.residue_share.as_deref(), Some("off"));
        assert_eq!(config.stream_idle_timeout.as_deref(), Some("45s"));
        assert_eq!(config.side_timeout.as_deref(), Some("15s"));
        assert_eq!(config.sandbox.as_deref(), Some("read-only"));
        assert_eq!(config.models.len(), 1);
        assert_eq!(config.models[0].context_window, 32_000);
        assert_eq!(config.models[0].input_price, Some(0.5));
    }

    #[test]
    fn rejects_unknown_keys_and_bad_files() {
        let error = parse("modle = \"x\"").unwrap_err();
        assert!(error.contains("modle"), "{error}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "budget = [").unwrap();
        let error = load(Some(&path)).unwrap_err().to_string();
        assert!(error.contains("c.toml"), "{error}");
        assert!(matches!(
            load(Some(&dir.path().join("missing.toml"))),
            Err(ConfigError::Read { .. })
        ));
        assert_eq!(parse("").unwrap(), FileConfig::default());
    }

    #[test]
    fn env_deny_patterns_are_checked_when_read() {
        let config = parse(r#"env_deny = ["PGPASSWORD", "*_key"]"#).unwrap();
        let deny = config.env_deny.unwrap();
        assert!(deny.matches("PGPASSWORD") && deny.matches("ssh_key"));
        assert!(
            !deny.matches("GITHUB_TOKEN"),
            "the list replaces the default"
        );
        assert_eq!(parse("").unwrap().env_deny, None);
        let error = parse("max_turns = 3\nenv_deny = [\"*_TOKEN\", \"A?B\"]").unwrap_err();
        assert!(error.contains("line 2"), "{error}");
        assert!(error.contains(r#"env_deny pattern "A?B""#), "{error}");
        assert!(error.contains("`*` is the only wildcard"), "{error}");
        let error = parse(r#"env_deny = "*_TOKEN""#).unwrap_err();
        assert!(error.contains("env_deny"), "{error}");
    }
}
