//! Gives the allocator's free pages back to the system.
//!
//! Conversations that leave memory free their engines among allocations
//! that live on, and glibc returns freed memory only from the top of each
//! arena, so without this the proxy's resident size creeps up with every
//! conversation served while what it holds stays the same (measured: 391
//! to 450 MiB from 10,000 to 20,000 conversations with 325 MiB in use;
//! see docs/benchmarks.md).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How often the proxy gives free pages back, when conversations left
/// memory since the last time.
pub const INTERVAL: Duration = Duration::from_secs(30);

/// Conversations that left memory since the free pages were last given
/// back.
#[derive(Debug, Default)]
pub struct Freed(AtomicUsize);

impl Freed {
    /// Counts `count` conversations that left memory.
    pub fn add(&self, count: usize) {
        self.0.fetch_add(count, Ordering::Relaxed);
    }

    /// Whether any left since the last call.
    pub fn take(&self) -> bool {
        self.0.swap(0, Ordering::Relaxed) > 0
    }
}

/// Asks glibc to return the free pages of every arena (`malloc_trim(0)`);
/// whether it gave any back. It walks and locks each arena in turn, so
/// call it from a blocking thread, not on a request's path.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release() -> bool {
    // SAFETY: malloc_trim takes no pointer and no caller-side invariant;
    // glibc serializes it with every other allocator call.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Elsewhere the allocator returns memory itself, or has no such call.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_conversations_are_taken_once() {
        let freed = Freed::default();
        assert!(!freed.take());
        freed.add(0);
        assert!(!freed.take(), "none left");
        freed.add(3);
        assert!(freed.take());
        assert!(!freed.take(), "taken already");
    }
}
