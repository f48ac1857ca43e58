//! `cwl evict`: one eviction pass over a transcript file.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use cwl::{Budget, Config, Estimate, O200k, ResidueCap, Share, TokenCounter, ToolClass, openai};
use serde_json::{Value, json};

use cwl_agent::cli::UsageError;

/// Arguments of `cwl evict`.
#[derive(Debug, Args)]
#[command(after_help = "\
Input: {\"messages\": [...], \"tools\": [...]} in the OpenAI Chat Completions shape.
Output: one JSON object {\"messages\": <view>, \"report\": {...}} on stdout.
Delimiter calls in the input are re-validated; invalid ones are kept as
ordinary tool calls and listed in report.warnings. Exit code 2 on bad input.

Example:
  cwl evict --budget 50k session.json > view.json")]
pub struct EvictArgs {
    /// Token budget: tokens (80000, 80k, 1.5M) or a share of --window (50%).
    #[arg(long, short, default_value = "80000", value_parser = parse_budget)]
    budget: Budget,
    /// Where the pass stops once the transcript is over the budget, as a
    /// share of it: 0.8 or 80% evicts down to 80% of the budget; 1 stops as
    /// soon as it fits (the paper's rule).
    #[arg(long, value_name = "SHARE", default_value = "80%", value_parser = parse_share)]
    low_water: Share,
    /// The share of the budget residues of evicted episodes and the user
    /// turns of finished tasks may take; past it the oldest fold into one
    /// index line. `off` keeps them all (user turns are never evicted).
    #[arg(long, value_name = "SHARE|off", default_value = "15%", value_parser = parse_residue_cap)]
    residue_share: ResidueCap,
    /// Episodes reaching into the transcript's most recent share of the
    /// budget (0.1 or 10%) are evicted only after every older one; `off`
    /// evicts by age alone (the paper).
    #[arg(long, value_name = "SHARE|off", default_value = "10%", value_parser = parse_residue_cap)]
    keep_recent: ResidueCap,
    /// An old episode at least this share of whose lines a later one
    /// repeats (a file read again, a command rerun) is evicted before any
    /// other; `off` keeps the paper's order.
    #[arg(long, value_name = "SHARE|off", default_value = "50%", value_parser = parse_residue_cap)]
    superseded: ResidueCap,
    /// A tool output of more than 768 tokens at least this share of whose
    /// lines a later output repeats (a file read again after an edit) is
    /// stubbed before anything else; `off` keeps the paper's order.
    #[arg(long, value_name = "SHARE|off", default_value = "100%", value_parser = parse_residue_cap)]
    restated: ResidueCap,
    /// Unannotated answers between episodes (text without tool use) may
    /// take this share of the budget before the oldest go first; `off`
    /// keeps them until the acts are gone (the paper).
    #[arg(long, value_name = "SHARE|off", default_value = "15%", value_parser = parse_residue_cap)]
    answer_share: ResidueCap,
    /// `stub`: before removing anything, old acts are reduced to their calls
    /// (tool outputs stubbed, text beside the calls dropped), oldest first,
    /// and old episodes then go least recently used first; `keep`: the
    /// paper's order.
    #[arg(long, value_name = "stub|keep", default_value = "stub")]
    act_outputs: cwl::ActOutputs,
    /// `drop`: a plan tool's call (TodoWrite, update_plan: each carries the
    /// whole plan) and its result go first once the same tool is called
    /// again; `keep`: they stay with their episode (the paper).
    #[arg(long, value_name = "drop|keep", default_value = "drop")]
    plans: cwl::PlanCalls,
    /// The model's context window in tokens, for a percentage budget.
    #[arg(long, value_name = "TOKENS", value_parser = parse_window)]
    window: Option<usize>,
    /// The model the transcript is for [default: the input's `model`].
    /// For one whose provider drops earlier turns' reasoning (gpt-5,
    /// o3, claude-sonnet-4-5...), each user message takes the earlier
    /// turns' reasoning out, as the provider would; any other model, or
    /// none, keeps every turn's.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Override a tool's class: NAME=bulk (stripped with search output) or
    /// NAME=intermediate (stripped with reads and commands). Repeatable.
    #[arg(long = "class", value_name = "NAME=CLASS", value_parser = parse_class)]
    classes: Vec<(String, ToolClass)>,
    /// How to count tokens.
    #[arg(long, value_enum, default_value_t = Tokenizer::O200k)]
    tokenizer: Tokenizer,
    /// Pretty-print the output.
    #[arg(long)]
    pretty: bool,
    /// The transcript file; `-` or nothing reads standard input.
    #[arg(value_name = "FILE|-")]
    input: Option<PathBuf>,
}

/// Token counters the command offers.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Tokenizer {
    /// The o200k BPE tokenizer (GPT-4o and later), embedded.
    O200k,
    /// A cheap estimate: one token per four bytes.
    Estimate,
}

fn parse_budget(text: &str) -> Result<Budget, String> {
    text.parse()
        .map_err(|error: cwl::BudgetError| error.to_string())
}

fn parse_share(text: &str) -> Result<Share, String> {
    text.parse()
        .map_err(|error: cwl::ShareError| error.to_string())
}

fn parse_residue_cap(text: &str) -> Result<ResidueCap, String> {
    text.parse()
        .map_err(|error: cwl::ShareError| format!("{error}, or `off`"))
}

fn parse_class(text: &str) -> Result<(String, ToolClass), String> {
    let (name, class) = text.split_once('=').ok_or_else(|| {
        format!("invalid class `{text}`: expected NAME=bulk or NAME=intermediate")
    })?;
    let class = match class.trim() {
        "bulk" => ToolClass::Bulk,
        "intermediate" => ToolClass::Intermediate,
        other => {
            return Err(format!(
                "invalid class `{other}` for `{name}`: expected bulk or intermediate"
            ));
        }
    };
    match name.trim() {
        "" => Err(format!("invalid class `{text}`: the tool name is empty")),
        name => Ok((name.to_string(), class)),
    }
}

fn parse_window(text: &str) -> Result<usize, String> {
    match text.parse::<Budget>() {
        Ok(Budget::Tokens(tokens)) => Ok(tokens),
        _ => Err(format!(
            "invalid window `{text}`: expected tokens like 200000 or 200k"
        )),
    }
}

/// Runs `cwl evict`.
pub fn run(args: EvictArgs) -> anyhow::Result<()> {
    let budget = args
        .budget
        .resolve(args.window)
        .map_err(|error| UsageError(error.to_string()))?;
    let (name, text) = read_input(args.input.as_ref())?;
    let body: Value = serde_json::from_str(&text)
        .map_err(|error| UsageError(format!("{name}: not valid JSON: {error}")))?;
    let request =
        openai::parse_request(&body).map_err(|error| UsageError(format!("{name}: {error}")))?;
    let counter: Arc<dyn TokenCounter> = match args.tokenizer {
        Tokenizer::O200k => Arc::new(O200k::new()),
        Tokenizer::Estimate => Arc::new(Estimate),
    };
    let mut config = Config::with_budget(budget)
        .low_water(args.low_water)
        .residue_share(args.residue_share.0)
        .keep_recent(args.keep_recent.0)
        .superseded(args.superseded.0)
        .restated(args.restated.0)
        .answer_share(args.answer_share.0)
        .stub_act_outputs(args.act_outputs.stubbed())
        .superseded_plans(args.plans.dropped());
    for (name, class) in &args.classes {
        config.classes.set(name, *class);
    }
    let model = args
        .model
        .as_deref()
        .or_else(|| body.get("model").and_then(Value::as_str));
    if let Some(model) = model {
        config = config.reasoning(cwl::ReasoningScope::of_model(model));
    }
    let evicted = cwl::evict(request.messages, request.tools, config, counter)
        .map_err(|error| UsageError(format!("{name}: {error}")))?;
    let output = json!({
        "messages": openai::to_messages(&evicted.messages),
        "report": evicted.report,
    });
    let mut bytes = if args.pretty {
        serde_json::to_vec_pretty(&output)
    } else {
        serde_json::to_vec(&output)
    }
    .context("serializing the output")?;
    bytes.push(b'\n');
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&bytes).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing the output"),
    }
}

fn read_input(path: Option<&PathBuf>) -> anyhow::Result<(String, String)> {
    match path.filter(|path| path.as_os_str() != "-") {
        Some(path) => {
            let name = path.display().to_string();
            let bytes = std::fs::read(path)
                .map_err(|error| UsageError(format!("{name}: cannot read: {error}")))?;
            let text = String::from_utf8(bytes)
                .map_err(|error| UsageError(format!("{name}: not UTF-8: {error}")))?;
            Ok((name, text))
        }
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|error| UsageError(format!("<stdin>: cannot read: {error}")))?;
            Ok(("<stdin>".to_string(), text))
        }
    }
}
