//! The process's stdin as lines, shared by everything that reads it: chat
//! tasks and approval answers.
//!
//! Each line is read on a blocking thread. A read that was given up (its
//! future dropped by Ctrl-C) stays pending and its line goes to the next
//! reader, so no line typed is lost or read by a question already gone.

use std::io::{BufRead, Write};
use std::sync::{Arc, OnceLock};

use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::agent::approval::LineReader;

type Pending = Option<JoinHandle<std::io::Result<Option<String>>>>;

/// A shared reader of stdin's lines.
#[derive(Clone)]
pub(super) struct StdinLines {
    pending: Arc<Mutex<Pending>>,
}

impl StdinLines {
    /// The process's one reader (stdin is one for the whole process).
    pub(super) fn shared() -> StdinLines {
        static LINES: OnceLock<StdinLines> = OnceLock::new();
        LINES
            .get_or_init(|| StdinLines {
                pending: Arc::new(Mutex::new(None)),
            })
            .clone()
    }

    /// The next line (with its newline), after `prompt` on stderr; `None`
    /// at the end of input.
    pub(super) async fn next(&self, prompt: &str) -> std::io::Result<Option<String>> {
        let mut pending = self.pending.lock().await;
        if !prompt.is_empty() {
            let mut stderr = std::io::stderr();
            let _ = write!(stderr, "{prompt}");
            let _ = stderr.flush();
        }
        let read = pending.get_or_insert_with(|| {
            tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                match std::io::stdin().lock().read_line(&mut line)? {
                    0 => Ok(None),
                    _ => Ok(Some(line)),
                }
            })
        });
        let result = read.await;
        *pending = None;
        result.map_err(std::io::Error::other)?
    }

    /// A [`LineReader`] over these lines, with no prompt.
    pub(super) fn reader(&self) -> LineReader {
        let lines = self.clone();
        Box::new(move || {
            let lines = lines.clone();
            Box::pin(async move { lines.next("").await })
        })
    }
}
