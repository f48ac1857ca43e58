//! `cwl proxy` as a process: it keeps serving when idle sockets exhaust
//! its file descriptors, and cleans the `.pid` files a crash left.

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
struct Proxy {
    child: Child,
    addr: SocketAddr,
    seen: Vec<String>,
    stderr: mpsc::Receiver<String>,
}

impl Proxy {
    /// Starts `cwl proxy` through `sh` after `limit` (a shell command such
    /// as `ulimit -n 48`), with `flags`, toward an upstream nothing listens
    /// on; waits for its "listening" line.
    fn start(limit: &str, flags: &str) -> Proxy {
        Proxy::start_to(limit, flags, &format!("http://{}", closed_port()))
    }

    /// [`Proxy::start`] toward `upstream`.
    fn start_to(limit: &str, flags: &str, upstream: &str) -> Proxy {
        let cwl = env!("CARGO_BIN_EXE_cwl");
        let script = format!(
            "{limit} && exec '{cwl}' proxy --listen 127.0.0.1:0 {flags} \
             --openai-upstream {upstream} --anthropic-upstream {upstream}"
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh runs");
        let (lines, stderr) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
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
        }
    }

    /// Stops the proxy; every line it wrote to stderr.
    fn stop(mut self) -> Vec<String> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.seen.extend(self.stderr.try_iter());
        self.seen
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
