//! The input editor: keys to text, history and what the user asks for.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The slash commands, for `/help` and completion.
pub const COMMANDS: [&str; 9] = [
    "/help",
    "/episodes",
    "/evict",
    "/recall",
    "/budget",
    "/model",
    "/sessions",
    "/resume",
    "/quit",
];

/// What a key asks the UI to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing beyond the edit already made.
    None,
    /// Send this text: a task or a command.
    Submit(String),
    /// Ctrl-C: cancel the running turn, or exit when pressed again.
    Interrupt,
    /// Scroll the conversation by this many lines (positive: up).
    Scroll(i32),
}

/// A multi-line editor with history: Enter sends, Alt-Enter or
/// Shift-Enter adds a line, Up/Down walk the history, Tab completes a
/// command.
#[derive(Debug, Clone, Default)]
pub struct Editor {
    /// The text being typed.
    pub text: String,
    history: Vec<String>,
    /// Position in `history` while walking it.
    recalled: Option<usize>,
}

impl Editor {
    /// Takes one key.
    pub fn key(&mut self, key: KeyEvent) -> Action {
        let newline = key
            .modifiers
            .intersects(KeyModifiers::ALT | KeyModifiers::SHIFT);
        match key.code {
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                return Action::Interrupt;
            }
            KeyCode::Enter if newline => self.text.push('\n'),
            KeyCode::Enter => {
                let text = std::mem::take(&mut self.text);
                self.recalled = None;
                if text.trim().is_empty() {
                    return Action::None;
                }
                if self.history.last() != Some(&text) {
                    self.history.push(text.clone());
                }
                return Action::Submit(text);
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.text.clear();
            }
            KeyCode::Char(_) if key.modifiers.contains(KeyModifiers::CONTROL) => {}
            KeyCode::Char(c) => self.text.push(c),
            KeyCode::Backspace => {
                self.text.pop();
            }
            KeyCode::Tab => {
                if let Some(done) = complete(&self.text) {
                    self.text = done.to_string();
                }
            }
            KeyCode::Up => self.walk(true),
            KeyCode::Down => self.walk(false),
            KeyCode::PageUp => return Action::Scroll(10),
            KeyCode::PageDown => return Action::Scroll(-10),
            _ => {}
        }
        Action::None
    }

    /// Inserts pasted text as it is (a bracketed paste: its newlines do
    /// not send).
    pub fn paste(&mut self, text: &str) {
        self.text
            .push_str(&text.replace("\r\n", "\n").replace('\r', "\n"));
    }

    fn walk(&mut self, back: bool) {
        if self.history.is_empty() {
            return;
        }
        let last = self.history.len() - 1;
        self.recalled = match (self.recalled, back) {
            (None, true) => Some(last),
            (None, false) => None,
            (Some(i), true) => Some(i.saturating_sub(1)),
            (Some(i), false) if i < last => Some(i + 1),
            (Some(_), false) => None,
        };
        self.text = self
            .recalled
            .map_or(String::new(), |i| self.history[i].clone());
    }
}

/// The one command `typed` is a prefix of, if exactly one.
pub fn complete(typed: &str) -> Option<&'static str> {
    if !typed.starts_with('/') || typed.contains(char::is_whitespace) {
        return None;
    }
    let mut found = COMMANDS.iter().filter(|c| c.starts_with(typed));
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// What a submitted text asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// A task for the model (`//` at the start sends one `/`).
    Task(&'a str),
    /// A known command and its argument (empty when none).
    Command(&'static str, &'a str),
    /// A `/word` that is no command: refused, never sent to the model.
    Unknown(&'a str),
}

/// Reads a submitted text: a command when it starts with `/`, else a task.
pub fn parse(text: &str) -> Request<'_> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix("//") {
        return Request::Task(&text[text.len() - rest.len() - 1..]);
    }
    if !text.starts_with('/') {
        return Request::Task(text);
    }
    let (word, argument) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    match COMMANDS.iter().find(|c| **c == word) {
        Some(command) => Request::Command(command, argument.trim()),
        None if word == "/exit" => Request::Command("/quit", ""),
        None => Request::Unknown(word),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(editor: &mut Editor, code: KeyCode, modifiers: KeyModifiers) -> Action {
        editor.key(KeyEvent::new(code, modifiers))
    }

    fn typed(editor: &mut Editor, text: &str) {
        for c in text.chars() {
            press(editor, KeyCode::Char(c), KeyModifiers::NONE);
        }
    }

    #[test]
    fn enter_sends_alt_enter_adds_a_line_and_history_walks() {
        let mut editor = Editor::default();
        typed(&mut editor, "one");
        press(&mut editor, KeyCode::Enter, KeyModifiers::ALT);
        typed(&mut editor, "two");
        assert_eq!(
            press(&mut editor, KeyCode::Enter, KeyModifiers::NONE),
            Action::Submit("one\ntwo".into())
        );
        assert_eq!(editor.text, "");
        typed(&mut editor, "three");
        press(&mut editor, KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(
            press(&mut editor, KeyCode::Enter, KeyModifiers::NONE),
            Action::None
        );
        press(&mut editor, KeyCode::Up, KeyModifiers::NONE);
        assert_eq!(editor.text, "three");
        press(&mut editor, KeyCode::Up, KeyModifiers::NONE);
        assert_eq!(editor.text, "one\ntwo");
        press(&mut editor, KeyCode::Up, KeyModifiers::NONE);
        assert_eq!(editor.text, "one\ntwo");
        press(&mut editor, KeyCode::Down, KeyModifiers::NONE);
        press(&mut editor, KeyCode::Down, KeyModifiers::NONE);
        assert_eq!(editor.text, "");
        assert_eq!(
            press(&mut editor, KeyCode::Char('c'), KeyModifiers::CONTROL),
            Action::Interrupt
        );
        assert_eq!(
            press(&mut editor, KeyCode::PageUp, KeyModifiers::NONE),
            Action::Scroll(10)
        );
    }

    #[test]
    fn tab_completes_a_unique_command_only() {
        let mut editor = Editor::default();
        typed(&mut editor, "/ep");
        press(&mut editor, KeyCode::Tab, KeyModifiers::NONE);
        assert_eq!(editor.text, "/episodes");
        assert_eq!(complete("/re"), None, "/recall and /resume");
        assert_eq!(complete("/rec"), Some("/recall"));
        assert_eq!(complete("fix"), None);
        assert_eq!(complete("/budget 5"), None);
    }

    #[test]
    fn commands_tasks_and_unknown_words() {
        assert_eq!(parse(" /budget 40k "), Request::Command("/budget", "40k"));
        assert_eq!(
            parse("/recall read-parser"),
            Request::Command("/recall", "read-parser")
        );
        assert_eq!(parse("/exit"), Request::Command("/quit", ""));
        assert_eq!(parse("/bogus do it"), Request::Unknown("/bogus"));
        assert_eq!(parse("//etc/hosts"), Request::Task("/etc/hosts"));
        assert_eq!(parse("fix /src"), Request::Task("fix /src"));
    }
}
