//! `cwl run`: tasks in order, one session, then a summary.

use std::io::{BufRead, IsTerminal};

use anyhow::bail;

use super::RunArgs;
use super::advice::after_failure;
use super::exit::UsageError;
use super::setup::start;
use crate::agent::AgentError;

pub(super) async fn run(args: RunArgs) -> anyhow::Result<()> {
    let tasks = tasks(&args)?;
    let mut started = start(&args.agent)?;
    let total = tasks.len();
    for (index, task) in tasks.iter().enumerate() {
        match started.agent.run_task(task).await {
            Ok(_) => {}
            Err(AgentError::OutputClosed) => return Ok(()),
            Err(error) => {
                started.summary();
                let advice = after_failure(&error, &started.agent, "cwl run");
                let hint = if index + 1 < total {
                    format!("; {} later task(s) not run", total - index - 1)
                } else {
                    String::new()
                };
                bail!(
                    "task {} of {total} failed{hint}: {error}\n{advice}",
                    index + 1
                );
            }
        }
    }
    started.summary();
    Ok(())
}

/// PROMPT, then each --task; with neither, the non-empty lines of stdin
/// when it is not a terminal.
fn tasks(args: &RunArgs) -> anyhow::Result<Vec<String>> {
    let mut tasks: Vec<String> = args.prompt.iter().chain(&args.tasks).cloned().collect();
    if tasks.is_empty() && !std::io::stdin().is_terminal() {
        for line in std::io::stdin().lock().lines() {
            let line = line.map_err(|e| anyhow::anyhow!("cannot read tasks from stdin: {e}"))?;
            if !line.trim().is_empty() {
                tasks.push(line);
            }
        }
    }
    if let Some(empty) = tasks.iter().position(|t| t.trim().is_empty()) {
        return Err(UsageError::new(format!("task {} is empty", empty + 1)).into());
    }
    if tasks.is_empty() {
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
