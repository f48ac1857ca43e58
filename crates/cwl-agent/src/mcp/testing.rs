//! A small MCP server for tests (feature `testing`), written against the
//! protocol itself: JSON-RPC over stdio ([`serve_stdio`], the
//! `cwl-mcp-test-server` binary) or streamable HTTP on 127.0.0.1
//! ([`HttpServer`]).
//!
//! Its tools, each listed only when named in the selection given:
//! - `echo` (read-only): answers `echo: TEXT`;
//! - `env` (read-only): the value of the variable `name`, or `(unset)`;
//! - `write_note` (no annotations, so mutating): writes `text` to the file
//!   `path` and answers `wrote PATH`;
//! - `fail` (read-only): an error result `it failed: REASON`;
//! - `picture` (read-only): a text block and a small PNG image block;
//! - `pid` (read-only): the server's process id;
//! - `whoami` (read-only): the `Authorization` header of the HTTP request
//!   (`(none)`; always that over stdio).

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// Every tool the server knows, in the order it lists them.
pub const ALL_TOOLS: [&str; 7] = [
    "echo",
    "env",
    "write_note",
    "fail",
    "picture",
    "pid",
    "whoami",
];

/// The definition of tool `name`.
fn definition(name: &str) -> Value {
    let read_only = json!({"readOnlyHint": true});
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
    let string = json!({"type": "string"});
    match name {
        "echo" => json!({"name": "echo", "description": "Echoes the text.",
            "inputSchema": object(json!({"text": string}), &["text"]), "annotations": read_only}),
        "env" => json!({"name": "env", "description": "Shows one environment variable.",
            "inputSchema": object(json!({"name": string}), &["name"]), "annotations": read_only}),
        "write_note" => json!({"name": "write_note", "description": "Writes a note to a file.",
            "inputSchema": object(json!({"path": string, "text": string}), &["path", "text"])}),
        "fail" => json!({"name": "fail", "description": "Always fails.",
            "inputSchema": object(json!({"reason": string}), &[]), "annotations": read_only}),
        "whoami" => json!({"name": "whoami", "description": "Shows the caller's credentials.",
            "inputSchema": object(json!({}), &[]), "annotations": read_only}),
        "pid" => json!({"name": "pid", "description": "The server's process id.",
            "inputSchema": object(json!({}), &[]), "annotations": read_only}),
        _ => json!({"name": "picture", "description": "Returns a picture.",
            "inputSchema": object(json!({}), &[]), "annotations": read_only}),
    }
}

/// The result of calling `name` with `arguments`.
fn call(name: &str, arguments: &Value, authorization: Option<&str>) -> Value {
    let text = |key: &str| arguments[key].as_str().unwrap_or_default().to_string();
    let reply = |text: String| json!({"content": [{"type": "text", "text": text}]});
    match name {
        "echo" => reply(format!("echo: {}", text("text"))),
        "env" => reply(std::env::var(text("name")).unwrap_or_else(|_| "(unset)".into())),
        "write_note" => match std::fs::write(text("path"), text("text")) {
            Ok(()) => reply(format!("wrote {}", text("path"))),
            Err(e) => {
                json!({"content": [{"type": "text", "text": e.to_string()}], "isError": true})
            }
        },
        "fail" => {
            json!({"content": [{"type": "text", "text": format!("it failed: {}", text("reason"))}], "isError": true})
        }
        "pid" => reply(std::process::id().to_string()),
        "whoami" => reply(authorization.unwrap_or("(none)").to_string()),
        _ => json!({"content": [
            {"type": "text", "text": "a red dot"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="}
        ]}),
    }
}

/// The server's answer to one JSON-RPC message (`None` for a
/// notification), offering the tools `tools`, sent with the HTTP header
/// `authorization` if any.
pub fn answer(message: &Value, tools: &[String], authorization: Option<&str>) -> Option<Value> {
    let id = message.get("id")?.clone();
    let method = message["method"].as_str().unwrap_or_default();
    let params = &message["params"];
    let result = match method {
        "initialize" => json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "cwl-test", "version": "1.0.0"}
        }),
        "ping" => json!({}),
        "tools/list" => json!({"tools": tools.iter().map(|t| definition(t)).collect::<Vec<_>>()}),
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or_default();
            if !tools.iter().any(|t| t == name) {
                return Some(json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32602, "message": format!("unknown tool {name}")}}));
            }
            call(name, &params["arguments"], authorization)
        }
        _ => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("no method {method}")}}));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Reads the tool selection from arguments: `--tools a,b` (default: all).
pub fn tools_from_args(args: &[String]) -> Vec<String> {
    match args.iter().position(|a| a == "--tools") {
        Some(i) => args
            .get(i + 1)
            .map(|list| {
                list.split(',')
                    .filter(|t| !t.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        None => ALL_TOOLS.iter().map(|t| t.to_string()).collect(),
    }
}

/// Serves MCP on stdin and stdout, one JSON message a line, until stdin
/// closes.
pub fn serve_stdio(tools: &[String]) -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(e) => {
                eprintln!("cwl-mcp-test-server: not JSON ({e}): {line}");
                continue;
            }
        };
        if let Some(reply) = answer(&message, tools, None) {
            writeln!(stdout, "{reply}")?;
            stdout.flush()?;
        }
    }
    Ok(())
}

/// A streamable-HTTP MCP server on 127.0.0.1 (plain JSON responses, no
/// event streams), serving until dropped.
pub struct HttpServer {
    url: String,
    methods: Arc<Mutex<Vec<String>>>,
    listener: TcpListener,
}

impl HttpServer {
    /// Listens on a free port of 127.0.0.1, offering `tools`.
    pub fn start(tools: Vec<String>) -> std::io::Result<HttpServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let methods = Arc::new(Mutex::new(Vec::new()));
        let accepting = listener.try_clone()?;
        let seen = Arc::clone(&methods);
        std::thread::spawn(move || {
            for stream in accepting.incoming() {
                let Ok(stream) = stream else { break };
                let (tools, seen) = (tools.clone(), Arc::clone(&seen));
                std::thread::spawn(move || {
                    let _ = serve_connection(stream, &tools, &seen);
                });
            }
        });
        Ok(HttpServer {
            url,
            methods,
            listener,
        })
    }

    /// The endpoint (`http://127.0.0.1:PORT/mcp`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The JSON-RPC methods received so far, in order.
    pub fn methods(&self) -> Vec<String> {
        self.methods
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        // Wakes the accept loop so it sees the listener is done.
        let _ = self.listener.set_nonblocking(true);
        let _ = TcpStream::connect(self.listener.local_addr().expect("bound"));
    }
}

/// Answers the requests of one connection until it closes.
fn serve_connection(
    mut stream: TcpStream,
    tools: &[String],
    methods: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    loop {
        let (method, body, authorization) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut request = httparse::Request::new(&mut headers);
            if let Ok(httparse::Status::Complete(end)) = request.parse(&buffer) {
                let length = request
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                    .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
                    .unwrap_or(0usize);
                if buffer.len() >= end + length {
                    let method = request.method.unwrap_or_default().to_string();
                    let authorization = request
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("authorization"))
                        .map(|h| String::from_utf8_lossy(h.value).into_owned());
                    let body = buffer[end..end + length].to_vec();
                    buffer.drain(..end + length);
                    break (method, body, authorization);
                }
            }
            let mut chunk = [0u8; 8192];
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buffer.extend_from_slice(&chunk[..n]);
        };
        let (status, reply) = match method.as_str() {
            "POST" => match serde_json::from_slice::<Value>(&body) {
                Ok(message) => {
                    if let Some(name) = message["method"].as_str() {
                        methods
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(name.to_string());
                    }
                    match answer(&message, tools, authorization.as_deref()) {
                        Some(reply) => ("200 OK", Some(reply.to_string())),
                        None => ("202 Accepted", None),
                    }
                }
                Err(_) => ("400 Bad Request", None),
            },
            "DELETE" => ("200 OK", None),
            _ => ("405 Method Not Allowed", None),
        };
        let head = match &reply {
            Some(body) => format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            ),
            None => format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n"),
        };
        stream.write_all(head.as_bytes())?;
        if let Some(body) = reply {
            stream.write_all(body.as_bytes())?;
        }
        stream.flush()?;
    }
}
