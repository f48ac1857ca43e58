//! Side calls: the model calls a conversation's strategy asks for beside
//! the client's (Self-GC's planner, the context-window manager's
//! summaries and notes), made before the client's request goes upstream.
//!
//! Each goes to the same upstream and path as the client's request, with
//! the client's own headers (its key among them), in the wire format the
//! conversation uses, for the client's model or `--planner-model`, with no
//! tools and without streaming. Each is cut off at the strategy's timeout
//! (never longer than the proxy's side-call limit); a call that fails,
//! times out or answers no text is answered with the reason, which the
//! strategy takes as "change nothing".

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::http::{HeaderMap, HeaderValue, Uri, header};
use serde::Serialize;
use serde_json::{Value, json};

use cwl::{Block, Message, SideCalls, SideRequest};
use cwl_provider::Api as ProviderApi;
use cwl_provider::anthropic::Anthropic;
use cwl_provider::openai::OpenAi;

use crate::api::Api;
use crate::upstream::{Upstream, is_hop_by_hop};

use cwl_provider::side::SideGate;
pub use cwl_provider::side::{DEFAULT_SIDE_TIMEOUT, MAX_SIDE_CALLS};

/// Most characters of an upstream error body kept in the reason.
const ERROR_SNIPPET: usize = 300;

/// Where a conversation's side calls go and as what.
#[derive(Clone)]
pub struct SideCaller {
    /// The client's upstream.
    pub upstream: Upstream,
    /// The client's request path and query.
    pub uri: Uri,
    /// The client's headers.
    pub headers: HeaderMap,
    /// The conversation's API.
    pub api: Api,
    /// The model to ask.
    pub model: String,
}

impl std::fmt::Debug for SideCaller {
    /// Everything but the headers, which carry the client's key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SideCaller")
            .field("upstream", &self.upstream)
            .field("uri", &self.uri)
            .field("api", &self.api)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// What one side call cost and how it went, for events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideCallEvent {
    /// The strategy's id for it.
    pub id: u64,
    /// What it was for (`planner`, `summary`...).
    pub purpose: String,
    /// Whether it was answered with text.
    pub ok: bool,
    /// Why not, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Prompt tokens the upstream reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens the upstream reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// How long it took, in milliseconds.
    pub ms: u64,
}

/// Runs the calls `asker` asks for, at most [`MAX_SIDE_CALLS`] and as
/// `gate` allows (each cut at the gate's timeout), each through `call`;
/// gives each answer back to it and to `done` (to store it), in order;
/// returns their events, and the gate's note when it shut.
pub fn run_side_calls(
    asker: &mut dyn SideCalls,
    gate: &mut SideGate,
    mut call: impl FnMut(&SideRequest) -> (Result<String, String>, SideCallEvent),
    mut done: impl FnMut(&SideRequest, &Result<String, String>),
) -> (Vec<SideCallEvent>, Option<String>) {
    let mut events = Vec::new();
    let mut shut = None;
    if !gate.open() {
        return (events, shut);
    }
    for _ in 0..MAX_SIDE_CALLS {
        let Some(mut request) = asker.side_request() else {
            break;
        };
        request.timeout = gate.timeout(request.timeout);
        let (result, event) = call(&request);
        let waited = Duration::from_millis(event.ms);
        let (go_on, note) = gate.record(waited, request.timeout, result.is_ok());
        shut = shut.or(note);
        asker.side_result(request.id, result.clone());
        done(&request, &result);
        events.push(event);
        if !go_on {
            break;
        }
    }
    (events, shut)
}

/// Token usage an answer reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SideUsage {
    /// Prompt tokens (cache reads and writes included).
    pub input: Option<u64>,
    /// Output tokens.
    pub output: Option<u64>,
}

impl SideCaller {
    /// Makes `request`, never waiting longer than its timeout (the
    /// conversation's [`SideGate`] capped it):
    /// the model's text or why there is none, with its event.
    pub async fn call(
        &self,
        client: &reqwest::Client,
        request: &SideRequest,
    ) -> (Result<String, String>, SideCallEvent) {
        let timeout = request.timeout;
        let started = Instant::now();
        let outcome = match tokio::time::timeout(timeout, self.send(client, request)).await {
            Err(_) => Err(format!(
                "the {} call timed out after {:.1}s",
                request.purpose,
                timeout.as_secs_f64()
            )),
            Ok(Err(why)) => Err(format!("the {} call failed: {why}", request.purpose)),
            Ok(Ok(answer)) => Ok(answer),
        };
        let (result, usage) = match outcome {
            Ok((text, usage)) => (Ok(text), usage),
            Err(why) => (Err(why), SideUsage::default()),
        };
        let event = SideCallEvent {
            id: request.id,
            purpose: request.purpose.clone(),
            ok: result.is_ok(),
            error: result.as_ref().err().cloned(),
            input_tokens: usage.input,
            output_tokens: usage.output,
            ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        (result, event)
    }

    /// The credentials of the client's headers and of the upstream URL,
    /// as a redactor: an error body that echoes them must not carry them
    /// to stderr, `--json` or the session file.
    fn redactor(&self) -> cwl_provider::secrets::Redactor {
        self.upstream.redactor_with(&self.headers)
    }

    async fn send(
        &self,
        client: &reqwest::Client,
        request: &SideRequest,
    ) -> Result<(String, SideUsage), String> {
        let body = body(self.api, &self.model, request, self.upstream.base());
        let mut call = client
            .post(self.upstream.url(&self.uri))
            .body(Bytes::from(body.to_string()));
        for (name, value) in &self.headers {
            let skip = is_hop_by_hop(name)
                || name == header::ACCEPT
                || name == header::ACCEPT_ENCODING
                || name == header::CONTENT_TYPE;
            if !skip {
                call = call.header(name, value);
            }
        }
        let json = HeaderValue::from_static("application/json");
        call = call
            .header(header::CONTENT_TYPE, json.clone())
            .header(header::ACCEPT, json);
        let response = call
            .send()
            .await
            .map_err(|e| format!("upstream unreachable: {}", e.without_url()))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| format!("the answer could not be read: {}", e.without_url()))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let text = self.redactor().redact(&text).into_owned();
            let snippet: String = text.chars().take(ERROR_SNIPPET).collect();
            return Err(format!("upstream answered {status}: {}", snippet.trim()));
        }
        answer(self.api, &bytes)
    }
}

/// The body of a side call for `api`: the request's messages, no tools,
/// not streamed.
pub fn body(api: Api, model: &str, request: &SideRequest, base: &str) -> Value {
    let call = cwl_provider::side::request_of(model, request);
    let mut body = match api {
        Api::Anthropic => Anthropic::body(&call, base.contains(Anthropic::PUBLIC_HOST)),
        Api::OpenAiChat => OpenAi::body(&call, base.contains(OpenAi::PUBLIC_HOST)),
        Api::OpenAiResponses => responses_body(model, request),
    };
    if let Some(fields) = body.as_object_mut() {
        fields.remove("stream_options");
        fields.insert("stream".into(), json!(false));
    }
    body
}

/// An OpenAI Responses body: system messages as `instructions`, the rest
/// as input items; nothing stored upstream.
fn responses_body(model: &str, request: &SideRequest) -> Value {
    let mut instructions = Vec::new();
    let mut input = Vec::new();
    for message in &request.messages {
        match message {
            Message::System { content } => instructions.push(content.as_str()),
            Message::User { content } => {
                input.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant { content } => {
                let text: String = content
                    .iter()
                    .filter_map(|block| match block {
                        Block::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("");
                if !text.is_empty() {
                    input.push(json!({"role": "assistant", "content": text}));
                }
                for block in content {
                    if let Block::ToolCall(call) = block {
                        input.push(json!({
                            "type": "function_call",
                            "call_id": call.id,
                            "name": call.name,
                            "arguments": call.arguments,
                        }));
                    }
                }
            }
            Message::ToolResult(result) => input.push(json!({
                "type": "function_call_output",
                "call_id": result.call_id,
                "output": result.content,
            })),
        }
    }
    let mut body = json!({"model": model, "input": input, "store": false});
    if !instructions.is_empty() {
        body["instructions"] = json!(instructions.join("\n\n"));
    }
    if let Some(max) = request.max_output_tokens {
        body["max_output_tokens"] = json!(max);
    }
    body
}

/// The text and usage of a non-streamed answer in `api`'s format.
pub fn answer(api: Api, bytes: &[u8]) -> Result<(String, SideUsage), String> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("the answer is not JSON ({e})"))?;
    let texts = |items: &Value, kind: &str| -> Option<String> {
        let parts: Vec<&str> = items
            .as_array()?
            .iter()
            .filter(|part| part["type"] == kind)
            .filter_map(|part| part["text"].as_str())
            .collect();
        Some(parts.join(""))
    };
    let text = match api {
        Api::Anthropic => texts(&value["content"], "text"),
        Api::OpenAiChat => match &value["choices"][0]["message"] {
            Value::Object(message) => Some(
                message
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            ),
            _ => None,
        },
        Api::OpenAiResponses => value["output"].as_array().map(|items| {
            items
                .iter()
                .filter(|item| item["type"] == "message")
                .filter_map(|item| texts(&item["content"], "output_text"))
                .collect::<Vec<_>>()
                .join("")
        }),
    };
    let text = text.ok_or_else(|| format!("the answer is no {} response", api.name()))?;
    let usage = &value["usage"];
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let input = count("prompt_tokens").or_else(|| {
        count("input_tokens").map(|input| {
            input
                + count("cache_creation_input_tokens").unwrap_or(0)
                + count("cache_read_input_tokens").unwrap_or(0)
        })
    });
    let output = count("completion_tokens").or_else(|| count("output_tokens"));
    Ok((text, SideUsage { input, output }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::ToolCall;

    fn request() -> SideRequest {
        SideRequest {
            id: 1,
            purpose: "planner".into(),
            messages: vec![
                Message::system("be brief"),
                Message::user("read it"),
                Message::Assistant {
                    content: vec![
                        Block::Text {
                            text: "reading".into(),
                        },
                        Block::ToolCall(ToolCall::new("c1", "read", "{}")),
                    ],
                },
                Message::tool_result("c1", "read", "fn a", false),
                Message::user("plan"),
            ],
            timeout: Duration::from_secs(1),
            max_output_tokens: Some(100),
        }
    }

    #[derive(Default)]
    struct Asker {
        asked: Vec<SideRequest>,
        answers: Vec<(u64, Result<String, String>)>,
    }

    impl SideCalls for Asker {
        fn side_request(&mut self) -> Option<SideRequest> {
            self.asked.pop()
        }
        fn side_result(&mut self, id: u64, result: Result<String, String>) {
            self.answers.push((id, result));
        }
    }

    #[test]
    fn at_most_four_calls_run_and_every_answer_goes_back_and_is_stored() {
        let mut asker = Asker::default();
        for id in (1..=6).rev() {
            asker.asked.push(SideRequest { id, ..request() });
        }
        let mut stored = Vec::new();
        let mut gate = SideGate::new(Duration::from_secs(1));
        let (events, shut) = run_side_calls(
            &mut asker,
            &mut gate,
            |request| {
                let result = if request.id % 2 == 0 {
                    Err(format!("no {}", request.id))
                } else {
                    Ok(format!("plan {}", request.id))
                };
                let event = SideCallEvent {
                    id: request.id,
                    purpose: request.purpose.clone(),
                    ok: result.is_ok(),
                    error: result.clone().err(),
                    input_tokens: None,
                    output_tokens: None,
                    ms: 0,
                };
                (result, event)
            },
            |request, result| stored.push((request.id, result.clone())),
        );
        assert_eq!(events.len(), MAX_SIDE_CALLS);
        assert_eq!(shut, None, "fast failures spend little");
        assert_eq!(asker.asked.len(), 2, "the rest wait for the next request");
        assert_eq!(asker.answers, stored);
        assert_eq!(
            stored,
            vec![
                (1, Ok("plan 1".to_string())),
                (2, Err("no 2".to_string())),
                (3, Ok("plan 3".to_string())),
                (4, Err("no 4".to_string())),
            ]
        );
    }

    #[test]
    fn the_clients_key_is_never_in_debug_output() {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", HeaderValue::from_static("sk-secret"));
        let caller = SideCaller {
            upstream: Upstream::new("http://127.0.0.1:1"),
            uri: Uri::from_static("/v1/messages"),
            headers,
            api: Api::Anthropic,
            model: "m".into(),
        };
        let shown = format!("{caller:?}");
        assert!(
            shown.contains("/v1/messages") && !shown.contains("sk-secret"),
            "{shown}"
        );
    }

    #[test]
    fn keys_of_the_headers_and_the_upstream_url_are_redacted_from_errors() {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", HeaderValue::from_static("sk-secret-123456"));
        headers.insert(
            "authorization",
            HeaderValue::from_static("Bearer sk-bearer-abcdef"),
        );
        let caller = SideCaller {
            upstream: Upstream::new("http://user:hunter2hunter2@127.0.0.1:1/?token=tok-0123456789"),
            uri: Uri::from_static("/v1/messages"),
            headers,
            api: Api::Anthropic,
            model: "m".into(),
        };
        let echoed = "invalid x-api-key sk-secret-123456 (bearer sk-bearer-abcdef) \
                      for token tok-0123456789 and password hunter2hunter2";
        let redacted = caller.redactor().redact(echoed).into_owned();
        for secret in [
            "sk-secret-123456",
            "sk-bearer-abcdef",
            "tok-0123456789",
            "hunter2hunter2",
        ] {
            assert!(!redacted.contains(secret), "{redacted}");
        }
        assert!(
            redacted.contains("[redacted x-api-key header]"),
            "{redacted}"
        );
    }

    #[test]
    fn bodies_offer_no_tools_and_do_not_stream() {
        for api in [Api::Anthropic, Api::OpenAiChat, Api::OpenAiResponses] {
            let body = body(api, "m", &request(), "http://127.0.0.1:1");
            assert_eq!(body["model"], "m", "{api:?}");
            assert_eq!(body["stream"], false, "{api:?}");
            assert!(body.get("tools").is_none(), "{api:?}");
            assert!(body.get("stream_options").is_none(), "{api:?}");
        }
        let responses = body(Api::OpenAiResponses, "m", &request(), "");
        assert_eq!(responses["instructions"], "be brief");
        assert_eq!(responses["max_output_tokens"], 100);
        let input = responses["input"].as_array().unwrap();
        assert_eq!(input.len(), 5);
        assert_eq!(input[2]["type"], "function_call");
        assert_eq!(input[3]["output"], "fn a");
        let anthropic = body(Api::Anthropic, "m", &request(), "");
        assert_eq!(anthropic["max_tokens"], 100);
    }

    #[test]
    fn answers_are_read_per_format_and_garbage_is_an_error() {
        let (text, usage) = answer(
            Api::Anthropic,
            br#"{"content":[{"type":"thinking","thinking":"x"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"usage":{"input_tokens":5,"cache_read_input_tokens":10,"output_tokens":2}}"#,
        )
        .unwrap();
        assert_eq!(
            (text.as_str(), usage.input, usage.output),
            ("ab", Some(15), Some(2))
        );
        let (text, usage) = answer(
            Api::OpenAiChat,
            br#"{"choices":[{"message":{"role":"assistant","content":"plan"}}],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#,
        )
        .unwrap();
        assert_eq!(
            (text.as_str(), usage.input, usage.output),
            ("plan", Some(7), Some(3))
        );
        let (text, _) = answer(
            Api::OpenAiResponses,
            br#"{"output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"r"}]}]}"#,
        )
        .unwrap();
        assert_eq!(text, "r");
        let error = answer(Api::OpenAiChat, b"<html>oops").unwrap_err();
        assert!(error.contains("not JSON"), "{error}");
        let error = answer(Api::Anthropic, br#"{"choices":[]}"#).unwrap_err();
        assert!(error.contains("no anthropic response"), "{error}");
    }
}
