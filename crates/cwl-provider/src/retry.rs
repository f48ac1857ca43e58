//! Retries of transient failures: exponential backoff with jitter, bounded
//! attempts, and the server's `Retry-After` honoured up to a cap.
//!
//! A stream that breaks after part of the response arrived is retried as a
//! whole fresh request: the partial message is discarded (the caller is told
//! through [`StreamEvent::Retrying`]). That is safe because a provider never
//! runs tools: nothing the partial response asked for has happened yet.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::header::HeaderMap;

use super::{ProviderError, Response, Sink, StreamEvent};

/// How a retry waits: given the delay, a future that completes after it.
/// Injectable so tests run without real sleeps.
pub type SleepFn = Arc<dyn Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync>;

/// When and how often a failed model call is tried again.
#[derive(Clone)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (at least 1).
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each later one.
    pub base_delay: Duration,
    /// Upper bound of the backoff delay.
    pub max_delay: Duration,
    /// Upper bound of a wait the server asks for with `Retry-After`.
    pub max_retry_after: Duration,
    sleep: SleepFn,
}

impl Default for RetryPolicy {
    /// Five attempts, 1 s doubling up to 30 s, `Retry-After` capped at 60 s.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            sleep: Arc::new(|d| Box::pin(tokio::time::sleep(d))),
        }
    }
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("base_delay", &self.base_delay)
            .field("max_delay", &self.max_delay)
            .field("max_retry_after", &self.max_retry_after)
            .finish_non_exhaustive()
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// Replaces how the policy waits (tests pass a function that records the
    /// delay and returns at once).
    pub fn with_sleep(
        mut self,
        sleep: impl Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Self {
        self.sleep = Arc::new(sleep);
        self
    }

    /// The jittered backoff before retry number `retry` (1 for the first):
    /// `base * 2^(retry-1)` capped at `max_delay`, then a uniformly random
    /// point in its upper half, so clients that failed together do not
    /// retry together.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = retry.saturating_sub(1).min(20);
        let full = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        let half = full / 2;
        let jitter_nanos = fastrand::u64(0..=half.as_nanos().min(u64::MAX as u128) as u64);
        half + Duration::from_nanos(jitter_nanos)
    }

    /// The wait before retry number `retry` after `error`: the server's
    /// `Retry-After` capped at `max_retry_after` when it gave one, the
    /// backoff otherwise.
    pub fn delay(&self, retry: u32, error: &ProviderError) -> Duration {
        match error.retry_after() {
            Some(asked) => asked.min(self.max_retry_after),
            None => self.backoff(retry),
        }
    }
}

/// One attempt of a model call, run again by [`run`] on transient failures.
pub(crate) trait Attempt {
    /// Sends the request once and reads the whole stream.
    async fn attempt(&self, sink: &mut Sink<'_>) -> Result<Response, ProviderError>;
}

/// Runs `call` under `policy`, reporting each retry to the sink.
pub(crate) async fn run<A: Attempt>(
    policy: &RetryPolicy,
    call: &A,
    sink: &mut Sink<'_>,
) -> Result<Response, ProviderError> {
    let max = policy.max_attempts.max(1);
    let mut attempt = 1;
    loop {
        sink.output_seen = false;
        let error = match call.attempt(sink).await {
            Ok(mut response) => {
                response.attempts = attempt;
                return Ok(response);
            }
            Err(error) => error,
        };
        if !error.is_retryable() {
            return Err(error);
        }
        if attempt >= max {
            return Err(if max == 1 {
                error
            } else {
                ProviderError::RetriesExhausted {
                    attempts: attempt,
                    last: Box::new(error),
                }
            });
        }
        let wait = policy.delay(attempt, &error);
        tracing::warn!(attempt, ?wait, %error, "model call failed; retrying");
        let discarded_output = sink.output_seen;
        sink.emit(StreamEvent::Retrying {
            attempt,
            wait,
            reason: error.to_string(),
            discarded_output,
        });
        (policy.sleep)(wait).await;
        attempt += 1;
    }
}

/// The wait a response asks for: `retry-after-ms` (milliseconds, sent by
/// OpenAI), else `retry-after` as seconds or an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let secs = (date.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_milliseconds();
    Some(Duration::from_millis(secs.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn backoff_doubles_within_jitter_and_caps() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            ..RetryPolicy::default()
        };
        for _ in 0..50 {
            let first = policy.backoff(1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = policy.backoff(3);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            let capped = policy.backoff(30);
            assert!(capped >= Duration::from_millis(500) && capped <= Duration::from_millis(1000));
        }
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")])),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1.5")])),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2"), ("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers(&[(
                "retry-after",
                "Wed, 21 Oct 2015 07:28:00 GMT"
            )])),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-3")])), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn delay_caps_retry_after() {
        let policy = RetryPolicy::default();
        let error = ProviderError::Status {
            status: 429,
            url: "u".into(),
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(3600)),
        };
        assert_eq!(policy.delay(1, &error), Duration::from_secs(60));
    }
}
