//! The compression cascade of [`Cwm`]: which summary to ask for next (by
//! stage), its prompt, and how an answer changes the view. A job names
//! the messages it would replace by their push index; an answer is taken
//! only if those messages are still as they were and it passes
//! [`check_answer`], and a job that failed or was refused is never asked
//! again. After a failure nothing more is asked until the next response,
//! so a model that hangs costs one timeout per model call at most.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use cwl::strategy::{SideRequest, Strategy};
use cwl::tokens::{block_tokens, message_tokens};
use cwl::{Block, Message};
use serde::{Deserialize, Serialize};

use super::{Cwm, Entry, calls};
use crate::budgets::{Check, Component};
use crate::checkpoint::{self, TaskCheckpoint};
use crate::compress::{self, Level, Stage, check_answer, purpose};

/// One summary the strategy asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "job", rename_all = "snake_case")]
pub(crate) enum Job {
    /// A large tool result to key points.
    ToolResult { push: u64 },
    /// An aging message to a shorter level.
    Progressive { push: u64, level: Level },
    /// The older messages (users excepted) into one summary.
    Compaction { pushes: Vec<u64> },
    /// The working notes brought up to date at `turn`.
    Notes { turn: u64 },
    /// The fidelity of the latest taken summary, judged (`n`: how many
    /// have been judged before).
    Judge { n: u64 },
}

impl Job {
    /// What identifies it among the jobs tried.
    fn key(&self) -> String {
        match self {
            Job::ToolResult { push } => format!("summary:{push}"),
            Job::Progressive { push, level } => format!("progressive:{push}:{level:?}"),
            Job::Compaction { pushes } => format!(
                "compaction:{}-{}",
                pushes.first().copied().unwrap_or_default(),
                pushes.last().copied().unwrap_or_default()
            ),
            Job::Notes { turn } => format!("notes:{turn}"),
            Job::Judge { n } => format!("judge:{n}"),
        }
    }

    fn purpose(&self) -> &'static str {
        match self {
            Job::ToolResult { .. } => purpose::SUMMARY,
            Job::Progressive { .. } => purpose::PROGRESSIVE,
            Job::Compaction { .. } => purpose::COMPACTION,
            Job::Notes { .. } => purpose::NOTES,
            Job::Judge { .. } => purpose::JUDGE,
        }
    }
}

/// Characters of the original the judge sees at most (the document's 8,000).
const JUDGE_CHARS: usize = 8_000;

/// What the cascade did so far, for health.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompressionStats {
    /// Summaries asked for.
    pub asked: u64,
    /// Answers taken.
    pub accepted: u64,
    /// Answers refused (empty, too long, unrelated, stale).
    pub rejected: u64,
    /// Calls that failed or timed out.
    pub failed: u64,
    /// Tokens of what taken answers replaced.
    pub original_tokens: u64,
    /// Tokens of the taken answers in the view.
    pub summary_tokens: u64,
    /// Why the last refused answer was refused.
    pub last_rejection: Option<String>,
    /// Answers taken, by purpose.
    pub accepted_by: BTreeMap<String, u64>,
    /// Fidelity scores the judge gave, in [0, 1], oldest first (the last
    /// 20).
    pub fidelity: Vec<f64>,
}

/// The cascade's saved state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Jobs {
    next_id: u64,
    asked: BTreeMap<u64, Job>,
    tried: BTreeSet<String>,
    /// Nothing is asked before this response count.
    wait_until: u64,
    /// The response count at the last notes update.
    notes_turn: u64,
    /// The first push the notes have not seen.
    notes_from: u64,
    /// Updates of the notes so far.
    #[serde(default)]
    notes_updates: u64,
    /// The latest taken summary waiting for the judge: what it replaced
    /// and the summary (only with `CompressionOptions::judge`).
    #[serde(default)]
    to_judge: Option<(String, String)>,
    /// Summaries judged (or given up on) so far.
    #[serde(default)]
    pub(crate) judged: u64,
    pub(crate) stats: CompressionStats,
}

/// The reasoning and text of an assistant message: its tokens and text.
fn prose(counter: &dyn cwl::TokenCounter, content: &[Block]) -> (usize, String) {
    let mut tokens = 0;
    let mut text = Vec::new();
    for block in content {
        match block {
            Block::Reasoning { text: t, .. } | Block::Text { text: t } => {
                tokens += block_tokens(counter, block);
                text.push(t.as_str());
            }
            Block::ToolCall(_) => {}
        }
    }
    (tokens, text.join("\n"))
}

/// A message as a summary prompt shows it.
fn render(message: &Message) -> String {
    match message {
        Message::System { .. } => String::new(),
        Message::User { content } => format!("user: {content}"),
        Message::ToolResult(result) => {
            format!("result of {}: {}", result.tool_name, result.content)
        }
        Message::Assistant { content } => content
            .iter()
            .map(|block| match block {
                Block::Text { text } => format!("assistant: {text}"),
                Block::Reasoning { text, .. } => format!("assistant (thinking): {text}"),
                Block::ToolCall(call) => {
                    format!("assistant calls {} {}", call.name, call.arguments)
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

impl Cwm {
    /// Prompt tokens over the budget.
    pub(super) fn utilisation(&self) -> f64 {
        self.tokens() as f64 / self.meter.budget().max(1) as f64
    }

    fn position(&self, push: u64) -> Option<usize> {
        self.entries.iter().position(|entry| entry.push == push)
    }

    /// The latest user turn: the task summaries are about.
    pub(super) fn task(&self) -> String {
        self.entries
            .iter()
            .rev()
            .find_map(|entry| match &entry.message {
                Message::User { content } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The next job worth asking for at the current utilisation: from
    /// emergency a compaction, from prepare (or with tool results over
    /// their budget) large results, from active aging messages; the notes
    /// every `notes_every` responses at any pressure.
    fn next_job(&self) -> Option<Job> {
        let stage = self.compression.cascade.stage(self.utilisation());
        let fresh = |job: Job| (!self.jobs.tried.contains(&job.key())).then_some(job);
        let in_flight = self.in_flight();
        if self.jobs.to_judge.is_some() {
            return Some(Job::Judge {
                n: self.jobs.judged,
            });
        }
        if stage >= Stage::Emergency
            && let Some(job) = self.compaction_job().and_then(fresh)
        {
            return Some(job);
        }
        if stage >= Stage::Prepare || self.tool_results_over_budget() {
            let large = self.entries[..in_flight].iter().find_map(|entry| {
                (matches!(entry.message, Message::ToolResult(_))
                    && entry.level == Level::Full
                    && entry.tokens > self.compression.summarise_over)
                    .then_some(Job::ToolResult { push: entry.push })
                    .and_then(fresh)
            });
            if large.is_some() {
                return large;
            }
        }
        if stage >= Stage::Active
            && let Some(job) = self.progressive_job().and_then(fresh)
        {
            return Some(job);
        }
        let unseen = self.entries.iter().any(|entry| {
            entry.push >= self.jobs.notes_from && !matches!(entry.message, Message::System { .. })
        });
        if unseen && self.turn >= self.jobs.notes_turn + self.compression.notes_every.max(1) {
            return fresh(Job::Notes { turn: self.turn });
        }
        None
    }

    /// The oldest message past its age tier, worth a summary.
    fn progressive_job(&self) -> Option<Job> {
        let fresh = |job: Job| (!self.jobs.tried.contains(&job.key())).then_some(job);
        self.entries[..self.in_flight()].iter().find_map(|entry| {
            if entry.summary {
                return None;
            }
            let level = self
                .compression
                .tier(self.turn.saturating_sub(entry.created));
            if level <= entry.level {
                return None;
            }
            let tokens = match &entry.message {
                Message::ToolResult(_) => entry.tokens,
                Message::Assistant { content } => prose(self.counter.as_ref(), content).0,
                _ => return None,
            };
            (tokens >= self.compression.min_tokens)
                .then_some(Job::Progressive {
                    push: entry.push,
                    level,
                })
                .and_then(fresh)
        })
    }

    /// Whether tool results are past their component's soft limit.
    fn tool_results_over_budget(&self) -> bool {
        !matches!(
            self.check_before_add(Component::ToolResults, 0),
            Check::Allowed
        )
    }

    /// The older messages a compaction would replace: everything but
    /// system and user messages before the `keep_recent` latest responses,
    /// up to half the budget, ending at a response so results stay with
    /// their calls.
    fn compaction_job(&self) -> Option<Job> {
        let lead = self.lead();
        let in_flight = self.in_flight();
        let responses: Vec<usize> = (lead..self.entries.len().min(in_flight + 1))
            .filter(|&at| {
                matches!(self.entries[at].message, Message::Assistant { .. })
                    && !self.entries[at].summary
            })
            .collect();
        let keep = self.compression.keep_recent.max(1);
        let end = *responses.iter().rev().nth(keep - 1)?;
        let cap = self.meter.budget() / 2;
        let mut pushes = Vec::new();
        let mut tokens = 0;
        for entry in &self.entries[lead..end] {
            match entry.message {
                Message::System { .. } | Message::User { .. } => continue,
                Message::Assistant { .. } if tokens > cap => break,
                _ => {}
            }
            pushes.push(entry.push);
            tokens += entry.tokens;
        }
        (pushes.len() >= 2 && tokens >= 2 * self.compression.min_tokens)
            .then_some(Job::Compaction { pushes })
    }

    /// The prompt of `job`.
    fn prompt(&self, job: &Job) -> Option<Vec<Message>> {
        match job {
            Job::ToolResult { push } => {
                let entry = &self.entries[self.position(*push)?];
                let Message::ToolResult(result) = &entry.message else {
                    return None;
                };
                Some(compress::tool_summary_prompt(
                    &result.tool_name,
                    entry.tokens,
                    &result.content,
                ))
            }
            Job::Progressive { push, level } => {
                let entry = &self.entries[self.position(*push)?];
                let text = match &entry.message {
                    Message::ToolResult(_) => render(&entry.message),
                    Message::Assistant { content } => prose(self.counter.as_ref(), content).1,
                    _ => return None,
                };
                Some(compress::progressive_prompt(*level, &text))
            }
            Job::Compaction { pushes } => {
                let conversation = self.conversation(pushes.first().copied()?, pushes.last());
                Some(compress::compaction_prompt(&self.task(), &conversation))
            }
            Job::Judge { .. } => {
                let (original, summary) = self.jobs.to_judge.as_ref()?;
                Some(compress::judge_prompt(original, summary))
            }
            Job::Notes { .. } => {
                let conversation = self.conversation(self.jobs.notes_from, None);
                Some(compress::notes_prompt(
                    &self.task(),
                    &self.current_notes(),
                    &conversation,
                ))
            }
        }
    }

    /// The view's messages from push `from` (to push `to`), rendered, at
    /// most half the budget's worth (the newest are kept).
    fn conversation(&self, from: u64, to: Option<&u64>) -> String {
        let cap = self.meter.budget() / 2;
        let mut tokens = 0;
        let mut parts: Vec<String> = self
            .entries
            .iter()
            .filter(|entry| entry.push >= from && to.is_none_or(|&to| entry.push <= to))
            .rev()
            .take_while(|entry| {
                tokens += entry.tokens;
                tokens <= cap
            })
            .map(|entry| render(&entry.message))
            .filter(|text| !text.is_empty())
            .collect();
        parts.reverse();
        parts.join("\n\n")
    }

    /// The next side request, if the cascade wants one now.
    pub(super) fn ask(&mut self) -> Option<SideRequest> {
        if !self.compression.enabled || self.turn < self.jobs.wait_until {
            return None;
        }
        let job = self.next_job()?;
        let messages = self.prompt(&job)?;
        self.jobs.next_id += 1;
        let id = self.jobs.next_id;
        let purpose = job.purpose().to_string();
        self.jobs.asked.insert(id, job);
        self.jobs.stats.asked += 1;
        Some(SideRequest {
            id,
            purpose,
            messages,
            timeout: Duration::from_millis(self.compression.timeout_ms),
            max_output_tokens: Some(self.compression.max_output_tokens),
        })
    }

    /// Takes the answer to request `id`: applied when it passes, else
    /// nothing changes and the job is not asked again.
    pub(super) fn answer(&mut self, id: u64, result: Result<String, String>) {
        let Some(job) = self.jobs.asked.remove(&id) else {
            return;
        };
        if let Job::Judge { .. } = job {
            self.judged(result);
            return;
        }
        let outcome = match result {
            Err(_) => {
                self.jobs.stats.failed += 1;
                None
            }
            Ok(text) => Some(self.apply(&job, &text)),
        };
        match outcome {
            Some(Ok((original, summary))) => {
                self.jobs.stats.accepted += 1;
                *self
                    .jobs
                    .stats
                    .accepted_by
                    .entry(job.purpose().to_string())
                    .or_default() += 1;
                self.jobs.stats.original_tokens += original as u64;
                self.jobs.stats.summary_tokens += summary as u64;
            }
            Some(Err(reason)) => {
                self.jobs.stats.rejected += 1;
                self.jobs.stats.last_rejection = Some(format!("{}: {reason}", job.purpose()));
                self.jobs.wait_until = self.turn + 1;
            }
            None => self.jobs.wait_until = self.turn + 1,
        }
        self.jobs.tried.insert(job.key());
    }

    /// Takes the judge's answer: a fidelity score, or a failure; either
    /// way that summary is not judged again.
    fn judged(&mut self, result: Result<String, String>) {
        self.jobs.to_judge = None;
        self.jobs.judged += 1;
        if result.is_err() {
            self.jobs.wait_until = self.turn + 1;
        }
        let stats = &mut self.jobs.stats;
        match result {
            Err(_) => stats.failed += 1,
            Ok(text) => match compress::parse_fidelity(&text) {
                Some(score) => {
                    stats.fidelity.push(score);
                    if stats.fidelity.len() > 20 {
                        stats.fidelity.remove(0);
                    }
                }
                None => {
                    stats.rejected += 1;
                    stats.last_rejection = Some(
                        "judge: the answer does not start with a score between 0 and 1".into(),
                    );
                }
            },
        }
    }

    /// Keeps a taken summary and what it replaced for the judge, when
    /// judging is on.
    fn queue_judge(&mut self, original: &str, summary: &str) {
        if self.compression.judge {
            let original: String = original.chars().take(JUDGE_CHARS).collect();
            self.jobs.to_judge = Some((original, summary.trim().to_string()));
        }
    }

    /// Applies an answer; gives the tokens replaced and their summary's.
    fn apply(&mut self, job: &Job, answer: &str) -> Result<(usize, usize), String> {
        let ratio = self.compression.max_ratio;
        match job {
            Job::ToolResult { push } | Job::Progressive { push, .. } => {
                let level = match job {
                    Job::Progressive { level, .. } => *level,
                    _ => Level::KeyPoints,
                };
                let at = self
                    .position(*push)
                    .ok_or("the message is no longer in view")?;
                let entry = &self.entries[at];
                if entry.level >= level {
                    return Err("the message is already that short".to_string());
                }
                let (message, original, replaced) = match &entry.message {
                    Message::ToolResult(result) => {
                        let summary = answer.trim();
                        let text = format!(
                            "[{} of a {} output of {} tokens; the full output is in the session transcript]\n{summary}",
                            marker(level),
                            result.tool_name,
                            entry.tokens
                        );
                        (
                            Message::tool_result(
                                &result.call_id,
                                &result.tool_name,
                                text,
                                result.is_error,
                            ),
                            result.content.clone(),
                            entry.tokens,
                        )
                    }
                    Message::Assistant { content } => {
                        let (tokens, text) = prose(self.counter.as_ref(), content);
                        let mut blocks = vec![Block::Text {
                            text: format!(
                                "[{} of earlier reasoning and text]\n{}",
                                marker(level),
                                answer.trim()
                            ),
                        }];
                        blocks.extend(
                            content
                                .iter()
                                .filter(|b| matches!(b, Block::ToolCall(_)))
                                .cloned(),
                        );
                        (Message::Assistant { content: blocks }, text, tokens)
                    }
                    _ => return Err("the message cannot be summarised".to_string()),
                };
                let tokens = message_tokens(self.counter.as_ref(), &message);
                let saved_at_least = replaced - (replaced as f64 * ratio) as usize;
                let limit = entry.tokens.saturating_sub(saved_at_least);
                check_answer(answer, &original, tokens, limit).map_err(|e| e.to_string())?;
                let before = entry.tokens;
                let entry = &mut self.entries[at];
                entry.message = message;
                entry.level = level;
                self.recount(at, false);
                self.queue_judge(&original, answer);
                Ok((before, self.entries[at].tokens))
            }
            Job::Compaction { pushes } => {
                let positions: Vec<usize> = pushes
                    .iter()
                    .map(|push| self.position(*push))
                    .collect::<Option<_>>()
                    .ok_or("the messages changed before the answer came")?;
                let conversation = self.conversation(pushes[0], pushes.last());
                let removed: usize = positions.iter().map(|&at| self.entries[at].tokens).sum();
                let message = Message::Assistant {
                    content: vec![Block::Text {
                        text: format!(
                            "[compacted summary of {} earlier messages ({removed} tokens); the originals are in the session transcript]\n{}",
                            positions.len(),
                            answer.trim()
                        ),
                    }],
                };
                let tokens = message_tokens(self.counter.as_ref(), &message);
                let limit = (removed as f64 * ratio) as usize;
                check_answer(answer, &conversation, tokens, limit).map_err(|e| e.to_string())?;
                self.compact(&positions, message, tokens);
                self.queue_judge(&conversation, answer);
                Ok((removed, tokens))
            }
            Job::Judge { .. } => Err("judge answers are taken apart".to_string()),
            Job::Notes { turn } => {
                let conversation = self.conversation(self.jobs.notes_from, None);
                let message = notes_message(answer.trim());
                let tokens = message
                    .as_ref()
                    .map_or(0, |m| message_tokens(self.counter.as_ref(), m));
                let before = self.notes.as_ref().map_or(0, |(_, t)| *t);
                let growth = tokens.saturating_sub(before);
                if let Check::Blocked { used, limit, .. } =
                    self.check_before_add(Component::MemoryInjection, growth)
                {
                    return Err(format!(
                        "the notes ({tokens} tokens) would pass the memory budget ({used} of {limit} tokens used)"
                    ));
                }
                let original = format!("{}\n{}\n{conversation}", self.task(), self.current_notes());
                let text = check_answer(answer, &original, tokens, usize::MAX)
                    .map_err(|e| e.to_string())?;
                self.total = self.total - before + tokens;
                self.notes = message.map(|m| (m, tokens));
                self.notes_text = text;
                self.jobs.notes_turn = *turn;
                self.jobs.notes_updates += 1;
                self.jobs.notes_from = self.pushes;
                Ok((before, tokens))
            }
        }
    }

    /// Replaces the entries at `positions` (ascending) by `message`, a
    /// summary of `tokens`, where the last of them was; calls whose result
    /// has not come yet have it dropped on arrival.
    fn compact(&mut self, positions: &[usize], message: Message, tokens: usize) {
        let gone: BTreeSet<usize> = positions.iter().copied().collect();
        let answered: BTreeSet<String> = positions
            .iter()
            .filter_map(|&at| match &self.entries[at].message {
                Message::ToolResult(result) => Some(result.call_id.clone()),
                _ => None,
            })
            .collect();
        let pending: BTreeSet<String> = self
            .shadow
            .pending_calls()
            .into_iter()
            .map(str::to_string)
            .collect();
        for &at in positions {
            if let Message::Assistant { content } = &self.entries[at].message {
                for call in calls(content) {
                    self.refs.remove(&call.id);
                    if !answered.contains(&call.id) && pending.contains(&call.id) {
                        self.dropped.insert(call.id.clone());
                    }
                }
            }
        }
        let last = *positions.last().unwrap_or(&0);
        let summary = Entry {
            push: self.entries[last].push,
            message,
            created: self.entries[last].created,
            tokens,
            altered: true,
            level: Level::Title,
            summary: true,
        };
        for &at in positions {
            self.total -= self.entries[at].tokens;
        }
        self.total += tokens;
        let mut index = 0;
        self.entries.retain(|_| {
            let keep = !gone.contains(&index);
            index += 1;
            keep
        });
        self.entries.insert(last + 1 - positions.len(), summary);
    }

    /// The task's state for a fresh window: the goal, earlier tasks,
    /// the notes (a bootstrapped window's opening prompt until its own
    /// are kept, so nothing is lost across windows) and the latest
    /// compaction summary.
    pub fn task_checkpoint(&self) -> TaskCheckpoint {
        let users: Vec<&str> = self
            .entries
            .iter()
            .filter_map(|entry| match &entry.message {
                Message::User { content } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        let earlier = &users[..users.len().saturating_sub(1)];
        let summary = self
            .entries
            .iter()
            .rev()
            .find(|entry| entry.summary)
            .map(|entry| match &entry.message {
                Message::Assistant { content } => prose(self.counter.as_ref(), content).1,
                _ => String::new(),
            })
            .map(|text| {
                text.split_once('\n')
                    .map_or(text.clone(), |(_, rest)| rest.to_string())
            })
            .unwrap_or_default();
        TaskCheckpoint {
            format: checkpoint::FORMAT,
            window_id: self.bootstrapped_from.map_or(1, |window| window + 1),
            state_version: self.jobs.notes_updates + 1,
            task_goal: users.last().copied().unwrap_or_default().to_string(),
            earlier_tasks: earlier[earlier.len().saturating_sub(checkpoint::TASKS_KEPT)..]
                .iter()
                .map(|task| task.to_string())
                .collect(),
            notes: self.current_notes(),
            summary,
            responses: self.jobs.notes_turn,
        }
    }

    /// The notes, or a bootstrapped window's opening prompt before its
    /// first notes.
    fn current_notes(&self) -> String {
        if !self.notes_text.is_empty() || self.bootstrapped_from.is_none() {
            return self.notes_text.clone();
        }
        self.entries[..self.lead()]
            .iter()
            .find_map(|entry| match &entry.message {
                Message::System { content } if content.starts_with(checkpoint::RESUME_MARKER) => {
                    Some(content.clone())
                }
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Sets the notes from a restored state (their tokens are in the
    /// saved total already).
    pub(super) fn with_notes(mut self, text: String) -> Self {
        self.notes = notes_message(&text).map(|message| {
            let tokens = message_tokens(self.counter.as_ref(), &message);
            (message, tokens)
        });
        self.notes_text = text;
        self
    }
}

/// How a summary of `level` is marked in the view.
fn marker(level: Level) -> &'static str {
    match level {
        Level::Full | Level::KeyPoints => "summary",
        Level::OneLine => "one-line summary",
        Level::Title => "title",
    }
}

/// The notes as the view shows them (`None` when there are none).
fn notes_message(text: &str) -> Option<Message> {
    (!text.is_empty()).then(|| {
        Message::system(format!(
            "[working notes, kept outside the context window in the session's notes file]\n{text}"
        ))
    })
}
