//! Two `cwl proxy` replicas sharing a session directory behind a real
//! nginx (Debian's package; `.ci/run` installs it), round robin on
//! loopback: a Claude-Code-shaped and a Codex-shaped conversation,
//! interleaved with one-off requests so that each keeps changing replica,
//! go upstream exactly as through one proxy: under budget, the latest
//! turn byte for byte, and no prefix break a single proxy would not make.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cwl::TokenCounter;
use serde_json::{Value, json};

use crate::proxy_process::{Proxy, post, read_request};

const BUDGET: usize = 6_000;
const STEPS: usize = 30;

/// What an upstream was sent: path and body, in order.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

const ANTHROPIC_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

const RESPONSES_STREAM: &str = concat!(
    "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n",
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"ok\"}]}]}}\n\n",
);

/// An upstream on loopback that streams a short answer to Messages and
/// Responses requests and answers others whole, keeping what it was
/// sent. It reports no usage: a replica that takes a conversation over
/// before the previous response's usage is stored would otherwise
/// calibrate from one record less (see docs/design.md).
fn upstream() -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let kept = Arc::clone(&seen);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || {
                let Ok((head, body)) = read_request(&mut stream) else {
                    return;
                };
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                kept.lock().unwrap().push((path.clone(), body));
                let (kind, answer) = if path.starts_with("/v1/messages") {
                    ("text/event-stream", ANTHROPIC_STREAM.to_string())
                } else if path.starts_with("/v1/responses") {
                    ("text/event-stream", RESPONSES_STREAM.to_string())
                } else {
                    (
                        "application/json",
                        r#"{"choices":[{"message":{"role":"assistant","content":"pong"}}]}"#
                            .to_string(),
                    )
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\nconnection: close\r\n\r\n{answer}"
                );
            });
        }
    });
    (addr, seen)
}

/// nginx in the foreground, round robin over the replicas, with the
/// location settings of `docs/deploy/nginx-location.conf`.
struct Nginx {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Nginx {
    fn start(replicas: &[SocketAddr]) -> Nginx {
        let nginx = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .map(PathBuf::from)
            .find(|path| path.is_file())
            .expect("nginx is not installed: `apt-get install nginx` (Debian; .ci/run does)");
        let dir = tempfile::tempdir().unwrap();
        let addr = {
            let free = TcpListener::bind("127.0.0.1:0").unwrap();
            free.local_addr().unwrap()
        };
        let servers: String = replicas
            .iter()
            .map(|replica| format!("    server {replica};\n"))
            .collect();
        let d = dir.path().display();
        let config = format!(
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
             {}\n  upstream cwl {{\n{servers}  }}\n  server {{\n    listen {addr};\n    location / {{\n      proxy_pass http://cwl;\n\
             {}\n    }}\n  }}\n}}\n",
            "  client_max_body_size 64m;",
            include_str!("../../../../docs/deploy/nginx-location.conf").trim_end(),
        );
        std::fs::write(dir.path().join("nginx.conf"), config).unwrap();
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen on {addr}: {}",
                std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Nginx {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Posts `body` to `path` at `addr` with `headers`; the status line,
/// having read the whole (streamed) answer.
fn status(addr: SocketAddr, path: &str, headers: &str, body: &Value) -> String {
    let response = post(addr, path, headers, &body.to_string());
    response.lines().next().unwrap_or_default().to_string()
}

/// The `lines`-line output of tool call `step`.
fn output(step: usize, lines: usize) -> String {
    (0..lines)
        .map(|j| {
            format!("let value_{step}_{j} = compute_{j}(input_{step}); // src/f{step}.rs:{j}\n")
        })
        .collect()
}

/// The two conversations as their clients send them, step by step.
#[derive(Default)]
struct Clients {
    claude: Vec<Value>,
    codex: Vec<Value>,
}

impl Clients {
    fn claude_body(&mut self, step: usize) -> Value {
        if step == 1 {
            self.claude.push(
                json!({"role": "user", "content": [{"type": "text", "text": "Survey the crate."}]}),
            );
        }
        self.claude.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Reading part {step}.")},
            {"type": "tool_use", "id": format!("toolu_{step}"), "name": "Read", "input": {"file_path": format!("src/f{step}.rs")}}
        ]}));
        self.claude.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{step}"), "content": output(step, 24)}
        ]}));
        json!({
            "model": "claude-sonnet-4-5", "max_tokens": 1000, "stream": true,
            "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "Read", "description": "Reads a file", "input_schema": {"type": "object"}}],
            "messages": self.claude,
        })
    }

    fn codex_body(&mut self, step: usize) -> Value {
        if step == 1 {
            self.codex.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Port the module."}]}));
        }
        if step == 8 {
            self.codex.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Ported."}]}));
            self.codex.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Now the tests."}]}));
        }
        self.codex.push(json!({"type": "function_call", "call_id": format!("call_{step}"), "name": "exec_command",
            "arguments": json!({"cmd": format!("cat src/f{step}.rs")}).to_string()}));
        self.codex.push(json!({"type": "function_call_output", "call_id": format!("call_{step}"), "output": output(step, 24)}));
        json!({
            "model": "gpt-5.1-codex-max", "instructions": "You are Codex.", "stream": true, "store": false,
            "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
            "input": self.codex,
        })
    }
}

/// Sends both conversations to `addr`, from step 12 (well over budget)
/// with a one-off request every third step, so that round robin moves
/// each conversation to the other replica; returns the two histories as
/// last sent, and the latest item of each request.
fn drive(addr: SocketAddr) -> [(Vec<Value>, Vec<Value>); 2] {
    let mut clients = Clients::default();
    let (mut claude_latest, mut codex_latest) = (Vec::new(), Vec::new());
    for step in 1..=STEPS {
        let body = clients.claude_body(step);
        claude_latest.extend(clients.claude.last().cloned());
        let claude = "x-api-key: sk-ant-test\r\nanthropic-version: 2023-06-01\r\n";
        assert!(status(addr, "/v1/messages?beta=true", claude, &body).contains(" 200 "));
        if step >= 12 && step % 3 == 0 {
            let ping = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": format!("ping {step}")}]});
            assert!(status(addr, "/v1/chat/completions", "", &ping).contains(" 200 "));
        }
        let body = clients.codex_body(step);
        codex_latest.extend(clients.codex.last().cloned());
        let codex = "authorization: Bearer sk-test\r\n";
        assert!(status(addr, "/v1/responses", codex, &body).contains(" 200 "));
    }
    [
        (clients.claude, claude_latest),
        (clients.codex, codex_latest),
    ]
}

/// The histories `seen` forwarded to `path`, in order.
fn forwarded(seen: &Seen, path: &str, key: &str) -> Vec<Vec<Value>> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p.starts_with(path))
        .map(|(_, body)| body[key].as_array().unwrap().clone())
        .collect()
}

/// Tokens of the texts, arguments and outputs in a wire value.
fn content_tokens(counter: &cwl::O200k, value: &Value) -> usize {
    match value {
        Value::Object(fields) => fields
            .iter()
            .map(|(key, value)| match (key.as_str(), value) {
                ("content" | "text" | "arguments" | "output", Value::String(text)) => {
                    counter.count(text)
                }
                (_, Value::String(_)) => 0,
                (_, other) => content_tokens(counter, other),
            })
            .sum(),
        Value::Array(items) => items.iter().map(|v| content_tokens(counter, v)).sum(),
        _ => 0,
    }
}

/// `cwl proxy` flags for `sessions`, shared with other replicas or not.
fn flags(sessions: &Path, shared: bool) -> String {
    format!(
        "--budget {BUDGET} --json --session-dir '{}'{}",
        sessions.display(),
        if shared { " --shared-sessions" } else { "" }
    )
}

#[test]
fn two_replicas_behind_nginx_serve_claude_and_codex_as_one_proxy_would() {
    let (through_nginx, seen_nginx) = upstream();
    let (direct, seen_direct) = upstream();
    let shared = tempfile::tempdir().unwrap();
    let alone = tempfile::tempdir().unwrap();
    let replicas = [
        Proxy::start_to(
            "true",
            &flags(shared.path(), true),
            &format!("http://{through_nginx}"),
        ),
        Proxy::start_to(
            "true",
            &flags(shared.path(), true),
            &format!("http://{through_nginx}"),
        ),
    ];
    let nginx = Nginx::start(&[replicas[0].addr, replicas[1].addr]);
    let single = Proxy::start_to(
        "true",
        &flags(alone.path(), false),
        &format!("http://{direct}"),
    );

    let [claude, codex] = drive(nginx.addr);
    drive(single.addr);
    drop(nginx);
    let mut routes = Vec::new();
    for replica in replicas {
        let (stderr, stdout) = replica.stop_both();
        assert!(!stderr.iter().any(|l| l.contains("warning")), "{stderr:?}");
        for line in stdout {
            let event: Value = serde_json::from_str(&line).unwrap();
            routes.push((
                event["api"].clone(),
                event["route"].as_str().unwrap().to_string(),
            ));
        }
    }
    single.stop_both();

    let counter = cwl::O200k::new();
    for (path, key, (sent, latest)) in [
        ("/v1/messages", "messages", &claude),
        ("/v1/responses", "input", &codex),
    ] {
        let (two, one) = (
            forwarded(&seen_nginx, path, key),
            forwarded(&seen_direct, path, key),
        );
        assert_eq!(two.len(), STEPS, "{path}");
        let full = content_tokens(&counter, &Value::Array(sent.clone()));
        assert!(full > 2 * BUDGET, "{path}: eviction was needed ({full})");
        for (at, (two, one)) in two.iter().zip(&one).enumerate() {
            let size = content_tokens(&counter, &Value::Array(two.clone()));
            assert!(size <= BUDGET, "{path} request {at}: {size} tokens");
            assert!(
                two == one,
                "{path} request {at} differs from the one-proxy run ({} and {} items)",
                two.len(),
                one.len()
            );
            assert_eq!(
                two.last(),
                Some(&latest[at]),
                "{path} request {at}: the latest turn"
            );
        }
    }
    let switched = |api: &str| {
        routes
            .iter()
            .filter(|(a, route)| a == api && route == "shared")
            .count()
    };
    assert!(switched("anthropic") >= 3, "{routes:?}");
    assert!(switched("openai-responses") >= 3, "{routes:?}");
}
