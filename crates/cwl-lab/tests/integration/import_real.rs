//! Imports every real session log in `/work/shared/traces` (when present),
//! and the Claude Code and Codex logs under `$CWL_CLIENT_LOGS` (when set),
//! and checks the importers' guarantees on them.

use crate::import_support;

use std::path::{Path, PathBuf};

use cwl::Message;
use cwl_lab::import::{self, Format};
use import_support::{assert_paired, run};

fn traces() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipped: no real traces at {}", dir.display());
        None
    }
}

fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

/// Imports one real file and checks it; returns its stats for the summary.
fn check(path: &Path, expected: Format) {
    let imported = import::open(path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(imported.meta().format, expected, "{}", path.display());
    let imported = run(imported);
    let stats = imported.stats;
    assert!(
        stats.assistant_messages > 0,
        "{}: no assistant message",
        path.display()
    );
    assert_paired(&imported.messages);
    assert_eq!(stats.tool_calls, stats.tool_results, "{}", path.display());
    assert_eq!(stats.used + stats.ignored + stats.rejected, stats.records);
    let records = if expected.is_document() {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        doc["messages"].as_array().map_or(0, Vec::len) as u64
    } else {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count() as u64
    };
    assert_eq!(
        stats.records,
        records,
        "{}: every record read",
        path.display()
    );
    // Every rejected record has its own warning.
    assert!(stats.warnings >= stats.rejected);
    let user = imported
        .messages
        .iter()
        .filter(|m| matches!(m, Message::User { .. }))
        .count();
    println!(
        "{}: {} records ({} used, {} ignored, {} rejected), {} messages ({} assistant, {} user), {} tool calls, {} synthetic results, {} dropped results, {} compactions, {} warnings",
        path.file_name().unwrap().to_string_lossy(),
        stats.records,
        stats.used,
        stats.ignored,
        stats.rejected,
        stats.messages,
        stats.assistant_messages,
        user,
        stats.tool_calls,
        stats.synthetic_results,
        stats.dropped_results,
        stats.compactions,
        stats.warnings,
    );
    for warning in &imported.warnings {
        println!("  warning: {warning}");
    }
}

#[test]
fn real_pi_sessions_import_fully() {
    let Some(dir) = traces() else { return };
    let files = files(&dir.join("pi"), ".jsonl");
    if files.is_empty() {
        println!("skipped: no pi sessions");
    }
    for path in files {
        check(&path, Format::Pi);
    }
}

#[test]
fn real_mini_swe_agent_trajectories_import_fully() {
    let Some(dir) = traces() else { return };
    let files = files(&dir.join("mini-swe-agent"), ".traj.json");
    if files.is_empty() {
        println!("skipped: no mini-swe-agent trajectories");
    }
    for path in files {
        check(&path, Format::MiniSweAgent);
    }
}

/// Every `.jsonl` file under `dir`, sorted.
fn jsonl_tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "jsonl") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Claude Code and Codex logs (a directory tree, e.g. copies of
/// `~/.claude/projects` and `~/.codex/sessions`): every line is understood
/// (no rejected record, so no warning about the log's own content).
#[test]
fn real_client_logs_import_with_every_line_understood() {
    let Some(dir) = std::env::var_os("CWL_CLIENT_LOGS") else {
        println!("skipped: CWL_CLIENT_LOGS is not set");
        return;
    };
    let files = jsonl_tree(Path::new(&dir));
    if files.is_empty() {
        println!("skipped: no .jsonl under {}", Path::new(&dir).display());
    }
    for path in files {
        let format = import::detect(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(format, Format::ClaudeCode | Format::Codex),
            "{}: detected as {format:?}",
            path.display()
        );
        check(&path, format);
        let stats = run(import::open(&path).unwrap()).stats;
        assert_eq!(stats.rejected, 0, "{}: rejected lines", path.display());
    }
}
