//! Writing a session file: create it with its header, append records.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use cwl::Record;

use super::{SessionError, SessionInfo};

/// An open session file. Every [`SessionWriter::append`] writes one whole
/// line with a single write call, so the file is flushed at every record.
#[derive(Debug)]
pub struct SessionWriter {
    path: PathBuf,
    file: File,
    written: u64,
}

/// A new session id: UTC time and four random hex digits,
/// e.g. `20250301-142233-9f3c`. Ids sort by creation time.
pub fn new_id() -> String {
    format!(
        "{}-{:04x}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S"),
        fastrand::u16(..)
    )
}

impl SessionWriter {
    /// Creates `<dir>/<id>.jsonl` (and `dir`) and writes the header.
    /// Fails rather than overwrite an existing file.
    pub fn create(dir: &Path, info: &SessionInfo) -> Result<Self, SessionError> {
        std::fs::create_dir_all(dir).map_err(|source| SessionError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(format!("{}.jsonl", info.id));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| SessionError::Io {
                path: path.clone(),
                source,
            })?;
        let mut writer = SessionWriter {
            path,
            file,
            written: 0,
        };
        writer.append(&info.record())?;
        Ok(writer)
    }

    /// Opens an existing file for appending after its first `valid_len`
    /// bytes: anything after them (a torn last line) is cut off first, and
    /// a missing final newline is added.
    pub fn reopen(path: &Path, valid_len: u64) -> Result<Self, SessionError> {
        let io = |source| SessionError::Io {
            path: path.to_owned(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        file.set_len(valid_len).map_err(io)?;
        file.seek(SeekFrom::End(0)).map_err(io)?;
        if valid_len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(valid_len - 1)).map_err(io)?;
            std::io::Read::read_exact(&mut file, &mut last).map_err(io)?;
            file.seek(SeekFrom::End(0)).map_err(io)?;
            if last[0] != b'\n' {
                file.write_all(b"\n").map_err(io)?;
            }
        }
        Ok(SessionWriter {
            path: path.to_owned(),
            file,
            written: 0,
        })
    }

    /// Appends one record as one line and flushes it.
    pub fn append(&mut self, record: &Record) -> Result<(), SessionError> {
        let mut line = serde_json::to_string(record).map_err(|e| SessionError::Io {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|source| SessionError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.written += line.len() as u64;
        Ok(())
    }

    /// Bytes this writer appended since it was created or reopened.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The session id (the file stem).
    pub fn id(&self) -> String {
        self.path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}
