//! `cwl proxy`: the command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use cwl::{Budget, EngineSettings, O200k, ResidueCap};
use cwl_session::strategy::StrategyName;
use cwl_session::{Settings, default_dir};

use crate::server::{
    DEFAULT_IDLE, DEFAULT_MAX_BODY, DEFAULT_MAX_CONVERSATIONS, Options, Proxy, serve,
};
use crate::side::DEFAULT_SIDE_TIMEOUT;
use crate::store::Store;
use crate::upstream::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_FIRST_BYTE_TIMEOUT, Upstream};

/// `cwl proxy` was called wrongly: the `cwl` binary exits with its usage
/// status.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    /// A usage error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        UsageError(message.into())
    }
}

/// Whether `error` says `cwl proxy` was called wrongly.
pub fn is_usage(error: &(dyn std::error::Error + 'static)) -> bool {
    error.is::<UsageError>()
}

/// The Anthropic API.
pub const ANTHROPIC_API: &str = "https://api.anthropic.com";
/// The OpenAI API.
pub const OPENAI_API: &str = "https://api.openai.com";

/// `cwl proxy`: keep any agent's conversations under a budget.
#[derive(Debug, Args)]
#[command(
    about = "A local proxy that keeps any agent's conversations under a token budget",
    long_about = "A local HTTP proxy between an agent and its provider. The agent keeps sending \
its whole history; the proxy keeps one CWL engine per conversation (episodes inferred from tool \
use), evicts past the budget and forwards the smaller request. Everything else in the request is \
sent as the client wrote it; responses (streamed or not) and errors are relayed as they come.\n\n\
Routes: POST /v1/messages (Anthropic Messages), POST /v1/chat/completions (OpenAI Chat \
Completions) and POST /v1/responses (OpenAI Responses, as Codex CLI sends it) go through the \
engine; GET /health answers 200; \
any other request (count_tokens, model lists) is forwarded unchanged. A body the proxy cannot \
read is forwarded unchanged with a warning.\n\n\
Point a client at it, e.g. Claude Code: ANTHROPIC_BASE_URL=http://127.0.0.1:8788 claude"
)]
pub struct ProxyArgs {
    /// Address to listen on (loopback by default: the proxy sees your API keys).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8788")]
    pub listen: SocketAddr,
    /// Where Anthropic requests go (scheme, host and optional path prefix).
    #[arg(long, value_name = "URL", default_value = ANTHROPIC_API)]
    pub anthropic_upstream: String,
    /// Where OpenAI requests go.
    #[arg(long, value_name = "URL", default_value = OPENAI_API)]
    pub openai_upstream: String,
    /// Token budget τ of every conversation's prompt (80000, 80k, 1.5M).
    #[arg(long, value_name = "TOKENS", default_value = "80k")]
    pub budget: Budget,
    /// The engine's eviction settings. Here `--residue-share` is off unless given, whatever
    /// the preset: with a share, the proxy adds a `recall` tool to requests that offer tools,
    /// so the model can bring folded items back; a client that offers none, or defines its
    /// own `recall`, could not.
    #[command(flatten)]
    pub engine: EngineSettings,
    /// What manages each conversation's context: `cwl` (inferred episodes, the paper's order),
    /// `cwm` (the context-window manager: lowest-scored blocks first past 75% of the budget) or
    /// `self-gc` (Self-GC: planner calls fold, mask and prune old results, and a budget backstop
    /// prunes the oldest tool results first; the proxy adds a `recall` tool that brings folded
    /// results back). Side calls go to the client's upstream with its own headers before its
    /// request is forwarded.
    #[arg(long, value_name = "NAME", default_value = "cwl")]
    pub strategy: StrategyName,
    /// One of the strategy's own settings, repeatable (`trigger=0.4` for
    /// self-gc, `zones.orange=0.7` for cwm; see `cwl run --help`).
    #[arg(long = "strategy-option", value_name = "KEY=VALUE")]
    pub strategy_options: Vec<String>,
    /// Where conversations are stored as sessions [default: the `cwl sessions` directory].
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Do not store conversations.
    #[arg(long, conflicts_with = "session_dir")]
    pub no_store: bool,
    /// Largest request body accepted, in bytes; a larger one gets a 413.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY)]
    pub max_body: usize,
    /// Seconds after which an unused conversation leaves memory (a later request that continues
    /// it rebuilds it from its session file, or starts afresh with --no-store).
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_IDLE.as_secs())]
    pub idle: u64,
    /// The most conversations held in memory; past it the least recently used leaves memory
    /// (a later request that continues it rebuilds it from its session file, or starts afresh
    /// with --no-store).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONVERSATIONS)]
    pub max_conversations: usize,
    /// The model the strategy's side calls ask (Self-GC's planner, cwm's summaries and notes)
    /// [default: the model of the client's request].
    #[arg(long, value_name = "NAME")]
    pub planner_model: Option<String>,
    /// Longest wait, in seconds, for one side call (a strategy asking for longer is cut here).
    /// After one stalls, the conversation's next requests skip side calls (one, then two,
    /// four...); once failed ones took three times this, it makes no more.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_SIDE_TIMEOUT.as_secs())]
    pub side_timeout: u64,
    /// Longest wait, in seconds, to connect to an upstream; past it the client gets a 504.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_CONNECT_TIMEOUT.as_secs())]
    pub connect_timeout: u64,
    /// Longest wait, in seconds, from a request sent upstream to its answer's start (a whole
    /// non-streamed answer may come first); past it the client gets a 504.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_FIRST_BYTE_TIMEOUT.as_secs())]
    pub first_byte_timeout: u64,
    /// The session directory is shared with other `cwl proxy` replicas behind one load
    /// balancer: a request whose conversation another replica served last is rebuilt from its
    /// session file, so any replica answers it as the other would have (see docs/proxy.md).
    #[arg(long, conflicts_with = "no_store")]
    pub shared_sessions: bool,
    /// Print one JSON line per request on stdout (conversation, tokens before/after, evicted episodes).
    #[arg(long)]
    pub json: bool,
}

impl ProxyArgs {
    /// The proxy's options from the command line.
    pub fn options(&self) -> anyhow::Result<Options> {
        let budget = match self.budget {
            Budget::Tokens(tokens) => tokens,
            Budget::Percent(_) => {
                return Err(UsageError::new(
                    "--budget must be a number of tokens here, not a share (the proxy serves many models)",
                )
                .into());
            }
        };
        for (flag, url) in [
            ("--anthropic-upstream", &self.anthropic_upstream),
            ("--openai-upstream", &self.openai_upstream),
        ] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(UsageError::new(format!(
                    "{flag} `{url}`: expected an http:// or https:// URL"
                ))
                .into());
            }
        }
        for (flag, secs) in [
            ("--connect-timeout", self.connect_timeout),
            ("--first-byte-timeout", self.first_byte_timeout),
        ] {
            if secs == 0 {
                return Err(UsageError::new(format!(
                    "{flag} must be at least 1 second (0 would fail every request)"
                ))
                .into());
            }
        }
        if self.max_conversations == 0 {
            return Err(UsageError::new(
                "--max-conversations must be at least 1 (0 would keep no conversation)",
            )
            .into());
        }
        if self.side_timeout == 0 {
            return Err(UsageError::new(
                "--side-timeout must be at least 1 second (0 would fail every side call)",
            )
            .into());
        }
        let engine = EngineSettings {
            residue_share: self.engine.residue_share.or(Some(ResidueCap(None))),
            ..self.engine
        };
        let config = engine.config(budget);
        let strategy_options = cwl_session::strategy::parse_pairs(&self.strategy_options)?;
        self.strategy.resolve(&strategy_options)?;
        let store = if self.no_store {
            None
        } else {
            let dir = match &self.session_dir {
                Some(dir) => dir.clone(),
                None => default_dir()?,
            };
            let settings = Settings {
                strategy: self.strategy,
                strategy_options: strategy_options.clone(),
                ..Settings::of(&config)
            };
            Some(Store::new(dir, settings, budget))
        };
        let heads = match &store {
            Some(store) if self.shared_sessions => {
                Some(crate::heads::Heads::open(store.dir()).with_context(|| {
                    format!(
                        "--shared-sessions: cannot make {}",
                        store.dir().join("heads").display()
                    )
                })?)
            }
            _ => None,
        };
        let events: Option<crate::event::Sink> = if self.json {
            Some(Box::new(|event| {
                if let Ok(line) = serde_json::to_string(event) {
                    println!("{line}");
                }
            }))
        } else {
            None
        };
        Ok(Options {
            anthropic: Upstream::new(&self.anthropic_upstream).with_timeouts(
                Duration::from_secs(self.connect_timeout),
                Duration::from_secs(self.first_byte_timeout),
            ),
            openai: Upstream::new(&self.openai_upstream).with_timeouts(
                Duration::from_secs(self.connect_timeout),
                Duration::from_secs(self.first_byte_timeout),
            ),
            config,
            strategy: self.strategy,
            strategy_options,
            store,
            max_body: self.max_body,
            idle: Duration::from_secs(self.idle),
            max_conversations: self.max_conversations,
            events,
            planner_model: self.planner_model.clone(),
            side_timeout: Duration::from_secs(self.side_timeout),
            heads,
        })
    }
}

/// Runs `cwl proxy` until interrupted (Ctrl-C or SIGTERM).
pub fn run_proxy(args: ProxyArgs) -> anyhow::Result<()> {
    let options = args.options()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let address = listener.local_addr()?;
        if let Some(store) = &options.store {
            remove_stale_pids(store.dir());
        }
        eprintln!(
            "cwl proxy: listening on http://{address} (strategy {}, budget {}; Anthropic → {}, OpenAI → {}; {})",
            options.strategy,
            options.config.budget,
            options.anthropic.shown(),
            options.openai.shown(),
            match &options.store {
                Some(store) => format!("sessions in {}", store.dir().display()),
                None => "not stored".to_string(),
            }
        );
        if !address.ip().is_loopback() {
            eprintln!(
                "cwl proxy: warning: {address} is not a loopback address; it accepts requests from anyone who can reach it"
            );
        }
        let proxy = Arc::new(Proxy::new(options, Arc::new(O200k::new()))?);
        tokio::select! {
            served = serve(listener, proxy) => served.context("the proxy stopped")?,
            _ = stop() => eprintln!("cwl proxy: stopping"),
        }
        Ok(())
    })
}

/// Removes the `.pid` files a crashed proxy left in the session
/// directory, saying how many; a directory it cannot read is only warned
/// about.
fn remove_stale_pids(dir: &std::path::Path) {
    match cwl_session::remove_stale_pids(dir) {
        Ok(removed) if !removed.is_empty() => eprintln!(
            "cwl proxy: removed {} stale .pid file(s) in {} (their writers are gone)",
            removed.len(),
            dir.display()
        ),
        Ok(_) => {}
        Err(error) => crate::event::warn(&format!(
            "stale .pid files in {} not checked: {error}",
            dir.display()
        )),
    }
}

/// Resolves on Ctrl-C or, on Unix, SIGTERM; the conversations' session
/// files are then closed as the runtime winds down.
async fn stop() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use cwl::{Config, Share};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        proxy: ProxyArgs,
    }

    fn options(args: &[&str]) -> anyhow::Result<Options> {
        let mut line = vec!["cwl-proxy", "--no-store"];
        line.extend_from_slice(args);
        Cli::try_parse_from(line)?.proxy.options()
    }

    #[test]
    fn side_call_flags_reach_the_options_and_a_zero_timeout_is_refused() {
        let set = options(&["--planner-model", "small", "--side-timeout", "7"]).unwrap();
        assert_eq!(set.planner_model.as_deref(), Some("small"));
        assert_eq!(set.side_timeout, Duration::from_secs(7));
        let defaults = options(&[]).unwrap();
        assert_eq!(defaults.planner_model, None);
        assert_eq!(defaults.side_timeout, DEFAULT_SIDE_TIMEOUT);
        let error = options(&["--side-timeout", "0"]).unwrap_err().to_string();
        assert!(error.contains("--side-timeout"), "{error}");
    }

    #[test]
    fn the_answer_cap_is_on_by_default_and_can_be_turned_off() {
        let defaults = options(&[]).unwrap();
        assert_eq!(defaults.config.answer_share, Config::default().answer_share);
        assert_eq!(
            defaults.config.residue_share, None,
            "no folding without a flag"
        );
        let off = options(&["--answer-share", "off"]).unwrap();
        assert_eq!(off.config.answer_share, None);
        let set = options(&["--answer-share", "25%"]).unwrap();
        assert_eq!(set.config.answer_share, Some(Share::new(0.25).unwrap()));
        let error = options(&["--answer-share", "lots"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("lots"), "{error}");
    }

    #[test]
    fn a_preset_applies_and_residues_stay_unfolded_unless_asked() {
        let paper = options(&["--preset", "paper"]).unwrap();
        assert_eq!(paper.config, Config::paper(80_000));
        let default = options(&["--preset", "default"]).unwrap();
        assert_eq!(default.config.residue_share, None);
        assert_eq!(default.config.low_water, Config::default().low_water);
        let folded = options(&["--preset", "paper", "--residue-share", "10%"]).unwrap();
        assert_eq!(folded.config.residue_share, Some(Share::new(0.1).unwrap()));
    }

    #[test]
    fn strategy_options_are_checked_against_the_strategy() {
        let set = options(&["--strategy", "self-gc", "--strategy-option", "trigger=0.4"]).unwrap();
        assert_eq!(set.strategy_options, serde_json::json!({"trigger": 0.4}));
        assert_eq!(
            options(&[]).unwrap().strategy_options,
            serde_json::Value::Null
        );
        let error = options(&["--strategy", "self-gc", "--strategy-option", "trigr=0.4"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("no option `trigr`"), "{error}");
        let error = options(&["--strategy-option", "trigger=0.4"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("cwl takes no strategy options"), "{error}");
    }
}
