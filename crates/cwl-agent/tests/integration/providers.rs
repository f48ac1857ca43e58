//! The providers against a scripted server on 127.0.0.1: stream parsing,
//! request bodies, retries and failures.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cwl::{Block, Message, ToolCall, ToolSpec, Usage};
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_provider::{
    AnthropicConfig, AnthropicProvider, OpenAiConfig, OpenAiProvider, Provider, ProviderError,
    Request, Response, ResponsesConfig, ResponsesProvider, RetryPolicy, StopReason, StreamEvent,
};
use serde_json::{Value, json};

/// A retry policy that records its waits instead of sleeping.
fn recording_policy(max_attempts: u32) -> (RetryPolicy, Arc<Mutex<Vec<Duration>>>) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&waits);
    let mut policy = RetryPolicy::default().with_sleep(move |d| {
        seen.lock().unwrap().push(d);
        Box::pin(async {})
    });
    policy.max_attempts = max_attempts;
    policy.base_delay = Duration::from_millis(100);
    policy.max_delay = Duration::from_secs(10);
    policy.max_retry_after = Duration::from_secs(30);
    (policy, waits)
}

fn openai(server: &ScriptedServer, policy: RetryPolicy) -> OpenAiProvider {
    OpenAiProvider::new(
        OpenAiConfig::new(server.url())
            .with_api_key("sk-test")
            .with_retry(policy),
    )
    .unwrap()
}

fn anthropic(server: &ScriptedServer, policy: RetryPolicy) -> AnthropicProvider {
    AnthropicProvider::new(
        AnthropicConfig::new(server.url())
            .with_api_key("ak-test")
            .with_retry(policy),
    )
    .unwrap()
}

fn responses(server: &ScriptedServer, policy: RetryPolicy) -> ResponsesProvider {
    ResponsesProvider::new(
        ResponsesConfig::new(format!("{}/v1", server.url()))
            .with_api_key("sk-test")
            .with_retry(policy),
    )
    .unwrap()
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        },
        ToolSpec {
            name: "grep".into(),
            description: "Search".into(),
            parameters: json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
        },
    ]
}

/// Runs one call, returning the result and every event.
async fn run(
    provider: &dyn Provider,
    messages: &[Message],
    tools: &[ToolSpec],
) -> (Result<Response, ProviderError>, Vec<StreamEvent>) {
    let request = Request::new("test-model", messages, tools);
    run_request(provider, &request).await
}

/// Sends the one-message request "x" with no tools, ignoring the events.
async fn ask(provider: &dyn Provider) -> Result<Response, ProviderError> {
    run(provider, &[Message::user("x")], &[]).await.0
}

/// A scripted server that answers with `replies` in order.
async fn serve(replies: impl IntoIterator<Item = Reply>) -> ScriptedServer {
    ScriptedServer::start(replies).await.unwrap()
}

/// A scripted server that answers one request, in the format of `reply`,
/// with the assistant text "ok".
async fn serve_ok(reply: fn(&Message, Usage) -> Reply) -> ScriptedServer {
    serve([reply(&Message::assistant_text("ok"), Usage::default())]).await
}

async fn run_request(
    provider: &dyn Provider,
    request: &Request<'_>,
) -> (Result<Response, ProviderError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let mut on_event = |e: StreamEvent| events.push(e);
    let result = provider.stream(request, &mut on_event).await;
    (result, events)
}

fn sse(chunks: &[Value]) -> String {
    chunks.iter().map(|c| format!("data: {c}\n\n")).collect()
}

fn anthropic_events(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

fn delta(delta: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------- OpenAI

#[tokio::test]
async fn openai_assembles_text_reasoning_and_split_tool_calls() {
    let mut body = String::from(": keep-alive comment\n\n");
    body += &sse(&[
        delta(json!({"role": "assistant", "content": null})),
        delta(json!({"reasoning_content": "Let me "})),
        delta(json!({"reasoning_content": "look."})),
        delta(json!({"content": "Reading "})),
        delta(json!({"content": "both."})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_abc|1", "type": "function",
            "function": {"name": "read", "arguments": ""}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]})),
        delta(
            json!({"tool_calls": [{"index": 1, "id": "call_XYZ", "type": "function",
            "function": {"name": "grep", "arguments": "{\"pattern\":"}}]}),
        ),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "th\": \"src/ma"}}]})),
        delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": " \"fn main\"}"}}]})),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "in.rs\"}"}}]})),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": 80,
            "prompt_tokens_details": {"cached_tokens": 1024}}}),
    ]);
    body += "data: [DONE]\n\n";
    let server = serve([Reply::Sse(body)]).await;
    let provider = openai(&server, RetryPolicy::none());
    let (result, events) = run(&provider, &[Message::user("go")], &tools()).await;
    let response = result.unwrap();
    assert_eq!(
        response.message,
        Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "Let me look.".into(),
                    signature: None
                },
                Block::Text {
                    text: "Reading both.".into()
                },
                Block::ToolCall(ToolCall::new(
                    "call_abc|1",
                    "read",
                    r#"{"path": "src/main.rs"}"#
                )),
                Block::ToolCall(ToolCall::new(
                    "call_XYZ",
                    "grep",
                    r#"{"pattern": "fn main"}"#
                )),
            ]
        }
    );
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 1200,
            cached_input_tokens: 1024,
            cache_write_tokens: 0,
            output_tokens: 80
        }
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.attempts, 1);
    assert_eq!(text_of(&events), "Reading both.");
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ToolCallStarted { .. }))
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            StreamEvent::ToolCallStarted {
                id: "call_abc|1".into(),
                name: "read".into()
            },
            StreamEvent::ToolCallStarted {
                id: "call_XYZ".into(),
                name: "grep".into()
            },
        ]
    );
    assert_eq!(
        events.first(),
        Some(&StreamEvent::ReasoningDelta("Let me ".into()))
    );
}

#[tokio::test]
async fn openai_reads_the_reasoning_field_and_accepts_a_missing_done() {
    let body = sse(&[
        delta(json!({"reasoning": "hmm"})),
        delta(json!({"content": "fine"})),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
    ]);
    let server = serve([Reply::Sse(body)]).await;
    let provider = openai(&server, RetryPolicy::none());
    let (result, _) = run(&provider, &[Message::user("go")], &[]).await;
    let response = result.unwrap();
    assert_eq!(
        response.message,
        Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "hmm".into(),
                    signature: None
                },
                Block::Text {
                    text: "fine".into()
                }
            ]
        }
    );
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
    assert_eq!(response.usage, Usage::default());
}

#[tokio::test]
async fn openai_request_body_has_the_chat_completions_shape() {
    let server = serve_ok(Reply::openai).await;
    let provider = openai(&server, RetryPolicy::none());
    let messages = vec![
        Message::system("You are terse."),
        Message::user("fix it"),
        Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "need files".into(),
                    signature: None,
                },
                Block::Text {
                    text: "Looking.".into(),
                },
                Block::ToolCall(ToolCall::new("toolu_01:A", "read", r#"{"path":"a.rs"}"#)),
                Block::ToolCall(ToolCall::new("call 2", "grep", r#"{"pattern":"x"}"#)),
            ],
        },
        Message::tool_result("toolu_01:A", "read", "fn a() {}", false),
        Message::tool_result("call 2", "grep", "no matches", true),
        Message::user("and now?"),
    ];
    let tools = tools();
    let mut request = Request::new("gpt-test", &messages, &tools);
    request.max_output_tokens = Some(1000);
    request.cache_breakpoint = Some(4);
    let (result, _) = run_request(&provider, &request).await;
    assert_eq!(result.unwrap().message, Message::assistant_text("ok"));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        sent.json(),
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "fix it"},
                {"role": "assistant", "content": "Looking.", "reasoning_content": "need files",
                 "tool_calls": [
                    {"id": "toolu_01:A", "type": "function",
                     "function": {"name": "read", "arguments": "{\"path\":\"a.rs\"}"}},
                    {"id": "call 2", "type": "function",
                     "function": {"name": "grep", "arguments": "{\"pattern\":\"x\"}"}},
                 ]},
                {"role": "tool", "tool_call_id": "toolu_01:A", "content": "fn a() {}"},
                {"role": "tool", "tool_call_id": "call 2", "content": "no matches"},
                {"role": "user", "content": "and now?"},
            ],
            "tools": [
                {"type": "function", "function": {"name": "read", "description": "Read a file",
                    "parameters": tools[0].parameters}},
                {"type": "function", "function": {"name": "grep", "description": "Search",
                    "parameters": tools[1].parameters}},
            ],
            "max_tokens": 1000,
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[tokio::test]
async fn keys_are_optional_off_the_public_endpoints() {
    let server = serve([
        Reply::openai(&Message::assistant_text("a"), Usage::default()),
        Reply::anthropic(&Message::assistant_text("b"), Usage::default()),
    ])
    .await;
    let local = OpenAiProvider::new(OpenAiConfig::new(format!("{}/v1", server.url()))).unwrap();
    ask(&local).await.unwrap();
    let local = AnthropicProvider::new(AnthropicConfig::new(server.url())).unwrap();
    ask(&local).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(requests[1].path, "/v1/messages");
    assert_eq!(requests[1].header("x-api-key"), None);
    assert_eq!(requests[1].header("anthropic-version"), Some("2023-06-01"));
}

#[test]
fn missing_keys_for_public_endpoints_fail_at_construction() {
    let err = OpenAiProvider::new(OpenAiConfig::new("https://api.openai.com/v1")).unwrap_err();
    assert!(matches!(err, ProviderError::MissingKey { .. }));
    assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
    let err =
        OpenAiProvider::new(OpenAiConfig::new("https://api.openai.com/v1").with_api_key("  "))
            .unwrap_err();
    assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
    let err =
        AnthropicProvider::new(AnthropicConfig::new("https://api.anthropic.com")).unwrap_err();
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
    let err = OpenAiProvider::new(OpenAiConfig::new("ftp://example.com")).unwrap_err();
    assert!(err.to_string().contains("OPENAI_BASE_URL"), "{err}");
    let err = AnthropicProvider::new(
        AnthropicConfig::new("https://api.anthropic.com").with_api_key("bad\nkey"),
    )
    .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidKey { .. }), "{err}");
    assert!(
        OpenAiProvider::new(OpenAiConfig::new("https://api.openai.com/v1").with_api_key("k"))
            .is_ok()
    );
}

#[tokio::test]
async fn openai_error_inside_the_stream_is_reported() {
    let body = sse(&[
        delta(json!({"content": "par"})),
        json!({"error": {"message": "context length exceeded", "type": "invalid_request_error"}}),
    ]);
    let server = serve([Reply::Sse(body)]).await;
    let (policy, waits) = recording_policy(5);
    let provider = openai(&server, policy);
    let err = ask(&provider).await.unwrap_err();
    assert!(matches!(err, ProviderError::Api { .. }), "{err}");
    assert!(err.to_string().contains("context length exceeded"), "{err}");
    assert_eq!(server.requests().len(), 1);
    assert!(waits.lock().unwrap().is_empty());
}

// ---------------------------------------------------------------- Anthropic

#[tokio::test]
async fn anthropic_assembles_thinking_text_and_split_tool_input() {
    let body = anthropic_events(&[
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude",
            "usage": {"input_tokens": 50, "cache_read_input_tokens": 3000,
                      "cache_creation_input_tokens": 200, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Check the "}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "file."}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "text_delta", "text": "Reading"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_01AbC", "name": "read", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": ""}}),
        json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"sr"}}),
        json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "c/lib.rs\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_02", "name": "grep", "input": {}}}),
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "some_future_event", "detail": 1}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 42}}),
        json!({"type": "message_stop"}),
    ]);
    let server = serve([Reply::Sse(body)]).await;
    let provider = anthropic(&server, RetryPolicy::none());
    let (result, events) = run(&provider, &[Message::user("go")], &tools()).await;
    let response = result.unwrap();
    assert_eq!(
        response.message,
        Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "Check the file.".into(),
                    signature: Some("EqQBCgIYAhIM".into())
                },
                Block::Text {
                    text: "Reading".into()
                },
                Block::ToolCall(ToolCall::new(
                    "toolu_01AbC",
                    "read",
                    r#"{"path": "src/lib.rs"}"#
                )),
                Block::ToolCall(ToolCall::new("toolu_02", "grep", "{}")),
            ]
        }
    );
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 3250,
            cached_input_tokens: 3000,
            cache_write_tokens: 200,
            output_tokens: 42
        }
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta("Check the ".into()),
            StreamEvent::ReasoningDelta("file.".into()),
            StreamEvent::TextDelta("Reading".into()),
            StreamEvent::ToolCallStarted {
                id: "toolu_01AbC".into(),
                name: "read".into()
            },
            StreamEvent::ToolCallStarted {
                id: "toolu_02".into(),
                name: "grep".into()
            },
        ]
    );
}

#[tokio::test]
async fn anthropic_request_body_alternates_and_marks_cache_breakpoints() {
    let server = serve_ok(Reply::anthropic).await;
    let provider = anthropic(&server, RetryPolicy::none());
    let messages = vec![
        Message::system("Be careful."),
        Message::user("fix it"),
        Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "plan".into(),
                    signature: Some("sig-1".into()),
                },
                Block::Reasoning {
                    text: "from another provider".into(),
                    signature: None,
                },
                Block::Text {
                    text: "Looking.".into(),
                },
                Block::ToolCall(ToolCall::new("toolu_A", "read", r#"{"path":"a.rs"}"#)),
                Block::ToolCall(ToolCall::new("toolu_B", "grep", r#"{"pattern":"x"}"#)),
            ],
        },
        Message::tool_result("toolu_A", "read", "fn a() {}", false),
        Message::tool_result("toolu_B", "grep", "bad pattern", true),
        Message::user("and now?"),
        Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new("toolu_C", "read", ""))],
        },
        Message::user("wait, one more thing"),
        Message::tool_result("toolu_C", "read", "", false),
        Message::assistant_text("Done."),
        Message::user("thanks"),
    ];
    let tools = tools();
    let mut request = Request::new("claude-test", &messages, &tools);
    request.cache_breakpoint = Some(5);
    let (result, _) = run_request(&provider, &request).await;
    assert_eq!(result.unwrap().message, Message::assistant_text("ok"));

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("ak-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    let body = sent.json();
    let eph = json!({"type": "ephemeral"});
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "Be careful.", "cache_control": eph}])
    );
    assert_eq!(
        body["tools"],
        json!([
            {"name": "read", "description": "Read a file", "input_schema": tools[0].parameters},
            {"name": "grep", "description": "Search", "input_schema": tools[1].parameters,
             "cache_control": eph},
        ])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "fix it"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_A", "name": "read", "input": {"path": "a.rs"}},
                {"type": "tool_use", "id": "toolu_B", "name": "grep", "input": {"pattern": "x"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_A", "content": "fn a() {}"},
                {"type": "tool_result", "tool_use_id": "toolu_B", "content": "bad pattern",
                 "is_error": true},
                {"type": "text", "text": "and now?", "cache_control": eph},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_C", "name": "read", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_C"},
                {"type": "text", "text": "wait, one more thing"},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
        ])
    );
    let marks = body.to_string().matches("\"cache_control\"").count();
    assert_eq!(marks, 3);
}

#[tokio::test]
async fn anthropic_reasoning_request_enables_thinking() {
    let server = serve_ok(Reply::anthropic).await;
    let provider = anthropic(&server, RetryPolicy::none());
    let messages = [Message::user("hi")];
    let mut request = Request::new("claude-test", &messages, &[]);
    request.max_output_tokens = Some(1000);
    request.reasoning = Some(cwl_provider::ReasoningEffort::Low);
    run_request(&provider, &request).await.0.unwrap();
    let body = server.requests()[0].json();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["max_tokens"], 3048);
    assert!(body.get("system").is_none() && body.get("tools").is_none());
}

#[tokio::test]
async fn scripted_streams_round_trip_through_both_providers() {
    let message = Message::Assistant {
        content: vec![
            Block::Reasoning {
                text: "thinking it over".into(),
                signature: Some("sig".into()),
            },
            Block::Text {
                text: "Here is the plan, with ünïcödé.".into(),
            },
            Block::ToolCall(ToolCall::new(
                "id-1",
                "read",
                r#"{"path": "a/b.rs", "range": [1, 20]}"#,
            )),
        ],
    };
    let usage = Usage {
        input_tokens: 900,
        cached_input_tokens: 512,
        cache_write_tokens: 0,
        output_tokens: 33,
    };
    let server = serve([
        Reply::openai(&message, usage),
        Reply::anthropic(&message, usage),
    ])
    .await;
    let got = ask(&openai(&server, RetryPolicy::none())).await.unwrap();
    let unsigned = Message::Assistant {
        content: match &message {
            Message::Assistant { content } => content
                .iter()
                .map(|b| match b {
                    Block::Reasoning { text, .. } => Block::Reasoning {
                        text: text.clone(),
                        signature: None,
                    },
                    other => other.clone(),
                })
                .collect(),
            _ => unreachable!(),
        },
    };
    assert_eq!(got.message, unsigned);
    assert_eq!(got.usage, usage);
    let got = ask(&anthropic(&server, RetryPolicy::none())).await.unwrap();
    assert_eq!(got.message, message);
    assert_eq!(got.usage, usage);
    assert_eq!(server.remaining(), 0);
}

// ---------------------------------------------------------------- retries

#[tokio::test]
async fn rate_limit_honours_retry_after_then_succeeds() {
    let server = serve([
        Reply::status(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"rate_limit"}}"#,
        )
        .with_header("retry-after", "7"),
        Reply::status(429, "slow down").with_header("retry-after", "3600"),
        Reply::openai(&Message::assistant_text("finally"), Usage::default()),
    ])
    .await;
    let (policy, waits) = recording_policy(5);
    let provider = openai(&server, policy);
    let (result, events) = run(&provider, &[Message::user("x")], &[]).await;
    let response = result.unwrap();
    assert_eq!(response.message, Message::assistant_text("finally"));
    assert_eq!(response.attempts, 3);
    assert_eq!(
        *waits.lock().unwrap(),
        vec![Duration::from_secs(7), Duration::from_secs(30)]
    );
    let StreamEvent::Retrying {
        attempt,
        wait,
        reason,
        discarded_output,
    } = &events[0]
    else {
        panic!("expected a retry event first: {events:?}");
    };
    assert_eq!(
        (*attempt, *wait, *discarded_output),
        (1, Duration::from_secs(7), false)
    );
    assert!(
        reason.contains("429") && reason.contains("Rate limit reached"),
        "{reason}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body, requests[2].body);
}

#[tokio::test]
async fn server_errors_back_off_then_succeed() {
    let server = serve([
        Reply::status(500, "internal error"),
        Reply::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        Reply::anthropic(&Message::assistant_text("ok"), Usage::default()),
    ])
    .await;
    let (policy, waits) = recording_policy(5);
    let provider = anthropic(&server, policy);
    let (result, events) = run(&provider, &[Message::user("x")], &[]).await;
    assert_eq!(result.unwrap().attempts, 3);
    let waits = waits.lock().unwrap().clone();
    assert_eq!(waits.len(), 2);
    assert!(waits[0] >= Duration::from_millis(50) && waits[0] <= Duration::from_millis(100));
    assert!(waits[1] >= Duration::from_millis(100) && waits[1] <= Duration::from_millis(200));
    let reasons: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert!(reasons[0].contains("HTTP 500") && reasons[0].contains("internal error"));
    assert!(reasons[1].contains("HTTP 529") && reasons[1].contains("Overloaded"));
}

#[tokio::test]
async fn auth_errors_fail_at_once_naming_the_variable() {
    let server = serve([
        Reply::status(401, r#"{"error":{"message":"Incorrect API key provided"}}"#),
        Reply::status(
            403,
            r#"{"type":"error","error":{"type":"permission_error","message":"nope"}}"#,
        ),
    ])
    .await;
    let (policy, waits) = recording_policy(5);
    let err = ask(&openai(&server, policy.clone())).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Auth { status: 401, .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("OPENAI_API_KEY") && text.contains("Incorrect API key"),
        "{text}"
    );
    let err = ask(&anthropic(&server, policy)).await.unwrap_err();
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
    assert_eq!(server.requests().len(), 2);
    assert!(waits.lock().unwrap().is_empty());
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = serve([Reply::status(
        400,
        r#"{"error":{"message":"messages: roles must alternate"}}"#,
    )])
    .await;
    let (policy, _) = recording_policy(5);
    let err = ask(&anthropic(&server, policy)).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Status { status: 400, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("roles must alternate"));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_dropped_mid_way_is_retried_from_scratch() {
    let full = Message::Assistant {
        content: vec![
            Block::Text {
                text: "Second try.".into(),
            },
            Block::ToolCall(ToolCall::new("call_2", "read", r#"{"path":"x"}"#)),
        ],
    };
    let partial = sse(&[
        delta(json!({"content": "First "})),
        delta(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "read", "arguments": "{\"pa"}}]}),
        ),
    ]);
    let server = serve([
        Reply::Drop(partial),
        Reply::Close,
        Reply::openai(&full, Usage::default()),
    ])
    .await;
    let (policy, waits) = recording_policy(5);
    let (result, events) = run(&openai(&server, policy), &[Message::user("x")], &[]).await;
    let response = result.unwrap();
    assert_eq!(response.message, full);
    assert_eq!(response.attempts, 3);
    assert_eq!(waits.lock().unwrap().len(), 2);
    let retries: Vec<(u32, bool)> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying {
                attempt,
                discarded_output,
                ..
            } => Some((*attempt, *discarded_output)),
            _ => None,
        })
        .collect();
    assert_eq!(retries, vec![(1, true), (2, false)]);
    let reasons: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert!(
        reasons.iter().all(|r| r.starts_with("connection to ")),
        "{reasons:?}"
    );
    assert_eq!(text_of(&events), "First Second try.");
    let first_retry = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Retrying { .. }))
        .unwrap();
    assert_eq!(text_of(&events[..first_retry]), "First ");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn repeated_drops_give_up_after_the_attempt_limit() {
    let partial = anthropic_events(&[
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ]);
    let server = serve([
        Reply::Drop(partial.clone()),
        Reply::Sse(partial),
        Reply::Close,
    ])
    .await;
    let (policy, waits) = recording_policy(3);
    let err = ask(&anthropic(&server, policy)).await.unwrap_err();
    let ProviderError::RetriesExhausted { attempts, last } = &err else {
        panic!("expected RetriesExhausted, got {err}");
    };
    assert_eq!(*attempts, 3);
    assert!(matches!(**last, ProviderError::Connection { .. }), "{last}");
    assert!(
        err.to_string().contains("gave up after 3 attempts"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 3);
    assert_eq!(waits.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_stream_that_ends_without_finishing_is_truncated() {
    let cut = sse(&[delta(json!({"content": "half"}))]);
    let server = serve([Reply::Sse(cut)]).await;
    let err = ask(&openai(&server, RetryPolicy::none()))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Truncated { .. }), "{err}");
    assert!(err.is_retryable());
    assert!(err.to_string().contains("[DONE]"), "{err}");
}

#[tokio::test]
async fn anthropic_overload_inside_the_stream_is_retried() {
    let overloaded = anthropic_events(&[
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    let server = serve([
        Reply::Sse(overloaded),
        Reply::anthropic(&Message::assistant_text("ok"), Usage::default()),
    ])
    .await;
    let (policy, _) = recording_policy(5);
    let response = ask(&anthropic(&server, policy)).await.unwrap();
    assert_eq!(response.message, Message::assistant_text("ok"));
    assert_eq!(response.attempts, 2);
}

// ---------------------------------------------------------------- malformed

#[tokio::test]
async fn malformed_json_in_the_stream_is_a_clear_error() {
    let body = format!(
        "{}data: {{\"choices\": [oops\n\n",
        sse(&[delta(json!({"content": "ok"}))])
    );
    let server = serve([Reply::Sse(body)]).await;
    let (policy, _) = recording_policy(5);
    let err = ask(&openai(&server, policy)).await.unwrap_err();
    assert!(matches!(err, ProviderError::Malformed { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("event 2")
            && text.contains("chat completion chunk")
            && text.contains("[oops"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn malformed_anthropic_events_are_clear_errors() {
    let orphan_delta = anthropic_events(&[
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
        json!({"type": "content_block_delta", "index": 4,
            "delta": {"type": "text_delta", "text": "x"}}),
    ]);
    let wrong_kind = anthropic_events(&[
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "read", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "x"}}),
    ]);
    let untyped = "event: message_start\ndata: {\"message\": {}}\n\n".to_string();
    let server = serve([
        Reply::Sse(orphan_delta),
        Reply::Sse(wrong_kind),
        Reply::Sse(untyped),
        Reply::status(200, r#"{"id": "msg", "content": []}"#),
    ])
    .await;
    let provider = anthropic(&server, RetryPolicy::none());
    let mut messages = Vec::new();
    for _ in 0..4 {
        let err = ask(&provider).await.unwrap_err();
        assert!(matches!(err, ProviderError::Malformed { .. }), "{err}");
        messages.push(err.to_string());
    }
    assert!(
        messages[0].contains("content block 4, which was never started"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].contains("text_delta does not fit content block 0"),
        "{}",
        messages[1]
    );
    assert!(
        messages[2].contains("event 1 (message_start)") && messages[2].contains("type"),
        "{}",
        messages[2]
    );
    assert!(
        messages[3].contains("expected an event stream"),
        "{}",
        messages[3]
    );
}

#[tokio::test]
async fn an_exhausted_script_answers_400() {
    let server = serve([]).await;
    let err = ask(&openai(&server, RetryPolicy::none()))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no scripted reply left for request 1"),
        "{err}"
    );
}

#[test]
fn errors_and_providers_can_cross_threads() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<ProviderError>();
    assert_send_sync::<Box<dyn Provider>>();
    assert_send_sync::<OpenAiProvider>();
    assert_send_sync::<AnthropicProvider>();
}

#[tokio::test]
async fn a_stalled_stream_times_out_and_is_retried_visibly() {
    let partial = sse(&[delta(json!({"content": "Stuck "}))]);
    let server = serve([
        Reply::Stall(partial),
        Reply::Silence,
        Reply::openai(&Message::assistant_text("done"), Usage::default()),
    ])
    .await;
    let (policy, waits) = recording_policy(5);
    let provider = OpenAiProvider::new(
        OpenAiConfig::new(server.url())
            .with_retry(policy)
            .with_idle_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let (result, events) = run(&provider, &[Message::user("x")], &[]).await;
    let response = result.unwrap();
    assert_eq!(response.message, Message::assistant_text("done"));
    assert_eq!(response.attempts, 3);
    assert_eq!(waits.lock().unwrap().len(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let retries: Vec<(u32, bool, String)> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying {
                attempt,
                discarded_output,
                reason,
                ..
            } => Some((*attempt, *discarded_output, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert_eq!((retries[0].0, retries[0].1), (1, true));
    assert!(
        retries[0]
            .2
            .contains("no data for 0.2s (stream idle timeout)"),
        "{}",
        retries[0].2
    );
    assert_eq!((retries[1].0, retries[1].1), (2, false));
    assert!(
        retries[1]
            .2
            .contains("no answer for 0.2s (stream idle timeout"),
        "{}",
        retries[1].2
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_stream_that_keeps_stalling_gives_up_after_the_attempt_limit() {
    let server = serve([Reply::Stall(String::new()), Reply::Stall(String::new())]).await;
    let (policy, _) = recording_policy(2);
    let provider = AnthropicProvider::new(
        AnthropicConfig::new(server.url())
            .with_retry(policy)
            .with_idle_timeout(Duration::from_millis(150)),
    )
    .unwrap();
    let err = ask(&provider).await.unwrap_err();
    assert!(
        err.to_string().contains("gave up after 2 attempts"),
        "{err}"
    );
    assert!(err.to_string().contains("stream idle timeout"), "{err}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_refused_connection_names_the_url_once() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let (policy, _) = recording_policy(1);
    let provider = OpenAiProvider::new(OpenAiConfig::new(url.as_str()).with_retry(policy)).unwrap();
    let error = ask(&provider).await.unwrap_err().to_string();
    assert!(error.starts_with("connection to "), "{error}");
    assert_eq!(error.matches(&url).count(), 1, "{error}");
    assert!(error.contains("refused"), "{error}");
}

#[tokio::test]
async fn an_auth_failure_without_a_key_says_to_set_one() {
    let server = serve([Reply::status(401, r#"{"error":{"message":"no key"}}"#)]).await;
    let (policy, _) = recording_policy(1);
    let provider =
        AnthropicProvider::new(AnthropicConfig::new(server.url()).with_retry(policy)).unwrap();
    let error = ask(&provider).await.unwrap_err().to_string();
    assert!(
        error.contains("set ANTHROPIC_API_KEY to a valid key"),
        "{error}"
    );
    assert!(!error.contains("OPENAI"), "{error}");
}

// ---------------------------------------------------------------- Responses

#[tokio::test]
async fn responses_round_trip_reasoning_text_and_calls_with_their_deltas() {
    let message = Message::Assistant {
        content: vec![
            Block::Reasoning {
                text: "thinking it over".into(),
                signature: Some("gAAAAB-encrypted".into()),
            },
            Block::Text {
                text: "Reading, with ünïcödé.".into(),
            },
            Block::ToolCall(ToolCall::new("call_1", "read", r#"{"path": "a/b.rs"}"#)),
        ],
    };
    let usage = Usage {
        input_tokens: 900,
        cached_input_tokens: 512,
        cache_write_tokens: 0,
        output_tokens: 33,
    };
    let server = serve([Reply::responses(&message, usage)]).await;
    let provider = responses(&server, RetryPolicy::none());
    let (result, events) = run(&provider, &[Message::user("x")], &tools()).await;
    let response = result.unwrap();
    assert_eq!(response.message, message);
    assert_eq!(response.usage, usage);
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(text_of(&events), "Reading, with ünïcödé.");
    assert!(events.contains(&StreamEvent::ToolCallStarted {
        id: "call_1".into(),
        name: "read".into()
    }));
    let reasoning: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ReasoningDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "thinking it over");
    assert_eq!(provider.name(), "responses");
}

fn responses_events(events: &[Value]) -> String {
    anthropic_events(events)
}

#[tokio::test]
async fn responses_reads_custom_calls_refusals_and_cut_responses() {
    let custom = responses_events(&[
        json!({"type": "response.output_item.added", "item": {"type": "custom_tool_call", "call_id": "call_9", "name": "apply_patch", "input": ""}}),
        json!({"type": "response.custom_tool_call_input.delta", "delta": "*** Begin"}),
        json!({"type": "response.output_item.done", "item": {"type": "custom_tool_call", "call_id": "call_9", "name": "apply_patch", "input": "*** Begin Patch"}}),
        json!({"type": "response.completed", "response": {"usage": {"input_tokens": 10, "output_tokens": 2}}}),
    ]);
    let cut = responses_events(&[
        json!({"type": "response.output_text.delta", "delta": "Par"}),
        json!({"type": "response.output_item.done", "item": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Partial"}]}}),
        json!({"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"}, "usage": {"input_tokens": 10, "output_tokens": 99}}}),
    ]);
    let refused = responses_events(&[
        json!({"type": "response.output_item.done", "item": {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}}),
        json!({"type": "response.completed", "response": {"usage": {"input_tokens": 10, "output_tokens": 5}}}),
    ]);
    let server = serve([Reply::Sse(custom), Reply::Sse(cut), Reply::Sse(refused)]).await;
    let provider = responses(&server, RetryPolicy::none());
    let response = ask(&provider).await.unwrap();
    assert_eq!(
        response.message,
        Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new(
                "call_9",
                "apply_patch",
                "*** Begin Patch"
            ))]
        }
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    let response = ask(&provider).await.unwrap();
    assert_eq!(response.message, Message::assistant_text("Partial"));
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
    let response = ask(&provider).await.unwrap();
    assert_eq!(response.stop_reason, StopReason::Refusal);
    assert_eq!(
        response.message,
        Message::assistant_text("I can't help with that.")
    );
}

#[tokio::test]
async fn responses_failures_in_the_stream_are_retried_or_reported() {
    let failed = |code: &str| {
        responses_events(&[
            json!({"type": "response.created", "response": {"status": "in_progress"}}),
            json!({"type": "response.failed", "response": {"error": {"code": code, "message": "it broke"}}}),
        ])
    };
    let server = serve([
        Reply::Sse(failed("server_error")),
        Reply::Drop(responses_events(&[
            json!({"type": "response.output_text.delta", "delta": "half"}),
        ])),
        Reply::responses(&Message::assistant_text("ok"), Usage::default()),
        Reply::Sse(failed("invalid_prompt")),
        Reply::Sse(responses_events(&[
            json!({"type": "response.output_text.delta", "delta": "no end"}),
        ])),
    ])
    .await;
    let (policy, waits) = recording_policy(5);
    let provider = responses(&server, policy);
    let (result, events) = run(&provider, &[Message::user("x")], &[]).await;
    let response = result.unwrap();
    assert_eq!(response.attempts, 3);
    assert_eq!(response.message, Message::assistant_text("ok"));
    assert_eq!(waits.lock().unwrap().len(), 2);
    assert!(
        events.iter().any(
            |e| matches!(e, StreamEvent::Retrying { reason, .. } if reason.contains("it broke"))
        )
    );
    let error = ask(&provider).await.unwrap_err();
    assert!(!error.is_retryable());
    assert!(error.to_string().contains("invalid_prompt"), "{error}");
    let once = responses(&server, RetryPolicy::none());
    let error = ask(&once).await.unwrap_err();
    assert!(error.is_retryable(), "a cut stream is sent again");
    assert!(
        error.to_string().contains("no response.completed arrived"),
        "{error}"
    );
}
