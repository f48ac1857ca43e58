//! One-line descriptions of tool calls, results and evictions.

use cwl::shorten;
use cwl::{EpisodeReport, Level};
use serde_json::Value;

use crate::agent::status::human_tokens;

/// A tool call as a short line: `grep "fn login" src`, `bash $ cargo test`.
pub fn call(name: &str, arguments: &str) -> String {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let field = |key: &str| args.get(key).and_then(Value::as_str).map(one_line);
    let number = |key: &str| args.get(key).and_then(Value::as_u64);
    let described = match name {
        "read" => field("path").map(|path| match (number("offset"), number("limit")) {
            (Some(offset), Some(limit)) => format!("{path}:{offset}+{limit}"),
            (Some(offset), None) => format!("{path}:{offset}"),
            (None, Some(limit)) => format!("{path} (first {limit} lines)"),
            (None, None) => path,
        }),
        "write" => field("path").map(|path| {
            let lines = args
                .get("content")
                .and_then(Value::as_str)
                .map_or(0, |c| c.lines().count());
            format!("{path} ({lines} lines)")
        }),
        "edit" | "ls" => field("path").or_else(|| (name == "ls").then(|| ".".to_string())),
        "bash" => field("command").map(|c| format!("$ {c}")),
        "grep" => field("pattern").map(|pattern| {
            let mut out = format!("{pattern:?}");
            if let Some(path) = field("path") {
                out.push(' ');
                out.push_str(&path);
            }
            if let Some(glob) = field("glob") {
                out.push_str(&format!(" ({glob})"));
            }
            out
        }),
        "glob" => field("pattern"),
        _ => None,
    };
    let detail = described.unwrap_or_else(|| one_line(arguments));
    shorten(&format!("{name} {detail}"), 100)
}

/// A recall call: `↺ recall find-auth · 42 lines`, or its error.
pub fn recall(arguments: &str, content: &str, is_error: bool) -> String {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let name = args
        .get("episode")
        .and_then(Value::as_str)
        .map_or_else(|| one_line(arguments), one_line);
    let mark = if is_error { "  ✗" } else { "↺" };
    shorten(
        &format!("{mark} recall {name} · {}", result(content, is_error)),
        120,
    )
}

/// A tool result in a few words: `12 lines`, or the first line of an error.
pub fn result(content: &str, is_error: bool) -> String {
    if is_error {
        return shorten(&one_line(content), 100);
    }
    match content.lines().count() {
        0 => "no output".to_string(),
        1 => shorten(content.trim(), 90),
        n => format!("{n} lines"),
    }
}

/// An episode touched by an eviction pass: `evicted act patch-login
/// (−12.4k)` when fully removed, else `stripped expl find-auth: bulk,
/// intermediate (−1.2k)`.
pub fn eviction(episode: &EpisodeReport) -> String {
    let tokens: usize = episode.levels.iter().map(|l| l.tokens).sum();
    let removed = episode.levels.iter().any(|l| l.level == Level::Removed);
    let name = if episode.annotated {
        episode.name.clone()
    } else {
        format!("{} (unannotated)", episode.name)
    };
    if removed {
        format!(
            "evicted {} {name} (−{})",
            episode.kind,
            human_tokens(tokens)
        )
    } else {
        let levels: Vec<&str> = episode.levels.iter().map(|l| l.level.label()).collect();
        format!(
            "stripped {} {name}: {} (−{})",
            episode.kind,
            levels.join(", "),
            human_tokens(tokens)
        )
    }
}

/// A gauge of `used` against `budget`: `▕██████░░░░▏ 3.1k / 4k`.
pub fn gauge(used: usize, budget: usize) -> String {
    const CELLS: usize = 10;
    let filled = if budget == 0 {
        CELLS
    } else {
        (used * CELLS).div_ceil(budget).min(CELLS)
    };
    format!(
        "▕{}{}▏ {} / {}",
        "█".repeat(filled),
        "░".repeat(CELLS - filled),
        human_tokens(used),
        human_tokens(budget)
    )
}

/// An episode's dependencies as a suffix, ` ← a, b` (empty when none).
pub fn dependencies<S: AsRef<str>>(names: &[S]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    format!(" ← {}", names.join(", "))
}

/// Text on one line: newlines and runs of spaces become one space.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{EpisodeKind, LevelReport};

    #[test]
    fn calls_name_their_key_argument() {
        assert_eq!(
            call("read", r#"{"path":"src/a.rs","offset":40,"limit":20}"#),
            "read src/a.rs:40+20"
        );
        assert_eq!(
            call("write", r#"{"path":"a.txt","content":"x\ny\n"}"#),
            "write a.txt (2 lines)"
        );
        assert_eq!(
            call("bash", r#"{"command":"cargo test\n  --all"}"#),
            "bash $ cargo test --all"
        );
        assert_eq!(
            call("grep", r#"{"pattern":"fn login","path":"src"}"#),
            "grep \"fn login\" src"
        );
        assert_eq!(call("ls", "{}"), "ls .");
        assert_eq!(call("mystery", "not json"), "mystery not json");
        assert!(call("bash", &format!(r#"{{"command":"{}"}}"#, "x".repeat(300))).ends_with('…'));
    }

    #[test]
    fn results_and_evictions_are_short() {
        assert_eq!(result("a\nb\nc\n", false), "3 lines");
        assert_eq!(result("", false), "no output");
        assert_eq!(
            result("error: bad path\nmore", true),
            "error: bad path more"
        );
        let removed = EpisodeReport {
            name: "patch-login".into(),
            kind: EpisodeKind::Act,
            annotated: true,
            levels: vec![
                LevelReport {
                    level: Level::Intermediate,
                    tokens: 10_000,
                    tool_calls: 2,
                    blocks: 0,
                },
                LevelReport {
                    level: Level::Removed,
                    tokens: 2_400,
                    tool_calls: 0,
                    blocks: 3,
                },
            ],
        };
        assert_eq!(eviction(&removed), "evicted act patch-login (−12.4k)");
        let stripped = EpisodeReport {
            name: "find".into(),
            kind: EpisodeKind::Expl,
            annotated: true,
            levels: vec![LevelReport {
                level: Level::Bulk,
                tokens: 300,
                tool_calls: 1,
                blocks: 0,
            }],
        };
        assert_eq!(
            eviction(&stripped),
            "stripped expl find: bulk output (−300)"
        );
    }

    #[test]
    fn gauge_fills_in_proportion() {
        assert_eq!(gauge(3_100, 4_000), "▕████████░░▏ 3.1k / 4k");
        assert_eq!(gauge(0, 4_000), "▕░░░░░░░░░░▏ 0 / 4k");
        assert_eq!(gauge(9_000, 4_000), "▕██████████▏ 9k / 4k");
    }
}
