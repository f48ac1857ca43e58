//! The seam a harness drives whatever manages its context through: CWL
//! (the [`Context`]), the context-window manager, Self-GC. A harness holds
//! a `Box<dyn Strategy>`, pushes what happens, enforces the budget before
//! each model call and sends the view; everything a strategy needs from
//! outside (a model call for a plan or a summary) it asks for as a
//! [`SideRequest`] the harness runs and answers, so strategies stay pure.
//!
//! Every strategy keeps the engine's guarantees: user turns are kept, a
//! tool call and its result leave together, the latest response and its
//! results go back unmodified, the same calls give the same view, and its
//! state saves to JSON so a resumed session shows the same view.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::context::{Accepted, Context, DelimiterOutcome, Source, TranscriptError};
use crate::graph::Graph;
use crate::message::{Message, ToolSpec};
use crate::meter::Meter;
use crate::protocol::{Annotation, DelimiterError, EpisodeKind};
use crate::recall::TranscriptStore;
use crate::report::Report;

/// A strategy's state at one point of the session, for the session file.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    /// Messages pushed before it: a resume replays the messages after.
    pub pushes: u64,
    /// The state as JSON, read back by the strategy's own restore.
    pub state: serde_json::Value,
}

/// A model call a strategy asks the harness to make beside the main loop
/// (a planner, a summary, a judge). The harness runs it through its
/// provider and never waits longer than `timeout`; a call that fails or
/// times out is answered with an error and must change nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideRequest {
    /// The strategy's id for it, given back with the result.
    pub id: u64,
    /// What it is for, for logs (`planner`, `summary`...).
    pub purpose: String,
    /// The conversation to send (tools are never offered).
    pub messages: Vec<Message>,
    /// The longest the harness may wait for the answer.
    pub timeout: Duration,
    /// Output limit for the answer (`None`: the provider's default).
    pub max_output_tokens: Option<u32>,
}

/// A file a strategy wants kept beside the session (a folded payload):
/// strategies do no I/O, so the harness writes it before the view that
/// points to it is sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SidecarFile {
    /// The file name, unique in the session (no directory parts).
    pub name: String,
    /// The exact bytes to write.
    pub content: String,
}

/// Where a harness keeps the session's sidecar files, for `recall`.
pub trait SidecarStore {
    /// The content of sidecar `name`, or why it cannot be read.
    fn read_sidecar(&self, name: &str) -> Result<String, String>;
}

/// Sidecars kept in memory, by name (tests, embedders that write no
/// files).
impl SidecarStore for std::collections::HashMap<String, String> {
    fn read_sidecar(&self, name: &str) -> Result<String, String> {
        self.get(name)
            .cloned()
            .ok_or_else(|| format!("no sidecar `{name}`"))
    }
}

/// A sidecar store that holds nothing (harnesses without sidecars).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSidecars;

impl SidecarStore for NoSidecars {
    fn read_sidecar(&self, name: &str) -> Result<String, String> {
        Err(format!("no sidecar store: `{name}` cannot be read"))
    }
}

/// How full the window is, for health events; strategies that do not
/// measure pressure give none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// Prompt tokens over the budget, in [0, ∞).
    pub utilisation: f64,
    /// The pressure zone (`green`, `yellow`, `orange`, `red`).
    pub zone: String,
    /// Mean tokens added per model call over the recent calls.
    pub velocity: f64,
    /// Calls left before the red zone at that velocity (`None`: not growing).
    pub turns_until_red: Option<f64>,
    /// Whether the count is the provider's (calibrated) or the local one.
    pub provider_counted: bool,
    /// Eviction passes that changed the view so far.
    pub evictions: u64,
    /// Warnings worth showing (`utilisation over 90%`...).
    pub alerts: Vec<String>,
}

/// What manages a session's context: receives every message, keeps the
/// prompt under the budget, and says what to send.
///
/// Object safe: harnesses hold a `Box<dyn Strategy>` chosen at run time.
pub trait Strategy: SideCalls + Send + fmt::Debug {
    /// The strategy's name as `--strategy` spells it.
    fn name(&self) -> &'static str;

    /// Appends a message. Delimiter calls in an assistant message are
    /// answered in order (one outcome each); on error nothing changes.
    fn push(&mut self, message: Message) -> Result<Vec<DelimiterOutcome>, TranscriptError>;

    /// Brings the prompt under the budget, before a model call.
    fn enforce(&mut self) -> Report;

    /// Tells the strategy, before [`Strategy::enforce`] for a model call,
    /// that the conversation sat idle `seconds` since the previous model
    /// call ended (for a proxy: since the previous request), so a strategy
    /// that minds the provider's prefix cache can tell it has expired.
    /// Returns whether the gap changed the strategy's state: the harness
    /// then records it and a replay gives it back at the same point, so
    /// the same gaps give the same view. Strategies without a clock
    /// ignore it.
    fn idle(&mut self, seconds: u64) -> bool {
        let _ = seconds;
        false
    }

    /// The messages to send, with where each comes from.
    fn view_sources(&self) -> Box<dyn Iterator<Item = (Source, &Message)> + '_>;

    /// The messages to send, in order.
    fn view(&self) -> Box<dyn Iterator<Item = &Message> + '_> {
        Box::new(self.view_sources().map(|(_, message)| message))
    }

    /// The local count of the prompt (view and tools), before calibration.
    fn counted_tokens(&self) -> usize;

    /// The configuration in force and the calibration of the count.
    fn meter(&self) -> &Meter;

    /// The meter, to change the budget or calibrate.
    fn meter_mut(&mut self) -> &mut Meter;

    /// The engine that answers `delimiter` calls, pairs tool calls with
    /// results and holds the tool definitions: CWL is its own, the other
    /// strategies keep one beside their view.
    fn episodes(&self) -> &Context;

    /// The episode engine, to annotate.
    fn episodes_mut(&mut self) -> &mut Context;

    /// Applies an annotation out of band, between messages, for harnesses
    /// that infer episodes instead of letting the model call `delimiter`
    /// (the proxy); the graph is unchanged on error.
    fn annotate(&mut self, annotation: Annotation) -> Result<Accepted, DelimiterError> {
        self.episodes_mut().annotate(annotation)
    }

    /// The tool definitions offered with every request.
    fn tools(&self) -> &[ToolSpec] {
        self.episodes().tools()
    }

    /// The prompt's token count (view and tools), calibrated by the
    /// provider's reports.
    fn tokens(&self) -> usize {
        self.meter().tokens(self.counted_tokens())
    }

    /// The budget τ.
    fn budget(&self) -> usize {
        self.meter().budget()
    }

    /// Changes the budget for later passes.
    fn set_budget(&mut self, budget: usize) {
        self.meter_mut().set_budget(budget);
    }

    /// The engine configuration in force (budget, eviction settings, tool
    /// classes).
    fn config(&self) -> &Config {
        self.meter().config()
    }

    /// The calibration offset in force: provider count minus local count.
    fn calibration_offset(&self) -> i64 {
        self.meter().offset()
    }

    /// Calibrates the count with the provider's figure for a request
    /// counted as `local` tokens.
    fn calibrate(&mut self, local: usize, reported: usize) {
        self.meter_mut().calibrate(local, reported);
    }

    /// The episodes the model marked with `delimiter`.
    fn graph(&self) -> &Graph {
        self.episodes().graph()
    }

    /// The annotated episode being worked in, if any.
    fn active_episode(&self) -> Option<(&str, EpisodeKind)> {
        self.episodes().active_episode()
    }

    /// Ids of tool calls still waiting for their result, oldest first.
    fn pending_calls(&self) -> Vec<&str> {
        self.episodes().pending_calls()
    }

    /// Whether everything before the first episode stays for good (CWL's
    /// prologue): the harness then limits what may join it. Strategies
    /// that can evict any assistant content say no.
    fn keeps_prologue(&self) -> bool {
        false
    }

    /// Answers a `recall` call (pushed already) from `store`: the tool
    /// result text, or an error to send as the result.
    fn recall(&self, arguments: &str, store: &dyn TranscriptStore) -> Result<String, String>;

    /// Answers a `recall` call with the session's sidecar files at hand
    /// too; strategies that write none answer as [`Strategy::recall`].
    fn recall_with(
        &self,
        arguments: &str,
        store: &dyn TranscriptStore,
        sidecars: &dyn SidecarStore,
    ) -> Result<String, String> {
        let _ = sidecars;
        self.recall(arguments, store)
    }

    /// What the strategy wants logged since the last call (a plan
    /// rejected, a plan committed), taken once each, for session notes.
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// The state now, to save in the session file.
    fn save(&self) -> Result<Saved, serde_json::Error>;

    /// How full the window is, when the strategy measures it.
    fn health(&self) -> Option<Health> {
        None
    }

    /// The working notes the strategy keeps outside the window (a
    /// Markdown document), for the harness to write to the session's
    /// notes file whenever they change; `None` when it keeps none.
    fn notes(&self) -> Option<String> {
        None
    }

    /// Detailed health figures (rates, ratios, budgets, trends) as JSON,
    /// for `--json` events and session reports; `None` when the strategy
    /// keeps none.
    fn metrics(&self) -> Option<serde_json::Value> {
        None
    }
}

/// What a strategy that calls a model beside the main loop (a planner, a
/// summary) or keeps files beside the session adds to [`Strategy`]; the
/// defaults are a strategy that does neither. Harnesses that run side
/// calls take any `SideCalls`, a strategy or what wraps one.
pub trait SideCalls: Send {
    /// Sidecar files to write before the next request, taken once each
    /// (none for strategies that fold nothing to files).
    fn take_sidecars(&mut self) -> Vec<SidecarFile> {
        Vec::new()
    }

    /// A model call the strategy wants made, if any; each is asked once.
    fn side_request(&mut self) -> Option<SideRequest> {
        None
    }

    /// The answer to side request `id`: the model's text, or why there is
    /// none (error, timeout). Strategies that never ask ignore it.
    fn side_result(&mut self, id: u64, result: Result<String, String>) {
        let _ = (id, result);
    }
}

/// CWL asks for no side call and keeps no sidecar.
impl SideCalls for Context {}

impl Strategy for Context {
    fn name(&self) -> &'static str {
        "cwl"
    }

    fn push(&mut self, message: Message) -> Result<Vec<DelimiterOutcome>, TranscriptError> {
        Context::push(self, message)
    }

    fn enforce(&mut self) -> Report {
        Context::enforce(self)
    }

    fn view_sources(&self) -> Box<dyn Iterator<Item = (Source, &Message)> + '_> {
        Box::new(Context::view_sources(self))
    }

    fn view(&self) -> Box<dyn Iterator<Item = &Message> + '_> {
        Box::new(Context::view(self))
    }

    fn counted_tokens(&self) -> usize {
        Context::counted_tokens(self)
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }

    fn meter_mut(&mut self) -> &mut Meter {
        &mut self.meter
    }

    fn episodes(&self) -> &Context {
        self
    }

    fn episodes_mut(&mut self) -> &mut Context {
        self
    }

    fn keeps_prologue(&self) -> bool {
        true
    }

    fn recall(&self, arguments: &str, store: &dyn TranscriptStore) -> Result<String, String> {
        Context::recall(self, arguments, store).map_err(|error| error.to_string())
    }

    fn save(&self) -> Result<Saved, serde_json::Error> {
        let checkpoint = self.checkpoint();
        Ok(Saved {
            pushes: checkpoint.pushes(),
            state: serde_json::to_value(&checkpoint)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::checkpoint::Checkpoint;
    use crate::evictor::PaperOrder;
    use crate::message::{Block, ToolCall};
    use crate::protocol::delimiter_spec;
    use crate::tokens::Estimate;

    fn drive(strategy: &mut dyn Strategy) -> Vec<Message> {
        strategy.push(Message::system("system")).unwrap();
        strategy.push(Message::user("find it")).unwrap();
        let start = r#"{"action":"start","name":"look","type":"expl"}"#;
        let outcomes = strategy
            .push(Message::Assistant {
                content: vec![
                    Block::ToolCall(ToolCall::new("d1", "delimiter", start)),
                    Block::ToolCall(ToolCall::new("g1", "grep", "{}")),
                ],
            })
            .unwrap();
        assert_eq!(outcomes.len(), 1);
        strategy
            .push(Message::tool_result(
                "d1",
                "delimiter",
                outcomes[0].text(),
                false,
            ))
            .unwrap();
        assert_eq!(strategy.pending_calls(), ["g1"]);
        strategy
            .push(Message::tool_result("g1", "grep", "x".repeat(400), false))
            .unwrap();
        assert_eq!(strategy.active_episode().map(|(n, _)| n), Some("look"));
        strategy.enforce();
        strategy.view().cloned().collect()
    }

    #[test]
    fn a_context_behind_the_seam_answers_as_itself() {
        let context = || {
            Context::new(
                Config::with_budget(1_000),
                Arc::new(Estimate),
                vec![delimiter_spec()],
            )
        };
        let mut direct = context();
        let mut boxed: Box<dyn Strategy> = Box::new(context());
        let view = drive(boxed.as_mut());
        drive(&mut direct);
        assert_eq!(boxed.name(), "cwl");
        assert!(direct.view().cloned().eq(view.iter().cloned()));
        assert_eq!(boxed.tokens(), direct.tokens());
        assert!(boxed.side_request().is_none());
        assert!(!boxed.idle(86_400), "CWL keeps no clock");
        assert!(boxed.health().is_none());
        assert!(boxed.notes().is_none() && boxed.metrics().is_none());
        let saved = boxed.save().unwrap();
        assert_eq!(saved.pushes, 5);
        let checkpoint = Checkpoint::deserialize(&saved.state).unwrap();
        let restored =
            Context::restore(checkpoint, Arc::new(Estimate), Arc::new(PaperOrder)).unwrap();
        assert!(restored.view().cloned().eq(view.iter().cloned()));
    }

    #[test]
    fn recall_errors_come_back_as_text() {
        let context = Context::new(Config::with_budget(1_000), Arc::new(Estimate), Vec::new());
        let strategy: &dyn Strategy = &context;
        let error = strategy
            .recall(r#"{"episode":"nope"}"#, &Vec::new())
            .unwrap_err();
        assert!(error.contains("nope"), "{error}");
    }
}
