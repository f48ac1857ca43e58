//! A scripted upstream on 127.0.0.1 and a proxy in front of it.

#![allow(dead_code)]

pub mod porting;

use cwl_session::strategy::StrategyName;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use cwl_proxy::event::Event;
use cwl_proxy::server::{DEFAULT_MAX_BODY, Options, Proxy, serve};
use cwl_proxy::store::Store;
use cwl_proxy::upstream::Upstream;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::http::{HeaderMap, Request, Response, StatusCode};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::sync::{Notify, mpsc};

type Body = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// A request the upstream received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("upstream body is JSON")
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

/// What the upstream answers.
pub enum Reply {
    /// A whole body.
    Whole {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: String,
    },
    /// A body in chunks: the first at once, then (after `gate` is
    /// notified, if any) the rest; `drop` then ends the stream with an
    /// error instead of its end.
    Chunks {
        chunks: Vec<String>,
        gate: Option<Arc<Notify>>,
        drop: bool,
    },
    /// No answer at all, ever.
    Hang,
}

/// Answers requests it recognises (by their content) before the queue.
pub type Responder = Arc<dyn Fn(&Seen) -> Option<Reply> + Send + Sync>;

/// A scripted upstream.
#[derive(Clone)]
pub struct Scripted {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    responder: Arc<Mutex<Option<Responder>>>,
}

impl Scripted {
    pub async fn start() -> Scripted {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let scripted = Scripted {
            addr: listener.local_addr().unwrap(),
            seen: Arc::default(),
            replies: Arc::default(),
            responder: Arc::default(),
        };
        let state = scripted.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = state.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(state.answer(request).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        scripted
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn reply(&self, reply: Reply) {
        self.replies.lock().unwrap().push_back(reply);
    }

    /// Answers the requests `responder` recognises with its reply; the
    /// others from the queue.
    pub fn respond(&self, responder: impl Fn(&Seen) -> Option<Reply> + Send + Sync + 'static) {
        *self.responder.lock().unwrap() = Some(Arc::new(responder));
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    async fn answer(&self, request: Request<Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.unwrap().to_bytes().to_vec();
        let seen = Seen {
            method: parts.method.to_string(),
            path: parts
                .uri
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            headers: parts.headers,
            body,
        };
        self.seen.lock().unwrap().push(seen.clone());
        let responder = self.responder.lock().unwrap().clone();
        let reply = match responder.and_then(|responder| responder(&seen)) {
            Some(reply) => Some(reply),
            None => self.replies.lock().unwrap().pop_front(),
        };
        match reply.unwrap_or(Reply::Whole {
            status: 200,
            headers: vec![("content-type", "application/json")],
            body: r#"{"type":"message","content":[{"type":"text","text":"ok"}]}"#.into(),
        }) {
            Reply::Whole {
                status,
                headers,
                body,
            } => {
                let mut response = Response::new(
                    Full::new(Bytes::from(body))
                        .map_err(|never| match never {})
                        .boxed(),
                );
                *response.status_mut() = StatusCode::from_u16(status).unwrap();
                for (name, value) in headers {
                    response.headers_mut().append(name, value.parse().unwrap());
                }
                response
            }
            Reply::Hang => std::future::pending().await,
            Reply::Chunks { chunks, gate, drop } => {
                let (tx, rx) = mpsc::channel::<
                    Result<Frame<Bytes>, Box<dyn std::error::Error + Send + Sync>>,
                >(8);
                tokio::spawn(async move {
                    for (at, chunk) in chunks.into_iter().enumerate() {
                        if tx.send(Ok(Frame::data(Bytes::from(chunk)))).await.is_err() {
                            return;
                        }
                        if at == 0
                            && let Some(gate) = &gate
                        {
                            gate.notified().await;
                        }
                    }
                    if drop {
                        let _ = tx.send(Err("upstream dropped".into())).await;
                    }
                });
                let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|item| (item, rx))
                });
                let mut response = Response::new(StreamBody::new(stream).boxed());
                response
                    .headers_mut()
                    .insert("content-type", "text/event-stream".parse().unwrap());
                response
            }
        }
    }
}

/// A proxy on 127.0.0.1 in front of scripted upstreams.
pub struct Running {
    pub addr: SocketAddr,
    pub proxy: Arc<Proxy>,
    pub events: Arc<Mutex<Vec<Event>>>,
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Sends the Chat Completions history `messages` (see
    /// [`porting::chat_body`]) and reads the whole answer, as a client
    /// does before its next request.
    pub async fn chat(&self, messages: &[String]) {
        let response = reqwest::Client::new()
            .post(self.url("/v1/chat/completions"))
            .body(porting::chat_body(messages))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
}

/// Starts a proxy with `budget`, both APIs going to the given upstreams.
pub async fn proxy(
    budget: usize,
    anthropic: &Scripted,
    openai: &Scripted,
    store: Option<&std::path::Path>,
    max_body: Option<usize>,
) -> Running {
    proxy_to(budget, &anthropic.url(), &openai.url(), store, max_body).await
}

/// Starts a proxy with `budget` in front of the upstreams at these URLs.
pub async fn proxy_to(
    budget: usize,
    anthropic: &str,
    openai: &str,
    store: Option<&std::path::Path>,
    max_body: Option<usize>,
) -> Running {
    proxy_idle(
        budget,
        anthropic,
        openai,
        store,
        max_body,
        Duration::from_secs(600),
    )
    .await
}

/// Starts a proxy whose conversations leave memory after `idle`.
pub async fn proxy_idle(
    budget: usize,
    anthropic: &str,
    openai: &str,
    store: Option<&std::path::Path>,
    max_body: Option<usize>,
    idle: Duration,
) -> Running {
    proxy_strategy(
        StrategyName::Cwl,
        budget,
        anthropic,
        openai,
        store,
        max_body,
        idle,
    )
    .await
}

/// Starts a proxy managing conversations with `strategy`.
pub async fn proxy_strategy(
    strategy: StrategyName,
    budget: usize,
    anthropic: &str,
    openai: &str,
    store: Option<&std::path::Path>,
    max_body: Option<usize>,
    idle: Duration,
) -> Running {
    proxy_side(
        strategy, budget, anthropic, openai, store, max_body, idle, None, None,
    )
    .await
}

/// Starts a proxy managing conversations with `strategy` whose side calls
/// ask `planner_model` and wait at most `side_timeout`.
#[allow(clippy::too_many_arguments)]
pub async fn proxy_side(
    strategy: StrategyName,
    budget: usize,
    anthropic: &str,
    openai: &str,
    store: Option<&std::path::Path>,
    max_body: Option<usize>,
    idle: Duration,
    planner_model: Option<&str>,
    side_timeout: Option<Duration>,
) -> Running {
    let config = cwl::Config::with_budget(budget).residue_share(None);
    proxy_configured(
        strategy,
        config,
        anthropic,
        openai,
        store,
        max_body,
        idle,
        planner_model,
        side_timeout,
    )
    .await
}

/// Starts a proxy managing conversations with `strategy` and the engine
/// settings of `config`.
#[allow(clippy::too_many_arguments)]
pub async fn proxy_configured(
    strategy: StrategyName,
    config: cwl::Config,
    anthropic: &str,
    openai: &str,
    store: Option<&std::path::Path>,
    max_body: Option<usize>,
    idle: Duration,
    planner_model: Option<&str>,
    side_timeout: Option<Duration>,
) -> Running {
    let (options, events) = options(
        strategy,
        config,
        anthropic,
        openai,
        store,
        max_body,
        idle,
        planner_model,
        side_timeout,
    );
    start(options, events).await
}

/// A proxy's options as [`proxy_configured`] sets them, and where its
/// events go.
#[allow(clippy::too_many_arguments)]
pub fn options(
    strategy: StrategyName,
    config: cwl::Config,
    anthropic: &str,
    openai: &str,
    store: Option<&std::path::Path>,
    max_body: Option<usize>,
    idle: Duration,
    planner_model: Option<&str>,
    side_timeout: Option<Duration>,
) -> (Options, Arc<Mutex<Vec<Event>>>) {
    let budget = config.budget;
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = Arc::clone(&events);
    let options = Options {
        anthropic: Upstream::new(anthropic),
        openai: Upstream::new(openai),
        store: store.map(|dir| {
            Store::new(
                dir.to_owned(),
                cwl_session::Settings {
                    strategy,
                    ..cwl_session::Settings::of(&config)
                },
                budget,
            )
        }),
        config,
        strategy,
        strategy_options: serde_json::Value::Null,
        max_body: max_body.unwrap_or(DEFAULT_MAX_BODY),
        idle,
        max_conversations: cwl_proxy::server::DEFAULT_MAX_CONVERSATIONS,
        events: Some(Box::new(move |event: &Event| {
            sink.lock().unwrap().push(event.clone())
        })),
        planner_model: planner_model.map(str::to_string),
        side_timeout: side_timeout.unwrap_or(cwl_proxy::side::DEFAULT_SIDE_TIMEOUT),
        heads: None,
    };
    (options, events)
}

/// Serves `options` on 127.0.0.1, its events kept in `events`.
pub async fn start(options: Options, events: Arc<Mutex<Vec<Event>>>) -> Running {
    let proxy = Arc::new(Proxy::new(options, Arc::new(cwl::O200k::new())).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, Arc::clone(&proxy)));
    Running {
        addr,
        proxy,
        events,
    }
}

/// The JSON text of a string.
pub fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// A loopback URL nothing listens on.
pub async fn dead_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}
