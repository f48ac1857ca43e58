//! The prologue: a minimal system prompt that teaches the delimiter
//! protocol, and the project's instruction files.
//!
//! Everything here is pushed before the first episode starts, so the
//! engine treats it as protected prologue and never evicts it.

use std::path::Path;

use cwl::Message;

/// Project instruction files read from the working directory, in order.
pub const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
/// Bytes of one instruction file kept at most.
pub const INSTRUCTION_MAX_BYTES: usize = 20_000;

const SYSTEM_PROMPT: &str = "\
You are cwl, a coding agent working in the project at {cwd}. You act through \
tools: read, write, edit, bash, grep, glob, ls, delimiter and recall. Work on the \
user's task on your own until it is done, then reply briefly in plain text \
without calling tools: that ends the task. More tasks may follow in the same \
session.

# Episodes
Your context is kept under a token budget: old work is evicted, oldest first. \
Use the `delimiter` tool to mark your work as episodes so the right things \
are kept:
1. Before searching or reading, start an exploration episode: \
{\"action\":\"start\",\"name\":\"find-login\",\"type\":\"expl\"}.
2. When you know enough, end it with what you learned: \
{\"action\":\"end\",\"description\":\"login is in src/auth.rs fn login (line 40); \
tokens are checked in src/token.rs\"}. Put every fact you will need later \
(paths, names, line numbers, decisions) in the description: once the episode \
is evicted, the description is all that remains of it.
3. Before changing anything, start an action episode naming the exploration \
episodes it relies on: \
{\"action\":\"start\",\"name\":\"fix-login\",\"type\":\"act\",\"dependencies\":[\"find-login\"]}. \
Edit, write and run commands in it, then end it with {\"action\":\"end\"}.
One episode is active at a time and names are unique. write and edit are \
refused inside an exploration episode. Several short, focused episodes evict \
better than one long one. If you need the details of an evicted episode, \
`recall` it by the name or id its residue shows: {\"episode\":\"find-login\"}.

The harness appends a <status> block to the conversation: git status, \
context use and the active episode. It is not from the user and is replaced \
every turn. If it warns that the budget cannot be met, end your episode soon.

# Working
- Find code with grep and glob; read only the lines you need (offset, limit).
- Edit with text copied exactly from the file; read it again if an edit fails.
- Check your changes with bash (build, tests or a quick command) when you can.
- Do not undo changes you did not make. Stay inside the project directory.
- Be concise. End each task with what you did and anything left open.";

/// The system prompt for a session working in `cwd`.
pub fn system_prompt(cwd: &Path) -> String {
    SYSTEM_PROMPT.replace("{cwd}", &cwd.display().to_string())
}

/// One project instruction file found in the working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instructions {
    /// The file name (`AGENTS.md`, `CLAUDE.md`).
    pub file: String,
    /// Its text, capped at [`INSTRUCTION_MAX_BYTES`].
    pub text: String,
}

/// The instruction files of a directory: those loaded, and why others
/// were not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstructionFiles {
    /// The files loaded, in [`INSTRUCTION_FILES`] order.
    pub found: Vec<Instructions>,
    /// One line per file that exists but was refused (not UTF-8 text, not
    /// readable), naming the file and why, for the user.
    pub refused: Vec<String>,
}

/// Reads the instruction files of `cwd`. Missing or empty files are
/// skipped; a second file with the same text as the first (a symlink, a
/// copy) is skipped too. A file that is not UTF-8 text (invalid UTF-8 or a
/// NUL byte in its first [`INSTRUCTION_MAX_BYTES`]) or cannot be read is
/// refused: its content never reaches the prompt.
pub fn instructions(cwd: &Path) -> InstructionFiles {
    let mut files = InstructionFiles::default();
    for file in INSTRUCTION_FILES {
        let text = match read_text(&cwd.join(file)) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(why) => {
                files.refused.push(format!(
                    "{file} was not loaded as project instructions: {why}"
                ));
                continue;
            }
        };
        if text.trim().is_empty() || files.found.iter().any(|f| f.text == text) {
            continue;
        }
        files.found.push(Instructions {
            file: file.to_string(),
            text,
        });
    }
    files
}

/// The text of instruction file `path`, capped, with a line saying where
/// the rest is; `None` when it does not exist, an error saying why it
/// cannot be used otherwise.
fn read_text(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    let file = path.file_name().unwrap_or_default().to_string_lossy();
    let opened = match std::fs::File::open(path) {
        Ok(opened) => opened,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("it cannot be read ({e})")),
    };
    // One char past the cap shows whether the file is longer.
    let mut bytes = Vec::new();
    opened
        .take(INSTRUCTION_MAX_BYTES as u64 + 4)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("it cannot be read ({e})"))?;
    let longer = bytes.len() > INSTRUCTION_MAX_BYTES;
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) => text,
        // A character cut by the read limit, not bad data.
        Err(e) if longer && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(e) => {
            return Err(format!(
                "it is not UTF-8 text (invalid byte at offset {}); save it as UTF-8 to use it",
                e.valid_up_to()
            ));
        }
    };
    if let Some(at) = text.find('\0') {
        return Err(format!(
            "it is not text (a NUL byte at offset {at}); save it as UTF-8 text to use it"
        ));
    }
    let mut text = text.strip_prefix('\u{feff}').unwrap_or(text).to_owned();
    if longer {
        let mut end = INSTRUCTION_MAX_BYTES.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(&format!(
            "\n[... {file} is longer; read the rest with the read tool if needed]"
        ));
    }
    Ok(Some(text))
}

/// The prologue of a new session: its messages, and notes for the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Prologue {
    /// The system prompt, then one system message per instruction file.
    pub messages: Vec<Message>,
    /// Why instruction files were refused ([`InstructionFiles::refused`]).
    pub notes: Vec<String>,
}

/// The prologue of a new session in `cwd`: the system prompt, then one
/// system message per instruction file loaded, and a note per file refused.
pub fn prologue(cwd: &Path) -> Prologue {
    let mut messages = vec![Message::system(system_prompt(cwd))];
    let files = instructions(cwd);
    for found in files.found {
        messages.push(Message::system(format!(
            "Project instructions from {}:\n\n{}",
            found.file, found.text
        )));
    }
    Prologue {
        messages,
        notes: files.refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{O200k, TokenCounter};

    #[test]
    fn system_prompt_is_under_1000_tokens_and_teaches_the_protocol() {
        let prompt = system_prompt(Path::new("/home/someone/projects/a-fairly-long-name"));
        let tokens = O200k.count(&prompt);
        assert!(tokens < 1000, "system prompt is {tokens} tokens");
        for needle in [
            "\"type\":\"expl\"",
            "\"type\":\"act\"",
            "\"dependencies\"",
            "\"description\"",
            "<status>",
            "/home/someone/projects/a-fairly-long-name",
        ] {
            assert!(prompt.contains(needle), "prompt lacks {needle}");
        }
        assert!(!prompt.contains("{cwd}"));
    }

    #[test]
    fn loads_instruction_files_in_order_and_skips_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(prologue(dir.path()).messages.len(), 1);
        std::fs::write(dir.path().join("CLAUDE.md"), "Use tabs.").unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "Run make test.").unwrap();
        let messages = prologue(dir.path()).messages;
        assert_eq!(messages.len(), 3);
        assert!(
            matches!(&messages[1], Message::System { content } if content.contains("AGENTS.md") && content.ends_with("Run make test."))
        );
        assert!(
            matches!(&messages[2], Message::System { content } if content.contains("CLAUDE.md") && content.ends_with("Use tabs."))
        );
        std::fs::write(dir.path().join("CLAUDE.md"), "Run make test.").unwrap();
        assert_eq!(instructions(dir.path()).found.len(), 1);
        std::fs::write(dir.path().join("AGENTS.md"), "  \n").unwrap();
        assert_eq!(instructions(dir.path()).found[0].file, "CLAUDE.md");
    }

    #[test]
    fn long_instruction_files_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("AGENTS.md"),
            "é".repeat(INSTRUCTION_MAX_BYTES),
        )
        .unwrap();
        let files = instructions(dir.path());
        assert!(files.refused.is_empty(), "{:?}", files.refused);
        let found = files.found;
        assert!(found[0].text.len() <= INSTRUCTION_MAX_BYTES + 100);
        assert!(found[0].text.len() > INSTRUCTION_MAX_BYTES - 4);
        assert!(found[0].text.ends_with("if needed]"));
    }

    #[test]
    fn files_that_are_not_utf8_text_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), b"ok\xff\xfe binary").unwrap();
        std::fs::write(dir.path().join("CLAUDE.md"), "Use tabs.").unwrap();
        let files = instructions(dir.path());
        assert_eq!(files.found.len(), 1);
        assert_eq!(files.found[0].file, "CLAUDE.md");
        assert_eq!(
            files.refused,
            [
                "AGENTS.md was not loaded as project instructions: it is not UTF-8 text (invalid byte at offset 2); save it as UTF-8 to use it"
            ]
        );

        std::fs::write(dir.path().join("AGENTS.md"), "text\0more").unwrap();
        let files = instructions(dir.path());
        assert!(
            files.refused[0].contains("a NUL byte at offset 4"),
            "{:?}",
            files.refused
        );

        std::fs::remove_file(dir.path().join("AGENTS.md")).unwrap();
        std::fs::create_dir(dir.path().join("AGENTS.md")).unwrap();
        let files = instructions(dir.path());
        assert!(
            files.refused[0]
                .starts_with("AGENTS.md was not loaded as project instructions: it cannot be read"),
            "{:?}",
            files.refused
        );
        assert_eq!(prologue(dir.path()).notes, files.refused);
    }

    #[test]
    fn a_character_cut_by_the_cap_is_not_a_refusal_and_a_bom_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = "a".repeat(INSTRUCTION_MAX_BYTES + 2);
        text.push('€');
        std::fs::write(dir.path().join("AGENTS.md"), &text).unwrap();
        let files = instructions(dir.path());
        assert!(files.refused.is_empty(), "{:?}", files.refused);
        assert!(files.found[0].text.ends_with("if needed]"));

        std::fs::write(dir.path().join("AGENTS.md"), "\u{feff}Run make.").unwrap();
        assert_eq!(instructions(dir.path()).found[0].text, "Run make.");
    }
}
