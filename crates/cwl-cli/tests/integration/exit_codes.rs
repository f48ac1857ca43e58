//! Exit statuses of the real binary: 2 for usage errors, 1 for runtime
//! failures, and one line on stderr that names the fault once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A model server on 127.0.0.1 that answers every request with HTTP 401,
/// counting the requests it got.
struct Rejecting {
    url: String,
    requests: Arc<AtomicUsize>,
}

impl Rejecting {
    fn start() -> Rejecting {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                counter.fetch_add(1, Ordering::SeqCst);
                let reply = r#"{"error":{"message":"bad key"}}"#;
                let _ = write!(
                    stream,
                    "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            }
        });
        Rejecting { url, requests }
    }
}

/// Runs `cwl args` with `stdin`, sessions and config in `dir`, no API keys.
fn cwl(dir: &Path, args: &[&str], stdin: &str) -> Output {
    cwl_with(dir, args, stdin, &[])
}

/// [`cwl`] with these environment variables set as well.
fn cwl_with(dir: &Path, args: &[&str], stdin: &str, vars: &[(&str, &str)]) -> Output {
    let config = dir.join("config.toml");
    if !config.exists() {
        std::fs::write(&config, "").unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_cwl"))
        .args(args)
        .current_dir(dir)
        .env("CWL_SESSION_DIR", dir.join("sessions"))
        .env("CWL_CONFIG", &config)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("CWL_PROVIDER")
        .env_remove("CWL_MODEL")
        .envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cwl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[track_caller]
fn expect(output: &Output, code: i32, says: &str) {
    let text = stderr(output);
    assert_eq!(output.status.code(), Some(code), "{text}");
    assert!(text.contains(says), "expected {says:?} in:\n{text}");
}

#[test]
fn usage_errors_exit_with_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let offline = [
        "--provider",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ];
    let with = |more: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = vec!["run".into()];
        args.extend(offline.iter().map(|s| s.to_string()));
        args.extend(more.iter().map(|s| s.to_string()));
        args
    };
    let run = |more: &[&str]| {
        let args = with(more);
        cwl(d, &args.iter().map(String::as_str).collect::<Vec<_>>(), "")
    };
    expect(&run(&["--no-such-flag", "x"]), 2, "--no-such-flag");
    expect(&run(&["--budget", "lots", "x"]), 2, "lots");
    expect(&run(&[]), 2, "no task given");
    expect(&run(&["--task", " "]), 2, "task 1 is empty");
    expect(
        &run(&["--max-turns", "0", "x"]),
        2,
        "--max-turns must be at least 1",
    );
    expect(&run(&["--budget", "100", "x"]), 2, "too small");
    expect(&run(&["--resume", "nosuch", "x"]), 2, "no session `nosuch`");
    expect(
        &run(&["--cwd", "/nonexistent/cwl-dir", "x"]),
        2,
        "workspace root",
    );
    expect(
        &cwl(d, &["run", "--base-url", "notaurl", "x"], ""),
        2,
        "(set through --base-url)",
    );
    expect(
        &cwl(d, &["run", "--config", "/nonexistent/cwl.toml", "x"], ""),
        2,
        "config file /nonexistent/cwl.toml",
    );
    let bad = d.join("bad.toml");
    for (text, says) in [
        ("budget = \"lots\"", "config file: budget"),
        ("max_turns = 0", "config file: max_turns must be at least 1"),
        ("provider = \"gemini\"", "config file: provider"),
        ("low_water = \"2\"", "config file: low_water"),
        (
            "stream_idle_timeout = \"soon\"",
            "config file: stream_idle_timeout",
        ),
        ("modle = \"x\"", "modle"),
    ] {
        std::fs::write(&bad, text).unwrap();
        let config = bad.to_str().unwrap();
        let args = [
            "run",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--config",
            config,
            "x",
        ];
        expect(&cwl(d, &args, ""), 2, says);
    }
    expect(
        &cwl(d, &["sessions", "--config", "/nonexistent/cwl.toml"], ""),
        2,
        "config file",
    );
    expect(&cwl(d, &["chat", "--resume", "nosuch"], ""), 2, "nosuch");
}

#[test]
fn a_missing_key_names_both_keys_when_the_provider_was_guessed() {
    let dir = tempfile::tempdir().unwrap();
    let guessed = cwl(dir.path(), &["run", "x"], "");
    expect(&guessed, 2, "ANTHROPIC_API_KEY to use Anthropic");
    let anthropic = cwl(dir.path(), &["run", "--provider", "anthropic", "x"], "");
    expect(&anthropic, 2, "ANTHROPIC_API_KEY is not set");
    assert!(
        !stderr(&anthropic).contains("OPENAI"),
        "{}",
        stderr(&anthropic)
    );
}

#[test]
fn an_os_error_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["run", "--config", "/nonexistent/cwl.toml", "x"][..],
        &[
            "run",
            "--provider",
            "openai",
            "--cwd",
            "/nonexistent/cwl-dir",
            "x",
        ],
    ] {
        let text = stderr(&cwl(dir.path(), args, ""));
        assert_eq!(
            text.matches("No such file or directory").count(),
            1,
            "{text}"
        );
    }
}

#[test]
fn a_key_refused_when_none_was_sent_is_a_missing_key() {
    let server = Rejecting::start();
    let dir = tempfile::tempdir().unwrap();
    let output = cwl(dir.path(), &keyless_run(&server), "");
    expect(&output, 2, "authentication failed (HTTP 401)");
    expect(&output, 2, "no key was sent: set OPENAI_API_KEY");
    assert!(
        !stderr(&output).contains("--resume"),
        "nothing to resume: {}",
        stderr(&output)
    );
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
    let warning = format!(
        "no OPENAI_API_KEY is set: requests to {} carry no API key",
        server.url
    );
    let everything = printed(&output);
    assert_eq!(
        everything.matches(&warning).count(),
        1,
        "warned once: {everything}"
    );
    // The sandbox in force is one line at start: its mode, or why it is
    // not the one asked for.
    let sandbox: Vec<&str> = everything
        .lines()
        .filter(|line| line.contains("sandbox"))
        .collect();
    assert_eq!(sandbox.len(), 1, "{everything}");
    assert!(
        sandbox[0] == "· bash sandbox: workspace-write" || sandbox[0].contains("warning:"),
        "{everything}"
    );
    // The session never got a response: listed only with --all.
    let listed = cwl(dir.path(), &["sessions"], "");
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.starts_with("no sessions in "), "{text}");
    assert!(
        text.contains("1 session(s) that never got a model response not shown"),
        "{text}"
    );
    let json = cwl(dir.path(), &["sessions", "--json"], "");
    assert!(json.stdout.is_empty(), "{json:?}");
    let all = cwl(dir.path(), &["sessions", "--all", "--json"], "");
    assert_eq!(String::from_utf8_lossy(&all.stdout).lines().count(), 1);
}

#[test]
fn a_base_url_with_a_key_gets_no_warning_about_keys() {
    let server = Rejecting::start();
    let dir = tempfile::tempdir().unwrap();
    let key = [("OPENAI_API_KEY", "sk-test")];
    let output = cwl_with(dir.path(), &keyless_run(&server), "", &key);
    expect(&output, 1, "authentication failed (HTTP 401)");
    let everything = printed(&output);
    assert!(!everything.contains("carry no API key"), "{everything}");
    // The cause once, in the one error line; no figures and no resume hint
    // for a run that never got a response.
    let lines: Vec<&str> = everything.lines().collect();
    assert_eq!(lines.len(), 3, "sandbox, task, error: {everything}");
    assert!(
        lines[2].starts_with("cwl: error: task 1 of 1 failed"),
        "{everything}"
    );
    assert_eq!(everything.matches("bad key").count(), 1, "{everything}");
}

#[test]
fn a_refused_connection_is_one_retry_line_and_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let key = [("OPENAI_API_KEY", "sk-test")];
    let args = ["run", "--provider", "openai", "--base-url", &url, "x"];
    let output = cwl_with(dir.path(), &args, "", &key);
    expect(&output, 1, "gave up after 5 attempts");
    let everything = printed(&output);
    let lines: Vec<&str> = everything.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "sandbox, task, one retry, error: {everything}"
    );
    assert!(lines[2].starts_with("↻ attempt 1 failed"), "{everything}");
    assert!(
        lines[3].starts_with("cwl: error: task 1 of 1 failed"),
        "{everything}"
    );
    assert!(lines[3].contains("Connection refused"), "{everything}");
    assert!(
        !everything.contains("client error (Connect)"),
        "{everything}"
    );
}

/// `cwl run` of one task against `server`, as OpenAI.
fn keyless_run(server: &Rejecting) -> [&str; 6] {
    [
        "run",
        "--provider",
        "openai",
        "--base-url",
        &server.url,
        "x",
    ]
}

/// Everything a run printed, stdout then stderr.
fn printed(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(output)
    )
}

#[test]
fn chat_refuses_an_unknown_command_without_calling_the_model() {
    let server = Rejecting::start();
    let dir = tempfile::tempdir().unwrap();
    let chat = ["chat", "--provider", "openai", "--base-url", &server.url];
    let output = cwl(dir.path(), &chat, "/bogus do it\n/status\n/exit\n");
    expect(&output, 2, "unknown command /bogus");
    expect(&output, 2, "/status, /help, /exit");
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        0,
        "nothing reached the model"
    );
    let fine = cwl(dir.path(), &chat, "/help\n/status\n");
    assert_eq!(fine.status.code(), Some(0), "{}", stderr(&fine));
    assert_eq!(server.requests.load(Ordering::SeqCst), 0);
}

#[test]
fn a_piped_chat_whose_task_failed_exits_with_1() {
    let server = Rejecting::start();
    let dir = tempfile::tempdir().unwrap();
    let chat = ["chat", "--provider", "openai", "--base-url", &server.url];
    let output = cwl(dir.path(), &chat, "do it\n");
    expect(&output, 1, "authentication failed (HTTP 401)");
    expect(&output, 1, "1 task(s) failed");
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

#[test]
fn the_lab_reports_usage_errors_with_status_2_and_unreadable_logs_with_1() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("missing.jsonl");
    let log = log.to_str().unwrap();
    for (args, said) in [
        (
            vec!["replay", "--policy", "bogus", log],
            "unknown policy `bogus`",
        ),
        (
            vec!["sweep", "--policy", "bogus", log],
            "unknown policy `bogus`",
        ),
        (vec!["gen", "--tasks", "0"], "--tasks must be at least 1"),
    ] {
        let output = cwl(dir.path(), &args, "");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(said),
            "{args:?}"
        );
    }
    let output = cwl(dir.path(), &["replay", log], "");
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("1 of 1 files skipped"));
    assert!(
        output.stdout.is_empty(),
        "no table of zeros when nothing was replayed: {}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn a_file_that_is_no_session_and_a_file_as_session_directory_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("notes.jsonl");
    std::fs::write(&bogus, "hello\n").unwrap();
    let bogus = bogus.to_str().unwrap();
    let output = cwl(dir.path(), &["run", "--resume", bogus, "--task", "x"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("does not start with a session header")
    );
    let output = cwl(dir.path(), &["sessions", "--session-dir", bogus], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is a file, not a directory"));
    assert_eq!(
        std::fs::read_to_string(bogus).unwrap(),
        "hello\n",
        "left as it was"
    );
}

#[test]
fn session_flags_are_taken_before_or_after_the_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("elsewhere");
    std::fs::create_dir(&sessions).unwrap();
    let file = sessions.join("20260101-000000-gen.jsonl");
    let made = cwl(
        dir.path(),
        &[
            "gen",
            "--tasks",
            "1",
            "--tokens",
            "20k",
            "-o",
            file.to_str().unwrap(),
        ],
        "",
    );
    assert!(made.status.success(), "{made:?}");
    let dir_flag = sessions.to_str().unwrap();
    for args in [
        ["sessions", "--session-dir", dir_flag, "show", "20260101"],
        ["sessions", "show", "--session-dir", dir_flag, "20260101"],
        ["sessions", "show", "20260101", "--session-dir", dir_flag],
    ] {
        let output = cwl(dir.path(), &args, "");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        assert!(
            stdout.starts_with("session synthetic-0"),
            "{args:?}: {stdout}"
        );
    }
}

#[test]
fn bench_runs_the_built_in_suite_in_both_arms_and_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let args = ["bench", "--out", out.to_str().unwrap(), "--json"];
    let output = cwl(dir.path(), &args, "");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["budget"], 6000);
    let arms = report["arms"].as_array().unwrap();
    assert_eq!(arms.len(), 2);
    for arm in arms {
        assert_eq!(arm["tasks"], 30, "{arm}");
        assert_eq!(arm["passed"], 30, "{arm}");
        assert!(arm["peak_prompt_tokens"].as_u64().unwrap() <= 6000, "{arm}");
        assert_eq!(
            arm["prompt_curve"].as_array().unwrap().len() as u64,
            arm["requests"].as_u64().unwrap()
        );
    }
    assert_eq!(arms[0]["name"], "one-session");
    assert!(
        arms[0]["eviction_passes"].as_u64().unwrap() > 0,
        "{}",
        arms[0]
    );
    assert!(report["cost_ratio"].as_f64().is_some());
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(saved, report);
    let svg = std::fs::read_to_string(out.join("prompt.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.matches("<polyline").count() == 2);
    assert_eq!(
        std::fs::read_dir(out.join("sessions/fresh"))
            .unwrap()
            .count(),
        30,
        "a session per task"
    );
    assert_eq!(
        std::fs::read_dir(out.join("sessions/one-session"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn bench_refuses_what_it_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "[[tasks]]\nprompt = \"add a README\"\ncheck = \"test -f README.md\"\n",
    )
    .unwrap();
    let run = |args: &[&str]| cwl(dir.path(), args, "");
    expect(
        &run(&["bench", "--suite", suite.to_str().unwrap()]),
        2,
        "the scripted model only solves the built-in suite",
    );
    expect(
        &run(&["bench", "--tasks", "0"]),
        2,
        "--tasks must be 1 to 99",
    );
    expect(
        &run(&["bench", "--suite", "/nonexistent/suite.toml"]),
        2,
        "cannot read the suite file",
    );
    expect(&run(&["bench", "--model", "gpt-5"]), 2, "--provider");
}
