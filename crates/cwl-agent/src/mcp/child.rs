//! Stdio MCP servers as child processes: each in its own process group
//! (Ctrl-C at the terminal reaches cwl, not them), killed with the whole
//! group when the agent lets go of it, or by [`kill_all`] when the process
//! exits at once.

use std::sync::{Arc, Mutex};

/// The process groups of the servers running now.
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// A running stdio server; dropping it kills its process group.
pub(crate) struct ServerProcess {
    child: tokio::process::Child,
    /// Its process id, which is also its process group's.
    pid: Option<u32>,
    /// The last output it wrote on stderr, for error messages.
    stderr: Arc<Mutex<String>>,
}

/// Bytes of a server's stderr kept for error messages.
const STDERR_TAIL: usize = 2000;

impl ServerProcess {
    /// Takes over a spawned `child` (spawned with piped stdio, in its own
    /// process group); returns it with its stdout and stdin.
    pub(crate) fn adopt(
        mut child: tokio::process::Child,
    ) -> (
        ServerProcess,
        tokio::process::ChildStdout,
        tokio::process::ChildStdin,
    ) {
        let stdout = child.stdout.take().expect("stdout is piped");
        let stdin = child.stdin.take().expect("stdin is piped");
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt as _;
                let mut buffer = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buffer).await {
                    if n == 0 {
                        break;
                    }
                    let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                    tail.push_str(&String::from_utf8_lossy(&buffer[..n]));
                    if tail.len() > STDERR_TAIL {
                        let mut cut = tail.len() - STDERR_TAIL;
                        while !tail.is_char_boundary(cut) {
                            cut += 1;
                        }
                        tail.drain(..cut);
                    }
                }
            });
        }
        let pid = child.id();
        lock().extend(pid);
        (ServerProcess { child, pid, stderr }, stdout, stdin)
    }

    /// What is known of why it failed: its exit status if it has ended,
    /// and the last lines it wrote on stderr.
    pub(crate) async fn failure(&mut self) -> String {
        // Give a dying server a moment to finish its message.
        let status =
            tokio::time::timeout(std::time::Duration::from_millis(300), self.child.wait()).await;
        let mut text = match status {
            Ok(Ok(status)) => format!("; it exited ({status})"),
            _ => String::new(),
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let stderr = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        let stderr = stderr.trim();
        if !stderr.is_empty() {
            text.push_str("; its stderr ends: ");
            text.push_str(stderr);
        }
        text
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            lock().retain(|&live| live != pid);
        }
        // Once reaped (see `failure`) its id may be reused: only a child
        // not yet waited for still owns its group id for sure.
        if let Some(pid) = self.child.id() {
            kill_group(pid);
        }
        let _ = self.child.start_kill();
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<u32>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kills every stdio server still running (before `process::exit`, which
/// runs no destructors).
pub fn kill_all() {
    for pid in lock().drain(..) {
        kill_group(pid);
    }
}

#[cfg(unix)]
fn kill_group(pid: u32) {
    use rustix::process::{Pid, Signal, kill_process_group};
    if let Some(group) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = kill_process_group(group, Signal::KILL);
    }
}

#[cfg(not(unix))]
fn kill_group(_pid: u32) {}
