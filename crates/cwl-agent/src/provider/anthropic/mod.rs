//! The Anthropic Messages provider.

mod request;
mod stream;

use std::fmt;
use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::retry::{self, Attempt};
use super::sse::Events;
use super::{
    Provider, ProviderError, Request, Response, RetryPolicy, Sink, StreamEvent, env_var, http,
};

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
const PUBLIC_HOST: &str = "api.anthropic.com";
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// How to reach the Anthropic API (or a server that speaks it).
#[derive(Clone)]
pub struct AnthropicConfig {
    /// Base URL; requests go to `{base_url}/v1/messages`.
    pub base_url: String,
    /// API key, sent as `x-api-key`. Required only for api.anthropic.com.
    pub api_key: Option<String>,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Longest wait for the next bytes of a response before the attempt
    /// counts as a lost connection.
    pub idle_timeout: Duration,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("retry", &self.retry)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl AnthropicConfig {
    /// A configuration for `base_url` with no key and default retries.
    pub fn new(base_url: impl Into<String>) -> Self {
        AnthropicConfig {
            base_url: base_url.into(),
            api_key: None,
            retry: RetryPolicy::default(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// Reads [`KEY_VAR`] and [`BASE_VAR`] (default [`DEFAULT_BASE_URL`]);
    /// empty values count as unset.
    pub fn from_env() -> Self {
        let config =
            AnthropicConfig::new(env_var(BASE_VAR).unwrap_or_else(|| DEFAULT_BASE_URL.to_string()));
        match env_var(KEY_VAR) {
            Some(key) => config.with_api_key(key),
            None => config,
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
}

/// A provider speaking the Anthropic Messages API with streaming.
///
/// The system prompt goes to `system`; tool results become `tool_result`
/// blocks of user messages; consecutive messages of one role are merged so
/// roles alternate. Cache breakpoints (`cache_control: ephemeral`) mark the
/// system prompt, the tool list and the last block of the request's
/// [`Request::cache_breakpoint`] message: three of the four allowed.
pub struct AnthropicProvider {
    client: reqwest::Client,
    url: String,
    key: Option<HeaderValue>,
    retry: RetryPolicy,
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("url", &self.url)
            .field("has_key", &self.key.is_some())
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// Builds the provider. Fails when the base URL is invalid, or when it is
    /// the public API and there is no key.
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        let (url, host) = http::endpoint(&config.base_url, "/v1/messages", BASE_VAR)?;
        let key = config.api_key.filter(|k| !k.trim().is_empty());
        if host == PUBLIC_HOST && key.is_none() {
            return Err(ProviderError::MissingKey {
                var: KEY_VAR,
                base_var: BASE_VAR,
                url,
            });
        }
        let key = key
            .map(|k| {
                let mut value = HeaderValue::from_str(k.trim())
                    .map_err(|_| ProviderError::InvalidKey { var: KEY_VAR })?;
                value.set_sensitive(true);
                Ok::<_, ProviderError>(value)
            })
            .transpose()?;
        Ok(AnthropicProvider {
            client: http::client(config.idle_timeout)?,
            url,
            key,
            retry: config.retry,
        })
    }

    /// Builds the provider from [`AnthropicConfig::from_env`].
    pub fn from_env() -> Result<Self, ProviderError> {
        AnthropicProvider::new(AnthropicConfig::from_env())
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &Request<'_>) -> serde_json::Value {
        request::body(request)
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn stream<'a>(
        &'a self,
        request: &'a Request<'a>,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let call = Call {
                provider: self,
                body: self.request_body(request),
            };
            let mut sink = Sink::new(on_event);
            retry::run(&self.retry, &call, &mut sink).await
        })
    }
}

/// One request, sent as often as the retry policy allows.
struct Call<'a> {
    provider: &'a AnthropicProvider,
    body: serde_json::Value,
}

impl Attempt for Call<'_> {
    async fn attempt(&self, sink: &mut Sink<'_>) -> Result<Response, ProviderError> {
        let p = self.provider;
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = &p.key {
            headers.insert(HeaderName::from_static("x-api-key"), key.clone());
        }
        let response = http::post(&p.client, &p.url, headers, &self.body, KEY_VAR).await?;
        let mut events = Events::new(&p.url, response);
        stream::read(&mut events, sink).await
    }
}
