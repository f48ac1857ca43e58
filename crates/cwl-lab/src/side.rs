//! Side requests in the replay: the model calls a strategy asks for beside
//! the agent's own (Self-GC's planner, the context-window manager's
//! summaries), answered synchronously by a [`SideModel`].
//!
//! The lab never fakes an answer: without a model every side request is
//! [`SideError::Skipped`], the strategy is told so (as the agent tells it
//! of a failed call, which must change nothing) and the report counts the
//! skipped requests per policy.

use cwl::SideRequest;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// Side requests answered before one request at most: the agent's limit
/// (`cwl_provider::side::MAX_SIDE_CALLS`), so a strategy replays as it
/// runs.
pub const MAX_SIDE_REQUESTS: usize = 4;

/// Why a side request has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SideError {
    /// No model was given to the replay: the request was not sent.
    #[error("skipped: {0}")]
    Skipped(String),
    /// The model was asked and failed (error, timeout).
    #[error("{0}")]
    Failed(String),
}

/// Answers a strategy's side requests during a replay.
pub trait SideModel: Send + Sync + std::fmt::Debug {
    /// The model's text for `request`, or why there is none.
    fn answer(&self, request: &SideRequest) -> Result<String, SideError>;
}

/// The side model of a replay given none: every request is skipped.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoModel;

/// What a strategy is told when its side request is skipped.
pub const NO_MODEL: &str =
    "no model given to the replay (--model-url); the side request was not sent";

impl SideModel for NoModel {
    fn answer(&self, _: &SideRequest) -> Result<String, SideError> {
        Err(SideError::Skipped(NO_MODEL.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn without_a_model_every_request_is_skipped() {
        let request = SideRequest {
            id: 1,
            purpose: "planner".into(),
            messages: vec![cwl::Message::user("plan")],
            timeout: Duration::from_secs(1),
            max_output_tokens: None,
        };
        let error = NoModel.answer(&request).unwrap_err();
        assert!(matches!(error, SideError::Skipped(_)));
        assert!(error.to_string().starts_with("skipped: "), "{error}");
    }
}
