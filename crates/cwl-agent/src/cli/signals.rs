//! Ctrl-C and SIGTERM for `cwl run` and `cwl chat`: the first stops the
//! running task through the agent's [`Interrupt`], a second one exits at
//! once with [`EXIT_INTERRUPTED`].

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
    /// Signals since the last [`Signals::settle`].
    unsettled: Arc<AtomicUsize>,
}

impl Signals {
    /// Takes over SIGINT and SIGTERM for this process (their default
    /// action, dying at once, no longer applies) and forwards them. A
    /// second one before [`Signals::settle`] ends the process at once,
    /// from the listening task itself, so it works even while the loop is
    /// busy; `renderer` finishes the output line first when it is free.
    pub(super) fn listen(renderer: Arc<Mutex<Renderer>>) -> anyhow::Result<Signals> {
        let (tx, rx) = mpsc::unbounded_channel();
        let unsettled = Arc::new(AtomicUsize::new(0));
        forward(tx.clone(), Arc::clone(&unsettled), renderer)?;
        Ok(Signals {
            rx,
            _tx: tx,
            unsettled,
        })
    }

    /// Signals sent on a channel (tests); no second-signal exit.
    #[cfg(test)]
    pub(super) fn from_channel(rx: mpsc::UnboundedReceiver<Received>) -> Signals {
        let (tx, _) = mpsc::unbounded_channel();
        Signals {
            rx,
            _tx: tx,
            unsettled: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The signals so far are dealt with: the next one is a first one
    /// again (`cwl chat` after a cancelled turn).
    pub(super) fn settle(&self) {
        self.unsettled.store(0, Ordering::SeqCst);
    }

    /// The next signal.
    pub(super) async fn recv(&mut self) -> Received {
        match self.rx.recv().await {
            Some(received) => received,
            None => std::future::pending().await,
        }
    }
}

/// Counts `received`; exits at once when it is the second unsettled one.
fn count(received: Received, unsettled: &AtomicUsize, renderer: &Mutex<Renderer>) {
    if unsettled.fetch_add(1, Ordering::SeqCst) >= 1 {
        // The loop may hold the renderer mid-write: then exit without a word.
        if let Ok(mut renderer) = renderer.try_lock() {
            renderer.info(&format!("{} again: exiting now", received.name()));
        }
        crate::mcp::kill_all();
        std::process::exit(EXIT_INTERRUPTED);
    }
}

#[cfg(unix)]
fn forward(
    tx: mpsc::UnboundedSender<Received>,
    unsettled: Arc<AtomicUsize>,
    renderer: Arc<Mutex<Renderer>>,
) -> anyhow::Result<()> {
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
            count(received, &unsettled, &renderer);
            if tx.send(received).is_err() {
                break;
            }
        }
    });
    Ok(())
}

#[cfg(not(unix))]
fn forward(
    tx: mpsc::UnboundedSender<Received>,
    unsettled: Arc<AtomicUsize>,
    renderer: Arc<Mutex<Renderer>>,
) -> anyhow::Result<()> {
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            count(Received::Interrupt, &unsettled, &renderer);
            if tx.send(Received::Interrupt).is_err() {
                break;
            }
        }
    });
    Ok(())
}

/// Runs `task` to its end while watching `signals`: the first one
/// triggers `interrupt` (the task then stops by itself), a second one
/// finishes the output line and exits the process at once (the listener
/// does so too, should this loop be busy). Gives the task's output and the
/// first signal, if any.
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
    crate::mcp::kill_all();
    std::process::exit(EXIT_INTERRUPTED)
}
