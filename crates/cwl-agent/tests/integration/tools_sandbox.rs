//! The `bash` sandbox (Landlock) through the toolbox and through `cwl run`:
//! `workspace-write` refuses writes outside the workspace and the temp
//! directory, `read-only` refuses them everywhere, `off` refuses none; the
//! cwl process itself is never restricted.
//!
//! The places "outside" are made under Cargo's target directory, which is
//! neither the workspace nor the temp directory. Where the kernel cannot
//! enforce the sandbox the tests print why and pass without checking
//! (set `CWL_REQUIRE_SANDBOX=1` to make that a failure instead).

#![cfg(target_os = "linux")]

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};

use cwl::{ToolCall, Usage};
use cwl_agent::cli::{self, AgentArgs, RunArgs};
use cwl_agent::tools::sandbox::{self, Support};
use cwl_agent::tools::{ExecContext, Sandbox, ToolConfig, ToolOutput, Toolbox};
use cwl_provider::ProviderKind;
use cwl_provider::testing::{Reply, ScriptedServer};
use serde_json::json;
use support::*;
use tempfile::TempDir;

/// What the kernel enforces of `mode`, or `None` (after saying why) when it
/// enforces nothing, so the test has nothing to check.
fn enforced(mode: Sandbox) -> Option<Support> {
    match sandbox::probe(mode, Path::new(env!("CARGO_TARGET_TMPDIR"))) {
        Support::Unavailable(why) => {
            assert!(
                std::env::var_os("CWL_REQUIRE_SANDBOX").is_none(),
                "CWL_REQUIRE_SANDBOX is set but the sandbox is unavailable: {why}"
            );
            eprintln!("skipped: the kernel cannot enforce the {mode} sandbox: {why}");
            None
        }
        support => Some(support),
    }
}

/// A directory neither in the workspace nor in the temp directory.
fn outside_dir() -> TempDir {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let temp = std::env::temp_dir().canonicalize().unwrap();
    assert!(
        !dir.path().canonicalize().unwrap().starts_with(&temp),
        "the test needs a directory outside the temp directory {}",
        temp.display()
    );
    dir
}

async fn bash(tb: &Toolbox, command: &str) -> ToolOutput {
    let call = ToolCall {
        id: "c1".into(),
        name: "bash".into(),
        arguments: json!({ "command": command }).to_string(),
    };
    tb.execute(&call, &ExecContext::default()).await
}

fn toolbox(mode: Sandbox) -> (TempDir, Toolbox) {
    let dir = outside_dir();
    let config = ToolConfig {
        sandbox: mode,
        ..ToolConfig::default()
    };
    let tb = Toolbox::new(dir.path(), config).unwrap();
    (dir, tb)
}

/// Asserts that `command` failed with the kernel's refusal: EACCES, or
/// EXDEV for a link that would give a file more rights than it has.
async fn refused(tb: &Toolbox, command: &str) {
    let out = bash(tb, command).await;
    assert!(out.is_error, "`{command}` was not refused: {}", out.content);
    assert!(
        out.content.contains("Permission denied")
            || out.content.contains("Invalid cross-device link"),
        "`{command}`: {}",
        out.content
    );
}

/// Asserts that `command` succeeded and returns its output.
async fn allowed(tb: &Toolbox, command: &str) -> String {
    let out = bash(tb, command).await;
    assert!(!out.is_error, "`{command}` failed: {}", out.content);
    out.content
}

fn q(path: &Path) -> String {
    format!("'{}'", path.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_write_confines_writes_to_the_workspace_and_temp() {
    let Some(support) = enforced(Sandbox::WorkspaceWrite) else {
        return;
    };
    let (work, tb) = toolbox(Sandbox::WorkspaceWrite);
    let outside = outside_dir();
    let (out, existing) = (outside.path(), outside.path().join("existing.txt"));
    fs::write(&existing, "keep me\n").unwrap();

    refused(&tb, &format!("echo x > {}", q(&out.join("new.txt")))).await;
    refused(&tb, &format!("echo x >> {}", q(&existing))).await;
    refused(&tb, &format!(": > {}", q(&existing))).await;
    refused(&tb, &format!("rm {}", q(&existing))).await;
    refused(&tb, &format!("mkdir {}", q(&out.join("d")))).await;
    refused(&tb, &format!("mv {} moved.txt", q(&existing))).await;
    refused(&tb, &format!("ln {} hard.txt", q(&existing))).await;
    refused(&tb, &format!("ln -s /etc/hostname {}", q(&out.join("l")))).await;
    refused(
        &tb,
        &format!("sh -c 'echo x > {}'", out.join("nested.txt").display()),
    )
    .await;
    refused(
        &tb,
        &format!("(echo x > {}) & wait $!", q(&out.join("bg.txt"))),
    )
    .await;
    std::os::unix::fs::symlink(out, work.path().join("escape")).unwrap();
    refused(&tb, "echo x > escape/through-link.txt").await;
    if support == Support::Full {
        refused(&tb, &format!("truncate -s 0 {}", q(&existing))).await;
    }
    let mut names: Vec<_> = fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["existing.txt"], "nothing was made outside");
    assert_eq!(fs::read_to_string(&existing).unwrap(), "keep me\n");

    let inside = allowed(
        &tb,
        "echo inside > a.txt && mkdir -p d && mv a.txt d/ && ln d/a.txt b.txt && cat b.txt",
    )
    .await;
    assert!(inside.contains("inside"), "{inside}");
    assert_eq!(
        fs::read_to_string(work.path().join("d/a.txt")).unwrap(),
        "inside\n"
    );
    let temp = allowed(
        &tb,
        "f=$(mktemp) && echo temp > \"$f\" && cat \"$f\" && rm \"$f\"",
    )
    .await;
    assert!(temp.contains("temp"), "{temp}");
    allowed(&tb, "echo quiet > /dev/null && echo out > /dev/stdout").await;
    let read = allowed(&tb, &format!("cat {}", q(&existing))).await;
    assert!(read.contains("keep me"), "reading stays allowed: {read}");
    let privs = allowed(&tb, "grep NoNewPrivs /proc/self/status").await;
    assert!(privs.contains("NoNewPrivs:\t1"), "{privs}");

    // Only the command was confined: this process and its threads still
    // write outside the workspace, and an unsandboxed toolbox too.
    for _ in 0..4 {
        tokio::task::spawn_blocking({
            let path = out.join("from-cwl.txt");
            move || fs::write(path, "cwl").unwrap()
        })
        .await
        .unwrap();
    }
    fs::write(out.join("from-test.txt"), "test").unwrap();
    let (_plain_dir, plain) = toolbox(Sandbox::Off);
    allowed(&plain, &format!("echo x > {}", q(&out.join("plain.txt")))).await;
    let own = fs::read_to_string("/proc/self/status").unwrap();
    let own = own.lines().find(|l| l.starts_with("NoNewPrivs")).unwrap();
    let privs = allowed(&plain, "grep NoNewPrivs /proc/self/status").await;
    assert!(privs.contains(own), "{privs} vs this process's {own}");
}

#[tokio::test]
async fn read_only_blocks_writes_in_the_workspace_and_temp() {
    if enforced(Sandbox::ReadOnly).is_none() {
        return;
    }
    let (work, tb) = toolbox(Sandbox::ReadOnly);
    fs::write(work.path().join("notes.txt"), "readable\n").unwrap();
    refused(&tb, "echo x > new.txt").await;
    refused(&tb, "echo x >> notes.txt").await;
    refused(&tb, "rm notes.txt").await;
    refused(&tb, "mkdir d").await;
    let temp_file = std::env::temp_dir().join(format!("cwl-ro-{}", std::process::id()));
    refused(&tb, &format!("echo x > {}", q(&temp_file))).await;
    assert!(!temp_file.exists());
    assert!(!work.path().join("new.txt").exists());
    assert_eq!(
        fs::read_to_string(work.path().join("notes.txt")).unwrap(),
        "readable\n"
    );
    let read = allowed(&tb, "cat notes.txt && ls && echo gone > /dev/null").await;
    assert!(read.contains("readable"), "{read}");
}

#[tokio::test]
async fn off_lets_commands_write_anywhere_the_user_may() {
    let (work, tb) = toolbox(Sandbox::Off);
    let outside = outside_dir();
    let target = outside.path().join("written.txt");
    allowed(
        &tb,
        &format!("echo x > {} && echo y > inside.txt", q(&target)),
    )
    .await;
    assert_eq!(fs::read_to_string(&target).unwrap(), "x\n");
    assert_eq!(
        fs::read_to_string(work.path().join("inside.txt")).unwrap(),
        "y\n"
    );
}

#[test]
fn the_tool_description_tells_the_model_about_the_sandbox() {
    let description = |mode| {
        let (_dir, tb) = toolbox(mode);
        let spec = tb.specs().into_iter().find(|s| s.name == "bash").unwrap();
        spec.description
    };
    assert!(description(Sandbox::WorkspaceWrite).contains("only inside the workspace"));
    assert!(description(Sandbox::ReadOnly).contains("every write"));
    assert!(!description(Sandbox::Off).contains("Sandboxed"));
}

/// `cwl run` in `work` against `server`, with this config file text and
/// `--sandbox` value; the error, if it failed.
fn cwl_run(
    server: &ScriptedServer,
    work: &Path,
    config: &str,
    flag: Option<Sandbox>,
) -> Result<(), anyhow::Error> {
    let sessions = tempfile::tempdir().unwrap();
    let config_path = sessions.path().join("config.toml");
    fs::write(&config_path, config).unwrap();
    cli::run_run(RunArgs {
        agent: AgentArgs {
            provider: Some(ProviderKind::OpenAi),
            model: Some("gpt-test".into()),
            base_url: Some(format!("{}/v1", server.url())),
            cwd: Some(work.to_owned()),
            session_dir: Some(sessions.path().to_owned()),
            config: Some(config_path),
            sandbox: flag,
            ..AgentArgs::default()
        },
        tasks: vec!["write two files".into()],
        prompt: None,
    })
}

/// A model that writes `outside` and then a file in the workspace, then
/// answers.
fn writer(outside: &Path) -> Vec<Reply> {
    let command = format!("echo x > {}; echo y > inside.txt", q(outside));
    vec![
        Reply::openai(
            &assistant(vec![call("c1", "bash", json!({ "command": command }))]),
            Usage::default(),
        ),
        Reply::openai(&assistant(vec![text("done")]), Usage::default()),
    ]
}

/// The tool result the model got back in the second request.
fn tool_result(server: &ScriptedServer) -> String {
    let body = server.requests()[1].json();
    let messages = body["messages"].as_array().unwrap();
    let result = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
    result["content"].as_str().unwrap().to_owned()
}

fn served(replies: Vec<Reply>) -> (tokio::runtime::Runtime, ScriptedServer) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(ScriptedServer::start(replies)).unwrap();
    (runtime, server)
}

#[test]
fn cwl_run_sandboxes_bash_by_default_and_as_configured() {
    if enforced(Sandbox::WorkspaceWrite).is_none() {
        return;
    }
    let outside = outside_dir();
    let cases: [(&str, &str, Option<Sandbox>, bool); 4] = [
        ("default", "", None, false),
        (
            "flag",
            "sandbox = \"off\"\n",
            Some(Sandbox::WorkspaceWrite),
            false,
        ),
        ("config off", "sandbox = \"off\"\n", None, true),
        (
            "flag off",
            "sandbox = \"read-only\"\n",
            Some(Sandbox::Off),
            true,
        ),
    ];
    for (case, config, flag, outside_written) in cases {
        let target: PathBuf = outside
            .path()
            .join(format!("{}.txt", case.replace(' ', "-")));
        let (_rt, server) = served(writer(&target));
        let work = outside_dir();
        cwl_run(&server, work.path(), config, flag).unwrap();
        assert_eq!(target.exists(), outside_written, "{case}");
        assert_eq!(
            fs::read_to_string(work.path().join("inside.txt")).unwrap(),
            "y\n",
            "{case}"
        );
        let result = tool_result(&server);
        assert_eq!(
            result.contains("Permission denied"),
            !outside_written,
            "{case}: {result}"
        );
    }

    let target = outside.path().join("read-only.txt");
    let (_rt, server) = served(writer(&target));
    let work = outside_dir();
    cwl_run(&server, work.path(), "sandbox = \"read-only\"\n", None).unwrap();
    assert!(!target.exists() && !work.path().join("inside.txt").exists());
    let result = tool_result(&server);
    assert_eq!(result.matches("Permission denied").count(), 2, "{result}");
}

#[test]
fn a_bad_sandbox_value_in_the_config_file_is_a_usage_error() {
    let (_rt, server) = served(vec![]);
    let work = outside_dir();
    let error = cwl_run(&server, work.path(), "sandbox = \"strict\"\n", None).unwrap_err();
    assert_eq!(cli::exit_code(&error), cli::USAGE, "{error:#}");
    let text = format!("{error:#}");
    assert!(text.contains("config file: sandbox"), "{text}");
    assert!(text.contains("\"strict\""), "{text}");
    assert!(server.requests().is_empty());
}

/// The converse of the tests above, for kernels without Landlock (run it
/// here under a seccomp filter that fails the Landlock system calls): a
/// sandbox asked for is refused before any request, the default one runs
/// without a sandbox, and a toolbox told to sandbox runs no command.
#[test]
fn without_landlock_an_asked_for_sandbox_is_refused_and_the_default_runs_unconfined() {
    let why = match sandbox::probe(
        Sandbox::WorkspaceWrite,
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    ) {
        Support::Unavailable(why) => why,
        support => {
            eprintln!("skipped: the kernel enforces the sandbox ({support:?})");
            return;
        }
    };
    let outside = outside_dir();
    let target = outside.path().join("unconfined.txt");
    let (_rt, server) = served(writer(&target));
    let work = outside_dir();
    for (config, flag) in [
        ("", Some(Sandbox::WorkspaceWrite)),
        ("sandbox = \"read-only\"\n", None),
    ] {
        let error = cwl_run(&server, work.path(), config, flag).unwrap_err();
        assert_eq!(cli::exit_code(&error), cli::USAGE, "{error:#}");
        let text = format!("{error:#}");
        assert!(text.contains("cannot be enforced"), "{text}");
        assert!(text.contains(&why), "{text}");
        assert!(text.contains("--sandbox off"), "{text}");
    }
    assert!(server.requests().is_empty());

    cwl_run(&server, work.path(), "", None).unwrap();
    assert!(target.exists(), "the default falls back to no sandbox");

    let (_dir, tb) = toolbox(Sandbox::WorkspaceWrite);
    let never = outside.path().join("never.txt");
    let command = format!("echo x > {}", q(&never));
    let out = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(bash(&tb, &command));
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content.contains("the command was not run"),
        "{}",
        out.content
    );
    assert!(out.content.contains(&why), "{}", out.content);
    assert!(!never.exists());
}
