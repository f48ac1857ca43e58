//! Command-line arguments and entry points of `cwl replay` and `cwl gen`,
//! for the `cwl` binary to wire. Library logic lives in the other modules;
//! this one parses, validates, calls and prints.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use clap::{Args, ValueEnum};
use cwl::{Budget, Estimate, O200k, TokenCounter};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::calibrate;
use crate::import::{self, Format};
use crate::judge::Judge;
use crate::metrics::cost::{self, DEFAULT_MODEL, ModelSource};
use crate::policy::clear::ClearParams;
use crate::policy::compact::CompactParams;
use crate::policy::{PolicyConfig, PolicyKind};
use crate::replay::FileReport;
use crate::replay::{ReplayConfig, replay_split, replay_with};
use crate::report::{ReplayReport, Skipped, json, losses, plot, table, warnings};
use crate::session::Session;
use crate::side::{NoModel, SideModel};
use crate::synth::{SynthConfig, generate};

/// Which tokenizer counts tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Tokenizer {
    /// The o200k BPE (GPT-4o and later), embedded.
    O200k,
    /// One token per four bytes: fast, approximate.
    Estimate,
}

impl Tokenizer {
    /// The counter.
    pub fn counter(self) -> Arc<dyn TokenCounter> {
        match self {
            Tokenizer::O200k => Arc::new(O200k::new()),
            Tokenizer::Estimate => Arc::new(Estimate),
        }
    }
}

/// A budget as typed on the command line, kept so reports can say it the
/// same way (`80k`, not 80000).
#[derive(Debug, Clone, PartialEq)]
pub struct TypedBudget {
    /// The text typed.
    pub text: String,
    /// What it means.
    pub budget: Budget,
}

impl std::str::FromStr for TypedBudget {
    type Err = cwl::BudgetError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(TypedBudget {
            text: text.trim().to_string(),
            budget: text.parse()?,
        })
    }
}

/// `cwl replay --help`'s long text, listing the strategies of
/// [`STRATEGIES`](crate::policy::strategies::STRATEGIES) with what each is.
fn replay_about() -> String {
    let strategies: Vec<String> = crate::policy::strategies::STRATEGIES
        .iter()
        .map(|entry| format!("{} ({})", entry.name, entry.about))
        .collect();
    REPLAY_ABOUT.replace("{STRATEGIES}", &strategies.join(", "))
}

const REPLAY_ABOUT: &str = "Replay session logs through CWL and the baseline context policies and measure what each keeps, costs and loses.\n\n\
At every model call in a log, each policy builds the request that would have been sent from the transcript so far. \
Reported per policy: request tokens (mean, p95, max, share over the budget), evictions per request (messages of the \
previous request dropped or rewritten), prefix-cache reads and writes under the provider's rules, cost in dollars (each log priced by its own model unless --model), \
and reference retention: anchors (paths, identifiers, URLs, long numbers, hashes) the model used that had appeared \
earlier but were missing from the request (lost-anchor rate; loss-free share of the requests that had any at risk); \
content retention: the share of requests that kept, in text the log wrote (never a residue or summary), every line \
their edits and patches must match and every value they quote from an earlier tool output (content loss-free); and \
view changes: the share of requests that altered what the previous request sent (a prefix break).\n\n\
Token counts are calibrated to the provider's: where the log records the prompt size of its model calls (pi, Claude \
Code, Codex), local counts are converted as `overhead + ratio × local`, fitted with medians over the whole log as its \
harness sent it (its compactions' summaries in place of the history; a logged prompt a tenth smaller than the one before \
with no compaction is the harness cutting what it sent, as Claude Code 2.0 clears old tool results, counted and warned \
about, and the call after it sized from the log); the overhead (the client's system prompt and tool schemas the log \
lacks) never exceeds the smallest logged prompt, and with fewer than 5 calls before the harness first edited its prompt \
the client's known size stands in. The header compares that replay with the logged prompts: calls compared of those \
logged, mean and median error. Budgeted policies decide against the budget converted back. \
--no-calibration keeps local counts. Encrypted reasoning counts as the log's reasoning tokens, never as its ciphertext; \
for OpenAI's reasoning models before GPT-5.6 (gpt-5, gpt-5-codex, o3...) and Anthropic's before Claude Opus 4.5 and \
Sonnet 4.6 (claude-sonnet-4-5, claude-opus-4-1...), the log's model whatever --model says, only until the next user \
message, as those models drop earlier turns' reasoning from the prompt they bill (and the cwl engine takes it out of its \
view then, as an agent that knows its provider does); where the log's prompt sizes clearly show the other rule, they \
win.\n\n\
With more than 10 files only the aggregate table is printed (--per-file prints every file's); warnings are ranked, what \
changes the figures first, and counted by kind; a file that cannot be read or parsed is skipped with a warning and the \
exit status is non-zero; a file with no model call is reported as such.\n\n\
Policies: cwl (the engine; inferred episodes when the log has no delimiter calls), none (full history), truncate, \
mask, compact (modeled summarization), clear-tool-uses (Anthropic's server-side clearing of old tool results, \
clear_tool_uses_20250919, triggered at the budget), oldest-turn, tool-prune, tool-mask-prune, hybrid (Self-GC paper baselines), \
fifo, lru, priority, type, weighted (context-window-manager scorers, one at a time), and the strategies the agent runs \
with --strategy, driven exactly as the agent drives them (messages pushed, the budget enforced before each call, the \
view sent): {STRATEGIES}.\n\n\
Prune is Self-GC's pruning rate: per request 1 − |C′|/|C|, the request against the full history at that call, averaged \
over requests. With --judge, the --model-url model judges every --judge-every'th request of a policy that left something \
out (the request, what it left out, the reply the log's model gave; the paper's judge contract and Listing 3 JSON): the \
no-impact rate is the share judged \"valid\", with its Wilson 95% interval.\n\n\
Side requests: a strategy that needs a model (a planner, a summary) asks the replay, which sends the request to \
--model-url (OpenAI Chat Completions, or Anthropic Messages with --model-api anthropic; the key from OPENAI_API_KEY or \
ANTHROPIC_API_KEY when set) for --side-model, else --model, and costs it as a side call. Without --model-url every \
side request is skipped: the strategy is told so and changes nothing, and the report counts the skipped requests per \
policy; nothing is faked.";

/// `cwl replay`: measure CWL against every baseline on real session logs.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Replay session logs through CWL and the baseline context policies and measure what each keeps, costs and loses",
    long_about = replay_about()
)]
pub struct ReplayArgs {
    /// Session logs: cwl, pi, Claude Code, Codex, OpenAI chat JSON or mini-swe-agent (detected from content); a directory stands for every .jsonl and .json file under it (e.g. ~/.codex/sessions, ~/.claude/projects).
    #[arg(required = true, value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Policies to replay: `all` or a comma-separated list of the names below (an unknown name lists them).
    #[arg(long, value_name = "LIST", default_value = "all")]
    pub policy: String,
    /// Token budget τ for every budgeted policy: tokens (80000, 80k, 1.5M) or a share of the model's context window (50%).
    #[arg(long, value_name = "TOKENS", default_value = "80k")]
    pub budget: TypedBudget,
    /// Model whose prices, caching rules and context window apply to every log [default: each log's own model; when the log names none, gpt-5 for Codex rollouts and claude-sonnet-4-5 for the rest]. A log's model missing from the price table leaves its cost unknown.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Base URL of a model server that answers the strategies' side requests (planner, summaries); without it they are skipped and counted.
    #[arg(long, value_name = "URL")]
    pub model_url: Option<String>,
    /// The model asked at --model-url [default: --model].
    #[arg(long, value_name = "NAME", requires = "model_url")]
    pub side_model: Option<String>,
    /// The protocol --model-url speaks: openai (Chat Completions) or anthropic (Messages).
    #[arg(
        long,
        value_enum,
        value_name = "API",
        default_value = "openai",
        requires = "model_url"
    )]
    pub model_api: ModelApi,
    /// Also measure Self-GC's no-impact rate: the --model-url model judges whether pruned requests still support the reply the log's model gave (Listing 3's JSON). Costs one judge call per judged request.
    #[arg(long, requires = "model_url")]
    pub judge: bool,
    /// With --judge: judge every Nth request of each policy that left something out (1: all).
    #[arg(long, value_name = "N", default_value_t = 10, requires = "judge", value_parser = clap::value_parser!(u64).range(1..))]
    pub judge_every: u64,
    /// Price override in US dollars per million tokens: in=,out=,read=,write=,cache=anthropic|openai|openai-writes|google|none,window= (unset read/write follow the cache rules: Anthropic 0.1×/1.25× input).
    #[arg(long, value_name = "PRICES")]
    pub price: Option<String>,
    /// Context window in tokens, for `compact` and percentage budgets [default: the model's; `compact` uses the log's own window where it records one (Codex)].
    #[arg(long, value_name = "TOKENS")]
    pub window: Option<usize>,
    /// Print one JSON object instead of tables (always with every file).
    #[arg(long)]
    pub json: bool,
    /// Print the aggregate table only (the default for more than 10 files).
    #[arg(long, conflicts_with = "per_file")]
    pub summary: bool,
    /// Print every file's table before the aggregate, however many files.
    #[arg(long)]
    pub per_file: bool,
    /// Also list, per file, every request where a policy lost something its reply used: the anchors, the values quoted from earlier tool outputs and the count of edit lines no message of the request held (in the JSON: each file's `losses`).
    #[arg(long)]
    pub losses: bool,
    /// Also plot request tokens over each session to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Tokenizer for all counts.
    #[arg(long, value_enum, default_value = "o200k")]
    pub tokenizer: Tokenizer,
    /// Keep local token counts as they are: do not calibrate them to the prompt sizes the log recorded, nor add the estimated client system prompt.
    #[arg(long)]
    pub no_calibration: bool,
    /// Threads [default: one a core]: files replay side by side, and with fewer files than threads each file's policies are split over them; the report is the same whatever the number.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// mask: tool outputs of the last N steps stay whole [default 10: Lindenbauer et al. 2025, "The Complexity Trap"].
    #[arg(long, value_name = "N", default_value_t = crate::policy::mask::DEFAULT_TURNS)]
    pub mask_turns: usize,
    /// compact: summarize when the prompt passes this share of the window [default 0.92: pi's 16,384-token reserve on a 200k window; the context-window-manager cascade's compaction point].
    #[arg(long, value_name = "SHARE", default_value_t = CompactParams::default().trigger)]
    pub compact_trigger: f64,
    /// compact: summary size as a share of the summarized tokens [default 0.01: 0.75–0.93% in the pi traces' real compactions].
    #[arg(long, value_name = "SHARE", default_value_t = CompactParams::default().summary_ratio)]
    pub compact_ratio: f64,
    /// compact: share of the summarized anchors the summary keeps [default 0.05: 4.7–5.0% measured on the pi traces' summaries].
    #[arg(long, value_name = "SHARE", default_value_t = CompactParams::default().keep_anchors)]
    pub compact_keep_anchors: f64,
    /// compact: most recent tokens kept verbatim after a summary [default 20000: pi's keepRecentTokens].
    #[arg(long, value_name = "TOKENS", default_value_t = CompactParams::default().keep_recent)]
    pub compact_keep_recent: usize,
    /// clear-tool-uses: the most recent tool uses left whole when the edit applies [default 3: the API's `keep`].
    #[arg(long, value_name = "N", default_value_t = crate::policy::clear::DEFAULT_KEEP)]
    pub clear_keep: usize,
    /// clear-tool-uses: apply the edit only when it frees at least this many tokens (80k, 5000 or a share of the window; the API's `clear_at_least`) [default: no minimum].
    #[arg(long, value_name = "TOKENS")]
    pub clear_at_least: Option<Budget>,
    /// clear-tool-uses: also empty the cleared calls' arguments (the API's `clear_tool_inputs`).
    #[arg(long)]
    pub clear_inputs: bool,
    /// clear-tool-uses: replay the edit as an event whose clears persist while the prompt grows back to the trigger, instead of as the API applies it, to every request (past the trigger, each request keeps only the latest --clear-keep results).
    #[arg(long)]
    pub clear_as_event: bool,
    /// The engine's eviction settings (`cwl`).
    #[command(flatten)]
    pub engine: cwl::EngineSettings,
}

/// The model `cwl gen` names by default: priced like claude-sonnet-4-5, and
/// like every current model it keeps each turn's thinking.
pub const GEN_MODEL: &str = "claude-sonnet-4-6";

/// `cwl gen`: write a synthetic annotated session for scale tests.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Write a synthetic annotated session (cwl JSONL) shaped like the CWL paper's long run, for scale tests",
    long_about = "Write a synthetic annotated session in the project's JSONL format (a `session` record, then `message` \
records with real `delimiter` calls and results), shaped like the CWL paper's run: many sequential tasks in one session, \
expl/act episodes with dependencies, bulky search output, file reads, edits and test runs, and follow-up tasks that \
revisit earlier files. Deterministic for a seed; streamed, so any size fits in constant memory.\n\n\
--tokens is the cumulative tokens SENT over the session at budget: the sum over every model call of min(H, τ), where H \
is the full history before the call (tool definitions and all earlier messages, counted with --tokenizer) and τ is \
--budget. It is what a session kept at τ by CWL would send in total (the paper's \"80 million tokens\" were cumulative \
tokens processed across requests). Generation stops at the first task boundary past the target."
)]
pub struct GenArgs {
    /// Sequential tasks (user turns).
    #[arg(long, value_name = "N", default_value_t = 89)]
    pub tasks: usize,
    /// Target cumulative sent tokens at budget (80M, 500k, 2000000).
    #[arg(long, value_name = "TOKENS", default_value = "80M")]
    pub tokens: Budget,
    /// Budget τ the target is measured at, also written in the session header.
    #[arg(long, value_name = "TOKENS", default_value = "80k")]
    pub budget: Budget,
    /// PRNG seed: the same seed writes the same bytes.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// Model name for the session header. The default, a current model
    /// that keeps every turn's thinking in the prompt it bills, makes the
    /// generated reasoning count as sent (an older one, such as
    /// claude-sonnet-4-5, bills only the current turn's).
    #[arg(long, value_name = "MODEL", default_value = GEN_MODEL)]
    pub model: String,
    /// Output file (default: stdout).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Tokenizer used to size the session.
    #[arg(long, value_enum, default_value = "o200k")]
    pub tokenizer: Tokenizer,
}

fn share(name: &str, value: f64, allow_zero: bool) -> anyhow::Result<f64> {
    let ok = value.is_finite() && value <= 1.0 && (value > 0.0 || (allow_zero && value == 0.0));
    if !ok {
        let range = if allow_zero {
            "between 0 and 1"
        } else {
            "above 0 and at most 1"
        };
        bail!("--{name} must be {range}, got {value}");
    }
    Ok(value)
}

impl ReplayArgs {
    /// Whether the text report shows every file's table: `--per-file`,
    /// else not `--summary` and at most [`PER_FILE_TABLES_UP_TO`] files.
    pub fn per_file_tables(&self) -> bool {
        self.per_file || (!self.summary && self.files.len() <= PER_FILE_TABLES_UP_TO)
    }

    /// The replay configuration these arguments describe, for a log that
    /// names no model.
    pub fn config(&self) -> anyhow::Result<ReplayConfig> {
        Ok(self
            .config_for(None, DEFAULT_MODEL, None, self.tokenizer.counter())?
            .0)
    }

    /// The configuration for a log whose session names `logged` as its
    /// model and `logged_window` as its context window, counting with
    /// `counter`, and where the model came from (see [`cost::for_log`]).
    /// A percentage budget is a share of the model's window, so every file
    /// of a run gets the same τ; `compact` works from the log's own window
    /// when it records one, as the client compacted against that.
    pub fn config_for(
        &self,
        logged: Option<&str>,
        default_model: &str,
        logged_window: Option<usize>,
        counter: Arc<dyn TokenCounter>,
    ) -> anyhow::Result<(ReplayConfig, ModelSource)> {
        let policies = PolicyKind::parse_list(&self.policy)?;
        let (pricing, source) = cost::for_log(
            self.model.as_deref(),
            logged,
            default_model,
            self.price.as_deref(),
        )?;
        let model_window = self.window.unwrap_or(pricing.window);
        if model_window == 0 {
            bail!("--window must be above zero");
        }
        let budget = self.budget.budget.resolve(Some(model_window))?;
        let window = self.window.or(logged_window).unwrap_or(model_window);
        let compact = CompactParams {
            trigger: share("compact-trigger", self.compact_trigger, false)?,
            summary_ratio: share("compact-ratio", self.compact_ratio, false)?,
            keep_anchors: share("compact-keep-anchors", self.compact_keep_anchors, true)?,
            keep_recent: self.compact_keep_recent,
        };
        let clear = ClearParams {
            keep: self.clear_keep,
            clear_at_least: match self.clear_at_least {
                Some(tokens) => tokens.resolve(Some(model_window))?,
                None => 0,
            },
            clear_inputs: self.clear_inputs,
            every_request: !self.clear_as_event,
        };
        let config = ReplayConfig {
            policies,
            policy: PolicyConfig {
                budget,
                window,
                mask_turns: self.mask_turns,
                compact,
                clear,
                settings: self.engine,
                reasoning: ::cwl::ReasoningScope::AllTurns,
            },
            pricing: Arc::new(pricing),
            counter,
            side: Arc::new(NoModel),
            judge: None,
            check: false,
            losses: self.losses,
        };
        Ok((config, source))
    }
}

/// The protocol a side-request server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModelApi {
    /// OpenAI Chat Completions and compatible servers (vLLM, llama.cpp, Ollama...).
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

/// Where the strategies' side requests go: `--model-url`, the model named
/// there and the protocol it speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideEndpoint {
    /// The server's base URL.
    pub url: String,
    /// The model asked.
    pub model: String,
    /// The protocol it speaks.
    pub api: ModelApi,
}

/// `--model-url` given with no model to ask.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--model-url needs the model to ask there: give --side-model NAME (or --model NAME)")]
pub struct NoSideModel;

impl ReplayArgs {
    /// The side-request endpoint, if `--model-url` was given.
    pub fn side_endpoint(&self) -> Result<Option<SideEndpoint>, NoSideModel> {
        let Some(url) = &self.model_url else {
            return Ok(None);
        };
        let model = self
            .side_model
            .clone()
            .or_else(|| self.model.clone())
            .ok_or(NoSideModel)?;
        Ok(Some(SideEndpoint {
            url: url.clone(),
            model,
            api: self.model_api,
        }))
    }
}

/// Replays the files with every side request skipped (see
/// [`run_replay_with`]); an error if `--model-url` asks for a model, which
/// the lab alone cannot reach.
pub fn run_replay(args: ReplayArgs) -> anyhow::Result<()> {
    if args.side_endpoint()?.is_some() {
        bail!(
            "--model-url: this entry point has no model client; the `cwl` binary's replay has one"
        );
    }
    run_replay_with(args, Arc::new(NoModel))
}

/// Replays the files, the strategies' side requests answered by `side`,
/// and prints the report (tables, or JSON with `--json`) to stdout;
/// progress, warnings and throughput go to stderr.
pub fn run_replay_with(mut args: ReplayArgs, side: Arc<dyn SideModel>) -> anyhow::Result<()> {
    args.files = import::session_logs(&args.files)?;
    if let Some(path) = &args.plot
        && !path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
    {
        bail!(plot::PlotError::Format(path.display().to_string()));
    }
    let started = Instant::now();
    let (report, bytes) = replay_files_with(&args, side)?;
    let elapsed = started.elapsed().as_secs_f64();
    let stderr = std::io::stderr();
    let mut err = stderr.lock();
    let _ = write!(
        err,
        "{}",
        warnings::render(&warnings::rank(&report), WARNING_KINDS_SHOWN)
    );
    let megabytes = bytes as f64 / 1_000_000.0;
    let peak = peak_memory_mib().map_or_else(String::new, |m| format!(", peak memory {m:.0} MiB"));
    let _ = writeln!(
        err,
        "replayed {} files, {} requests, {megabytes:.1} MB in {elapsed:.1} s ({:.1} MB/s){peak}",
        report.files.len(),
        report.requests(),
        if elapsed > 0.0 {
            megabytes / elapsed
        } else {
            0.0
        }
    );
    drop(err);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", json::to_json(&report))?;
    } else if !report.files.is_empty() {
        write!(
            out,
            "{}",
            table::render_with(&report, args.per_file_tables())
        )?;
        if args.losses {
            write!(out, "{}", losses::render(&report))?;
        }
    }
    out.flush()?;
    if let Some(path) = &args.plot
        && !report.files.is_empty()
    {
        plot::write_svg(&report, path)?;
    }
    if !report.skipped.is_empty() {
        return Err(SkippedFiles {
            skipped: report.skipped.iter().map(Skipped::describe).collect(),
            total: args.files.len(),
        }
        .into());
    }
    Ok(())
}

/// Whether `error` says the lab was called wrongly (an unknown policy, a
/// generator setting out of range) rather than failing at its work: the
/// binary exits 2 for these, 1 otherwise.
pub fn is_usage(error: &(dyn std::error::Error + 'static)) -> bool {
    error.is::<crate::policy::UnknownPolicy>()
        || error.is::<NoSideModel>()
        || error.is::<NoModelClient>()
        || error.is::<crate::sweep::LossesInSweep>()
        || matches!(
            error.downcast_ref::<crate::synth::SynthError>(),
            Some(crate::synth::SynthError::Invalid(_))
        )
}

/// Replays every file of `args` (progress on stderr) into a report, and
/// the bytes read, skipping every side request. A file that cannot be read
/// or parsed is skipped and listed in the report; only bad options are
/// errors.
pub fn replay_files(args: &ReplayArgs) -> anyhow::Result<(ReplayReport, u64)> {
    if args.side_endpoint()?.is_some() {
        return Err(NoModelClient.into());
    }
    replay_files_with(args, Arc::new(NoModel))
}

/// `--model-url` (or `--judge`) given where no model client is wired:
/// `cwl sweep`, or the lab without the `cwl` binary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--model-url and --judge are for `cwl replay`; this command replays without a model")]
pub struct NoModelClient;

/// [`replay_files`] with the side requests answered by `side`. Files
/// replay in parallel (one a core); the report lists them in the order
/// given, as a sequential run would.
pub fn replay_files_with(
    args: &ReplayArgs,
    side: Arc<dyn SideModel>,
) -> anyhow::Result<(ReplayReport, u64)> {
    use rayon::prelude::*;
    let logs = import::session_logs(&args.files)?;
    let counter = args.tokenizer.counter();
    let (config, _) = args.config_for(None, DEFAULT_MODEL, None, Arc::clone(&counter))?;
    let bar = ProgressBar::with_draw_target(Some(logs.len() as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{pos}/{len}] {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.map_or(0, usize::from))
        .build()
        .context("cannot start the replay's threads")?;
    // The largest files first, so no core is left with one at the end;
    // the report keeps the order given.
    let mut order: Vec<usize> = (0..logs.len()).collect();
    order.sort_by_cached_key(|&at| {
        std::cmp::Reverse(std::fs::metadata(&logs[at]).map_or(0, |m| m.len()))
    });
    // Fewer files than threads: each file's policies split over the rest.
    let parts = if args.judge || args.side_endpoint()?.is_some() {
        1
    } else {
        (pool.current_num_threads() / logs.len().max(1)).max(1)
    };
    let mut replayed: Vec<(usize, anyhow::Result<Replayed>)> = pool.install(|| {
        order
            .par_iter()
            .map(|&at| {
                let replayed = replay_one(args, &logs[at], &counter, &side, &bar, parts);
                bar.inc(1);
                (at, replayed)
            })
            .collect()
    });
    replayed.sort_by_key(|&(at, _)| at);
    bar.finish_and_clear();
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut bytes = 0u64;
    for (_, replayed) in replayed {
        match replayed? {
            Replayed::File(file, size) => {
                bytes += size;
                files.push(*file);
            }
            Replayed::Skipped(why) => skipped.push(why),
        }
    }
    let report = ReplayReport {
        budget: config.policy.budget,
        budget_typed: args.budget.text.clone(),
        model: args.model.clone(),
        policies: config.policies.clone(),
        files,
        skipped,
    };
    Ok((report, bytes))
}

/// What became of one file of a replay.
enum Replayed {
    /// Its report, and its size in bytes.
    File(Box<FileReport>, u64),
    /// Why it could not be read.
    Skipped(Skipped),
}

/// Replays the session log at `path` under `args`, its policies in
/// `parts` parts side by side.
fn replay_one(
    args: &ReplayArgs,
    path: &std::path::Path,
    counter: &Arc<dyn TokenCounter>,
    side: &Arc<dyn SideModel>,
    bar: &ProgressBar,
    parts: usize,
) -> anyhow::Result<Replayed> {
    let shown = path.display().to_string();
    bar.set_message(shown.clone());
    // Every policy counts the same messages: count each once.
    let counter: Arc<dyn TokenCounter> = Arc::new(cwl::Remembering::new(Arc::clone(counter)));
    let counter = &counter;
    let opened = if args.no_calibration {
        Session::open(path).map(|session| calibrate::uncalibrated(session, counter.as_ref()))
    } else {
        calibrate::measure_path(path, counter.as_ref())
    }
    .and_then(|calibration| Ok((Session::open(path)?, calibration)));
    let (session, calibration) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            return Ok(Replayed::Skipped(Skipped {
                path: shown,
                why: error.to_string(),
            }));
        }
    };
    let (mut file_config, source) = args.config_for(
        session.info.model.as_deref(),
        default_model(&session.info.format),
        session.info.window,
        Arc::clone(counter),
    )?;
    file_config.side = Arc::clone(side);
    if args.judge {
        file_config.judge = Some(Judge {
            model: Arc::clone(side),
            every: args.judge_every,
        });
    }
    let size = session.info.bytes.unwrap_or(0);
    let mut events = 0u64;
    let mut tick = || {
        events += 1;
        if events.is_multiple_of(512) {
            bar.set_message(format!("{shown}: {events} events"));
            bar.tick();
        }
    };
    let mut file = if parts > 1 {
        let open = || Session::open(path);
        replay_split(session, &open, &shown, &file_config, calibration, parts)
            .with_context(|| format!("cannot read {shown} again"))?
    } else {
        replay_with(session, &shown, &file_config, calibration, &mut tick)
    };
    file.model_source = Some(source);
    Ok(Replayed::File(Box::new(file), size))
}

/// Kinds of warning printed before the rest are only counted.
pub const WARNING_KINDS_SHOWN: usize = 12;

/// Above this many files the text report shows the aggregate only unless
/// `--per-file` asks for every file's table.
pub const PER_FILE_TABLES_UP_TO: usize = 10;

/// The run finished but some files could not be replayed: the exit status
/// says so after the report of the others is printed.
#[derive(Debug, thiserror::Error)]
#[error("{} of {total} files skipped (cannot be read or parsed): {}", skipped.len(), skipped.join("; "))]
pub struct SkippedFiles {
    /// Each file skipped and why.
    pub skipped: Vec<String>,
    /// Files given.
    pub total: usize,
}

/// Writes a synthetic session to `-o FILE` or stdout; a summary goes to stderr.
pub fn run_gen(args: GenArgs) -> anyhow::Result<()> {
    let Budget::Tokens(tokens) = args.tokens else {
        bail!("--tokens must be a number of tokens (80M, 500k), not a percentage");
    };
    let Budget::Tokens(budget) = args.budget else {
        bail!("--budget for gen must be a number of tokens (80k), not a percentage");
    };
    let config = SynthConfig {
        tasks: args.tasks,
        tokens: tokens as u64,
        budget,
        seed: args.seed,
        model: args.model.clone(),
    };
    let counter = args.tokenizer.counter();
    let summary = match &args.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = BufWriter::new(file);
            generate(&config, counter.as_ref(), &mut out)
                .with_context(|| format!("writing {}", path.display()))?
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            generate(&config, counter.as_ref(), &mut out)?
        }
    };
    let _ = writeln!(
        std::io::stderr(),
        "wrote {} tasks, {} model calls, {} messages, {} episodes, {:.1} MB; sent at budget {} tokens (target {}), final history {} tokens",
        summary.tasks,
        summary.calls,
        summary.messages,
        summary.episodes,
        summary.bytes as f64 / 1_000_000.0,
        summary.sent_tokens,
        config.tokens,
        summary.history_tokens
    );
    Ok(())
}

/// Peak resident memory of this process in MiB (Linux `VmHWM`), if known.
pub fn peak_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The model a log of the format named `format` is priced as when it
/// names none.
fn default_model(format: &str) -> &'static str {
    format
        .parse::<Format>()
        .map_or(DEFAULT_MODEL, Format::default_model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Replay {
        #[command(flatten)]
        args: ReplayArgs,
    }

    #[derive(Parser)]
    struct Gen {
        #[command(flatten)]
        args: GenArgs,
    }

    #[test]
    fn replay_defaults_and_budgets() {
        let r = Replay::try_parse_from(["replay", "a.jsonl"]).unwrap().args;
        let config = r.config().unwrap();
        assert_eq!(config.policy.budget, 80_000);
        assert_eq!(config.policies.len(), PolicyKind::all().len());
        assert_eq!(config.pricing.model, DEFAULT_MODEL);
        let r = Replay::try_parse_from([
            "replay", "a", "--budget", "50%", "--model", "gpt-4o", "--policy", "cwl,none",
        ])
        .unwrap()
        .args;
        let config = r.config().unwrap();
        assert_eq!(config.policy.budget, 64_000);
        assert_eq!(config.policies, vec![PolicyKind::Cwl, PolicyKind::None]);
        assert!(Replay::try_parse_from(["replay", "a", "--budget", "lots"]).is_err());
        assert!(
            Replay::try_parse_from(["replay"]).is_err(),
            "a file is required"
        );
    }

    #[test]
    fn replay_rejects_bad_settings() {
        let bad = |extra: &[&str]| {
            let mut argv = vec!["replay", "a"];
            argv.extend_from_slice(extra);
            Replay::try_parse_from(argv)
                .unwrap()
                .args
                .config()
                .unwrap_err()
                .to_string()
        };
        assert!(bad(&["--policy", "nope"]).contains("unknown policy"));
        assert!(bad(&["--model", "mystery"]).contains("unknown model"));
        assert!(bad(&["--compact-trigger", "1.5"]).contains("compact-trigger"));
        assert!(bad(&["--compact-keep-anchors=-0.1"]).contains("compact-keep-anchors"));
    }

    #[test]
    fn gen_defaults() {
        let g = Gen::try_parse_from(["gen"]).unwrap().args;
        assert_eq!(g.tasks, 89);
        assert_eq!(g.tokens, Budget::Tokens(80_000_000));
        assert_eq!(g.budget, Budget::Tokens(80_000));
        let g = Gen::try_parse_from(["gen", "--tokens", "2M", "--seed", "3", "-o", "x.jsonl"])
            .unwrap()
            .args;
        assert_eq!(g.tokens, Budget::Tokens(2_000_000));
        assert_eq!(g.output, Some(PathBuf::from("x.jsonl")));
    }
}
