//! Answering the tool calls of one assistant message, in order, each once.

use cwl::{
    Accepted, Block, DELIMITER, DelimiterOutcome, EpisodeKind, Message, RECALL, Record, ToolCall,
};

use super::approval::{self, Decision};
use super::{Agent, AgentError, Event, limits};
use crate::tools::{ExecContext, ToolOutput};

/// What a call that did not run gets once the task is interrupted.
const NOT_RUN: &str =
    "Not run: the task was interrupted before this call ran. Run it again if it is still needed.";

/// Times an approval question is asked before the call counts as declined.
const MAX_ASKS: usize = 3;

/// What the approval step decided about a call.
enum Gate {
    /// Run it.
    Run,
    /// The user declined: the error result to answer with.
    Declined(String),
    /// The task was interrupted while the question was open.
    Interrupted,
}

impl Agent {
    /// Answers every tool call of `message` (already pushed) with a result,
    /// in call order. Delimiter calls get the engine's outcome, recall calls
    /// the evicted content the engine reads back from the session file
    /// (read-only, so allowed in any episode); other calls
    /// run in the toolbox, told which exploration episode is active at that
    /// point of the message (`active` is the episode before it). A toolbox
    /// call first asks the user when the approval mode says so (a declined
    /// call is answered with an error result and never runs), then is
    /// recorded as started ([`Record::ToolStarted`]) and runs.
    ///
    /// When the interrupt is triggered the running call is dropped and
    /// answered as possibly run in part, the later ones as not run
    /// (delimiter calls keep the engine's answer: it is already applied);
    /// then it gives what was going on, for the note.
    pub(super) async fn answer_calls(
        &mut self,
        message: &Message,
        outcomes: Vec<DelimiterOutcome>,
        mut active: Option<(String, EpisodeKind)>,
    ) -> Result<Option<String>, AgentError> {
        let Message::Assistant { content } = message else {
            return Ok(None);
        };
        let mut stopped: Option<String> = None;
        for block in content {
            let Block::ToolCall(call) = block else {
                continue;
            };
            if stopped.is_none() && self.interrupt.is_triggered() {
                stopped = Some(format!(
                    "the model's tool calls were due (`{}` and later ones not run)",
                    call.name
                ));
            }
            let mut spent = None;
            let output = if stopped.is_some() && call.name != DELIMITER {
                ToolOutput::error(NOT_RUN)
            } else if let Some(refused) = limits::refusal(call) {
                ToolOutput::error(refused)
            } else if call.name == DELIMITER {
                match outcomes.iter().find(|o| o.call_id == call.id) {
                    Some(outcome) => {
                        self.report_delimiter(outcome, &mut active);
                        ToolOutput {
                            content: outcome.text(),
                            is_error: outcome.is_error(),
                        }
                    }
                    None => ToolOutput::error(
                        "internal error: the engine did not answer this delimiter call",
                    ),
                }
            } else if call.name == RECALL {
                let sidecars = cwl_session::SidecarDir::of(self.writer.path());
                match self
                    .context
                    .recall_with(&call.arguments, &self.transcript(), &sidecars)
                {
                    Ok(text) => ToolOutput {
                        content: text,
                        is_error: false,
                    },
                    Err(error) => ToolOutput::error(error),
                }
            } else if call.name == super::delegate::DELEGATE
                && self.context.tools().iter().any(|t| t.name == call.name)
            {
                let interrupt = self.interrupt.clone();
                let ran = tokio::select! {
                    biased;
                    () = interrupt.triggered() => None,
                    output = self.delegate(call, &mut spent) => Some(output),
                };
                if let Some(spent) = &spent {
                    self.book_delegated(&call.id, spent);
                }
                match ran {
                    Some(output) => output,
                    None => {
                        stopped = Some("the sub-agent was running".to_string());
                        ToolOutput::error(self.cut_short(&call.name))
                    }
                }
            } else if let Some(output) = match self.approve(call).await? {
                Gate::Run => None,
                Gate::Declined(text) => Some(ToolOutput::error(text)),
                Gate::Interrupted => {
                    stopped = Some(format!("the `{}` call was waiting for approval", call.name));
                    Some(ToolOutput::error(NOT_RUN))
                }
            } {
                output
            } else {
                let exploration = match &active {
                    Some((name, EpisodeKind::Expl)) => Some(name.clone()),
                    _ => None,
                };
                self.writer.append(&Record::ToolStarted {
                    timestamp: Some(cwl_session::now()),
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                })?;
                let interrupt = self.interrupt.clone();
                let ctx = ExecContext { exploration };
                let ran = tokio::select! {
                    biased;
                    () = interrupt.triggered() => None,
                    output = self.toolbox.execute(call, &ctx) => Some(output),
                };
                match ran {
                    Some(output) => output,
                    None => {
                        stopped = Some(format!("the `{}` call was running", call.name));
                        ToolOutput::error(self.cut_short(&call.name))
                    }
                }
            };
            let output = self.limit_result(message, call, output);
            self.stats.tool_calls += 1;
            if output.is_error {
                self.stats.tool_errors += 1;
            }
            let mut result = output.into_result(call);
            self.redactor().redact_string(&mut result.content);
            self.observer.event(&Event::ToolResult {
                id: result.call_id.clone(),
                name: result.tool_name.clone(),
                arguments: call.arguments.clone(),
                is_error: result.is_error,
                content: result.content.clone(),
            });
            // A sub-agent's calls are recorded once, with the result they
            // gave: a resume never runs the child again, nor counts it twice.
            let usage = spent.map(|spent| spent.usage);
            let cost = spent.and_then(|spent| spent.cost_usd);
            self.push(Message::ToolResult(result), usage, cost)?;
        }
        Ok(stopped)
    }

    /// Asks the user about `call` when the approval mode says so; an
    /// answer that is not understood is noted and the question asked
    /// again, up to [`MAX_ASKS`] times.
    async fn approve(&mut self, call: &ToolCall) -> Result<Gate, AgentError> {
        let Some(request) = self.approvals.request(&self.toolbox, call) else {
            return Ok(Gate::Run);
        };
        let interrupt = self.interrupt.clone();
        for _ in 0..MAX_ASKS {
            self.observer.event(&Event::ApprovalRequest {
                id: request.id.clone(),
                name: request.name.clone(),
                arguments: request.arguments.clone(),
                mutating: request.mutating,
            });
            let answer = tokio::select! {
                biased;
                () = interrupt.triggered() => return Ok(Gate::Interrupted),
                answer = self.approvals.ask(&request) => answer,
            };
            match answer {
                Ok(Decision::Approve) => return Ok(Gate::Run),
                Ok(Decision::Always) => {
                    self.approvals.remember(&call.name);
                    self.note(format!(
                        "`{}` calls run without asking for the rest of this process",
                        call.name
                    ))?;
                    return Ok(Gate::Run);
                }
                Ok(Decision::Deny { reason }) => {
                    return Ok(Gate::Declined(approval::declined(
                        &call.name,
                        reason.as_deref(),
                    )));
                }
                Err(invalid) => self.note(invalid.0)?,
            }
        }
        Ok(Gate::Declined(approval::declined(
            &call.name,
            Some(&format!("no answer understood after {MAX_ASKS} tries")),
        )))
    }

    /// The answer to a call the interrupt cut short.
    fn cut_short(&self, tool: &str) -> String {
        let cause = self
            .interrupt
            .cause()
            .unwrap_or_else(|| "an interrupt".to_string());
        let killed = if tool == "bash" {
            "; its processes were killed"
        } else {
            ""
        };
        format!(
            "{} (The task was stopped by {cause} while this call was running{killed}.)",
            cwl_session::MAY_HAVE_RUN
        )
    }

    /// Tells the observer what a delimiter call did and tracks the active
    /// episode through the message.
    fn report_delimiter(
        &mut self,
        outcome: &DelimiterOutcome,
        active: &mut Option<(String, EpisodeKind)>,
    ) {
        let event = match &outcome.result {
            Ok(Accepted::Started {
                name,
                kind,
                dependencies,
            }) => {
                *active = Some((name.clone(), *kind));
                Event::EpisodeStarted {
                    name: name.clone(),
                    kind: *kind,
                    dependencies: dependencies.clone(),
                }
            }
            Ok(Accepted::Ended {
                name,
                kind,
                description,
            }) => {
                *active = None;
                Event::EpisodeEnded {
                    name: name.clone(),
                    kind: *kind,
                    description: description.clone(),
                }
            }
            Err(error) => Event::DelimiterRejected {
                id: outcome.call_id.clone(),
                error: error.to_string(),
            },
        };
        self.observer.event(&event);
    }
}
