//! `cwl chat` as lines: a REPL over the same loop as `cwl run`. On a
//! terminal the binary runs the full-screen UI instead (`cwl-tui`).

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use super::ChatArgs;
use super::advice::after_failure;
use super::exit::UsageError;
use super::lines::StdinLines;
use super::setup::{Started, start};
use super::signals::{self, EXIT_INTERRUPTED, Received, Signals};
use crate::agent::status::human_tokens;
use crate::agent::{AgentError, ApprovalMode};
use crate::render::Renderer;

/// The commands a chat line may start with `/` for.
const COMMANDS: &str = "/status, /help, /exit (or /quit)";

/// What a line typed in the chat asks for.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    /// Nothing (a blank line).
    Blank,
    /// End the session.
    Exit,
    /// Show the context.
    Status,
    /// List the commands.
    Help,
    /// A `/word` that is no command: refused, never sent as a task.
    Unknown(&'a str),
    /// A task for the agent (`//` at the start sends one `/`).
    Task(&'a str),
}

/// Reads one line: a command when it starts with `/`, else a task.
fn parse_line(line: &str) -> Line<'_> {
    let line = line.trim();
    if line.is_empty() {
        return Line::Blank;
    }
    if let Some(rest) = line.strip_prefix("//") {
        return if rest.trim().is_empty() {
            Line::Blank
        } else {
            Line::Task(&line[1..])
        };
    }
    if !line.starts_with('/') {
        return Line::Task(line);
    }
    match line {
        "/exit" | "/quit" => Line::Exit,
        "/status" => Line::Status,
        "/help" => Line::Help,
        other => Line::Unknown(other.split_whitespace().next().unwrap_or(other)),
    }
}

pub(super) async fn chat(args: ChatArgs) -> anyhow::Result<()> {
    let interactive = std::io::stdin().is_terminal();
    let lines = StdinLines::shared();
    let next_line = move || -> BoxFuture<'static, anyhow::Result<Option<String>>> {
        let lines = lines.clone();
        Box::pin(async move {
            lines
                .next("› ")
                .await
                .map_err(|error| anyhow::anyhow!("cannot read from stdin: {error}"))
        })
    };
    chat_with(args, interactive, next_line, Signals::listen).await
}

/// The REPL over any source of lines (`None`: end of input), stopped by
/// the signals `listen` gives: Ctrl-C cancels the running turn; at the
/// prompt a second Ctrl-C in a row, or SIGTERM at any time, ends the
/// process. When the lines are not typed (`interactive` false), the chat
/// ends, once the input is done, with a usage error after an unknown
/// command, else with a runtime error after a failed task, so a script
/// sees its exit status.
async fn chat_with(
    args: ChatArgs,
    interactive: bool,
    mut next_line: impl FnMut() -> BoxFuture<'static, anyhow::Result<Option<String>>>,
    listen: impl FnOnce(Arc<Mutex<Renderer>>) -> anyhow::Result<Signals>,
) -> anyhow::Result<()> {
    let mut refused: Vec<String> = Vec::new();
    let mut failed = 0;
    let mut started = start(&args.agent).await?;
    let mut signals = listen(Arc::clone(&started.renderer))?;
    let interrupt = started.agent.interrupt();
    let approval = match started.agent.approval_mode() {
        ApprovalMode::Never => String::new(),
        mode => format!(" · approval {mode}"),
    };
    started.info(&format!(
        "cwl chat · {} · budget {}{approval} · session {} · /status, /help, /exit",
        started.agent.options().model.name,
        human_tokens(started.agent.options().budget),
        started.agent.session_id()
    ));
    // A line being read survives signals: dropping it would lose the line.
    let mut reading = None;
    let mut idle_interrupts = 0;
    loop {
        let pending = reading.get_or_insert_with(&mut next_line);
        let line = tokio::select! {
            line = pending => line,
            received = signals.recv() => {
                idle_interrupts += 1;
                if received == Received::Terminate || idle_interrupts > 1 {
                    leave(started, received);
                }
                started.info("Ctrl-C cancels a running turn; /exit or Ctrl-D ends the session (or Ctrl-C again now)");
                continue;
            }
        };
        reading = None;
        idle_interrupts = 0;
        signals.settle();
        let Some(line) = line? else {
            break;
        };
        let task = match parse_line(&line) {
            Line::Blank => continue,
            Line::Exit => break,
            Line::Status => {
                status(&started);
                continue;
            }
            Line::Help => {
                started.info(&format!(
                    "commands: {COMMANDS}; any other line is a task (start it with // to send a leading /)"
                ));
                continue;
            }
            Line::Unknown(command) => {
                started.info(&format!(
                    "unknown command {command}: not sent to the model. Commands: {COMMANDS}; start a task with // to send a leading /"
                ));
                refused.push(command.to_string());
                continue;
            }
            Line::Task(task) => task,
        };
        let turn = started.agent.run_task(task);
        let (result, received) =
            signals::guard(turn, &mut signals, &interrupt, &started.renderer).await;
        // A signal that came as the turn ended must not stop the next one.
        interrupt.clear();
        signals.settle();
        match result {
            Ok(_) => {}
            Err(AgentError::OutputClosed) => return Ok(()),
            Err(AgentError::Session(error)) => return Err(error.into()),
            Err(AgentError::Interrupted { .. }) => {
                started.info("turn cancelled; the session continues");
            }
            Err(error) => {
                failed += 1;
                // The chat goes on: only a session that cannot go on gets advice.
                let text = match error {
                    AgentError::WindowExceeded { .. } => format!(
                        "error: {error}\n{}",
                        after_failure(&error, &started.agent, "cwl chat")
                    ),
                    _ => format!("error: {error}"),
                };
                started.info(&text);
            }
        }
        if let Some(received @ Received::Terminate) = received {
            leave(started, received);
        }
        if started.agent.observer().closed() {
            return Ok(());
        }
    }
    started.summary();
    if !interactive && !refused.is_empty() {
        return Err(UsageError::new(format!(
            "unknown command(s) refused: {}; commands: {COMMANDS}",
            refused.join(", ")
        ))
        .into());
    }
    if !interactive && failed > 0 {
        anyhow::bail!(
            "{failed} task(s) failed (see above); the session is saved, continue it with `cwl chat --resume {}`",
            started.agent.session_id()
        );
    }
    Ok(())
}

/// Ends the session on a signal: summary, how to resume, exit status 130.
fn leave(started: Started, received: Received) -> ! {
    started.summary();
    let id = started.agent.session_id();
    started.info(&format!(
        "{}: the session is saved; continue it with `cwl chat --resume {id}`",
        received.name()
    ));
    drop(started);
    std::process::exit(EXIT_INTERRUPTED)
}

fn status(started: &Started) {
    let context = started.agent.context();
    let episode = match context.active_episode() {
        Some((name, kind)) => format!("{kind} `{name}` active"),
        None => "no episode active".to_string(),
    };
    let stats = started.agent.stats();
    started.info(&format!(
        "context {} / {} · {} · {} tasks, {} requests so far",
        human_tokens(context.tokens()),
        human_tokens(started.agent.options().budget),
        episode,
        stats.tasks,
        stats.requests
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::AgentArgs;
    use cwl::{Message, Usage};
    use cwl_provider::ProviderKind;
    use cwl_provider::testing::{Reply, ScriptedServer};

    fn args(
        server: &ScriptedServer,
        work: &std::path::Path,
        sessions: &std::path::Path,
    ) -> ChatArgs {
        let mut args = super::super::test_chat_args(server, work, sessions);
        args.agent.json = true;
        args.plain = true;
        args
    }

    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread")]
    async fn ctrl_c_cancels_the_turn_and_the_next_line_runs() {
        use cwl::{Block, ToolCall};
        let command = "sleep 60 & echo $! > sleep.pid; touch started; wait";
        let arguments = serde_json::json!({ "command": command }).to_string();
        let server = ScriptedServer::start([
            Reply::openai(
                &Message::Assistant {
                    content: vec![Block::ToolCall(ToolCall::new("c1", "bash", arguments))],
                },
                Usage::default(),
            ),
            Reply::openai(&Message::assistant_text("done"), Usage::default()),
        ])
        .await
        .unwrap();
        let work = tempfile::tempdir().unwrap();
        let sessions = tempfile::tempdir().unwrap();
        let (signal, signals) = tokio::sync::mpsc::unbounded_channel();
        let mut lines = ["sleep a while", "next", "/exit"]
            .into_iter()
            .map(String::from);
        let chat = tokio::spawn(chat_with(
            args(&server, work.path(), sessions.path()),
            true,
            move || {
                let line = lines.next();
                Box::pin(async move { Ok(line) })
            },
            |_| Ok(Signals::from_channel(signals)),
        ));
        let started = work.path().join("started");
        for _ in 0..500 {
            if started.exists() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(started.exists(), "the command ran");
        signal.send(Received::Interrupt).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(20), chat)
            .await
            .expect("the chat goes on after the cancelled turn and ends at /exit")
            .unwrap()
            .unwrap();

        let requests = server.requests();
        assert_eq!(requests.len(), 2, "the second line was sent");
        let body = requests[1].body.clone();
        assert!(body.contains(cwl_session::MAY_HAVE_RUN), "{body}");
        assert!(body.contains("stopped by SIGINT"), "{body}");
        assert!(body.contains("next"), "{body}");
        let pid: i32 = std::fs::read_to_string(work.path().join("sleep.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(crate::tools::gone(pid), "the command's sleep {pid} is gone");
        let listed = cwl_session::list(sessions.path()).unwrap();
        let loaded = cwl_session::read(&listed[0].path).unwrap();
        let notes: Vec<&str> = loaded
            .records
            .iter()
            .filter_map(|(_, record)| match record {
                cwl::Record::Note { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            notes.iter().any(|n| n
                .starts_with("interrupted by SIGINT (Ctrl-C) while the `bash` call was running")),
            "{notes:?}"
        );
        assert_eq!(
            cwl_session::unfinished_task(&loaded),
            None,
            "the second turn finished"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn each_line_is_a_task_until_exit() {
        let server = ScriptedServer::start([
            Reply::openai(&Message::assistant_text("one"), Usage::default()),
            Reply::openai(&Message::assistant_text("two"), Usage::default()),
        ])
        .await
        .unwrap();
        let work = tempfile::tempdir().unwrap();
        let sessions = tempfile::tempdir().unwrap();
        let config = sessions.path().join("config.toml");
        std::fs::write(&config, "").unwrap();
        let args = ChatArgs {
            agent: AgentArgs {
                provider: Some(ProviderKind::OpenAi),
                model: Some("m".into()),
                base_url: Some(server.url().to_string()),
                cwd: Some(work.path().to_owned()),
                session_dir: Some(sessions.path().to_owned()),
                config: Some(config),
                json: true,
                // Never asks, even when the test runs with a terminal on stdin.
                approval: Some(crate::agent::ApprovalMode::Never),
                ..AgentArgs::default()
            },
            plain: true,
        };
        let mut lines = [
            "hello\n",
            "/status",
            "/bogus task text",
            "  ",
            "//etc/hosts is wrong\n",
            "/exit",
            "never",
        ]
        .into_iter()
        .map(String::from);
        let (_signal, signals) = tokio::sync::mpsc::unbounded_channel();
        let error = chat_with(
            args,
            false,
            move || {
                let line = lines.next();
                Box::pin(async move { Ok(line) })
            },
            |_| Ok(Signals::from_channel(signals)),
        )
        .await
        .unwrap_err();
        assert_eq!(crate::cli::exit_code(&error), crate::cli::USAGE);
        assert!(error.to_string().contains("/bogus"), "{error}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "/bogus was not sent as a task");
        let last = requests[1].json().to_string();
        assert!(!last.contains("bogus"), "{last}");
        assert!(last.contains("/etc/hosts is wrong"), "{last}");
        let listed = cwl_session::list(sessions.path()).unwrap();
        assert_eq!(listed[0].tasks, 2);
        assert_eq!(listed[0].first_task.as_deref(), Some("hello"));
    }

    #[test]
    fn lines_starting_with_a_slash_are_commands() {
        assert_eq!(parse_line("  /exit "), Line::Exit);
        assert_eq!(parse_line("/quit"), Line::Exit);
        assert_eq!(parse_line("/status"), Line::Status);
        assert_eq!(parse_line("/help"), Line::Help);
        assert_eq!(parse_line("/bogus fix it"), Line::Unknown("/bogus"));
        assert_eq!(parse_line("/"), Line::Unknown("/"));
        assert_eq!(parse_line("//usr/bin/env"), Line::Task("/usr/bin/env"));
        assert_eq!(parse_line(" // "), Line::Blank);
        assert_eq!(parse_line("fix /src"), Line::Task("fix /src"));
        assert_eq!(parse_line(" \t"), Line::Blank);
    }
}
