//! The toolbox through its public API, on temporary workspaces.

use std::fs;
use std::path::Path;

use cwl::ToolCall;
use cwl_agent::tools::{ExecContext, ToolConfig, ToolOutput, Toolbox};
use serde_json::{Value, json};
use tempfile::TempDir;

fn workspace(config: ToolConfig) -> (TempDir, Toolbox) {
    let dir = tempfile::tempdir().unwrap();
    let tb = Toolbox::new(dir.path(), config).unwrap();
    (dir, tb)
}

fn put(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

async fn call_raw(tb: &Toolbox, ctx: &ExecContext, name: &str, raw: &str) -> ToolOutput {
    let call = ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: raw.into(),
    };
    tb.execute(&call, ctx).await
}

async fn call(tb: &Toolbox, name: &str, args: Value) -> ToolOutput {
    call_raw(tb, &ExecContext::default(), name, &args.to_string()).await
}

async fn ok(tb: &Toolbox, name: &str, args: Value) -> String {
    let out = call(tb, name, args).await;
    assert!(!out.is_error, "{name} failed: {}", out.content);
    out.content
}

async fn err(tb: &Toolbox, name: &str, args: Value) -> String {
    let out = call(tb, name, args).await;
    assert!(out.is_error, "{name} should fail: {}", out.content);
    out.content
}

/// A tree with a `.gitignore` (no git repository) hiding `target/` and `*.log`.
fn ignore_tree(root: &Path) {
    put(root, ".gitignore", "target/\n*.log\n");
    put(root, "src/main.rs", "fn main() {\n    needle();\n}\n");
    put(root, "src/lib.rs", "pub fn needle() {}\n");
    put(root, "notes.txt", "needle in notes\n");
    put(root, "debug.log", "needle in log\n");
    put(root, "target/out.rs", "needle in target\n");
    put(root, ".git/config", "needle in git\n");
}

#[tokio::test]
async fn specs_are_the_seven_tools_with_object_schemas() {
    let (_dir, tb) = workspace(ToolConfig::default());
    let specs = tb.specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["read", "write", "edit", "bash", "grep", "glob", "ls"]
    );
    assert_eq!(tb.registry().names(), names);
    assert!(!names.contains(&"delimiter"));
    for spec in &specs {
        assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
        assert_eq!(spec.parameters["additionalProperties"], false);
        for req in spec.parameters["required"].as_array().into_iter().flatten() {
            let field = req.as_str().unwrap();
            assert!(
                spec.parameters["properties"].get(field).is_some(),
                "{field}"
            );
        }
    }
    assert!(tb.is_mutating("write") && tb.is_mutating("edit"));
    assert!(!tb.is_mutating("bash") && !tb.is_mutating("read") && !tb.is_mutating("delimiter"));
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_are_explained() {
    let (_dir, tb) = workspace(ToolConfig::default());
    let ctx = ExecContext::default();
    let e = call_raw(&tb, &ctx, "find", "{}").await;
    assert!(e.is_error);
    assert_eq!(
        e.content,
        "unknown tool `find`; available tools: read, write, edit, bash, grep, glob, ls"
    );
    let e = call_raw(&tb, &ctx, "read", "{\"path\": ").await;
    assert!(
        e.is_error
            && e.content
                .starts_with("invalid arguments for `read`: arguments are not valid JSON")
    );
    let e = err(&tb, "write", json!({"path": "a"})).await;
    assert_eq!(
        e,
        "invalid arguments for `write`: field `content` is required (a string)"
    );
    let e = err(
        &tb,
        "edit",
        json!({"path": 3, "old_text": "a", "new_text": "b"}),
    )
    .await;
    assert_eq!(
        e,
        "invalid arguments for `edit`: field `path` must be a string, got a number"
    );
    let e = err(&tb, "grep", json!({"pattern": "x", "paths": "src"})).await;
    assert_eq!(
        e,
        "invalid arguments for `grep`: unknown field `paths` (accepted: pattern, path, glob)"
    );
    let e = err(&tb, "grep", json!({"pattern": "("})).await;
    assert!(
        e.starts_with("invalid arguments for `grep`: field `pattern` is not a valid regex"),
        "{e}"
    );
    let e = err(&tb, "glob", json!({"pattern": "[a"})).await;
    assert!(
        e.starts_with("invalid arguments for `glob`: field `pattern` is invalid"),
        "{e}"
    );
    let e = err(&tb, "bash", json!({"command": "true", "timeout": 120000})).await;
    assert!(
        e.contains("field `timeout` is in seconds and must be in (0, 600]; got 120000"),
        "{e}"
    );
    let e = err(&tb, "bash", json!({"command": "  "})).await;
    assert!(e.contains("field `command` must not be empty"), "{e}");
    // No arguments at all is fine for ls.
    assert!(!call_raw(&tb, &ctx, "ls", "").await.is_error);
}

#[tokio::test]
async fn toolbox_root_must_be_an_existing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let e = Toolbox::new(dir.path().join("missing"), ToolConfig::default()).unwrap_err();
    assert!(e.to_string().contains("cannot be used"), "{e}");
    put(dir.path(), "f", "");
    let e = Toolbox::new(dir.path().join("f"), ToolConfig::default()).unwrap_err();
    assert!(e.to_string().ends_with("is not a directory"), "{e}");
}

#[tokio::test]
async fn grep_respects_gitignore_and_sorts_by_path() {
    let (dir, tb) = workspace(ToolConfig::default());
    ignore_tree(dir.path());
    let out = ok(&tb, "grep", json!({"pattern": "needle"})).await;
    assert_eq!(
        out,
        "notes.txt\n1:needle in notes\n\nsrc/lib.rs\n1:pub fn needle() {}\n\nsrc/main.rs\n2:    needle();\n"
    );
    let out = ok(&tb, "grep", json!({"pattern": "needle", "glob": "*.rs"})).await;
    assert!(
        out.starts_with("src/lib.rs\n") && !out.contains("notes"),
        "{out}"
    );
    let out = ok(
        &tb,
        "grep",
        json!({"pattern": "needle", "path": "src", "glob": "m*.rs"}),
    )
    .await;
    assert_eq!(out, "src/main.rs\n2:    needle();\n");
    // A file named explicitly is searched even when ignored.
    let out = ok(
        &tb,
        "grep",
        json!({"pattern": "needle", "path": "debug.log"}),
    )
    .await;
    assert_eq!(out, "debug.log\n1:needle in log\n");
    let out = ok(&tb, "grep", json!({"pattern": "nothing-here"})).await;
    assert_eq!(out, "no matches for `nothing-here` in `.`\n");
    let e = err(&tb, "grep", json!({"pattern": "x", "path": "nope"})).await;
    assert_eq!(e, "`nope` does not exist");
}

#[tokio::test]
async fn grep_caps_matches_with_a_notice_and_skips_binaries() {
    let config = ToolConfig {
        grep_max_matches: 3,
        ..ToolConfig::default()
    };
    let (dir, tb) = workspace(config);
    put(dir.path(), "a.txt", "hit 1\nhit 2\n");
    put(dir.path(), "b.txt", "hit 3\nhit 4\nhit 5\n");
    fs::write(dir.path().join("c.bin"), b"hit\0binary").unwrap();
    let out = ok(&tb, "grep", json!({"pattern": "hit"})).await;
    assert_eq!(
        out,
        "a.txt\n1:hit 1\n2:hit 2\n\nb.txt\n1:hit 3\n[showing 3 of 5 matching lines in 2 files; \
         narrow the pattern, path or glob to see the rest]\n"
    );
}

#[tokio::test]
async fn glob_respects_gitignore_and_caps() {
    let (dir, tb) = workspace(ToolConfig {
        list_max_entries: 2,
        ..ToolConfig::default()
    });
    ignore_tree(dir.path());
    put(dir.path(), "src/deep/x.rs", "");
    let out = ok(&tb, "glob", json!({"pattern": "*.rs"})).await;
    assert_eq!(
        out,
        "src/deep/x.rs\nsrc/lib.rs\n[showing 2 of 3 paths; use a narrower pattern or path to see the rest]\n"
    );
    let out = ok(&tb, "glob", json!({"pattern": "*.rs", "path": "src/deep"})).await;
    assert_eq!(out, "src/deep/x.rs\n");
    let out = ok(&tb, "glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(out, "src/lib.rs\nsrc/main.rs\n");
    let out = ok(&tb, "glob", json!({"pattern": "*.log"})).await;
    assert_eq!(out, "no files match `*.log` in `.`\n");
    let e = err(&tb, "glob", json!({"pattern": "*", "path": "notes.txt"})).await;
    assert_eq!(e, "`notes.txt` is not a directory; use read to read it");
}

#[tokio::test]
async fn ls_respects_gitignore_counts_ignored_and_caps() {
    let (dir, tb) = workspace(ToolConfig::default());
    ignore_tree(dir.path());
    let out = ok(&tb, "ls", json!({})).await;
    assert_eq!(
        out,
        ".gitignore\nnotes.txt\nsrc/\n[3 ignored entries not shown (.gitignore, .git)]\n"
    );
    assert_eq!(
        ok(&tb, "ls", json!({"path": "src"})).await,
        "lib.rs\nmain.rs\n"
    );

    let (dir, tb) = workspace(ToolConfig {
        list_max_entries: 2,
        ..ToolConfig::default()
    });
    for name in ["c", "a", "b"] {
        put(dir.path(), name, "");
    }
    assert_eq!(
        ok(&tb, "ls", json!({"path": "."})).await,
        "a\nb\n[showing 2 of 3 entries; use glob or a subdirectory to see the rest]\n"
    );
    assert_eq!(
        err(&tb, "ls", json!({"path": "a"})).await,
        "`a` is not a directory; use read to read it"
    );
    assert_eq!(
        err(&tb, "ls", json!({"path": "zz"})).await,
        "`zz` does not exist"
    );
}

#[tokio::test]
async fn read_reports_how_to_continue() {
    let (dir, tb) = workspace(ToolConfig {
        read_max_lines: 2000,
        ..ToolConfig::default()
    });
    let text: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
    put(dir.path(), "big.txt", &text);
    let out = ok(&tb, "read", json!({"path": "big.txt"})).await;
    assert!(out.starts_with("1\tline 1\n"));
    assert!(out.ends_with("2000\tline 2000\n[lines 1-2000 of 2500; use offset=2001 to continue]"));
    let out = ok(&tb, "read", json!({"path": "big.txt", "offset": 2001})).await;
    assert!(out.starts_with("2001\tline 2001\n") && out.ends_with("2500\tline 2500\n"));
    // Reads outside the workspace are allowed.
    let other = tempfile::tempdir().unwrap();
    put(other.path(), "o.txt", "outside\n");
    let out = ok(&tb, "read", json!({"path": other.path().join("o.txt")})).await;
    assert_eq!(out, "1\toutside\n");
}

#[tokio::test]
async fn write_creates_parent_directories_and_reports() {
    let (dir, tb) = workspace(ToolConfig::default());
    let out = ok(
        &tb,
        "write",
        json!({"path": "a/b/c.txt", "content": "x\ny\n"}),
    )
    .await;
    assert_eq!(out, "created `a/b/c.txt` (2 lines, 4 bytes)");
    assert_eq!(
        fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
        "x\ny\n"
    );
    let out = ok(&tb, "write", json!({"path": "a/b/c.txt", "content": ""})).await;
    assert_eq!(out, "overwrote `a/b/c.txt` (0 lines, 0 bytes)");
    assert_eq!(
        err(&tb, "write", json!({"path": "a", "content": ""})).await,
        "`a` is a directory; use ls to list it"
    );
}

#[tokio::test]
async fn edit_success_not_found_and_ambiguous() {
    let (dir, tb) = workspace(ToolConfig::default());
    put(
        dir.path(),
        "f.rs",
        "fn a() {\n    one();\n}\nfn b() {\n    two();\n}\nfn c() {\n    two();\n}\n",
    );
    let out = ok(
        &tb,
        "edit",
        json!({"path": "f.rs", "old_text": "    one();\n", "new_text": "    uno();\n    dos();\n"}),
    )
    .await;
    assert_eq!(
        out,
        "edited `f.rs`: replaced 1 lines with 2 lines at line 2"
    );
    assert!(
        fs::read_to_string(dir.path().join("f.rs"))
            .unwrap()
            .starts_with("fn a() {\n    uno();\n    dos();\n}\n")
    );

    let e = err(
        &tb,
        "edit",
        json!({"path": "f.rs", "old_text": "two();", "new_text": "x"}),
    )
    .await;
    assert_eq!(
        e,
        "`old_text` is ambiguous: it matches 2 times in `f.rs` (at lines 6, 9); include more \
         surrounding lines to make it unique"
    );
    let e = err(
        &tb,
        "edit",
        json!({"path": "f.rs", "old_text": "three();", "new_text": "x"}),
    )
    .await;
    assert_eq!(
        e,
        "`old_text` was not found in `f.rs`; read the file and copy the exact text, including whitespace"
    );
    let e = err(
        &tb,
        "edit",
        json!({"path": "f.rs", "old_text": "fn b() {\ntwo();", "new_text": "x"}),
    )
    .await;
    assert!(
        e.contains("lines 5-6 match when leading/trailing whitespace is ignored"),
        "{e}"
    );
    let e = err(
        &tb,
        "edit",
        json!({"path": "f.rs", "old_text": "", "new_text": "x"}),
    )
    .await;
    assert!(e.contains("field `old_text` must not be empty"), "{e}");
    let e = err(
        &tb,
        "edit",
        json!({"path": "nope.rs", "old_text": "a", "new_text": "b"}),
    )
    .await;
    assert_eq!(e, "`nope.rs` does not exist");
}

#[tokio::test]
async fn edit_matches_crlf_files_with_lf_text() {
    let (dir, tb) = workspace(ToolConfig::default());
    put(dir.path(), "w.txt", "a\r\nb\r\nc\r\n");
    ok(
        &tb,
        "edit",
        json!({"path": "w.txt", "old_text": "a\nb", "new_text": "A\nB"}),
    )
    .await;
    assert_eq!(
        fs::read_to_string(dir.path().join("w.txt")).unwrap(),
        "A\r\nB\r\nc\r\n"
    );
}

#[tokio::test]
async fn mutations_outside_the_workspace_are_refused_unless_allowed() {
    let (dir, tb) = workspace(ToolConfig::default());
    let other = tempfile::tempdir().unwrap();
    put(other.path(), "o.txt", "old");
    let outside = other.path().join("o.txt");
    let e = err(&tb, "write", json!({"path": outside, "content": "new"})).await;
    assert!(
        e.starts_with("write refused: `") && e.ends_with("writes outside it are disabled"),
        "{e}"
    );
    let e = err(
        &tb,
        "edit",
        json!({"path": outside, "old_text": "old", "new_text": "new"}),
    )
    .await;
    assert!(e.starts_with("edit refused: `"), "{e}");
    let e = err(
        &tb,
        "write",
        json!({"path": "sub/../../escape.txt", "content": "x"}),
    )
    .await;
    assert!(e.starts_with("write refused: `"), "{e}");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(other.path(), dir.path().join("link")).unwrap();
        let e = err(&tb, "write", json!({"path": "link/o.txt", "content": "x"})).await;
        assert!(e.starts_with("write refused: `"), "{e}");
    }
    assert_eq!(fs::read_to_string(&outside).unwrap(), "old");

    let tb = Toolbox::new(
        dir.path(),
        ToolConfig {
            allow_outside_writes: true,
            ..ToolConfig::default()
        },
    )
    .unwrap();
    ok(
        &tb,
        "edit",
        json!({"path": outside, "old_text": "old", "new_text": "new"}),
    )
    .await;
    assert_eq!(fs::read_to_string(&outside).unwrap(), "new");
}

#[tokio::test]
async fn mutations_inside_exploration_are_refused_unless_allowed() {
    let (dir, tb) = workspace(ToolConfig::default());
    put(dir.path(), "f.txt", "a");
    let ctx = ExecContext::exploring("survey");
    let out = call_raw(&tb, &ctx, "write", r#"{"path":"g.txt","content":"x"}"#).await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "write is not allowed inside exploration episode `survey`: end it with a description and \
         start an act episode that depends on it"
    );
    let out = call_raw(
        &tb,
        &ctx,
        "edit",
        r#"{"path":"f.txt","old_text":"a","new_text":"b"}"#,
    )
    .await;
    assert!(
        out.is_error
            && out
                .content
                .starts_with("edit is not allowed inside exploration episode `survey`")
    );
    assert!(!dir.path().join("g.txt").exists());
    // Reading and running commands stay allowed.
    assert!(
        !call_raw(&tb, &ctx, "read", r#"{"path":"f.txt"}"#)
            .await
            .is_error
    );
    assert!(
        !call_raw(&tb, &ctx, "bash", r#"{"command":"true"}"#)
            .await
            .is_error
    );

    let tb = Toolbox::new(
        dir.path(),
        ToolConfig {
            allow_writes_in_exploration: true,
            ..ToolConfig::default()
        },
    )
    .unwrap();
    assert!(
        !call_raw(&tb, &ctx, "write", r#"{"path":"g.txt","content":"x"}"#)
            .await
            .is_error
    );
}

#[tokio::test]
async fn outputs_are_deterministic() {
    let (dir, tb) = workspace(ToolConfig::default());
    ignore_tree(dir.path());
    for (name, args) in [
        ("grep", json!({"pattern": "e"})),
        ("glob", json!({"pattern": "**/*"})),
        ("ls", json!({})),
    ] {
        let first = ok(&tb, name, args.clone()).await;
        assert_eq!(first, ok(&tb, name, args).await);
    }
}

#[cfg(unix)]
mod bash {
    use super::*;

    #[tokio::test]
    async fn runs_in_the_workspace_and_reports_exit_codes() {
        let (dir, tb) = workspace(ToolConfig::default());
        let root = fs::canonicalize(dir.path()).unwrap();
        let out = ok(
            &tb,
            "bash",
            json!({"command": "pwd; echo err >&2; echo out"}),
        )
        .await;
        assert_eq!(out, format!("{}\nerr\nout\n[exit code 0]", root.display()));
        let out = call(&tb, "bash", json!({"command": "echo -n partial; exit 3"})).await;
        assert!(out.is_error);
        assert_eq!(out.content, "partial\n[exit code 3]");
        assert_eq!(
            ok(&tb, "bash", json!({"command": "true"})).await,
            "(no output)\n[exit code 0]"
        );
        let out = call(&tb, "bash", json!({"command": "kill -9 $$"})).await;
        assert!(out.is_error);
        assert_eq!(out.content, "(no output)\n[killed by signal 9]");
    }

    #[tokio::test]
    async fn output_is_capped_head_and_tail() {
        let (_dir, tb) = workspace(ToolConfig {
            bash_max_bytes: 200,
            ..ToolConfig::default()
        });
        let out = ok(&tb, "bash", json!({"command": "seq 1 1000"})).await;
        let full: String = (1..=1000).map(|i| format!("{i}\n")).collect();
        assert!(out.starts_with("1\n2\n3\n"), "{out}");
        assert!(out.ends_with("999\n1000\n[exit code 0]"), "{out}");
        let kept: Vec<&str> = out.lines().filter(|l| l.parse::<u32>().is_ok()).collect();
        let kept_bytes: usize = kept.iter().map(|l| l.len() + 1).sum();
        let notice = format!(
            "[… {} lines ({} bytes) omitted …]",
            1000 - kept.len(),
            full.len() - kept_bytes
        );
        assert!(out.contains(&notice), "{out}");
        assert!(out.len() < 300, "{out}");
    }

    /// Processes of `pgid` that are still running (zombies count as dead).
    #[cfg(target_os = "linux")]
    fn live_members(pgid: i32) -> Vec<i32> {
        let mut live = Vec::new();
        for entry in fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // Fields after the parenthesised command: state ppid pgrp ...
            let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
                live.push(pid);
            }
        }
        live
    }

    /// The live members of `pgid` once SIGKILL has had time to land: the
    /// signal is delivered asynchronously, so a loaded machine may still
    /// list a member for a moment after the tool returns.
    fn members_after_kill(pgid: i32) -> Vec<i32> {
        let mut live = live_members(pgid);
        for _ in 0..100 {
            if live.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            live = live_members(pgid);
        }
        live
    }

    fn numbers_after(out: &str, tag: &str) -> Vec<i32> {
        out.lines()
            .filter_map(|l| l.strip_prefix(tag))
            .map(|n| n.trim().parse().unwrap())
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let (_dir, tb) = workspace(ToolConfig::default());
        let command = "sleep 100 & echo \"child $!\"; (sleep 100; echo late) & echo \"child $!\"; \
                       echo \"shell $$\"; sleep 100";
        let out = call(&tb, "bash", json!({"command": command, "timeout": 2})).await;
        assert!(out.is_error);
        assert!(
            out.content
                .ends_with("[timed out after 2 s; the command's process group was killed]"),
            "{}",
            out.content
        );
        assert!(!out.content.contains("late"));
        let shell = numbers_after(&out.content, "shell ");
        let children = numbers_after(&out.content, "child ");
        assert_eq!((shell.len(), children.len()), (1, 2), "{}", out.content);
        assert_eq!(members_after_kill(shell[0]), Vec::<i32>::new());
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn background_jobs_die_when_the_command_returns() {
        let (_dir, tb) = workspace(ToolConfig::default());
        let out = ok(
            &tb,
            "bash",
            json!({"command": "sleep 100 & echo \"shell $$\""}),
        )
        .await;
        assert!(out.ends_with("[exit code 0]"), "{out}");
        let shell = numbers_after(&out, "shell ");
        assert_eq!(members_after_kill(shell[0]), Vec::<i32>::new());
    }

    #[tokio::test]
    async fn a_detached_process_holding_the_pipe_does_not_hang_the_call() {
        if std::process::Command::new("setsid")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipped: no setsid");
            return;
        }
        let (_dir, tb) = workspace(ToolConfig::default());
        // The loop waits until the detached shell has left the group.
        let command = "setsid bash -c 'echo $$ > detached.pid; exec sleep 30' & \
                       until [ -s detached.pid ]; do sleep 0.01; done; \
                       echo \"child $(cat detached.pid)\"";
        let started = std::time::Instant::now();
        let out = ok(&tb, "bash", json!({ "command": command })).await;
        let pids = numbers_after(&out, "child ");
        assert_eq!(pids.len(), 1, "{out}");
        // On Linux the detached process carries the call's marker and is
        // killed with the group, which closes the pipe; elsewhere reading
        // stops after a grace period.
        #[cfg(target_os = "linux")]
        {
            assert!(
                out.ends_with(
                    "child {}\n[exit code 0]"
                        .replace("{}", &pids[0].to_string())
                        .as_str()
                ),
                "{out}"
            );
            assert!(
                started.elapsed() < std::time::Duration::from_secs(1),
                "no grace period was needed"
            );
            assert!(
                crate::support::gone(pids[0]),
                "the setsid process was killed with the call"
            );
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = started;
            assert!(
                out.ends_with(
                    "[output pipe held open by a detached process; stopped reading]\n[exit code 0]"
                ),
                "{out}"
            );
        }
        for pid in pids {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
    }
}
