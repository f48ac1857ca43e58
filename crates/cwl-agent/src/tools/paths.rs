//! Resolving the model's paths against the workspace root.
//!
//! Reads use the joined path as given (the OS resolves `..` and symlinks).
//! Writes go to the *real* target: the canonical form of the longest existing
//! ancestor plus the rest, so a symlink or `..` cannot smuggle a write out
//! of the workspace.

use std::fs;
use std::path::{Component, Path, PathBuf};

use super::error::ToolError;

/// A path named by the model, joined to the workspace root.
#[derive(Debug, Clone)]
pub(crate) struct ToolPath {
    /// The path to access (absolute; not normalized).
    pub(crate) path: PathBuf,
    /// The path as shown to the model: relative to the root when inside it.
    pub(crate) shown: String,
}

impl ToolPath {
    /// Joins `input` (absolute or relative to `root`) to `root`.
    pub(crate) fn new(root: &Path, input: &str) -> Self {
        let path = root.join(input);
        let shown = display(root, &path);
        ToolPath { path, shown }
    }
}

/// `path` as shown to the model: relative to `root` when lexically inside
/// it (`.` for the root itself), else absolute.
pub(crate) fn display(root: &Path, path: &Path) -> String {
    let normal = normalize(path);
    match normal.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => normal.to_string_lossy().into_owned(),
    }
}

/// Resolves `.` and `..` without touching the file system.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        push_component(&mut out, comp);
    }
    out
}

fn push_component(out: &mut PathBuf, comp: Component<'_>) {
    match comp {
        Component::CurDir => {}
        Component::ParentDir => {
            out.pop();
        }
        other => out.push(other.as_os_str()),
    }
}

/// The real file a write to `path` would reach: the canonical longest
/// existing ancestor joined with the remaining components. Fails when an
/// existing component cannot be resolved (a dangling symlink, a loop, no
/// permission), since a write there could land anywhere.
pub(crate) fn real_target(path: &ToolPath) -> Result<PathBuf, ToolError> {
    let comps: Vec<Component<'_>> = path.path.components().collect();
    for split in (0..=comps.len()).rev() {
        let prefix: PathBuf = comps[..split].iter().collect();
        if prefix.as_os_str().is_empty() {
            break;
        }
        match fs::canonicalize(&prefix) {
            Ok(mut real) => {
                for comp in &comps[split..] {
                    push_component(&mut real, *comp);
                }
                return Ok(real);
            }
            Err(e) if fs::symlink_metadata(&prefix).is_ok() => {
                return Err(ToolError::Other(format!(
                    "cannot resolve `{}` ({e}); refusing to write through it",
                    prefix.display()
                )));
            }
            Err(_) => {}
        }
    }
    Err(ToolError::Other(format!(
        "cannot resolve `{}`: no existing ancestor",
        path.shown
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_relative_inside_and_absolute_outside() {
        let root = Path::new("/w/proj");
        assert_eq!(display(root, Path::new("/w/proj/src/../a.rs")), "a.rs");
        assert_eq!(display(root, Path::new("/w/proj/.")), ".");
        assert_eq!(display(root, Path::new("/w/proj/../x")), "/w/x");
    }

    #[test]
    fn real_target_resolves_missing_tails_and_dotdot() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let p = ToolPath::new(&root, "new/dir/../f.txt");
        assert_eq!(real_target(&p).unwrap(), root.join("new/f.txt"));
        let p = ToolPath::new(&root, "../outside.txt");
        assert_eq!(
            real_target(&p).unwrap(),
            root.parent().unwrap().join("outside.txt")
        );
    }

    #[cfg(unix)]
    #[test]
    fn real_target_follows_symlinks_and_refuses_dangling_ones() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let other_real = fs::canonicalize(other.path()).unwrap();
        std::os::unix::fs::symlink(&other_real, root.join("link")).unwrap();
        let p = ToolPath::new(&root, "link/a.txt");
        assert_eq!(real_target(&p).unwrap(), other_real.join("a.txt"));
        std::os::unix::fs::symlink(root.join("missing"), root.join("dangling")).unwrap();
        let e = real_target(&ToolPath::new(&root, "dangling")).unwrap_err();
        assert!(
            e.to_string().contains("refusing to write through it"),
            "{e}"
        );
    }
}
