//! Writing a file's whole content by a temp file in the same directory and
//! a rename, as `write` and `edit` do.
//!
//! The rename swaps the directory entry, so a hard link in the workspace
//! that shares its file with a path outside it is replaced, never written
//! through. An existing file keeps its permission bits; one this process
//! may not write is refused as a direct write would be. The new file is
//! owned by this process's user.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Attempts at a free temp name before giving up.
const TEMP_ATTEMPTS: usize = 16;

/// Makes `path` a file holding exactly `content`.
pub(crate) fn replace_file(path: &Path, content: &[u8]) -> io::Result<()> {
    let existing = match fs::symlink_metadata(path) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if let Some(meta) = &existing {
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        // The permission check a direct write would meet; nothing is written.
        OpenOptions::new().write(true).open(path)?;
    }
    let (temp_path, mut temp) = create_temp(path)?;
    let written = (|| {
        temp.write_all(content)?;
        if let Some(meta) = &existing {
            temp.set_permissions(meta.permissions())?;
        }
        temp.sync_data()?;
        drop(temp);
        fs::rename(&temp_path, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp_path);
    }
    written
}

/// A new, empty file next to `path` named `.<name>.<random>.cwl-tmp`,
/// created with the default mode (so a new file gets the umask's mode).
fn create_temp(path: &Path) -> io::Result<(PathBuf, File)> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?
        .to_string_lossy();
    let mut last = None;
    for _ in 0..TEMP_ATTEMPTS {
        let temp = dir.join(format!(".{name}.{:08x}.cwl-tmp", fastrand::u32(..)));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temp file name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_and_replaces_without_leaving_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        replace_file(&path, b"one").unwrap();
        replace_file(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.txt"]);
    }

    #[test]
    fn a_directory_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        let e = replace_file(&dir.path().join("d"), b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(dir.path().join("d").is_dir());
    }
}
