//! The OpenAI Chat Completions provider, for api.openai.com and the servers
//! that speak the same protocol (OpenRouter, vLLM, llama.cpp, Ollama...).

mod request;
pub(crate) mod stream;

use std::future::Future;

use serde_json::Value;

use super::api::{Api, ApiConfig, Wire};
use super::endpoint::ApiProvider;
use super::sse::Events;
use super::{ProviderError, Request, Response, Sink};

/// The variable holding the API key.
pub const KEY_VAR: &str = "OPENAI_API_KEY";
/// The variable holding the base URL.
pub const BASE_VAR: &str = "OPENAI_BASE_URL";
/// The public API's base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The OpenAI Chat Completions API, as an [`Api`]: requests go to
/// `{base_url}/chat/completions` with the key as a bearer token, required
/// only for api.openai.com.
#[derive(Debug, Clone, Copy)]
pub struct OpenAi;

impl Api for OpenAi {
    const NAME: &'static str = "openai";
    const DEBUG_PREFIX: &'static str = "OpenAi";
    const KEY_VAR: &'static str = KEY_VAR;
    const BASE_VAR: &'static str = BASE_VAR;
    const DEFAULT_BASE_URL: &'static str = DEFAULT_BASE_URL;
    const PATH: &'static str = "/chat/completions";
    const PUBLIC_HOST: &'static str = "api.openai.com";
    const KEY_HEADER: (&'static str, &'static str) = ("authorization", "Bearer ");

    fn body(request: &Request<'_>, public: bool) -> Value {
        let max_tokens_field = if public {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        request::body(request, max_tokens_field)
    }
}

impl Wire for OpenAi {
    fn read(
        events: &mut Events,
        sink: &mut Sink<'_>,
    ) -> impl Future<Output = Result<Response, ProviderError>> + Send {
        stream::read(events, sink)
    }
}

/// How to reach an OpenAI-compatible server.
pub type OpenAiConfig = ApiConfig<OpenAi>;

/// A provider speaking OpenAI Chat Completions with streaming.
///
/// Requests carry `stream: true` and `stream_options.include_usage: true`.
/// The output limit is sent as `max_completion_tokens` to api.openai.com
/// (its reasoning models reject `max_tokens`) and as `max_tokens` to other
/// servers (which do not all know the newer name). The cache hint is
/// unused: these servers cache prompt prefixes by themselves.
pub type OpenAiProvider = ApiProvider<OpenAi>;
