//! Model APIs for cwl: one streaming interface, [`Provider`], over the
//! OpenAI Chat Completions API (and the many servers that speak it), the
//! OpenAI Responses API and the Anthropic Messages API; the one model and price table ([`models`]) that
//! the agent, the lab and the proxy all read; and the redaction of secrets
//! ([`secrets`]).
//!
//! This crate depends on the engine's message model only: never on the
//! agent, a tool, the session store or a front end.
//!
//! A provider turns a provider-neutral request (the [`cwl::Message`]
//! transcript, the tools, a cache hint) into its wire format, streams the
//! answer, reports deltas as they arrive, and returns the finished assistant
//! message with its usage. Transient failures are retried (see [`retry`]).
//! Providers never run tools.

pub mod anthropic;
mod api;
mod endpoint;
mod error;
mod http;
pub mod models;
pub mod openai;
pub mod responses;
pub mod retry;
pub mod secrets;
pub mod side;
mod sse;
#[cfg(feature = "testing")]
pub mod testing;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use cwl::{Message, ToolSpec, Usage};
use futures_util::future::BoxFuture;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use api::{Api, ApiConfig, DEFAULT_IDLE_TIMEOUT};
pub use endpoint::ApiProvider;
pub use error::ProviderError;
pub use models::{ModelInfo, ModelTable};
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use responses::{ResponsesConfig, ResponsesProvider};
pub use retry::RetryPolicy;

/// What to ask the model.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The model name as the server knows it.
    pub model: &'a str,
    /// The transcript; the first message may be [`Message::System`].
    pub messages: &'a [Message],
    /// The tools offered to the model.
    pub tools: &'a [ToolSpec],
    /// Upper bound of generated tokens; `None` leaves it to the server
    /// (Anthropic requires one: [`anthropic::DEFAULT_MAX_TOKENS`] is sent).
    pub max_output_tokens: Option<u32>,
    /// Index in `messages` of the last message of the prefix that stays the
    /// same from call to call. Anthropic marks a cache breakpoint there;
    /// OpenAI caches prefixes by itself and ignores it.
    pub cache_breakpoint: Option<usize>,
    /// How hard the model should think, for models that can be told.
    pub reasoning: Option<ReasoningEffort>,
}

impl<'a> Request<'a> {
    /// A request with no output limit, cache hint or reasoning setting.
    pub fn new(model: &'a str, messages: &'a [Message], tools: &'a [ToolSpec]) -> Self {
        Request {
            model,
            messages,
            tools,
            max_output_tokens: None,
            cache_breakpoint: None,
            reasoning: None,
        }
    }
}

/// A requested reasoning effort. OpenAI receives it as `reasoning_effort`;
/// Anthropic as extended thinking with the budget of
/// [`ReasoningEffort::thinking_budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningEffort {
    /// Little reasoning.
    Low,
    /// The usual amount.
    Medium,
    /// As much as useful.
    High,
}

impl ReasoningEffort {
    /// The name OpenAI uses (`low`, `medium`, `high`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }

    /// Anthropic thinking budget in tokens for this effort.
    pub fn thinking_budget(self) -> u32 {
        match self {
            ReasoningEffort::Low => 2_048,
            ReasoningEffort::Medium => 8_192,
            ReasoningEffort::High => 24_576,
        }
    }
}

/// Something that happened while a response streamed in.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More visible text.
    TextDelta(String),
    /// More reasoning text.
    ReasoningDelta(String),
    /// The model began a tool call (its arguments are still streaming).
    ToolCallStarted {
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// The attempt failed with a transient error and the whole request is
    /// sent again after `wait`. Every delta reported since the previous
    /// attempt began is void: the response restarts from nothing.
    Retrying {
        /// The attempt that failed (1 for the first).
        attempt: u32,
        /// How long we wait before the next attempt.
        wait: Duration,
        /// What went wrong.
        reason: String,
        /// Whether deltas of the failed attempt had been reported.
        discarded_output: bool,
    },
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// It finished its turn (or hit a stop sequence).
    EndTurn,
    /// It wants tool results. Also reported when the message holds tool
    /// calls whatever reason the server gave, since some servers say `stop`.
    ToolUse,
    /// It hit the output token limit; the message may be cut off.
    MaxTokens,
    /// It refused or a content filter stopped it.
    Refusal,
    /// Anything else, as the server named it.
    Other(String),
}

/// A finished model call.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The assistant message (possibly with no blocks if the model said
    /// nothing).
    pub message: Message,
    /// Token usage of the successful attempt (failed attempts are not
    /// counted: providers do not report usage for broken streams).
    pub usage: Usage,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// How many attempts it took (1 when nothing was retried).
    pub attempts: u32,
}

/// A model API.
///
/// Object-safe so the agent can hold a `Box<dyn Provider>` chosen at run
/// time (or a scripted stand-in in tests).
pub trait Provider: Send + Sync {
    /// The provider's name as recorded in sessions (`openai`, `anthropic`).
    fn name(&self) -> &'static str;

    /// Sends `request`, calls `on_event` for each delta as it streams in,
    /// and returns the finished response. Transient failures are retried
    /// under the provider's [`RetryPolicy`].
    fn stream<'a>(
        &'a self,
        request: &'a Request<'a>,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Response, ProviderError>>;

    /// [`Provider::stream`] without watching the deltas.
    fn complete<'a>(
        &'a self,
        request: &'a Request<'a>,
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let mut ignore = |_: StreamEvent| {};
            self.stream(request, &mut ignore).await
        })
    }
}

/// The built-in provider kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI Chat Completions and compatible servers.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses (the gpt-5.x-codex models).
    Responses,
}

impl ProviderKind {
    /// The name used on the command line and in sessions.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Responses => "responses",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider name that is not `openai`, `anthropic` or `responses`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider {0:?}: expected \"openai\", \"anthropic\" or \"responses\"")]
pub struct UnknownProvider(pub String);

impl FromStr for ProviderKind {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(ProviderKind::OpenAi),
            "anthropic" => Ok(ProviderKind::Anthropic),
            "responses" => Ok(ProviderKind::Responses),
            _ => Err(UnknownProvider(s.to_string())),
        }
    }
}

/// Builds the provider of `kind` from its environment variables
/// (`OPENAI_API_KEY`/`OPENAI_BASE_URL` for both OpenAI APIs, or
/// `ANTHROPIC_API_KEY`/`ANTHROPIC_BASE_URL`).
pub fn from_env(kind: ProviderKind) -> Result<Box<dyn Provider>, ProviderError> {
    Ok(match kind {
        ProviderKind::OpenAi => Box::new(OpenAiProvider::from_env()?),
        ProviderKind::Anthropic => Box::new(AnthropicProvider::from_env()?),
        ProviderKind::Responses => Box::new(ResponsesProvider::from_env()?),
    })
}

/// The caller's event callback, remembering whether the current attempt
/// has reported output.
pub(crate) struct Sink<'a> {
    on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    output_seen: bool,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(on_event: &'a mut (dyn FnMut(StreamEvent) + Send)) -> Self {
        Sink {
            on_event,
            output_seen: false,
        }
    }

    pub(crate) fn emit(&mut self, event: StreamEvent) {
        if !matches!(event, StreamEvent::Retrying { .. }) {
            self.output_seen = true;
        }
        (self.on_event)(event);
    }

    pub(crate) fn text(&mut self, delta: &str) {
        if !delta.is_empty() {
            self.emit(StreamEvent::TextDelta(delta.to_string()));
        }
    }

    pub(crate) fn reasoning(&mut self, delta: &str) {
        if !delta.is_empty() {
            self.emit(StreamEvent::ReasoningDelta(delta.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_kind_parses() {
        assert_eq!("openai".parse(), Ok(ProviderKind::OpenAi));
        assert_eq!(" Anthropic ".parse(), Ok(ProviderKind::Anthropic));
        let err = "gemini".parse::<ProviderKind>().unwrap_err();
        assert!(err.to_string().contains("\"gemini\""));
    }
}
