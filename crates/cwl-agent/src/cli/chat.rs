//! `cwl chat`: a line REPL over the same loop as `cwl run`.

use std::io::Write;

use futures_util::future::BoxFuture;

use super::ChatArgs;
use super::setup::{Started, start};
use crate::agent::AgentError;
use crate::agent::status::human_tokens;

pub(super) async fn chat(args: ChatArgs) -> anyhow::Result<()> {
    chat_with(args, || Box::pin(read_line())).await
}

/// The REPL over any source of lines (`None`: end of input).
async fn chat_with(
    args: ChatArgs,
    mut next_line: impl FnMut() -> BoxFuture<'static, anyhow::Result<Option<String>>>,
) -> anyhow::Result<()> {
    let mut started = start(&args.agent)?;
    started.info(&format!(
        "cwl chat · {} · budget {} · session {} · /status, /exit",
        started.agent.options().model.name,
        human_tokens(started.agent.options().budget),
        started.agent.session_id()
    ));
    loop {
        let Some(line) = next_line().await? else {
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
        match started.agent.run_task(line).await {
            Ok(_) => {}
            Err(AgentError::OutputClosed) => return Ok(()),
            Err(AgentError::Session(error)) => return Err(error.into()),
            Err(error) => started.info(&format!("error: {error}")),
        }
        if started.agent.observer().closed() {
            return Ok(());
        }
    }
    started.summary();
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
        let mut lines = ["hello\n", "/status", "  ", "second\n", "/exit", "never"]
            .into_iter()
            .map(String::from);
        chat_with(args, move || {
            let line = lines.next();
            Box::pin(async move { Ok(line) })
        })
        .await
        .unwrap();
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let listed = session::list(sessions.path()).unwrap();
        assert_eq!(listed[0].tasks, 2);
        assert_eq!(listed[0].first_task.as_deref(), Some("hello"));
    }
}
