//! One task: model call, tool results, again, until the model answers
//! without tool calls.

use cwl::{Block, Message, Record};

use super::status::{self, Status};
use super::{Agent, AgentError, Event, TaskOutcome};
use cwl_provider::{Request, Response, StopReason, StreamEvent};

/// A model call ready to send: the messages (view plus status block) and
/// what they count.
struct Prepared {
    messages: Vec<Message>,
    breakpoint: Option<usize>,
    /// Calibrated tokens of the request.
    tokens: usize,
    /// Uncalibrated tokens of the request, for the next calibration.
    local: usize,
}

impl Agent {
    /// Runs one user turn to its end.
    ///
    /// The task ends when the model answers without tool calls, or sends an
    /// empty reply (not pushed: the transcript takes no empty assistant
    /// message; a note records it). It fails, with the session saved, when
    /// the model call fails, the task takes more than `max_turns` calls, the
    /// next request would not fit the model's window, or the
    /// [interrupt](Agent::interrupt) is triggered. A task too large
    /// for the session is refused before anything is pushed; oversized
    /// parts of a reply are refused or cut (see [`super::limits`]).
    pub async fn run_task(&mut self, text: &str) -> Result<TaskOutcome, AgentError> {
        self.check_task(text)?;
        let task = self.begin(text);
        self.push(Message::user(text), None, None)?;
        self.unfinished = Some(text.to_string());
        self.work(task).await
    }

    /// Carries on with the [unfinished task](Agent::unfinished_task) of a
    /// resumed session: calls the model on the context as it is, without a
    /// new user turn, then runs as [`Agent::run_task`] does. Fails with
    /// [`AgentError::NothingToContinue`] when the last task finished.
    pub async fn continue_task(&mut self) -> Result<TaskOutcome, AgentError> {
        let Some(text) = self.unfinished.clone() else {
            return Err(AgentError::NothingToContinue);
        };
        let task = self.begin(&text);
        self.note(format!(
            "continuing the unfinished task: {}",
            cwl::shorten(&crate::render::describe::one_line(&text), 80)
        ))?;
        self.work(task).await
    }

    /// Counts a task and reports its start.
    fn begin(&mut self, text: &str) -> usize {
        self.stats.tasks += 1;
        let task = self.stats.tasks;
        self.observer.event(&Event::TaskStarted {
            task,
            text: text.to_string(),
        });
        task
    }

    /// Model calls and tool results until the model answers.
    async fn work(&mut self, task: usize) -> Result<TaskOutcome, AgentError> {
        let mut turns = 0;
        loop {
            if self.observer.closed() {
                return Err(AgentError::OutputClosed);
            }
            if self.interrupt.is_triggered() {
                return Err(self.interrupted(task, "between model calls"));
            }
            if turns >= self.options.max_turns {
                let error = AgentError::MaxTurns {
                    limit: self.options.max_turns,
                };
                self.failed(&error)?;
                return Err(error);
            }
            turns += 1;
            let interrupt = self.interrupt.clone();
            let called = tokio::select! {
                biased;
                () = interrupt.triggered() => None,
                called = self.call_model() => Some(called),
            };
            let Some(response) = called.transpose()? else {
                return Err(
                    self.interrupted(task, "the model was answering (its reply is dropped)")
                );
            };
            let content = clean(response.message);
            self.infer(&Message::Assistant {
                content: content.clone(),
            })?;
            let (content, cuts) = self.limit_reply(content);
            for cut in cuts {
                self.note(cut)?;
            }
            if content.is_empty() {
                self.note(format!(
                    "the model sent an empty reply (stop reason: {:?}); task {task} ends here",
                    response.stop_reason
                ))?;
                return self.finish(task, turns, String::new());
            }
            let cost = self.options.model.cost(&response.usage);
            let active = self
                .context
                .active_episode()
                .map(|(name, kind)| (name.to_string(), kind));
            let message = Message::Assistant { content };
            let outcomes = match self.push(message.clone(), Some(response.usage), cost) {
                Ok(outcomes) => outcomes,
                Err(error) => {
                    self.failed(&error)?;
                    return Err(error);
                }
            };
            if message.tool_calls().next().is_none() {
                match response.stop_reason {
                    StopReason::MaxTokens => self
                        .note("the answer hit the output token limit and may be cut off".into())?,
                    StopReason::Refusal => self.note("the model refused".into())?,
                    _ => {}
                }
                return self.finish(task, turns, answer_text(&message));
            }
            if let Some(stopped) = self.answer_calls(&message, outcomes, active).await? {
                return Err(self.interrupted(task, &stopped));
            }
        }
    }

    /// Records that task `task` was interrupted while `doing`, makes the
    /// file durable, and gives the error to return.
    fn interrupted(&mut self, task: usize, doing: &str) -> AgentError {
        let cause = self
            .interrupt
            .cause()
            .unwrap_or_else(|| "an interrupt".to_string());
        let recorded = self
            .note(format!(
                "interrupted by {cause} while {doing}; task {task} stopped, the session is saved"
            ))
            .and_then(|()| self.writer.sync().map_err(AgentError::from));
        match recorded {
            Ok(()) => AgentError::Interrupted { cause },
            Err(error) => error,
        }
    }

    fn finish(
        &mut self,
        task: usize,
        turns: usize,
        answer: String,
    ) -> Result<TaskOutcome, AgentError> {
        self.checkpoint()?;
        self.writer.sync()?;
        self.unfinished = None;
        self.observer.event(&Event::TaskFinished { task, turns });
        Ok(TaskOutcome { turns, answer })
    }

    /// Enforces the budget, builds the request and sends it.
    async fn call_model(&mut self) -> Result<Response, AgentError> {
        self.side_calls().await?;
        self.idle()?;
        self.enforce()?;
        let prepared = self.prepare().await;
        let limit = self.options.hard_limit();
        if prepared.tokens > limit {
            let error = AgentError::WindowExceeded {
                tokens: prepared.tokens,
                limit,
            };
            self.failed(&error)?;
            return Err(error);
        }
        if self.over_budget {
            self.stats.over_budget_requests += 1;
        }
        let request = Request {
            model: &self.options.model.name,
            messages: &prepared.messages,
            tools: self.context.tools(),
            max_output_tokens: self.options.max_output_tokens,
            cache_breakpoint: prepared.breakpoint,
            reasoning: self.options.reasoning,
        };
        let observer = &mut self.observer;
        let redactor = self.toolbox.config().secrets.redactor();
        let mut on_event = |event: StreamEvent| {
            let event = match event {
                StreamEvent::TextDelta(text) => Event::TextDelta { text },
                StreamEvent::ReasoningDelta(text) => Event::ReasoningDelta { text },
                StreamEvent::ToolCallStarted { .. } => return,
                StreamEvent::Retrying {
                    attempt,
                    wait,
                    reason,
                    discarded_output,
                } => Event::Retrying {
                    attempt,
                    wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    reason: redactor.redact(&reason).into_owned(),
                    discarded_output,
                },
            };
            observer.event(&event);
        };
        let response = match self.provider.stream(&request, &mut on_event).await {
            Ok(response) => response,
            Err(error) => {
                let error = AgentError::Provider(error.redacted(self.redactor()));
                self.failed(&error)?;
                return Err(error);
            }
        };
        self.last_call_end = Some(self.clock.now());
        self.idle_carry = std::time::Duration::ZERO;
        self.account(&prepared, &response)?;
        Ok(response)
    }

    /// Tells the strategy how long the conversation sat idle since the
    /// last model call ended (in a resumed session, at first: since its
    /// last response was recorded), and records the gap when the strategy took
    /// note of it (a resume gives it back at the same point).
    fn idle(&mut self) -> Result<(), AgentError> {
        let Some(end) = self.last_call_end else {
            return Ok(());
        };
        let seconds = (self.clock.now().saturating_duration_since(end) + self.idle_carry).as_secs();
        if self.context.idle(seconds) {
            self.writer.append(&Record::Idle { seconds })?;
        }
        Ok(())
    }

    /// Runs the side calls the strategy asks for and records each answer
    /// (a failed one is also noted); CWL never asks.
    async fn side_calls(&mut self) -> Result<(), AgentError> {
        let (done, shut) = cwl_provider::side::run_side_calls(
            self.provider.as_ref(),
            self.options
                .planner_model
                .as_deref()
                .unwrap_or(&self.options.model.name),
            self.context.as_mut(),
            &mut self.side_gate,
        )
        .await;
        for (request, result) in done {
            if let Err(reason) = &result {
                self.note(format!(
                    "{reason}; the {} strategy goes on without it",
                    self.context.name()
                ))?;
            }
            self.writer.append(&Record::SideCall {
                id: request.id,
                purpose: request.purpose,
                result,
            })?;
        }
        if let Some(note) = shut {
            self.note(note)?;
        }
        self.write_notes()?;
        self.strategy_notes()
    }

    /// Notes what the strategy wants logged (plans rejected or committed).
    fn strategy_notes(&mut self) -> Result<(), AgentError> {
        for text in self.context.take_notes() {
            self.note(text)?;
        }
        Ok(())
    }

    /// Writes the sidecar files the strategy folded payloads to, before
    /// the view pointing to them is sent; a file that cannot be written is
    /// noted (recall then reads the payload from the transcript).
    pub(super) fn write_sidecars(&mut self) -> Result<(), AgentError> {
        let sidecars = cwl_session::SidecarDir::of(self.writer.path());
        for file in self.context.take_sidecars() {
            if let Err(error) = sidecars.write(&file) {
                self.note(format!(
                    "sidecar {} was not written ({error}); recall reads it from the transcript",
                    file.name
                ))?;
            }
        }
        Ok(())
    }

    /// Notes the strategy's health when its zone or alerts change (CWL
    /// reports none).
    fn pressure(&mut self) -> Result<(), AgentError> {
        let Some(health) = self.context.health() else {
            return Ok(());
        };
        // Alerts carry figures that move every call; their kind is what changes.
        let kinds = health
            .alerts
            .iter()
            .map(|alert| alert.split(':').next().unwrap_or_default().to_string())
            .collect();
        let now = (health.zone.clone(), kinds);
        if self.pressure.as_ref() == Some(&now) {
            return Ok(());
        }
        let mut text = format!(
            "context pressure: zone {} ({:.0}% of the budget, {} counted), {:.0} tokens per call{}, {} eviction passes",
            health.zone,
            health.utilisation * 100.0,
            if health.provider_counted {
                "provider"
            } else {
                "locally"
            },
            health.velocity,
            health
                .turns_until_red
                .map(|turns| format!(", about {turns:.0} calls to red"))
                .unwrap_or_default(),
            health.evictions
        );
        for alert in &health.alerts {
            text.push_str("; ");
            text.push_str(alert);
        }
        self.pressure = Some(now);
        self.observer.event(&Event::Health(health));
        if let Some(metrics) = self.context.metrics() {
            self.observer.event(&Event::Metrics {
                strategy: self.context.name().to_string(),
                metrics,
            });
        }
        self.note(text)
    }

    /// Runs the eviction pass; records and reports it when it did anything.
    fn enforce(&mut self) -> Result<(), AgentError> {
        let report = self.context.enforce();
        self.write_sidecars()?;
        self.strategy_notes()?;
        self.pressure()?;
        self.over_budget = !report.budget_met;
        // A pass that evicted nothing changed no state; only a real miss is
        // worth a record (a deferred one clears at the next call).
        if !report.evicted() && (report.budget_met || report.deferred) {
            self.budget_unmet = false;
            return Ok(());
        }
        self.writer.append(&Record::Enforce {
            budget: report.budget as u64,
            report: serde_json::to_value(&report).unwrap_or_default(),
        })?;
        if report.evicted() {
            self.stats.eviction_passes += 1;
            self.stats.episodes_evicted += report.episodes.len();
            self.stats.tokens_evicted += report.tokens_removed();
            self.observer.event(&Event::Evicted {
                tokens_before: report.tokens_before,
                tokens_after: report.tokens_after,
                budget: report.budget,
                floor: report.floor,
                first_changed: report.first_changed,
                folded: report.folded,
                episodes: report.episodes.clone(),
            });
        }
        // A deferred miss clears itself at the next call: nothing to tell.
        let unmet = !report.budget_met && !report.deferred;
        if unmet && !self.budget_unmet {
            self.observer.event(&Event::BudgetUnmet {
                tokens: report.tokens_after,
                budget: report.budget,
            });
        }
        self.budget_unmet = unmet;
        Ok(())
    }

    /// The request's messages: the view, then the status block when the
    /// view ends with a user turn or a tool result (always, in this loop).
    async fn prepare(&mut self) -> Prepared {
        let git = if self.options.git_status {
            status::git_status(self.toolbox.root(), &self.toolbox.config().secrets).await
        } else {
            None
        };
        let active = self
            .context
            .active_episode()
            .map(|(name, kind)| (name.to_string(), kind));
        let inferred = active
            .as_ref()
            .is_some_and(|(name, _)| self.inference.is_open(name));
        let remind = (active.is_none() || inferred) && self.reminded_task != self.stats.tasks;
        let status = Status {
            git,
            tokens: self.context.tokens(),
            budget: self.options.budget,
            active,
            inferred,
            remind,
            budget_unmet: self.budget_unmet,
        };
        let mut messages: Vec<Message> = self.context.view().cloned().collect();
        let breakpoint = messages.len().checked_sub(1);
        let mut extra = 0;
        if matches!(
            messages.last(),
            Some(Message::User { .. } | Message::ToolResult(_))
        ) {
            if status.remind {
                self.reminded_task = self.stats.tasks;
            }
            let block = status.message(self.counter.as_ref());
            extra = cwl::tokens::message_tokens(self.counter.as_ref(), &block);
            messages.push(block);
        }
        Prepared {
            messages,
            breakpoint,
            tokens: self.context.tokens() + extra,
            local: self.context.counted_tokens() + extra,
        }
    }

    /// Calibrates the engine's count of a request counted as `local` with
    /// the provider's `reported` size, unless no tokenizer difference
    /// explains it (then a note says so). An unchanged offset is not
    /// recorded: replaying it would be a no-op.
    fn calibrate(&mut self, local: usize, reported: u64) -> Result<(), AgentError> {
        let size = usize::try_from(reported).unwrap_or(usize::MAX);
        let window = usize::try_from(self.options.model.context_window).ok();
        if let Some(why) = cwl::untrusted_report(local, size, window) {
            return self.note(why);
        }
        if reported as i64 - local as i64 != self.context.calibration_offset() {
            self.context.calibrate(local, size);
            self.writer.append(&Record::Calibrate {
                local: local as u64,
                reported,
            })?;
        }
        Ok(())
    }

    /// Books a response's usage and calibrates the engine's count.
    fn account(&mut self, prepared: &Prepared, response: &Response) -> Result<(), AgentError> {
        let usage = response.usage;
        self.stats.requests += 1;
        self.stats.input_tokens += usage.input_tokens;
        self.stats.cached_input_tokens += usage.cached_input_tokens;
        self.stats.output_tokens += usage.output_tokens;
        let cost = self.options.model.cost(&usage);
        if let Some(cost) = cost {
            *self.stats.cost_usd.get_or_insert(0.0) += cost;
        }
        self.stats.max_request_tokens = self.stats.max_request_tokens.max(prepared.tokens);
        if usage.input_tokens > 0 {
            self.calibrate(prepared.local, usage.input_tokens)?;
        }
        self.observer.event(&Event::Response {
            request: self.stats.requests,
            request_tokens: prepared.tokens,
            context_tokens: self.context.tokens(),
            budget: self.options.budget,
            usage,
            cost_usd: cost,
        });
        Ok(())
    }
}

/// The blocks of an assistant message without those that carry nothing
/// (empty text, reasoning with neither text nor signature); none for any
/// other role.
fn clean(message: Message) -> Vec<Block> {
    match message {
        Message::Assistant { content } => content
            .into_iter()
            .filter(|block| match block {
                Block::Text { text } => !text.trim().is_empty(),
                Block::Reasoning { text, signature } => {
                    !text.is_empty() || signature.as_deref().is_some_and(|s| !s.is_empty())
                }
                Block::ToolCall(_) => true,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn answer_text(message: &Message) -> String {
    let Message::Assistant { content } = message else {
        return String::new();
    };
    content
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::ToolCall;

    #[test]
    fn clean_drops_empty_blocks_only() {
        let message = Message::Assistant {
            content: vec![
                Block::Text { text: " \n".into() },
                Block::Reasoning {
                    text: String::new(),
                    signature: None,
                },
                Block::Reasoning {
                    text: String::new(),
                    signature: Some("redacted_thinking:abc".into()),
                },
                Block::ToolCall(ToolCall::new("c", "ls", "{}")),
                Block::Text { text: "ok".into() },
            ],
        };
        let content = clean(message);
        assert_eq!(content.len(), 3);
        assert_eq!(answer_text(&Message::Assistant { content }), "ok");
        assert!(clean(Message::user("x")).is_empty());
    }
}
