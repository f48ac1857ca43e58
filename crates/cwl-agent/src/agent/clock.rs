//! The agent's clock: how long the conversation sat idle between model
//! calls, for strategies that mind the provider's prefix cache (see
//! [`cwl::Strategy::idle`]). Injectable, so tests can make an hour pass
//! without waiting for it.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where the agent reads the time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The time now.
    fn now(&self) -> Instant;
}

/// The machine's monotonic clock (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to, for tests: share it (in an
/// `Arc`) with the agent and [advance](ManualClock::advance) it where the
/// test wants time to pass.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<Instant>,
}

impl ManualClock {
    /// A clock standing at the present moment.
    pub fn new() -> Self {
        ManualClock {
            now: Mutex::new(Instant::now()),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new();
        let start = clock.now();
        assert_eq!(clock.now(), start);
        clock.advance(Duration::from_secs(300));
        assert_eq!(clock.now() - start, Duration::from_secs(300));
        assert!(SystemClock.now() <= Instant::now());
    }
}
