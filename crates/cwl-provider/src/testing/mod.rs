//! A scripted model server for tests (feature `testing`).
//!
//! [`ScriptedServer`] listens on 127.0.0.1 on a free port and answers each
//! HTTP request with the next scripted [`Reply`]: a streamed response, an
//! error status, a connection broken mid-stream, a stream that stalls, or
//! no answer at all. It
//! records every request so tests can check what the provider sent. Point
//! a provider's base URL at [`ScriptedServer::url`]
//! (`OpenAiConfig::new(server.url())`, `ResponsesConfig::new(server.url())`,
//! `AnthropicConfig::new(server.url())`); the path is not checked.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use cwl::{Message, Usage};
//! use cwl_provider::testing::{Reply, ScriptedServer};
//!
//! let server = ScriptedServer::start([
//!     Reply::status(429, r#"{"error":{"message":"slow down"}}"#).with_header("retry-after", "2"),
//!     Reply::openai(&Message::assistant_text("hello"), Usage::default()),
//! ])
//! .await?;
//! // ... run a provider against server.url(), then:
//! let bodies: Vec<serde_json::Value> = server.requests().iter().map(|r| r.json()).collect();
//! # Ok(()) }
//! ```

pub mod asking;
mod sse;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub use sse::{anthropic_sse, openai_sse, responses_sse};

/// How the server answers one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// HTTP 200 with this event-stream body, sent whole.
    Sse(String),
    /// Any status with these extra headers and body. `Content-Type` is
    /// `application/json` for a body starting with `{` unless a header sets it.
    Status {
        /// The HTTP status.
        status: u16,
        /// Extra headers (e.g. `retry-after`).
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// HTTP 200 starting an event stream with this partial body, then the
    /// socket closes mid-body: a connection lost during the stream.
    Drop(String),
    /// The socket closes before any answer: a connection lost at once.
    Close,
    /// HTTP 200 starting an event stream with this partial body (possibly
    /// empty), then silence with the connection held open until the
    /// client gives up: a stalled stream.
    Stall(String),
    /// The request is read and never answered, the connection held open
    /// until the client gives up: a server that hangs before its head.
    Silence,
}

impl Reply {
    /// A reply with `status` and `body`.
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// Adds a header to a [`Reply::Status`] (other replies are unchanged).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Reply::Status { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }

    /// A complete OpenAI Chat Completions stream producing `message` (an
    /// assistant message) with `usage`; see [`openai_sse`].
    pub fn openai(message: &cwl::Message, usage: cwl::Usage) -> Self {
        Reply::Sse(openai_sse(message, usage))
    }

    /// A complete OpenAI Responses stream producing `message` with
    /// `usage`; see [`responses_sse`].
    pub fn responses(message: &cwl::Message, usage: cwl::Usage) -> Self {
        Reply::Sse(responses_sse(message, usage))
    }

    /// A complete Anthropic Messages stream producing `message` with
    /// `usage`; see [`anthropic_sse`].
    pub fn anthropic(message: &cwl::Message, usage: cwl::Usage) -> Self {
        Reply::Sse(anthropic_sse(message, usage))
    }
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The method (`POST`).
    pub method: String,
    /// The path (`/v1/chat/completions`).
    pub path: String,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body as text.
    pub body: String,
}

impl RecordedRequest {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// Answers some requests out of script (see [`ScriptedServer::answer_side`]).
type Side = Arc<dyn Fn(&RecordedRequest) -> Option<Reply> + Send + Sync>;

#[derive(Default)]
struct Shared {
    replies: VecDeque<Reply>,
    requests: Vec<RecordedRequest>,
    side: Option<Side>,
}

/// A local HTTP server answering requests from a script.
pub struct ScriptedServer {
    url: String,
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl ScriptedServer {
    /// Starts a server on 127.0.0.1 with a free port that answers requests
    /// with `replies` in order. Once they run out it answers HTTP 400
    /// ("no scripted reply left"), which providers do not retry.
    pub async fn start(replies: impl IntoIterator<Item = Reply>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Mutex::new(Shared {
            replies: replies.into_iter().collect(),
            requests: Vec::new(),
            side: None,
        }));
        let state = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, Arc::clone(&state)));
            }
        });
        Ok(ScriptedServer { url, shared, task })
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Appends a reply to the script.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared).replies.push_back(reply);
    }

    /// Answers the requests `side` gives a reply for with that reply,
    /// leaving the script for the others: side calls (summaries, plans)
    /// recognised by their content.
    pub fn answer_side(
        &self,
        side: impl Fn(&RecordedRequest) -> Option<Reply> + Send + Sync + 'static,
    ) {
        lock(&self.shared).side = Some(Arc::new(side));
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared).requests.clone()
    }

    /// How many scripted replies are still unused.
    pub fn remaining(&self) -> usize {
        lock(&self.shared).replies.len()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Answers one connection: reads a request, records it, sends the next reply.
async fn serve(mut socket: TcpStream, shared: Arc<Mutex<Shared>>) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    let reply = {
        let mut shared = lock(&shared);
        let side = shared.side.as_ref().and_then(|side| side(&request));
        shared.requests.push(request);
        let number = shared.requests.len();
        side.or_else(|| shared.replies.pop_front()).unwrap_or_else(|| {
            Reply::status(
                400,
                format!(
                    r#"{{"error":{{"type":"scripted_server","message":"no scripted reply left for request {number}"}}}}"#
                ),
            )
        })
    };
    let _ = write_reply(&mut socket, reply).await;
}

async fn write_reply(socket: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Close => {}
        Reply::Silence => return hold(socket).await,
        Reply::Stall(partial) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            socket.write_all(head.as_bytes()).await?;
            if !partial.is_empty() {
                let chunk = format!("{:x}\r\n{partial}\r\n", partial.len());
                socket.write_all(chunk.as_bytes()).await?;
            }
            socket.flush().await?;
            return hold(socket).await;
        }
        Reply::Sse(body) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(body.as_bytes()).await?;
        }
        Reply::Drop(partial) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            socket.write_all(head.as_bytes()).await?;
            if !partial.is_empty() {
                let chunk = format!("{:x}\r\n{partial}\r\n", partial.len());
                socket.write_all(chunk.as_bytes()).await?;
            }
        }
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut head = format!("HTTP/1.1 {status} Scripted\r\n");
            let has_type = headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"));
            if !has_type {
                let kind = if body.trim_start().starts_with('{') {
                    "application/json"
                } else {
                    "text/plain"
                };
                head.push_str(&format!("content-type: {kind}\r\n"));
            }
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str(&format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            ));
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(body.as_bytes()).await?;
        }
    }
    socket.flush().await?;
    socket.shutdown().await
}

/// Sends nothing more and keeps the connection open until the client
/// closes it (or an hour passes).
async fn hold(socket: &mut TcpStream) -> std::io::Result<()> {
    let mut sink = [0u8; 1024];
    let wait = async {
        while socket.read(&mut sink).await? > 0 {}
        Ok(())
    };
    match tokio::time::timeout(std::time::Duration::from_secs(3600), wait).await {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}

/// Reads one HTTP/1.1 request with a `content-length` body.
async fn read_request(socket: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(head_len) = parsed.parse(&buf).ok()? else {
            continue;
        };
        let headers: Vec<(String, String)> = parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0);
        let method = parsed.method.unwrap_or("").to_string();
        let path = parsed.path.unwrap_or("").to_string();
        while buf.len() < head_len + length {
            let n = socket.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = String::from_utf8_lossy(&buf[head_len..head_len + length]).into_owned();
        return Some(RecordedRequest {
            method,
            path,
            headers,
            body,
        });
    }
}
