//! From flags, config file and environment to a running [`Agent`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, bail};
use cwl::Budget;

use super::AgentArgs;
use crate::agent::{Agent, AgentOptions, DEFAULT_MAX_TURNS, Observer};
use crate::config::{self, FileConfig};
use crate::provider::{
    AnthropicConfig, AnthropicProvider, ModelTable, OpenAiConfig, OpenAiProvider, Provider,
    ProviderKind, anthropic,
};
use crate::render::{RenderOptions, Renderer, Summary};
use crate::secrets::Secrets;
use crate::session::{self, SessionInfo};
use crate::tools::{ToolConfig, Toolbox};

/// Default model per provider.
fn default_model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "gpt-5",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
    }
}

/// A started (or resumed) agent and its renderer.
pub(super) struct Started {
    pub(super) agent: Agent,
    pub(super) renderer: Arc<Mutex<Renderer>>,
}

impl Started {
    /// Prints the end-of-run summary.
    pub(super) fn summary(&self) {
        let path = self.agent.session_path();
        lock(&self.renderer).summary(&Summary {
            stats: self.agent.stats(),
            budget: self.agent.options().budget,
            session: &path,
        });
    }

    /// Prints a line on stderr (a JSON note with --json).
    pub(super) fn info(&self, text: &str) {
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
        None => Ok(session::default_dir()?),
    }
}

/// Builds the agent `args` describe: a new session, or the resumed one.
pub(super) fn start(args: &AgentArgs) -> anyhow::Result<Started> {
    let file = config::load(args.config.as_deref())?;
    let dir = session_dir(args.session_dir.clone(), &file)?;
    let resumed = match &args.resume {
        Some(name) => {
            let path = session::find(&dir, name)?;
            let info = session::read(&path)?.info;
            Some((path, info))
        }
        None => None,
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
    let budget = match (&args.budget, &file.budget, header) {
        (Some(budget), _, _) => *budget,
        (None, _, Some(h)) => Budget::Tokens(usize::try_from(h.budget).unwrap_or(usize::MAX)),
        (None, Some(text), None) => text
            .parse()
            .with_context(|| "config file: budget".to_string())?,
        (None, None, None) => Budget::Tokens(cwl::DEFAULT_BUDGET),
    };
    let window = usize::try_from(model.context_window).ok();
    let budget = budget.resolve(window)?;
    let cwd = match (&args.cwd, header) {
        (Some(cwd), _) => cwd.clone(),
        (None, Some(h)) if PathBuf::from(&h.cwd).is_dir() => PathBuf::from(&h.cwd),
        _ => std::env::current_dir().context("cannot read the current directory")?,
    };
    let toolbox = Toolbox::new(
        &cwd,
        ToolConfig {
            allow_outside_writes: args.allow_outside_writes,
            secrets: Secrets::from_process(&file.env_deny.clone().unwrap_or_default()),
            ..ToolConfig::default()
        },
    )?;
    let base_url = args.base_url.clone().or_else(|| {
        let configured: Option<ProviderKind> =
            file.provider.as_deref().and_then(|p| p.parse().ok());
        file.base_url
            .clone()
            .filter(|_| configured.is_none_or(|c| c == kind))
    });
    let idle_timeout = match (args.stream_idle_timeout, &file.stream_idle_timeout) {
        (Some(idle), _) => idle,
        (None, Some(text)) => config::parse_duration(text)
            .map_err(anyhow::Error::msg)
            .context("config file: stream_idle_timeout")?,
        (None, None) => crate::provider::DEFAULT_IDLE_TIMEOUT,
    };
    let provider = provider(kind, base_url, idle_timeout)?;
    let mut options = AgentOptions::new(model);
    options.budget = budget;
    options.max_turns = args
        .max_turns
        .or(file.max_turns)
        .unwrap_or(DEFAULT_MAX_TURNS);
    options.reasoning = args.reasoning;
    // A resumed session keeps its own settings unless a flag says otherwise.
    let from_file = header.is_none();
    options.low_water = setting(args.low_water, &file.low_water, from_file, "low_water")?;
    options.residue_share = setting(
        args.residue_share,
        &file.residue_share,
        from_file,
        "residue_share",
    )?;
    options.keep_recent = setting(
        args.keep_recent,
        &file.keep_recent,
        from_file,
        "keep_recent",
    )?;
    options.superseded = setting(args.superseded, &file.superseded, from_file, "superseded")?;
    options.act_outputs = setting(
        args.act_outputs,
        &file.act_outputs,
        from_file,
        "act_outputs",
    )?;
    if kind == ProviderKind::Anthropic {
        let thinking = args.reasoning.map_or(0, |r| r.thinking_budget());
        options.output_reserve = (anthropic::DEFAULT_MAX_TOKENS + thinking) as usize;
    }
    if options.max_turns == 0 {
        bail!("--max-turns must be at least 1");
    }
    let renderer = Arc::new(Mutex::new(Renderer::stdio(RenderOptions::detect(
        args.json,
    ))));
    let observer: Box<dyn Observer> = Box::new(Arc::clone(&renderer));
    let agent = match resumed {
        Some((path, _)) => Agent::resume(provider, toolbox, options, &path, observer)?,
        None => Agent::create(provider, toolbox, options, &dir, observer)?,
    };
    Ok(Started { agent, renderer })
}

/// The provider: flag, the resumed session's, config, else guessed from
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
        return name.parse().context("config file: provider");
    }
    let set = |var: &str| std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
    Ok(
        if set(anthropic::KEY_VAR) && !set(crate::provider::openai::KEY_VAR) {
            ProviderKind::Anthropic
        } else {
            ProviderKind::OpenAi
        },
    )
}

fn provider(
    kind: ProviderKind,
    base_url: Option<String>,
    idle_timeout: std::time::Duration,
) -> anyhow::Result<Box<dyn Provider>> {
    Ok(match kind {
        ProviderKind::OpenAi => {
            let mut config = OpenAiConfig::from_env().with_idle_timeout(idle_timeout);
            if let Some(url) = base_url {
                config.base_url = url;
            }
            Box::new(OpenAiProvider::new(config)?)
        }
        ProviderKind::Anthropic => {
            let mut config = AnthropicConfig::from_env().with_idle_timeout(idle_timeout);
            if let Some(url) = base_url {
                config.base_url = url;
            }
            Box::new(AnthropicProvider::new(config)?)
        }
    })
}

/// An eviction setting: the flag's value, else the config file's (only for
/// a new session: a resumed one keeps its own), else none.
fn setting<T>(
    flag: Option<T>,
    file: &Option<String>,
    from_file: bool,
    key: &str,
) -> anyhow::Result<Option<T>>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    match (flag, file) {
        (Some(value), _) => Ok(Some(value)),
        (None, Some(text)) if from_file => text
            .parse()
            .map(Some)
            .with_context(|| format!("config file: {key}")),
        _ => Ok(None),
    }
}
