//! What `--json` prints: one line per request the proxy handled.

use serde::Serialize;

use cwl::Report;

use crate::side::SideCallEvent;

/// Where events go (`--json` prints them; tests collect them).
pub type Sink = Box<dyn Fn(&Event) + Send + Sync>;

/// One request through the proxy.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// When (RFC 3339).
    pub timestamp: String,
    /// The API (`anthropic`, `openai-chat`, `openai-responses`).
    pub api: &'static str,
    /// The conversation's session id (or its number when not stored).
    pub conversation: String,
    /// `new`, `continue`, `resume` (rebuilt after leaving memory),
    /// `shared` (rebuilt after another replica served it) or `branch`.
    pub route: &'static str,
    /// The history items the client sent.
    pub items: usize,
    /// Engine messages pushed for this request.
    pub pushed: usize,
    /// Counted prompt tokens before the pass.
    pub tokens_before: usize,
    /// Counted prompt tokens of the view sent.
    pub tokens_after: usize,
    /// The budget.
    pub budget: usize,
    /// Whether the view fits it.
    pub budget_met: bool,
    /// The episodes this pass evicted from, in order.
    pub evicted: Vec<String>,
    /// Anything worth knowing (budget not met, rejected annotations).
    pub warnings: Vec<String>,
    /// The side calls the strategy had made before the request went
    /// upstream, with their token usage.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub side_calls: Vec<SideCallEvent>,
    /// The `recall` results the proxy answered in place of the client's
    /// (see [`crate::recall`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recalls: Vec<RecallEvent>,
    /// Where the proxy's own time on the request went.
    pub timing: Timing,
}

/// Where the proxy's own time on a request went, in microseconds: what
/// it adds to the time to first byte, side calls (which wait on the
/// upstream) apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Timing {
    /// Reading the body and hashing its history.
    pub parse_us: u64,
    /// Routing, pushing the new messages and the pass (a rebuild from the
    /// session file included).
    pub engine_us: u64,
    /// Rendering the view and writing the body that goes upstream.
    pub serialise_us: u64,
}

impl Timing {
    /// Microseconds in `duration`.
    pub fn micros(duration: std::time::Duration) -> u64 {
        u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
    }
}

/// One `recall` result the proxy answered for the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecallEvent {
    /// The call it answers.
    pub call_id: String,
    /// Whether the strategy brought content back (not an error).
    pub ok: bool,
    /// The answer's length in bytes.
    pub bytes: usize,
}

impl Event {
    /// The event of a request whose pass made `report`.
    pub fn new(
        api: &'static str,
        conversation: String,
        route: &'static str,
        items: usize,
        pushed: usize,
        report: &Report,
    ) -> Self {
        Event {
            timestamp: cwl_session::now(),
            api,
            conversation,
            route,
            items,
            pushed,
            tokens_before: report.tokens_before,
            tokens_after: report.tokens_after,
            budget: report.budget,
            budget_met: report.budget_met,
            evicted: report.episodes.iter().map(|e| e.name.clone()).collect(),
            warnings: report.warnings.clone(),
            side_calls: Vec::new(),
            recalls: Vec::new(),
            timing: Timing::default(),
        }
    }
}

/// Tells the operator about something the proxy worked around (a body
/// forwarded unchanged, a conversation dropped), on stderr. Never given
/// headers or bodies, so keys and content are never written.
pub fn warn(text: &str) {
    eprintln!("cwl proxy: warning: {text}");
}
