//! The `cwl` command: context eviction, the agent and the replay lab.

mod evict;
mod replay;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Context Window Lifecycle: structured, model-free context eviction for
/// long-horizon LLM agents.
#[derive(Debug, Parser)]
#[command(
    name = "cwl",
    version,
    propagate_version = true,
    after_help = "\
Exit status: 0 success; 1 a runtime failure (the model API, a tool, a file, \
the session); 2 a usage error (a bad flag or value, a bad config file, an \
unknown session, no task, an unknown chat command, a missing API key or bad \
base URL); 130 interrupted (Ctrl-C)."
)]
struct Cli {
    /// With none, `cwl chat` when stdin and stdout are terminals.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run tasks non-interactively, one after another, in one session.
    Run(cwl_agent::cli::RunArgs),
    /// An interactive session: one task per line.
    Chat(cwl_agent::cli::ChatArgs),
    /// List saved sessions.
    Sessions(cwl_agent::cli::SessionsArgs),
    /// The agent on a scratch repository, driven by a built-in scripted model; no API key needed.
    Demo(cwl_agent::cli::DemoArgs),
    /// The paper's protocol on a task suite: every task in one CWL session
    /// against each in a fresh one; pass rates, tokens, cost, prompt curve.
    Bench(cwl_agent::cli::BenchArgs),
    /// Run one eviction pass over a transcript (OpenAI chat JSON) and print
    /// the view and a report.
    Evict(evict::EvictArgs),
    Replay(cwl_lab::cli::ReplayArgs),
    Proxy(cwl_proxy::cli::ProxyArgs),
    Sweep(cwl_lab::sweep::SweepArgs),
    Gen(cwl_lab::cli::GenArgs),
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        // Without CWL_LOG: errors only, and none of the MCP client's (cwl
        // reports a failing server itself; CWL_LOG=rmcp=debug shows them).
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CWL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error,rmcp=off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let command = cli.command.unwrap_or_else(|| {
        use std::io::IsTerminal as _;
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            Command::Chat(cwl_agent::cli::ChatArgs::default())
        } else {
            use clap::CommandFactory as _;
            Cli::command()
                .error(
                    clap::error::ErrorKind::MissingSubcommand,
                    "a command is required (with none, cwl opens `cwl chat` on a terminal)",
                )
                .exit()
        }
    });
    let result = match command {
        Command::Run(args) => cwl_agent::cli::run_run(args),
        Command::Chat(args) => cwl_tui::run_chat(args),
        Command::Sessions(args) => cwl_agent::cli::run_sessions(args),
        Command::Demo(args) => cwl_agent::cli::run_demo(args),
        Command::Bench(args) => cwl_agent::cli::run_bench(args),
        Command::Evict(args) => evict::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Proxy(args) => cwl_proxy::cli::run_proxy(args),
        Command::Sweep(args) => cwl_lab::sweep::run_sweep(args),
        Command::Gen(args) => cwl_lab::cli::run_gen(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`cwl ... | head`): nothing left to say.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            let line = cwl_agent::cli::error_line(&error);
            let _ = writeln!(std::io::stderr(), "cwl: error: {line}");
            let front_usage = error
                .chain()
                .any(|e| cwl_lab::cli::is_usage(e) || cwl_proxy::cli::is_usage(e));
            ExitCode::from(if front_usage {
                cwl_agent::cli::USAGE
            } else {
                cwl_agent::cli::exit_code(&error)
            })
        }
    }
}
