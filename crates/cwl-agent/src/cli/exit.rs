//! Exit statuses of the `cwl` commands: which failures are the caller's
//! (how the command was called: status 2) and which happened while it ran
//! (status 1).
//!
//! | status | meaning |
//! |--------|---------|
//! | 0      | success |
//! | 1      | a runtime failure: the model API, a tool, a file, the session |
//! | 2      | a usage error: a bad flag or flag value (a budget too small included), a bad config file or value, an unknown session, no or empty task, an unknown `cwl chat` command, a missing or unusable API key or base URL, a `--sandbox` (or config `sandbox`) the kernel cannot enforce |
//! | 130    | interrupted (Ctrl-C) |

use crate::agent::AgentError;
use crate::config::ConfigError;
use crate::tools::ToolboxError;
use cwl_provider::ProviderError;
use cwl_session::SessionError;

/// Exit status of a runtime failure.
pub const RUNTIME: u8 = 1;

/// Exit status of a usage error (also clap's for a bad flag).
pub const USAGE: u8 = 2;

/// The command was called wrongly: a flag, a config value, a task, a chat
/// command. Nothing ran; fixing the call fixes it. Exit status [`USAGE`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    /// A usage error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        UsageError(message.into())
    }
}

/// The exit status for `error`: [`USAGE`] when any error in its chain is a
/// usage error (see [`is_usage`]), else [`RUNTIME`].
pub fn exit_code(error: &anyhow::Error) -> u8 {
    if error.chain().any(is_usage) {
        USAGE
    } else {
        RUNTIME
    }
}

/// Whether `error` says the command was called wrongly: a [`UsageError`],
/// a config file that cannot be used, an unknown or ambiguous session
/// name, a file given as a session that is none, an unusable workspace
/// directory, a budget too small to start
/// with, or provider settings that stop
/// any call from being made (no key for the public API, a key that cannot
/// be sent, an invalid base URL).
pub fn is_usage(error: &(dyn std::error::Error + 'static)) -> bool {
    if error.is::<UsageError>() || error.is::<ConfigError>() || error.is::<ToolboxError>() {
        return true;
    }
    if let Some(session) = error.downcast_ref::<SessionError>() {
        return matches!(
            session,
            SessionError::NotFound { .. }
                | SessionError::Ambiguous { .. }
                | SessionError::NoHeader(_)
        );
    }
    if let Some(agent) = error.downcast_ref::<AgentError>() {
        return matches!(agent, AgentError::BudgetTooSmall { .. });
    }
    if let Some(provider) = error.downcast_ref::<ProviderError>() {
        return matches!(
            provider,
            ProviderError::MissingKey { .. }
                | ProviderError::InvalidKey { .. }
                | ProviderError::InvalidBaseUrl { .. }
        );
    }
    false
}

/// `error` and its causes on one line, each cause once: a cause whose text
/// the line already holds (an I/O error a message quotes) is left out.
pub fn error_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn usage_errors_are_found_anywhere_in_the_chain() {
        let usage = anyhow::Error::new(UsageError::new("no task given"));
        assert_eq!(exit_code(&usage), USAGE);
        let wrapped = Err::<(), _>(UsageError::new("bad"))
            .context("starting")
            .unwrap_err();
        assert_eq!(exit_code(&wrapped), USAGE);
        let missing = anyhow::Error::new(SessionError::NotFound {
            name: "x".into(),
            dir: "/s".into(),
        });
        assert_eq!(exit_code(&missing), USAGE);
        let key = anyhow::Error::new(ProviderError::MissingKey {
            var: "K",
            base_var: "B",
            url: "u".into(),
        });
        assert_eq!(exit_code(&key), USAGE);
    }

    #[test]
    fn everything_else_is_a_runtime_failure() {
        let io = anyhow::Error::new(SessionError::Io {
            path: "/s/x.jsonl".into(),
            source: std::io::Error::other("disk full"),
        });
        assert_eq!(exit_code(&io), RUNTIME);
        let in_use = anyhow::Error::new(SessionError::InUse {
            id: "x".into(),
            pid: Some(7),
        });
        assert_eq!(exit_code(&in_use), RUNTIME);
        let status = anyhow::Error::new(ProviderError::Status {
            status: 500,
            url: "u".into(),
            message: "m".into(),
            retry_after: None,
        });
        assert_eq!(exit_code(&status), RUNTIME);
        assert_eq!(exit_code(&anyhow::anyhow!("task 1 of 1 failed")), RUNTIME);
    }

    #[test]
    fn a_cause_the_message_quotes_is_not_repeated() {
        let error = anyhow::Error::new(ConfigError::Read {
            path: "/c.toml".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        let line = error_line(&error);
        assert_eq!(line.matches("not found").count(), 1, "{line}");
        assert!(line.starts_with("config file /c.toml: "), "{line}");
        let context = Err::<(), _>(std::io::Error::other("disk full"))
            .context("cannot write")
            .unwrap_err();
        assert_eq!(error_line(&context), "cannot write: disk full");
    }
}
