//! `cwl bench`: the paper's protocol on a task suite (see [`crate::bench`]).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use cwl::Budget;
use cwl_provider::{ModelTable, ProviderKind};

use super::exit::UsageError;
use super::runtime;
use super::setup::{default_model, provider};
use crate::bench::{BUILTIN_MAX, BenchOptions, Suite};

/// Options of `cwl bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// A suite file (TOML, or JSON when it ends in .json): `repository`
    /// (a directory, relative to the file) and `[[tasks]]` with a `prompt`
    /// and a `check` command. Default: the built-in suite, which the
    /// built-in scripted model solves (no key, no network).
    #[arg(long, value_name = "FILE")]
    pub suite: Option<PathBuf>,

    /// Tasks of the built-in suite.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub tasks: usize,

    /// Token budget τ of every session: 80000, 80k, or a share of the
    /// model's window. Default: 6k with the scripted model (so eviction
    /// shows), else 80k.
    #[arg(long, value_name = "TOKENS|Nk|N%")]
    pub budget: Option<Budget>,

    /// A real model's API (`openai`, `responses`, `anthropic`); the key
    /// from OPENAI_API_KEY or ANTHROPIC_API_KEY. Without it the scripted
    /// model runs.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<ProviderKind>,

    /// The real model's name (default: the provider's default model).
    #[arg(long, value_name = "NAME", requires = "provider")]
    pub model: Option<String>,

    /// The real model's base URL.
    #[arg(long, value_name = "URL", requires = "provider")]
    pub base_url: Option<String>,

    /// Model calls a task may take.
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub max_turns: usize,

    /// Where report.json, prompt.svg and both arms' sessions are written.
    #[arg(long, value_name = "DIR", default_value = "cwl-bench")]
    pub out: PathBuf,

    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `cwl bench`.
pub fn run_bench(args: BenchArgs) -> anyhow::Result<()> {
    let options = options(&args)?;
    let report = runtime()?.block_on(async {
        let mut progress = |line: &str| eprintln!("{line}");
        crate::bench::run(&options, &mut progress).await
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.table());
        println!(
            "report: {}, prompt curve: {}",
            options.out.join("report.json").display(),
            options.out.join("prompt.svg").display()
        );
    }
    Ok(())
}

fn options(args: &BenchArgs) -> anyhow::Result<BenchOptions> {
    if args.max_turns == 0 {
        return Err(UsageError::new("--max-turns must be at least 1").into());
    }
    let suite = match &args.suite {
        Some(path) => Suite::load(path).map_err(|e| UsageError::new(format!("{e:#}")))?,
        None if (1..=BUILTIN_MAX).contains(&args.tasks) => Suite::builtin(args.tasks),
        None => {
            return Err(UsageError::new(format!(
                "--tasks must be 1 to {BUILTIN_MAX} for the built-in suite"
            ))
            .into());
        }
    };
    let Some(kind) = args.provider else {
        if args.suite.is_some() {
            return Err(UsageError::new(
                "the scripted model only solves the built-in suite: give --provider (and --model) to run a suite file",
            )
            .into());
        }
        let budget = resolve(
            args.budget,
            6_000,
            crate::bench::model_info().context_window,
        )?;
        let mut options = BenchOptions::builtin(args.tasks, budget, args.out.clone());
        options.max_turns = args.max_turns;
        return Ok(options);
    };
    let name = args
        .model
        .clone()
        .unwrap_or_else(|| default_model(kind).to_string());
    let mut model = ModelTable::builtin().lookup(&name);
    model.name = name;
    let budget = resolve(args.budget, cwl::DEFAULT_BUDGET, model.context_window)?;
    let base_url = args.base_url.clone().map(|url| (url, "--base-url"));
    // Checked once here, so a missing key is a usage error before anything runs.
    provider(kind, base_url.clone(), cwl_provider::DEFAULT_IDLE_TIMEOUT)?;
    let factory = move || {
        provider(kind, base_url.clone(), cwl_provider::DEFAULT_IDLE_TIMEOUT)
            .map(|(provider, _)| provider)
            .map_err(anyhow::Error::from)
    };
    Ok(BenchOptions {
        suite,
        model,
        provider: Arc::new(factory),
        budget,
        max_turns: args.max_turns,
        out: args.out.clone(),
    })
}

fn resolve(budget: Option<Budget>, default: usize, window: u64) -> Result<usize, UsageError> {
    budget
        .unwrap_or(Budget::Tokens(default))
        .resolve(usize::try_from(window).ok())
        .map_err(|e| UsageError::new(e.to_string()))
}
