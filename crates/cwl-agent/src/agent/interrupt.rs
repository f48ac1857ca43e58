//! Stopping a task from outside: a shared flag the agent's loop watches.
//!
//! The CLI triggers it on Ctrl-C or SIGTERM; the loop then drops the model
//! call or tool in progress (a `bash` call kills its processes when it is
//! dropped), answers the calls it did not finish, records an `interrupted`
//! note and returns [`AgentError::Interrupted`](super::AgentError::Interrupted).

use std::sync::Arc;

use tokio::sync::watch;

/// A handle on one agent's interrupt flag; clones share it.
#[derive(Debug, Clone)]
pub struct Interrupt {
    cause: Arc<watch::Sender<Option<String>>>,
}

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt::new()
    }
}

impl Interrupt {
    /// A flag not yet triggered.
    pub fn new() -> Self {
        Interrupt {
            cause: Arc::new(watch::Sender::new(None)),
        }
    }

    /// Asks the running task to stop; `cause` says why (e.g. `SIGINT`). The
    /// first cause is kept until [`Interrupt::clear`].
    pub fn trigger(&self, cause: impl Into<String>) {
        let cause = cause.into();
        self.cause.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(cause);
            true
        });
    }

    /// Why the flag was triggered, if it was.
    pub fn cause(&self) -> Option<String> {
        self.cause.borrow().clone()
    }

    /// Whether the flag is triggered.
    pub fn is_triggered(&self) -> bool {
        self.cause.borrow().is_some()
    }

    /// Lowers the flag, so the next task runs (`cwl chat` after a
    /// cancelled turn).
    pub fn clear(&self) {
        self.cause.send_replace(None);
    }

    /// Waits until the flag is triggered (at once if it is).
    pub async fn triggered(&self) {
        let mut watching = self.cause.subscribe();
        // The sender lives in `self`, so the wait cannot fail.
        let _ = watching.wait_for(Option::is_some).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_cause_wins_until_cleared() {
        let flag = Interrupt::new();
        assert!(!flag.is_triggered());
        let waiter = {
            let flag = flag.clone();
            tokio::spawn(async move { flag.triggered().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        flag.trigger("SIGINT");
        flag.trigger("SIGTERM");
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the waiter wakes")
            .unwrap();
        assert_eq!(flag.cause().as_deref(), Some("SIGINT"));
        flag.triggered().await;
        flag.clear();
        assert_eq!(flag.cause(), None);
        let pending = tokio::time::timeout(std::time::Duration::from_millis(20), flag.triggered());
        assert!(pending.await.is_err(), "a cleared flag does not fire");
    }
}
