//! `cwl chat`: a line REPL over the same loop as `cwl run`.

use std::io::Write;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use super::ChatArgs;
use super::setup::{Started, start};
use super::signals::{self, EXIT_INTERRUPTED, Received, Signals};
use crate::agent::AgentError;
use crate::agent::status::human_tokens;
use crate::render::Renderer;

pub(super) async fn chat(args: ChatArgs) -> anyhow::Result<()> {
    chat_with(args, || Box::pin(read_line()), Signals::listen).await
}

/// The REPL over any source of lines (`None`: end of input), stopped by
/// the signals `listen` gives: Ctrl-C cancels the running turn; at the
/// prompt a second Ctrl-C in a row, or SIGTERM at any time, ends the
/// process.
async fn chat_with(
    args: ChatArgs,
    mut next_line: impl FnMut() -> BoxFuture<'static, anyhow::Result<Option<String>>>,
    listen: impl FnOnce(Arc<Mutex<Renderer>>) -> anyhow::Result<Signals>,
) -> anyhow::Result<()> {
    let mut started = start(&args.agent)?;
    let mut signals = listen(Arc::clone(&started.renderer))?;
    let interrupt = started.agent.interrupt();
    started.info(&format!(
        "cwl chat · {} · budget {} · session {} · /status, /exit",
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
        let line = line.trim();
        match line {
            "" => continue,
            "/exit" | "/quit" => break,
            "/status" => {
                status(&started);
                continue;
            }
            _ => {}
        }
        let turn = started.agent.run_task(line);
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
            Err(error) => started.info(&format!("error: {error}")),
        }
        if let Some(received @ Received::Terminate) = received {
            leave(started, received);
        }
        if started.agent.observer().closed() {
            return Ok(());
        }
    }
    started.summary();
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

/// One line of stdin, after a prompt on stderr; `None` at end of input.
async fn read_line() -> anyhow::Result<Option<String>> {
    tokio::task::spawn_blocking(|| {
        let mut stderr = std::io::stderr();
        let _ = write!(stderr, "› ");
        let _ = stderr.flush();
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(line)),
            Err(error) => Err(anyhow::anyhow!("cannot read from stdin: {error}")),
        }
    })
    .await?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::AgentArgs;
    use crate::provider::ProviderKind;
    use crate::provider::testing::{Reply, ScriptedServer};
    use crate::session;
    use cwl::{Message, Usage};

    fn args(
        server: &ScriptedServer,
        work: &std::path::Path,
        sessions: &std::path::Path,
    ) -> ChatArgs {
        let config = sessions.join("config.toml");
        std::fs::write(&config, "").unwrap();
        ChatArgs {
            agent: AgentArgs {
                provider: Some(ProviderKind::OpenAi),
                model: Some("m".into()),
                base_url: Some(server.url().to_string()),
                cwd: Some(work.to_owned()),
                session_dir: Some(sessions.to_owned()),
                config: Some(config),
                json: true,
                ..AgentArgs::default()
            },
        }
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
        assert!(body.contains(session::MAY_HAVE_RUN), "{body}");
        assert!(body.contains("stopped by SIGINT"), "{body}");
        assert!(body.contains("next"), "{body}");
        let pid: i32 = std::fs::read_to_string(work.path().join("sleep.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next();
        assert!(
            matches!(state, None | Some("Z" | "X")),
            "the command's sleep is gone: {stat}"
        );
        let listed = session::list(sessions.path()).unwrap();
        let loaded = session::read(&listed[0].path).unwrap();
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
            session::unfinished_task(&loaded),
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
                ..AgentArgs::default()
            },
        };
        let mut lines = ["hello\n", "/status", "  ", "second\n", "/exit", "never"]
            .into_iter()
            .map(String::from);
        let (_signal, signals) = tokio::sync::mpsc::unbounded_channel();
        chat_with(
            args,
            move || {
                let line = lines.next();
                Box::pin(async move { Ok(line) })
            },
            |_| Ok(Signals::from_channel(signals)),
        )
        .await
        .unwrap();
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let listed = session::list(sessions.path()).unwrap();
        assert_eq!(listed[0].tasks, 2);
        assert_eq!(listed[0].first_task.as_deref(), Some("hello"));
    }
}
