//! Side calls: model calls a context strategy asks for beside the main
//! loop (a planner, a summary). Each runs through the session's provider
//! without tools and is cut off at its timeout; a call that fails or times
//! out is answered with the reason, which the strategy must take as
//! "change nothing".

use std::time::Duration;

use cwl::{Block, Message, SideCalls, SideRequest};

use crate::{Provider, Request};

/// Side calls run before one model call at most: a strategy that keeps
/// asking cannot hold the loop up longer than this many timeouts.
pub const MAX_SIDE_CALLS: usize = 4;

/// The provider request of a side call: its messages to `model`, no tools,
/// no cache breakpoint, no reasoning setting.
pub fn request_of<'a>(model: &'a str, request: &'a SideRequest) -> Request<'a> {
    Request {
        model,
        messages: &request.messages,
        tools: &[],
        max_output_tokens: request.max_output_tokens,
        cache_breakpoint: None,
        reasoning: None,
    }
}

/// Runs `request` through `provider` for `model`, never waiting longer
/// than its timeout: the model's text, or why there is none.
pub async fn side_call(
    provider: &dyn Provider,
    model: &str,
    request: &SideRequest,
) -> Result<String, String> {
    let call = request_of(model, request);
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
    strategy: &mut dyn SideCalls,
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cwl::{Strategy, Usage};

    use super::*;
    use crate::testing::asking::Asking;
    use crate::testing::{Reply, ScriptedServer};
    use crate::{OpenAiConfig, OpenAiProvider, RetryPolicy};

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
