//! [`ApiProvider`], the provider both HTTP APIs share: the endpoint built
//! from an [`ApiConfig`] (client, URL, key header, retry policy) and the
//! loop that sends one request under the retry policy and reads the stream
//! of each attempt.

use std::fmt;
use std::marker::PhantomData;

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::api::{Api, ApiConfig, Wire};
use super::retry::{self, Attempt};
use super::sse::Events;
use super::{Provider, ProviderError, Request, Response, RetryPolicy, Sink, StreamEvent, http};

/// A provider speaking the model API `A` with streaming. Used as
/// [`OpenAiProvider`](super::OpenAiProvider) and
/// [`AnthropicProvider`](super::AnthropicProvider), each of which
/// implements [`Provider`].
pub struct ApiProvider<A> {
    client: reqwest::Client,
    url: String,
    /// Sent with every request, the key among them.
    headers: HeaderMap,
    has_key: bool,
    public: bool,
    retry: RetryPolicy,
    idle_timeout: std::time::Duration,
    api: PhantomData<fn() -> A>,
}

impl<A: Api> fmt::Debug for ApiProvider<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(&format!("{}Provider", A::DEBUG_PREFIX))
            .field("url", &self.url)
            .field("has_key", &self.has_key)
            .finish_non_exhaustive()
    }
}

impl<A: Api> ApiProvider<A> {
    /// Builds the provider. Fails when the base URL is invalid, when it is
    /// the public API and there is no key, or when the key cannot be sent in
    /// a header.
    pub fn new(config: ApiConfig<A>) -> Result<Self, ProviderError> {
        let (url, host) = http::endpoint(&config.base_url, A::PATH, A::BASE_VAR)?;
        let public = host == A::PUBLIC_HOST;
        let key = config.api_key.filter(|k| !k.trim().is_empty());
        if public && key.is_none() {
            return Err(ProviderError::MissingKey {
                var: A::KEY_VAR,
                base_var: A::BASE_VAR,
                url,
            });
        }
        let mut headers = HeaderMap::new();
        for (name, value) in A::HEADERS {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let has_key = key.is_some();
        if let Some(key) = key {
            let (name, prefix) = A::KEY_HEADER;
            let mut value = HeaderValue::from_str(&format!("{prefix}{}", key.trim()))
                .map_err(|_| ProviderError::InvalidKey { var: A::KEY_VAR })?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static(name), value);
        }
        Ok(ApiProvider {
            client: http::client(config.idle_timeout)?,
            url,
            headers,
            has_key,
            public,
            retry: config.retry,
            idle_timeout: config.idle_timeout,
            api: PhantomData,
        })
    }

    /// Builds the provider from [`ApiConfig::from_env`].
    pub fn from_env() -> Result<Self, ProviderError> {
        Self::new(ApiConfig::from_env())
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &Request<'_>) -> serde_json::Value {
        A::body(request, self.public)
    }
}

impl<A: Wire> Provider for ApiProvider<A> {
    fn name(&self) -> &'static str {
        A::NAME
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
struct Call<'a, A> {
    provider: &'a ApiProvider<A>,
    body: serde_json::Value,
}

impl<A: Wire> Attempt for Call<'_, A> {
    async fn attempt(&self, sink: &mut Sink<'_>) -> Result<Response, ProviderError> {
        let p = self.provider;
        let response = http::post(
            &p.client,
            &p.url,
            p.headers.clone(),
            &self.body,
            A::KEY_VAR,
            p.idle_timeout,
        )
        .await?;
        let mut events = Events::new(&p.url, response, p.idle_timeout);
        A::read(&mut events, sink).await
    }
}

#[cfg(test)]
mod tests {
    use crate::{AnthropicConfig, AnthropicProvider, OpenAiConfig, Provider};

    #[test]
    fn debug_output_names_the_api_and_hides_the_key() {
        let config = OpenAiConfig::new("http://127.0.0.1:9/v1").with_api_key("sk-secret");
        let text = format!("{config:?}");
        assert!(text.starts_with("OpenAiConfig {"), "{text}");
        assert!(
            text.contains("<redacted>") && !text.contains("sk-secret"),
            "{text}"
        );
        let provider = AnthropicProvider::new(
            AnthropicConfig::new("http://127.0.0.1:9").with_api_key("ak-secret"),
        )
        .unwrap();
        assert_eq!(
            format!("{provider:?}"),
            r#"AnthropicProvider { url: "http://127.0.0.1:9/v1/messages", has_key: true, .. }"#
        );
        assert_eq!(provider.name(), "anthropic");
    }
}
