//! The engine as the Python `Context` drives it, without Python: messages
//! in any shape pushed with their episodes (the model's `delimiter` calls,
//! or inferred from tool use as the proxy does), the pass, the view, and
//! `recall` from the transcript kept here.

use std::str::FromStr;
use std::sync::Arc;

use cwl::{Block, Config, Context, Message, Report, TokenCounter, ToolSpec};
use cwl_infer::Inferrer;
use serde_json::Value;

use crate::shapes::{self, Names, Part, Shape};

/// Where episodes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Episodes {
    /// Only the model's `delimiter` calls (as `cwl evict`).
    Delimiter,
    /// Inferred from tool use, as the proxy does, until the model first
    /// calls `delimiter`: from then on its own calls annotate.
    Inferred,
}

impl FromStr for Episodes {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "delimiter" => Ok(Episodes::Delimiter),
            "inferred" => Ok(Episodes::Inferred),
            _ => Err(format!(
                "unknown episodes `{text}`: expected `delimiter` or `inferred`"
            )),
        }
    }
}

impl Episodes {
    /// The inferrer this source needs, if any.
    pub fn inferrer(self) -> Option<Inferrer> {
        match self {
            Episodes::Inferred => Some(Inferrer::new()),
            Episodes::Delimiter => None,
        }
    }
}

/// What became of one `delimiter` call: the tool result to send back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The call's id.
    pub call_id: String,
    /// The result text.
    pub content: String,
    /// Whether the call was rejected (its result is an error).
    pub is_error: bool,
}

/// One conversation's engine, its transcript and its inferred episodes.
pub struct Core {
    context: Context,
    inferrer: Option<Inferrer>,
    /// Every engine message pushed, in push order: what `recall` reads.
    transcript: Vec<Message>,
    names: Names,
    /// Blocks of a Responses response still coming in, item by item.
    assistant: Vec<Block>,
    shape: Option<Shape>,
    rejected: Vec<String>,
    passes: usize,
    /// The first view position that may have changed since the last
    /// [`Core::take_changed`], other than by messages added at the end.
    changed: Option<usize>,
}

impl Core {
    /// An empty conversation offering `tools` (they count toward the
    /// prompt); `shape` is the caller's, or `None` to take it from the
    /// first message only one shape reads.
    pub fn new(
        config: Config,
        counter: Arc<dyn TokenCounter>,
        tools: Vec<ToolSpec>,
        episodes: Episodes,
        shape: Option<Shape>,
    ) -> Self {
        Core {
            context: Context::new(config, counter, tools),
            inferrer: episodes.inferrer(),
            transcript: Vec::new(),
            names: Names::new(),
            assistant: Vec::new(),
            shape,
            rejected: Vec::new(),
            passes: 0,
            changed: None,
        }
    }

    /// The engine.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The caller's shape, once known (else Chat Completions).
    pub fn shape(&self) -> Shape {
        self.shape.unwrap_or(Shape::Chat)
    }

    /// Messages pushed to the engine so far.
    pub fn pushed(&self) -> usize {
        self.transcript.len()
    }

    /// Passes that changed the view.
    pub fn passes(&self) -> usize {
        self.passes
    }

    /// Reads `value` in the caller's shape (or the one only it fits) and
    /// pushes what it holds. A message that fails to read or to push
    /// changes nothing.
    pub fn push(&mut self, value: &Value) -> Result<Vec<Outcome>, String> {
        let shape = match (self.shape, shapes::detect(value)) {
            (_, Some(detected)) => {
                self.shape.get_or_insert(detected);
                detected
            }
            (Some(shape), None) => shape,
            (None, None) => Shape::Chat,
        };
        // A failed message may leave its calls' names behind: harmless,
        // since a result must still answer a call the engine is waiting on.
        let parts = shapes::parse(shape, value, &mut self.names)?;
        self.check(&parts)?;
        let mut outcomes = Vec::new();
        for part in parts {
            match part {
                Part::Assistant(blocks) => self.assistant.extend(blocks),
                Part::Message(message) => {
                    outcomes.extend(self.flush()?);
                    if let Message::Assistant { content } = message {
                        self.assistant = content;
                        outcomes.extend(self.flush()?);
                    } else {
                        self.push_message(message)?;
                    }
                }
            }
        }
        Ok(outcomes)
    }

    /// Checks the results among `parts` answer calls still waiting, so a
    /// message of several results is refused whole, before any is pushed.
    fn check(&self, parts: &[Part]) -> Result<(), String> {
        let waiting = self.context.pending_calls();
        let calls: Vec<&str> = self.assistant.iter().filter_map(call_id).collect();
        let mut answered: Vec<&str> = Vec::new();
        for part in parts {
            if let Part::Message(Message::ToolResult(result)) = part {
                let id = result.call_id.as_str();
                if answered.contains(&id) || !(waiting.contains(&id) || calls.contains(&id)) {
                    return Err(cwl::TranscriptError::UnknownCall(id.to_string()).to_string());
                }
                answered.push(id);
            }
        }
        Ok(())
    }

    /// Pushes the assistant response gathered so far, if any.
    pub fn flush(&mut self) -> Result<Vec<Outcome>, String> {
        if self.assistant.is_empty() {
            return Ok(Vec::new());
        }
        let content = std::mem::take(&mut self.assistant);
        self.push_message(Message::Assistant { content })
    }

    /// The first view position that may have changed, other than by
    /// messages added at its end, since the last call: a pass changes the
    /// view from its report's `first_changed` on, and a user turn drops
    /// the turn's reasoning for a model whose provider does.
    pub fn take_changed(&mut self) -> Option<usize> {
        self.changed.take()
    }

    fn mark_changed(&mut self, at: usize) {
        self.changed = Some(self.changed.map_or(at, |was| was.min(at)));
    }

    fn push_message(&mut self, message: Message) -> Result<Vec<Outcome>, String> {
        if matches!(message, Message::User { .. })
            && self.context.config().reasoning == cwl::ReasoningScope::CurrentTurn
        {
            self.mark_changed(0);
        }
        if let Some(inferrer) = &mut self.inferrer {
            for annotation in inferrer.before(&message) {
                if let Err(error) = self.context.annotate(annotation.clone()) {
                    self.rejected
                        .push(format!("inferred {annotation:?} rejected: {error}"));
                }
            }
        }
        let outcomes = self
            .context
            .push(message.clone())
            .map_err(|error| error.to_string())?;
        self.transcript.push(message);
        Ok(outcomes
            .into_iter()
            .map(|outcome| Outcome {
                content: outcome.text(),
                is_error: outcome.is_error(),
                call_id: outcome.call_id,
            })
            .collect())
    }

    /// Enforces the budget (after pushing a response still gathering).
    pub fn enforce(&mut self) -> Result<Report, String> {
        self.flush()?;
        let mut report = self.context.enforce();
        report.warnings.append(&mut self.rejected);
        if let Some(at) = report.first_changed {
            self.passes += 1;
            self.mark_changed(at);
        }
        Ok(report)
    }

    /// The text `recall` gives for `name`: the evicted episode's messages
    /// as the model saw them, read back from the transcript.
    pub fn recall(&self, name: &str) -> Result<String, String> {
        let arguments = serde_json::json!({ "episode": name }).to_string();
        self.context
            .recall(&arguments, &self.transcript)
            .map_err(|error| error.to_string())
    }
}

fn call_id(block: &Block) -> Option<&str> {
    match block {
        Block::ToolCall(call) => Some(&call.id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn core(episodes: Episodes) -> Core {
        Core::new(
            Config::with_budget(10_000),
            Arc::new(cwl::Estimate),
            vec![cwl::delimiter_spec()],
            episodes,
            None,
        )
    }

    #[test]
    fn a_delimiter_call_is_answered_and_opens_its_episode() {
        let mut core = core(Episodes::Delimiter);
        core.push(&json!({"role": "user", "content": "go"}))
            .unwrap();
        let call = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "d1",
            "name": "delimiter", "input": {"action": "start", "name": "look", "type": "expl"}}]});
        let outcomes = core.push(&call).unwrap();
        assert_eq!(outcomes.len(), 1);
        assert_eq!(outcomes[0].content, "Started expl episode `look`.");
        assert_eq!(
            core.shape(),
            Shape::Anthropic,
            "taken from the first telling message"
        );
        assert_eq!(
            core.context().active_episode().map(|(name, _)| name),
            Some("look")
        );
    }

    #[test]
    fn responses_items_of_one_response_make_one_assistant_message() {
        let mut core = core(Episodes::Inferred);
        for item in [
            json!({"role": "user", "content": "list"}),
            json!({"type": "function_call", "call_id": "a", "name": "ls", "arguments": "{}"}),
            json!({"type": "function_call", "call_id": "b", "name": "ls", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "a", "output": "x"}),
            json!({"type": "function_call_output", "call_id": "b", "output": "y"}),
        ] {
            core.push(&item).unwrap();
        }
        assert_eq!(
            core.pushed(),
            4,
            "user, one assistant with both calls, two results"
        );
        assert!(
            core.context().graph().episodes().len() == 1,
            "an inferred expl"
        );
    }

    #[test]
    fn a_message_with_an_orphan_result_changes_nothing() {
        let mut core = core(Episodes::Inferred);
        core.push(&json!({"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}))
            .unwrap();
        let both = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "x"},
            {"type": "tool_result", "tool_use_id": "a", "content": "again"}]});
        let error = core.push(&both).unwrap_err();
        assert!(error.contains("unknown call `a`"), "{error}");
        assert_eq!(core.pushed(), 1);
        assert_eq!(core.context().pending_calls(), vec!["a"]);
    }
}
