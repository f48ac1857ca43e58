//! Asking the user before a tool call runs (`--approval`).
//!
//! The [`ApprovalMode`] says which calls ask; an [`Approver`] asks: on the
//! terminal ([`TerminalApprover`]: y/n/always), over the JSON event stream
//! ([`JsonApprover`]: an `approval_request` event out, one JSON line in),
//! or any front end that implements the trait. "Always" approves the tool
//! for the rest of the process. A declined call is answered with an error
//! result the model can act on; it never runs.

use std::collections::BTreeSet;
use std::fmt;
use std::io::Write;
use std::str::FromStr;

use futures_util::future::BoxFuture;
use serde::Deserialize;

use crate::tools::Toolbox;

/// Which tool calls ask for approval before they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalMode {
    /// None: every call runs.
    #[default]
    Never,
    /// Calls that may change something: `write`, `edit`, and `bash`
    /// commands that are not read-only (see
    /// [`is_read_only_command`](crate::tools::is_read_only_command)).
    OnMutate,
    /// Every call of a tool (the engine's `delimiter` and `recall` excepted).
    Always,
}

impl ApprovalMode {
    /// The default: ask before changes when a person is at the terminal
    /// (stdin is one), never otherwise.
    pub fn default_for(stdin_is_terminal: bool) -> Self {
        if stdin_is_terminal {
            ApprovalMode::OnMutate
        } else {
            ApprovalMode::Never
        }
    }
}

impl FromStr for ApprovalMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "never" => Ok(ApprovalMode::Never),
            "on-mutate" | "on_mutate" => Ok(ApprovalMode::OnMutate),
            "always" => Ok(ApprovalMode::Always),
            _ => Err(format!(
                "expected never, on-mutate or always, not {:?}",
                text.trim()
            )),
        }
    }
}

impl fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApprovalMode::Never => "never",
            ApprovalMode::OnMutate => "on-mutate",
            ApprovalMode::Always => "always",
        })
    }
}

/// One tool call waiting for the user's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The call id as the model sent it.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The raw JSON arguments.
    pub arguments: String,
    /// Whether the call may change something (false: it asks only because
    /// the mode is `always`).
    pub mutating: bool,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run this call.
    Approve,
    /// Run this call and every later call of the same tool without asking.
    Always,
    /// Do not run it; the reason, if the user gave one, is told the model.
    Deny {
        /// What the user said, if anything.
        reason: Option<String>,
    },
}

/// An answer that could not be understood; the question is asked again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidAnswer(pub String);

/// Asks the user about one tool call at a time.
pub trait Approver: Send {
    /// The user's answer about `request` (already reported to the
    /// observer as [`Event::ApprovalRequest`](super::Event::ApprovalRequest)).
    /// The end of the input should be a [`Decision::Deny`].
    fn ask<'a>(
        &'a mut self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<Decision, InvalidAnswer>>;
}

/// Reads the next line of input; `None` at its end.
pub type LineReader =
    Box<dyn FnMut() -> BoxFuture<'static, std::io::Result<Option<String>>> + Send>;

/// The reason given the model when the input ended before an answer.
const NO_ANSWER: &str = "no answer came: the input ended";

/// Asks on the terminal: after the observer has shown the call (the text
/// renderer prints `? bash $ rm -r build`), the question on stderr (or any
/// writer), the answer `y`, `n` or `a` (always) as one line.
pub struct TerminalApprover {
    lines: LineReader,
    prompt: Box<dyn Write + Send>,
}

impl TerminalApprover {
    /// An approver writing its question to `prompt` and reading answers
    /// with `lines`.
    pub fn new(lines: LineReader, prompt: Box<dyn Write + Send>) -> Self {
        TerminalApprover { lines, prompt }
    }
}

impl Approver for TerminalApprover {
    fn ask<'a>(
        &'a mut self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<Decision, InvalidAnswer>> {
        let _ = write!(
            self.prompt,
            "  allow it? [y]es / [n]o / [a]lways allow `{}`: ",
            request.name
        );
        let _ = self.prompt.flush();
        let line = (self.lines)();
        Box::pin(async move {
            let Some(line) = line
                .await
                .map_err(|e| InvalidAnswer(format!("cannot read the answer: {e}")))?
            else {
                return Ok(Decision::Deny {
                    reason: Some(NO_ANSWER.to_string()),
                });
            };
            match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => Ok(Decision::Approve),
                "a" | "always" => Ok(Decision::Always),
                "n" | "no" => Ok(Decision::Deny { reason: None }),
                other => Err(InvalidAnswer(format!(
                    "answer y (run it), n (do not) or a (always allow `{}`), not {other:?}",
                    request.name
                ))),
            }
        })
    }
}

/// Asks over the JSON event stream: the question is the
/// `approval_request` event the observer printed; the answer is one line
/// of JSON, `{"approve": true}`, `{"approve": false, "reason": "..."}` or
/// `{"approve": "always"}`, optionally with the request's `"id"`.
pub struct JsonApprover {
    lines: LineReader,
}

impl JsonApprover {
    /// An approver reading answers with `lines`.
    pub fn new(lines: LineReader) -> Self {
        JsonApprover { lines }
    }
}

/// One JSON answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    approve: serde_json::Value,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// The form of a JSON answer, for error messages.
const REPLY_FORM: &str = r#"{"approve": true|false|"always"} (optional "id", "reason")"#;

/// The decision in one JSON `line` answering `request`.
fn parse_reply(line: &str, request: &ApprovalRequest) -> Result<Decision, InvalidAnswer> {
    let reply: Reply = serde_json::from_str(line.trim()).map_err(|e| {
        InvalidAnswer(format!(
            "approval reply is not {REPLY_FORM}: {e}; got {:?}",
            cwl::shorten(line.trim(), 80)
        ))
    })?;
    if let Some(id) = reply.id.filter(|id| *id != request.id) {
        return Err(InvalidAnswer(format!(
            "approval reply is for call {id:?}, but call {:?} is waiting",
            request.id
        )));
    }
    match reply.approve {
        serde_json::Value::Bool(true) => Ok(Decision::Approve),
        serde_json::Value::Bool(false) => Ok(Decision::Deny {
            reason: reply.reason.filter(|r| !r.trim().is_empty()),
        }),
        serde_json::Value::String(s) if s == "always" => Ok(Decision::Always),
        other => Err(InvalidAnswer(format!(
            "approval reply: \"approve\" must be true, false or \"always\", not {other}"
        ))),
    }
}

impl Approver for JsonApprover {
    fn ask<'a>(
        &'a mut self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<Decision, InvalidAnswer>> {
        let line = (self.lines)();
        Box::pin(async move {
            match line.await {
                Ok(Some(line)) => parse_reply(&line, request),
                Ok(None) => Ok(Decision::Deny {
                    reason: Some(NO_ANSWER.to_string()),
                }),
                Err(e) => Err(InvalidAnswer(format!(
                    "cannot read the approval reply: {e}"
                ))),
            }
        })
    }
}

/// The mode, the approver and the tools approved for the process.
pub(super) struct Approvals {
    mode: ApprovalMode,
    approver: Option<Box<dyn Approver>>,
    always: BTreeSet<String>,
}

impl Approvals {
    /// No call asks.
    pub(super) fn never() -> Self {
        Approvals {
            mode: ApprovalMode::Never,
            approver: None,
            always: BTreeSet::new(),
        }
    }

    /// Calls ask under `mode`, through `approver`.
    pub(super) fn new(mode: ApprovalMode, approver: Box<dyn Approver>) -> Self {
        Approvals {
            mode,
            approver: Some(approver),
            always: BTreeSet::new(),
        }
    }

    /// The mode in force.
    pub(super) fn mode(&self) -> ApprovalMode {
        self.mode
    }

    /// The request to put to the user before `call` runs, if it must ask.
    pub(super) fn request(
        &self,
        toolbox: &Toolbox,
        call: &cwl::ToolCall,
    ) -> Option<ApprovalRequest> {
        if self.approver.is_none() || !toolbox.has(&call.name) || self.always.contains(&call.name) {
            return None;
        }
        let mutating = toolbox.call_mutates(call);
        let asks = match self.mode {
            ApprovalMode::Never => false,
            ApprovalMode::OnMutate => mutating,
            ApprovalMode::Always => true,
        };
        asks.then(|| ApprovalRequest {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            mutating,
        })
    }

    /// Asks the approver about `request`.
    pub(super) fn ask<'a>(
        &'a mut self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<Decision, InvalidAnswer>> {
        match self.approver.as_mut() {
            Some(approver) => approver.ask(request),
            None => Box::pin(async { Ok(Decision::Approve) }),
        }
    }

    /// Approves `tool` for the rest of the process.
    pub(super) fn remember(&mut self, tool: &str) {
        self.always.insert(tool.to_string());
    }
}

/// The error result of a call the user declined.
pub(super) fn declined(tool: &str, reason: Option<&str>) -> String {
    let said = match reason {
        Some(reason) => format!(" ({reason})"),
        None => String::new(),
    };
    format!(
        "The user declined to run this `{tool}` call{said}; it did not run. Do not repeat it as is: \
         choose another way that does not need it, or explain in your answer what you need and why."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            id: "c1".into(),
            name: "bash".into(),
            arguments: r#"{"command":"rm x"}"#.into(),
            mutating: true,
        }
    }

    fn lines(answers: &[&str]) -> LineReader {
        let mut answers: Vec<String> = answers.iter().rev().map(|s| s.to_string()).collect();
        Box::new(move || {
            let next = answers.pop();
            Box::pin(async move { Ok(next) })
        })
    }

    #[test]
    fn modes_parse_and_print() {
        for mode in [
            ApprovalMode::Never,
            ApprovalMode::OnMutate,
            ApprovalMode::Always,
        ] {
            assert_eq!(mode.to_string().parse::<ApprovalMode>(), Ok(mode));
        }
        assert_eq!(" On-Mutate ".parse(), Ok(ApprovalMode::OnMutate));
        let error = "sometimes".parse::<ApprovalMode>().unwrap_err();
        assert!(error.contains("never, on-mutate or always") && error.contains("sometimes"));
        assert_eq!(ApprovalMode::default_for(true), ApprovalMode::OnMutate);
        assert_eq!(ApprovalMode::default_for(false), ApprovalMode::Never);
    }

    #[test]
    fn json_replies_are_read_or_explained() {
        let r = request();
        assert_eq!(
            parse_reply(r#"{"approve":true}"#, &r),
            Ok(Decision::Approve)
        );
        assert_eq!(
            parse_reply(r#"{"approve":"always","id":"c1"}"#, &r),
            Ok(Decision::Always)
        );
        assert_eq!(
            parse_reply(r#"{"approve":false,"reason":"use git clean"}"#, &r),
            Ok(Decision::Deny {
                reason: Some("use git clean".into())
            })
        );
        for (bad, expected) in [
            ("yes", "is not {\"approve\""),
            (
                r#"{"approve":"maybe"}"#,
                "must be true, false or \"always\"",
            ),
            (r#"{"approve":true,"id":"c9"}"#, "is for call \"c9\""),
            (r#"{"approve":true,"extra":1}"#, "unknown field"),
            ("{}", "missing field `approve`"),
        ] {
            let error = parse_reply(bad, &r).unwrap_err().0;
            assert!(error.contains(expected), "{bad}: {error}");
        }
    }

    #[tokio::test]
    async fn the_terminal_takes_y_n_a_and_explains_anything_else() {
        let r = request();
        let shown = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut approver = TerminalApprover::new(
            lines(&["y", "No", "always", "sure"]),
            Box::new(Shared(shown.clone())),
        );
        assert_eq!(approver.ask(&r).await, Ok(Decision::Approve));
        assert_eq!(approver.ask(&r).await, Ok(Decision::Deny { reason: None }));
        assert_eq!(approver.ask(&r).await, Ok(Decision::Always));
        let error = approver.ask(&r).await.unwrap_err().0;
        assert!(
            error.contains("answer y") && error.contains("\"sure\""),
            "{error}"
        );
        assert_eq!(
            approver.ask(&r).await,
            Ok(Decision::Deny {
                reason: Some(NO_ANSWER.into())
            })
        );
        let shown = String::from_utf8(shown.lock().unwrap().clone()).unwrap();
        assert!(
            shown.contains("allow it? [y]es / [n]o / [a]lways allow `bash`: "),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn json_end_of_input_declines() {
        let mut approver = JsonApprover::new(lines(&[]));
        let decision = approver.ask(&request()).await.unwrap();
        assert_eq!(
            decision,
            Decision::Deny {
                reason: Some(NO_ANSWER.into())
            }
        );
        let text = declined("bash", Some(NO_ANSWER));
        assert!(text.starts_with("The user declined to run this `bash` call (no answer came"));
    }

    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
