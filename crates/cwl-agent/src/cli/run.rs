//! `cwl run`: tasks in order, one session, then a summary.

use std::io::{BufRead, IsTerminal};
use std::sync::Arc;

use anyhow::bail;

use super::RunArgs;
use super::advice::after_failure;
use super::exit::UsageError;
use super::setup::start;
use super::signals::{self, EXIT_INTERRUPTED, Signals};
use crate::agent::{AgentError, ApprovalMode};
use crate::config;
use cwl_provider::ProviderError;

pub(super) async fn run(args: RunArgs) -> anyhow::Result<()> {
    let tasks = tasks(&args)?;
    if tasks.is_empty() {
        check_unfinished(&args)?;
    }
    let mut started = start(&args.agent).await?;
    let mut signals = Signals::listen(Arc::clone(&started.renderer))?;
    let interrupt = started.agent.interrupt();
    // No task: carry on with the resumed session's unfinished one.
    let jobs: Vec<Option<&str>> = if tasks.is_empty() {
        vec![None]
    } else {
        tasks.iter().map(|t| Some(t.as_str())).collect()
    };
    let total = jobs.len();
    for (index, job) in jobs.into_iter().enumerate() {
        let agent = &mut started.agent;
        let work = async move {
            match job {
                Some(task) => agent.run_task(task).await,
                None => agent.continue_task().await,
            }
        };
        let (result, _) = signals::guard(work, &mut signals, &interrupt, &started.renderer).await;
        let later = if index + 1 < total {
            format!("; {} later task(s) not run", total - index - 1)
        } else {
            String::new()
        };
        match result {
            Ok(_) => {}
            Err(AgentError::OutputClosed) => return Ok(()),
            Err(AgentError::Interrupted { cause }) => {
                started.summary();
                let id = started.agent.session_id();
                started.info(&format!(
                    "interrupted by {cause}{later}; the session is saved: continue it with `cwl run --resume {id}`"
                ));
                // Unlocks and syncs the session before the process ends.
                drop(started);
                std::process::exit(EXIT_INTERRUPTED);
            }
            Err(AgentError::Provider(ProviderError::Auth {
                status, url, var, ..
            })) if started.keyless => {
                // No key was sent: the key is missing, a usage error.
                return Err(UsageError::new(format!(
                    "task {} of {total} failed{later}: authentication failed (HTTP {status}) at {url}, \
                     and no key was sent: set {var}",
                    index + 1
                ))
                .into());
            }
            Err(error) if !started.agent.has_responses() => {
                // Nothing was answered: no figures to sum up and nothing to
                // resume (`cwl sessions` lists such a session only with --all).
                bail!("task {} of {total} failed{later}: {error}", index + 1);
            }
            Err(error) => {
                started.summary();
                let advice = after_failure(&error, &started.agent, "cwl run");
                bail!(
                    "task {} of {total} failed{later}: {error}\n{advice}",
                    index + 1
                );
            }
        }
    }
    started.summary();
    Ok(())
}

/// With no task, `--resume ID` continues the session's unfinished task:
/// refuses, before anything is written, when there is none.
fn check_unfinished(args: &RunArgs) -> anyhow::Result<()> {
    let Some(name) = &args.agent.resume else {
        return Ok(());
    };
    let file = config::load(args.agent.config.as_deref())?;
    let dir = super::setup::session_dir(args.agent.session_dir.clone(), &file)?;
    let path = cwl_session::find(&dir, name)?;
    let loaded = cwl_session::read(&path)?;
    if cwl_session::unfinished_task(&loaded).is_none() {
        return Err(UsageError::new(format!(
            "no task given, and session {} has no unfinished task to continue (its last task ended with an answer): pass PROMPT or --task TEXT",
            loaded.info.id
        ))
        .into());
    }
    Ok(())
}

/// PROMPT, then each --task; with neither, the non-empty lines of stdin
/// when it is not a terminal and approvals do not read it (then, with
/// `--resume`, none: the unfinished task goes on). None at all only with
/// `--resume`.
fn tasks(args: &RunArgs) -> anyhow::Result<Vec<String>> {
    let mut tasks: Vec<String> = args.prompt.iter().chain(&args.tasks).cloned().collect();
    if tasks.is_empty() && !std::io::stdin().is_terminal() {
        let file = config::load(args.agent.config.as_deref())?;
        let approval = super::setup::approval_mode(&args.agent, &file)?;
        if approval == ApprovalMode::Never {
            for line in std::io::stdin().lock().lines() {
                let line =
                    line.map_err(|e| anyhow::anyhow!("cannot read tasks from stdin: {e}"))?;
                if !line.trim().is_empty() {
                    tasks.push(line);
                }
            }
        } else if args.agent.resume.is_none() {
            return Err(UsageError::new(format!(
                "no task given, and with --approval {approval} stdin carries the answers to approval questions, not tasks: pass PROMPT or --task TEXT"
            ))
            .into());
        }
    }
    if let Some(empty) = tasks.iter().position(|t| t.trim().is_empty()) {
        return Err(UsageError::new(format!("task {} is empty", empty + 1)).into());
    }
    if tasks.is_empty() && args.agent.resume.is_none() {
        return Err(UsageError::new(
            "no task given: pass PROMPT or --task TEXT, or pipe tasks on stdin (one per line); for an interactive session use `cwl chat`",
        )
        .into());
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_comes_first_then_each_task() {
        let args = RunArgs {
            prompt: Some("first".into()),
            tasks: vec!["second".into(), "third".into()],
            ..RunArgs::default()
        };
        assert_eq!(tasks(&args).unwrap(), ["first", "second", "third"]);
        let blank = RunArgs {
            tasks: vec!["ok".into(), "  ".into()],
            ..RunArgs::default()
        };
        assert_eq!(tasks(&blank).unwrap_err().to_string(), "task 2 is empty");
    }
}
