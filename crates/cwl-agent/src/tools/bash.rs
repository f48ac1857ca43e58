//! `bash`: run a shell command in the workspace, bounded in time and output.
//!
//! The command runs as `bash -c` in its own process group with stdout and
//! stderr on one pipe (so their interleaving is the program's own). When it
//! returns, times out or is dropped (the task was interrupted), the whole
//! group is killed, and on Linux also the processes that left it
//! (`setsid`, see [`reap`]), so background jobs and grandchildren cannot
//! outlive the call or hold the output pipe open. Its
//! environment is [`Secrets::child_env`](cwl_provider::secrets::Secrets::child_env):
//! no provider keys, nothing `env_deny` names. What it may write is set
//! by the [`sandbox`].

#[cfg(unix)]
mod reap;
pub mod sandbox;

#[cfg(all(test, target_os = "linux"))]
pub(crate) use reap::gone;

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::args::Args;
use super::error::ToolError;
use super::{ToolConfig, ToolOutput};
use sandbox::Sandbox;

/// The tool's name.
pub(crate) const NAME: &str = "bash";

/// How long to keep reading after the process group is gone; only a
/// process that escaped the group (e.g. via `setsid`) can hold the pipe open.
#[cfg(unix)]
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// The tool's definition for the model.
pub(crate) fn spec(cfg: &ToolConfig) -> cwl::ToolSpec {
    cwl::ToolSpec {
        name: NAME.to_owned(),
        description: format!(
            "Run a command with `bash -c` in the workspace directory; stdin is empty. Returns \
             stdout and stderr interleaved (at most {} bytes: head and tail are kept, the middle \
             is cut with a notice) and the exit code. Default timeout {} s. Background jobs are \
             killed when the command returns.{}",
            cfg.bash_max_bytes,
            cfg.bash_timeout.as_secs(),
            sandbox_note(cfg.sandbox)
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command line to run."},
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": cfg.bash_max_timeout.as_secs(),
                    "description": "Timeout in seconds."
                }
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    }
}

/// What the sandbox lets commands write, for the tool's description.
fn sandbox_note(mode: Sandbox) -> &'static str {
    match mode {
        Sandbox::Off => "",
        Sandbox::WorkspaceWrite => {
            " Sandboxed: commands may write only inside the workspace and the temp directory; \
             other writes fail with `Permission denied`. Reading is not restricted."
        }
        Sandbox::ReadOnly => {
            " Sandboxed read-only: every write to a file fails with `Permission denied` (the \
             workspace and temp included); /dev/null stays writable. Reading is not restricted."
        }
    }
}

/// Parses the command and the timeout.
fn parse(cfg: &ToolConfig, raw: &str) -> Result<(String, Duration), ToolError> {
    let args = Args::parse(NAME, raw, &["command", "timeout"])?;
    let command = args.string("command")?;
    if command.trim().is_empty() {
        return Err(args.error("command", "must not be empty"));
    }
    let timeout = match args.opt_f64("timeout")? {
        None => cfg.bash_timeout,
        Some(secs) => {
            let max = cfg.bash_max_timeout.as_secs_f64();
            if !(secs > 0.0 && secs <= max) {
                return Err(args.error(
                    "timeout",
                    &format!("is in seconds and must be in (0, {max}]; got {secs}"),
                ));
            }
            Duration::from_secs_f64(secs)
        }
    };
    Ok((command.to_owned(), timeout))
}

/// Runs the tool.
#[cfg(unix)]
pub(crate) async fn run(root: &Path, cfg: &ToolConfig, raw: &str) -> Result<ToolOutput, ToolError> {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    use std::sync::{Arc, Mutex};

    use tokio::io::AsyncReadExt;

    use super::cap::HeadTail;

    let (command, timeout) = parse(cfg, raw)?;
    let start_err = |e: std::io::Error| ToolError::Other(format!("cannot start bash: {e}"));
    let (tx, mut rx) = tokio::net::unix::pipe::pipe().map_err(start_err)?;
    let stdout = tx.into_blocking_fd().map_err(start_err)?;
    let stderr = stdout.try_clone().map_err(start_err)?;
    let marker = reap::new_marker();
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(&command)
        .current_dir(root)
        .env_clear()
        .envs(cfg.secrets.child_env())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("NO_COLOR", "1")
        .env(reap::MARKER, &marker)
        .process_group(0)
        .kill_on_drop(true);
    let spawned = sandbox::spawn(cfg.sandbox, root, &mut cmd);
    // The command holds our copies of the pipe's write end; drop them so the
    // reader sees end-of-file once the group is gone.
    drop(cmd);
    let mut child = spawned.map_err(|e| ToolError::Other(e.to_string()))?;
    let group = child
        .id()
        .and_then(group_of)
        .map(|group| GroupKiller { group, marker });

    let capture = Arc::new(Mutex::new(HeadTail::new(cfg.bash_max_bytes)));
    let sink = Arc::clone(&capture);
    let mut reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n @ 1..) = rx.read(&mut buf).await {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(&buf[..n]);
        }
    });

    let waited = tokio::time::timeout(timeout, child.wait()).await;
    if let Some(group) = &group {
        group.kill();
    }
    let status = match waited {
        Ok(status) => Some(status.map_err(|e| ToolError::Other(format!("bash failed: {e}")))?),
        Err(_) => {
            // Reap the killed shell; its status is not interesting.
            let _ = child.wait().await;
            None
        }
    };
    let drained = tokio::time::timeout(DRAIN_GRACE, &mut reader).await.is_ok();
    if !drained {
        reader.abort();
    }

    let captured = capture.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = if captured.is_empty() {
        "(no output)\n".to_owned()
    } else {
        captured.render()
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if !drained {
        out.push_str("[output pipe held open by a detached process; stopped reading]\n");
    }
    let is_error = match status {
        None => {
            out.push_str(&format!(
                "[timed out after {} s; the command's process group was killed]",
                timeout.as_secs_f64()
            ));
            true
        }
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => {
                out.push_str(&format!("[exit code {code}]"));
                code != 0
            }
            (None, Some(sig)) => {
                out.push_str(&format!("[killed by signal {sig}]"));
                true
            }
            (None, None) => {
                out.push_str("[exited without a status]");
                true
            }
        },
    };
    Ok(ToolOutput {
        content: out,
        is_error,
    })
}

/// Runs the tool (unsupported off Unix: no process groups).
#[cfg(not(unix))]
pub(crate) async fn run(
    _root: &Path,
    cfg: &ToolConfig,
    raw: &str,
) -> Result<ToolOutput, ToolError> {
    parse(cfg, raw)?;
    Err(ToolError::Other(
        "bash is only supported on Unix in this build".to_owned(),
    ))
}

#[cfg(unix)]
fn group_of(pid: u32) -> Option<rustix::process::Pid> {
    rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)
}

/// Kills a call's processes (its group and the marked ones), also when the
/// call is dropped midway.
#[cfg(unix)]
struct GroupKiller {
    group: rustix::process::Pid,
    marker: String,
}

#[cfg(unix)]
impl GroupKiller {
    fn kill(&self) {
        reap::kill_all(self.group, &self.marker);
    }
}

#[cfg(unix)]
impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}
