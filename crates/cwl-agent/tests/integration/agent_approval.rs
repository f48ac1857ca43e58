//! Approvals (`--approval`): in-process through a scripted [`Approver`],
//! and end to end in a child `cwl run` / `cwl chat` (this test binary run
//! again as [`cwl_process`]) answering `approval_request` events with JSON
//! lines on stdin, or terminal answers (y/n/a) in text mode.

use crate::support;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cwl::{Message, Record, Usage};
use cwl_agent::agent::{ApprovalMode, ApprovalRequest, Approver, Decision, Event, InvalidAnswer};
use cwl_agent::cli::{self, AgentArgs, ChatArgs, RunArgs};
use cwl_provider::testing::{Reply, ScriptedServer};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use support::*;

/// Set in the child process: the file holding its settings, one per line:
/// command (`run` or `chat`), base URL, workspace, session dir, config
/// file, `--approval` or empty, `json` or empty, task or empty.
const CHILD_ENV: &str = "CWL_TEST_APPROVAL_CHILD";

/// Not a test on its own: `cwl run` or `cwl chat` as the tests here start
/// it, exiting with its status.
#[test]
#[ignore = "helper process for the approval tests"]
fn cwl_process() {
    let fields = support::child_fields(CHILD_ENV);
    let optional = |text: &str| (!text.is_empty()).then(|| text.to_string());
    let agent = AgentArgs {
        approval: optional(&fields[5]).map(|mode| mode.parse().unwrap()),
        json: fields[6] == "json",
        ..support::child_agent(&fields[1..])
    };
    let result = match fields[0].as_str() {
        "run" => cli::run_run(RunArgs {
            agent,
            tasks: optional(&fields[7]).into_iter().collect(),
            prompt: None,
        }),
        _ => cli::run_chat(ChatArgs { agent, plain: true }),
    };
    match result {
        Ok(()) => std::process::exit(0),
        Err(error) => {
            eprintln!("cwl: error: {}", cli::error_line(&error));
            std::process::exit(i32::from(cli::exit_code(&error)))
        }
    }
}

/// A bearer token in the child's environment, for MCP servers over HTTP.
const MCP_TOKEN_VAR: &str = "CWL_TEST_MCP_AUTH";
const MCP_TOKEN: &str = "tok-secret-4242";

/// A child `cwl` against a scripted server, working in a fresh workspace.
struct Cwl {
    runtime: tokio::runtime::Runtime,
    server: ScriptedServer,
    work: tempfile::TempDir,
    sessions: tempfile::TempDir,
}

impl Cwl {
    fn new(replies: Vec<Reply>, config: &str) -> Cwl {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = runtime.block_on(ScriptedServer::start(replies)).unwrap();
        let sessions = tempfile::tempdir().unwrap();
        std::fs::write(sessions.path().join("config.toml"), config).unwrap();
        Cwl {
            runtime,
            server,
            work: workspace(),
            sessions,
        }
    }

    /// Starts `cwl command` with stdin, stdout and stderr piped.
    fn spawn(&self, command: &str, approval: &str, json: bool, task: &str) -> Child {
        self.command(command, approval, json, task).spawn().unwrap()
    }

    /// The command [`Cwl::spawn`] runs.
    fn command(&self, command: &str, approval: &str, json: bool, task: &str) -> Command {
        let settings = self.sessions.path().join("child.txt");
        let fields = [
            command.to_string(),
            format!("{}/v1", self.server.url()),
            self.work.path().display().to_string(),
            self.sessions.path().display().to_string(),
            self.sessions
                .path()
                .join("config.toml")
                .display()
                .to_string(),
            approval.to_string(),
            if json { "json" } else { "" }.to_string(),
            task.to_string(),
        ];
        std::fs::write(&settings, fields.join("\n") + "\n").unwrap();
        let test = support::child_test(module_path!(), "cwl_process");
        let mut child = Command::new(std::env::current_exe().unwrap());
        child
            .args([
                "--exact",
                &test,
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &settings)
            .env("NO_COLOR", "1")
            .env(MCP_TOKEN_VAR, MCP_TOKEN)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        child
    }

    /// The one session file's records.
    fn records(&self) -> Vec<Record> {
        let listed = cwl_session::list(self.sessions.path()).unwrap();
        assert_eq!(listed.len(), 1);
        cwl_session::read(&listed[0].path)
            .unwrap()
            .records
            .into_iter()
            .map(|(_, record)| record)
            .collect()
    }

    /// The contents of the tool messages of the last request the server got.
    fn last_tool_contents(&self) -> Vec<String> {
        let _guard = self.runtime.enter();
        let requests = self.server.requests();
        let body = requests.last().expect("a request").json();
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// The child's JSON events, read as they come, with a deadline.
struct Events {
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<Value>,
}

impl Events {
    fn of(child: &mut Child) -> Events {
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Events {
            lines,
            seen: Vec::new(),
        }
    }

    /// The next event whose `event` is `kind`; panics after 30 s or at the
    /// end of output.
    fn next(&mut self, kind: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|e| {
                panic!("no `{kind}` event ({e}); events so far: {:#?}", self.seen)
            });
            let Some(event) = json_event(&line) else {
                continue;
            };
            self.seen.push(event.clone());
            if event["event"] == kind {
                return event;
            }
            assert_ne!(
                event["event"], "approval_request",
                "an unexpected approval request while waiting for `{kind}`"
            );
        }
    }

    /// Every event, once the child's stdout is closed.
    fn rest(mut self) -> Vec<Value> {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(30)) {
            self.seen.extend(json_event(&line));
        }
        self.seen
    }
}

/// The JSON event on a line of the child's stdout, which also carries the
/// test harness's own lines (`running 1 test`,
/// `test agent_approval::cwl_process ... ` before the first event).
fn json_event(line: &str) -> Option<Value> {
    let start = line.find('{')?;
    let event = serde_json::from_str(&line[start..])
        .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
    Some(event)
}

fn reply(stdin: &mut ChildStdin, line: &str) {
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
}

/// Waits up to 30 s for `child` to end: its status and stderr.
fn finish(mut child: Child) -> (Option<i32>, String) {
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
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn calls(blocks: Vec<cwl::Block>) -> Reply {
    Reply::openai(&assistant(blocks), Usage::default())
}

fn done() -> Reply {
    Reply::openai(&assistant(vec![text("done")]), Usage::default())
}

fn approval_ids(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["event"] == "approval_request")
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect()
}

fn results(records: &[Record]) -> Vec<(String, String, bool)> {
    records
        .iter()
        .filter_map(|record| match record {
            Record::Message {
                message: Message::ToolResult(result),
                ..
            } => Some((
                result.call_id.clone(),
                result.content.clone(),
                result.is_error,
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn json_approvals_approve_deny_and_always() {
    let cwl = Cwl::new(
        vec![
            calls(vec![
                call("c1", "write", json!({"path": "a.txt", "content": "one\n"})),
                call("c2", "bash", json!({"command": "cat a.txt"})),
            ]),
            calls(vec![call("c3", "bash", json!({"command": "touch b.txt"}))]),
            calls(vec![call(
                "c4",
                "edit",
                json!({"path": "a.txt", "old_text": "one", "new_text": "two"}),
            )]),
            calls(vec![call(
                "c5",
                "edit",
                json!({"path": "a.txt", "old_text": "two", "new_text": "three"}),
            )]),
            done(),
        ],
        "",
    );
    let mut child = cwl.spawn("run", "on-mutate", true, "change a.txt");
    let mut stdin = child.stdin.take().unwrap();
    let mut events = Events::of(&mut child);

    let asked = events.next("approval_request");
    assert_eq!(asked["id"], "c1");
    assert_eq!(asked["name"], "write");
    assert_eq!(asked["mutating"], true);
    assert_eq!(
        serde_json::from_str::<Value>(asked["arguments"].as_str().unwrap()).unwrap()["path"],
        "a.txt"
    );
    assert!(
        !cwl.work.path().join("a.txt").exists(),
        "nothing runs before the answer"
    );
    reply(&mut stdin, r#"{"approve": true, "id": "c1"}"#);
    // `cat` only reads: it runs without asking.
    let result = events.next("tool_result");
    assert_eq!(
        (result["id"].as_str(), result["is_error"].as_bool()),
        (Some("c1"), Some(false))
    );
    let result = events.next("tool_result");
    assert_eq!(result["id"], "c2");
    assert!(result["content"].as_str().unwrap().contains("one"));

    let asked = events.next("approval_request");
    assert_eq!(asked["id"], "c3");
    reply(
        &mut stdin,
        r#"{"approve": false, "reason": "no new files please"}"#,
    );
    let result = events.next("tool_result");
    assert_eq!(result["is_error"], true);
    let declined = result["content"].as_str().unwrap().to_string();
    assert!(
        declined.starts_with(
            "The user declined to run this `bash` call (no new files please); it did not run."
        ),
        "{declined}"
    );

    let asked = events.next("approval_request");
    assert_eq!(asked["id"], "c4");
    reply(&mut stdin, r#"{"approve": "always"}"#);
    let rest = events.rest();
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(0), "stderr:\n{stderr}");
    assert_eq!(
        approval_ids(&rest),
        ["c1", "c3", "c4"],
        "the second edit runs without asking"
    );
    assert!(rest.iter().any(|e| {
        e["event"] == "note"
            && e["text"]
                .as_str()
                .unwrap()
                .contains("`edit` calls run without asking for the rest of this process")
    }));

    assert_eq!(
        std::fs::read_to_string(cwl.work.path().join("a.txt")).unwrap(),
        "three\n"
    );
    assert!(
        !cwl.work.path().join("b.txt").exists(),
        "the declined command never ran"
    );
    let records = cwl.records();
    let recorded = results(&records);
    let ids: Vec<&str> = recorded.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5"]);
    assert_eq!(
        recorded[2].1, declined,
        "the decline is recorded like any result"
    );
    assert!(recorded[2].2);
    let started: Vec<&str> = records
        .iter()
        .filter_map(|r| match r {
            Record::ToolStarted { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        ["c1", "c2", "c4", "c5"],
        "a declined call never starts"
    );
    assert!(
        cwl.last_tool_contents().contains(&declined),
        "the model is told"
    );
}

#[test]
fn never_and_the_non_terminal_default_run_without_asking() {
    for (approval, config) in [("never", "approval = \"always\"\n"), ("", "")] {
        let cwl = Cwl::new(
            vec![
                calls(vec![
                    call("c1", "bash", json!({"command": "touch made.txt"})),
                    call("c2", "write", json!({"path": "w.txt", "content": "w"})),
                ]),
                done(),
            ],
            config,
        );
        // stdin is a pipe, not a terminal, and gets nothing.
        let mut child = cwl.spawn("run", approval, true, "make files");
        drop(child.stdin.take());
        let events = Events::of(&mut child).rest();
        let (status, stderr) = finish(child);
        assert_eq!(status, Some(0), "{approval:?}: {stderr}");
        assert!(
            approval_ids(&events).is_empty(),
            "{approval:?}: {events:#?}"
        );
        assert!(cwl.work.path().join("made.txt").exists(), "{approval:?}");
        assert!(cwl.work.path().join("w.txt").exists(), "{approval:?}");
    }
}

#[test]
fn the_config_key_always_asks_for_reads_and_a_bad_reply_is_asked_again() {
    let cwl = Cwl::new(
        vec![calls(vec![call("c1", "ls", json!({}))]), done()],
        "approval = \"always\"\n",
    );
    let mut child = cwl.spawn("run", "", true, "list");
    let mut stdin = child.stdin.take().unwrap();
    let mut events = Events::of(&mut child);
    let asked = events.next("approval_request");
    assert_eq!(
        (asked["name"].as_str(), asked["mutating"].as_bool()),
        (Some("ls"), Some(false))
    );
    reply(&mut stdin, "yes please");
    let note = events.next("note");
    assert!(
        note["text"]
            .as_str()
            .unwrap()
            .contains(r#"approval reply is not {"approve": true|false|"always"}"#),
        "{note}"
    );
    let again = events.next("approval_request");
    assert_eq!(again["id"], "c1");
    reply(&mut stdin, r#"{"approve": true}"#);
    let result = events.next("tool_result");
    assert_eq!(result["is_error"], false);
    drop(stdin);
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(0), "{stderr}");
}

#[test]
fn the_end_of_input_declines_and_tasks_cannot_come_from_stdin() {
    let cwl = Cwl::new(
        vec![
            calls(vec![call("c1", "bash", json!({"command": "rm -f x"}))]),
            done(),
        ],
        "",
    );
    let mut child = cwl.spawn("run", "on-mutate", true, "remove x");
    drop(child.stdin.take());
    let events = Events::of(&mut child).rest();
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(0), "{stderr}");
    assert_eq!(approval_ids(&events), ["c1"]);
    let result = events.iter().find(|e| e["event"] == "tool_result").unwrap();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("(no answer came: the input ended)"),
        "{result}"
    );

    // No task: stdin would hold tasks, but it carries the answers.
    let mut child = cwl.spawn("run", "always", true, "");
    reply(child.stdin.as_mut().unwrap(), "a task");
    drop(child.stdin.take());
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "with --approval always stdin carries the answers to approval questions, not tasks"
        ),
        "{stderr}"
    );
}

#[test]
fn the_terminal_asks_y_n_always_on_stderr() {
    let cwl = Cwl::new(
        vec![
            calls(vec![call("c1", "bash", json!({"command": "touch one"}))]),
            calls(vec![call("c2", "bash", json!({"command": "touch two"}))]),
            calls(vec![call("c3", "bash", json!({"command": "touch three"}))]),
            calls(vec![call("c4", "bash", json!({"command": "touch four"}))]),
            done(),
        ],
        "",
    );
    let mut child = cwl.spawn("run", "on-mutate", false, "touch files");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"n\nmaybe\ny\na\n").unwrap();
    drop(stdin);
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stderr.contains("? bash $ touch one"), "{stderr}");
    assert!(
        stderr.contains("allow it? [y]es / [n]o / [a]lways allow `bash`: "),
        "{stderr}"
    );
    assert!(
        stderr.contains("answer y (run it), n (do not) or a (always allow `bash`), not \"maybe\""),
        "{stderr}"
    );
    let made: Vec<bool> = ["one", "two", "three", "four"]
        .iter()
        .map(|f| cwl.work.path().join(f).exists())
        .collect();
    assert_eq!(made, [false, true, true, true]);
    assert_eq!(
        stderr.matches("allow it?").count(),
        4,
        "c1, c2 twice, c3; c4 runs without asking: {stderr}"
    );
}

#[test]
fn chat_reads_tasks_and_approval_replies_from_the_same_stdin() {
    let cwl = Cwl::new(
        vec![
            calls(vec![call(
                "c1",
                "write",
                json!({"path": "x.txt", "content": "x"}),
            )]),
            done(),
            calls(vec![call(
                "c2",
                "write",
                json!({"path": "y.txt", "content": "y"}),
            )]),
            done(),
        ],
        "",
    );
    let mut child = cwl.spawn("chat", "on-mutate", true, "");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"write x\n{\"approve\": false}\nwrite y\n{\"approve\": true}\n/exit\n")
        .unwrap();
    drop(stdin);
    let events = Events::of(&mut child).rest();
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(0), "{stderr}");
    assert_eq!(approval_ids(&events), ["c1", "c2"]);
    assert!(!cwl.work.path().join("x.txt").exists());
    assert!(cwl.work.path().join("y.txt").exists());
    let tasks: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "task_started")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["write x", "write y"]);
    // First the sandbox in force, then that the scripted server gets no key.
    assert_eq!(events[0]["event"], "sandbox", "{}", events[0]);
    assert!(events[0]["mode"].is_string(), "{}", events[0]);
    let warning = events[1]["text"].as_str().unwrap();
    assert!(warning.contains("carry no API key"), "{warning}");
    let banner = events[2]["text"].as_str().unwrap();
    assert!(banner.contains(" · approval on-mutate · "), "{banner}");
}

/// An approver answering from a list, recording what it was asked.
struct Answers {
    answers: VecDeque<Result<Decision, InvalidAnswer>>,
    asked: Arc<Mutex<Vec<ApprovalRequest>>>,
}

impl Approver for Answers {
    fn ask<'a>(
        &'a mut self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<Decision, InvalidAnswer>> {
        self.asked.lock().unwrap().push(request.clone());
        let answer = self.answers.pop_front().expect("an answer left");
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn an_approver_in_process_sees_only_the_calls_the_mode_names() {
    let replies = vec![
        calls(vec![
            call("c1", "read", json!({"path": "src/auth.rs"})),
            call("c2", "bash", json!({"command": "cat README.md"})),
            call("c3", "bash", json!({"command": "cargo build"})),
            call("c4", "bash", json!({"command": "echo hi > out.txt"})),
            call("c5", "bash", json!({"command": "echo again > out.txt"})),
        ]),
        done(),
    ];
    let mut run = Scripted::start(replies, options(80_000)).await;
    assert_eq!(run.agent.approval_mode(), ApprovalMode::Never);
    let asked = Arc::new(Mutex::new(Vec::new()));
    run.agent.set_approval(
        ApprovalMode::OnMutate,
        Box::new(Answers {
            answers: VecDeque::from([
                Err(InvalidAnswer("not understood".into())),
                Ok(Decision::Deny { reason: None }),
                Ok(Decision::Always),
            ]),
            asked: Arc::clone(&asked),
        }),
    );
    assert_eq!(run.agent.approval_mode(), ApprovalMode::OnMutate);
    run.agent.run_task("look and build").await.unwrap();
    let asked: Vec<String> = asked.lock().unwrap().iter().map(|r| r.id.clone()).collect();
    assert_eq!(
        asked,
        ["c3", "c3", "c4"],
        "reads are not asked about; c5 is approved always"
    );
    let events = events(&run.shared);
    let requests = events
        .iter()
        .filter(|e| matches!(e, Event::ApprovalRequest { .. }))
        .count();
    assert_eq!(requests, 3);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Note { text } if text == "not understood"))
    );
    let outcome: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { id, is_error, .. } => Some((id.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        outcome,
        [
            ("c1".to_string(), false),
            ("c2".to_string(), false),
            ("c3".to_string(), true),
            ("c4".to_string(), false),
            ("c5".to_string(), false),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(run.dir.path().join("out.txt")).unwrap(),
        "again\n"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_while_asking_stops_the_task_and_the_call_never_runs() {
    let cwl = Cwl::new(
        vec![calls(vec![call(
            "c1",
            "bash",
            json!({"command": "touch never.txt"}),
        )])],
        "",
    );
    let mut child = cwl.spawn("run", "on-mutate", true, "touch it");
    let _stdin = child.stdin.take().unwrap();
    let mut events = Events::of(&mut child);
    events.next("approval_request");
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let result = events.next("tool_result");
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .starts_with("Not run: the task was interrupted"),
        "{result}"
    );
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(130), "{stderr}");
    assert!(!cwl.work.path().join("never.txt").exists());
    let records = cwl.records();
    assert!(
        !records
            .iter()
            .any(|r| matches!(r, Record::ToolStarted { .. })),
        "the call never started"
    );
    assert!(records.iter().any(|r| matches!(r, Record::Note { text, .. }
        if text.contains("the `bash` call was waiting for approval"))));
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_while_chat_asks_cancels_the_turn_and_the_next_line_is_a_task() {
    let cwl = Cwl::new(
        vec![
            calls(vec![call(
                "c1",
                "write",
                json!({"path": "x.txt", "content": "x"}),
            )]),
            done(),
        ],
        "",
    );
    let mut child = cwl.spawn("chat", "on-mutate", true, "");
    let mut stdin = child.stdin.take().unwrap();
    let mut events = Events::of(&mut child);
    reply(&mut stdin, "write x");
    events.next("approval_request");
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let cancelled = events.next("note");
    assert!(
        cancelled["text"]
            .as_str()
            .unwrap()
            .contains("the `write` call was waiting for approval"),
        "{cancelled}"
    );
    // The read the question left open takes this line, as a task.
    reply(&mut stdin, "say done");
    let task = events.next("task_started");
    assert_eq!(task["text"], "say done");
    events.next("task_finished");
    reply(&mut stdin, "/exit");
    drop(stdin);
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(!cwl.work.path().join("x.txt").exists());
}

/// MCP tools in a child `cwl run --json`: the start-up notes name the
/// servers loaded and the one that failed; a tool without `readOnlyHint`
/// asks under on-mutate (and does not run when declined), a read-only one
/// runs without asking.
#[test]
fn mcp_tools_obey_approvals_and_startup_is_reported() {
    let server = env!("CARGO_BIN_EXE_cwl-mcp-test-server");
    let config = format!(
        r#"
[[mcp_servers]]
name = "notes"
command = "{server}"
args = ["--tools", "echo,write_note"]

[[mcp_servers]]
name = "broken"
command = "{server}"
args = ["--fail-start"]
"#
    );
    let cwl = Cwl::new(
        vec![
            calls(vec![call("m1", "notes__echo", json!({"text": "hi"}))]),
            calls(vec![call(
                "m2",
                "notes__write_note",
                json!({"path": "n.txt", "text": "x"}),
            )]),
            calls(vec![call(
                "m3",
                "notes__write_note",
                json!({"path": "n.txt", "text": "y"}),
            )]),
            done(),
        ],
        &config,
    );
    let mut child = cwl.spawn("run", "on-mutate", true, "take notes");
    let mut stdin = child.stdin.take().unwrap();
    let mut events = Events::of(&mut child);
    let result = events.next("tool_result");
    assert_eq!(result["id"], "m1", "the read-only tool runs without asking");
    assert_eq!(result["content"], "echo: hi");
    let asked = events.next("approval_request");
    assert_eq!(asked["id"], "m2");
    assert_eq!(asked["name"], "notes__write_note");
    assert_eq!(asked["mutating"], true);
    reply(&mut stdin, r#"{"approve": false}"#);
    let result = events.next("tool_result");
    assert_eq!(result["is_error"], true);
    let asked = events.next("approval_request");
    assert_eq!(asked["id"], "m3");
    reply(&mut stdin, r#"{"approve": true}"#);
    let rest = events.rest();
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(0), "stderr:\n{stderr}");
    // The server wrote relative to the workspace, where it runs.
    assert_eq!(
        std::fs::read_to_string(cwl.work.path().join("n.txt")).unwrap(),
        "y"
    );
    let notes: Vec<&str> = rest
        .iter()
        .filter(|e| e["event"] == "note")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(
        notes.contains(&"MCP tools: notes (notes__echo, notes__write_note)"),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("MCP server `broken` not used: ")
                && n.contains("cannot open the database")),
        "{notes:#?}"
    );
    let results = results(&cwl.records());
    assert_eq!(results[0], ("m1".into(), "echo: hi".into(), false));
    assert!(
        results[1].2 && results[1].1.contains("declined"),
        "{:?}",
        results[1]
    );
    assert_eq!(results[2], ("m3".into(), "wrote n.txt".into(), false));
}

/// Ctrl-C during a model call ends `cwl run` (130) and its stdio MCP
/// server, which runs in a process group of its own and would outlive its
/// closed stdin (`--linger`).
#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_ends_the_stdio_mcp_servers() {
    let server = env!("CARGO_BIN_EXE_cwl-mcp-test-server");
    let config =
        format!("[[mcp_servers]]\nname = \"p\"\ncommand = \"{server}\"\nargs = [\"--linger\"]\n");
    let cwl = Cwl::new(
        vec![calls(vec![call("p1", "p__pid", json!({}))]), Reply::Silence],
        &config,
    );
    let mut child = cwl.spawn("run", "never", true, "which pid?");
    let mut events = Events::of(&mut child);
    let result = events.next("tool_result");
    let pid: i32 = result["content"].as_str().unwrap().parse().unwrap();
    assert!(!gone(pid), "the MCP server runs with the agent");
    // Wait for the second model request: the agent is inside it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while cwl.server.requests().len() < 2 {
        assert!(Instant::now() < deadline, "no second model request");
        std::thread::sleep(Duration::from_millis(20));
    }
    let cwl_pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(cwl_pid, rustix::process::Signal::INT).unwrap();
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(130), "stderr:\n{stderr}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone(pid) {
        assert!(Instant::now() < deadline, "MCP server {pid} outlived cwl");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// MCP credentials stay secret: the HTTP server gets the bearer token from
/// `bearer_token_env`, the stdio server its `env` token; what they answer
/// is redacted before the session and the model see it, and bash does not
/// get the token variable. An unset `bearer_token_env` leaves its server out.
#[test]
fn mcp_credentials_are_sent_and_redacted() {
    let web = cwl_agent::mcp::testing::HttpServer::start(vec!["whoami".into()]).unwrap();
    let server = env!("CARGO_BIN_EXE_cwl-mcp-test-server");
    let config = format!(
        r#"
[[mcp_servers]]
name = "web"
url = "{url}"
bearer_token_env = "{MCP_TOKEN_VAR}"

[[mcp_servers]]
name = "nokey"
url = "{url}"
bearer_token_env = "CWL_TEST_UNSET_VARIABLE"

[[mcp_servers]]
name = "local"
command = "{server}"
args = ["--tools", "env"]
env = {{ SERVICE_TOKEN = "stdio-secret-77" }}
"#,
        url = web.url()
    );
    let cwl = Cwl::new(
        vec![
            calls(vec![
                call("w1", "web__whoami", json!({})),
                call("w2", "local__env", json!({"name": "SERVICE_TOKEN"})),
                call(
                    "w3",
                    "bash",
                    json!({"command": format!("echo \"[${MCP_TOKEN_VAR}]\"")}),
                ),
            ]),
            done(),
        ],
        &config,
    );
    let mut child = cwl.spawn("run", "never", true, "who am I?");
    let events = Events::of(&mut child).rest();
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(0), "stderr:\n{stderr}");
    let results = results(&cwl.records());
    assert_eq!(
        results,
        [
            (
                "w1".into(),
                format!("Bearer [redacted {MCP_TOKEN_VAR}]"),
                false
            ),
            ("w2".into(), "[redacted SERVICE_TOKEN]".into(), false),
            ("w3".into(), "[]\n[exit code 0]".into(), false),
        ]
    );
    let sent = cwl.last_tool_contents().join("\n");
    assert!(
        !sent.contains(MCP_TOKEN) && !sent.contains("stdio-secret-77"),
        "{sent}"
    );
    let session =
        std::fs::read_to_string(&cwl_session::list(cwl.sessions.path()).unwrap()[0].path).unwrap();
    assert!(!session.contains(MCP_TOKEN) && !session.contains("stdio-secret-77"));
    assert!(
        events.iter().any(|e| e["event"] == "note"
            && e["text"].as_str().unwrap().starts_with(
                "MCP server `nokey` not used: its bearer_token_env CWL_TEST_UNSET_VARIABLE is not set (or empty) in cwl's environment"
            )),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|e| e["event"] == "note"
            && e["text"] == "MCP tools: web (web__whoami); local (local__env)")
    );
}

/// Ctrl-C at a terminal reaches the whole foreground process group; in
/// `cwl chat` it cancels the turn only, and the stdio MCP server, in a
/// group of its own, keeps serving the next turn. Ending the chat ends it.
#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_in_chat_spares_the_mcp_server() {
    use std::os::unix::process::CommandExt as _;
    let server = env!("CARGO_BIN_EXE_cwl-mcp-test-server");
    let config =
        format!("[[mcp_servers]]\nname = \"p\"\ncommand = \"{server}\"\nargs = [\"--linger\"]\n");
    let cwl = Cwl::new(
        vec![
            calls(vec![call("p1", "p__pid", json!({}))]),
            Reply::Silence,
            calls(vec![call("p2", "p__echo", json!({"text": "still here"}))]),
            done(),
        ],
        &config,
    );
    // As at a terminal: cwl leads a process group of its own.
    let mut child = cwl
        .command("chat", "never", true, "")
        .process_group(0)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut events = Events::of(&mut child);
    reply(&mut stdin, "first");
    let result = events.next("tool_result");
    let pid: i32 = result["content"].as_str().unwrap().parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while cwl.server.requests().len() < 2 {
        assert!(Instant::now() < deadline, "no second model request");
        std::thread::sleep(Duration::from_millis(20));
    }
    let group = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process_group(group, rustix::process::Signal::INT).unwrap();
    while events.next("note")["text"] != "turn cancelled; the session continues" {}
    assert!(!gone(pid), "the MCP server survives Ctrl-C in chat");
    reply(&mut stdin, "second");
    let result = events.next("tool_result");
    assert_eq!(result["content"], "echo: still here");
    reply(&mut stdin, "/exit");
    drop(stdin);
    let (status, stderr) = finish(child);
    assert_eq!(status, Some(0), "stderr:\n{stderr}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone(pid) {
        assert!(
            Instant::now() < deadline,
            "MCP server {pid} outlived the chat"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
