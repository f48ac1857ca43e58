//! The one error type of the providers.

use std::time::Duration;

/// Why a model call failed.
///
/// [`ProviderError::is_retryable`] tells which failures the retry loop
/// tries again; everything else is reported at once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The endpoint is the public API and no key is configured.
    #[error(
        "{var} is not set: {url} needs an API key; set {var}, or set {base_var} to a server that needs none"
    )]
    MissingKey {
        /// The variable that holds the key.
        var: &'static str,
        /// The variable that holds the base URL.
        base_var: &'static str,
        /// The endpoint that needs the key.
        url: String,
    },
    /// The configured key cannot be sent in an HTTP header.
    #[error(
        "{var} holds characters that cannot be sent in an HTTP header (a stray newline or quote?)"
    )]
    InvalidKey {
        /// The variable that holds the key.
        var: &'static str,
    },
    /// The configured base URL cannot be used.
    #[error("invalid base URL {url:?} (set through {var}): {reason}")]
    InvalidBaseUrl {
        /// The variable the base URL is read from.
        var: &'static str,
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built (TLS setup).
    #[error("could not build the HTTP client: {0}")]
    Client(String),
    /// The server rejected the credentials (HTTP 401 or 403).
    #[error(
        "authentication failed (HTTP {status}) at {url}: {message}; set {var} to a valid key for this server"
    )]
    Auth {
        /// The HTTP status.
        status: u16,
        /// The endpoint.
        url: String,
        /// The server's error message.
        message: String,
        /// The variable that holds the key.
        var: &'static str,
    },
    /// The server answered with an error status.
    #[error("HTTP {status} from {url}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The endpoint.
        url: String,
        /// The server's error message.
        message: String,
        /// How long the server asked us to wait (`Retry-After`), if it did.
        retry_after: Option<Duration>,
    },
    /// The connection failed or broke (refused, reset, timed out).
    #[error("connection to {url} failed: {detail}")]
    Connection {
        /// The endpoint.
        url: String,
        /// The transport error and its causes.
        detail: String,
    },
    /// The stream ended before the model finished its response.
    #[error("the stream from {url} ended before the response was complete: {detail}")]
    Truncated {
        /// The endpoint.
        url: String,
        /// What was missing.
        detail: String,
    },
    /// The stream or one of its events could not be understood.
    #[error("malformed response from {url}: {detail}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was wrong and where.
        detail: String,
    },
    /// The API reported an error inside the stream.
    #[error("the model API reported an error: {kind}: {message}")]
    Api {
        /// The error type the API gave (e.g. `overloaded_error`).
        kind: String,
        /// The API's message.
        message: String,
        /// Whether the error is transient (overload, server error).
        retryable: bool,
    },
    /// Every attempt failed with a transient error.
    #[error("gave up after {attempts} attempts; last error: {last}")]
    RetriesExhausted {
        /// How many attempts were made.
        attempts: u32,
        /// The error of the last attempt.
        last: Box<ProviderError>,
    },
}

impl ProviderError {
    /// Whether the failure is transient, so the same request may succeed
    /// when sent again: HTTP 408, 429 and 5xx (including Anthropic's 529),
    /// connection failures, streams cut short, and overload errors the API
    /// reports inside a stream.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => {
                matches!(*status, 408 | 429) || (500..=599).contains(status)
            }
            ProviderError::Connection { .. } | ProviderError::Truncated { .. } => true,
            ProviderError::Api { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// The wait the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

impl ProviderError {
    /// The error with every secret value in its text replaced (a server
    /// may echo the key in an error body).
    pub fn redacted(self, redactor: &crate::secrets::Redactor) -> Self {
        let text = |s: String| redactor.redact(&s).into_owned();
        match self {
            ProviderError::MissingKey { var, base_var, url } => ProviderError::MissingKey {
                var,
                base_var,
                url: text(url),
            },
            ProviderError::InvalidKey { var } => ProviderError::InvalidKey { var },
            ProviderError::InvalidBaseUrl { var, url, reason } => ProviderError::InvalidBaseUrl {
                var,
                url: text(url),
                reason: text(reason),
            },
            ProviderError::Client(detail) => ProviderError::Client(text(detail)),
            ProviderError::Auth {
                status,
                url,
                message,
                var,
            } => ProviderError::Auth {
                status,
                url: text(url),
                message: text(message),
                var,
            },
            ProviderError::Status {
                status,
                url,
                message,
                retry_after,
            } => ProviderError::Status {
                status,
                url: text(url),
                message: text(message),
                retry_after,
            },
            ProviderError::Connection { url, detail } => ProviderError::Connection {
                url: text(url),
                detail: text(detail),
            },
            ProviderError::Truncated { url, detail } => ProviderError::Truncated {
                url: text(url),
                detail: text(detail),
            },
            ProviderError::Malformed { url, detail } => ProviderError::Malformed {
                url: text(url),
                detail: text(detail),
            },
            ProviderError::Api {
                kind,
                message,
                retryable,
            } => ProviderError::Api {
                kind: text(kind),
                message: text(message),
                retryable,
            },
            ProviderError::RetriesExhausted { attempts, last } => ProviderError::RetriesExhausted {
                attempts,
                last: Box::new(last.redacted(redactor)),
            },
        }
    }
}

/// Renders an error on one line: its own text and its root cause (the
/// layers between, such as an HTTP client's "client error (Connect): tcp
/// connect error", add length, not meaning).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut root = None;
    let mut source = error.source();
    while let Some(cause) = source {
        root = Some(cause);
        source = cause.source();
    }
    if let Some(root) = root {
        let cause_text = root.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
    }
    text
}
