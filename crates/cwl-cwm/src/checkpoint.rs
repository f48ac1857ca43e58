//! Cross-window state (section 6 of the document): what a fresh context
//! window needs to carry on a task, saved as JSON inside a human-readable
//! progress log, validated when loaded, and turned into the bootstrap
//! prompt that opens the new window.
//!
//! The progress log is the session's notes file (`<id>.notes.md`): the
//! goal, the tasks, the working notes and the latest compaction summary in
//! Markdown, then the same as JSON in a fenced block marked
//! [`FENCE`]. `cwl run --bootstrap FILE` reads either that file or the
//! bare JSON.

use serde::{Deserialize, Serialize};

/// The checkpoint format this build writes and reads.
pub const FORMAT: u32 = 1;

/// The info string of the fenced block holding the JSON in a progress log.
pub const FENCE: &str = "json cwm-checkpoint";

/// The first words of a bootstrap prompt: a strategy seeing them in a
/// system message knows its window continues an earlier one.
pub const RESUME_MARKER: &str = "[CONTEXT_WINDOW_RESUME]";

/// Earlier user turns a checkpoint keeps (the latest).
pub const TASKS_KEPT: usize = 10;

/// A task's state between context windows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskCheckpoint {
    /// Its format ([`FORMAT`]).
    pub format: u32,
    /// The window that wrote it: 1 for a session's first, n + 1 for one
    /// bootstrapped from window n.
    pub window_id: u32,
    /// Updates of the notes so far (1 for the first checkpoint).
    pub state_version: u64,
    /// The task being worked on: the latest user turn.
    pub task_goal: String,
    /// The user turns before it, oldest first (at most [`TASKS_KEPT`]).
    #[serde(default)]
    pub earlier_tasks: Vec<String>,
    /// The working notes.
    #[serde(default)]
    pub notes: String,
    /// The latest compaction summary of earlier work (empty: none).
    #[serde(default)]
    pub summary: String,
    /// Model responses in the window that wrote it when its notes were
    /// last brought up to date.
    #[serde(default)]
    pub responses: u64,
}

/// Why a loaded checkpoint cannot be used. The file it came from is left
/// as it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckpointError {
    /// A progress log without the fenced JSON block.
    #[error(
        "no checkpoint in it: expected a JSON object or a progress log with a ```{FENCE} block"
    )]
    Missing,
    /// JSON that does not parse as a checkpoint.
    #[error("its JSON is not a checkpoint (line {line}, column {column}): {message}")]
    Json {
        /// 1-based line within the JSON.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What serde said.
        message: String,
    },
    /// A format this build does not read.
    #[error("its format {0} is not supported (this build reads {FORMAT})")]
    Format(u32),
    /// Fields that make it unusable.
    #[error("it is not usable: {}", .0.join("; "))]
    Invalid(Vec<String>),
}

impl TaskCheckpoint {
    /// Reads a checkpoint from `text`: bare JSON, or a progress log with
    /// the fenced block; validated. Gives it with its warnings (usable,
    /// but worth telling).
    pub fn parse(text: &str) -> Result<(TaskCheckpoint, Vec<String>), CheckpointError> {
        let json = if text.trim_start().starts_with('{') {
            text
        } else {
            let opening = format!("```{FENCE}\n");
            let start = text
                .find(&opening)
                .map(|at| at + opening.len())
                .ok_or(CheckpointError::Missing)?;
            let end = text[start..]
                .find("\n```")
                .map(|at| start + at)
                .ok_or(CheckpointError::Missing)?;
            &text[start..end]
        };
        let checkpoint: TaskCheckpoint =
            serde_json::from_str(json).map_err(|error| CheckpointError::Json {
                line: error.line(),
                column: error.column(),
                message: error.to_string(),
            })?;
        let warnings = checkpoint.validate()?;
        Ok((checkpoint, warnings))
    }

    /// Checks the fields (the document's `validate`): errors make it
    /// unusable, warnings are given back.
    pub fn validate(&self) -> Result<Vec<String>, CheckpointError> {
        if self.format != FORMAT {
            return Err(CheckpointError::Format(self.format));
        }
        let mut errors = Vec::new();
        if self.task_goal.trim().is_empty() {
            errors.push("task_goal is empty: the new window would have no objective".to_string());
        }
        if self.window_id < 1 {
            errors.push(format!(
                "window_id must be at least 1, not {}",
                self.window_id
            ));
        }
        if self.state_version < 1 {
            errors.push(format!(
                "state_version must be at least 1, not {}",
                self.state_version
            ));
        }
        if !errors.is_empty() {
            return Err(CheckpointError::Invalid(errors));
        }
        let mut warnings = Vec::new();
        if self.notes.trim().is_empty() && self.summary.trim().is_empty() {
            warnings.push(
                "the checkpoint has neither notes nor a summary: the new window starts from the task alone"
                    .to_string(),
            );
        }
        Ok(warnings)
    }

    /// The JSON, pretty-printed.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The human-readable progress log, ending with the JSON block.
    pub fn progress_log(&self) -> String {
        let mut out = format!(
            "# Progress — window {} (v{})\n\nKept by the context-window manager outside the context window; the notes are shown to the model after the system prompt. `cwl run --bootstrap <this file>` starts a fresh window from it.\n\n**Goal:** {}\n",
            self.window_id, self.state_version, self.task_goal
        );
        if !self.earlier_tasks.is_empty() {
            out.push_str("\n## Earlier tasks\n");
            for task in &self.earlier_tasks {
                out.push_str(&format!("- {}\n", one_line(task)));
            }
        }
        out.push_str(&format!(
            "\n## Notes (after {} responses)\n{}\n",
            self.responses,
            if self.notes.is_empty() {
                "(none yet)"
            } else {
                &self.notes
            }
        ));
        if !self.summary.is_empty() {
            out.push_str(&format!("\n## Summary of earlier work\n{}\n", self.summary));
        }
        out.push_str(&format!("\n```{FENCE}\n{}\n```\n", self.to_json()));
        out
    }

    /// The system message that opens a window bootstrapped from it.
    pub fn bootstrap_prompt(&self) -> String {
        let mut lines = vec![
            format!("{RESUME_MARKER} Resuming from a checkpoint of an earlier context window."),
            format!(
                "Window: {} | Version: {}",
                self.window_id, self.state_version
            ),
            format!("Task: {}", self.task_goal),
        ];
        if !self.earlier_tasks.is_empty() {
            lines.push(format!("\nEarlier tasks ({}):", self.earlier_tasks.len()));
            lines.extend(
                self.earlier_tasks
                    .iter()
                    .map(|task| format!("  [DONE] {}", one_line(task))),
            );
        }
        if !self.notes.is_empty() {
            lines.push(format!("\nNotes:\n{}", self.notes));
        }
        if !self.summary.is_empty() {
            lines.push(format!("\nPrevious window summary:\n{}", self.summary));
        }
        lines.join("\n")
    }
}

/// The window number a bootstrap prompt names, if `text` is one.
pub fn bootstrapped_window(text: &str) -> Option<u32> {
    let rest = text.strip_prefix(RESUME_MARKER)?;
    let line = rest.lines().find_map(|l| l.strip_prefix("Window: "))?;
    line.split(' ').next()?.parse().ok()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint() -> TaskCheckpoint {
        TaskCheckpoint {
            format: FORMAT,
            window_id: 1,
            state_version: 3,
            task_goal: "Migrate user-service from axios to fetch".into(),
            earlier_tasks: vec!["Scan the\nrepository".into()],
            notes: "- Done: 12/23 files\n- Open: api.ts:42 type error".into(),
            summary: "Migration 52% complete.".into(),
            responses: 40,
        }
    }

    #[test]
    fn a_checkpoint_round_trips_through_json_and_the_progress_log() {
        let checkpoint = checkpoint();
        let (parsed, warnings) = TaskCheckpoint::parse(&checkpoint.to_json()).unwrap();
        assert_eq!(parsed, checkpoint);
        assert!(warnings.is_empty());
        let log = checkpoint.progress_log();
        assert!(log.starts_with("# Progress — window 1 (v3)"), "{log}");
        assert!(log.contains("**Goal:** Migrate user-service"));
        assert!(log.contains("- Scan the repository"));
        assert!(log.contains("## Summary of earlier work\nMigration 52% complete."));
        assert_eq!(TaskCheckpoint::parse(&log).unwrap().0, checkpoint);
        let prompt = checkpoint.bootstrap_prompt();
        assert!(prompt.starts_with(RESUME_MARKER));
        assert!(prompt.contains("Task: Migrate user-service from axios to fetch"));
        assert!(prompt.contains("  [DONE] Scan the repository"));
        assert!(prompt.contains("Notes:\n- Done: 12/23 files"));
        assert_eq!(bootstrapped_window(&prompt), Some(1));
        assert_eq!(bootstrapped_window("You are a coding agent."), None);
    }

    #[test]
    fn bad_checkpoints_are_refused_with_the_reason() {
        assert_eq!(
            TaskCheckpoint::parse("# Progress\n\nno block here"),
            Err(CheckpointError::Missing)
        );
        let torn = format!("x\n```{FENCE}\n{{\"format\": 1,\n");
        assert_eq!(TaskCheckpoint::parse(&torn), Err(CheckpointError::Missing));
        let error = TaskCheckpoint::parse("{\"format\": 1,\n \"window_id\": \"one\"}").unwrap_err();
        assert!(
            matches!(&error, CheckpointError::Json { line: 2, .. }),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("its JSON is not a checkpoint (line 2")
        );
        let mut later = checkpoint();
        later.format = 9;
        assert_eq!(
            TaskCheckpoint::parse(&later.to_json()),
            Err(CheckpointError::Format(9))
        );
        let mut empty = checkpoint();
        empty.task_goal = " ".into();
        empty.window_id = 0;
        empty.state_version = 0;
        let error = TaskCheckpoint::parse(&empty.progress_log())
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "it is not usable: task_goal is empty: the new window would have no objective; window_id must be at least 1, not 0; state_version must be at least 1, not 0"
        );
        let mut bare = checkpoint();
        bare.notes.clear();
        bare.summary.clear();
        let (_, warnings) = TaskCheckpoint::parse(&bare.to_json()).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }
}
