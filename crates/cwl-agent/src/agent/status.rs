//! The status block: a short note appended at the tail of every request
//! (git status, context use, the active episode). It is built fresh for
//! each model call and never pushed into the engine or the session file,
//! so it never enters the cached prefix and never accumulates.

use std::path::Path;
use std::time::Duration;

use cwl::{EpisodeKind, Message, TokenCounter};

use cwl_provider::secrets::Secrets;

/// The block's first line; the demo model and tests recognise it by this.
pub const STATUS_OPEN: &str = "<status>";
/// The block's last line.
pub const STATUS_CLOSE: &str = "</status>";
/// Tokens kept free under the budget for the status block: the engine's
/// budget is the user's budget less this, so the whole request fits.
pub const STATUS_RESERVE: usize = 300;
/// Lines of `git status --short` shown at most.
pub const GIT_MAX_LINES: usize = 20;
/// Characters of one `git status` line shown at most.
const GIT_MAX_LINE_CHARS: usize = 120;
/// How long `git status` may take before it is left out.
const GIT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the status block says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// `git status --short` output, already capped; `None` outside a repository.
    pub git: Option<String>,
    /// The conversation's tokens (calibrated).
    pub tokens: usize,
    /// The user's budget.
    pub budget: usize,
    /// The active episode.
    pub active: Option<(String, EpisodeKind)>,
    /// Whether the active episode was inferred from the model's tool use
    /// rather than opened with `delimiter`.
    pub inferred: bool,
    /// Whether to remind the model of `delimiter` (at most once a task).
    pub remind: bool,
    /// Whether the last eviction pass could not meet the budget.
    pub budget_unmet: bool,
}

impl Status {
    /// The block's text.
    pub fn render(&self) -> String {
        let mut out = format!("{STATUS_OPEN}\n");
        out.push_str(&format!(
            "context: {} / {} tokens\n",
            human_tokens(self.tokens),
            human_tokens(self.budget)
        ));
        match &self.active {
            Some((name, kind)) if self.inferred => out.push_str(&format!(
                "episode: {kind} `{name}` is active (inferred from your tool use)\n"
            )),
            Some((name, kind)) => out.push_str(&format!("episode: {kind} `{name}` is active\n")),
            None => out.push_str("episode: none active\n"),
        }
        if self.remind {
            out.push_str(
                "note: open an episode with `delimiter` before working and end it when done; \
                 tool use outside one is grouped into inferred episodes for you\n",
            );
        }
        if self.budget_unmet {
            out.push_str(
                "warning: the context is over budget and nothing more can be evicted: \
                 close your episode now (delimiter end) so it can be evicted\n",
            );
        }
        if let Some(git) = &self.git {
            if git.trim().is_empty() {
                out.push_str("git status: clean\n");
            } else {
                out.push_str("git status --short:\n");
                out.push_str(git);
                if !git.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        out.push_str(STATUS_CLOSE);
        out
    }

    /// The block as the request's final message, shortened (git lines
    /// dropped from the end) until it costs at most [`STATUS_RESERVE`] tokens.
    pub fn message(&self, counter: &dyn TokenCounter) -> Message {
        let mut status = self.clone();
        loop {
            let message = Message::user(status.render());
            let tokens = cwl::tokens::message_tokens(counter, &message);
            if tokens <= STATUS_RESERVE {
                return message;
            }
            match status.git.as_deref().map(drop_last_line) {
                Some(Some(shorter)) => status.git = Some(shorter),
                _ if status.git.is_some() => status.git = None,
                _ => return message,
            }
        }
    }
}

/// Whether `message` is a status block (a user message starting with
/// [`STATUS_OPEN`]).
pub fn is_status(message: &Message) -> bool {
    matches!(message, Message::User { content } if content.starts_with(STATUS_OPEN))
}

/// Removes the last listed line of a capped git status, keeping a note of
/// how many were left out. `None` when nothing is left to drop.
fn drop_last_line(git: &str) -> Option<String> {
    let mut lines: Vec<&str> = git.lines().filter(|l| !l.starts_with("... ")).collect();
    let hidden = git
        .lines()
        .find_map(|l| {
            l.strip_prefix("... ")?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .unwrap_or(0);
    lines.pop()?;
    let mut out = lines.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&format!("... {} more\n", hidden + 1));
    Some(out)
}

/// `git status --short` in `cwd`, with the environment `secrets` passes
/// (a repository's hooks and fsmonitor run in it), capped at
/// [`GIT_MAX_LINES`] lines; `None` when `cwd` is not in a repository, git
/// is missing or slow.
pub async fn git_status(cwd: &Path, secrets: &Secrets) -> Option<String> {
    let run = tokio::process::Command::new("git")
        .args(["status", "--short", "--untracked-files=normal"])
        .current_dir(cwd)
        .env_clear()
        .envs(secrets.child_env())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(GIT_TIMEOUT, run).await.ok()?.ok()?;
    if !output.status.success() {
        return None;
    }
    Some(cap_git(&String::from_utf8_lossy(&output.stdout)))
}

/// Caps git output at [`GIT_MAX_LINES`] lines of at most 120 characters.
pub fn cap_git(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut out = String::new();
    for line in lines.iter().take(GIT_MAX_LINES) {
        if line.chars().count() > GIT_MAX_LINE_CHARS {
            out.extend(line.chars().take(GIT_MAX_LINE_CHARS));
            out.push('…');
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    if lines.len() > GIT_MAX_LINES {
        out.push_str(&format!("... {} more\n", lines.len() - GIT_MAX_LINES));
    }
    out
}

/// Tokens as people read them: `950`, `3.1k`, `62.3k`, `1.2M`.
pub fn human_tokens(tokens: usize) -> String {
    if tokens < 1_000 {
        tokens.to_string()
    } else if tokens < 1_000_000 {
        let k = tokens as f64 / 1_000.0;
        if tokens.is_multiple_of(1_000) {
            format!("{}k", tokens / 1_000)
        } else {
            format!("{k:.1}k")
        }
    } else {
        format!("{:.1}M", tokens as f64 / 1_000_000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::O200k;

    fn status() -> Status {
        Status {
            git: Some(" M src/lib.rs\n?? notes.txt\n".into()),
            tokens: 62_345,
            budget: 80_000,
            active: Some(("locate-auth".into(), EpisodeKind::Expl)),
            inferred: false,
            remind: false,
            budget_unmet: false,
        }
    }

    #[test]
    fn renders_git_context_and_episode() {
        let text = status().render();
        assert!(text.starts_with(STATUS_OPEN) && text.ends_with(STATUS_CLOSE));
        assert!(text.contains("context: 62.3k / 80k tokens"), "{text}");
        assert!(text.contains("episode: expl `locate-auth` is active"));
        assert!(text.contains(" M src/lib.rs\n?? notes.txt\n"));
        assert!(!text.contains("warning"));
    }

    #[test]
    fn no_episode_unmet_budget_and_clean_tree() {
        let s = Status {
            git: Some(String::new()),
            active: None,
            budget_unmet: true,
            ..status()
        };
        let text = s.render();
        assert!(text.contains("episode: none active"));
        assert!(text.contains("close your episode"));
        assert!(text.contains("git status: clean"));
        let outside = Status {
            git: None,
            ..status()
        }
        .render();
        assert!(!outside.contains("git"));
    }

    #[test]
    fn git_output_is_capped() {
        let many: String = (0..50).map(|i| format!("?? file{i}.txt\n")).collect();
        let capped = cap_git(&many);
        assert_eq!(capped.lines().count(), GIT_MAX_LINES + 1);
        assert!(capped.ends_with("... 30 more\n"));
        let long = format!(" M {}\n", "x".repeat(500));
        assert!(cap_git(&long).chars().count() < 130);
    }

    #[test]
    fn message_fits_the_reserve() {
        let wide: String = (0..20)
            .map(|i| format!("?? {}{i}.txt\n", "very-long-directory-name/".repeat(4)))
            .collect();
        let s = Status {
            git: Some(cap_git(&wide)),
            ..status()
        };
        assert!(cwl::tokens::message_tokens(&O200k, &Message::user(s.render())) > STATUS_RESERVE);
        let message = s.message(&O200k);
        assert!(cwl::tokens::message_tokens(&O200k, &message) <= STATUS_RESERVE);
        assert!(is_status(&message));
        let Message::User { content } = &message else {
            unreachable!()
        };
        assert!(content.contains("more\n"), "{content}");
        assert!(content.contains("episode: expl"));
    }

    #[test]
    fn human_token_figures() {
        assert_eq!(human_tokens(950), "950");
        assert_eq!(human_tokens(80_000), "80k");
        assert_eq!(human_tokens(62_345), "62.3k");
        assert_eq!(human_tokens(1_250_000), "1.2M");
    }

    #[tokio::test]
    async fn git_status_lists_changes_in_a_repository() {
        let dir = tempfile::tempdir().unwrap();
        let init = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir.path())
            .status();
        if !matches!(init, Ok(s) if s.success()) {
            eprintln!("git is not available; skipping");
            return;
        }
        assert_eq!(
            git_status(dir.path(), &Secrets::default()).await.as_deref(),
            Some("")
        );
        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        assert_eq!(
            git_status(dir.path(), &Secrets::default()).await.as_deref(),
            Some("?? a.txt\n")
        );
    }
}
