//! The OpenAI Chat Completions provider, for api.openai.com and the servers
//! that speak the same protocol (OpenRouter, vLLM, llama.cpp, Ollama...).

mod request;
mod stream;

use std::fmt;
use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use super::retry::{self, Attempt};
use super::sse::Events;
use super::{
    Provider, ProviderError, Request, Response, RetryPolicy, Sink, StreamEvent, env_var, http,
};

/// The variable holding the API key.
pub const KEY_VAR: &str = "OPENAI_API_KEY";
/// The variable holding the base URL.
pub const BASE_VAR: &str = "OPENAI_BASE_URL";
/// The public API's base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The public API's host: the one endpoint where a key is required.
const PUBLIC_HOST: &str = "api.openai.com";
/// Default bound on the wait for the next bytes of a stream.
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// How to reach an OpenAI-compatible server.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// API key, sent as a bearer token. Required only for api.openai.com.
    pub api_key: Option<String>,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Longest wait for the next bytes of a response before the attempt
    /// counts as a lost connection.
    pub idle_timeout: Duration,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("retry", &self.retry)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl OpenAiConfig {
    /// A configuration for `base_url` with no key and default retries.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
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
            OpenAiConfig::new(env_var(BASE_VAR).unwrap_or_else(|| DEFAULT_BASE_URL.to_string()));
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

/// A provider speaking OpenAI Chat Completions with streaming.
///
/// Requests carry `stream: true` and `stream_options.include_usage: true`.
/// The output limit is sent as `max_completion_tokens` to api.openai.com
/// (its reasoning models reject `max_tokens`) and as `max_tokens` to other
/// servers (which do not all know the newer name). The cache hint is
/// unused: these servers cache prompt prefixes by themselves.
pub struct OpenAiProvider {
    client: reqwest::Client,
    url: String,
    auth: Option<HeaderValue>,
    public: bool,
    retry: RetryPolicy,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("url", &self.url)
            .field("has_key", &self.auth.is_some())
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// Builds the provider. Fails when the base URL is invalid, or when it is
    /// the public API and there is no key.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let (url, host) = http::endpoint(&config.base_url, "/chat/completions", BASE_VAR)?;
        let public = host == PUBLIC_HOST;
        let key = config.api_key.filter(|k| !k.trim().is_empty());
        if public && key.is_none() {
            return Err(ProviderError::MissingKey {
                var: KEY_VAR,
                base_var: BASE_VAR,
                url,
            });
        }
        let auth = key
            .map(|k| {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", k.trim()))
                    .map_err(|_| ProviderError::InvalidKey { var: KEY_VAR })?;
                value.set_sensitive(true);
                Ok::<_, ProviderError>(value)
            })
            .transpose()?;
        Ok(OpenAiProvider {
            client: http::client(config.idle_timeout)?,
            url,
            auth,
            public,
            retry: config.retry,
        })
    }

    /// Builds the provider from [`OpenAiConfig::from_env`].
    pub fn from_env() -> Result<Self, ProviderError> {
        OpenAiProvider::new(OpenAiConfig::from_env())
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &Request<'_>) -> serde_json::Value {
        let max_tokens_field = if self.public {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        request::body(request, max_tokens_field)
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &'static str {
        "openai"
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
    provider: &'a OpenAiProvider,
    body: serde_json::Value,
}

impl Attempt for Call<'_> {
    async fn attempt(&self, sink: &mut Sink<'_>) -> Result<Response, ProviderError> {
        let p = self.provider;
        let mut headers = HeaderMap::new();
        if let Some(auth) = &p.auth {
            headers.insert(AUTHORIZATION, auth.clone());
        }
        let response = http::post(&p.client, &p.url, headers, &self.body, KEY_VAR).await?;
        let mut events = Events::new(&p.url, response);
        stream::read(&mut events, sink).await
    }
}
