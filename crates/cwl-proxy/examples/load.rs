//! Load test of `cwl proxy` on loopback: many concurrent streaming
//! Anthropic conversations through the proxy, each request also sent
//! straight to the upstream, so the proxy's added time to first byte is
//! measured pairwise.
//!
//! ```sh
//! cargo run --release -p cwl-proxy --example load -- \
//!     --conversations 200 --requests 20 --tokens 100000 --budget 80000
//! # or against a running proxy (start it with the upstream printed here):
//! cargo run --release -p cwl-proxy --example load -- --upstream-listen 127.0.0.1:9901 \
//!     --proxy http://127.0.0.1:8788
//! ```
//!
//! `--first N` numbers the conversations from N, so runs one after the
//! other against one proxy start new conversations (20 runs of
//! `--conversations 1000` make 20,000).
//!
//! The upstream answers every request with a short SSE stream. Each
//! conversation grows by one tool call (two reads, then an edit) and its
//! result per request, with a new user turn every ten, until its last body
//! is about `--tokens` tokens. With `--from T`, its first request, not
//! measured, already holds about `T` tokens of such steps, so every
//! measured body is between `T` and `--tokens` (e.g. `--from 95000
//! --tokens 105000 --requests 20`: 100k-token bodies growing by 500
//! tokens, about what a real Claude Code request adds). `--tools N` adds N
//! tool definitions of about 1k tokens each to every body. Prints one JSON object:
//! time to first byte through the proxy and direct (p50/p99, ms), the
//! pairwise added latency, requests per second through the proxy (exact
//! with `--no-direct`, which skips the direct requests), and the
//! process's peak resident memory (which includes this client and the
//! upstream when the proxy runs in process; use `--proxy` and the proxy's
//! own `/proc/PID/status` VmHWM to isolate it), and, with the proxy in
//! process, where its own time went (parse, engine, serialise).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::http::{Request, Response};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use cwl_proxy::event::{Event, Timing};
use cwl_proxy::server::{DEFAULT_IDLE, DEFAULT_MAX_BODY, Options, Proxy, serve};
use cwl_proxy::upstream::Upstream;

struct Args {
    conversations: usize,
    requests: usize,
    tokens: usize,
    budget: usize,
    proxy: Option<String>,
    upstream_listen: String,
    direct: bool,
    first: usize,
    from: usize,
    tools: usize,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        conversations: 200,
        requests: 20,
        tokens: 100_000,
        budget: 80_000,
        proxy: None,
        upstream_listen: "127.0.0.1:0".into(),
        direct: true,
        first: 0,
        from: 0,
        tools: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let number = |text: String| text.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--conversations" => args.conversations = number(value()?)?,
            "--requests" => args.requests = number(value()?)?,
            "--tokens" => args.tokens = number(value()?)?,
            "--budget" => args.budget = number(value()?)?,
            "--proxy" => args.proxy = Some(value()?),
            "--upstream-listen" => args.upstream_listen = value()?,
            "--no-direct" => args.direct = false,
            "--first" => args.first = number(value()?)?,
            "--from" => args.from = number(value()?)?,
            "--tools" => args.tools = number(value()?)?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.requests == 0 || args.conversations == 0 {
        return Err("--requests and --conversations must be above zero".into());
    }
    if args.from >= args.tokens {
        return Err("--from must be below --tokens".into());
    }
    Ok(args)
}

const STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\"}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

async fn upstream(listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let service = service_fn(|request: Request<Incoming>| async move {
                let _ = request.into_body().collect().await;
                let mut response = Response::new(Full::new(Bytes::from_static(STREAM.as_bytes())));
                response
                    .headers_mut()
                    .insert("content-type", "text/event-stream".parse().unwrap());
                Ok::<_, Infallible>(response)
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One step's tool output: about `tokens` tokens of code-like lines.
fn output(conversation: usize, step: usize, tokens: usize) -> String {
    (0..tokens / 20 + 1)
        .map(|j| format!("let v{conversation}_{step}_{j} = f_{j}(x_{step}); // src/m{step}.rs:{j}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Adds step `step` (from 1) of a conversation: a read or an edit and its
/// result of about `tokens` tokens, after a new user turn every ten steps.
fn grow(messages: &mut Vec<String>, conversation: usize, step: usize, tokens: usize) {
    if step.is_multiple_of(10) {
        messages.push(format!(
            r#"{{"role":"assistant","content":"part {step} done"}}"#
        ));
        messages.push(format!(r#"{{"role":"user","content":"now part {step}"}}"#));
    }
    let (tool, input) = if step.is_multiple_of(3) {
        (
            "Edit",
            format!(
                r#"{{"file_path":"src/m{}.rs","old_string":"f_1","new_string":"g_1"}}"#,
                step - 1
            ),
        )
    } else {
        ("Read", format!(r#"{{"file_path":"src/m{step}.rs"}}"#))
    };
    messages.push(format!(
        r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"t{step}","name":"{tool}","input":{input}}}]}}"#
    ));
    messages.push(format!(
        r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{step}","content":{}}}]}}"#,
        serde_json::to_string(&output(conversation, step, tokens)).unwrap()
    ));
}

/// `count` tool definitions of about 1k tokens each, as a coding agent
/// offers them (Claude Code 2.0 sends about 17, 15k tokens in all).
fn tools(count: usize) -> String {
    let tools: Vec<serde_json::Value> = (0..count)
        .map(|n| {
            let description = (0..40)
                .map(|line| {
                    format!(
                        "Rule {line} of tool {n}: use it on files and directories only when asked."
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            serde_json::json!({
                "name": format!("Tool{n}"),
                "description": description,
                "input_schema": {"type": "object", "properties": {
                    "file_path": {"type": "string", "description": "The absolute path of the file"},
                    "limit": {"type": "number", "description": "How many lines to read"},
                }, "required": ["file_path"]},
            })
        })
        .collect();
    serde_json::to_string(&tools).unwrap()
}

fn body(messages: &[String], tools: &str) -> String {
    format!(
        r#"{{"model":"load","max_tokens":1024,"stream":true,"system":"You are a coding agent.","tools":{tools},"messages":[{}]}}"#,
        messages.join(",")
    )
}

/// Time to the first body byte, then the whole body read.
async fn ttfb(client: &reqwest::Client, url: &str, body: String) -> Result<Duration, String> {
    let start = Instant::now();
    let mut response = client
        .post(url)
        .header("x-api-key", "load-test")
        .header("anthropic-version", "2023-06-01")
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("status {}", response.status()));
    }
    let first = response.chunk().await.map_err(|e| e.to_string())?;
    let elapsed = start.elapsed();
    if first.is_none() {
        return Err("empty body".into());
    }
    while response.chunk().await.map_err(|e| e.to_string())?.is_some() {}
    Ok(elapsed)
}

/// The proxy's own time on each request it handled in process.
type Timings = Arc<std::sync::Mutex<Vec<Timing>>>;

/// Starts the proxy in process in front of `upstream_url`, keeping each
/// request's timing; its URL.
async fn start_proxy(args: &Args, upstream_url: &str, timings: Timings) -> Result<String, String> {
    let prefilled = args.from > 0;
    let options = Options {
        anthropic: Upstream::new(upstream_url),
        openai: Upstream::new(upstream_url),
        config: cwl::Config::with_budget(args.budget).residue_share(None),
        strategy: cwl_session::strategy::StrategyName::Cwl,
        strategy_options: serde_json::Value::Null,
        store: None,
        max_body: DEFAULT_MAX_BODY,
        idle: DEFAULT_IDLE,
        max_conversations: cwl_proxy::server::DEFAULT_MAX_CONVERSATIONS,
        // With `--from`, a conversation's first request (the prefill) is
        // not measured, so its timing is left out too.
        events: Some(Box::new(move |event: &Event| {
            if !(prefilled && event.route == "new") {
                timings.lock().unwrap().push(event.timing)
            }
        })),
        planner_model: None,
        side_timeout: cwl_proxy::side::DEFAULT_SIDE_TIMEOUT,
        heads: None,
    };
    let proxy =
        Arc::new(Proxy::new(options, Arc::new(cwl::O200k::new())).map_err(|e| e.to_string())?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    tokio::spawn(serve(listener, proxy));
    Ok(url)
}

/// p50 and p99 of each phase of the proxy's own time, in milliseconds.
fn phases(timings: &[Timing]) -> serde_json::Value {
    let phase = |of: fn(&Timing) -> u64| {
        let mut ms: Vec<f64> = timings.iter().map(|t| of(t) as f64 / 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        serde_json::json!({"p50": percentile(&ms, 0.5), "p99": percentile(&ms, 0.99)})
    };
    serde_json::json!({
        "parse": phase(|t| t.parse_us),
        "engine": phase(|t| t.engine_us),
        "serialise": phase(|t| t.serialise_us),
        "sum": phase(|t| t.parse_us + t.engine_us + t.serialise_us),
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args = args()?;
    let listener = tokio::net::TcpListener::bind(&args.upstream_listen)
        .await
        .map_err(|e| e.to_string())?;
    let upstream_url = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    eprintln!("upstream on {upstream_url}");
    tokio::spawn(upstream(listener));
    let timings: Timings = Arc::default();
    let proxy_url = match &args.proxy {
        Some(url) => url.clone(),
        None => start_proxy(&args, &upstream_url, Arc::clone(&timings)).await?,
    };
    let per_step = (args.tokens - args.from) / args.requests;
    let prefill = args.from / per_step.max(1);
    let tools = Arc::new(tools(args.tools));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for conversation in args.first..args.first + args.conversations {
        let (proxy_url, upstream_url) = (proxy_url.clone(), upstream_url.clone());
        let tools = Arc::clone(&tools);
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut messages = vec![format!(
                r#"{{"role":"user","content":"conversation {conversation}: fix the bug"}}"#
            )];
            let mut samples = Vec::new();
            if prefill > 0 {
                (1..=prefill).for_each(|step| grow(&mut messages, conversation, step, per_step));
                ttfb(
                    &client,
                    &format!("{proxy_url}/v1/messages"),
                    body(&messages, &tools),
                )
                .await?;
            }
            for n in 0..args.requests {
                // Without a prefill, the first request is the user turn alone.
                let step = if prefill > 0 { prefill + 1 + n } else { n };
                if step > 0 {
                    grow(&mut messages, conversation, step, per_step);
                }
                let body = body(&messages, &tools);
                let url = format!("{proxy_url}/v1/messages");
                let through = ttfb(&client, &url, body.clone()).await?;
                let direct = if args.direct {
                    let url = format!("{upstream_url}/v1/messages");
                    Some(ttfb(&client, &url, body).await?)
                } else {
                    None
                };
                samples.push((through, direct));
            }
            Ok::<_, String>(samples)
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await.map_err(|e| e.to_string())??);
    }
    let wall = started.elapsed();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut through: Vec<f64> = samples.iter().map(|(t, _)| ms(*t)).collect();
    let mut direct: Vec<f64> = samples.iter().filter_map(|(_, d)| d.map(ms)).collect();
    let mut added: Vec<f64> = samples
        .iter()
        .filter_map(|(t, d)| d.map(|d| ms(*t) - ms(d)))
        .collect();
    for v in [&mut through, &mut direct, &mut added] {
        v.sort_by(f64::total_cmp);
    }
    let report = serde_json::json!({
        "conversations": args.conversations,
        "requests_per_conversation": args.requests,
        "first_body_tokens": args.from,
        "tools": args.tools,
        "last_body_tokens": args.tokens,
        "budget": args.budget,
        "requests": samples.len(),
        "ttfb_ms": {
            "proxy": {"p50": percentile(&through, 0.5), "p99": percentile(&through, 0.99)},
            "direct": {"p50": percentile(&direct, 0.5), "p99": percentile(&direct, 0.99)},
            "added": {"p50": percentile(&added, 0.5), "p99": percentile(&added, 0.99)},
        },
        "wall_s": wall.as_secs_f64(),
        // With direct requests interleaved this undercounts; use --no-direct for throughput.
        "proxy_requests_per_s": samples.len() as f64 / wall.as_secs_f64(),
        "direct_interleaved": args.direct,
        "peak_rss_mib": peak_rss_kib().map(|k| k as f64 / 1024.0),
        "proxy_in_process": args.proxy.is_none(),
        "proxy_time_ms": phases(&timings.lock().unwrap()),
    });
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    Ok(())
}
