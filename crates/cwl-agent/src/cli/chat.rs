//! `cwl chat`: a line REPL over the same loop as `cwl run`.

use std::io::{IsTerminal, Write};

use futures_util::future::BoxFuture;

use super::ChatArgs;
use super::advice::after_failure;
use super::exit::UsageError;
use super::setup::{Started, start};
use crate::agent::AgentError;
use crate::agent::status::human_tokens;

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
    chat_with(args, interactive, || Box::pin(read_line())).await
}

/// The REPL over any source of lines (`None`: end of input). When the
/// lines are not typed (`interactive` false), the chat ends, once the
/// input is done, with a usage error after an unknown command, else with a
/// runtime error after a failed task, so a script sees its exit status.
async fn chat_with(
    args: ChatArgs,
    interactive: bool,
    mut next_line: impl FnMut() -> BoxFuture<'static, anyhow::Result<Option<String>>>,
) -> anyhow::Result<()> {
    let mut refused: Vec<String> = Vec::new();
    let mut failed = 0;
    let mut started = start(&args.agent)?;
    started.info(&format!(
        "cwl chat · {} · budget {} · session {} · /status, /help, /exit",
        started.agent.options().model.name,
        human_tokens(started.agent.options().budget),
        started.agent.session_id()
    ));
    loop {
        let Some(line) = next_line().await? else {
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
        match started.agent.run_task(task).await {
            Ok(_) => {}
            Err(AgentError::OutputClosed) => return Ok(()),
            Err(AgentError::Session(error)) => return Err(error.into()),
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
        let error = chat_with(args, false, move || {
            let line = lines.next();
            Box::pin(async move { Ok(line) })
        })
        .await
        .unwrap_err();
        assert_eq!(crate::cli::exit_code(&error), crate::cli::USAGE);
        assert!(error.to_string().contains("/bogus"), "{error}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "/bogus was not sent as a task");
        let last = requests[1].json().to_string();
        assert!(!last.contains("bogus"), "{last}");
        assert!(last.contains("/etc/hosts is wrong"), "{last}");
        let listed = session::list(sessions.path()).unwrap();
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
