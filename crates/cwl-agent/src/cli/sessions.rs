//! `cwl sessions`: a table (or JSON lines) of saved sessions.

use std::io::Write;

use std::path::Path;

use super::setup::session_dir;
use super::{SessionsArgs, SessionsCommand, ShowArgs};
use crate::agent::status::human_tokens;
use crate::config;
use cwl::shorten;
use cwl_session::SessionSummary;

pub(super) fn sessions(mut args: SessionsArgs) -> anyhow::Result<()> {
    // Flags given after the subcommand win over those before it (or in
    // the environment).
    if let Some(SessionsCommand::Show(show)) = &mut args.command {
        args.session_dir = show.session_dir.take().or(args.session_dir);
        args.config = show.config.take().or(args.config);
    }
    let file = config::load(args.config.as_deref())?;
    let dir = session_dir(args.session_dir, &file)?;
    if dir.exists() && !dir.is_dir() {
        return Err(super::UsageError::new(format!(
            "the session directory {} is a file, not a directory",
            dir.display()
        ))
        .into());
    }
    if let Some(SessionsCommand::Show(show)) = args.command {
        return show_one(&show, &dir);
    }
    let mut sessions = cwl_session::list(&dir)?;
    let listed = sessions.len();
    if !args.all {
        sessions.retain(|s| s.requests > 0);
    }
    let unanswered = listed - sessions.len();
    if args.limit > 0 {
        sessions.truncate(args.limit);
    }
    let text = if args.json {
        sessions
            .iter()
            .filter_map(|s| serde_json::to_string(s).ok())
            .map(|line| line + "\n")
            .collect()
    } else {
        let mut text = table(&sessions, &dir.display().to_string());
        if unanswered > 0 {
            text += &format!(
                "{unanswered} session(s) that never got a model response not shown (--all shows them)\n"
            );
        }
        text
    };
    // A closed pipe (`cwl sessions | head`) ends quietly.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(())
}

/// `cwl sessions show ID`: the session with that id, unique id prefix or
/// file path.
fn show_one(show: &ShowArgs, dir: &Path) -> anyhow::Result<()> {
    let path = cwl_session::find(dir, &show.id)?;
    let report = crate::show::report(&path)?;
    let text = if show.json {
        serde_json::to_string(&report)? + "\n"
    } else {
        crate::show::render(&report)
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(())
}

/// The sessions as an aligned table.
pub(crate) fn table(sessions: &[SessionSummary], dir: &str) -> String {
    if sessions.is_empty() {
        return format!("no sessions in {dir}\n");
    }
    let header = [
        "ID",
        "UPDATED",
        "TASKS",
        "CALLS",
        "COST",
        "BUDGET",
        "MODEL",
        "CWD",
        "FIRST TASK",
    ];
    let rows: Vec<[String; 9]> = sessions
        .iter()
        .map(|s| {
            [
                s.id.clone(),
                s.updated
                    .replace('T', " ")
                    .trim_end_matches('Z')
                    .to_string(),
                s.tasks.to_string(),
                s.requests.to_string(),
                s.cost_usd
                    .map_or_else(|| "unknown".to_string(), |cost| format!("${cost:.2}")),
                human_tokens(usize::try_from(s.budget).unwrap_or(usize::MAX)),
                s.model.clone(),
                shorten(&s.cwd, 40),
                s.first_task.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn table_aligns_columns() {
        let text = table(&[summary()], "/s");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("ID  "));
        assert!(lines[1].contains("2025-01-01 00:05:00"));
        assert!(
            lines[1].contains("$0.12")
                && lines[1].contains("80k")
                && lines[1].ends_with("fix the bug")
        );
        assert_eq!(lines[0].find("UPDATED"), lines[1].find("2025-01-01 00:05"));
        assert_eq!(table(&[], "/s"), "no sessions in /s\n");
        let unpriced = SessionSummary {
            cost_usd: None,
            ..summary()
        };
        let row = table(&[unpriced], "/s");
        assert!(row.lines().nth(1).unwrap().contains(" unknown "), "{row}");
        assert!(!row.contains('$'), "{row}");
    }

    fn summary() -> SessionSummary {
        SessionSummary {
            id: "20250101-000000-abcd".into(),
            path: PathBuf::from("/s/20250101-000000-abcd.jsonl"),
            created: "2025-01-01T00:00:00Z".into(),
            updated: "2025-01-01T00:05:00Z".into(),
            cwd: "/work".into(),
            provider: "openai".into(),
            model: "gpt-5".into(),
            budget: 80_000,
            tasks: 3,
            messages: 20,
            requests: 9,
            cost_usd: Some(0.1234),
            first_task: Some("fix the bug".into()),
            warning: None,
        }
    }
}
