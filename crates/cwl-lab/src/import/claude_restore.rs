//! What Claude Code 2.0 and 1.0 sent before a compaction's summary
//! without logging it: the files it had read, re-read from disk, and its
//! todo list.
//!
//! After a compaction, Claude Code restores up to [`MAX_FILES`] of the
//! files its tools read or wrote, newest file modification first (a file
//! it only read ranks by when it was read, below every file it wrote),
//! each at most [`FILE_TOKENS`] and all within [`TOTAL_TOKENS`] (a file
//! that does not fit is passed over), as the two reminders of a Read call
//! ("Called the Read tool with the following input: …" and "Result of
//! calling the Read tool: …" with the numbered lines as the Read tool
//! returns them); then, when TodoWrite was used, the latest todo list. It
//! re-reads them from disk; the log holds what the tools last saw, which
//! [`Files`] rebuilds: the latest successful Read, with the Writes and
//! Edits that followed applied. Claude Code 2.1 logs these as
//! `attachment` lines, so this model is for older logs only.

use std::collections::HashMap;

use ::cwl::Message;
use serde::Deserialize;
use serde_json::Value;

/// Files restored after a compaction at most.
pub(crate) const MAX_FILES: usize = 5;
/// Tokens of one restored file at most (estimated as bytes / 4).
pub(crate) const FILE_TOKENS: usize = 5_000;
/// Tokens of all restored files at most.
pub(crate) const TOTAL_TOKENS: usize = 50_000;
/// Files remembered at most; the one touched longest ago goes first.
const TRACKED: usize = 32;

/// What a tool call does to the files, known once its result says it
/// succeeded.
enum Op {
    /// A read, and whether of a part of the file only.
    Read(String, bool),
    Write(String, String),
    Edit(String, Vec<Replace>),
    Todos(String),
}

#[derive(Deserialize)]
struct Replace {
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

#[derive(Deserialize)]
struct FileInput {
    file_path: Option<String>,
    content: Option<String>,
    old_string: Option<String>,
    new_string: Option<String>,
    #[serde(default)]
    replace_all: bool,
    edits: Option<Vec<Replace>>,
    todos: Option<Value>,
    offset: Option<Value>,
    limit: Option<Value>,
}

/// One file a tool read or wrote.
struct Tracked {
    path: String,
    /// Its lines as the tools last saw them, if known: all of them, or
    /// those partial reads showed.
    content: Option<String>,
    /// The file's length in lines when only part of it is known (a read
    /// with `offset` or `limit`, whose result gives the total).
    partial_of: Option<usize>,
    /// When a tool last wrote it (an ordinal), if one did.
    written: Option<u64>,
    /// When a tool last touched it.
    touched: u64,
}

/// The files and todo list Claude Code would restore after a compaction.
#[derive(Default)]
pub(crate) struct Files {
    pending: HashMap<String, Op>,
    files: Vec<Tracked>,
    clock: u64,
    /// What the Read tool appends after the numbered lines (a reminder),
    /// as last logged.
    read_suffix: String,
    todos: Option<String>,
}

impl Files {
    /// Notes a tool call of the main transcript.
    pub(crate) fn call(&mut self, id: &str, name: &str, input: &str) {
        let Ok(input) = serde_json::from_str::<FileInput>(input) else {
            return;
        };
        let op = match (name, input.file_path) {
            ("TodoWrite", _) => match input.todos {
                Some(todos) => Op::Todos(todos.to_string()),
                None => return,
            },
            ("Read", Some(path)) => Op::Read(path, input.offset.is_some() || input.limit.is_some()),
            ("Write", Some(path)) => Op::Write(path, input.content.unwrap_or_default()),
            ("Edit", Some(path)) => match (input.old_string, input.new_string) {
                (Some(old_string), Some(new_string)) => Op::Edit(
                    path,
                    vec![Replace {
                        old_string,
                        new_string,
                        replace_all: input.replace_all,
                    }],
                ),
                _ => return,
            },
            ("MultiEdit", Some(path)) => Op::Edit(path, input.edits.unwrap_or_default()),
            _ => return,
        };
        self.pending.insert(id.to_string(), op);
    }

    /// Notes a tool result: the call it answers takes effect unless it
    /// failed. `total_lines`: the file's length a Read result reports.
    pub(crate) fn result(
        &mut self,
        call_id: &str,
        content: &str,
        is_error: bool,
        total_lines: Option<usize>,
    ) {
        let Some(op) = self.pending.remove(call_id) else {
            return;
        };
        if is_error {
            return;
        }
        self.clock += 1;
        match op {
            Op::Todos(todos) => self.todos = Some(todos),
            Op::Read(path, partial) => {
                let read = numbered(content);
                if let Some((_, suffix)) = &read {
                    self.read_suffix = suffix.to_string();
                }
                let file = self.file(&path);
                if let Some((lines, _)) = read {
                    file.read(lines, partial, total_lines);
                }
            }
            Op::Write(path, text) => {
                let clock = self.clock;
                let file = self.file(&path);
                file.content = Some(text);
                file.partial_of = None;
                file.written = Some(clock);
            }
            Op::Edit(path, edits) => {
                let clock = self.clock;
                let file = self.file(&path);
                file.edit(&edits);
                file.written = Some(clock);
            }
        }
        self.rank();
    }

    /// The tracked file at `path`, touched now.
    fn file(&mut self, path: &str) -> &mut Tracked {
        let index = match self.files.iter().position(|f| f.path == path) {
            Some(index) => index,
            None => {
                self.files.push(Tracked {
                    path: path.to_string(),
                    content: None,
                    partial_of: None,
                    written: None,
                    touched: 0,
                });
                self.files.len() - 1
            }
        };
        let file = &mut self.files[index];
        file.touched = self.clock;
        file
    }

    /// Newest first, forgetting the file touched longest ago when too
    /// many are known.
    fn rank(&mut self) {
        if self.files.len() > TRACKED
            && let Some(stale) = (0..self.files.len()).min_by_key(|&i| self.files[i].touched)
        {
            self.files.remove(stale);
        }
        self.files
            .sort_by_key(|f| std::cmp::Reverse((f.written, f.touched)));
    }

    /// What Claude Code sent before the summary: the files, then the todo
    /// list. The files restored are what it knows of from then on.
    pub(crate) fn restored(&mut self) -> Vec<Message> {
        let mut messages = Vec::new();
        let mut total = 0;
        let mut kept = Vec::new();
        for file in std::mem::take(&mut self.files) {
            if messages.len() == MAX_FILES {
                break;
            }
            let Some(content) = file.whole() else {
                continue;
            };
            let text = render(&file.path, &content, &self.read_suffix);
            let tokens = text.len().div_ceil(4);
            if total + tokens > TOTAL_TOKENS {
                continue;
            }
            total += tokens;
            messages.push(Message::user(text));
            kept.push(file);
        }
        self.files = kept;
        if let Some(todos) = &self.todos {
            messages.push(Message::user(format!(
                "<system-reminder>\nYour todo list has changed. DO NOT mention this explicitly to the user. Here are the latest contents of your todo list:\n\n{todos}. Continue on with the tasks at hand if applicable.\n</system-reminder>"
            )));
        }
        messages
    }
}

impl Tracked {
    /// Takes a read's lines: a whole file, or the part a read with
    /// `offset` or `limit` showed of a file of `total` lines, added to the
    /// parts known when no whole copy is.
    fn read(&mut self, lines: String, partial: bool, total: Option<usize>) {
        let known_whole = self.content.is_some() && self.partial_of.is_none();
        match (partial, total) {
            (true, _) if known_whole => {}
            (true, Some(total)) if lines.split('\n').count() < total => {
                self.content = Some(match self.content.take() {
                    Some(known) => format!("{known}\n{lines}"),
                    None => lines,
                });
                self.partial_of = Some(total);
            }
            (true, None) if self.content.is_some() => {}
            _ => {
                self.content = Some(lines);
                self.partial_of = None;
            }
        }
    }

    /// Applies a successful edit to what is known of the file.
    fn edit(&mut self, edits: &[Replace]) {
        let Some(text) = self.content.as_mut() else {
            return;
        };
        for edit in edits {
            let before = text.matches('\n').count();
            *text = if edit.replace_all {
                text.replace(&edit.old_string, &edit.new_string)
            } else {
                text.replacen(&edit.old_string, &edit.new_string, 1)
            };
            if let Some(total) = self.partial_of.as_mut() {
                let after = text.matches('\n').count();
                *total = (*total + after).saturating_sub(before).max(1);
            }
        }
    }

    /// The whole file as far as the log tells: a file known only in part
    /// is estimated as its known lines repeated to its length (lines of
    /// the same file are the best sample of the rest's size).
    fn whole(&self) -> Option<String> {
        let content = self.content.as_ref()?;
        let Some(total) = self.partial_of else {
            return Some(content.clone());
        };
        let known: Vec<&str> = content.split('\n').collect();
        let lines: Vec<&str> = known.iter().copied().cycle().take(total).collect();
        Some(lines.join("\n"))
    }
}

/// The file's lines and what follows them, from a Read result of
/// numbered lines (`     1→text`); `None` when it holds none (an error,
/// an image, an unchanged-file notice).
fn numbered(result: &str) -> Option<(String, &str)> {
    let mut lines = Vec::new();
    let (mut offset, mut end) = (0, 0);
    for line in result.split('\n') {
        let Some((number, text)) = line.split_once('→') else {
            break;
        };
        let number = number.trim_start();
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        lines.push(text);
        end = offset + line.len();
        offset = end + 1;
    }
    if lines.is_empty() {
        return None;
    }
    Some((lines.join("\n"), &result[end..]))
}

/// A restored file as Claude Code sends it: the Read call and its
/// result, numbered lines cut to [`FILE_TOKENS`].
fn render(path: &str, content: &str, suffix: &str) -> String {
    let mut numbered = String::new();
    for (n, line) in content.split('\n').enumerate() {
        let next = format!("{:>6}→{line}", n + 1);
        if numbered.len() + next.len() + 1 > FILE_TOKENS * 4 {
            break;
        }
        if n > 0 {
            numbered.push('\n');
        }
        numbered.push_str(&next);
    }
    numbered.push_str(suffix);
    let input = serde_json::json!({ "file_path": path });
    let result = Value::String(numbered);
    format!(
        "<system-reminder>\nCalled the Read tool with the following input: {input}\n</system-reminder>\n<system-reminder>\nResult of calling the Read tool: {result}\n</system-reminder>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_result(lines: &[&str]) -> String {
        let numbered: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(n, l)| format!("{:>6}→{l}", n + 1))
            .collect();
        format!(
            "{}\n\n<system-reminder>\nmalware\n</system-reminder>\n",
            numbered.join("\n")
        )
    }

    #[test]
    fn a_read_result_parses_back_to_its_lines_and_reminder() {
        let text = read_result(&["a = 1", "", "b = 2", ""]);
        let (lines, suffix) = numbered(&text).unwrap();
        assert_eq!(lines, "a = 1\n\nb = 2\n");
        assert_eq!(
            suffix,
            "\n\n<system-reminder>\nmalware\n</system-reminder>\n"
        );
        assert_eq!(
            numbered("<tool_use_error>no such file</tool_use_error>"),
            None
        );
    }

    #[test]
    fn restores_the_newest_written_files_first_with_edits_applied() {
        let mut files = Files::default();
        files.call("r1", "Read", r#"{"file_path":"/p/a.py"}"#);
        files.result("r1", &read_result(&["x = 1", ""]), false, None);
        files.call("r2", "Read", r#"{"file_path":"/p/b.py"}"#);
        files.result("r2", &read_result(&["y = 2", ""]), false, None);
        files.call(
            "e1",
            "Edit",
            r#"{"file_path":"/p/a.py","old_string":"x = 1","new_string":"x = 10"}"#,
        );
        files.result("e1", "ok", false, None);
        files.call(
            "e2",
            "Edit",
            r#"{"file_path":"/p/b.py","old_string":"y","new_string":"z"}"#,
        );
        files.result("e2", "failed", true, None);
        files.call(
            "t",
            "TodoWrite",
            r#"{"todos":[{"content":"fix a","status":"pending"}]}"#,
        );
        files.result("t", "ok", false, None);
        let restored = files.restored();
        let texts: Vec<&str> = restored
            .iter()
            .map(|m| match m {
                Message::User { content } => content.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(texts.len(), 3);
        assert!(
            texts[0].contains(r#"{"file_path":"/p/a.py"}"#),
            "{}",
            texts[0]
        );
        assert!(
            texts[0].contains(r#"     1→x = 10\n     2→\n\n<system-reminder>"#),
            "{}",
            texts[0]
        );
        assert!(texts[1].contains("y = 2"), "a failed edit changes nothing");
        assert!(texts[2].contains("Your todo list has changed") && texts[2].contains("fix a"));
    }

    #[test]
    fn a_file_is_cut_and_the_total_is_capped() {
        let mut files = Files::default();
        let long: Vec<String> = (0..3_000)
            .map(|n| format!("line {n} of a long file"))
            .collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        for n in 0..12 {
            let id = format!("r{n}");
            files.call(&id, "Read", &format!(r#"{{"file_path":"/p/{n}.txt"}}"#));
            files.result(&id, &read_result(&long), false, None);
        }
        let restored = files.restored();
        assert_eq!(restored.len(), MAX_FILES);
        for message in &restored {
            let Message::User { content } = message else {
                panic!()
            };
            assert!(
                content.len() <= FILE_TOKENS * 4 * 11 / 10,
                "{}",
                content.len()
            );
        }
        assert!(
            files.files.len() <= MAX_FILES,
            "only the restored are remembered"
        );
    }
}
