//! Imports every real session log in `/work/shared/traces` (when present)
//! and checks the importers' guarantees on them.

mod import_support;

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
