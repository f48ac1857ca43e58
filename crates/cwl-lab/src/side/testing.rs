//! A strategy for tests that asks for side requests (feature `testing`):
//! CWL's [`Context`] that, before every `every`-th request, asks a
//! `planner` request over its current view and keeps each answer it is
//! given. It changes nothing with the answers: tests check what reached
//! it and what the replay counted. It can also keep the idle gaps it is
//! told ([`Asking::keeping_gaps`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cwl::strategy::Saved;
use cwl::{
    Context, DelimiterOutcome, Message, Report, SideCalls, SideRequest, Source, Strategy,
    TranscriptError, TranscriptStore,
};

/// The answers an [`Asking`] strategy was given: `(request id, result)`.
pub type Answers = Arc<Mutex<Vec<(u64, Result<String, String>)>>>;

/// CWL asking a planner request before every `every`-th enforce.
#[derive(Debug)]
pub struct Asking {
    context: Context,
    every: u64,
    enforced: u64,
    next_id: u64,
    queued: Option<SideRequest>,
    answers: Answers,
    gaps: Option<Gaps>,
}

/// The idle gaps, in seconds, an [`Asking`] strategy was told.
pub type Gaps = Arc<Mutex<Vec<u64>>>;

/// What an [`Asking`] strategy sends as its planner prompt's last message.
pub const PLANNER_PROMPT: &str = "PLAN: which objects can go?";

impl Asking {
    /// `context` asking before every `every`-th request (the first
    /// included), its answers kept in `answers`.
    pub fn new(context: Context, every: u64, answers: Answers) -> Self {
        Asking {
            context,
            every: every.max(1),
            enforced: 0,
            next_id: 0,
            queued: None,
            answers,
            gaps: None,
        }
    }

    /// The same strategy, keeping every idle gap it is told in `gaps`.
    pub fn keeping_gaps(self, gaps: Gaps) -> Self {
        Asking {
            gaps: Some(gaps),
            ..self
        }
    }

    fn queue(&mut self) {
        if !self.enforced.is_multiple_of(self.every) || self.queued.is_some() {
            return;
        }
        self.next_id += 1;
        let mut messages: Vec<Message> = self.context.view().cloned().collect();
        messages.push(Message::user(PLANNER_PROMPT));
        self.queued = Some(SideRequest {
            id: self.next_id,
            purpose: "planner".into(),
            messages,
            timeout: Duration::from_secs(5),
            max_output_tokens: Some(64),
        });
    }
}

impl Strategy for Asking {
    fn name(&self) -> &'static str {
        "asking"
    }

    fn push(&mut self, message: Message) -> Result<Vec<DelimiterOutcome>, TranscriptError> {
        let outcomes = self.context.push(message)?;
        self.queue();
        Ok(outcomes)
    }

    fn enforce(&mut self) -> Report {
        self.enforced += 1;
        self.context.enforce()
    }

    fn idle(&mut self, seconds: u64) -> bool {
        if let Some(gaps) = &self.gaps {
            gaps.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(seconds);
        }
        Strategy::idle(&mut self.context, seconds)
    }

    fn view_sources(&self) -> Box<dyn Iterator<Item = (Source, &Message)> + '_> {
        Box::new(self.context.view_sources())
    }

    fn meter(&self) -> &cwl::Meter {
        Strategy::meter(&self.context)
    }

    fn meter_mut(&mut self) -> &mut cwl::Meter {
        Strategy::meter_mut(&mut self.context)
    }

    fn episodes(&self) -> &Context {
        &self.context
    }

    fn episodes_mut(&mut self) -> &mut Context {
        &mut self.context
    }

    fn counted_tokens(&self) -> usize {
        self.context.counted_tokens()
    }

    fn recall(&self, arguments: &str, store: &dyn TranscriptStore) -> Result<String, String> {
        Strategy::recall(&self.context, arguments, store)
    }

    fn save(&self) -> Result<Saved, serde_json::Error> {
        Strategy::save(&self.context)
    }
}

impl SideCalls for Asking {
    fn side_request(&mut self) -> Option<SideRequest> {
        self.queued.take()
    }

    fn side_result(&mut self, id: u64, result: Result<String, String>) {
        self.answers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((id, result));
    }
}
