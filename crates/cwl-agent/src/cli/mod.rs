//! The agent's commands for the `cwl` binary: argument structs (clap) and
//! one `run_*` function per command. Each function builds its own tokio
//! runtime, so the binary calls them from plain `main`.
//!
//! | command        | args             | function         |
//! |----------------|------------------|------------------|
//! | `cwl run`      | [`RunArgs`]      | [`run_run`]      |
//! | `cwl chat`     | [`ChatArgs`]     | [`run_chat`]     |
//! | `cwl sessions` | [`SessionsArgs`] | [`run_sessions`] |
//! | `cwl demo`     | [`DemoArgs`]     | [`run_demo`]     |

pub mod advice;
mod bench;
mod chat;
mod exit;
mod lines;
mod run;
mod sessions;
pub mod setup;
mod signals;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use cwl::Budget;

use crate::agent::ApprovalMode;
use crate::tools::Sandbox;
use cwl_provider::{ProviderKind, ReasoningEffort};

pub use bench::{BenchArgs, run_bench};
pub use exit::{RUNTIME, USAGE, UsageError, error_line, exit_code, is_usage};
pub use signals::EXIT_INTERRUPTED;

/// Options shared by `cwl run` and `cwl chat`: model, budget, workspace,
/// session.
#[derive(Debug, Clone, Default, Args)]
pub struct AgentArgs {
    /// Model API: `openai` (Chat Completions and compatible servers),
    /// `responses` (OpenAI Responses, which serves the gpt-5.x-codex
    /// models) or `anthropic` (Messages). Default: the config file's, else
    /// `responses` for a gpt-5 codex model, `anthropic` when only
    /// ANTHROPIC_API_KEY is set, else `openai`.
    #[arg(long, value_name = "NAME", env = "CWL_PROVIDER")]
    pub provider: Option<ProviderKind>,

    /// Model name as the server knows it. Default: the config file's, else
    /// gpt-5 (openai), gpt-5.1-codex (responses) or claude-sonnet-4-5
    /// (anthropic).
    #[arg(long, value_name = "NAME", env = "CWL_MODEL")]
    pub model: Option<String>,

    /// Base URL of the API (overrides OPENAI_BASE_URL / ANTHROPIC_BASE_URL),
    /// e.g. http://localhost:8000/v1 for a local OpenAI-compatible server.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Token budget for each request: 80000, 80k, or a share of the model's
    /// context window such as 50%. Old episodes are evicted to stay under
    /// it. Default: 80k (a resumed session keeps its own).
    #[arg(long, value_name = "TOKENS|Nk|N%")]
    pub budget: Option<Budget>,

    /// The eviction settings; a resumed session keeps its own, except
    /// those given here.
    #[command(
        flatten,
        next_help_heading = "Eviction (a resumed session keeps its own unless given)"
    )]
    pub engine: cwl::EngineSettings,

    /// What manages the context: `cwl` (episodes the model marks, evicted
    /// in the paper's order), `cwm` (the context-window manager: pressure
    /// zones, lowest-scored content evicted first) or `self-gc` (a
    /// side-channel planner folds, masks and prunes indexed objects).
    /// Default: the config file's, else cwl (a resumed session keeps its own).
    #[arg(long, value_name = "NAME")]
    pub strategy: Option<cwl_session::strategy::StrategyName>,

    /// The model for the strategy's side calls (Self-GC's planner), on the
    /// same provider. Default: the config file's, else the session's model.
    #[arg(long, value_name = "NAME")]
    pub planner_model: Option<String>,

    /// One of the strategy's own settings, repeatable: `self-gc` takes
    /// `trigger`, `regrowth`, `min_prune`, `commit_prune`,
    /// `planner_timeout_ms`, `cache_ttl_s`; `cwm` takes `zones.orange` (and `.yellow`,
    /// `.red`), `cascade.prepare`, `cascade.active`,
    /// `cascade.emergency`, `allocation=[0.06,0.04,0.65,0.12,0.08,0.05]`,
    /// `summarise_over` and more. Default: the config file's
    /// `[strategy_options]` (a resumed session keeps its own).
    #[arg(long = "strategy-option", value_name = "KEY=VALUE")]
    pub strategy_options: Vec<String>,

    /// Directory the agent works in; write and edit are refused outside it.
    /// Default: the current directory (a resumed session's own directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Where session files are kept. Default: cwl/sessions in the user data
    /// directory (~/.local/share/cwl/sessions on Linux).
    #[arg(long, value_name = "DIR", env = "CWL_SESSION_DIR")]
    pub session_dir: Option<PathBuf>,

    /// Config file (TOML). Default: cwl/config.toml in the user config
    /// directory (~/.config/cwl/config.toml on Linux) if it exists.
    #[arg(long, value_name = "FILE", env = "CWL_CONFIG")]
    pub config: Option<PathBuf>,

    /// Continue a saved session (id, unique id prefix, or file path) with
    /// exactly the context it had. `cwl run --resume ID` with no task
    /// carries on with its unfinished task.
    #[arg(long, value_name = "SESSION")]
    pub resume: Option<String>,

    /// Start the new session from a context-window checkpoint: a cwm
    /// session's notes file (`<id>.notes.md`) or its JSON. Its goal,
    /// tasks, notes and summary open the window as a system message. A
    /// checkpoint that does not validate is refused before anything starts.
    #[arg(long, value_name = "FILE", conflicts_with = "resume")]
    pub bootstrap: Option<PathBuf>,

    /// Model calls one task may take before the run stops (default 200).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<usize>,

    /// Let write and edit change files outside --cwd.
    #[arg(long)]
    pub allow_outside_writes: bool,

    /// What bash commands may write, enforced by the kernel (Landlock,
    /// Linux): `workspace-write` (only --cwd and the temp directory),
    /// `read-only` (nothing) or `off`. Default: the config file's sandbox,
    /// else workspace-write, or off with a warning where the kernel cannot
    /// enforce it; asked for explicitly, a sandbox the kernel cannot enforce
    /// is an error.
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<Sandbox>,

    /// Ask the model to reason: low, medium or high.
    #[arg(long, value_name = "EFFORT", value_parser = parse_effort)]
    pub reasoning: Option<ReasoningEffort>,

    /// Print events as JSON lines on stdout instead of text.
    #[arg(long)]
    pub json: bool,

    /// Which tool calls ask before they run: `never`; `on-mutate` (write,
    /// edit, and bash commands that are not read-only); `always` (every
    /// tool call). Answer y, n or a (always allow that tool for the rest of
    /// the process); with --json, an approval_request event is printed and
    /// the answer is one JSON line on stdin: {"approve": true|false|"always"}.
    /// Default: the config file's approval, else on-mutate when stdin is a
    /// terminal and never when it is not.
    #[arg(long, value_name = "MODE")]
    pub approval: Option<ApprovalMode>,

    /// How long a model stream may send nothing before it counts as a
    /// dropped connection and the call is retried: seconds, or 500ms, 2m.
    /// Default: the config file's stream_idle_timeout, else 90s.
    #[arg(long, value_name = "SECS", value_parser = crate::config::parse_duration)]
    pub stream_idle_timeout: Option<std::time::Duration>,

    /// The longest one of the strategy's side calls (Self-GC's planner,
    /// cwm's summaries) may take: seconds, or 500ms, 2m. After one stalls,
    /// the next model calls skip side calls (one, then two, four...), and
    /// once failed ones took three times this, the session makes no more.
    /// Default: the config file's side_timeout, else 20s.
    #[arg(long, value_name = "SECS", value_parser = crate::config::parse_duration)]
    pub side_timeout: Option<std::time::Duration>,
}

/// `cwl run`: run tasks non-interactively, one after another, in one
/// session.
#[derive(Debug, Clone, Default, Args)]
#[command(after_help = "\
Tasks run in order in ONE session: PROMPT first, then each --task. With \
neither, each non-empty line of stdin (when it is not a terminal) is a task. \
A task ends when the model answers without calling tools. The exit status is \
0 when every task ran; otherwise the session is saved and can be continued \
with --resume (with no task, --resume ID carries on with the unfinished one). \
Ctrl-C or SIGTERM stops the running task and its commands, saves the session \
and exits with status 130; a second Ctrl-C exits at once.

Examples:
  cwl run \"fix the failing test in src/parse.rs\"
  cwl run --budget 40k --task \"add a --verbose flag\" --task \"document it in README\"
  cwl run --resume 20250301-142233-9f3c --task \"now add tests\"")]
pub struct RunArgs {
    /// Model, budget, workspace and session options.
    #[command(flatten)]
    pub agent: AgentArgs,

    /// A task (user turn); repeat for several, run in order.
    #[arg(long = "task", value_name = "TEXT")]
    pub tasks: Vec<String>,

    /// The first task.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
}

/// `cwl chat`: an interactive session, one task per line.
#[derive(Debug, Clone, Default, Args)]
#[command(after_help = "\
On a terminal, chat opens a full-screen UI: the conversation, the episodes, \
the context gauge; /help in it lists the keys and commands (/episodes, \
/evict, /recall, /budget, /model, /sessions, /resume, /quit). With --plain, \
--json, or when stdin or stdout is not a terminal, it is a line REPL: \
type a task and press Enter; the agent works until it answers. Ctrl-C cancels \
the running turn and returns to the prompt. /status shows the context, /help \
lists the commands, /exit (or Ctrl-D) ends the session, which can be continued \
later with `cwl chat --resume ID` or `cwl run --resume ID`. Any other line \
starting with / is refused, never sent to the model; start a task with // to \
send a leading /. When the lines come from a pipe, the exit status is 2 after \
a refused line, else 1 after a failed task.")]
pub struct ChatArgs {
    /// Model, budget, workspace and session options.
    #[command(flatten)]
    pub agent: AgentArgs,

    /// Line mode instead of the full-screen UI (which opens only when
    /// stdin and stdout are terminals and --json is not given).
    #[arg(long)]
    pub plain: bool,
}

/// `cwl sessions`: list saved sessions.
#[derive(Debug, Clone, Default, Args)]
pub struct SessionsArgs {
    /// Where session files are kept (default as for `cwl run`).
    #[arg(long, value_name = "DIR", env = "CWL_SESSION_DIR")]
    pub session_dir: Option<PathBuf>,

    /// Config file (TOML), for its session_dir.
    #[arg(long, value_name = "FILE", env = "CWL_CONFIG")]
    pub config: Option<PathBuf>,

    /// Show at most N sessions, most recent first (0: all).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,

    /// Print one JSON object per session instead of a table.
    #[arg(long)]
    pub json: bool,

    /// List sessions that never got a model response too (a run that
    /// failed on its first call); hidden by default.
    #[arg(long)]
    pub all: bool,

    /// A subcommand (`show`); none lists the sessions.
    #[command(subcommand)]
    pub command: Option<SessionsCommand>,
}

/// What `cwl sessions` does besides listing.
#[derive(Debug, Clone, Subcommand)]
pub enum SessionsCommand {
    /// One session's state and its strategy's health (utilisation,
    /// eviction rate, compression, tool-result bloat, budgets, alerts,
    /// trend), read by replaying its file.
    Show(ShowArgs),
}

/// `cwl sessions show`.
#[derive(Debug, Clone, Default, Args)]
pub struct ShowArgs {
    /// The session: its id, a unique prefix of one, or its file.
    pub id: String,

    /// Where session files are kept, as `cwl sessions --session-dir`
    /// (given here, it wins).
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,

    /// Config file (TOML), as `cwl sessions --config` (given here, it
    /// wins).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `cwl demo`: the agent loop, tools and engine driven by a built-in
/// scripted model; no API key, no network.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
The demo creates a throwaway git repository in a temporary directory, runs \
several tasks on it in one session with a small budget so that eviction \
happens, and prints what happened and where the session file is.")]
pub struct DemoArgs {
    /// Token budget for each request (small, so eviction shows).
    #[arg(long, value_name = "TOKENS|Nk", default_value = "3600")]
    pub budget: Budget,

    /// Where the session file is written (default as for `cwl run`).
    #[arg(long, value_name = "DIR", env = "CWL_SESSION_DIR")]
    pub session_dir: Option<PathBuf>,

    /// Keep the demo repository instead of deleting it at the end.
    #[arg(long)]
    pub keep: bool,

    /// Print events as JSON lines on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            budget: Budget::Tokens(crate::demo::DEFAULT_BUDGET),
            session_dir: None,
            keep: false,
            json: false,
        }
    }
}

/// Runs `cwl run`. The first Ctrl-C or SIGTERM stops the running task,
/// records it, prints how to resume and exits the process with
/// [`EXIT_INTERRUPTED`]; a second one exits at once.
pub fn run_run(args: RunArgs) -> anyhow::Result<()> {
    runtime()?.block_on(run::run(args))
}

/// Runs `cwl chat` as lines (the full-screen UI is `cwl_tui::run_chat`).
/// Ctrl-C cancels the running turn and returns to the prompt; at the prompt, a second Ctrl-C in a row (or SIGTERM at any time)
/// ends the session and exits with [`EXIT_INTERRUPTED`].
pub fn run_chat(args: ChatArgs) -> anyhow::Result<()> {
    runtime()?.block_on(chat::chat(args))
}

/// Runs `cwl sessions`.
pub fn run_sessions(args: SessionsArgs) -> anyhow::Result<()> {
    sessions::sessions(args)
}

/// Runs `cwl demo`.
pub fn run_demo(args: DemoArgs) -> anyhow::Result<()> {
    runtime()?.block_on(async move {
        crate::demo::run(crate::demo::DemoOptions {
            budget: args.budget,
            session_dir: args.session_dir,
            keep: args.keep,
            json: args.json,
        })
        .await
        .map(|_| ())
    })
}

/// The runtime every command runs its async work on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("could not start the async runtime")
}

fn parse_effort(text: &str) -> Result<ReasoningEffort, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "low" => Ok(ReasoningEffort::Low),
        "medium" => Ok(ReasoningEffort::Medium),
        "high" => Ok(ReasoningEffort::High),
        other => Err(format!("expected low, medium or high, not {other:?}")),
    }
}

/// `cwl chat` arguments for tests: the scripted server, scratch
/// directories, an empty config file, approvals off (even on a terminal).
#[cfg(any(test, feature = "testing"))]
pub fn test_chat_args(
    server: &cwl_provider::testing::ScriptedServer,
    work: &std::path::Path,
    sessions: &std::path::Path,
) -> ChatArgs {
    let config = sessions.join("config.toml");
    std::fs::write(&config, "").unwrap();
    ChatArgs {
        agent: AgentArgs {
            provider: Some(cwl_provider::ProviderKind::OpenAi),
            model: Some("m".into()),
            base_url: Some(server.url().to_string()),
            cwd: Some(work.to_owned()),
            session_dir: Some(sessions.to_owned()),
            config: Some(config),
            approval: Some(crate::agent::ApprovalMode::Never),
            ..AgentArgs::default()
        },
        plain: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use cwl::{ResidueCap, Share};

    #[derive(Debug, Parser)]
    struct Run {
        #[command(flatten)]
        args: RunArgs,
    }

    #[test]
    fn run_args_parse_in_order() {
        let run = Run::try_parse_from([
            "run",
            "--provider",
            "anthropic",
            "--budget",
            "50%",
            "--task",
            "one",
            "--task",
            "two",
            "first",
            "--reasoning",
            "high",
            "--low-water",
            "60%",
            "--residue-share",
            "off",
            "--stream-idle-timeout",
            "200ms",
            "--side-timeout",
            "5s",
            "--approval",
            "on-mutate",
            "--sandbox",
            "read-only",
        ])
        .unwrap()
        .args;
        assert_eq!(run.agent.provider, Some(ProviderKind::Anthropic));
        assert_eq!(run.agent.budget, Some(Budget::Percent(50.0)));
        assert_eq!(run.tasks, ["one", "two"]);
        assert_eq!(run.prompt.as_deref(), Some("first"));
        assert_eq!(run.agent.reasoning, Some(ReasoningEffort::High));
        assert_eq!(run.agent.engine.low_water, Some(Share::new(0.6).unwrap()));
        assert_eq!(run.agent.engine.residue_share, Some(ResidueCap(None)));
        assert_eq!(
            run.agent.stream_idle_timeout,
            Some(std::time::Duration::from_millis(200))
        );
        assert_eq!(
            run.agent.side_timeout,
            Some(std::time::Duration::from_secs(5))
        );
        assert_eq!(run.agent.approval, Some(ApprovalMode::OnMutate));
        assert_eq!(run.agent.sandbox, Some(Sandbox::ReadOnly));
        for bad in [
            &["run", "--budget", "lots"][..],
            &["run", "--provider", "gemini"],
            &["run", "--reasoning", "max"],
            &["run", "--low-water", "0"],
            &["run", "--low-water", "150%"],
            &["run", "--residue-share", "none-at-all"],
            &["run", "--stream-idle-timeout", "0"],
            &["run", "--stream-idle-timeout", "forever"],
            &["run", "--approval", "sometimes"],
            &["run", "--sandbox", "strict"],
        ] {
            let error = Run::try_parse_from(bad).unwrap_err().to_string();
            assert!(error.contains(bad[2]), "{error}");
        }
    }

    #[test]
    fn approval_comes_from_the_flag_then_the_config_file() {
        let file = |text: &str| crate::config::FileConfig {
            approval: Some(text.to_string()),
            ..Default::default()
        };
        let flag = AgentArgs {
            approval: Some(ApprovalMode::Never),
            ..AgentArgs::default()
        };
        let none = AgentArgs::default();
        assert_eq!(
            setup::approval_mode(&flag, &file("always")).unwrap(),
            ApprovalMode::Never
        );
        assert_eq!(
            setup::approval_mode(&none, &file("always")).unwrap(),
            ApprovalMode::Always
        );
        let error = setup::approval_mode(&none, &file("maybe")).unwrap_err();
        assert_eq!(exit_code(&error), USAGE);
        assert_eq!(
            error.to_string(),
            "config file: approval: expected never, on-mutate or always, not \"maybe\""
        );
    }
}
