//! Interrupts and crashes of `cwl run`, in a child process (this test
//! binary run again as [`cwl_run_process`]): SIGINT during a `bash` call
//! kills its processes (also one that called `setsid`), records the
//! interrupt and exits 130 with the line finished and a resume hint;
//! SIGTERM during a model call does the same; after kill -9 during a
//! `bash` call, `--resume ID` with no task continues the task and tells the
//! model the call may have run partly.

#![cfg(target_os = "linux")]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cwl::{Message, Record, Usage};
use cwl_agent::cli::{self, AgentArgs, RunArgs};
use cwl_provider::testing::{Reply, ScriptedServer};
use serde_json::{Value, json};
use support::*;

/// Set in the child process: where its settings are (one per line:
/// base URL, workspace, session dir, config file, resume id or empty,
/// task or empty).
const CHILD_ENV: &str = "CWL_TEST_RUN_CHILD";

/// Not a test on its own: `cwl run` as the tests here start it, exiting
/// with its status (130 comes from `cli::run_run` itself).
#[test]
#[ignore = "helper process for the interrupt tests"]
fn cwl_run_process() {
    let fields = support::child_fields(CHILD_ENV);
    let optional = |text: &str| (!text.is_empty()).then(|| text.to_string());
    let args = RunArgs {
        agent: AgentArgs {
            resume: optional(&fields[4]),
            ..support::child_agent(&fields)
        },
        tasks: optional(&fields[5]).into_iter().collect(),
        prompt: None,
    };
    match cli::run_run(args) {
        Ok(()) => std::process::exit(0),
        Err(error) => {
            eprintln!("cwl: error: {}", cli::error_line(&error));
            std::process::exit(i32::from(cli::exit_code(&error)))
        }
    }
}

/// A child `cwl run` against `server`, working in `work`.
struct Run {
    server_url: String,
    work: PathBuf,
    sessions: tempfile::TempDir,
}

impl Run {
    fn new(server: &ScriptedServer, work: &Path) -> Run {
        let sessions = tempfile::tempdir().unwrap();
        std::fs::write(sessions.path().join("config.toml"), "").unwrap();
        Run {
            server_url: format!("{}/v1", server.url()),
            work: work.to_owned(),
            sessions,
        }
    }

    /// Starts the child; `resume` and `task` may be empty.
    fn spawn(&self, resume: &str, task: &str) -> Child {
        let settings = self
            .sessions
            .path()
            .join(format!("child-{}.txt", fastrand::u32(..)));
        let fields = [
            self.server_url.as_str(),
            &self.work.display().to_string(),
            &self.sessions.path().display().to_string(),
            &self
                .sessions
                .path()
                .join("config.toml")
                .display()
                .to_string(),
            resume,
            task,
        ];
        std::fs::write(&settings, fields.join("\n") + "\n").unwrap();
        let test = support::child_test(module_path!(), "cwl_run_process");
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &test,
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &settings)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The one session file.
    fn session(&self) -> PathBuf {
        let listed = cwl_session::list(self.sessions.path()).unwrap();
        assert_eq!(listed.len(), 1);
        listed[0].path.clone()
    }
}

/// Waits up to 30 s for `child` to end.
fn finish(mut child: Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "the child did not end; stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Waits up to 30 s for `check`.
fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Kills the processes named by these pid files when the test ends, so a
/// failure leaves nothing running.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for file in &self.0 {
            if let Some(pid) = std::fs::read_to_string(file)
                .ok()
                .and_then(|t| t.trim().parse::<i32>().ok())
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

fn notes(path: &Path) -> Vec<String> {
    cwl_session::read(path)
        .unwrap()
        .records
        .into_iter()
        .filter_map(|(_, record)| match record {
            Record::Note { text, .. } => Some(text),
            _ => None,
        })
        .collect()
}

/// The tool messages' contents of an OpenAI request body.
fn tool_contents(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn bash_reply(say: &str, command: &str) -> Reply {
    Reply::openai(
        &assistant(vec![
            text(say),
            call("c1", "bash", json!({ "command": command })),
        ]),
        Usage::default(),
    )
}

#[test]
fn sigint_during_bash_kills_its_processes_records_it_and_exits_130() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let command = "sleep 300 & echo $! > grandchild.pid; \
                   setsid sh -c 'echo $$ > detached.pid; exec sleep 300' & \
                   until [ -s detached.pid ]; do sleep 0.01; done; \
                   touch started; sleep 300; echo late > late.txt";
    let server = runtime
        .block_on(ScriptedServer::start([bash_reply(
            "Running it now",
            command,
        )]))
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(vec![
        work.path().join("grandchild.pid"),
        work.path().join("detached.pid"),
    ]);
    let run = Run::new(&server, work.path());
    let child = run.spawn("", "run the slow command");
    wait_for("the command to start", || {
        work.path().join("started").exists()
    });
    signal(&child, rustix::process::Signal::INT);
    let output = finish(child);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);

    assert_eq!(output.status.code(), Some(130), "stderr:\n{stderr}");
    assert!(
        stdout.ends_with("Running it now\n"),
        "the model's line is finished: {stdout:?}"
    );
    let path = run.session();
    let id = path.file_stem().unwrap().to_string_lossy().into_owned();
    assert!(
        stderr.contains(&format!(
            "the session is saved: continue it with `cwl run --resume {id}`"
        )),
        "{stderr}"
    );
    let grandchild = read_pid(&work.path().join("grandchild.pid"));
    let detached = read_pid(&work.path().join("detached.pid"));
    assert!(
        support::gone(grandchild),
        "the background sleep {grandchild} was killed"
    );
    assert!(
        support::gone(detached),
        "the setsid sleep {detached} was killed"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!work.path().join("late.txt").exists());

    let notes = notes(&path);
    assert!(
        notes.iter().any(|n| n.starts_with(
            "interrupted by SIGINT (Ctrl-C) while the `bash` call was running; task 1 stopped"
        )),
        "{notes:?}"
    );
    let loaded = cwl_session::read(&path).unwrap();
    let started = loaded.records.iter().position(|(_, r)| {
        matches!(r, Record::ToolStarted { call_id, name, .. } if call_id == "c1" && name == "bash")
    });
    let answered = loaded.records.iter().position(|(_, r)| {
        matches!(r, Record::Message { message: Message::ToolResult(result), .. }
            if result.call_id == "c1" && result.is_error && result.content.starts_with(cwl_session::MAY_HAVE_RUN))
    });
    assert!(
        started.is_some() && answered.is_some() && started < answered,
        "tool_started comes before the result: {:?}",
        loaded.records
    );
    assert_eq!(
        cwl_session::unfinished_task(&loaded).as_deref(),
        Some("run the slow command")
    );
}

#[test]
fn sigterm_during_a_model_call_stops_it_finishes_the_line_and_exits_130() {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let partial = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Thinking about\"},\"finish_reason\":null}]}\n\n";
    let server = runtime
        .block_on(ScriptedServer::start([Reply::Stall(partial.into())]))
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let run = Run::new(&server, work.path());
    let mut child = run.spawn("", "think hard");
    let stdout = Arc::new(Mutex::new(String::new()));
    let reader = {
        let stdout = Arc::clone(&stdout);
        let mut pipe = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                stdout
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    wait_for("the streamed text", || {
        stdout.lock().unwrap().contains("Thinking about")
    });
    signal(&child, rustix::process::Signal::TERM);
    let output = finish(child);
    reader.join().unwrap();
    let stdout = stdout.lock().unwrap().clone();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "stderr:\n{stderr}");
    assert!(stdout.ends_with("Thinking about\n"), "{stdout:?}");
    assert!(stderr.contains("cwl run --resume"), "{stderr}");
    let path = run.session();
    let notes = notes(&path);
    assert!(
        notes.iter().any(|n| n.starts_with(
            "interrupted by SIGTERM while the model was answering (its reply is dropped)"
        )),
        "{notes:?}"
    );
    let loaded = cwl_session::read(&path).unwrap();
    assert!(
        !loaded.records.iter().any(|(_, r)| matches!(
            r,
            Record::Message {
                message: Message::Assistant { .. },
                ..
            }
        )),
        "nothing of the partial reply is kept"
    );
    assert_eq!(
        cwl_session::unfinished_task(&loaded).as_deref(),
        Some("think hard")
    );
}

#[test]
fn after_kill_9_during_bash_resume_with_no_task_continues_and_warns_of_a_partial_run() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let command = "echo $$ > shell.pid; echo once >> count.txt; touch started; sleep 300";
    let server = runtime
        .block_on(ScriptedServer::start([bash_reply("Counting", command)]))
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(vec![work.path().join("shell.pid")]);
    let run = Run::new(&server, work.path());
    let child = run.spawn("", "count once");
    wait_for("the command to start", || {
        work.path().join("started").exists()
    });
    signal(&child, rustix::process::Signal::KILL);
    let output = finish(child);
    assert_eq!(output.status.code(), None, "killed by a signal");
    // Nothing of ours ran after kill -9: the orphaned shell is the test's to kill.
    drop(_cleanup);

    let path = run.session();
    let id = path.file_stem().unwrap().to_string_lossy().into_owned();
    let next = runtime
        .block_on(ScriptedServer::start([Reply::openai(
            &Message::assistant_text("Checked: count.txt has one line."),
            Usage::default(),
        )]))
        .unwrap();
    let resumed = Run {
        server_url: format!("{}/v1", next.url()),
        work: work.path().to_owned(),
        sessions: run.sessions,
    };
    let output = finish(resumed.spawn(&id, ""));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");

    let requests = next.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].json();
    check_openai_request(&body);
    let tools = tool_contents(&body);
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert!(tools[0].starts_with(cwl_session::MAY_HAVE_RUN), "{tools:?}");
    assert_eq!(
        user_turns(&body),
        ["count once"],
        "the task goes on without a new user turn"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("count.txt")).unwrap(),
        "once\n",
        "the call is not run again"
    );
    let loaded = cwl_session::read(&path).unwrap();
    assert_eq!(cwl_session::unfinished_task(&loaded), None);
    assert!(
        notes(&path)
            .iter()
            .any(|n| n.starts_with("continuing the unfinished task: count once"))
    );

    // Nothing is left to continue: refused before anything is written.
    let before = std::fs::read(&path).unwrap();
    let output = finish(resumed.spawn(&id, ""));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "a usage error; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "no task given, and session {id} has no unfinished task to continue"
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
