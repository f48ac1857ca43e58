//! `cwl proxy` as a process: it keeps serving when idle sockets exhaust
//! its file descriptors, cleans the `.pid` files a crash left, shows no
//! credential an upstream URL or error body carries, answers a stalled
//! upstream in time and sends again what an upstream dropped unanswered.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A loopback address nothing listens on.
fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// The status line of a small Chat Completions request to `addr`.
fn status_of(addr: SocketAddr) -> std::io::Result<String> {
    Ok(response_of(addr)?
        .lines()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// The whole response to a small Chat Completions request to `addr`.
fn response_of(addr: SocketAddr) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#;
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

/// A running `cwl proxy`, its address and the stderr lines seen so far.
pub(crate) struct Proxy {
    child: Child,
    pub(crate) addr: SocketAddr,
    seen: Vec<String>,
    stderr: mpsc::Receiver<String>,
    stdout: mpsc::Receiver<String>,
}

/// Sends each line `pipe` gives to a channel, from a thread of its own.
fn lines_of(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (lines, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    receiver
}

impl Proxy {
    /// Starts `cwl proxy` through `sh` after `limit` (a shell command such
    /// as `ulimit -n 48`), with `flags`, toward an upstream nothing listens
    /// on; waits for its "listening" line.
    fn start(limit: &str, flags: &str) -> Proxy {
        Proxy::start_to(limit, flags, &format!("http://{}", closed_port()))
    }

    /// [`Proxy::start`] toward `upstream`.
    pub(crate) fn start_to(limit: &str, flags: &str, upstream: &str) -> Proxy {
        let cwl = env!("CARGO_BIN_EXE_cwl");
        let script = format!(
            "{limit} && exec '{cwl}' proxy --listen 127.0.0.1:0 {flags} \
             --openai-upstream {upstream} --anthropic-upstream {upstream}"
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh runs");
        let stderr = lines_of(child.stderr.take().unwrap());
        let stdout = lines_of(child.stdout.take().unwrap());
        let mut seen = Vec::new();
        let addr = loop {
            let line = stderr
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("the proxy starts: {seen:?}"));
            seen.push(line.clone());
            if let Some(rest) = line.split("listening on http://").nth(1) {
                break rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        };
        Proxy {
            child,
            addr,
            seen,
            stderr,
            stdout,
        }
    }

    /// Stops the proxy; every line it wrote to stderr.
    fn stop(self) -> Vec<String> {
        self.stop_both().0
    }

    /// Stops the proxy; every line it wrote to stderr, then to stdout.
    pub(crate) fn stop_both(mut self) -> (Vec<String>, Vec<String>) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.seen.extend(self.stderr.try_iter());
        (self.seen, self.stdout.try_iter().collect())
    }
}

#[test]
fn the_proxy_keeps_serving_when_idle_sockets_exhaust_its_file_descriptors() {
    let mut proxy = Proxy::start("ulimit -n 48", "--no-store");
    let addr = proxy.addr;
    assert!(status_of(addr).unwrap().contains(" 502 "), "served before");

    let idle: Vec<TcpStream> = (0..80)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        proxy.child.try_wait().unwrap().is_none(),
        "the proxy exited with {} idle sockets: {:?}",
        idle.len(),
        proxy.seen
    );
    drop(idle);

    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        match status_of(addr) {
            Ok(status) if !status.is_empty() => break status,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            other => panic!("no answer after the idle sockets closed: {other:?}"),
        }
    };
    assert!(status.contains(" 502 "), "{status}");
    assert!(
        proxy.child.try_wait().unwrap().is_none(),
        "the proxy still runs"
    );
    let seen = proxy.stop();
    let warned = |text: &str| seen.iter().filter(|l| l.contains(text)).count();
    let (failed, recovered) = (
        warned("cannot accept a connection"),
        warned("accepting connections again"),
    );
    assert!(failed >= 1, "the limit was reached: {seen:?}");
    assert_eq!(failed, recovered, "one warning a burst: {seen:?}");
}

#[test]
fn stale_pid_files_are_removed_at_start_and_sessions_kept() {
    let dir = tempfile::tempdir().unwrap();
    // What a proxy killed with -9 leaves: a session and its pid file.
    std::fs::write(dir.path().join("20250101-000000-dead.jsonl"), "{}\n").unwrap();
    std::fs::write(dir.path().join("20250101-000000-dead.pid"), "4194304\n").unwrap();
    let flags = format!("--session-dir '{}'", dir.path().display());
    let proxy = Proxy::start("true", &flags);
    let seen = proxy.stop();
    assert!(
        seen.iter()
            .any(|l| l.contains("removed 1 stale .pid file(s)")),
        "{seen:?}"
    );
    assert!(!dir.path().join("20250101-000000-dead.pid").exists());
    assert!(dir.path().join("20250101-000000-dead.jsonl").is_file());
}

#[test]
fn credentials_in_the_upstream_url_are_never_shown() {
    let upstream = format!(
        "http://user:secretpw123@{}/?token=tok-0123456789",
        closed_port()
    );
    let proxy = Proxy::start_to("true", "--no-store", &upstream);
    let response = response_of(proxy.addr).unwrap();
    assert!(response.starts_with("HTTP/1.1 502"), "{response}");
    let seen = proxy.stop();
    let everything = format!("{response}\n{}", seen.join("\n"));
    assert!(everything.contains("unreachable"), "{everything}");
    for secret in ["secretpw123", "tok-0123456789", "user:"] {
        assert!(!everything.contains(secret), "{secret} in {everything}");
    }
}

#[test]
fn a_stalled_upstream_gets_the_client_a_504_in_time() {
    // Accepts connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("http://{}", silent.local_addr().unwrap());
    std::thread::spawn(move || {
        let held: Vec<TcpStream> = silent.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let proxy = Proxy::start_to("true", "--no-store --first-byte-timeout 1", &upstream);
    let started = Instant::now();
    let response = response_of(proxy.addr).unwrap();
    let waited = started.elapsed();
    let seen = proxy.stop();
    assert!(response.starts_with("HTTP/1.1 504"), "{response}");
    assert!(response.contains("sent no answer within 1 s"), "{response}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert!(
        seen.iter().any(|l| l.contains("sent no answer within 1 s")),
        "{seen:?}"
    );
}

#[test]
fn a_connection_the_upstream_drops_unanswered_is_tried_again() {
    // Drops the first two connections before answering, the first with a
    // reset (its request unread) and the second once it has read it, as an
    // upstream that restarted or closed an idle pooled connection does;
    // and every connection whose request says `DROP-ALWAYS`.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&attempts);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n == 0 {
                let mut first = [0u8; 8];
                let _ = stream.read(&mut first);
                continue;
            }
            let Ok((_, body)) = read_request(&mut stream) else {
                continue;
            };
            if n == 1 || body.contains("DROP-ALWAYS") {
                continue;
            }
            let answer = r#"{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    let proxy = Proxy::start_to("true", "--no-store", &upstream);
    let response = response_of(proxy.addr).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#""content":"ok""#), "{response}");
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 3);

    let body = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"DROP-ALWAYS"}]}"#;
    let response = post(proxy.addr, "/v1/chat/completions", "", body);
    let seen = proxy.stop();
    assert!(response.starts_with("HTTP/1.1 502"), "{response}");
    assert_eq!(
        attempts.load(std::sync::atomic::Ordering::SeqCst),
        6,
        "sent three times, then given up: {seen:?}"
    );
}

/// The request line, headers and body of one HTTP/1.1 request.
pub(crate) fn read_request(stream: &mut TcpStream) -> std::io::Result<(String, String)> {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((head, String::from_utf8_lossy(&body).into_owned()))
}

/// An upstream on loopback that answers Chat Completions requests
/// offering tools, and answers side calls (no tools) and requests saying
/// `FAIL-ME` with a 401 whose body echoes the key, as providers' do.
fn echoing_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let Ok((head, body)) = read_request(&mut stream) else {
                    return;
                };
                let key = head
                    .lines()
                    .find_map(|l| l.strip_prefix("authorization: Bearer "))
                    .unwrap_or("none")
                    .trim()
                    .to_string();
                let (status, answer) = if body.contains("\"tools\"") && !body.contains("FAIL-ME") {
                    ("200 OK", r#"{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}"#.to_string())
                } else {
                    (
                        "401 Unauthorized",
                        format!(
                            r#"{{"error":{{"message":"Incorrect API key provided: {key}. You can find your API key at https://example.com.","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
                        ),
                    )
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            });
        }
    });
    addr
}

/// Posts `body` to `path` at `addr` with the header lines `headers`
/// (each ending in CRLF); the whole response, streamed or not.
pub(crate) fn post(addr: SocketAddr, path: &str, headers: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\n{headers}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Every file below `dir`, read as text.
fn files_below(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map_while(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_below(&path));
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            out.push((path, text));
        }
    }
    out
}

#[test]
fn a_key_an_upstream_echoes_appears_nowhere_under_cwm() {
    const KEY: &str = "sk-proj-ECHOED0123456789abcdef";
    let upstream = echoing_upstream();
    let sessions = tempfile::tempdir().unwrap();
    let flags = format!(
        "--strategy cwm --budget 6000 --json --session-dir '{}'",
        sessions.path().display()
    );
    let proxy = Proxy::start_to("true", &flags, &format!("http://{upstream}"));
    let tools =
        r#"[{"type":"function","function":{"name":"read","parameters":{"type":"object"}}}]"#;
    let mut messages = vec![
        r#"{"role":"system","content":"You are pi."}"#.to_string(),
        r#"{"role":"user","content":"Task: port the module"}"#.to_string(),
    ];
    let mut responses = Vec::new();
    for step in 1..=12 {
        messages.push(format!(
            r#"{{"role":"assistant","content":"step {step}","tool_calls":[{{"id":"call_{step}","type":"function","function":{{"name":"read","arguments":"{{}}"}}}}]}}"#
        ));
        let output: String = (0..60)
            .map(|j| {
                format!("value_{step}_{j} = compute_{j}(input_{step}) # src/mod_{step}.py:{j}\\n")
            })
            .collect();
        messages.push(format!(
            r#"{{"role":"tool","tool_call_id":"call_{step}","content":"{output}"}}"#
        ));
        let last = if step == 12 { "FAIL-ME" } else { "go on" };
        let body = format!(
            r#"{{"model":"gpt-4o","tools":{tools},"messages":[{},{{"role":"user","content":"{last}"}}]}}"#,
            messages.join(",")
        );
        let auth = format!("authorization: Bearer {KEY}\r\n");
        responses.push(post(proxy.addr, "/v1/chat/completions", &auth, &body));
    }
    let (stderr, stdout) = proxy.stop_both();
    assert!(responses[0].starts_with("HTTP/1.1 200"), "{}", responses[0]);
    let refused = responses.last().unwrap();
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(
        refused.contains("Incorrect API key provided: [redacted authorization header]"),
        "{refused}"
    );
    let stored = files_below(sessions.path());
    let side_calls = stored
        .iter()
        .filter(|(_, text)| text.contains("\"side_call\""))
        .count();
    assert!(side_calls >= 1, "cwm asked for summaries: {stored:?}");
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("401") && l.contains("[redacted authorization header]")),
        "the side call's failure is told, redacted: {stderr:?}"
    );
    let everything = [
        ("stderr".to_string(), stderr.join("\n")),
        ("stdout".to_string(), stdout.join("\n")),
        ("client".to_string(), responses.join("\n")),
    ]
    .into_iter()
    .chain(
        stored
            .into_iter()
            .map(|(path, text)| (path.display().to_string(), text)),
    );
    for (place, text) in everything {
        assert!(!text.contains(KEY), "the key in {place}: {text}");
        assert!(!text.contains("ECHOED0123"), "part of the key in {place}");
    }
}
