//! Recorded client traffic through the proxy, measured.
//!
//! A run directory of `scripts/real-clients/run.sh` (`<client>-direct/`)
//! holds `upstream/NNN-<api>.json`, every request body exactly as the
//! client sent it, and `upstream/requests.jsonl` (one line per file: its
//! kind, `main`/`side`/`compaction`/`count_tokens`, and the prompt size the
//! scripted upstream reported). [`forward`] sends every request, in order,
//! through an in-process proxy to a local upstream that records what it
//! receives and reports usage the way `examples/scripted_upstream.rs`
//! counts it; [`measure`] compares the forwarded views of the main
//! requests with what the client sent: tokens against τ, prefix breaks,
//! and content retention in the lab's sense (`cwl_lab::metrics::content`).

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use clap::Parser;
use cwl::{Block, Message, ReasoningScope};
use cwl_lab::metrics::anchors::{AnchorId, AnchorTable, Scope};
use cwl_lab::metrics::content::{LineKey, Need, Seen, message_lines};
use cwl_proxy::api::Api;
use cwl_proxy::cli::ProxyArgs;
use cwl_proxy::event::Event;
use cwl_proxy::server::{Proxy, serve};
use cwl_proxy::wire::{CallNames, Item};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::http::{Method, Request, Response};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

#[path = "../../../examples/support/usage.rs"]
mod usage;

pub use usage::{anthropic_tokens, responses_tokens};
use usage::{only_tool_results, responses_turn, user_turn};

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Its URL path (with the query string the client sent).
    pub path: String,
    /// `main`, `side`, `compaction` or `count_tokens`.
    pub kind: String,
    /// The body, byte for byte.
    pub body: Vec<u8>,
    /// The prompt size the scripted upstream reported for it.
    pub reported: Option<u64>,
}

/// A recorded run.
#[derive(Debug)]
pub struct Run {
    /// The client's directory (`<run>/<client>-direct`).
    pub dir: PathBuf,
    /// Every request, in the order the client sent them.
    pub requests: Vec<Recorded>,
    /// The client's own session log, if present.
    pub log: Option<PathBuf>,
    /// Reasoning tokens each counted Responses reasoning item stood for.
    pub reasoning: usize,
}

/// The client directory of `dir`: `dir` itself when it holds
/// `upstream/requests.jsonl`, else its one `*-direct` child that does.
pub fn client_dir(dir: &Path) -> Option<PathBuf> {
    if dir.join("upstream/requests.jsonl").is_file() {
        return Some(dir.to_path_buf());
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("-direct"))
                && path.join("upstream/requests.jsonl").is_file()
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Loads the run at `dir` (see [`client_dir`]).
pub fn load(dir: &Path) -> Result<Run, String> {
    let dir = client_dir(dir).ok_or_else(|| format!("{}: no recorded run", dir.display()))?;
    let upstream = dir.join("upstream");
    let lines = std::fs::read_to_string(upstream.join("requests.jsonl"))
        .map_err(|e| format!("requests.jsonl: {e}"))?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&upstream)
        .map_err(|e| e.to_string())?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension().is_some_and(|x| x == "json")
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.as_bytes()[0].is_ascii_digit())
        })
        .collect();
    files.sort();
    // Lines written at once by concurrent requests may be garbled: a
    // file without a readable line is classified by its body.
    let meta: HashMap<u64, Value> = lines
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|meta| Some((meta["seq"].as_u64()?, meta)))
        .collect();
    let mut requests = Vec::new();
    for (seq, file) in files.iter().enumerate() {
        let body = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let meta = meta
            .get(&(seq as u64))
            .cloned()
            .unwrap_or_else(|| guess_meta(file, &body));
        requests.push(Recorded {
            path: meta["path"].as_str().unwrap_or("/v1/responses").to_string(),
            kind: meta["kind"].as_str().unwrap_or("main").to_string(),
            body,
            reported: meta["input_tokens"].as_u64(),
        });
    }
    let log = ["codex-rollout.jsonl", "claude-session.jsonl"]
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file());
    let reasoning = reasoning_tokens(&requests);
    Ok(Run {
        dir,
        requests,
        log,
        reasoning,
    })
}

/// The path and kind of a request whose line is unreadable, from its
/// file name and body: without tools it is a side request; an Anthropic
/// body without `max_tokens` counts tokens.
fn guess_meta(file: &Path, body: &[u8]) -> Value {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let anthropic = file.to_string_lossy().ends_with("-anthropic.json");
    let path = match (anthropic, value.get("max_tokens").is_some()) {
        (false, _) => "/v1/responses",
        (true, true) => "/v1/messages?beta=true",
        (true, false) => "/v1/messages/count_tokens?beta=true",
    };
    let tools = value["tools"].as_array().is_some_and(|t| !t.is_empty());
    json!({"path": path, "kind": if tools { "main" } else { "side" }})
}

/// The reasoning tokens the scripted upstream counted per Responses
/// reasoning item (its `SCRIPTED_REASONING`), read back from what it
/// reported: the median over requests that counted any.
fn reasoning_tokens(requests: &[Recorded]) -> usize {
    let mut each: Vec<usize> = requests
        .iter()
        .filter(|r| r.path.starts_with("/v1/responses"))
        .filter_map(|r| {
            let body: Value = serde_json::from_slice(&r.body).ok()?;
            let counted = counted_reasoning(&body);
            let reported = usize::try_from(r.reported?).ok()?;
            (counted > 0).then(|| reported.saturating_sub(responses_tokens(&body, 0)) / counted)
        })
        .collect();
    each.sort_unstable();
    each.get(each.len() / 2).copied().unwrap_or(0)
}

/// The API of a recorded path.
pub fn api_of(path: &str) -> Option<Api> {
    Api::of(&Method::POST, path.split('?').next().unwrap_or(path))
}

/// What the upstream received for one request, and the proxy's event.
#[derive(Debug, Clone)]
pub struct Forwarded {
    /// The body the upstream received (`None`: the request never reached it).
    pub body: Option<Vec<u8>>,
    /// The proxy's event for it, when it went through the engine.
    pub event: Option<Event>,
}

/// Sends every request of `run` through a proxy started with `args` (the
/// `cwl proxy` flags; `--no-store` and the upstreams are added) and
/// returns what the upstream received for each: `None` for a request
/// that never reached it.
pub fn forward(run: &Run, args: &[String]) -> Result<Vec<Forwarded>, String> {
    forward_through(run, args, 1)
}

/// [`forward`] through `replicas` proxies sharing a session directory
/// (`--shared-sessions`), request `k` to replica `k % replicas`: round
/// robin, each conversation changing replica at every request.
pub fn forward_through(
    run: &Run,
    args: &[String],
    replicas: usize,
) -> Result<Vec<Forwarded>, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(forward_async(run, args, replicas.max(1)))
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    proxy: ProxyArgs,
}

async fn forward_async(
    run: &Run,
    args: &[String],
    replicas: usize,
) -> Result<Vec<Forwarded>, String> {
    let received: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let upstream = start_upstream(Arc::clone(&received), run.reasoning).await;
    let shared = tempfile::tempdir().map_err(|e| e.to_string())?;
    let store: Vec<String> = if replicas > 1 {
        let dir = shared.path().display().to_string();
        vec!["--session-dir".into(), dir, "--shared-sessions".into()]
    } else {
        vec!["--no-store".into()]
    };
    let mut line = vec!["cwl-proxy".to_string()];
    line.extend(store);
    line.extend([
        "--anthropic-upstream".into(),
        upstream.clone(),
        "--openai-upstream".into(),
        upstream,
    ]);
    line.extend(args.iter().cloned());
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let mut addrs = Vec::new();
    for _ in 0..replicas {
        let mut options = Cli::try_parse_from(line.clone())
            .map_err(|e| e.to_string())?
            .proxy
            .options()
            .map_err(|e| e.to_string())?;
        let sink = Arc::clone(&events);
        options.events = Some(Box::new(move |event: &Event| {
            sink.lock().unwrap().push(event.clone())
        }));
        let proxy =
            Arc::new(Proxy::new(options, Arc::new(cwl::O200k::new())).map_err(|e| e.to_string())?);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        addrs.push(listener.local_addr().map_err(|e| e.to_string())?);
        tokio::spawn(serve(listener, proxy));
    }
    let client = reqwest::Client::new();
    let mut out = Vec::new();
    for (k, request) in run.requests.iter().enumerate() {
        let addr = addrs[k % replicas];
        let before = received.lock().unwrap().len();
        let response = client
            .post(format!("http://{addr}{}", request.path))
            .header("content-type", "application/json")
            .body(request.body.clone())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        // The whole answer, so the proxy calibrates before the next request.
        response.bytes().await.map_err(|e| e.to_string())?;
        let received = received.lock().unwrap();
        let event = events.lock().unwrap().pop();
        let body = (received.len() > before).then(|| received[before].clone());
        out.push(Forwarded { body, event });
    }
    Ok(out)
}

/// A local upstream recording every body and answering with the usage
/// the scripted upstream would report; returns its URL.
async fn start_upstream(received: Arc<Mutex<Vec<Vec<u8>>>>, reasoning: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let received = Arc::clone(&received);
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let received = Arc::clone(&received);
                    async move { Ok::<_, Infallible>(answer(request, &received, reasoning).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

async fn answer(
    request: Request<Incoming>,
    received: &Mutex<Vec<Vec<u8>>>,
    reasoning: usize,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_string();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    received.lock().unwrap().push(body.clone());
    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let stream = value["stream"].as_bool().unwrap_or(false);
    let (content_type, text) = if path.ends_with("/count_tokens") {
        let tokens = anthropic_tokens(&value);
        (
            "application/json",
            json!({"input_tokens": tokens}).to_string(),
        )
    } else if path.starts_with("/v1/messages") {
        let usage = json!({"input_tokens": anthropic_tokens(&value), "output_tokens": 1});
        let message = json!({"id": "msg_1", "type": "message", "role": "assistant",
            "model": value["model"], "content": [], "stop_reason": "end_turn", "usage": usage});
        if stream {
            let start = json!({"type": "message_start", "message": message});
            let text = format!(
                "event: message_start\ndata: {start}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
            );
            ("text/event-stream", text)
        } else {
            ("application/json", message.to_string())
        }
    } else {
        let tokens = responses_tokens(&value, reasoning);
        let response = json!({"id": "resp_1", "object": "response", "status": "completed",
            "output": [], "usage": {"input_tokens": tokens, "output_tokens": 1,
            "total_tokens": tokens + 1}});
        if stream {
            let done = json!({"type": "response.completed", "response": response});
            (
                "text/event-stream",
                format!("event: response.completed\ndata: {done}\n\n"),
            )
        } else {
            ("application/json", response.to_string())
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response
        .headers_mut()
        .insert("content-type", content_type.parse().unwrap());
    response
}

/// Reasoning items a Responses request counts (those of its latest turn).
fn counted_reasoning(body: &Value) -> usize {
    let items = body["input"].as_array().map_or(&[][..], Vec::as_slice);
    let turn = responses_turn(items);
    items
        .iter()
        .skip(turn)
        .filter(|item| item["type"] == "reasoning")
        .count()
}

/// Tokens of a request body, as the scripted upstream reports them.
pub fn tokens(api: Api, body: &Value, reasoning: usize) -> usize {
    match api {
        Api::Anthropic => anthropic_tokens(body),
        _ => responses_tokens(body, reasoning),
    }
}

/// The least a budget can leave of a request: system prompt, tools, the
/// client's user turns and its latest turn (the last model output and
/// what follows it), which the proxy never evicts.
pub fn floor(api: Api, body: &Value) -> Value {
    let mut out = body.clone();
    let key = history_key(api);
    let items = body[key].as_array().cloned().unwrap_or_default();
    let is_output = |item: &Value| match api {
        Api::Anthropic => item["role"] == "assistant",
        _ => {
            matches!(
                item["type"].as_str().unwrap_or("message"),
                "reasoning" | "function_call" | "custom_tool_call" | "local_shell_call"
            ) || item["role"] == "assistant"
        }
    };
    let is_user = |item: &Value| match api {
        Api::Anthropic => item["role"] == "user" && !only_tool_results(&item["content"]),
        _ => item["role"] == "user" || item["role"] == "developer",
    };
    let last = items.iter().rposition(is_output).unwrap_or(items.len());
    let start = items[..last]
        .iter()
        .rposition(|item| !is_output(item))
        .map_or(0, |at| at + 1);
    let kept: Vec<Value> = items
        .iter()
        .enumerate()
        .filter(|(at, item)| *at >= start || is_user(item))
        .map(|(_, item)| item.clone())
        .collect();
    out[key] = Value::Array(kept);
    out
}

fn history_key(api: Api) -> &'static str {
    match api {
        Api::Anthropic | Api::OpenAiChat => "messages",
        Api::OpenAiResponses => "input",
    }
}

/// What a request renders as for prefix caching: its system prompt and
/// history, without `cache_control` markers and, for a model that drops
/// earlier turns' reasoning, without that reasoning.
fn rendered(api: Api, body: &Value) -> Vec<Value> {
    let key = history_key(api);
    let mut items = body[key].as_array().cloned().unwrap_or_default();
    let drops = ReasoningScope::of_model(body["model"].as_str().unwrap_or_default())
        == ReasoningScope::CurrentTurn;
    if drops {
        match api {
            Api::Anthropic => {
                let turn = user_turn(&items).unwrap_or(0);
                for item in &mut items[..turn] {
                    if let Some(blocks) = item["content"].as_array_mut() {
                        blocks.retain(|b| {
                            !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking"))
                        });
                    }
                }
            }
            _ => {
                let turn = responses_turn(&items);
                let mut at = 0;
                items.retain(|item| {
                    at += 1;
                    at > turn || item["type"] != "reasoning"
                });
            }
        }
    }
    let mut out = vec![
        body.get("system")
            .or(body.get("instructions"))
            .cloned()
            .unwrap_or(Value::Null),
    ];
    out.extend(items);
    for value in &mut out {
        strip_cache_control(value);
    }
    out
}

fn strip_cache_control(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(strip_cache_control);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

/// Whether `current` keeps all of `previous` at its head (appending only).
fn appends(previous: &[Value], current: &[Value]) -> bool {
    previous.len() <= current.len() && previous.iter().zip(current).all(|(a, b)| a == b)
}

/// The engine messages of a request's history, as the proxy converts it.
fn messages(api: Api, body: &Value) -> Vec<Message> {
    let items: Vec<Item> = body[history_key(api)]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|value| Item::of(value.clone()))
        .collect();
    api.wire()
        .units(&items, &mut CallNames::default())
        .into_iter()
        .flat_map(|unit| unit.messages)
        .collect()
}

/// The model's reply to a request (its engine messages `sent`): the
/// assistant messages the next request continuing that history adds
/// right after it.
fn reply(sent: &[Message], later: &[&Vec<Message>]) -> Option<Vec<Message>> {
    let next = later
        .iter()
        .find(|messages| messages.len() > sent.len() && messages.starts_with(sent))?;
    let reply: Vec<Message> = next[sent.len()..]
        .iter()
        .take_while(|m| matches!(m, Message::Assistant { .. }))
        .cloned()
        .collect();
    (!reply.is_empty()).then_some(reply)
}

fn hash_of(message: &Message) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_string(message)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

/// The figures of one run through the proxy.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Main requests measured.
    pub requests: usize,
    /// Mean and largest forwarded size, in reported tokens.
    pub mean: f64,
    /// The largest forwarded size.
    pub max: usize,
    /// Forwarded over τ.
    pub over: usize,
    /// Forwarded over τ × 1.05.
    pub over_slack: usize,
    /// Of those, whose user turns and latest turn fit in τ × 1.05.
    pub over_slack_fitting: usize,
    /// The largest forwarded size whose floor fit in τ × 1.05.
    pub max_fitting: usize,
    /// Main requests after the first, compared.
    pub compared: usize,
    /// Of those, the forwarded ones that break the previous one's prefix.
    pub proxy_breaks: usize,
    /// Of those, the client's own that break the previous one's prefix.
    pub client_breaks: usize,
    /// Requests with content at risk that the client's own request held.
    pub at_risk: usize,
    /// Of those, the ones whose forwarded request lost none of it.
    pub loss_free: usize,
    /// Requests with content at risk in the whole transcript so far.
    pub client_at_risk: usize,
    /// Of those, the ones the client's own request lost none of (its
    /// compactions drop content).
    pub client_loss_free: usize,
    /// Per forwarded prefix break: the request's index, whether the
    /// client's own broke too, the first item that differs and how many
    /// the previous one had.
    pub breaks: Vec<(usize, bool, usize, usize)>,
    /// Per request with content at risk that lost some: its index among
    /// the recorded requests, how many lines it lost and the values.
    pub losses: Vec<(usize, usize, Vec<String>)>,
}

impl Figures {
    /// A share in percent.
    pub fn pct(part: usize, whole: usize) -> f64 {
        if whole == 0 {
            100.0
        } else {
            100.0 * part as f64 / whole as f64
        }
    }

    /// Content loss-free share of the forwarded requests, in percent.
    pub fn loss_free_pct(&self) -> f64 {
        Self::pct(self.loss_free, self.at_risk)
    }

    /// Prefix breaks of the forwarded requests, in percent.
    pub fn proxy_break_pct(&self) -> f64 {
        Self::pct(self.proxy_breaks, self.compared)
    }

    /// Prefix breaks of the client's own requests, in percent.
    pub fn client_break_pct(&self) -> f64 {
        Self::pct(self.client_breaks, self.compared)
    }
}

/// Lines and anchors of each message, cached by its hash.
#[derive(Default)]
struct Content {
    table: AnchorTable,
    cache: HashMap<u64, (Vec<LineKey>, Vec<AnchorId>)>,
}

impl Content {
    fn of(&mut self, message: &Message) -> &(Vec<LineKey>, Vec<AnchorId>) {
        let key = hash_of(message);
        if !self.cache.contains_key(&key) {
            let anchors = self.table.extract(message, Scope::All);
            self.cache.insert(key, (message_lines(message), anchors));
        }
        &self.cache[&key]
    }

    /// What the messages of a request carry in the client's own text:
    /// whole messages the client sent, and the client's own blocks of an
    /// assistant message the proxy rebuilt; reasoning of earlier turns
    /// only where the model keeps it.
    fn held(
        &mut self,
        sent: &[Message],
        client: &[Message],
        drops_reasoning: bool,
    ) -> (HashSet<LineKey>, HashSet<AnchorId>) {
        let whole: HashSet<u64> = client.iter().map(hash_of).collect();
        let blocks: HashSet<u64> = client
            .iter()
            .flat_map(|m| match m {
                Message::Assistant { content } => content.clone(),
                _ => Vec::new(),
            })
            .map(|b| hash_of(&Message::Assistant { content: vec![b] }))
            .collect();
        let turn = sent
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }))
            .unwrap_or(0);
        let mut lines = HashSet::new();
        let mut anchors = HashSet::new();
        for (at, message) in sent.iter().enumerate() {
            let pieces: Vec<Message> = match message {
                Message::Assistant { content } => content
                    .iter()
                    .filter(|b| {
                        !(drops_reasoning && at < turn && matches!(b, Block::Reasoning { .. }))
                    })
                    .map(|b| Message::Assistant {
                        content: vec![b.clone()],
                    })
                    .filter(|m| blocks.contains(&hash_of(m)))
                    .collect(),
                other if whole.contains(&hash_of(other)) => vec![other.clone()],
                _ => Vec::new(),
            };
            for piece in pieces {
                let (l, a) = self.of(&piece);
                lines.extend(l.iter().copied());
                anchors.extend(a.iter().copied());
            }
        }
        (lines, anchors)
    }
}

/// Measures the forwarded main requests of `run` (`forwarded[k]` is what
/// the upstream received for `run.requests[k]`) against budget `tau`.
pub fn measure(run: &Run, forwarded: &[Forwarded], tau: usize) -> Figures {
    let bodies: Vec<Option<Value>> = run
        .requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).ok())
        .collect();
    let histories: Vec<Vec<Message>> = run
        .requests
        .iter()
        .zip(&bodies)
        .map(|(r, body)| match (api_of(&r.path), body) {
            (Some(api), Some(body)) if !r.path.contains("count_tokens") => messages(api, body),
            _ => Vec::new(),
        })
        .collect();
    let mut figures = Figures::default();
    let mut content = Content::default();
    let mut seen = Seen::default();
    let mut noted: HashSet<u64> = HashSet::new();
    let mut previous: Option<(Vec<Value>, Vec<Value>)> = None;
    let mut total = 0usize;
    for (k, request) in run.requests.iter().enumerate() {
        let (Some(api), Some(client)) = (api_of(&request.path), bodies[k].as_ref()) else {
            continue;
        };
        if request.path.contains("count_tokens") {
            continue;
        }
        let client_messages = &histories[k];
        if request.kind == "main" {
            let reply = {
                let later: Vec<&Vec<Message>> = histories[k + 1..].iter().collect();
                reply(client_messages, &later)
            };
            // What the transcript showed before the reply: the client's
            // messages of every request so far.
            for message in client_messages {
                if noted.insert(hash_of(message)) {
                    let anchors = content.table.extract(message, Scope::All);
                    let lines = message_lines(message);
                    let tool = matches!(message, Message::ToolResult(_));
                    seen.note(&anchors, &lines, tool);
                    content.table.mark_seen(&anchors, k as u64);
                }
            }
            let sent: Value = forwarded[k]
                .body
                .as_ref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or_else(|| client.clone());
            figures.requests += 1;
            let size = tokens(api, &sent, run.reasoning);
            total += size;
            figures.max = figures.max.max(size);
            let slack = tau + tau / 20;
            if size > tau {
                figures.over += 1;
            }
            let fits = tokens(api, &floor(api, client), run.reasoning) <= slack;
            if fits {
                figures.max_fitting = figures.max_fitting.max(size);
            }
            if size > slack {
                figures.over_slack += 1;
                figures.over_slack_fitting += usize::from(fits);
            }
            let now = (rendered(api, &sent), rendered(api, client));
            if let Some((proxy, own)) = &previous {
                figures.compared += 1;
                let (broke, own_broke) = (!appends(proxy, &now.0), !appends(own, &now.1));
                figures.proxy_breaks += usize::from(broke);
                figures.client_breaks += usize::from(own_broke);
                if broke {
                    let at = proxy.iter().zip(&now.0).take_while(|(a, b)| a == b).count();
                    figures.breaks.push((k, own_broke, at, proxy.len()));
                }
            }
            previous = Some(now);
            if let Some(reply) = reply {
                let drops = ReasoningScope::of_model(client["model"].as_str().unwrap_or(""))
                    == ReasoningScope::CurrentTurn;
                let mut need = Need::default();
                for message in &reply {
                    let used: Vec<AnchorId> = content
                        .table
                        .extract(message, Scope::Used)
                        .into_iter()
                        .filter(|a| content.table.was_seen(*a))
                        .collect();
                    let one = Need::of(message, &used, &seen);
                    need.lines.extend(one.lines);
                    need.anchors.extend(one.anchors);
                }
                // Only what the client itself sent is the proxy's to
                // lose: the client's compactions are its own.
                let (lines, anchors) = content.held(client_messages, client_messages, drops);
                let held = need.len();
                need.lines.retain(|l| lines.contains(l));
                need.anchors.retain(|a| anchors.contains(a));
                if held > 0 {
                    figures.client_at_risk += 1;
                    figures.client_loss_free += usize::from(need.len() == held);
                }
                if !need.is_empty() {
                    figures.at_risk += 1;
                    let sent_messages = messages(api, &sent);
                    let (lines, anchors) = content.held(&sent_messages, client_messages, drops);
                    let lost_lines = need.lines.iter().filter(|l| !lines.contains(l)).count();
                    let lost: Vec<String> = need
                        .anchors
                        .iter()
                        .filter(|a| !anchors.contains(a))
                        .map(|a| content.table.name(*a).to_string())
                        .collect();
                    if lost_lines + lost.len() == 0 {
                        figures.loss_free += 1;
                    } else {
                        figures.losses.push((k, lost_lines, lost));
                    }
                }
            }
        }
    }
    figures.mean = if figures.requests == 0 {
        0.0
    } else {
        total as f64 / figures.requests as f64
    };
    figures
}

/// The lab's figures on the client's own log: per policy, content
/// loss-free share and share over budget (both in percent), by running
/// `cwl replay`'s code on it.
pub fn lab(log: &Path, budget: &str) -> Result<Vec<(String, f64, f64)>, String> {
    #[derive(Parser)]
    struct Replay {
        #[command(flatten)]
        replay: cwl_lab::cli::ReplayArgs,
    }
    let log = log.display().to_string();
    let args = Replay::try_parse_from([
        "cwl-replay",
        "--budget",
        budget,
        "--policy",
        "all",
        log.as_str(),
    ])
    .map_err(|e| e.to_string())?
    .replay;
    let (report, _) = cwl_lab::cli::replay_files(&args).map_err(|e| e.to_string())?;
    let file = report
        .files
        .first()
        .ok_or_else(|| format!("{log}: not replayed"))?;
    Ok(file
        .policies
        .iter()
        .map(|outcome| {
            let summary = outcome.stats.summary();
            (
                outcome.kind.to_string(),
                100.0 * summary.content_loss_free_share,
                100.0 * summary.over_budget_share,
            )
        })
        .collect())
}
