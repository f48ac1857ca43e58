//! `cwl evict`: one eviction pass over a transcript file.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use cwl::{Budget, Estimate, O200k, TokenCounter, ToolClass, openai};
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
    #[command(flatten)]
    engine: cwl::EngineSettings,
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
    let mut config = args.engine.config(budget);
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
