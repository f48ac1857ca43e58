//! A strategy for tests that asks for side calls: CWL with a queue of
//! planner requests, keeping the answers it is given.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cwl::{Config, Context, Estimate, Message, SideCalls, SideRequest, Strategy};

/// The answers a strategy was given, by request id.
pub type Answers = Arc<Mutex<Vec<(u64, Result<String, String>)>>>;

/// CWL asking for `count` planner calls, one at a time.
#[derive(Debug)]
pub struct Asking {
    /// The engine that holds the messages.
    pub context: Context,
    /// The requests still to ask, the next last.
    pub asked: Vec<SideRequest>,
    /// The answers given so far.
    pub answers: Answers,
}

impl Asking {
    /// A strategy that asks for `count` planner calls of `timeout`.
    pub fn new(count: u64, timeout: Duration) -> Self {
        let context = Context::new(Config::with_budget(1_000), Arc::new(Estimate), Vec::new());
        let asked = (1..=count)
            .map(|id| SideRequest {
                id,
                purpose: "planner".to_string(),
                messages: vec![Message::user(format!("plan {id}"))],
                timeout,
                max_output_tokens: Some(100),
            })
            .rev()
            .collect();
        Asking {
            context,
            asked,
            answers: Answers::default(),
        }
    }
}

impl Strategy for Asking {
    fn name(&self) -> &'static str {
        "asking"
    }
    fn push(
        &mut self,
        message: Message,
    ) -> Result<Vec<cwl::DelimiterOutcome>, cwl::TranscriptError> {
        self.context.push(message)
    }
    fn enforce(&mut self) -> cwl::Report {
        self.context.enforce()
    }
    fn view_sources(&self) -> Box<dyn Iterator<Item = (cwl::Source, &Message)> + '_> {
        Box::new(self.context.view_sources())
    }
    fn counted_tokens(&self) -> usize {
        self.context.counted_tokens()
    }
    fn meter(&self) -> &cwl::Meter {
        Strategy::meter(&self.context)
    }
    fn meter_mut(&mut self) -> &mut cwl::Meter {
        Strategy::meter_mut(&mut self.context)
    }
    fn episodes(&self) -> &Context {
        &self.context
    }
    fn episodes_mut(&mut self) -> &mut Context {
        &mut self.context
    }
    fn recall(&self, arguments: &str, store: &dyn cwl::TranscriptStore) -> Result<String, String> {
        Strategy::recall(&self.context, arguments, store)
    }
    fn save(&self) -> Result<cwl::Saved, serde_json::Error> {
        Strategy::save(&self.context)
    }
}

impl SideCalls for Asking {
    fn side_request(&mut self) -> Option<SideRequest> {
        self.asked.pop()
    }
    fn side_result(&mut self, id: u64, result: Result<String, String>) {
        self.answers.lock().unwrap().push((id, result));
    }
}
