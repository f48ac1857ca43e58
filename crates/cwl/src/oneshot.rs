//! One eviction pass over a whole transcript, as `cwl evict` runs it.

use std::sync::Arc;

use thiserror::Error;

use crate::config::Config;
use crate::context::{Context, TranscriptError};
use crate::message::{Message, ToolSpec};
use crate::protocol::Annotation;
use crate::report::Report;
use crate::tokens::TokenCounter;

/// The view after one pass, and what the pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evicted {
    /// The messages to send.
    pub messages: Vec<Message>,
    /// What the pass did; its warnings also list delimiter calls the engine
    /// rejected (those are kept as ordinary tool calls).
    pub report: Report,
}

/// A transcript the engine cannot take, with the message at fault.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum EvictError {
    /// A message was refused.
    #[error("message {index}: {source}")]
    Message {
        /// Zero-based index of the message.
        index: usize,
        /// Why.
        source: TranscriptError,
    },
    /// A tool call never got its result, so no valid request can be built.
    #[error("message {index}: tool call `{call_id}` has no tool result")]
    MissingResult {
        /// Zero-based index of the assistant message holding the call.
        index: usize,
        /// The call's id.
        call_id: String,
    },
}

/// Runs one pass of the engine over `messages`: every message is pushed in
/// order (delimiter calls re-validated), then the budget is enforced once.
pub fn evict(
    messages: Vec<Message>,
    tools: Vec<ToolSpec>,
    config: Config,
    counter: Arc<dyn TokenCounter>,
) -> Result<Evicted, EvictError> {
    evict_annotated(messages, tools, config, counter, &mut |_| Vec::new())
}

/// [`evict`] with episodes annotated out of band: `annotate` is shown each
/// message before it is pushed, and the annotations it returns are applied
/// first (an inferrer of episodes from tool use, for transcripts whose
/// agent never called `delimiter`). Rejected annotations are listed in the
/// report's warnings.
pub fn evict_annotated(
    messages: Vec<Message>,
    tools: Vec<ToolSpec>,
    config: Config,
    counter: Arc<dyn TokenCounter>,
    annotate: &mut dyn FnMut(&Message) -> Vec<Annotation>,
) -> Result<Evicted, EvictError> {
    let mut context = Context::new(config, counter, tools);
    let mut warnings = Vec::new();
    let mut call_index = std::collections::HashMap::new();
    for (index, message) in messages.into_iter().enumerate() {
        for call in message.tool_calls() {
            call_index.insert(call.id.clone(), index);
        }
        for annotation in annotate(&message) {
            if let Err(error) = context.annotate(annotation.clone()) {
                warnings.push(format!(
                    "message {index}: inferred {annotation:?} rejected: {error}"
                ));
            }
        }
        let outcomes = context
            .push(message)
            .map_err(|source| EvictError::Message { index, source })?;
        for outcome in outcomes {
            if let Err(error) = outcome.result {
                warnings.push(format!(
                    "message {index}: delimiter call `{}` ignored: {error}",
                    outcome.call_id
                ));
            }
        }
    }
    if let Some(call_id) = context.pending_calls().first() {
        return Err(EvictError::MissingResult {
            index: call_index.get(*call_id).copied().unwrap_or_default(),
            call_id: call_id.to_string(),
        });
    }
    let mut report = context.enforce();
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    Ok(Evicted {
        messages: context.view().cloned().collect(),
        report,
    })
}
