//! The UI's state machine: keys, pastes and the mouse in, the agent's
//! messages in, [`Effect`]s out. No terminal and no agent here, so every
//! rule (what Ctrl-C does when, which commands wait for a turn) is tested
//! without either.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tokio::sync::oneshot;

use super::input::{Action, COMMANDS, Editor, Request, parse};
use super::screen::{Entry, EpisodeRow, Screen};
use super::view::conversation_width;
use cwl_agent::agent::status::human_tokens;
use cwl_agent::agent::{ApprovalRequest, Decision, Event};

/// Work for the agent, done one at a time by the front end's worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// Run a task (a user turn).
    Task(String),
    /// `/episodes`: list the episodes.
    Episodes,
    /// `/evict`: preview the next eviction pass.
    Evict,
    /// `/recall ID`: show an evicted episode or user turn.
    Recall(String),
    /// `/budget N`: change the budget.
    Budget(String),
    /// `/model [NAME]`: show the model.
    Model(String),
    /// `/sessions`: list the saved sessions.
    Sessions,
    /// `/resume ID`: switch to another saved session (empty: list them).
    Resume(String),
}

/// What a new or resumed session shows first.
#[derive(Debug, Clone, PartialEq)]
pub struct Reset {
    /// The model's name.
    pub model: String,
    /// The session id.
    pub session: String,
    /// The budget τ.
    pub budget: usize,
    /// The context strategy's name (`cwl`, `cwm`).
    pub strategy: String,
    /// What `bash` commands may write (`off`, `workspace-write`, `read-only`).
    pub sandbox: String,
    /// Tokens in view.
    pub tokens: usize,
    /// The engine's episodes.
    pub episodes: Vec<EpisodeRow>,
}

/// What the worker tells the UI.
#[derive(Debug)]
pub enum FromAgent {
    /// An agent event.
    Event(Event),
    /// A tool call waits for the user's answer, sent back on the channel.
    Ask(ApprovalRequest, oneshot::Sender<Decision>),
    /// A command's answer.
    Output(String),
    /// A failed task or command.
    Error(String),
    /// The job is over (`cancelled`: by Ctrl-C); the episodes and the
    /// tokens in view as the engine has them now.
    Done {
        /// Whether Ctrl-C stopped it.
        cancelled: bool,
        /// The engine's episodes.
        episodes: Vec<EpisodeRow>,
        /// Tokens in view.
        tokens: usize,
        /// The budget τ (`/budget` may have changed it).
        budget: usize,
    },
    /// Another session took over (`/resume`), or the first one started.
    Reset(Reset),
}

/// What the UI asks of the loop around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Give the worker a job.
    Run(Job),
    /// Stop the running turn.
    Interrupt,
    /// Leave, with this exit status.
    Quit(i32),
}

/// The text `/help` shows.
pub const HELP: &str = "\
Enter sends · Alt-Enter (or Shift-Enter) adds a line · Up/Down history · Tab completes a command
PageUp/PageDown or the mouse wheel scroll · Ctrl-O shows tool output · Ctrl-U clears the input
Ctrl-C cancels the running turn; Ctrl-C again (or /quit) exits
/help            this text
/episodes        the episodes, their levels and residues
/evict           what the next eviction pass would remove (nothing is changed)
/recall ID       show an evicted episode (name, #id) or user turn (uN)
/budget N        change the budget τ: 40000, 40k or 50%
/model           the model, its window and prices
/sessions        the saved sessions
/resume ID       switch to a saved session
/quit            leave (the session is saved)
A line starting with another /word is refused; start a task with // to send a leading /";

/// The UI's state.
pub struct App {
    /// What is drawn.
    pub screen: Screen,
    editor: Editor,
    asking: Option<oneshot::Sender<Decision>>,
    cancelling: bool,
    idle_interrupts: usize,
    width: u16,
    height: u16,
}

impl App {
    /// A UI showing `screen` on a terminal `width` × `height`.
    pub fn new(screen: Screen, width: u16, height: u16) -> Self {
        App {
            screen,
            editor: Editor::default(),
            asking: None,
            cancelling: false,
            idle_interrupts: 0,
            width,
            height,
        }
    }

    /// The terminal's new size.
    pub fn resize(&mut self, width: u16, height: u16) {
        self.width = width;
        self.height = height;
    }

    /// Takes one key press.
    pub fn key(&mut self, key: KeyEvent) -> Option<Effect> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl_c =
            key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
        if !ctrl_c {
            self.idle_interrupts = 0;
        }
        if self.asking.is_some() && !ctrl_c {
            self.answer(key.code);
            return None;
        }
        if key.code == KeyCode::Char('o') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.screen.expanded = !self.screen.expanded;
            return None;
        }
        let action = self.editor.key(key);
        self.screen.input = self.editor.text.clone();
        match action {
            Action::None => None,
            Action::Submit(text) => self.submit(&text),
            Action::Interrupt => self.interrupt(),
            Action::Scroll(lines) => {
                self.scroll(lines.signum() * self.page());
                None
            }
        }
    }

    /// Takes a bracketed paste: the text goes into the input as it is.
    pub fn paste(&mut self, text: &str) {
        if self.asking.is_none() {
            self.editor.paste(text);
            self.screen.input = self.editor.text.clone();
        }
    }

    /// Scrolls the conversation by `lines` (positive: up).
    pub fn scroll(&mut self, lines: i32) {
        self.screen.scroll_by(lines, conversation_width(self.width));
    }

    /// Takes one message of the worker.
    pub fn from_agent(&mut self, message: FromAgent) {
        match message {
            // The question shows once it can be answered (with `Ask`), so
            // no key typed before lands in a question not yet asked.
            FromAgent::Event(Event::ApprovalRequest { .. }) => {}
            FromAgent::Event(event) => {
                self.screen.apply(&event);
            }
            FromAgent::Ask(request, answer) => {
                self.screen.approval = Some(cwl_agent::render::describe::call(
                    &request.name,
                    &request.arguments,
                ));
                self.asking = Some(answer);
            }
            FromAgent::Output(text) => self.screen.entries.push(Entry::Output(text)),
            FromAgent::Error(text) => self.screen.entries.push(Entry::Error(text)),
            FromAgent::Done {
                cancelled,
                episodes,
                tokens,
                budget,
            } => {
                self.screen.gauge.budget = budget;
                self.screen.busy = false;
                self.cancelling = false;
                self.asking = None;
                self.screen.approval = None;
                self.screen.set_episodes(episodes);
                if self.screen.gauge.tokens == 0 {
                    self.screen.gauge.tokens = tokens;
                }
                if cancelled {
                    self.screen
                        .entries
                        .push(Entry::Note("turn cancelled; the session continues".into()));
                }
            }
            FromAgent::Reset(reset) => {
                let entries = std::mem::take(&mut self.screen.entries);
                let mut screen = Screen::new(&reset.model, &reset.session, reset.budget);
                screen.strategy = (reset.strategy != "cwl").then(|| reset.strategy.clone());
                screen.sandbox = Some(reset.sandbox.clone());
                screen.entries = entries;
                screen.gauge.tokens = reset.tokens;
                screen.set_episodes(reset.episodes);
                screen.input = self.editor.text.clone();
                screen.expanded = self.screen.expanded;
                self.screen = screen;
            }
        }
    }

    /// Whether a turn or command is running.
    pub fn busy(&self) -> bool {
        self.screen.busy
    }

    fn page(&self) -> i32 {
        i32::from(self.height.saturating_sub(9).max(1))
    }

    fn answer(&mut self, code: KeyCode) {
        let decision = match code {
            KeyCode::Char('y' | 'Y') => Decision::Approve,
            KeyCode::Char('a' | 'A') => Decision::Always,
            KeyCode::Char('n' | 'N') | KeyCode::Esc => Decision::Deny { reason: None },
            _ => return,
        };
        if let Some(answer) = self.asking.take() {
            let _ = answer.send(decision);
        }
        self.screen.approval = None;
    }

    fn interrupt(&mut self) -> Option<Effect> {
        if let Some(answer) = self.asking.take() {
            let _ = answer.send(Decision::Deny {
                reason: Some("the user cancelled the turn with Ctrl-C".into()),
            });
            self.screen.approval = None;
        }
        if self.screen.busy {
            if self.cancelling {
                return Some(Effect::Quit(cwl_agent::cli::EXIT_INTERRUPTED));
            }
            self.cancelling = true;
            self.note("cancelling the turn… (Ctrl-C again exits)");
            return Some(Effect::Interrupt);
        }
        self.idle_interrupts += 1;
        if self.idle_interrupts > 1 {
            return Some(Effect::Quit(cwl_agent::cli::EXIT_INTERRUPTED));
        }
        self.note("Ctrl-C again (or /quit) exits; the session is saved");
        None
    }

    fn note(&mut self, text: &str) {
        self.screen.entries.push(Entry::Note(text.to_string()));
        self.screen.scroll = 0;
    }

    fn submit(&mut self, text: &str) -> Option<Effect> {
        self.screen.scroll = 0;
        let job = match parse(text) {
            Request::Task(task) => {
                if self.screen.busy {
                    self.error("a turn is running: wait for it, or Ctrl-C to cancel it (Up brings the text back)");
                    return None;
                }
                self.screen.busy = true;
                return Some(Effect::Run(Job::Task(task.to_string())));
            }
            Request::Unknown(word) => {
                self.screen
                    .entries
                    .push(Entry::User(text.trim().to_string()));
                self.error(&format!(
                    "unknown command {word}: not sent to the model. Commands: {}; start a task with // to send a leading /",
                    COMMANDS.join(" ")
                ));
                return None;
            }
            Request::Command(command, argument) => {
                self.screen
                    .entries
                    .push(Entry::User(text.trim().to_string()));
                match command {
                    "/help" => {
                        self.screen.entries.push(Entry::Output(HELP.to_string()));
                        return None;
                    }
                    "/quit" => return Some(Effect::Quit(0)),
                    "/episodes" => Job::Episodes,
                    "/evict" => Job::Evict,
                    "/recall" if argument.is_empty() => {
                        self.error("usage: /recall ID, where ID is an episode's name or #id, or uN for user turn N");
                        return None;
                    }
                    "/recall" => Job::Recall(argument.to_string()),
                    "/budget" if argument.is_empty() => {
                        let text = format!(
                            "budget τ {}; /budget 40k (or 40000, or 50% of the window) changes it",
                            human_tokens(self.screen.gauge.budget)
                        );
                        self.screen.entries.push(Entry::Output(text));
                        return None;
                    }
                    "/budget" => Job::Budget(argument.to_string()),
                    "/model" => Job::Model(argument.to_string()),
                    "/sessions" => Job::Sessions,
                    "/resume" => Job::Resume(argument.to_string()),
                    other => unreachable!("{other} is in COMMANDS but has no action"),
                }
            }
        };
        if self.screen.busy {
            self.error("that command waits for the running turn to end (Ctrl-C cancels it)");
            return None;
        }
        self.screen.busy = true;
        Some(Effect::Run(job))
    }

    fn error(&mut self, text: &str) {
        self.screen.entries.push(Entry::Error(text.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyEvent;

    fn press(app: &mut App, code: KeyCode) -> Option<Effect> {
        app.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn typed(app: &mut App, text: &str) -> Option<Effect> {
        for c in text.chars() {
            press(app, KeyCode::Char(c));
        }
        press(app, KeyCode::Enter)
    }

    fn ctrl_c(app: &mut App) -> Option<Effect> {
        app.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL))
    }

    fn done(app: &mut App, cancelled: bool) {
        app.from_agent(FromAgent::Done {
            cancelled,
            episodes: vec![],
            tokens: 0,
            budget: 1000,
        });
    }

    #[test]
    fn tasks_run_commands_wait_and_unknown_words_are_refused() {
        let mut app = App::new(Screen::new("m", "s", 1000), 120, 40);
        assert_eq!(
            typed(&mut app, "fix it"),
            Some(Effect::Run(Job::Task("fix it".into())))
        );
        assert!(app.busy());
        assert_eq!(typed(&mut app, "more"), None, "one turn at a time");
        assert_eq!(typed(&mut app, "/episodes"), None, "commands wait too");
        assert!(matches!(app.screen.entries.last(), Some(Entry::Error(e)) if e.contains("waits")));
        done(&mut app, false);
        assert!(!app.busy());
        assert_eq!(typed(&mut app, "/evict"), Some(Effect::Run(Job::Evict)));
        done(&mut app, false);
        assert_eq!(
            typed(&mut app, "/recall read-parser"),
            Some(Effect::Run(Job::Recall("read-parser".into())))
        );
        done(&mut app, false);
        assert_eq!(typed(&mut app, "/recall"), None);
        assert_eq!(typed(&mut app, "/bogus do it"), None);
        match app.screen.entries.last() {
            Some(Entry::Error(text)) => {
                assert!(
                    text.starts_with("unknown command /bogus: not sent"),
                    "{text}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(!app.busy(), "nothing was sent");
        assert_eq!(typed(&mut app, "/help"), None);
        assert!(
            matches!(app.screen.entries.last(), Some(Entry::Output(h)) if h.contains("/resume ID"))
        );
        assert_eq!(typed(&mut app, "/quit"), Some(Effect::Quit(0)));
    }

    #[test]
    fn ctrl_c_cancels_the_turn_then_exits() {
        let mut app = App::new(Screen::new("m", "s", 1000), 120, 40);
        typed(&mut app, "work");
        assert_eq!(ctrl_c(&mut app), Some(Effect::Interrupt));
        done(&mut app, true);
        assert!(
            matches!(app.screen.entries.last(), Some(Entry::Note(n)) if n.contains("cancelled"))
        );
        assert_eq!(ctrl_c(&mut app), None, "idle: the first one only warns");
        press(&mut app, KeyCode::Char('x'));
        assert_eq!(ctrl_c(&mut app), None, "a key in between starts over");
        assert_eq!(
            ctrl_c(&mut app),
            Some(Effect::Quit(cwl_agent::cli::EXIT_INTERRUPTED))
        );
        let mut app = App::new(Screen::new("m", "s", 1000), 120, 40);
        typed(&mut app, "work");
        assert_eq!(ctrl_c(&mut app), Some(Effect::Interrupt));
        assert_eq!(
            ctrl_c(&mut app),
            Some(Effect::Quit(cwl_agent::cli::EXIT_INTERRUPTED)),
            "a second one while cancelling exits"
        );
    }

    #[test]
    fn approvals_take_y_n_a_and_ctrl_c_denies() {
        let mut app = App::new(Screen::new("m", "s", 1000), 120, 40);
        typed(&mut app, "work");
        let request = ApprovalRequest {
            id: "c1".into(),
            name: "bash".into(),
            arguments: "{}".into(),
            mutating: true,
        };
        app.from_agent(FromAgent::Event(Event::ApprovalRequest {
            id: request.id.clone(),
            name: request.name.clone(),
            arguments: request.arguments.clone(),
            mutating: true,
        }));
        assert_eq!(
            app.screen.approval, None,
            "not asked until it can be answered"
        );
        let (tx, mut rx) = oneshot::channel();
        app.from_agent(FromAgent::Ask(request.clone(), tx));
        assert_eq!(app.screen.approval.as_deref(), Some("bash {}"));
        press(&mut app, KeyCode::Char('q'));
        assert!(rx.try_recv().is_err(), "other keys do not answer");
        press(&mut app, KeyCode::Char('a'));
        assert_eq!(rx.try_recv().unwrap(), Decision::Always);
        let (tx, mut rx) = oneshot::channel();
        app.from_agent(FromAgent::Ask(request, tx));
        assert_eq!(ctrl_c(&mut app), Some(Effect::Interrupt));
        assert!(matches!(rx.try_recv().unwrap(), Decision::Deny { .. }));
    }

    #[test]
    fn paste_keeps_newlines_and_scrolling_stays_in_the_conversation() {
        let mut app = App::new(Screen::new("m", "s", 1000), 120, 40);
        app.paste("line one\r\nline two");
        assert_eq!(app.screen.input, "line one\nline two");
        for i in 0..100 {
            app.screen.entries.push(Entry::Assistant(format!("m{i}")));
        }
        app.scroll(1000);
        assert_eq!(app.screen.scroll, 99);
        press(&mut app, KeyCode::PageDown);
        assert_eq!(app.screen.scroll, 99 - 31);
        app.scroll(-1000);
        assert_eq!(app.screen.scroll, 0);
    }
}
