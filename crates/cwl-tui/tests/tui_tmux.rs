//! The full-screen `cwl chat` in a real terminal: tmux runs it (this test
//! binary run again as [`cwl_chat_process`]) against the scripted server;
//! the test types with `send-keys` and reads the screen with
//! `capture-pane`. A task completes and the gauge and the episode panel
//! show its episodes; commands answer and an unknown one is refused; an
//! approval is asked inline; Ctrl-C cancels a turn and the UI stays; a
//! resize redraws; `/quit` exits 0 and gives the terminal back; so do
//! Ctrl-C twice and SIGTERM (status 130) and a panic (its message then
//! shows on the normal screen).
//!
//! tmux must be installed (`.ci/run` installs it): without it the test
//! fails, it does not skip.

#![cfg(target_os = "linux")]

// The agent's test helpers, shared rather than copied.
#[path = "../../cwl-agent/tests/integration/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cwl::Usage;
use cwl_agent::cli::{self, AgentArgs, ChatArgs};
use cwl_provider::testing::{Reply, ScriptedServer};
use serde_json::json;
use support::*;

/// Set in the child: its settings file (base URL, workspace, session dir,
/// config file, budget, strategy, one per line).
const CHILD_ENV: &str = "CWL_TEST_CHAT_CHILD";

/// Not a test on its own: `cwl chat` as tmux starts it.
#[test]
#[ignore = "helper process for the tmux test"]
fn cwl_chat_process() {
    let fields = child_fields(CHILD_ENV);
    let args = ChatArgs {
        agent: AgentArgs {
            budget: Some(fields[4].parse().expect("a budget")),
            strategy: Some(fields[5].parse().expect("a strategy")),
            ..child_agent(&fields)
        },
        plain: false,
    };
    match cwl_tui::run_chat(args) {
        Ok(()) => std::process::exit(0),
        Err(error) => {
            eprintln!("cwl: error: {}", cli::error_line(&error));
            std::process::exit(i32::from(cli::exit_code(&error)))
        }
    }
}

/// Set in the panic helper: the file whose appearance makes it panic.
const PANIC_ENV: &str = "CWL_TEST_PANIC_CHILD";

/// Not a test on its own: takes the terminal as the UI does, then panics
/// once the test creates the file named in [`PANIC_ENV`].
#[test]
#[ignore = "helper process for the tmux test"]
fn panic_process() {
    let trigger = PathBuf::from(std::env::var(PANIC_ENV).expect("run by the tests"));
    let _guard = cwl_tui::TerminalGuard::enter().unwrap();
    println!("the terminal is taken");
    while !trigger.exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("a bug in the UI");
}

/// A tmux server of its own (`-L`), killed when dropped, also when the
/// test fails.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(width: u16, height: u16, command: &str) -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "tmux is not installed: the full-screen UI test needs it (.ci/run installs it; apt-get install tmux)"
        );
        let tmux = Tmux {
            socket: format!("cwl-tui-{}-{}", std::process::id(), fastrand::u32(..)),
        };
        let (w, h) = (width.to_string(), height.to_string());
        tmux.run(&["new-session", "-d", "-s", "t", "-x", &w, "-y", &h, command]);
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        let output = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// Keys as `send-keys` names them (`Enter`, `C-c`), or literal text.
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    fn type_line(&self, text: &str) {
        self.run(&["send-keys", "-t", "t", "-l", text]);
        self.keys(&["Enter"]);
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    fn alternate_on(&self) -> bool {
        let out = self.run(&["display-message", "-p", "-t", "t", "#{alternate_on}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Waits (up to 60 s) until the screen passes `check`.
    fn wait(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

fn wait_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `cwl chat` in tmux against a scripted server, with its workspace and
/// session directory.
struct Chat {
    tmux: Tmux,
    work: tempfile::TempDir,
    status: PathBuf,
    server: ScriptedServer,
    _sessions: tempfile::TempDir,
    _runtime: tokio::runtime::Runtime,
}

impl Chat {
    fn start(replies: Vec<Reply>, budget: &str) -> Chat {
        Chat::start_with(replies, budget, "cwl")
    }

    /// As [`Chat::start`], the context managed by `strategy`.
    fn start_with(replies: Vec<Reply>, budget: &str, strategy: &str) -> Chat {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = runtime.block_on(ScriptedServer::start(replies)).unwrap();
        let work = tempfile::tempdir().unwrap();
        let sessions = tempfile::tempdir().unwrap();
        let config = sessions.path().join("config.toml");
        std::fs::write(&config, "").unwrap();
        let settings = sessions.path().join("child.txt");
        let fields = [
            format!("{}/v1", server.url()),
            work.path().display().to_string(),
            sessions.path().display().to_string(),
            config.display().to_string(),
            budget.to_string(),
            strategy.to_string(),
        ];
        std::fs::write(&settings, fields.join("\n") + "\n").unwrap();
        let status = sessions.path().join("status");
        let command = format!(
            "{CHILD_ENV}='{}' NO_COLOR=1 '{}' --exact cwl_chat_process --ignored --nocapture --test-threads=1; echo $? > '{}'; exec sleep 600",
            settings.display(),
            std::env::current_exe().unwrap().display(),
            status.display()
        );
        let tmux = Tmux::start(120, 40, &command);
        tmux.wait("the UI", |s| s.contains("session ") && s.contains("τ"));
        Chat {
            tmux,
            work,
            status,
            server,
            _sessions: sessions,
            _runtime: runtime,
        }
    }

    /// The exit status, once the process ended.
    fn exit_status(&self) -> String {
        wait_file(&self.status);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let code = std::fs::read_to_string(&self.status).unwrap();
            if code.ends_with('\n') || Instant::now() > deadline {
                return code.trim().to_string();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process `cwl chat` runs in: the child of the pane's shell.
    fn pid(&self) -> i32 {
        let out = self
            .tmux
            .run(&["display-message", "-p", "-t", "t", "#{pane_pid}"]);
        let shell = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let children =
            std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
        children
            .split_whitespace()
            .next()
            .expect("the chat runs under the pane's shell")
            .parse()
            .unwrap()
    }
}

#[test]
fn ctrl_c_twice_when_idle_and_sigterm_exit_130_and_give_the_terminal_back() {
    for how in ["ctrl-c", "sigterm"] {
        let chat = Chat::start(vec![], "80k");
        let tmux = &chat.tmux;
        assert!(tmux.alternate_on());
        if how == "ctrl-c" {
            tmux.keys(&["C-c"]);
            tmux.wait("the warning", |s| {
                s.contains("Ctrl-C again (or /quit) exits")
            });
            tmux.keys(&["C-c"]);
        } else {
            rustix::process::kill_process(
                rustix::process::Pid::from_raw(chat.pid()).unwrap(),
                rustix::process::Signal::TERM,
            )
            .unwrap();
        }
        assert_eq!(chat.exit_status(), "130", "{how}");
        let screen = tmux.wait("the terminal back", |s| {
            s.contains("the session is saved; continue it with `cwl chat --resume")
        });
        assert!(
            !tmux.alternate_on(),
            "{how}: the alternate screen is left:\n{screen}"
        );
        if how == "sigterm" {
            assert!(screen.contains("SIGTERM: the session is saved"), "{screen}");
        }
    }
}

/// The budget of the scripted session and the size of the files it reads.
const BUDGET: &str = "4700";
const FILE_LINES: usize = 110;

#[test]
fn full_screen_chat_in_tmux() {
    let usage = Usage {
        input_tokens: 4000,
        cached_input_tokens: 3000,
        ..Usage::default()
    };
    let replies = [
        assistant(vec![
            start("d1", "read-parser", "expl", &[]),
            call("c1", "read", json!({ "path": "parse.rs" })),
        ]),
        assistant(vec![
            end("d2", Some("parse() drops the last token")),
            start("d3", "read-tests", "expl", &[]),
            call("c2", "read", json!({ "path": "tests.rs" })),
        ]),
        assistant(vec![
            end("d4", Some("no test covers the last token")),
            start("d5", "fix-parser", "act", &["read-tests"]),
        ]),
        assistant(vec![text("Fixed: the parser keeps the last token.")]),
        assistant(vec![
            text("Running the tests."),
            call(
                "c3",
                "bash",
                json!({ "command": "touch started; sleep 60; touch late" }),
            ),
        ]),
    ]
    .iter()
    .enumerate()
    // Usage figures calibrate the count: only the answer reports some.
    .map(|(i, m)| Reply::openai(m, if i == 3 { usage } else { Usage::default() }))
    .collect::<Vec<_>>();
    // A budget the two reads pass together: the first one is evicted.
    let chat = Chat::start(replies, BUDGET);
    let (tmux, work, server) = (&chat.tmux, &chat.work, &chat.server);
    let source = |name: &str| -> String {
        (0..FILE_LINES)
            .map(|i| format!("let {name}_{i} = next_token(&mut input);\n"))
            .collect()
    };
    std::fs::write(work.path().join("parse.rs"), source("token")).unwrap();
    std::fs::write(work.path().join("tests.rs"), source("check")).unwrap();
    let screen = tmux.screen();
    assert!(screen.contains("gpt-test"), "{screen}");
    assert!(tmux.alternate_on(), "the UI is on the alternate screen");

    tmux.type_line("fix the parser");
    let screen = tmux.wait("the answer", |s| {
        s.contains("Fixed: the parser keeps the last token.") && !s.contains("working")
    });
    eprintln!("after the task:\n{screen}");
    assert!(screen.contains("› fix the parser"), "{screen}");
    assert!(screen.contains("⚙ read parse.rs"), "{screen}");
    assert!(screen.contains("▶ act fix-parser ← read-tests"), "{screen}");
    assert!(!screen.contains("⚙ delimiter"), "{screen}");
    assert!(screen.contains("ℹ evicted "), "{screen}");
    assert!(
        screen.contains("expl read-parser ["),
        "evicted to some level:\n{screen}"
    );
    assert!(
        screen.contains("“parse() drops the last token”"),
        "{screen}"
    );
    assert!(screen.contains("expl read-tests ✓"), "{screen}");
    assert!(
        screen.contains("act  fix-parser ← read-tests ▶"),
        "{screen}"
    );
    assert!(screen.contains("cache 75%"), "{screen}");
    assert!(screen.contains("low-water "), "{screen}");

    tmux.type_line("/episodes");
    // Each command's answer, and the UI idle again (commands wait for a job).
    tmux.wait("the episode list", |s| {
        s.contains("expl read-parser · evicted to ")
            && s.contains("act fix-parser ← read-tests · active")
            && !s.contains("working")
    });
    tmux.type_line("/evict");
    tmux.wait("the eviction preview", |s| {
        s.contains("within the engine's limit (") && !s.contains("working")
    });
    tmux.type_line("/bogus thing");
    let screen = tmux.wait("the refusal", |s| {
        s.contains("unknown command /bogus: not sent")
    });
    eprintln!("after the commands:\n{screen}");
    // The evicted read comes back from the session file, to the user only.
    tmux.type_line("/recall read-parser");
    tmux.wait("the recalled read", |s| {
        s.contains(&format!("token_{} = next_token", FILE_LINES - 1)) && !s.contains("working")
    });

    tmux.type_line("run the tests");
    tmux.wait("the approval question", |s| {
        s.contains("allow bash $ touch started") && s.contains("[y]es / [n]o / [a]lways")
    });
    tmux.keys(&["y"]);
    wait_file(&work.path().join("started"));
    tmux.keys(&["C-c"]);
    let screen = tmux.wait("the cancelled turn", |s| {
        s.contains("turn cancelled; the session continues")
    });
    assert!(tmux.alternate_on(), "the UI stays after Ctrl-C:\n{screen}");
    assert!(screen.contains("τ"), "{screen}");
    assert!(
        !work.path().join("late").exists(),
        "the command was stopped"
    );

    tmux.run(&["resize-window", "-t", "t", "-x", "90", "-y", "30"]);
    let screen = tmux.wait("the redraw at 90 columns", |s| {
        s.lines().filter(|l| !l.is_empty()).count() == 30
            && s.lines().all(|l| l.chars().count() <= 90)
            && s.lines()
                .any(|l| l.starts_with('└') && l.chars().count() == 90)
    });
    eprintln!("after Ctrl-C and the resize:\n{screen}");
    assert!(screen.contains("turn cancelled"), "{screen}");

    tmux.type_line("/quit");
    assert_eq!(chat.exit_status(), "0", "/quit exits 0");
    let screen = tmux.wait("the terminal back", |s| {
        s.contains("the session is saved; continue it with `cwl chat --resume")
    });
    assert!(
        !tmux.alternate_on(),
        "the alternate screen is left:\n{screen}"
    );
    eprintln!("after /quit:\n{screen}");
    assert!(!screen.contains("┌ conversation"), "{screen}");
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "commands never reach the model");
    assert!(
        requests.iter().all(|r| !r.body.contains("bogus")),
        "the unknown command was not sent"
    );
}

/// The same reads under the cwm strategy: the UI shows its evictions, and
/// `/evict` previews the cwm's own pass while `/recall` gives its refusal.
#[test]
fn full_screen_chat_with_the_cwm_strategy() {
    let replies = [
        assistant(vec![
            start("d1", "read-parser", "expl", &[]),
            call("c1", "read", json!({ "path": "parse.rs" })),
        ]),
        assistant(vec![
            end("d2", Some("parse() drops the last token")),
            start("d3", "read-tests", "expl", &[]),
            call("c2", "read", json!({ "path": "tests.rs" })),
        ]),
        assistant(vec![
            end("d4", Some("the tests skip the last token")),
            call("c3", "read", json!({ "path": "more.rs" })),
        ]),
        assistant(vec![text("Read the three files.")]),
    ]
    .iter()
    .map(|m| Reply::openai(m, Usage::default()))
    .collect::<Vec<_>>();
    let chat = Chat::start_with(replies, BUDGET, "cwm");
    // The strategy's summary calls (no tools offered) fail: eviction alone
    // carries the budget, as before summaries.
    chat.server.answer_side(|request| {
        (request.json().get("tools").is_none())
            .then(|| Reply::status(400, r#"{"error":{"message":"no summaries here"}}"#))
    });
    let (tmux, work) = (&chat.tmux, &chat.work);
    for name in ["parse", "tests", "more"] {
        let source: String = (0..FILE_LINES)
            .map(|i| format!("let {name}_{i} = next_token(&mut input);\n"))
            .collect();
        std::fs::write(work.path().join(format!("{name}.rs")), source).unwrap();
    }
    tmux.type_line("read the parser");
    let screen = tmux.wait("the answer", |s| {
        s.contains("Read the three files.") && !s.contains("working")
    });
    eprintln!("after the task:\n{screen}");
    assert!(screen.contains("ℹ evicted "), "{screen}");
    assert!(screen.contains("· strategy cwm ·"), "{screen}");
    assert!(!screen.contains("0 episode(s)"), "{screen}");
    assert!(screen.contains("expl read-tests ✓"), "{screen}");

    tmux.type_line("/evict");
    let screen = tmux.wait("the eviction preview", |s| {
        s.contains("the engine's limit (") && !s.contains("working")
    });
    assert!(
        screen.contains("chosen block by block by the cwm strategy"),
        "{screen}"
    );
    tmux.type_line("/recall read-parser");
    let screen = tmux.wait("the refusal", |s| {
        s.contains("recall is not available with the cwm strategy")
    });
    eprintln!("after the commands:\n{screen}");

    tmux.type_line("/quit");
    assert_eq!(chat.exit_status(), "0", "/quit exits 0");
    let main = chat
        .server
        .requests()
        .into_iter()
        .filter(|r| r.json().get("tools").is_some())
        .count();
    assert_eq!(main, 4, "commands never reach the model");
}

#[test]
fn a_panic_gives_the_terminal_back() {
    let dir = tempfile::tempdir().unwrap();
    let trigger = dir.path().join("panic-now");
    let status = dir.path().join("status");
    let command = format!(
        "RUST_BACKTRACE=0 {PANIC_ENV}='{}' '{}' --exact panic_process --ignored --nocapture --test-threads=1; echo $? > '{}'; exec sleep 600",
        trigger.display(),
        std::env::current_exe().unwrap().display(),
        status.display()
    );
    let tmux = Tmux::start(100, 20, &command);
    tmux.wait("the terminal taken", |s| {
        s.contains("the terminal is taken")
    });
    assert!(tmux.alternate_on());
    std::fs::write(&trigger, "").unwrap();
    wait_file(&status);
    let screen = tmux.wait("the panic message", |s| s.contains("a bug in the UI"));
    assert!(
        !tmux.alternate_on(),
        "the alternate screen is left:\n{screen}"
    );
}
