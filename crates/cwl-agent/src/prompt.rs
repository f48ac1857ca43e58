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

/// Reads the instruction files of `cwd`. Missing, empty or unreadable
/// files are skipped; a second file with the same text as the first (a
/// symlink, a copy) is skipped too.
pub fn instructions(cwd: &Path) -> Vec<Instructions> {
    let mut found: Vec<Instructions> = Vec::new();
    for file in INSTRUCTION_FILES {
        let Ok(bytes) = std::fs::read(cwd.join(file)) else {
            continue;
        };
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if text.len() > INSTRUCTION_MAX_BYTES {
            let mut end = INSTRUCTION_MAX_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str(&format!(
                "\n[... {file} is longer; read the rest with the read tool if needed]"
            ));
        }
        if text.trim().is_empty() || found.iter().any(|f| f.text == text) {
            continue;
        }
        found.push(Instructions {
            file: file.to_string(),
            text,
        });
    }
    found
}

/// The prologue messages of a new session in `cwd`: the system prompt,
/// then one system message per instruction file.
pub fn prologue(cwd: &Path) -> Vec<Message> {
    let mut messages = vec![Message::system(system_prompt(cwd))];
    for found in instructions(cwd) {
        messages.push(Message::system(format!(
            "Project instructions from {}:\n\n{}",
            found.file, found.text
        )));
    }
    messages
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
        assert_eq!(prologue(dir.path()).len(), 1);
        std::fs::write(dir.path().join("CLAUDE.md"), "Use tabs.").unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "Run make test.").unwrap();
        let messages = prologue(dir.path());
        assert_eq!(messages.len(), 3);
        assert!(
            matches!(&messages[1], Message::System { content } if content.contains("AGENTS.md") && content.ends_with("Run make test."))
        );
        assert!(
            matches!(&messages[2], Message::System { content } if content.contains("CLAUDE.md") && content.ends_with("Use tabs."))
        );
        std::fs::write(dir.path().join("CLAUDE.md"), "Run make test.").unwrap();
        assert_eq!(instructions(dir.path()).len(), 1);
        std::fs::write(dir.path().join("AGENTS.md"), "  \n").unwrap();
        assert_eq!(instructions(dir.path())[0].file, "CLAUDE.md");
    }

    #[test]
    fn long_instruction_files_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("AGENTS.md"),
            "é".repeat(INSTRUCTION_MAX_BYTES),
        )
        .unwrap();
        let found = instructions(dir.path());
        assert!(found[0].text.len() < INSTRUCTION_MAX_BYTES + 100);
        assert!(found[0].text.ends_with("if needed]"));
    }
}
