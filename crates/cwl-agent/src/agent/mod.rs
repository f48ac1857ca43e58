//! The agent: one session of tasks run by a model through the tools, with
//! the prompt held under the budget by the CWL engine.
//!
//! [`Agent::create`] starts a session (system prompt and project
//! instructions as protected prologue), [`Agent::resume`] rebuilds one from
//! its file, and [`Agent::run_task`] runs one user turn to its end: the
//! model answers without tool calls. Before every model call the engine
//! enforces the budget and a fresh [status block](status) is appended at
//! the request's tail. Everything that happens is written to the session
//! file as it happens and reported to an [`Observer`].

pub mod approval;
mod calls;
pub mod clock;
pub mod delegate;
mod event;
mod inferred;
mod interrupt;
pub mod limits;

pub mod status;
mod turn;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cwl::{Message, O200k, Record, Strategy, TokenCounter, TranscriptError};
use serde::Serialize;

use crate::tools::Toolbox;
use cwl_provider::secrets::Redactor;
use cwl_provider::{ModelInfo, Provider, ProviderError, ReasoningEffort};
use cwl_session::strategy::{StrategyName, UnknownStrategy};
use cwl_session::{SessionError, SessionInfo, SessionWriter, Settings};

pub use approval::{
    ApprovalMode, ApprovalRequest, Approver, Decision, InvalidAnswer, JsonApprover,
    TerminalApprover,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use event::{Collect, Event, Observer, Silent};
pub use interrupt::Interrupt;
pub use status::STATUS_RESERVE;

/// Model calls one task may take by default before the run is stopped.
pub const DEFAULT_MAX_TURNS: usize = 200;

/// How the agent runs.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOptions {
    /// The model: its name as the server knows it, window and prices.
    pub model: ModelInfo,
    /// Token budget τ for a whole request (conversation, tools and status
    /// block). The engine gets this less [`STATUS_RESERVE`].
    pub budget: usize,
    /// Tokens of the model's window kept free for its answer: a request
    /// over `window - output_reserve` is never sent.
    pub output_reserve: usize,
    /// Model calls one task may take before the run stops.
    pub max_turns: usize,
    /// Output limit sent with each request (`None`: the provider's default).
    pub max_output_tokens: Option<u32>,
    /// Reasoning effort sent with each request.
    pub reasoning: Option<ReasoningEffort>,
    /// Whether the status block shows `git status --short`.
    pub git_status: bool,
    /// The eviction settings given (flags over the config file's): each
    /// one given wins over a resumed session's, whose own stand for the
    /// rest (a new session: the defaults, [`cwl::Config::default`]).
    pub engine: cwl::EngineSettings,
    /// The strategy managing the context (`None`: the resumed session's,
    /// else CWL).
    pub strategy: Option<StrategyName>,
    /// The longest one of the strategy's side calls (a summary, a plan)
    /// may take; failed ones may cost the session three times this in all
    /// (see [`cwl_provider::side::SideGate`]).
    pub side_timeout: std::time::Duration,
    /// The strategy's own settings (`--strategy-option`, the config table
    /// `strategy_options`; `None`: the resumed session's, else the
    /// defaults).
    pub strategy_options: Option<serde_json::Value>,
    /// The model for the strategy's side calls (Self-GC's planner) on the
    /// same provider (`None`: the session's model).
    pub planner_model: Option<String>,
}

impl AgentOptions {
    /// Options for `model` with the default budget (80k) and limits.
    pub fn new(model: ModelInfo) -> Self {
        AgentOptions {
            model,
            budget: cwl::DEFAULT_BUDGET,
            output_reserve: 0,
            max_turns: DEFAULT_MAX_TURNS,
            max_output_tokens: None,
            reasoning: None,
            git_status: true,
            engine: cwl::EngineSettings::default(),
            strategy: None,
            strategy_options: None,
            side_timeout: cwl_provider::side::DEFAULT_SIDE_TIMEOUT,
            planner_model: None,
        }
    }

    /// The eviction settings: these options' where given, else `recorded`
    /// (a resumed session's), else the defaults.
    pub fn settings(&self, recorded: Option<Settings>) -> Settings {
        let base = recorded.unwrap_or_default();
        let engine = self.engine.apply(base.config(self.budget));
        Settings {
            strategy: self.strategy.unwrap_or(base.strategy),
            strategy_options: match (&self.strategy_options, self.strategy) {
                (Some(options), _) => options.clone(),
                (None, Some(strategy)) if strategy != base.strategy => serde_json::Value::Null,
                (None, _) => base.strategy_options,
            },
            ..Settings::of(&engine)
        }
    }

    /// The budget the engine enforces on the conversation: the budget (at
    /// most the hard limit) less the status block's reserve.
    pub fn engine_budget(&self) -> usize {
        self.budget
            .min(self.hard_limit())
            .saturating_sub(STATUS_RESERVE)
    }

    /// The largest request ever sent: the window less the output reserve.
    pub fn hard_limit(&self) -> usize {
        usize::try_from(self.model.context_window)
            .unwrap_or(usize::MAX)
            .saturating_sub(self.output_reserve)
    }
}

/// Why a run stopped before its task was done. The session file is
/// complete up to the failure in every case.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The budget cannot hold even the status block.
    #[error("budget of {budget} tokens is too small: at least {} tokens are needed (the status block alone reserves {STATUS_RESERVE})", STATUS_RESERVE + 1)]
    BudgetTooSmall {
        /// The budget given.
        budget: usize,
    },
    /// The model call failed (after retries, when the failure was transient).
    #[error("model call failed: {0}")]
    Provider(#[from] ProviderError),
    /// The task took too many model calls.
    #[error(
        "the model made {limit} calls on this task without finishing (limit: --max-turns {limit}); stopped, the session is saved"
    )]
    MaxTurns {
        /// The limit.
        limit: usize,
    },
    /// The next request would not fit the model's window.
    #[error(
        "the next request needs {tokens} tokens but the model's window allows {limit}; stopped without sending it, the session is saved (nothing more can be evicted: the open episode or the user turns are too large)"
    )]
    WindowExceeded {
        /// Tokens of the request.
        tokens: usize,
        /// The hard limit.
        limit: usize,
    },
    /// The task's text is larger than the session can hold; nothing was
    /// pushed.
    #[error(
        "the task is {bytes} bytes, more than the session can hold (at most {limit}); nothing was sent. Put the text in a file in the workspace and give a short task that asks the agent to read it"
    )]
    TaskTooLarge {
        /// The text's size in bytes.
        bytes: usize,
        /// The limit it broke, with its unit.
        limit: String,
    },
    /// The model sent a message the transcript cannot take.
    #[error("the model sent an invalid message: {0}")]
    Transcript(#[from] TranscriptError),
    /// The session file could not be written or read.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The output went away (a closed pipe); the run stopped quietly.
    #[error("output closed")]
    OutputClosed,
    /// The task was stopped through [`Agent::interrupt`] (Ctrl-C, SIGTERM):
    /// the call in progress was dropped, every call of the last reply has a
    /// result and an `interrupted` note is recorded.
    #[error("interrupted by {cause}")]
    Interrupted {
        /// What stopped it (e.g. `SIGINT`).
        cause: String,
    },
    /// The strategy refused its options.
    #[error(transparent)]
    StrategyOptions(cwl_session::strategy::OptionError),
    /// The session runs with a strategy this build does not offer.
    #[error("cannot resume: the session runs with an {0}")]
    Strategy(UnknownStrategy),
    /// [`Agent::continue_task`] was called but the session's last task
    /// finished.
    #[error("the session's last task finished; there is nothing to continue (give a new task)")]
    NothingToContinue,
}

/// Figures of the run so far (this process: a resumed session starts
/// from zero; `cwl sessions show` sums the whole file).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Tasks started.
    pub tasks: usize,
    /// Model calls of the main loop that succeeded (sub-agents' calls are
    /// in `delegated`).
    pub requests: usize,
    /// Prompt tokens the provider reported, summed, sub-agents' included.
    pub input_tokens: u64,
    /// Of which served from the provider's cache.
    pub cached_input_tokens: u64,
    /// Generated tokens, summed, sub-agents' included.
    pub output_tokens: u64,
    /// Cost in US dollars of the calls, sub-agents' included (`None` when
    /// the model has no prices: `null` in JSON, "unknown" in text).
    pub cost_usd: Option<f64>,
    /// The share of the figures above that sub-agents (`delegate`) used.
    pub delegated: Delegated,
    /// The largest request sent, in locally counted (calibrated) tokens.
    pub max_request_tokens: usize,
    /// Eviction passes that changed the view.
    pub eviction_passes: usize,
    /// Episodes touched by those passes (counted once per pass).
    pub episodes_evicted: usize,
    /// Tokens removed by those passes.
    pub tokens_evicted: usize,
    /// Model calls made while the conversation was over budget (the pass
    /// could not meet it, or had to wait one call for the latest response).
    pub over_budget_requests: usize,
    /// Tool calls answered (delimiter included).
    pub tool_calls: usize,
    /// Of which answered with an error.
    pub tool_errors: usize,
}

/// What sub-agents (`delegate` calls under cwm) used in a run: a share of
/// the run's totals, shown apart.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Delegated {
    /// Children run.
    pub runs: usize,
    /// Their model calls that succeeded.
    pub requests: usize,
    /// Their prompt tokens.
    pub input_tokens: u64,
    /// Of which served from the provider's cache.
    pub cached_input_tokens: u64,
    /// Their generated tokens.
    pub output_tokens: u64,
    /// Their cost in US dollars (`None` when the model has no prices).
    pub cost_usd: Option<f64>,
}

/// What one finished task gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    /// Model calls it took.
    pub turns: usize,
    /// The model's final text.
    pub answer: String,
}

/// A running session.
pub struct Agent {
    provider: Box<dyn Provider>,
    toolbox: Toolbox,
    context: Box<dyn Strategy>,
    counter: Arc<dyn TokenCounter>,
    writer: SessionWriter,
    options: AgentOptions,
    observer: Box<dyn Observer>,
    stats: Stats,
    budget_unmet: bool,
    /// The strategy's last health report worth telling (zone and kinds of
    /// alert).
    pressure: Option<(String, Vec<String>)>,
    /// Whether the last pass left the conversation over budget (deferred or not).
    over_budget: bool,
    /// Where the last checkpoint ended and its size, in bytes written by
    /// `writer` (zero before the first).
    checkpoint_end: u64,
    checkpoint_len: u64,
    interrupt: Interrupt,
    /// The text of the last task while it has no final answer yet.
    unfinished: Option<String>,
    /// Which calls ask the user first, and how.
    approvals: approval::Approvals,
    /// The strategy's notes as last written to the notes file.
    notes_written: Option<String>,
    /// Where the idle time between model calls is read.
    clock: Arc<dyn Clock>,
    /// When the last model call of this process ended, or the session
    /// was resumed (`None` before either: no gap is told the strategy).
    last_call_end: Option<std::time::Instant>,
    /// Idle time already passed at `last_call_end`: for a resumed
    /// session, since its last response was recorded.
    idle_carry: std::time::Duration,
    /// What the strategy's side calls may still cost this process.
    side_gate: cwl_provider::side::SideGate,
    /// Episodes inferred for tool use outside any the model opened.
    inference: inferred::Inference,
    /// The last task whose status block reminded the model of `delimiter`.
    reminded_task: usize,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("session", &self.writer.path())
            .field("context", &self.context)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts a new session in `session_dir`: writes the header, pushes the
    /// system prompt and the project instructions of the toolbox's root.
    pub fn create(
        provider: Box<dyn Provider>,
        toolbox: Toolbox,
        options: AgentOptions,
        session_dir: &Path,
        observer: Box<dyn Observer>,
    ) -> Result<Agent, AgentError> {
        check_budget(&options)?;
        let mut tools = toolbox.specs();
        tools.push(cwl::delimiter_spec());
        tools.push(cwl::recall_spec());
        let settings = options.settings(None);
        if settings.strategy == StrategyName::Cwm {
            tools.push(delegate::delegate_spec());
        }
        let info = SessionInfo {
            id: cwl_session::new_id(),
            timestamp: cwl_session::now(),
            cwd: toolbox.root().display().to_string(),
            provider: provider.name().to_string(),
            model: options.model.name.clone(),
            budget: options.budget as u64,
            tools: tools.clone(),
        };
        let mut writer = SessionWriter::create(session_dir, &info)?;
        writer.append(&settings.record())?;
        let counter: Arc<dyn TokenCounter> = Arc::new(O200k);
        let context = settings
            .strategy
            .create_with(
                settings
                    .session_config(options.engine_budget(), &info.model)
                    .classes(toolbox.classes()),
                Arc::clone(&counter),
                tools,
                &settings.strategy_options,
            )
            .map_err(AgentError::StrategyOptions)?;
        let mut agent = Agent::assemble(
            provider, toolbox, options, observer, context, counter, writer,
        );
        let prologue = crate::prompt::prologue(agent.toolbox.root());
        for message in prologue.messages {
            agent.push(message, None, None)?;
        }
        for note in prologue.notes {
            agent.note(note)?;
        }
        if agent.context.tokens() > agent.options.engine_budget() {
            agent.note(format!(
                "the prologue (system prompt, tools, project instructions) already takes {} tokens, over the budget of {}: every request will be over budget",
                agent.context.tokens(),
                agent.options.budget
            ))?;
        }
        Ok(agent)
    }

    /// Continues the session in file `path`, holding its write lock (it
    /// fails with [`SessionError::InUse`] while another process writes the
    /// session): restores its last checkpoint
    /// and replays what follows (or replays it all into a fresh engine), so
    /// the view is the same as when it stopped; cuts a torn last line, and
    /// answers tool calls left without a result with an error result (they
    /// are never run twice): a call recorded as started "may have run
    /// partly", the others did not run. The eviction settings are the session's unless
    /// `options` give others: then the whole history is replayed with them
    /// and the change is recorded.
    pub fn resume(
        provider: Box<dyn Provider>,
        toolbox: Toolbox,
        options: AgentOptions,
        path: &Path,
        observer: Box<dyn Observer>,
    ) -> Result<Agent, AgentError> {
        check_budget(&options)?;
        let (mut writer, mut loaded) = SessionWriter::reopen(path)?;
        // Sessions from before recall get it: their folded residues point to it.
        let offer_recall = !loaded.info.tools.iter().any(|t| t.name == cwl::RECALL);
        if offer_recall {
            loaded.info.tools.push(cwl::recall_spec());
        }
        let (tools, mcp_changes) =
            crate::mcp::resume::reconcile(&loaded.info.tools, &toolbox.specs());
        loaded.info.tools = tools;
        let counter: Arc<dyn TokenCounter> = Arc::new(O200k);
        let recorded = Settings::try_last(loaded.records.iter().map(|(_, record)| record))
            .map_err(AgentError::Strategy)?;
        let settings = options.settings(recorded.clone());
        let replayed = cwl_session::replay(
            &loaded,
            path,
            Arc::clone(&counter),
            settings
                .session_config(options.engine_budget(), &loaded.info.model)
                .classes(toolbox.classes()),
            cwl_session::ReplayOptions::configured(
                settings.strategy,
                settings.strategy_options.clone(),
            ),
        )?;
        if recorded.as_ref() != Some(&settings) {
            writer.append(&settings.record())?;
        }
        let since_response = cwl_session::since_last_response(&loaded);
        let mut agent = Agent::assemble(
            provider,
            toolbox,
            options,
            observer,
            replayed.context,
            counter,
            writer,
        );
        // The session sat idle since its last response: the first call
        // tells the strategy so (the provider's cache may have expired).
        if let Some(age) = since_response {
            agent.last_call_end = Some(agent.clock.now());
            agent.idle_carry = age;
        }
        // The replay retold what was noted already; sidecars it folded
        // again are rewritten if they went missing.
        agent.context.take_notes();
        agent.write_sidecars()?;
        for warning in loaded.warnings.iter().chain(&replayed.warnings) {
            agent.note(warning.clone())?;
        }
        let root = agent.toolbox.root().display().to_string();
        if root != loaded.info.cwd {
            agent.note(format!(
                "resumed in {root}; the session was started in {}",
                loaded.info.cwd
            ))?;
        }
        if agent.options.budget as u64 != loaded.info.budget {
            agent.note(format!(
                "budget changed from {} to {} tokens",
                loaded.info.budget, agent.options.budget
            ))?;
        }
        if offer_recall {
            agent.note(
                "this session predates the recall tool; it is offered from now on".to_string(),
            )?;
        }
        if let Some(changes) = mcp_changes {
            agent.note(changes)?;
        }
        if let Some(recorded) = recorded.filter(|r| *r != settings) {
            agent.note(format!(
                "eviction settings changed from {recorded} to {settings}; the history was replayed with the new ones"
            ))?;
        }
        for call in replayed.pending {
            let (text, is_error) = call.answer();
            agent.push(
                Message::tool_result(call.id, call.name, text, is_error),
                None,
                None,
            )?;
        }
        agent.unfinished = cwl_session::unfinished_task(&loaded);
        agent.note(format!(
            "resumed session {} ({} earlier tasks, {} of {} tokens in view, {})",
            loaded.info.id,
            replayed.tasks,
            agent.context.tokens(),
            agent.options.budget,
            match replayed.checkpoint {
                Some(line) => format!("from the checkpoint on line {line}"),
                None => "replayed from the start".to_string(),
            }
        ))?;
        Ok(agent)
    }

    /// An agent over `context`, writing to `writer`, with no figures yet.
    fn assemble(
        provider: Box<dyn Provider>,
        toolbox: Toolbox,
        options: AgentOptions,
        observer: Box<dyn Observer>,
        context: Box<dyn Strategy>,
        counter: Arc<dyn TokenCounter>,
        writer: SessionWriter,
    ) -> Agent {
        let priced = options.model.input_price.is_some() && options.model.output_price.is_some();
        let side_gate = cwl_provider::side::SideGate::new(options.side_timeout);
        // Other strategies keep their own account of unannotated work.
        let inference = if context.name() == "cwl" {
            inferred::Inference::new(options.engine_budget())
        } else {
            inferred::Inference::off()
        };
        Agent {
            provider,
            toolbox,
            context,
            counter,
            writer,
            options,
            observer,
            stats: Stats {
                cost_usd: priced.then_some(0.0),
                ..Stats::default()
            },
            budget_unmet: false,
            pressure: None,
            over_budget: false,
            checkpoint_end: 0,
            checkpoint_len: 0,
            interrupt: Interrupt::new(),
            unfinished: None,
            approvals: approval::Approvals::never(),
            notes_written: None,
            clock: Arc::new(SystemClock),
            last_call_end: None,
            idle_carry: std::time::Duration::ZERO,
            side_gate,
            inference,
            reminded_task: 0,
        }
    }

    /// Reads the idle time between model calls from `clock` (the
    /// machine's clock by default; tests pass a [`ManualClock`]). The
    /// idle time counted so far restarts from the new clock's present,
    /// keeping a resumed session's time since its last response.
    pub fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        self.last_call_end = self.last_call_end.map(|_| clock.now());
        self.clock = clock;
    }

    /// A handle on this agent's interrupt flag: triggering it stops the
    /// running task at once (see [`AgentError::Interrupted`]); a triggered
    /// flag stops every later task too until it is cleared.
    pub fn interrupt(&self) -> Interrupt {
        self.interrupt.clone()
    }

    /// Makes tool calls ask `approver` before they run, as `mode` says
    /// (an agent starts with [`ApprovalMode::Never`]). Tools approved
    /// "always" before are forgotten.
    pub fn set_approval(&mut self, mode: ApprovalMode, approver: Box<dyn Approver>) {
        self.approvals = approval::Approvals::new(mode, approver);
    }

    /// Which tool calls ask for approval.
    pub fn approval_mode(&self) -> ApprovalMode {
        self.approvals.mode()
    }

    /// The text of the session's last task when it has no final answer:
    /// it was interrupted, failed, or the process died while it ran.
    /// [`Agent::continue_task`] carries on with it.
    pub fn unfinished_task(&self) -> Option<&str> {
        self.unfinished.as_deref()
    }

    /// The context strategy's state: view, tokens, episodes.
    pub fn context(&self) -> &dyn Strategy {
        self.context.as_ref()
    }

    /// Whether the session ever got a model response (in this process or
    /// before it was resumed): one without any has nothing to resume.
    pub fn has_responses(&self) -> bool {
        self.stats.requests > 0
            || self
                .context
                .view()
                .any(|message| matches!(message, Message::Assistant { .. }))
    }

    /// Figures of this run.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The options in force.
    pub fn options(&self) -> &AgentOptions {
        &self.options
    }

    /// What `bash` commands may write.
    pub fn sandbox(&self) -> crate::tools::Sandbox {
        self.toolbox.config().sandbox
    }

    /// The session file.
    pub fn session_path(&self) -> PathBuf {
        self.writer.path().to_owned()
    }

    /// The session id.
    pub fn session_id(&self) -> String {
        self.writer.id()
    }

    /// The observer, to report more events (the CLI's summary) or ask
    /// whether the output is gone.
    pub fn observer(&mut self) -> &mut dyn Observer {
        self.observer.as_mut()
    }

    /// Replaces the observer (a front end taking over from the one the
    /// agent was built with, such as the full-screen UI); gives back the
    /// old one.
    pub fn set_observer(&mut self, observer: Box<dyn Observer>) -> Box<dyn Observer> {
        std::mem::replace(&mut self.observer, observer)
    }

    /// Changes the budget τ for the rest of this process (the session's
    /// header keeps the one it started with; `--budget` sets it again on
    /// resume). Records a note; refuses a budget too small for the status
    /// block.
    pub fn set_budget(&mut self, budget: usize) -> Result<(), AgentError> {
        let mut options = self.options.clone();
        options.budget = budget;
        check_budget(&options)?;
        let before = self.options.budget;
        self.options.budget = budget;
        self.context.set_budget(self.options.engine_budget());
        self.note(format!(
            "budget changed from {before} to {budget} tokens for the rest of this process"
        ))
    }

    /// Appends `message`, secrets redacted, to the engine and the session
    /// file.
    fn push(
        &mut self,
        message: Message,
        usage: Option<cwl::Usage>,
        cost_usd: Option<f64>,
    ) -> Result<Vec<cwl::DelimiterOutcome>, AgentError> {
        let message = self.redactor().redact_message(message);
        if !matches!(message, Message::Assistant { .. }) {
            self.infer(&message)?;
        }
        let outcomes = self.context.push(message.clone())?;
        self.writer.append(&Record::Message {
            timestamp: Some(cwl_session::now()),
            message,
            usage,
            cost_usd,
        })?;
        Ok(outcomes)
    }

    /// Applies and records the episodes inferred before `message` (see
    /// [`inferred`]): assistant messages before their size limits are
    /// checked, so calls that start an inferred episode are not taken for
    /// the prologue; other messages as they are pushed.
    fn infer(&mut self, message: &Message) -> Result<(), AgentError> {
        let redacted = self.redactor().redact_message(message.clone());
        for annotation in self.inference.before(&redacted, self.context.graph()) {
            match self.context.annotate(annotation.clone()) {
                Ok(_) => {
                    self.writer.append(&Record::Annotate {
                        annotation: annotation.clone(),
                    })?;
                    self.inference.applied(&annotation);
                }
                Err(error) => {
                    self.note(format!("an inferred episode was refused: {error}"))?;
                }
            }
        }
        Ok(())
    }

    /// Writes a checkpoint of the engine at the end of a task, so a resume
    /// restores it instead of replaying everything before it. It is skipped
    /// while less has been written since the last one than that one took:
    /// checkpoints then take at most about as much room as the rest of the
    /// file, and a resume never replays more than one checkpoint's worth.
    fn checkpoint(&mut self) -> Result<(), AgentError> {
        let since = self.writer.written() - self.checkpoint_end;
        if self.checkpoint_len > 0 && since < self.checkpoint_len {
            return Ok(());
        }
        let saved = self.context.save().map_err(|e| SessionError::Io {
            path: self.writer.path().to_owned(),
            source: std::io::Error::other(e),
        })?;
        let (pushes, checkpoint) = (saved.pushes, saved.state);
        let before = self.writer.written();
        self.writer
            .append(&Record::Checkpoint { pushes, checkpoint })?;
        self.checkpoint_end = self.writer.written();
        self.checkpoint_len = self.checkpoint_end - before;
        Ok(())
    }

    /// Opens a new session's window from a checkpoint of an earlier one
    /// (`cwl run --bootstrap`): its bootstrap prompt joins the prologue as
    /// a system message (in the session file, so a resume replays it) and
    /// notes say so, with the checkpoint's warnings. Meant right after
    /// [`Agent::create`], before the first task.
    pub fn bootstrap(
        &mut self,
        checkpoint: &cwl_cwm::TaskCheckpoint,
        warnings: Vec<String>,
    ) -> Result<(), AgentError> {
        self.push(Message::system(checkpoint.bootstrap_prompt()), None, None)?;
        for warning in warnings {
            self.note(format!("checkpoint: {warning}"))?;
        }
        self.note(format!(
            "started from the checkpoint of context window {} (version {}, {} responses): {}",
            checkpoint.window_id,
            checkpoint.state_version,
            checkpoint.responses,
            cwl::shorten(&checkpoint.task_goal, 80)
        ))
    }

    /// Answers a `delegate` call: a child run on its task with a window
    /// of its own (see [`delegate`]), its summary as the result; `spent`
    /// is set once a child starts and holds what its calls used.
    async fn delegate(
        &mut self,
        call: &cwl::ToolCall,
        spent: &mut Option<delegate::ChildUsage>,
    ) -> crate::tools::ToolOutput {
        use crate::tools::ToolOutput;
        let task = match delegate::task(&call.arguments) {
            Ok(task) => task,
            Err(error) => return ToolOutput::error(error),
        };
        match delegate::run_child(
            self.provider.as_ref(),
            &self.options.model,
            &self.toolbox,
            self.options.engine_budget(),
            &task,
            spent.insert(delegate::ChildUsage::default()),
        )
        .await
        {
            Ok((summary, turns)) => ToolOutput::ok(format!(
                "[sub-agent summary after {turns} model calls in its own context window]\n{summary}"
            )),
            Err(error) => ToolOutput::error(error),
        }
    }

    /// Writes the strategy's working notes to the session's notes file
    /// ([`cwl_session::notes_path`]) when they changed since last written; a
    /// temporary file renamed over it, so a reader never sees half. A
    /// file that cannot be written is noted and the run goes on (the
    /// notes stay in the strategy's state in the session file).
    fn write_notes(&mut self) -> Result<(), AgentError> {
        let Some(notes) = self.context.notes() else {
            return Ok(());
        };
        if self.notes_written.as_deref() == Some(notes.as_str()) {
            return Ok(());
        }
        let (path, written) = cwl_session::write_notes(self.writer.path(), &notes);
        self.notes_written = Some(notes);
        match written {
            Ok(()) => Ok(()),
            Err(error) => self.note(format!(
                "could not write the notes file {}: {error}; the notes stay in the session file",
                path.display()
            )),
        }
    }

    /// The session file as the store `recall` reads evicted messages from.
    fn transcript(&self) -> cwl_session::SessionTranscript {
        cwl_session::SessionTranscript::new(self.writer.path())
    }

    /// The redactor for the secret values the toolbox withholds.
    fn redactor(&self) -> &Redactor {
        self.toolbox.config().secrets.redactor()
    }

    /// Records that the task stops on `error` (a note in the session
    /// file) and tells the observer, which may leave the printing to
    /// whoever gets the error back.
    fn failed(&mut self, error: &AgentError) -> Result<(), AgentError> {
        let text = self.record_note(&error.to_string())?;
        self.observer.event(&Event::TaskFailed { error: text });
        Ok(())
    }

    /// Records a note (secrets redacted) and tells the observer.
    fn note(&mut self, text: String) -> Result<(), AgentError> {
        let text = self.record_note(&text)?;
        self.observer.event(&Event::Note { text });
        Ok(())
    }

    /// Writes a note, secrets redacted, to the session file; gives back
    /// the redacted text.
    fn record_note(&mut self, text: &str) -> Result<String, AgentError> {
        let text = self.redactor().redact(text).into_owned();
        self.writer.append(&Record::Note {
            timestamp: Some(cwl_session::now()),
            text: text.clone(),
        })?;
        Ok(text)
    }
}

fn check_budget(options: &AgentOptions) -> Result<(), AgentError> {
    let budget = options.budget.min(options.hard_limit());
    if budget <= STATUS_RESERVE {
        return Err(AgentError::BudgetTooSmall { budget });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_budget_leaves_room_for_the_status_block_and_the_window() {
        let mut options = AgentOptions::new(ModelInfo::unknown("m"));
        assert_eq!(options.budget, 80_000);
        assert_eq!(options.engine_budget(), 80_000 - STATUS_RESERVE);
        options.model.context_window = 50_000;
        options.output_reserve = 8_000;
        assert_eq!(options.hard_limit(), 42_000);
        assert_eq!(options.engine_budget(), 42_000 - STATUS_RESERVE);
        options.budget = STATUS_RESERVE;
        assert!(matches!(
            check_budget(&options),
            Err(AgentError::BudgetTooSmall {
                budget: STATUS_RESERVE
            })
        ));
    }
}
