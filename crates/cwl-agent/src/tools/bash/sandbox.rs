//! The `bash` sandbox: which files a command may write, enforced by the
//! kernel (Landlock, Linux 5.13+) on the command and everything it starts.
//!
//! | mode              | writable                                              |
//! |-------------------|-------------------------------------------------------|
//! | `off`             | whatever the user may write                           |
//! | `workspace-write` | the workspace, the temp directory, `/dev/shm`, [`DEVICES`] |
//! | `read-only`       | [`DEVICES`] only                                      |
//!
//! Reading is never restricted, nor the network. Writing covers creating,
//! changing, truncating, removing, renaming and linking files.
//!
//! How it is applied without `unsafe` (the workspace forbids it, and
//! `CommandExt::pre_exec` is unsafe): Landlock restricts the calling
//! *thread*, and a process inherits the restrictions of the thread that
//! started it. So each `bash` call is started by a short-lived thread
//! that restricts itself, starts `bash` and ends; no other thread of cwl
//! is restricted, and no thread is reused after it restricted itself.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// What `bash` commands may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sandbox {
    /// No sandbox: commands write wherever the user may.
    #[default]
    Off,
    /// Writes only inside the workspace and the temp directories.
    WorkspaceWrite,
    /// No writes at all (except to [`DEVICES`]).
    ReadOnly,
}

impl Sandbox {
    /// The mode's name as flags and the config file spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Sandbox::Off => "off",
            Sandbox::WorkspaceWrite => "workspace-write",
            Sandbox::ReadOnly => "read-only",
        }
    }
}

impl fmt::Display for Sandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Sandbox {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim() {
            "off" => Ok(Sandbox::Off),
            "workspace-write" => Ok(Sandbox::WorkspaceWrite),
            "read-only" => Ok(Sandbox::ReadOnly),
            other => Err(format!(
                "expected off, workspace-write or read-only, not {other:?}"
            )),
        }
    }
}

/// Device files every sandboxed command may write (and use as terminals):
/// shells and tools write to `/dev/null` as a matter of course.
pub const DEVICES: [&str; 8] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// How far this system enforces a sandbox mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Every restriction of the mode is enforced.
    Full,
    /// Writes are confined, with the gaps the text names (an older kernel).
    Partial(String),
    /// Nothing is enforced; the text says why.
    Unavailable(String),
}

/// Tries `mode` for the workspace `root` on a throwaway thread and reports
/// what the kernel enforces. [`Sandbox::Off`] is always [`Support::Full`].
pub fn probe(mode: Sandbox, root: &Path) -> Support {
    if mode == Sandbox::Off {
        return Support::Full;
    }
    let root = root.to_owned();
    let tried = std::thread::Builder::new()
        .name("cwl-sandbox-probe".into())
        .spawn(move || confine_this_thread(mode, &root))
        .map_err(|e| format!("cannot start a thread: {e}"))
        .and_then(|thread| {
            thread
                .join()
                .map_err(|_| "the probe thread panicked".to_owned())
        });
    match tried.and_then(|confined| confined) {
        Ok(support) => support,
        Err(error) => Support::Unavailable(format!("it could not be set up: {error}")),
    }
}

/// The mode to run with and the warning to show, given the mode asked for,
/// where it was asked for (`None`: it is the default) and what [`probe`]
/// found.
///
/// A mode asked for explicitly that cannot be enforced at all is an error
/// (the user asked for protection; running without it would be a surprise);
/// the default mode then falls back to [`Sandbox::Off`] with a warning. A
/// partial sandbox runs, with a warning naming its gaps.
pub fn decide(
    mode: Sandbox,
    asked_by: Option<&str>,
    support: &Support,
) -> Result<(Sandbox, Option<String>), String> {
    match (support, asked_by) {
        _ if mode == Sandbox::Off => Ok((Sandbox::Off, None)),
        (Support::Full, _) => Ok((mode, None)),
        (Support::Partial(gaps), _) => Ok((
            mode,
            Some(format!(
                "warning: the bash sandbox ({mode}) is only partly enforced by this kernel: {gaps}"
            )),
        )),
        (Support::Unavailable(why), Some(source)) => Err(format!(
            "{source} asks for the bash sandbox {mode}, but it cannot be enforced: {why}. \
             Use --sandbox off to run bash without a sandbox"
        )),
        (Support::Unavailable(why), None) => Ok((
            Sandbox::Off,
            Some(format!(
                "warning: bash runs WITHOUT a sandbox: the default sandbox, {mode}, cannot be \
                 enforced: {why}. Pass --sandbox off to silence this, or --sandbox {mode} to \
                 refuse to run without it"
            )),
        )),
    }
}

/// Why a sandboxed command was not started.
#[cfg(unix)]
#[derive(Debug)]
pub(crate) enum SpawnError {
    /// The sandbox could not be applied; nothing ran.
    Sandbox(String),
    /// The process could not be started.
    Start(std::io::Error),
}

#[cfg(unix)]
impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Sandbox(why) => write!(
                f,
                "the command was not run: the bash sandbox cannot be applied: {why}"
            ),
            SpawnError::Start(error) => write!(f, "cannot start bash: {error}"),
        }
    }
}

/// Starts `cmd` confined by `mode` for the workspace `root`. Must be
/// called inside a tokio runtime. A mode that cannot be enforced at all
/// refuses to start the command; a partial one starts it.
#[cfg(unix)]
pub(crate) fn spawn(
    mode: Sandbox,
    root: &Path,
    cmd: &mut tokio::process::Command,
) -> Result<tokio::process::Child, SpawnError> {
    if mode == Sandbox::Off {
        return cmd.spawn().map_err(SpawnError::Start);
    }
    let runtime = tokio::runtime::Handle::current();
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("cwl-sandbox".into())
            .spawn_scoped(scope, || {
                let _runtime = runtime.enter();
                match confine_this_thread(mode, root).map_err(SpawnError::Sandbox)? {
                    Support::Unavailable(why) => Err(SpawnError::Sandbox(why)),
                    Support::Full | Support::Partial(_) => cmd.spawn().map_err(SpawnError::Start),
                }
            })
            .map_err(SpawnError::Start)?;
        thread
            .join()
            .unwrap_or_else(|_| Err(SpawnError::Sandbox("its thread panicked".into())))
    })
}

/// Restricts the calling thread (and what it starts from now on) to
/// `mode`. Irreversible: call it only on a thread that ends soon after.
#[cfg(target_os = "linux")]
fn confine_this_thread(mode: Sandbox, root: &Path) -> Result<Support, String> {
    landlock_rules::restrict(mode, root)
}

#[cfg(not(target_os = "linux"))]
fn confine_this_thread(_mode: Sandbox, _root: &Path) -> Result<Support, String> {
    Ok(Support::Unavailable(
        "the sandbox uses Landlock, which only Linux has".to_owned(),
    ))
}

#[cfg(target_os = "linux")]
mod landlock_rules {
    use std::path::{Path, PathBuf};

    use landlock::{
        ABI, AccessFs, BitFlags, LandlockStatus, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
    };

    use super::{DEVICES, Sandbox, Support};

    /// The Landlock ABI whose write rights the sandbox handles: writing,
    /// creating, removing, linking across directories, truncating. Later
    /// ABIs add device ioctls and UNIX socket connects, which are not file
    /// writes and would break GPU and terminal programs.
    const TARGET: ABI = ABI::V3;

    pub(super) fn restrict(mode: Sandbox, root: &Path) -> Result<Support, String> {
        let write = AccessFs::from_write(TARGET);
        let fail = |e: landlock::RulesetError| e.to_string();
        let mut ruleset = Ruleset::default()
            .handle_access(write)
            .map_err(fail)?
            .create()
            .map_err(fail)?
            .add_rules(path_beneath_rules(DEVICES, write))
            .map_err(fail)?;
        if mode == Sandbox::WorkspaceWrite {
            let workspace = PathFd::new(root)
                .map_err(|e| format!("cannot open the workspace {}: {e}", root.display()))?;
            ruleset = ruleset
                .add_rule(PathBeneath::new(workspace, write))
                .map_err(fail)?
                .add_rules(path_beneath_rules(temp_dirs(), write))
                .map_err(fail)?;
        }
        let status = ruleset.restrict_self().map_err(fail)?;
        Ok(match status.ruleset {
            RulesetStatus::FullyEnforced => Support::Full,
            RulesetStatus::PartiallyEnforced => Support::Partial(gaps(status.landlock)),
            RulesetStatus::NotEnforced => Support::Unavailable(missing(status.landlock)),
        })
    }

    /// The temp directories commands may write in `workspace-write`.
    fn temp_dirs() -> Vec<PathBuf> {
        vec![std::env::temp_dir(), PathBuf::from("/dev/shm")]
    }

    /// What a kernel whose Landlock is `status` leaves unconfined.
    pub(super) fn gaps(status: LandlockStatus) -> String {
        let abi = match status {
            LandlockStatus::Available { effective_abi, .. } => effective_abi,
            _ => ABI::Unsupported,
        };
        let lacking: BitFlags<AccessFs> = AccessFs::from_write(TARGET) & !AccessFs::from_write(abi);
        let mut gaps = Vec::new();
        if lacking.contains(AccessFs::Refer) {
            gaps.push(
                "moving or hard-linking a file into another directory is refused everywhere \
                 (Landlock ABI 2, Linux 5.19, allows it inside the writable places)",
            );
        }
        if lacking.contains(AccessFs::Truncate) {
            gaps.push(
                "truncating an existing file is not blocked anywhere (that needs Landlock \
                 ABI 3, Linux 6.2)",
            );
        }
        let kernel = format!("Linux {}, Landlock ABI {abi}", release());
        if gaps.is_empty() {
            format!("{kernel} enforces only part of the rules")
        } else {
            format!("{kernel}: {}", gaps.join("; "))
        }
    }

    /// Why a kernel whose Landlock is `status` enforces nothing.
    pub(super) fn missing(status: LandlockStatus) -> String {
        let release = release();
        match status {
            LandlockStatus::NotEnabled => format!(
                "this kernel (Linux {release}) has Landlock but it is not enabled (add \
                 landlock to the lsm= boot parameter)"
            ),
            LandlockStatus::NotImplemented => format!(
                "this kernel (Linux {release}) has no Landlock (it needs Linux 5.13 or later \
                 built with CONFIG_SECURITY_LANDLOCK), or a seccomp filter such as a \
                 container's blocks it"
            ),
            LandlockStatus::Available { .. } => format!(
                "Landlock is available (Linux {release}) but none of the rules could be applied"
            ),
        }
    }

    /// The running kernel's release, for messages.
    fn release() -> String {
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|text| text.trim().to_owned())
            .unwrap_or_else(|_| "(release unknown)".to_owned())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn available(abi: ABI) -> LandlockStatus {
            LandlockStatus::Available {
                effective_abi: abi,
                kernel_abi: None,
            }
        }

        #[test]
        fn gaps_name_what_older_kernels_do_not_confine() {
            let v1 = gaps(available(ABI::V1));
            assert!(v1.contains("Landlock ABI 1"), "{v1}");
            assert!(v1.contains("hard-linking"), "{v1}");
            assert!(v1.contains("truncating"), "{v1}");
            let v2 = gaps(available(ABI::V2));
            assert!(
                !v2.contains("hard-linking") && v2.contains("truncating"),
                "{v2}"
            );
            let v3 = gaps(available(ABI::V3));
            assert!(v3.contains("enforces only part"), "{v3}");
        }

        #[test]
        fn a_kernel_without_landlock_is_explained() {
            let text = missing(LandlockStatus::NotImplemented);
            assert!(
                text.contains("5.13") && text.contains("no Landlock"),
                "{text}"
            );
            let text = missing(LandlockStatus::NotEnabled);
            assert!(text.contains("lsm="), "{text}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for mode in [Sandbox::Off, Sandbox::WorkspaceWrite, Sandbox::ReadOnly] {
            assert_eq!(mode.as_str().parse::<Sandbox>(), Ok(mode));
        }
        let error = "workspace".parse::<Sandbox>().unwrap_err();
        assert!(error.contains("\"workspace\""), "{error}");
        assert!(error.contains("workspace-write"), "{error}");
    }

    #[test]
    fn an_unenforceable_sandbox_is_refused_when_asked_for_and_warned_of_by_default() {
        let none = Support::Unavailable("no Landlock here".into());
        let error = decide(Sandbox::WorkspaceWrite, Some("--sandbox"), &none).unwrap_err();
        assert!(error.starts_with("--sandbox asks for"), "{error}");
        assert!(error.contains("no Landlock here"), "{error}");
        assert!(error.contains("--sandbox off"), "{error}");

        let (mode, warning) = decide(Sandbox::WorkspaceWrite, None, &none).unwrap();
        assert_eq!(mode, Sandbox::Off);
        let warning = warning.unwrap();
        assert!(warning.contains("WITHOUT a sandbox"), "{warning}");
        assert!(warning.contains("no Landlock here"), "{warning}");

        assert_eq!(
            decide(Sandbox::Off, Some("--sandbox"), &none),
            Ok((Sandbox::Off, None))
        );
    }

    #[test]
    fn a_partial_sandbox_runs_with_its_gaps_named() {
        let partial = Support::Partial("truncating is not blocked".into());
        for asked_by in [None, Some("config file: sandbox")] {
            let (mode, warning) = decide(Sandbox::ReadOnly, asked_by, &partial).unwrap();
            assert_eq!(mode, Sandbox::ReadOnly);
            let warning = warning.unwrap();
            assert!(warning.contains("read-only"), "{warning}");
            assert!(warning.contains("truncating is not blocked"), "{warning}");
        }
        assert_eq!(
            decide(Sandbox::ReadOnly, None, &Support::Full),
            Ok((Sandbox::ReadOnly, None))
        );
    }
}
