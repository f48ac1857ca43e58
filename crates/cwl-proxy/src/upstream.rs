//! Sending a request to the provider and relaying its answer: status,
//! headers and body as they come, the body streamed chunk by chunk as it
//! arrives (no buffering), a dropped upstream stream ending the client's.

use std::time::Duration;

use crate::event::warn;
use bytes::Bytes;
use futures_util::TryStreamExt;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper::http::{HeaderMap, HeaderName, Method, Response, StatusCode, Uri, header};

/// An error that ends a relayed body.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body the proxy sends: relayed or its own.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// Headers that belong to one hop and are never forwarded.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// Which provider's error shape the proxy's own errors take, so a client
/// reads them as it reads its provider's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `{"type":"error","error":{"type":..,"message":..}}`
    Anthropic,
    /// `{"error":{"message":..,"type":..,"code":..}}`
    OpenAi,
}

impl Shape {
    /// An error response of the proxy's own.
    pub fn error(self, status: StatusCode, kind: &str, message: &str) -> Response<ProxyBody> {
        let body = match self {
            Shape::Anthropic => serde_json::json!({
                "type": "error",
                "error": {"type": kind, "message": message},
            }),
            Shape::OpenAi => serde_json::json!({
                "error": {"message": message, "type": kind, "param": null, "code": kind},
            }),
        };
        let mut response = Response::new(full(body.to_string()));
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// A whole body of the proxy's own.
pub fn full(body: impl Into<Bytes>) -> ProxyBody {
    Full::new(body.into())
        .map_err(|never| match never {})
        .boxed()
}

/// Request headers that carry a key: an error body that echoes one is
/// redacted before it goes anywhere.
pub const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "proxy-authorization",
];

/// The most of an error body read to be redacted: a body that says it is
/// longer goes on unread, and one that turns out longer is cut here.
const MAX_ERROR_BODY: usize = 1 << 20;

/// How long a connection to the upstream may take by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the upstream may take by default to start its answer (its
/// status and headers): a whole non-streamed answer may come first.
pub const DEFAULT_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(600);

/// How many times a request is sent again when the upstream dropped the
/// connection before answering: a pooled connection the upstream closed
/// while idle (it restarted, or its keep-alive ran out) fails this way, and
/// the next attempt goes out on a new one. The providers' own SDKs retry
/// such errors too.
pub const STALE_RETRIES: usize = 2;

/// The provider at `base` (scheme, host and an optional path prefix).
#[derive(Debug, Clone)]
pub struct Upstream {
    base: String,
    connect: Duration,
    first_byte: Duration,
}

impl Upstream {
    /// An upstream at `base`, such as `https://api.anthropic.com`, with
    /// the default timeouts.
    pub fn new(base: &str) -> Self {
        Upstream {
            base: base.trim_end_matches('/').to_string(),
            connect: DEFAULT_CONNECT_TIMEOUT,
            first_byte: DEFAULT_FIRST_BYTE_TIMEOUT,
        }
    }

    /// The same upstream with these timeouts: to connect, and from the
    /// request sent to the answer's status and headers. Past either the
    /// client gets a provider-shaped 504.
    pub fn with_timeouts(mut self, connect: Duration, first_byte: Duration) -> Self {
        self.connect = connect;
        self.first_byte = first_byte;
        self
    }

    /// How long connecting may take.
    pub fn connect_timeout(&self) -> Duration {
        self.connect
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The base URL as messages show it: a user name, password or query
    /// (where credentials go) is `***`, so no message, log line or error
    /// body a client gets carries them.
    pub fn shown(&self) -> String {
        let Ok(mut url) = reqwest::Url::parse(&self.base) else {
            return "(an upstream URL that does not parse)".to_string();
        };
        if !url.username().is_empty() || url.password().is_some() {
            let _ = url.set_password(None);
            let _ = url.set_username("***");
        }
        if url.query().is_some() {
            url.set_query(Some("***"));
        }
        url.set_fragment(None);
        let shown = url.to_string();
        match shown.strip_suffix('/') {
            Some(trimmed) if url.path() == "/" => trimmed.to_string(),
            _ => shown,
        }
    }

    /// The secret parts of the base URL (its user name, password and query
    /// values), each with a name for its redaction marker.
    pub fn secrets(&self) -> Vec<(String, String)> {
        let Ok(url) = reqwest::Url::parse(&self.base) else {
            return Vec::new();
        };
        let mut pairs = vec![("upstream user".to_string(), url.username().to_string())];
        pairs.extend(
            url.password()
                .map(|p| ("upstream password".to_string(), p.to_string())),
        );
        pairs.extend(
            url.query_pairs()
                .map(|(k, v)| (format!("upstream {k}"), v.into_owned())),
        );
        pairs
    }

    /// A redactor of [`Upstream::secrets`], for error texts that might
    /// echo them.
    pub fn redactor(&self) -> cwl_provider::secrets::Redactor {
        cwl_provider::secrets::Redactor::new(self.secrets())
    }

    /// A redactor of [`Upstream::secrets`] and of the keys in `headers`
    /// (a client's request), for upstream error bodies that echo them.
    pub fn redactor_with(&self, headers: &HeaderMap) -> cwl_provider::secrets::Redactor {
        let mut pairs = self.secrets();
        for name in CREDENTIAL_HEADERS {
            for value in headers.get_all(*name) {
                let Ok(value) = value.to_str() else { continue };
                let value = value.strip_prefix("Bearer ").unwrap_or(value);
                pairs.push((format!("{name} header"), value.to_string()));
            }
        }
        cwl_provider::secrets::Redactor::new(pairs)
    }

    /// The upstream URL for a request to `uri` (its path and query
    /// appended to the base).
    pub fn url(&self, uri: &Uri) -> String {
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        format!("{}{}", self.base, path)
    }

    /// Sends the request and relays the answer; a provider that cannot be
    /// reached gets a provider-shaped 502. A request the upstream dropped
    /// before answering goes out again, [`STALE_RETRIES`] times at most.
    pub async fn forward(
        &self,
        client: &reqwest::Client,
        method: Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: Bytes,
        shape: Shape,
    ) -> Response<ProxyBody> {
        let send = || {
            let mut request = client
                .request(method.clone(), self.url(uri))
                .body(body.clone());
            for (name, value) in headers {
                if !is_hop_by_hop(name) {
                    request = request.header(name, value);
                }
            }
            request.send()
        };
        let sent = tokio::time::timeout(self.first_byte, async {
            let mut resent = 0;
            loop {
                match send().await {
                    Err(error) if resent < STALE_RETRIES && dropped_unanswered(&error) => {
                        resent += 1;
                    }
                    sent => return sent,
                }
            }
        })
        .await;
        let timed_out = |what: &str, after: Duration| {
            let why = format!(
                "upstream {} {what} within {} s",
                self.shown(),
                after.as_secs_f64()
            );
            warn(&why);
            shape.error(
                StatusCode::GATEWAY_TIMEOUT,
                "api_error",
                &format!("cwl proxy: {why}"),
            )
        };
        let upstream = match sent {
            Ok(Ok(upstream)) => upstream,
            Err(_) => return timed_out("sent no answer", self.first_byte),
            Ok(Err(error)) if error.is_timeout() => {
                return timed_out("not reached", self.connect);
            }
            Ok(Err(error)) => {
                let why = format!(
                    "upstream {} unreachable: {}",
                    self.shown(),
                    self.redactor().redact(&describe(&error.without_url()))
                );
                warn(&why);
                return shape.error(
                    StatusCode::BAD_GATEWAY,
                    "api_error",
                    &format!("cwl proxy: {why}"),
                );
            }
        };
        let status = upstream.status();
        let readable = upstream
            .headers()
            .get(header::CONTENT_ENCODING)
            .is_none_or(|coding| coding == "identity");
        let small = upstream
            .content_length()
            .is_none_or(|length| length <= MAX_ERROR_BODY as u64);
        let redacting = (status.is_client_error() || status.is_server_error()) && readable && small;
        let mut response = Response::builder().status(status);
        if let Some(out) = response.headers_mut() {
            for (name, value) in upstream.headers() {
                let length = name == header::CONTENT_LENGTH;
                if (!is_hop_by_hop(name) || length) && !(redacting && length) {
                    out.append(name, value.clone());
                }
            }
        }
        if redacting {
            let body = match error_body(upstream).await {
                Ok(bytes) => self.redacted(&bytes, headers),
                Err(error) => Bytes::from(format!(
                    "cwl proxy: the upstream's error body could not be read: {}",
                    describe(&error.without_url())
                )),
            };
            return response.body(full(body)).unwrap_or_else(|error| {
                shape.error(
                    StatusCode::BAD_GATEWAY,
                    "api_error",
                    &format!("cwl proxy: bad upstream response: {error}"),
                )
            });
        }
        let stream = upstream
            .bytes_stream()
            .map_ok(Frame::data)
            .map_err(|error| -> BoxError { Box::new(error) });
        response
            .body(BodyExt::boxed(StreamBody::new(stream)))
            .unwrap_or_else(|error| {
                shape.error(
                    StatusCode::BAD_GATEWAY,
                    "api_error",
                    &format!("cwl proxy: bad upstream response: {error}"),
                )
            })
    }
}

/// An upstream error's body, at most [`MAX_ERROR_BODY`] bytes of it (the
/// rest is cut, and said so): it is read whole to be redacted.
async fn error_body(upstream: reqwest::Response) -> Result<Bytes, reqwest::Error> {
    use futures_util::StreamExt as _;
    let mut stream = upstream.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk?);
        if body.len() > MAX_ERROR_BODY {
            body.truncate(MAX_ERROR_BODY);
            body.extend_from_slice(b"... (cut by cwl proxy)");
            break;
        }
    }
    Ok(Bytes::from(body))
}

impl Upstream {
    /// `body` (an upstream error) with the keys of the client's `headers`
    /// and of the upstream URL redacted, read as text (bytes that are not
    /// UTF-8 read as U+FFFD); unchanged when nothing was redacted.
    fn redacted(&self, body: &Bytes, headers: &HeaderMap) -> Bytes {
        let text = String::from_utf8_lossy(body);
        match self.redactor_with(headers).redact(&text) {
            std::borrow::Cow::Borrowed(_) => body.clone(),
            std::borrow::Cow::Owned(text) => Bytes::from(text),
        }
    }
}

/// Whether a header belongs to one hop (never forwarded).
pub(crate) fn is_hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(&name.as_str())
}

/// Whether the upstream dropped the connection before any answer came: a
/// reset, a broken pipe or a connection closed mid-request, but not a
/// refused connection or a timeout, which a new attempt would only repeat.
fn dropped_unanswered(error: &reqwest::Error) -> bool {
    if error.is_timeout() || error.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            ) {
                return true;
            }
        }
        if let Some(hyper) = cause.downcast_ref::<hyper::Error>()
            && hyper.is_incomplete_message()
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// An error with its causes, `a: b: c`.
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_loses_the_clients_key_even_around_bytes_that_are_not_text() {
        let upstream = Upstream::new("http://127.0.0.1:9/?token=tok-abcdef123456");
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", "sk-ant-secret-0123456789".parse().unwrap());
        let mut body = b"{\"error\": \"bad key sk-ant-secret-0123456789 \xff\xfe".to_vec();
        body.extend_from_slice(b" and tok-abcdef123456\"}");
        let out = upstream.redacted(&Bytes::from(body), &headers);
        let out = String::from_utf8_lossy(&out);
        assert!(!out.contains("sk-ant-secret"), "{out}");
        assert!(!out.contains("tok-abcdef"), "{out}");
        assert!(out.contains("[redacted x-api-key header]"), "{out}");
        let plain = Bytes::from_static(b"\xff no key here");
        assert_eq!(
            upstream.redacted(&plain, &headers),
            plain,
            "unchanged bytes"
        );
    }

    #[test]
    fn a_shown_url_carries_no_credentials() {
        let shown = |base: &str| Upstream::new(base).shown();
        assert_eq!(
            shown("http://user:pw@host:8080/base/?token=abc#x"),
            "http://***@host:8080/base/?***"
        );
        assert_eq!(
            shown("https://api.anthropic.com/"),
            "https://api.anthropic.com"
        );
        assert_eq!(shown("http://127.0.0.1:9/v1"), "http://127.0.0.1:9/v1");
        assert_eq!(shown("not a url"), "(an upstream URL that does not parse)");
    }
}
