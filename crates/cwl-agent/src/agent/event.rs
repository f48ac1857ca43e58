//! What the agent loop reports as it works, for renderers and tests.

use cwl::{EpisodeKind, EpisodeReport, Usage};
use serde::Serialize;

/// One thing that happened in a session. Serialized (tagged by `event`)
/// it is a line of `--json` output.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A user turn began.
    TaskStarted {
        /// 1-based number of the task in this run.
        task: usize,
        /// The user's text.
        text: String,
    },
    /// More of the model's visible text.
    TextDelta {
        /// The piece of text.
        text: String,
    },
    /// More of the model's reasoning.
    ReasoningDelta {
        /// The piece of reasoning.
        text: String,
    },
    /// A tool call waits for the user's approval (`--approval`); with
    /// `--json` the reply is one JSON line on stdin (see
    /// [`JsonApprover`](super::JsonApprover)).
    ApprovalRequest {
        /// The call id as the model sent it.
        id: String,
        /// The tool.
        name: String,
        /// The raw JSON arguments.
        arguments: String,
        /// Whether the call may change something (false: the mode is
        /// `always`).
        mutating: bool,
    },
    /// A tool ran (or was refused).
    ToolResult {
        /// The call id as the model sent it.
        id: String,
        /// The tool.
        name: String,
        /// The raw JSON arguments.
        arguments: String,
        /// Whether the result is an error.
        is_error: bool,
        /// The text sent back to the model.
        content: String,
    },
    /// A delimiter call opened an episode.
    EpisodeStarted {
        /// The episode's name.
        name: String,
        /// Exploration or action.
        kind: EpisodeKind,
        /// For an act: the expl episodes it depends on.
        dependencies: Vec<String>,
    },
    /// A delimiter call closed the active episode.
    EpisodeEnded {
        /// The episode's name.
        name: String,
        /// Exploration or action.
        kind: EpisodeKind,
        /// For an expl: what was learned.
        description: Option<String>,
    },
    /// A delimiter call was rejected; the model got an error result.
    DelimiterRejected {
        /// The call id.
        id: String,
        /// Why.
        error: String,
    },
    /// An eviction pass changed the view.
    Evicted {
        /// Counted prompt tokens before the pass.
        tokens_before: usize,
        /// Counted prompt tokens after it.
        tokens_after: usize,
        /// The engine's budget for the conversation.
        budget: usize,
        /// The low-water mark the pass evicted down to.
        floor: usize,
        /// Index in the new view of the first message the pass changed: the
        /// request's prefix before it is unchanged (and stays cached).
        first_changed: Option<usize>,
        /// Residues and finished user turns folded into the index line.
        folded: usize,
        /// What the pass did, per episode.
        episodes: Vec<EpisodeReport>,
    },
    /// The conversation stays over budget: nothing left is evictable.
    BudgetUnmet {
        /// Counted prompt tokens.
        tokens: usize,
        /// The engine's budget.
        budget: usize,
    },
    /// A model call failed transiently and is sent again.
    Retrying {
        /// The attempt that failed (1 for the first).
        attempt: u32,
        /// Milliseconds until the next attempt.
        wait_ms: u64,
        /// What went wrong.
        reason: String,
        /// Whether streamed output of the failed attempt is void.
        discarded_output: bool,
    },
    /// A model call finished.
    Response {
        /// 1-based number of the model call in this run.
        request: usize,
        /// Tokens the request counted locally (calibrated), status block included.
        request_tokens: usize,
        /// The conversation's tokens after eviction (calibrated, no status block).
        context_tokens: usize,
        /// The user's budget for the whole request.
        budget: usize,
        /// The provider's usage report.
        usage: Usage,
        /// Cost of the call in US dollars, when the model's prices are known.
        cost_usd: Option<f64>,
    },
    /// A sub-agent (`delegate`) finished, failed or was stopped: what its
    /// model calls used, already in the run's totals (its calls send no
    /// [`Event::Response`]).
    Delegated {
        /// The `delegate` call's id.
        id: String,
        /// Its model calls that answered.
        requests: usize,
        /// Their usage, summed.
        usage: Usage,
        /// Their cost in US dollars, when the model's prices are known.
        cost_usd: Option<f64>,
    },
    /// The strategy's context health (zone, utilisation, velocity, calls
    /// to red, evictions, alerts), sent when its zone or alerts change; a
    /// note with the same figures follows for people and the session file.
    /// CWL reports none.
    Health(cwl::Health),
    /// The strategy's detailed health figures (eviction rate, compression
    /// ratio, tool-result bloat, component budgets, trend), sent with each
    /// [`Event::Health`] by strategies that keep them.
    Metrics {
        /// The strategy's name.
        strategy: String,
        /// Its figures, as it reports them.
        metrics: serde_json::Value,
    },
    /// What `bash` commands may write, said once at start.
    Sandbox {
        /// The mode in force (`off`, `workspace-write`, `read-only`).
        mode: String,
        /// Why it is not what was asked, or only partly enforced.
        warning: Option<String>,
    },
    /// Something worth telling the user (also kept in the session file).
    Note {
        /// What happened.
        text: String,
    },
    /// The task stopped on an error that the call returns as well (the
    /// model API after retries, the window, the turn limit): a front end
    /// that prints the returned error shows it once.
    TaskFailed {
        /// What went wrong, one line.
        error: String,
    },
    /// A user turn finished: the model answered without tool calls.
    TaskFinished {
        /// 1-based number of the task in this run.
        task: usize,
        /// Model calls the task took.
        turns: usize,
    },
}

/// Receives the agent's events as they happen.
pub trait Observer: Send {
    /// Handles one event.
    fn event(&mut self, event: &Event);

    /// Whether the output went away (a closed pipe): the run should stop.
    fn closed(&self) -> bool {
        false
    }
}

/// An observer that keeps every event, for tests and tools.
#[derive(Debug, Default, Clone)]
pub struct Collect {
    /// The events so far, in order.
    pub events: Vec<Event>,
}

impl Observer for Collect {
    fn event(&mut self, event: &Event) {
        self.events.push(event.clone());
    }
}

/// An observer that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Observer for Silent {
    fn event(&mut self, _event: &Event) {}
}

impl<T: Observer + ?Sized> Observer for Box<T> {
    fn event(&mut self, event: &Event) {
        (**self).event(event);
    }

    fn closed(&self) -> bool {
        (**self).closed()
    }
}

impl<T: Observer + ?Sized> Observer for std::sync::Arc<std::sync::Mutex<T>> {
    fn event(&mut self, event: &Event) {
        self.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .event(event);
    }

    fn closed(&self) -> bool {
        self.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .closed()
    }
}
