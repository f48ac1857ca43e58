//! Ctrl-C and SIGTERM for `cwl run` and `cwl chat`: the first stops the
//! running task through the agent's [`Interrupt`], a second one exits at
//! once with [`EXIT_INTERRUPTED`].

use std::future::Future;
use std::sync::Mutex;

use tokio::sync::mpsc;

use super::setup::lock;
use crate::agent::Interrupt;
use crate::render::Renderer;

/// The exit status of a run stopped by a signal (128 + SIGINT, as shells
/// report Ctrl-C).
pub const EXIT_INTERRUPTED: i32 = 130;

/// A signal the CLI acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Received {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Received {
    /// How notes name it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Received::Interrupt => "SIGINT (Ctrl-C)",
            Received::Terminate => "SIGTERM",
        }
    }
}

/// The signals received, in order.
pub(super) struct Signals {
    rx: mpsc::UnboundedReceiver<Received>,
    /// Keeps the channel open for [`Signals::from_channel`] sources that
    /// went away, so `recv` waits instead of ending.
    _tx: mpsc::UnboundedSender<Received>,
}

impl Signals {
    /// Takes over SIGINT and SIGTERM for this process (their default
    /// action, dying at once, no longer applies) and forwards them.
    pub(super) fn listen() -> anyhow::Result<Signals> {
        let (tx, rx) = mpsc::unbounded_channel();
        forward(tx.clone())?;
        Ok(Signals { rx, _tx: tx })
    }

    /// Signals sent on a channel (tests).
    #[cfg(test)]
    pub(super) fn from_channel(rx: mpsc::UnboundedReceiver<Received>) -> Signals {
        let (tx, _) = mpsc::unbounded_channel();
        Signals { rx, _tx: tx }
    }

    /// The next signal.
    pub(super) async fn recv(&mut self) -> Received {
        match self.rx.recv().await {
            Some(received) => received,
            None => std::future::pending().await,
        }
    }
}

#[cfg(unix)]
fn forward(tx: mpsc::UnboundedSender<Received>) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    tokio::spawn(async move {
        loop {
            let received = tokio::select! {
                Some(()) = int.recv() => Received::Interrupt,
                Some(()) = term.recv() => Received::Terminate,
                else => break,
            };
            if tx.send(received).is_err() {
                break;
            }
        }
    });
    Ok(())
}

#[cfg(not(unix))]
fn forward(tx: mpsc::UnboundedSender<Received>) -> anyhow::Result<()> {
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            if tx.send(Received::Interrupt).is_err() {
                break;
            }
        }
    });
    Ok(())
}

/// Runs `task` to its end while watching `signals`: the first one
/// triggers `interrupt` (the task then stops by itself), a second one
/// finishes the output line and exits the process at once. Gives the
/// task's output and the first signal, if any.
pub(super) async fn guard<T>(
    task: impl Future<Output = T>,
    signals: &mut Signals,
    interrupt: &Interrupt,
    renderer: &Mutex<Renderer>,
) -> (T, Option<Received>) {
    let mut first = None;
    tokio::pin!(task);
    loop {
        tokio::select! {
            output = &mut task => return (output, first),
            received = signals.recv() => {
                if first.is_some() {
                    exit_now(renderer, received);
                }
                first = Some(received);
                interrupt.trigger(received.name());
            }
        }
    }
}

/// Ends the process at once after a second signal.
pub(super) fn exit_now(renderer: &Mutex<Renderer>, received: Received) -> ! {
    lock(renderer).info(&format!("{} again: exiting now", received.name()));
    std::process::exit(EXIT_INTERRUPTED)
}
