//! A session's sidecar files: payloads a strategy folded out of the view
//! (Self-GC's `fold`), kept byte-exact beside the session file in
//! `<id>.sidecars/` so `recall` can bring them back.

use std::path::{Path, PathBuf};

use cwl::{SidecarFile, SidecarStore};

use super::SessionError;

/// The sidecar directory of the session file at `path`.
#[derive(Debug, Clone)]
pub struct SidecarDir {
    dir: PathBuf,
}

impl SidecarDir {
    /// The sidecars of the session stored at `path` (`<dir>/<id>.jsonl`).
    pub fn of(path: &Path) -> Self {
        SidecarDir {
            dir: path.with_extension("sidecars"),
        }
    }

    /// Where the files go.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `file` (through a temporary file and a rename, so a reader
    /// never sees part of it); a file already holding the same bytes is
    /// left alone.
    pub fn write(&self, file: &SidecarFile) -> Result<(), SessionError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| SessionError::Io { path, source }
        };
        if file.name.is_empty() || file.name.contains(['/', '\\']) || file.name.starts_with('.') {
            return Err(SessionError::Io {
                path: self.dir.join(&file.name),
                source: std::io::Error::other("a sidecar name must be a plain file name"),
            });
        }
        let target = self.dir.join(&file.name);
        if std::fs::read(&target).is_ok_and(|bytes| bytes == file.content.as_bytes()) {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let temporary = self.dir.join(format!(".{}.tmp", file.name));
        std::fs::write(&temporary, file.content.as_bytes()).map_err(io(&temporary))?;
        std::fs::rename(&temporary, &target).map_err(io(&target))
    }
}

impl SidecarStore for SidecarDir {
    fn read_sidecar(&self, name: &str) -> Result<String, String> {
        let path = self.dir.join(name);
        std::fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_round_trip_beside_the_session_and_bad_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sidecars = SidecarDir::of(&dir.path().join("20250101-000000-abcd.jsonl"));
        assert_eq!(
            sidecars.path(),
            dir.path().join("20250101-000000-abcd.sidecars")
        );
        let file = SidecarFile {
            name: "function-read-3.txt".into(),
            content: "exact\r\nbytes\n".into(),
        };
        sidecars.write(&file).unwrap();
        sidecars.write(&file).unwrap();
        assert_eq!(
            sidecars.read_sidecar("function-read-3.txt").unwrap(),
            "exact\r\nbytes\n"
        );
        assert!(sidecars.read_sidecar("missing.txt").is_err());
        for name in ["../escape.txt", "", ".hidden"] {
            let bad = SidecarFile {
                name: name.into(),
                content: String::new(),
            };
            assert!(sidecars.write(&bad).is_err(), "{name}");
        }
    }
}
