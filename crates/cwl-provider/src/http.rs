//! The HTTP side shared by the providers: client, endpoint URLs, sending a
//! request and turning error statuses into [`ProviderError`]s.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Client, StatusCode, Url};

use super::ProviderError;
use super::error::chain;
use super::retry::retry_after;

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds the HTTP client. `idle_timeout` bounds the wait for the next bytes
/// of a response (its head or any later part of the stream), so a silent,
/// hung stream fails as a lost connection (and is retried) instead of
/// blocking forever.
pub(crate) fn client(idle_timeout: Duration) -> Result<Client, ProviderError> {
    Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(idle_timeout)
        .build()
        .map_err(|e| ProviderError::Client(chain(&e)))
}

/// The full URL of `path` under `base`, and the base's host.
pub(crate) fn endpoint(
    base: &str,
    path: &str,
    base_var: &'static str,
) -> Result<(String, String), ProviderError> {
    let invalid = |reason: String| ProviderError::InvalidBaseUrl {
        var: base_var,
        url: base.to_string(),
        reason,
    };
    let parsed = Url::parse(base.trim()).map_err(|e| invalid(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "the scheme must be http or https, not {}",
            parsed.scheme()
        )));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| invalid("it has no host".to_string()))?
        .to_ascii_lowercase();
    let url = format!("{}{path}", parsed.as_str().trim_end_matches('/'));
    Ok((url, host))
}

/// Posts `body` as JSON asking for an event stream, and returns the response
/// if its status is a success and it is not a plain JSON document.
/// `idle_timeout` is the client's, named in the error when it expires.
pub(crate) async fn post(
    client: &Client,
    url: &str,
    mut headers: HeaderMap,
    body: &serde_json::Value,
    key_var: &'static str,
    idle_timeout: Duration,
) -> Result<reqwest::Response, ProviderError> {
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    let response = client
        .post(url)
        .headers(headers)
        .json(body)
        .send()
        .await
        .map_err(|e| ProviderError::Connection {
            url: url.to_string(),
            detail: if e.is_timeout() {
                format!(
                    "no answer for {} (stream idle timeout; the request is sent again)",
                    seconds(idle_timeout)
                )
            } else {
                // The variant names the URL already.
                chain(&e.without_url())
            },
        })?;
    let status = response.status();
    if status.is_success() {
        return check_stream(url, response).await;
    }
    let wait = retry_after(response.headers());
    let text = response.text().await.unwrap_or_default();
    let message = error_message(&text);
    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return Err(ProviderError::Auth {
            status: status.as_u16(),
            url: url.to_string(),
            message,
            var: key_var,
        });
    }
    Err(ProviderError::Status {
        status: status.as_u16(),
        url: url.to_string(),
        message,
        retry_after: wait,
    })
}

/// Rejects a successful response that is a JSON document instead of a
/// stream (a server ignoring `stream: true`, or an error sent with 200).
async fn check_stream(
    url: &str,
    response: reqwest::Response,
) -> Result<reqwest::Response, ProviderError> {
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("application/json"));
    if !is_json {
        return Ok(response);
    }
    let text = response.text().await.unwrap_or_default();
    if let Some((kind, message)) = json_error(&text) {
        return Err(ProviderError::Api {
            kind,
            message,
            retryable: false,
        });
    }
    Err(ProviderError::Malformed {
        url: url.to_string(),
        detail: format!(
            "expected an event stream (text/event-stream) but got a JSON document: {}",
            snippet(&text)
        ),
    })
}

/// The `error` object of an API error document: its type and message.
pub(crate) fn json_error(text: &str) -> Option<(String, String)> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let error = value.get("error")?;
    if let Some(message) = error.as_str() {
        return Some(("error".to_string(), message.to_string()));
    }
    let message = error.get("message")?.as_str()?.to_string();
    let kind = ["type", "code"]
        .iter()
        .find_map(|k| match error.get(k)? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| "error".to_string());
    Some((kind, message))
}

/// The human-readable message of an error body: the API's message when it
/// sent a JSON error, else the start of the body.
pub(crate) fn error_message(text: &str) -> String {
    if let Some((_, message)) = json_error(text) {
        return message;
    }
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        for key in ["message", "detail"] {
            if let Some(message) = value.get(key).and_then(|m| m.as_str()) {
                return message.to_string();
            }
        }
    }
    if text.trim().is_empty() {
        "(empty body)".to_string()
    } else {
        snippet(text)
    }
}

/// A duration as seconds for messages: `90s`, `0.2s`.
pub(crate) fn seconds(duration: Duration) -> String {
    format!("{}s", duration.as_secs_f64())
}

/// The start of `text`, at most 300 characters, on one line.
pub(crate) fn snippet(text: &str) -> String {
    const MAX: usize = 300;
    let one_line: String = text.trim().replace(['\r', '\n'], " ");
    match one_line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_joins_and_validates() {
        let (url, host) = endpoint("https://api.openai.com/v1/", "/chat/completions", "X").unwrap();
        assert_eq!(url, "https://api.openai.com/v1/chat/completions");
        assert_eq!(host, "api.openai.com");
        let (url, _) = endpoint("http://127.0.0.1:8080", "/v1/messages", "X").unwrap();
        assert_eq!(url, "http://127.0.0.1:8080/v1/messages");
        let err = endpoint("localhost:8080", "/x", "OPENAI_BASE_URL").unwrap_err();
        assert!(err.to_string().contains("OPENAI_BASE_URL"), "{err}");
        assert!(endpoint("not a url", "/x", "X").is_err());
    }

    #[test]
    fn error_messages_are_extracted() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"invalid_request_error"}}"#),
            "bad key"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded"
        );
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(error_message(""), "(empty body)");
        assert_eq!(
            error_message("<html>502\nBad Gateway</html>"),
            "<html>502 Bad Gateway</html>"
        );
        assert_eq!(snippet(&"x".repeat(400)).chars().count(), 301);
    }
}
