//! `cwl chat` on a terminal: the loop that runs the full-screen UI.
//!
//! The agent lives on a worker task that runs one [`Job`] at a time and
//! reports through a channel; the UI loop reads keys (on a thread of its
//! own), the worker's messages and signals, and draws only when something
//! changed, so it never waits for the model.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{
    self, Event as Input, KeyCode, KeyEvent, KeyModifiers, MouseEventKind,
};
use tokio::sync::mpsc;

use crate::{
    App, Effect, Forward, FromAgent, Job, Reset, Screen, TerminalGuard, UiApprover, draw, engine,
};
use cwl_agent::agent::status::human_tokens;
use cwl_agent::agent::{Agent, AgentError, ApprovalMode, Interrupt};
use cwl_agent::cli::ChatArgs;
use cwl_agent::cli::EXIT_INTERRUPTED;
use cwl_agent::cli::advice::after_failure;
use cwl_agent::cli::setup::{Started, start};

/// Whether `cwl chat` opens the full-screen UI: not asked for plain lines
/// or JSON, and both stdin and stdout are terminals.
pub(crate) fn wanted(args: &ChatArgs) -> bool {
    !args.plain
        && !args.agent.json
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal()
}

/// Runs the chat full screen until `/quit` (exit 0), a second Ctrl-C or
/// SIGTERM (exit 130); the terminal is given back in every case.
pub(crate) async fn fullscreen(args: ChatArgs) -> anyhow::Result<()> {
    let mut started = start(&args.agent).await?;
    let (ui, mut from_agent) = mpsc::unbounded_channel();
    attach(&mut started, &ui);
    let interrupt = Arc::new(Mutex::new(started.agent.interrupt()));
    let first = reset(&started.agent);
    let (jobs, jobs_rx) = mpsc::unbounded_channel();
    let worker = tokio::spawn(work_loop(
        started,
        args,
        ui,
        Arc::clone(&interrupt),
        jobs_rx,
    ));
    let signals = Signals::listen()?;
    let guard = TerminalGuard::enter()?;
    let stop = Arc::new(AtomicBool::new(false));
    let outcome = run_ui(
        &mut from_agent,
        &jobs,
        &interrupt,
        first,
        read_input(Arc::clone(&stop)),
        signals,
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    // The turn stops: interrupted, and its output and approvals are gone.
    lock(&interrupt).trigger("the UI closed");
    drop(jobs);
    drop(from_agent);
    drop(guard);
    let started = tokio::time::timeout(Duration::from_secs(10), worker).await;
    let (code, why) = outcome?;
    match started {
        Ok(Ok(started)) => {
            started.summary();
            started.info(&format!(
                "{why}the session is saved; continue it with `cwl chat --resume {}`",
                started.agent.session_id()
            ));
            if code != 0 {
                drop(started);
                std::process::exit(code);
            }
        }
        Ok(Err(panicked)) => anyhow::bail!("the agent stopped: {panicked}"),
        Err(_) => anyhow::bail!("the agent did not stop within 10 s; the session is saved"),
    }
    Ok(())
}

/// SIGINT (sent by `kill`: Ctrl-C is a key in raw mode) and SIGTERM.
struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> anyhow::Result<Signals> {
        #[cfg(unix)]
        {
            use anyhow::Context as _;
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                int: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
                term: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The next signal: true for SIGTERM.
    async fn recv(&mut self) -> bool {
        #[cfg(unix)]
        {
            tokio::select! {
                Some(()) = self.int.recv() => false,
                Some(()) = self.term.recv() => true,
                else => std::future::pending().await,
            }
        }
        #[cfg(not(unix))]
        std::future::pending().await
    }
}

/// The UI loop; gives the exit status and what ended it (for the last
/// line printed).
async fn run_ui(
    from_agent: &mut mpsc::UnboundedReceiver<FromAgent>,
    jobs: &mpsc::UnboundedSender<Job>,
    interrupt: &Mutex<Interrupt>,
    first: Reset,
    mut input: mpsc::UnboundedReceiver<Input>,
    mut signals: Signals,
) -> anyhow::Result<(i32, &'static str)> {
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    terminal.clear()?;
    let size = terminal.size()?;
    let mut app = App::new(
        Screen::new(&first.model, &first.session, first.budget),
        size.width,
        size.height,
    );
    app.from_agent(FromAgent::Reset(first));
    let mut dirty = true;
    loop {
        if dirty {
            terminal.draw(|frame| draw(frame, &app.screen))?;
            dirty = false;
        }
        let effect = tokio::select! {
            Some(input) = input.recv() => match input {
                Input::Key(key) => {
                    dirty = true;
                    app.key(key)
                }
                Input::Paste(text) => {
                    dirty = true;
                    app.paste(&text);
                    None
                }
                Input::Mouse(mouse) => {
                    let lines = match mouse.kind {
                        MouseEventKind::ScrollUp => 3,
                        MouseEventKind::ScrollDown => -3,
                        _ => 0,
                    };
                    if lines != 0 {
                        dirty = true;
                        app.scroll(lines);
                    }
                    None
                }
                Input::Resize(width, height) => {
                    dirty = true;
                    app.resize(width, height);
                    terminal.autoresize()?;
                    None
                }
                _ => None,
            },
            message = from_agent.recv() => {
                let Some(message) = message else {
                    return Ok((0, ""));
                };
                dirty = true;
                let mut clear = matches!(message, FromAgent::Reset(_));
                app.from_agent(message);
                // A burst of deltas draws once.
                while let Ok(message) = from_agent.try_recv() {
                    clear |= matches!(message, FromAgent::Reset(_));
                    app.from_agent(message);
                }
                if clear {
                    // Starting a session may have printed over the screen.
                    terminal.clear()?;
                }
                None
            }
            terminate = signals.recv() => {
                dirty = true;
                if terminate {
                    return Ok((EXIT_INTERRUPTED, "SIGTERM: "));
                }
                app.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL))
            }
        };
        match effect {
            None => {}
            Some(Effect::Run(job)) => {
                // The worker is gone only when the agent stopped for good.
                let sent = jobs.send(job);
                if sent.is_err() {
                    return Ok((0, ""));
                }
            }
            Some(Effect::Interrupt) => lock(interrupt).trigger("Ctrl-C"),
            Some(Effect::Quit(0)) => return Ok((0, "")),
            Some(Effect::Quit(code)) => return Ok((code, "Ctrl-C again: ")),
        }
    }
}

/// Keys, pastes, the mouse and resizes, read on a thread of their own
/// until `stop` is set.
fn read_input(stop: Arc<AtomicBool>) -> mpsc::UnboundedReceiver<Input> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match event::poll(Duration::from_millis(50)) {
                Ok(true) => {
                    let Ok(input) = event::read() else { break };
                    if tx.send(input).is_err() {
                        break;
                    }
                }
                Ok(false) => {}
                Err(_) => break,
            }
        }
    });
    rx
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Points the agent's events and approvals at the UI.
fn attach(started: &mut Started, ui: &mpsc::UnboundedSender<FromAgent>) {
    started.agent.set_observer(Box::new(Forward(ui.clone())));
    let mode = started.agent.approval_mode();
    if mode != ApprovalMode::Never {
        started
            .agent
            .set_approval(mode, Box::new(UiApprover(ui.clone())));
    }
}

/// What the UI shows of `agent` before any event.
fn reset(agent: &Agent) -> Reset {
    Reset {
        model: agent.options().model.name.clone(),
        session: agent.session_id(),
        budget: agent.options().budget,
        strategy: agent.context().name().to_string(),
        sandbox: agent.sandbox().as_str().to_string(),
        tokens: agent.context().tokens(),
        episodes: engine::episode_rows(agent.context()),
    }
}

/// The agent and what it needs to run jobs.
struct Worker {
    started: Started,
    args: ChatArgs,
    ui: mpsc::UnboundedSender<FromAgent>,
    interrupt: Arc<Mutex<Interrupt>>,
}

/// Runs jobs until the UI closes; gives the agent back for the summary.
async fn work_loop(
    started: Started,
    args: ChatArgs,
    ui: mpsc::UnboundedSender<FromAgent>,
    interrupt: Arc<Mutex<Interrupt>>,
    mut jobs: mpsc::UnboundedReceiver<Job>,
) -> Started {
    let mut worker = Worker {
        started,
        args,
        ui,
        interrupt,
    };
    while let Some(job) = jobs.recv().await {
        let cancelled = worker.run(job).await;
        let agent = &worker.started.agent;
        let done = FromAgent::Done {
            cancelled,
            episodes: engine::episode_rows(agent.context()),
            tokens: agent.context().tokens(),
            budget: agent.options().budget,
        };
        if worker.ui.send(done).is_err() {
            break;
        }
    }
    worker.started
}

impl Worker {
    fn say(&self, message: FromAgent) {
        let _ = self.ui.send(message);
    }

    /// Runs one job; true when Ctrl-C cancelled it.
    async fn run(&mut self, job: Job) -> bool {
        let agent = &self.started.agent;
        let path = agent.session_path();
        let dir = path
            .parent()
            .map(std::path::Path::to_owned)
            .unwrap_or_default();
        match job {
            Job::Task(text) => return self.task(&text).await,
            Job::Episodes => self.say(FromAgent::Output(engine::episodes_text(agent.context()))),
            Job::Evict => self.say(FromAgent::Output(engine::preview_text(agent.context()))),
            Job::Recall(reference) => {
                match engine::recall_text(agent.context(), &path, &reference) {
                    Ok(text) => self.say(FromAgent::Output(text)),
                    Err(error) => {
                        self.say(FromAgent::Error(format!("recall {reference}: {error}")))
                    }
                }
            }
            Job::Budget(text) => self.budget(&text),
            Job::Model(name) => {
                let model = &agent.options().model;
                let price = |p: Option<f64>| p.map_or("unknown".to_string(), |p| format!("${p}/M"));
                let shown = format!(
                    "model {} · window {} tokens · input {} · output {}",
                    model.name,
                    human_tokens(usize::try_from(model.context_window).unwrap_or(usize::MAX)),
                    price(model.input_price),
                    price(model.output_price)
                );
                if name.is_empty() || name == model.name {
                    self.say(FromAgent::Output(shown));
                } else {
                    self.say(FromAgent::Error(format!(
                        "{shown}. A session keeps its model while it runs: /quit, then `cwl chat --resume {} --model {name}`",
                        agent.session_id()
                    )));
                }
            }
            Job::Sessions => self.say(sessions(&dir, &agent.session_id())),
            Job::Resume(name) if name.is_empty() => {
                self.say(sessions(&dir, &agent.session_id()));
                self.say(FromAgent::Output(
                    "/resume ID switches to one of them".into(),
                ));
            }
            Job::Resume(name) => self.resume(&name, &dir).await,
        }
        false
    }

    async fn task(&mut self, text: &str) -> bool {
        let result = self.started.agent.run_task(text).await;
        lock(&self.interrupt).clear();
        match result {
            Ok(_) | Err(AgentError::OutputClosed) => false,
            Err(AgentError::Interrupted { .. }) => true,
            Err(error @ AgentError::WindowExceeded { .. }) => {
                let advice = after_failure(&error, &self.started.agent, "cwl chat");
                self.say(FromAgent::Error(format!("{error}\n{advice}")));
                false
            }
            Err(error) => {
                self.say(FromAgent::Error(format!("the task failed: {error}")));
                false
            }
        }
    }

    fn budget(&mut self, text: &str) {
        let agent = &mut self.started.agent;
        let window = usize::try_from(agent.options().model.context_window).ok();
        let budget = text
            .parse::<cwl::Budget>()
            .map_err(|e| e.to_string())
            .and_then(|b| b.resolve(window).map_err(|e| e.to_string()));
        match budget {
            Ok(budget) => match agent.set_budget(budget) {
                Ok(()) => self.say(FromAgent::Output(format!(
                    "budget τ now {} tokens (this process; `--budget` keeps it on resume)",
                    human_tokens(budget)
                ))),
                Err(error) => self.say(FromAgent::Error(format!("/budget {text}: {error}"))),
            },
            Err(error) => self.say(FromAgent::Error(format!("/budget {text}: {error}"))),
        }
    }

    async fn resume(&mut self, name: &str, dir: &std::path::Path) {
        let current = self.started.agent.session_path();
        match cwl_session::find(dir, name) {
            Ok(path) if path == current => {
                self.say(FromAgent::Error(format!(
                    "/resume {name}: that is this session"
                )));
                return;
            }
            Ok(_) => {}
            Err(error) => {
                self.say(FromAgent::Error(format!("/resume {name}: {error}")));
                return;
            }
        }
        let mut args = self.args.agent.clone();
        args.resume = Some(name.to_string());
        args.session_dir = Some(dir.to_owned());
        match start(&args).await {
            Ok(mut resumed) => {
                attach(&mut resumed, &self.ui);
                *lock(&self.interrupt) = resumed.agent.interrupt();
                let old = std::mem::replace(&mut self.started, resumed);
                let old_id = old.agent.session_id();
                drop(old);
                self.say(FromAgent::Reset(reset(&self.started.agent)));
                self.say(FromAgent::Output(format!(
                    "resumed session {}; session {old_id} is saved",
                    self.started.agent.session_id()
                )));
            }
            Err(error) => self.say(FromAgent::Error(format!(
                "/resume {name}: {}",
                cwl_agent::cli::error_line(&error)
            ))),
        }
    }
}

/// `/sessions`: the most recent saved sessions.
fn sessions(dir: &std::path::Path, current: &str) -> FromAgent {
    match cwl_session::list(dir) {
        Ok(list) if list.is_empty() => FromAgent::Output("no saved sessions".into()),
        Ok(list) => {
            let mut text = String::new();
            for s in list.iter().take(15) {
                let this = if s.id == current { " (this one)" } else { "" };
                let first = s
                    .first_task
                    .as_deref()
                    .map(|t| cwl::shorten(&cwl_agent::render::describe::one_line(t), 50))
                    .unwrap_or_default();
                text.push_str(&format!(
                    "{}{this} · {} · {} tasks · {first}\n",
                    s.id, s.model, s.tasks
                ));
            }
            if list.len() > 15 {
                text.push_str(&format!(
                    "… and {} older (cwl sessions lists all)",
                    list.len() - 15
                ));
            }
            FromAgent::Output(text.trim_end().to_string())
        }
        Err(error) => FromAgent::Error(format!("cannot list the sessions: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Message, Usage};
    use cwl_agent::agent::Event;
    use cwl_provider::testing::{Reply, ScriptedServer};

    fn args(
        server: &ScriptedServer,
        work: &std::path::Path,
        sessions: &std::path::Path,
    ) -> ChatArgs {
        cwl_agent::cli::test_chat_args(server, work, sessions)
    }

    /// The worker's messages for one job, up to its `Done`.
    async fn job(
        jobs: &mpsc::UnboundedSender<Job>,
        ui: &mut mpsc::UnboundedReceiver<FromAgent>,
        job: Job,
    ) -> Vec<FromAgent> {
        jobs.send(job).unwrap();
        let mut got = Vec::new();
        loop {
            let message = ui.recv().await.expect("the worker answers");
            let done = matches!(message, FromAgent::Done { .. });
            got.push(message);
            if done {
                return got;
            }
        }
    }

    fn texts(messages: &[FromAgent]) -> Vec<String> {
        messages
            .iter()
            .filter_map(|m| match m {
                FromAgent::Output(text) => Some(format!("output: {text}")),
                FromAgent::Error(text) => Some(format!("error: {text}")),
                FromAgent::Reset(reset) => Some(format!("reset: {}", reset.session)),
                _ => None,
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_worker_runs_tasks_and_commands() {
        let server = ScriptedServer::start([Reply::openai(
            &Message::assistant_text("hello back"),
            Usage::default(),
        )])
        .await
        .unwrap();
        let work = tempfile::tempdir().unwrap();
        let sessions = tempfile::tempdir().unwrap();
        let args = args(&server, work.path(), sessions.path());
        let other = start(&args.agent).await.unwrap().agent.session_id();
        let mut started = start(&args.agent).await.unwrap();
        let id = started.agent.session_id();
        let (ui, mut from_agent) = mpsc::unbounded_channel();
        attach(&mut started, &ui);
        let (jobs, jobs_rx) = mpsc::unbounded_channel();
        let interrupt = Arc::new(Mutex::new(started.agent.interrupt()));
        let worker = tokio::spawn(work_loop(started, args, ui, interrupt, jobs_rx));

        let got = job(&jobs, &mut from_agent, Job::Task("hello".into())).await;
        assert!(got.iter().any(
            |m| matches!(m, FromAgent::Event(Event::TextDelta { text }) if text.contains("hello"))
        ));
        assert!(matches!(
            got.last(),
            Some(FromAgent::Done {
                cancelled: false,
                ..
            })
        ));

        let got = job(&jobs, &mut from_agent, Job::Budget("40k".into())).await;
        assert_eq!(
            texts(&got),
            ["output: budget τ now 40k tokens (this process; `--budget` keeps it on resume)"]
        );
        assert!(matches!(
            got.last(),
            Some(FromAgent::Done { budget: 40_000, .. })
        ));
        let got = job(&jobs, &mut from_agent, Job::Budget("lots".into())).await;
        assert!(
            texts(&got)[0].starts_with("error: /budget lots:"),
            "{:?}",
            texts(&got)
        );
        let got = job(&jobs, &mut from_agent, Job::Budget("10".into())).await;
        assert!(
            texts(&got)[0].starts_with("error: /budget 10:"),
            "{:?}",
            texts(&got)
        );

        let got = job(&jobs, &mut from_agent, Job::Model(String::new())).await;
        assert!(
            texts(&got)[0].starts_with("output: model m · window"),
            "{:?}",
            texts(&got)
        );
        let got = job(&jobs, &mut from_agent, Job::Model("other".into())).await;
        assert!(
            texts(&got)[0].contains("--model other"),
            "{:?}",
            texts(&got)
        );

        let got = job(&jobs, &mut from_agent, Job::Sessions).await;
        let listed = &texts(&got)[0];
        assert!(listed.contains(&format!("{id} (this one)")), "{listed}");
        assert!(listed.contains(&other), "{listed}");

        let got = job(&jobs, &mut from_agent, Job::Recall("nope".into())).await;
        assert!(
            texts(&got)[0].starts_with("error: recall nope:"),
            "{:?}",
            texts(&got)
        );

        let got = job(&jobs, &mut from_agent, Job::Resume(id.clone())).await;
        assert_eq!(
            texts(&got),
            [format!("error: /resume {id}: that is this session")]
        );
        let got = job(
            &jobs,
            &mut from_agent,
            Job::Resume("no-such-session".into()),
        )
        .await;
        assert!(
            texts(&got)[0].starts_with("error: /resume no-such-session:"),
            "{:?}",
            texts(&got)
        );
        let got = job(&jobs, &mut from_agent, Job::Resume(other.clone())).await;
        assert_eq!(
            texts(&got),
            [
                format!("reset: {other}"),
                format!("output: resumed session {other}; session {id} is saved")
            ]
        );

        drop(jobs);
        let started = worker.await.unwrap();
        assert_eq!(
            started.agent.session_id(),
            other,
            "the resumed session is the one kept"
        );
        assert_eq!(
            server.requests().len(),
            1,
            "only the task reached the model"
        );
    }
}
