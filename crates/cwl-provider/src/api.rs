//! What tells one model API from another ([`Api`]), and the configuration
//! of a provider for it ([`ApiConfig`]).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use super::sse::Events;
use super::{ProviderError, Request, Response, RetryPolicy, Sink};

/// Default bound on the wait for the next bytes of a response: a stream
/// silent this long is treated as a dropped connection and retried.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The fixed facts of one model API: which variables configure it, where
/// its requests go, how it takes a key and what a request body looks like.
/// Implemented by [`OpenAi`](super::openai::OpenAi) and
/// [`Anthropic`](super::anthropic::Anthropic).
pub trait Api {
    /// The provider's name as recorded in sessions.
    const NAME: &'static str;
    /// The start of the type names shown in `Debug` output (`OpenAi` for
    /// `OpenAiConfig` and `OpenAiProvider`).
    const DEBUG_PREFIX: &'static str;
    /// The variable holding the API key.
    const KEY_VAR: &'static str;
    /// The variable holding the base URL.
    const BASE_VAR: &'static str;
    /// The base URL used when [`Api::BASE_VAR`] is unset.
    const DEFAULT_BASE_URL: &'static str;
    /// The path requests go to, appended to the base URL.
    const PATH: &'static str;
    /// The public API's host: the one endpoint where a key is required.
    const PUBLIC_HOST: &'static str;
    /// The (lowercase) header that carries the key, and the text that
    /// precedes the key in it.
    const KEY_HEADER: (&'static str, &'static str);
    /// Headers (lowercase name, value) sent with every request.
    const HEADERS: &'static [(&'static str, &'static str)] = &[];

    /// The JSON body sent for `request`; `public` tells whether it goes to
    /// [`Api::PUBLIC_HOST`].
    fn body(request: &Request<'_>, public: bool) -> serde_json::Value;
}

/// How an API's answer streams in: the part of an [`Api`] that stays inside
/// the crate.
pub(crate) trait Wire: Api {
    /// Reads the whole stream of one attempt.
    fn read(
        events: &mut Events,
        sink: &mut Sink<'_>,
    ) -> impl Future<Output = Result<Response, ProviderError>> + Send;
}

/// How to reach a model API, or a server that speaks it. Used as
/// [`OpenAiConfig`](super::OpenAiConfig) and
/// [`AnthropicConfig`](super::AnthropicConfig), and given to
/// [`ApiProvider::new`](super::ApiProvider::new).
#[derive(Clone)]
pub struct ApiConfig<A> {
    /// Base URL; requests go to `{base_url}` followed by [`Api::PATH`].
    pub base_url: String,
    /// API key, sent in [`Api::KEY_HEADER`]. Required only for
    /// [`Api::PUBLIC_HOST`].
    pub api_key: Option<String>,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Longest wait for the next bytes of a response before the attempt
    /// counts as a lost connection.
    pub idle_timeout: Duration,
    api: PhantomData<fn() -> A>,
}

impl<A: Api> fmt::Debug for ApiConfig<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(&format!("{}Config", A::DEBUG_PREFIX))
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("retry", &self.retry)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl<A: Api> ApiConfig<A> {
    /// A configuration for `base_url` with no key and default retries.
    pub fn new(base_url: impl Into<String>) -> Self {
        ApiConfig {
            base_url: base_url.into(),
            api_key: None,
            retry: RetryPolicy::default(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            api: PhantomData,
        }
    }

    /// Reads [`Api::KEY_VAR`] and [`Api::BASE_VAR`] (default
    /// [`Api::DEFAULT_BASE_URL`]); empty values count as unset.
    pub fn from_env() -> Self {
        let config = Self::new(env_var(A::BASE_VAR).unwrap_or_else(|| A::DEFAULT_BASE_URL.into()));
        match env_var(A::KEY_VAR) {
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

    /// Sets the longest wait for the next bytes of a response.
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }
}

/// Reads an environment variable, treating an empty value as unset.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}
