//! From flags, config file and environment to a running [`Agent`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use cwl::{Budget, EngineSettings};

use super::AgentArgs;
use super::exit::UsageError;
use super::lines::StdinLines;
use crate::agent::{
    Agent, AgentOptions, ApprovalMode, Approver, DEFAULT_MAX_TURNS, Event, JsonApprover, Observer,
    TerminalApprover,
};
use crate::config::{self, FileConfig};
use crate::mcp::{self, McpServers};
use crate::render::{RenderOptions, Renderer, Summary};
use crate::tools::{Sandbox, ToolConfig, Toolbox, sandbox};
use cwl_provider::secrets::Secrets;
use cwl_provider::{
    AnthropicConfig, AnthropicProvider, ModelTable, OpenAiConfig, OpenAiProvider, Provider,
    ProviderError, ProviderKind, ResponsesConfig, ResponsesProvider, anthropic,
};
use cwl_session::SessionInfo;

/// Default model per provider.
pub(super) fn default_model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "gpt-5",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Responses => "gpt-5.1-codex",
    }
}

/// A started (or resumed) agent and its renderer.
pub struct Started {
    /// The agent, ready for its first task.
    pub agent: Agent,
    /// What prints the agent's events (lines or JSON).
    pub renderer: Arc<Mutex<Renderer>>,
    /// The MCP servers whose tools the agent offers (ended when dropped).
    pub(super) _mcp: McpServers,
    /// Whether requests go without an API key (none is set for the
    /// server given), so a refusal of the key is a missing key.
    pub(super) keyless: bool,
}

impl Started {
    /// Prints the end-of-run summary.
    pub fn summary(&self) {
        let path = self.agent.session_path();
        lock(&self.renderer).summary(&Summary {
            stats: self.agent.stats(),
            budget: self.agent.options().budget,
            session: &path,
        });
    }

    /// Prints a line on stderr (a JSON note with --json).
    pub fn info(&self, text: &str) {
        lock(&self.renderer).info(text);
    }
}

pub(super) fn lock(renderer: &Mutex<Renderer>) -> std::sync::MutexGuard<'_, Renderer> {
    renderer
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The session directory: flag, config, or the user data dir.
pub(super) fn session_dir(flag: Option<PathBuf>, file: &FileConfig) -> anyhow::Result<PathBuf> {
    match flag.or_else(|| file.session_dir.clone()) {
        Some(dir) => Ok(dir),
        None => Ok(cwl_session::default_dir()?),
    }
}

/// Builds the agent `args` describe: a new session, or the resumed one.
pub async fn start(args: &AgentArgs) -> anyhow::Result<Started> {
    let file = config::load(args.config.as_deref())?;
    let dir = session_dir(args.session_dir.clone(), &file)?;
    let resumed = match &args.resume {
        Some(name) => {
            let path = cwl_session::find(&dir, name)?;
            let info = cwl_session::read(&path)?.info;
            Some((path, info))
        }
        None => None,
    };
    let bootstrap = match (&args.bootstrap, &args.resume) {
        (None, _) => None,
        (Some(_), Some(_)) => {
            return Err(UsageError::new(
                "--bootstrap starts a new session from a checkpoint; it cannot be given with --resume",
            )
            .into());
        }
        (Some(path), None) => Some(checkpoint(path)?),
    };
    let header = resumed.as_ref().map(|(_, info)| info);
    let kind = provider_kind(args, &file, header)?;
    let model_name = args
        .model
        .clone()
        .or_else(|| header.map(|h| h.model.clone()))
        .or_else(|| file.model.clone())
        .unwrap_or_else(|| default_model(kind).to_string());
    let mut model = ModelTable::with_overrides(file.models.clone()).lookup(&model_name);
    model.name = model_name;
    let budget = budget(args, &file, header, &model)?;
    let max_turns = max_turns(args, &file)?;
    let cwd = match (&args.cwd, header) {
        (Some(cwd), _) => cwd.clone(),
        (None, Some(h)) if PathBuf::from(&h.cwd).is_dir() => PathBuf::from(&h.cwd),
        _ => std::env::current_dir().context("cannot read the current directory")?,
    };
    let (sandbox, sandbox_warning) = sandbox_mode(args, &file, &cwd)?;
    let mut toolbox = Toolbox::new(
        &cwd,
        ToolConfig {
            allow_outside_writes: args.allow_outside_writes,
            secrets: secrets(&file)?,
            sandbox,
            ..ToolConfig::default()
        },
    )?;
    let base_url = match &args.base_url {
        Some(url) => Some((url.clone(), "--base-url")),
        None => {
            let configured: Option<ProviderKind> =
                file.provider.as_deref().and_then(|p| p.parse().ok());
            file.base_url
                .clone()
                .filter(|_| configured.is_none_or(|c| c == kind))
                .map(|url| (url, "the config file's base_url"))
        }
    };
    let idle_timeout = match (args.stream_idle_timeout, &file.stream_idle_timeout) {
        (Some(idle), _) => idle,
        (None, Some(text)) => config_value(config::parse_duration(text), "stream_idle_timeout")?,
        (None, None) => cwl_provider::DEFAULT_IDLE_TIMEOUT,
    };
    let (provider, keyless) = provider(kind, base_url, idle_timeout)
        .map_err(|error| missing_key_hint(error, guessed(args, &file, header)))?;
    let mut options = options(args, &file, header, kind, model)?;
    options.budget = budget;
    options.max_turns = max_turns;
    options.side_timeout = match (args.side_timeout, &file.side_timeout) {
        (Some(cap), _) => cap,
        (None, Some(text)) => config_value(config::parse_duration(text), "side_timeout")?,
        (None, None) => cwl_provider::side::DEFAULT_SIDE_TIMEOUT,
    };
    // Last of the checks that can refuse the command: servers start only
    // for an agent that will run.
    mcp::check_unique(&file.mcp_servers)
        .map_err(|e| UsageError::new(format!("config file: {e}")))?;
    let mut mcp = McpServers::start(
        &file.mcp_servers,
        &toolbox.config().secrets,
        toolbox.root(),
        mcp::STARTUP_TIMEOUT,
    )
    .await;
    mcp.register(&mut toolbox);
    let renderer = Arc::new(Mutex::new(Renderer::stdio(RenderOptions::detect(
        args.json,
    ))));
    lock(&renderer).event(&Event::Sandbox {
        mode: sandbox.as_str().to_string(),
        warning: sandbox_warning,
    });
    if let Some(warning) = &keyless {
        lock(&renderer).info(warning);
    }
    for line in mcp.warnings().iter().cloned().chain(mcp.summary()) {
        lock(&renderer).info(&line);
    }
    let observer: Box<dyn Observer> = Box::new(Arc::clone(&renderer));
    let approval = approval_mode(args, &file)?;
    let mut agent = match resumed {
        Some((path, _)) => Agent::resume(provider, toolbox, options, &path, observer)?,
        None => Agent::create(provider, toolbox, options, &dir, observer)?,
    };
    if let Some((checkpoint, warnings)) = bootstrap {
        agent.bootstrap(&checkpoint, warnings)?;
    }
    if approval != ApprovalMode::Never {
        let lines = StdinLines::shared().reader();
        let approver: Box<dyn Approver> = if args.json {
            Box::new(JsonApprover::new(lines))
        } else {
            Box::new(TerminalApprover::new(lines, Box::new(std::io::stderr())))
        };
        agent.set_approval(approval, approver);
    }
    Ok(Started {
        agent,
        renderer,
        _mcp: mcp,
        keyless: keyless.is_some(),
    })
}

/// The checkpoint in file `path` for `--bootstrap`, validated, with its
/// warnings; a file that is missing or holds no usable checkpoint is a
/// usage error naming it (the file is only read).
fn checkpoint(path: &std::path::Path) -> anyhow::Result<(cwl_cwm::TaskCheckpoint, Vec<String>)> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        UsageError::new(format!(
            "cannot read the checkpoint {}: {error}",
            path.display()
        ))
    })?;
    cwl_cwm::TaskCheckpoint::parse(&text).map_err(|error| {
        UsageError::new(format!(
            "the checkpoint {} cannot start a window: {error}",
            path.display()
        ))
        .into()
    })
}

/// The environment child processes get and the values redacted: the
/// config file's `env_deny` (or the default) plus the MCP servers'
/// `bearer_token_env` variables withheld, and the MCP servers' own `env`
/// entries that `env_deny` matches redacted too.
fn secrets(file: &FileConfig) -> anyhow::Result<Secrets> {
    let deny = file.env_deny.clone().unwrap_or_default();
    let deny = deny
        .with_names(mcp::token_vars(&file.mcp_servers))
        .map_err(|e| UsageError::new(format!("config file: mcp_servers: {e}")))?;
    let configured: Vec<(String, String)> = mcp::secret_env(&file.mcp_servers, &deny).collect();
    let vars = std::env::vars_os().chain(
        configured
            .into_iter()
            .map(|(name, value)| (name.into(), value.into())),
    );
    Ok(Secrets::from_vars(vars, &deny))
}

/// Which tool calls ask first: the flag, else the config file's
/// `approval`, else on-mutate when stdin is a terminal and never when not.
pub(super) fn approval_mode(args: &AgentArgs, file: &FileConfig) -> anyhow::Result<ApprovalMode> {
    use std::io::IsTerminal as _;
    Ok(match (args.approval, &file.approval) {
        (Some(mode), _) => mode,
        (None, Some(text)) => config_value(text.parse::<ApprovalMode>(), "approval")?,
        (None, None) => ApprovalMode::default_for(std::io::stdin().is_terminal()),
    })
}

/// The bash sandbox: the flag's mode, else the config file's, else
/// workspace-write; checked against what the kernel enforces for `cwd`
/// (see [`sandbox::decide`]). Returns the mode to run with and a warning
/// to show.
fn sandbox_mode(
    args: &AgentArgs,
    file: &FileConfig,
    cwd: &std::path::Path,
) -> anyhow::Result<(Sandbox, Option<String>)> {
    let (mode, asked_by) = match (args.sandbox, &file.sandbox) {
        (Some(mode), _) => (mode, Some("--sandbox")),
        (None, Some(text)) => (
            config_value(text.parse::<Sandbox>(), "sandbox")?,
            Some("the config file's sandbox key"),
        ),
        (None, None) => (Sandbox::WorkspaceWrite, None),
    };
    if mode == Sandbox::Off || !cwd.is_dir() {
        // An unusable --cwd is reported by the toolbox.
        return Ok((mode, None));
    }
    let support = sandbox::probe(mode, cwd);
    Ok(sandbox::decide(mode, asked_by, &support).map_err(UsageError::new)?)
}

/// The provider: flag, the resumed session's, config, the Responses API
/// for a gpt-5 codex model named by flag or config, else guessed from
/// which API key is set.
fn provider_kind(
    args: &AgentArgs,
    file: &FileConfig,
    header: Option<&SessionInfo>,
) -> anyhow::Result<ProviderKind> {
    if let Some(kind) = args.provider {
        return Ok(kind);
    }
    if let Some(kind) = header.and_then(|h| h.provider.parse().ok()) {
        return Ok(kind);
    }
    if let Some(name) = &file.provider {
        return Ok(config_value(name.parse::<ProviderKind>(), "provider")?);
    }
    if args
        .model
        .as_deref()
        .or(file.model.as_deref())
        .is_some_and(speaks_responses_only)
    {
        return Ok(ProviderKind::Responses);
    }
    let set = |var: &str| std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
    Ok(
        if set(anthropic::KEY_VAR) && !set(cwl_provider::openai::KEY_VAR) {
            ProviderKind::Anthropic
        } else {
            ProviderKind::OpenAi
        },
    )
}

/// Whether OpenAI serves `model` through the Responses API alone: the
/// gpt-5 codex models (`gpt-5-codex`, `gpt-5.1-codex-max`,
/// `openai/gpt-5.2-codex`).
fn speaks_responses_only(model: &str) -> bool {
    let model = model.trim().to_ascii_lowercase();
    let model = model.strip_prefix("openai/").unwrap_or(&model);
    model.starts_with("gpt-5") && model.contains("-codex")
}

/// Whether no flag, session, config file or `CWL_PROVIDER` chose the
/// provider, so it was guessed from which API key is set.
fn guessed(args: &AgentArgs, file: &FileConfig, header: Option<&SessionInfo>) -> bool {
    args.provider.is_none()
        && header.is_none_or(|h| h.provider.parse::<ProviderKind>().is_err())
        && file.provider.is_none()
        && !args
            .model
            .as_deref()
            .or(file.model.as_deref())
            .is_some_and(speaks_responses_only)
}

/// The provider for `kind`; `base_url` (with where it was set) replaces
/// the one from the environment, and an invalid one is reported under the
/// name it was given by. With it, a warning when no key goes to that
/// server (one that needs none is allowed, but a user who forgot the key
/// should not learn it from a 401).
pub(super) fn provider(
    kind: ProviderKind,
    base_url: Option<(String, &'static str)>,
    idle_timeout: std::time::Duration,
) -> Result<(Box<dyn Provider>, Option<String>), ProviderError> {
    let source = base_url.as_ref().map(|(_, source)| *source);
    let url = base_url.map(|(url, _)| url);
    let built = match kind {
        ProviderKind::OpenAi => configured(OpenAiConfig::from_env(), url, idle_timeout, |c| {
            Ok(Box::new(OpenAiProvider::new(c)?))
        }),
        ProviderKind::Responses => {
            configured(ResponsesConfig::from_env(), url, idle_timeout, |c| {
                Ok(Box::new(ResponsesProvider::new(c)?))
            })
        }
        ProviderKind::Anthropic => {
            configured(AnthropicConfig::from_env(), url, idle_timeout, |c| {
                Ok(Box::new(AnthropicProvider::new(c)?))
            })
        }
    };
    built.map_err(|error| match (error, source) {
        (ProviderError::InvalidBaseUrl { url, reason, .. }, Some(var)) => {
            ProviderError::InvalidBaseUrl { var, url, reason }
        }
        (error, _) => error,
    })
}

/// Builds a provider from its API's configuration.
type Make<A> = fn(cwl_provider::ApiConfig<A>) -> Result<Box<dyn Provider>, ProviderError>;

/// The provider `make` builds from `config` with `url` in place of its
/// base URL, and the warning when it sends no key.
fn configured<A: cwl_provider::Api>(
    config: cwl_provider::ApiConfig<A>,
    url: Option<String>,
    idle_timeout: std::time::Duration,
    make: Make<A>,
) -> Result<(Box<dyn Provider>, Option<String>), ProviderError> {
    let mut config = config.with_idle_timeout(idle_timeout);
    if let Some(url) = url {
        config.base_url = url;
    }
    let warning = config
        .api_key
        .as_deref()
        .is_none_or(|key| key.trim().is_empty())
        .then(|| {
            format!(
                "no {} is set: requests to {} carry no API key",
                A::KEY_VAR,
                config.base_url
            )
        });
    make(config).map(|provider| (provider, warning))
}

/// A missing key when the provider was only guessed: the user may want the
/// other API, so the message names both keys and `--provider`.
fn missing_key_hint(error: ProviderError, guessed: bool) -> anyhow::Error {
    match error {
        ProviderError::MissingKey { var, url, .. } if guessed => UsageError::new(format!(
            "no API key: {url} needs {var}. Set {} to use Anthropic or {} to use OpenAI \
             (or choose with --provider), or give --base-url of a server that needs none",
            anthropic::KEY_VAR,
            cwl_provider::openai::KEY_VAR
        ))
        .into(),
        error => error.into(),
    }
}

/// A config file value parsed, or a usage error naming its key.
fn config_value<T, E: std::fmt::Display>(parsed: Result<T, E>, key: &str) -> Result<T, UsageError> {
    parsed.map_err(|error| UsageError::new(format!("config file: {key}: {error}")))
}

/// The budget in tokens: the flag's, else the resumed session's, else the
/// config file's, else the default; a share resolved against `model`'s
/// window.
fn budget(
    args: &AgentArgs,
    file: &FileConfig,
    header: Option<&SessionInfo>,
    model: &cwl_provider::ModelInfo,
) -> anyhow::Result<usize> {
    let budget = match (&args.budget, &file.budget, header) {
        (Some(budget), _, _) => *budget,
        (None, _, Some(h)) => Budget::Tokens(usize::try_from(h.budget).unwrap_or(usize::MAX)),
        (None, Some(text), None) => config_value(text.parse::<Budget>(), "budget")?,
        (None, None, None) => Budget::Tokens(cwl::DEFAULT_BUDGET),
    };
    let window = usize::try_from(model.context_window).ok();
    Ok(budget
        .resolve(window)
        .map_err(|error| UsageError::new(error.to_string()))?)
}

/// Model calls a task may take: the flag's, else the config file's, else
/// the default; zero is refused.
fn max_turns(args: &AgentArgs, file: &FileConfig) -> Result<usize, UsageError> {
    match (args.max_turns, file.max_turns) {
        (Some(0), _) => Err(UsageError::new("--max-turns must be at least 1")),
        (None, Some(0)) => Err(UsageError::new("config file: max_turns must be at least 1")),
        (flag, file) => Ok(flag.or(file).unwrap_or(DEFAULT_MAX_TURNS)),
    }
}

/// The agent's options for `model` but its budget, turns and side
/// timeout: eviction settings and strategy given by flags over the config
/// file's (a resumed session keeps its own unless a flag says otherwise),
/// the planner model and the answer's reserve.
fn options(
    args: &AgentArgs,
    file: &FileConfig,
    header: Option<&SessionInfo>,
    kind: ProviderKind,
    model: cwl_provider::ModelInfo,
) -> anyhow::Result<AgentOptions> {
    let from_file = header.is_none();
    let mut options = AgentOptions::new(model);
    options.reasoning = args.reasoning;
    options.engine = if from_file {
        args.engine.over(file_engine(file)?)
    } else {
        args.engine
    };
    options.strategy = match (args.strategy, &file.strategy) {
        (Some(strategy), _) => Some(strategy),
        (None, Some(text)) if from_file => Some(config_value(text.parse(), "strategy")?),
        _ => None,
    };
    options.strategy_options = if !args.strategy_options.is_empty() {
        Some(
            cwl_session::strategy::parse_pairs(&args.strategy_options)
                .map_err(|e| UsageError::new(e.to_string()))?,
        )
    } else if from_file {
        file.strategy_options.clone()
    } else {
        None
    };
    if let Some(given) = &options.strategy_options
        && (from_file || options.strategy.is_some())
    {
        options
            .strategy
            .unwrap_or_default()
            .resolve(given)
            .map_err(|e| UsageError::new(e.to_string()))?;
    }
    // Not a session setting: a resumed session takes the file's too.
    options.planner_model = args
        .planner_model
        .clone()
        .or_else(|| file.planner_model.clone());
    if kind == ProviderKind::Anthropic {
        let thinking = args.reasoning.map_or(0, |r| r.thinking_budget());
        options.output_reserve = (anthropic::DEFAULT_MAX_TOKENS + thinking) as usize;
    }
    Ok(options)
}

/// The config file's eviction settings, each one parsed or a usage error
/// naming its key.
fn file_engine(file: &FileConfig) -> Result<EngineSettings, UsageError> {
    fn parse<T>(text: &Option<String>, key: &str) -> Result<Option<T>, UsageError>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        text.as_deref()
            .map(|text| config_value(text.parse(), key))
            .transpose()
    }
    Ok(EngineSettings {
        preset: parse(&file.preset, "preset")?,
        low_water: parse(&file.low_water, "low_water")?,
        residue_share: parse(&file.residue_share, "residue_share")?,
        keep_recent: parse(&file.keep_recent, "keep_recent")?,
        superseded: parse(&file.superseded, "superseded")?,
        restated: parse(&file.restated, "restated")?,
        answer_share: parse(&file.answer_share, "answer_share")?,
        act_outputs: parse(&file.act_outputs, "act_outputs")?,
        plans: parse(&file.plans, "plans")?,
    })
}
