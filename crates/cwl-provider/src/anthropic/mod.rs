//! The Anthropic Messages provider.

mod request;
mod stream;

use std::future::Future;

use serde_json::Value;

use super::api::{Api, ApiConfig, Wire};
use super::endpoint::ApiProvider;
use super::sse::Events;
use super::{ProviderError, Request, Response, Sink};

/// The variable holding the API key.
pub const KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The variable holding the base URL.
pub const BASE_VAR: &str = "ANTHROPIC_BASE_URL";
/// The public API's base URL; requests go to `{base}/v1/messages`.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` sent when the request sets no output limit (the API
/// requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 8_192;
/// Prefix of a [`cwl::Block::Reasoning`] signature that holds a redacted
/// thinking block's data rather than a thinking signature; such a block has
/// no text and is sent back as `redacted_thinking`.
pub const REDACTED_THINKING_PREFIX: &str = "redacted_thinking:";

/// The Anthropic Messages API, as an [`Api`]: requests go to
/// `{base_url}/v1/messages` with [`API_VERSION`] and the key as
/// `x-api-key`, required only for api.anthropic.com.
#[derive(Debug, Clone, Copy)]
pub struct Anthropic;

impl Api for Anthropic {
    const NAME: &'static str = "anthropic";
    const DEBUG_PREFIX: &'static str = "Anthropic";
    const KEY_VAR: &'static str = KEY_VAR;
    const BASE_VAR: &'static str = BASE_VAR;
    const DEFAULT_BASE_URL: &'static str = DEFAULT_BASE_URL;
    const PATH: &'static str = "/v1/messages";
    const PUBLIC_HOST: &'static str = "api.anthropic.com";
    const KEY_HEADER: (&'static str, &'static str) = ("x-api-key", "");
    const HEADERS: &'static [(&'static str, &'static str)] = &[("anthropic-version", API_VERSION)];

    fn body(request: &Request<'_>, _public: bool) -> Value {
        request::body(request)
    }
}

impl Wire for Anthropic {
    fn read(
        events: &mut Events,
        sink: &mut Sink<'_>,
    ) -> impl Future<Output = Result<Response, ProviderError>> + Send {
        stream::read(events, sink)
    }
}

/// How to reach the Anthropic API (or a server that speaks it).
pub type AnthropicConfig = ApiConfig<Anthropic>;

/// A provider speaking the Anthropic Messages API with streaming.
///
/// The system prompt goes to `system`; tool results become `tool_result`
/// blocks of user messages; consecutive messages of one role are merged so
/// roles alternate. Cache breakpoints (`cache_control: ephemeral`) mark the
/// system prompt, the tool list and the last block of the request's
/// [`Request::cache_breakpoint`] message: three of the four allowed.
pub type AnthropicProvider = ApiProvider<Anthropic>;
