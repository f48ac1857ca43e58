//! Side calls: model calls a context strategy asks for beside the main
//! loop (a planner, a summary). Each runs through the session's provider
//! without tools and is cut off at its timeout; a call that fails or times
//! out is answered with the reason, which the strategy must take as
//! "change nothing".

use std::time::Duration;

use cwl::{Block, Message, SideRequest, Strategy};

use cwl_provider::{Provider, Request};

/// Side calls run before one model call at most: a strategy that keeps
/// asking cannot hold the loop up longer than this many timeouts.
pub const MAX_SIDE_CALLS: usize = 4;

/// Runs `request` through `provider` for `model`, never waiting longer
/// than its timeout: the model's text, or why there is none.
pub async fn side_call(
    provider: &dyn Provider,
    model: &str,
    request: &SideRequest,
) -> Result<String, String> {
    let call = Request {
        model,
        messages: &request.messages,
        tools: &[],
        max_output_tokens: request.max_output_tokens,
        cache_breakpoint: None,
        reasoning: None,
    };
    match tokio::time::timeout(request.timeout, provider.complete(&call)).await {
        Err(_) => Err(format!(
            "the {} call timed out after {:.1}s",
            request.purpose,
            request.timeout.as_secs_f64()
        )),
        Ok(Err(error)) => Err(format!("the {} call failed: {error}", request.purpose)),
        Ok(Ok(response)) => match response.message {
            Message::Assistant { content } => Ok(content
                .iter()
                .filter_map(|block| match block {
                    Block::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("")),
            _ => Ok(String::new()),
        },
    }
}

/// Runs the side calls `strategy` asks for (at most [`MAX_SIDE_CALLS`])
/// and gives it each answer; returns what was asked and answered, in
/// order, for the session file. `cap` shortens any longer timeout the
/// strategy asks for.
pub async fn run_side_calls(
    provider: &dyn Provider,
    model: &str,
    strategy: &mut dyn Strategy,
    cap: Option<Duration>,
) -> Vec<(SideRequest, Result<String, String>)> {
    let mut done = Vec::new();
    for _ in 0..MAX_SIDE_CALLS {
        let Some(mut request) = strategy.side_request() else {
            break;
        };
        if let Some(cap) = cap {
            request.timeout = request.timeout.min(cap);
        }
        let result = side_call(provider, model, &request).await;
        strategy.side_result(request.id, result.clone());
        done.push((request, result));
    }
    done
}

/// A strategy for tests that asks for side calls: CWL with a queue of
/// planner requests, keeping the answers it is given.
#[cfg(test)]
pub(crate) mod asking {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use cwl::{Config, Context, Estimate, Message, SideRequest, Strategy};

    /// The answers a strategy was given, by request id.
    pub(crate) type Answers = Arc<Mutex<Vec<(u64, Result<String, String>)>>>;

    /// CWL asking for `count` planner calls, one at a time.
    #[derive(Debug)]
    pub(crate) struct Asking {
        pub(crate) context: Context,
        pub(crate) asked: Vec<SideRequest>,
        pub(crate) answers: Answers,
    }

    impl Asking {
        pub(crate) fn new(count: u64, timeout: Duration) -> Self {
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
        fn annotate(
            &mut self,
            annotation: cwl::Annotation,
        ) -> Result<cwl::Accepted, cwl::DelimiterError> {
            self.context.annotate(annotation)
        }
        fn enforce(&mut self) -> cwl::Report {
            self.context.enforce()
        }
        fn view_sources(&self) -> Box<dyn Iterator<Item = (cwl::Source, &Message)> + '_> {
            Box::new(self.context.view_sources())
        }
        fn tools(&self) -> &[cwl::ToolSpec] {
            self.context.tools()
        }
        fn tokens(&self) -> usize {
            self.context.tokens()
        }
        fn counted_tokens(&self) -> usize {
            self.context.counted_tokens()
        }
        fn budget(&self) -> usize {
            self.context.budget()
        }
        fn set_budget(&mut self, budget: usize) {
            self.context.set_budget(budget)
        }
        fn config(&self) -> &Config {
            self.context.config()
        }
        fn calibration_offset(&self) -> i64 {
            self.context.calibration_offset()
        }
        fn calibrate(&mut self, local: usize, reported: usize) {
            self.context.calibrate(local, reported)
        }
        fn graph(&self) -> &cwl::Graph {
            self.context.graph()
        }
        fn pending_calls(&self) -> Vec<&str> {
            self.context.pending_calls()
        }
        fn recall(
            &self,
            arguments: &str,
            store: &dyn cwl::TranscriptStore,
        ) -> Result<String, String> {
            Strategy::recall(&self.context, arguments, store)
        }
        fn save(&self) -> Result<cwl::Saved, serde_json::Error> {
            Strategy::save(&self.context)
        }
        fn side_request(&mut self) -> Option<SideRequest> {
            self.asked.pop()
        }
        fn side_result(&mut self, id: u64, result: Result<String, String>) {
            self.answers.lock().unwrap().push((id, result));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cwl::Usage;

    use super::asking::Asking;
    use super::*;
    use cwl_provider::testing::{Reply, ScriptedServer};
    use cwl_provider::{OpenAiConfig, OpenAiProvider, RetryPolicy};

    fn provider(server: &ScriptedServer) -> OpenAiProvider {
        OpenAiProvider::new(
            OpenAiConfig::new(format!("{}/v1", server.url())).with_retry(RetryPolicy::none()),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn answers_errors_and_hangs_each_come_back_and_the_calls_are_capped() {
        let server = ScriptedServer::start([
            Reply::openai(&Message::assistant_text("fold u1"), Usage::default()),
            Reply::status(500, r#"{"error":{"message":"boom"}}"#),
            Reply::Silence,
            Reply::openai(&Message::assistant_text("ok"), Usage::default()),
        ])
        .await
        .unwrap();
        let provider = provider(&server);
        let mut strategy = Asking::new(6, Duration::from_millis(300));
        strategy.context.push(Message::user("go")).unwrap();
        let view: Vec<Message> = Strategy::view(&strategy).cloned().collect();
        let done = run_side_calls(&provider, "m", &mut strategy, None).await;
        assert_eq!(
            done.len(),
            MAX_SIDE_CALLS,
            "at most this many per model call"
        );
        let answers = strategy.answers.lock().unwrap().clone();
        assert_eq!(answers[0], (1, Ok("fold u1".to_string())));
        assert!(
            matches!(&answers[1], (2, Err(e)) if e.starts_with("the planner call failed") && e.contains("boom")),
            "{answers:?}"
        );
        assert_eq!(
            answers[2],
            (3, Err("the planner call timed out after 0.3s".to_string()))
        );
        assert_eq!(answers[3], (4, Ok("ok".to_string())));
        assert_eq!(strategy.asked.len(), 2, "the rest wait for the next call");
        assert!(
            Strategy::view(&strategy).cloned().eq(view),
            "side calls leave the view alone"
        );
        let sent = server.requests()[0].json();
        assert_eq!(sent["model"], "m");
        assert_eq!(sent["messages"][0]["content"], "plan 1");
        assert!(sent.get("tools").is_none(), "side calls offer no tools");
    }
}
