//! Killing every process a `bash` call started, also those that left its
//! process group.
//!
//! The shell runs in its own process group with a marker variable
//! ([`MARKER`]) in its environment, which its descendants inherit. Killing
//! the call kills the group, then (on Linux, from `/proc`) every process
//! whose environment holds the call's marker, and every descendant of
//! those still linked by parentage, until a scan finds no new one. That
//! covers `setsid`, `nohup` and double-forked daemons. Not covered: a
//! process that left the group, cleared its environment (`env -i`) and
//! whose marked ancestors are all gone; processes of other users (`sudo`).
//! Off Linux only the group is killed.

use rustix::process::{Pid, Signal, kill_process, kill_process_group};

/// The variable that marks a call's processes.
pub(super) const MARKER: &str = "CWL_TOOL_CALL";

/// A marker value unique to one call of this process.
pub(super) fn new_marker() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{:04x}",
        std::process::id(),
        CALLS.fetch_add(1, Ordering::Relaxed),
        fastrand::u16(..)
    )
}

/// Kills process group `group` and every process marked with `marker`
/// (with their descendants).
pub(super) fn kill_all(group: Pid, marker: &str) {
    // ESRCH (group already gone) is the normal case.
    let _ = kill_process_group(group, Signal::KILL);
    #[cfg(target_os = "linux")]
    {
        let needle = format!("{MARKER}={marker}").into_bytes();
        let mut killed = std::collections::HashSet::new();
        // A process forking while we scan can add one more round.
        for _ in 0..16 {
            let found: Vec<i32> = linux::marked_and_descendants(&needle)
                .into_iter()
                .filter(|pid| !killed.contains(pid))
                .collect();
            if found.is_empty() {
                break;
            }
            for pid in found {
                if let Some(process) = Pid::from_raw(pid) {
                    let _ = kill_process(process, Signal::KILL);
                }
                killed.insert(pid);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = marker;
}

/// Whether process `pid` is gone (or a zombie: dead, not yet reaped).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn gone(pid: i32) -> bool {
    linux::live_parent(pid).is_none()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::{HashMap, HashSet};

    /// Live processes (not zombies) whose environment has the entry
    /// `needle`, and their descendants; never this process.
    pub(super) fn marked_and_descendants(needle: &[u8]) -> HashSet<i32> {
        let own = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return HashSet::new();
        };
        let mut parents: HashMap<i32, i32> = HashMap::new();
        let mut found = HashSet::new();
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let Some(parent) = live_parent(pid) else {
                continue;
            };
            parents.insert(pid, parent);
            let marked = std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|entry| entry == needle));
            if marked {
                found.insert(pid);
            }
        }
        loop {
            let before = found.len();
            for (&pid, parent) in &parents {
                if found.contains(parent) {
                    found.insert(pid);
                }
            }
            if found.len() == before {
                break;
            }
        }
        found.remove(&own);
        found
    }

    /// The parent of `pid` from `/proc/PID/stat`; `None` when it is gone or
    /// a zombie (already dead).
    pub(super) fn live_parent(pid: i32) -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
        let state = fields.next()?;
        if state == "Z" || state == "X" {
            return None;
        }
        fields.next()?.parse().ok()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn finds_a_marked_child_and_its_unmarked_descendant_but_not_itself() {
            let needle = format!("{}=test-{}", super::super::MARKER, fastrand::u32(..));
            let (name, value) = needle.split_once('=').unwrap();
            let mut child = std::process::Command::new("sh")
                .args(["-c", "env -i sleep 30 & wait"])
                .env(name, value)
                .spawn()
                .unwrap();
            let child_pid = i32::try_from(child.id()).unwrap();
            let mut found = HashSet::new();
            for _ in 0..200 {
                found = marked_and_descendants(needle.as_bytes());
                if found.len() >= 2 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert!(found.contains(&child_pid), "{found:?}");
            assert_eq!(found.len(), 2, "the shell and its env -i sleep: {found:?}");
            assert!(!found.contains(&i32::try_from(std::process::id()).unwrap()));
            for pid in &found {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(*pid).unwrap(),
                    rustix::process::Signal::KILL,
                );
            }
            child.wait().unwrap();
            assert!(marked_and_descendants(needle.as_bytes()).is_empty());
        }
    }
}
