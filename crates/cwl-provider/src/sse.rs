//! Reading a response body as server-sent events, with errors mapped to
//! [`ProviderError`]s that say which event was at fault.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use serde::de::DeserializeOwned;

use super::ProviderError;
use super::error::chain;
use super::http::{seconds, snippet};

type Inner = Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<reqwest::Error>>> + Send>>;

/// One event of the stream.
pub(crate) struct SseEvent {
    /// The `event:` field (`message` when absent).
    pub name: String,
    /// The `data:` lines, joined.
    pub data: String,
    /// 1-based position in the stream, for error messages.
    pub number: usize,
}

/// The events of one response.
pub(crate) struct Events {
    inner: Inner,
    url: String,
    count: usize,
    idle_timeout: Duration,
}

impl Events {
    /// Reads `response` as an event stream; `idle_timeout` is the client's
    /// bound on a silence, named in the error when it expires.
    pub(crate) fn new(url: &str, response: reqwest::Response, idle_timeout: Duration) -> Self {
        Events {
            inner: Box::pin(response.bytes_stream().eventsource()),
            url: url.to_string(),
            count: 0,
            idle_timeout,
        }
    }

    /// The next event with data, or `None` at the end of the body.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        loop {
            let event = match self.inner.next().await {
                None => return Ok(None),
                Some(Ok(event)) => event,
                Some(Err(EventStreamError::Transport(e))) => {
                    let why = if e.is_timeout() {
                        format!(
                            "no data for {} (stream idle timeout)",
                            seconds(self.idle_timeout)
                        )
                    } else {
                        chain(&e.without_url())
                    };
                    return Err(ProviderError::Connection {
                        url: self.url.clone(),
                        detail: format!("the stream broke after {} events: {why}", self.count),
                    });
                }
                Some(Err(EventStreamError::Utf8(e))) => {
                    return Err(self.malformed(format!(
                        "the event stream is not valid UTF-8 after {} events: {e}",
                        self.count
                    )));
                }
                Some(Err(EventStreamError::Parser(e))) => {
                    return Err(self.malformed(format!(
                        "invalid event-stream syntax after {} events: {e}",
                        self.count
                    )));
                }
            };
            self.count += 1;
            if event.data.trim().is_empty() {
                continue;
            }
            return Ok(Some(SseEvent {
                name: event.event,
                data: event.data,
                number: self.count,
            }));
        }
    }

    /// Parses an event's data as JSON of type `T`; `what` names the expected
    /// content for the error message.
    pub(crate) fn parse<T: DeserializeOwned>(
        &self,
        event: &SseEvent,
        what: &str,
    ) -> Result<T, ProviderError> {
        serde_json::from_str(&event.data).map_err(|e| {
            self.malformed(format!(
                "event {} ({}) is not a valid {what}: {e}; data: {}",
                event.number,
                event.name,
                snippet(&event.data)
            ))
        })
    }

    /// A [`ProviderError::Malformed`] for this stream.
    pub(crate) fn malformed(&self, detail: String) -> ProviderError {
        ProviderError::Malformed {
            url: self.url.clone(),
            detail,
        }
    }

    /// A [`ProviderError::Truncated`] for this stream.
    pub(crate) fn truncated(&self, missing: &str) -> ProviderError {
        ProviderError::Truncated {
            url: self.url.clone(),
            detail: format!("{missing} (after {} events)", self.count),
        }
    }
}
