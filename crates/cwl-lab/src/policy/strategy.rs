//! Any engine strategy ([`cwl::Strategy`]: CWL's [`cwl::Context`], the
//! context-window manager, Self-GC) replayed as a policy, driven as the
//! agent drives it: every log message pushed in order, inferred
//! annotations applied out of band, and before each request the side
//! requests it asks for answered (at most [`MAX_SIDE_REQUESTS`]), the
//! budget enforced and the view taken.
//!
//! The view is mapped back to the lab's entries by the push position the
//! strategy reports for each message ([`Source`]), never by content, so a
//! repeated message is never taken for an earlier one; what the strategy
//! rewrote or wrote becomes a new entry once and is reused while it stays
//! the same.
//!
//! Side requests go to the replay's [`SideModel`]; an answered one is
//! costed as a side call (its messages in, its text out; the part that
//! repeats the view shares its cached prefix), a skipped or failed one is
//! counted and its error given to the strategy.
//!
//! Where the log has timestamps, the time between two requests is told
//! the strategy before the second one's pass ([`Strategy::idle`]): Self-GC
//! commits a waiting plan when the provider's cache would have expired.
//! Logs without timestamps tell it nothing.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use cwl::tokens::{MESSAGE_OVERHEAD, message_tokens};
use cwl::{Annotation, Message, Source, Strategy};

use super::{Policy, PolicyError, Request, SideCall, SideTally, View};
use crate::side::{MAX_SIDE_REQUESTS, SideError, SideModel};
use crate::transcript::{Entry, Lab, Unit};

/// A strategy as a policy.
pub struct StrategyPolicy {
    name: &'static str,
    strategy: Box<dyn Strategy>,
    side: Arc<dyn SideModel>,
    /// The lab's entry for each pushed message still in the view (or
    /// rewritten in it), by push position.
    pushed: HashMap<u64, Arc<Entry>>,
    pushes: u64,
    /// Entries for what the strategy rewrote or wrote, by source.
    written: HashMap<Source, Arc<Entry>>,
    warnings: Vec<String>,
    /// When the last request with a timestamp was made.
    previous: Option<DateTime<Utc>>,
    /// Seconds since it, for the next request's pass.
    gap: Option<u64>,
}

impl std::fmt::Debug for StrategyPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrategyPolicy")
            .field("name", &self.name)
            .field("strategy", &self.strategy)
            .finish_non_exhaustive()
    }
}

impl StrategyPolicy {
    /// `strategy` replayed under the policy name `name`, its side requests
    /// answered by `side`.
    pub fn new(name: &'static str, strategy: Box<dyn Strategy>, side: Arc<dyn SideModel>) -> Self {
        StrategyPolicy {
            name,
            strategy,
            side,
            pushed: HashMap::new(),
            pushes: 0,
            written: HashMap::new(),
            warnings: Vec::new(),
            previous: None,
            gap: None,
        }
    }

    /// The strategy, for inspection.
    pub fn strategy(&self) -> &dyn Strategy {
        self.strategy.as_ref()
    }

    fn push_entry(&mut self, entry: &Arc<Entry>) -> Result<(), PolicyError> {
        self.pushed.insert(self.pushes, Arc::clone(entry));
        self.pushes += 1;
        let outcomes = self
            .strategy
            .push(entry.message().clone())
            .map_err(|e| PolicyError {
                policy: self.name,
                what: e.to_string(),
            })?;
        for outcome in outcomes.iter().filter(|o| o.is_error()) {
            self.warnings.push(format!(
                "delimiter call `{}` rejected: {}",
                outcome.call_id,
                outcome.text()
            ));
        }
        Ok(())
    }

    /// The entries of a side request's `messages`: while they repeat the
    /// strategy's current view from its start (a planner's fork of the
    /// prefix), the view's own entries, so the call shares the cached
    /// prefix as it would; after that, written text.
    fn side_input(&self, messages: &[Message], lab: &mut Lab) -> Vec<Arc<Entry>> {
        let mut view = self.strategy.view_sources();
        let mut shared = true;
        let mut input = Vec::with_capacity(messages.len());
        for message in messages {
            let known = shared
                .then(|| view.next())
                .flatten()
                .filter(|(_, current)| *current == message)
                .and_then(|(source, _)| match source {
                    Source::Pushed(index) => self.pushed.get(&index).cloned(),
                    other => self
                        .written
                        .get(&other)
                        .filter(|entry| entry.message() == message)
                        .cloned(),
                });
            shared = known.is_some();
            input.push(known.unwrap_or_else(|| lab.written(message.clone())));
        }
        input
    }

    /// Answers what the strategy asks for before a request.
    fn side_requests(&mut self, lab: &mut Lab) -> (Vec<SideCall>, SideTally) {
        let mut calls = Vec::new();
        let mut tally = SideTally::default();
        for _ in 0..MAX_SIDE_REQUESTS {
            let Some(request) = self.strategy.side_request() else {
                break;
            };
            let answer = self.side.answer(&request);
            match &answer {
                Ok(text) => {
                    tally.answered += 1;
                    let input = self.side_input(&request.messages, lab);
                    let output_tokens =
                        message_tokens(lab.counter(), &Message::assistant_text(text.clone()))
                            .saturating_sub(MESSAGE_OVERHEAD);
                    calls.push(SideCall {
                        input,
                        output_tokens,
                    });
                }
                Err(SideError::Skipped(_)) => tally.skipped += 1,
                Err(SideError::Failed(why)) => {
                    tally.failed += 1;
                    self.warnings
                        .push(format!("side request `{}` failed: {why}", request.purpose));
                }
            }
            self.strategy
                .side_result(request.id, answer.map_err(|e| e.to_string()));
        }
        (calls, tally)
    }
}

impl Policy for StrategyPolicy {
    fn name(&self) -> &'static str {
        self.name
    }

    fn push(
        &mut self,
        unit: &Unit,
        annotations: &[Annotation],
        _: &mut Lab,
    ) -> Result<(), PolicyError> {
        for annotation in annotations {
            if let Err(error) = self.strategy.annotate(annotation.clone()) {
                self.warnings.push(format!(
                    "inferred annotation {annotation:?} rejected: {error}"
                ));
            }
        }
        for entry in unit.entries() {
            self.push_entry(entry)?;
        }
        Ok(())
    }

    fn request(&mut self, lab: &mut Lab) -> Result<Request, PolicyError> {
        let (side_calls, side) = self.side_requests(lab);
        if let Some(seconds) = self.gap.take() {
            self.strategy.idle(seconds);
        }
        let report = self.strategy.enforce();
        // The lab keeps no session directory: folded payloads stay in the
        // strategy's transcript, and its log lines are not reports.
        drop(self.strategy.take_sidecars());
        drop(self.strategy.take_notes());
        let mut pieces = Vec::new();
        let mut pushed = HashMap::with_capacity(self.pushed.len());
        let mut written = HashMap::with_capacity(self.written.len());
        let turn_start = self
            .strategy
            .config()
            .reasoning
            .turn_start(self.strategy.view_sources().map(|(_, message)| message));
        for (at, (source, message)) in self.strategy.view_sources().enumerate() {
            let entry = match source {
                Source::Pushed(index) => self.pushed.get(&index).cloned().inspect(|entry| {
                    pushed.insert(index, Arc::clone(entry));
                }),
                // The provider drops an earlier turn's reasoning from every
                // policy's request; the message it leaves is the one logged.
                Source::Altered(index) if at < turn_start => self
                    .pushed
                    .get(&index)
                    .filter(|original| original.message().without_reasoning() == *message)
                    .cloned()
                    .inspect(|entry| {
                        pushed.insert(index, Arc::clone(entry));
                    }),
                _ => None,
            };
            let entry = match entry {
                Some(entry) => entry,
                None => {
                    let reused = self
                        .written
                        .get(&source)
                        .filter(|entry| entry.message() == message)
                        .cloned();
                    let entry = reused.unwrap_or_else(|| match source {
                        Source::Altered(index) => match self.pushed.get(&index) {
                            Some(original) => lab.derived(message.clone(), original),
                            None => lab.written(message.clone()),
                        },
                        _ => lab.written(message.clone()),
                    });
                    written.insert(source, Arc::clone(&entry));
                    entry
                }
            };
            pieces.push(entry);
        }
        // Altered messages keep their original for `derived` until they leave.
        for source in written.keys() {
            if let Source::Altered(index) = source
                && let Some(original) = self.pushed.get(index)
            {
                pushed.insert(*index, Arc::clone(original));
            }
        }
        self.pushed = pushed;
        self.written = written;
        Ok(Request {
            view: View::Pieces(pieces),
            side_calls,
            side,
            budget_met: Some(report.budget_met),
        })
    }

    fn time(&mut self, at: Option<DateTime<Utc>>) {
        self.gap = self
            .previous
            .zip(at)
            .map(|(before, now)| u64::try_from((now - before).num_seconds()).unwrap_or(0));
        self.previous = at.or(self.previous);
    }

    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use cwl::{Config, Context, Estimate};

    use super::*;
    use crate::side::NoModel;
    use crate::side::testing::{Asking, Gaps};

    #[test]
    fn the_time_between_logged_requests_is_told_before_each_pass() {
        let gaps = Gaps::default();
        let context = Context::new(Config::with_budget(10_000), Arc::new(Estimate), Vec::new());
        let strategy = Asking::new(context, 1, Default::default()).keeping_gaps(Arc::clone(&gaps));
        let mut policy = StrategyPolicy::new("timed", Box::new(strategy), Arc::new(NoModel));
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let user = lab.entry(Message::user("go"));
        policy.push(&Unit::Message(user), &[], &mut lab).unwrap();
        let start = DateTime::from_timestamp(1_767_225_600, 0).unwrap();
        let times = [
            Some(start),
            Some(start + TimeDelta::seconds(12)),
            None,
            Some(start + TimeDelta::seconds(612)),
            Some(start + TimeDelta::seconds(611)),
        ];
        for at in times {
            policy.time(at);
            policy.request(&mut lab).unwrap();
        }
        // No gap before the first request nor for one the log does not
        // date; a request dated before the last counts as no gap.
        assert_eq!(*gaps.lock().unwrap(), [12, 600, 0]);
    }
}
