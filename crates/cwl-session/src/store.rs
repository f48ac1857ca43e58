//! Writing a session file: create it with its header, append records.
//!
//! A writer holds an exclusive OS lock (`flock(2)`, on Unix) on the session
//! file for as long as it lives, so a second process
//! resuming the same session refuses at once instead of interleaving its
//! records; the OS drops the lock when the process ends, even by `kill -9`.
//! The holder's pid is kept in a side file `<id>.pid` next to the session
//! (removed when the writer is dropped) so the refusal can name it. Readers
//! (`cwl sessions`, `recall`) take no lock and are never blocked. The file
//! is opened with `O_APPEND`: records only ever go at its end.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use cwl::Record;

use super::{Loaded, SessionError, SessionInfo, read};

/// An open, locked session file. Every [`SessionWriter::append`] writes one
/// whole line with a single write call, so the file is flushed at every
/// record; [`SessionWriter::sync`] makes it durable.
#[derive(Debug)]
pub struct SessionWriter {
    path: PathBuf,
    pid_path: PathBuf,
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

/// Where the pid of the process writing the session at `path` is kept.
pub fn pid_path(path: &Path) -> PathBuf {
    path.with_extension("pid")
}

/// Removes the `.pid` files in `dir` that no live writer holds: their
/// session file is gone or unlocked (its writer died without cleaning
/// up, as after `kill -9`). Returns the files removed. Off Unix, where
/// sessions are not locked, removes nothing.
pub fn remove_stale_pids(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    if !cfg!(unix) || !dir.is_dir() {
        return Ok(removed);
    }
    for entry in std::fs::read_dir(dir)? {
        let pid = entry?.path();
        if pid.extension().is_none_or(|e| e != "pid") {
            continue;
        }
        let stale = match File::open(pid.with_extension("jsonl")) {
            // Held for as long as `session` is open, then released.
            Ok(session) => try_lock(&session)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(e),
        };
        if stale {
            match std::fs::remove_file(&pid) {
                Ok(()) => removed.push(pid),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    removed.sort();
    Ok(removed)
}

/// The notes file of the session in file `session`: `<dir>/<id>.notes.md`,
/// where the harness writes the working notes a strategy keeps outside
/// the window (the context-window manager's).
pub fn notes_path(session: &Path) -> PathBuf {
    session.with_extension("notes.md")
}

/// Writes `notes` to the notes file of the session at `session`
/// ([`notes_path`]) through a temporary file renamed over it, so a reader
/// never sees half; returns the file's path with the outcome.
pub fn write_notes(session: &Path, notes: &str) -> (PathBuf, std::io::Result<()>) {
    let path = notes_path(session);
    let partial = path.with_extension("md.partial");
    let written = std::fs::write(&partial, notes).and_then(|()| std::fs::rename(&partial, &path));
    (path, written)
}

impl SessionWriter {
    /// Creates `<dir>/<id>.jsonl` (and `dir`), locks it and writes the
    /// header. Fails rather than overwrite an existing file.
    pub fn create(dir: &Path, info: &SessionInfo) -> Result<Self, SessionError> {
        std::fs::create_dir_all(dir).map_err(|source| SessionError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(format!("{}.jsonl", info.id));
        let file = OpenOptions::new()
            .append(true)
            .read(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| SessionError::Io {
                path: path.clone(),
                source,
            })?;
        let mut writer = SessionWriter::lock(path, file)?;
        writer.append(&info.record())?;
        Ok(writer)
    }

    /// Opens the existing session file at `path` for appending: locks it
    /// (refusing with [`SessionError::InUse`] when another process writes
    /// it), reads it under the lock, cuts off anything after the last good
    /// record (a torn last line) and adds a missing final newline.
    pub fn reopen(path: &Path) -> Result<(Self, Loaded), SessionError> {
        let file = OpenOptions::new()
            .append(true)
            .read(true)
            .open(path)
            .map_err(|source| SessionError::Io {
                path: path.to_owned(),
                source,
            })?;
        let mut writer = SessionWriter::lock(path.to_owned(), file)?;
        let loaded = read(path)?;
        writer.cut(loaded.valid_len)?;
        Ok((writer, loaded))
    }

    /// Takes the exclusive lock on `file` and records this process's pid.
    fn lock(path: PathBuf, file: File) -> Result<Self, SessionError> {
        let pid_path = pid_path(&path);
        match try_lock_briefly(&file) {
            Ok(true) => {}
            Ok(false) => {
                return Err(SessionError::InUse {
                    id: stem(&path),
                    pid: holder(&pid_path),
                });
            }
            Err(e) => {
                return Err(SessionError::Io {
                    path,
                    source: std::io::Error::new(e.kind(), format!("cannot lock it: {e}")),
                });
            }
        }
        std::fs::write(&pid_path, format!("{}\n", std::process::id())).map_err(|source| {
            SessionError::Io {
                path: pid_path.clone(),
                source,
            }
        })?;
        Ok(SessionWriter {
            path,
            pid_path,
            file,
            written: 0,
        })
    }

    /// Cuts the file to its first `valid_len` bytes and ends it with a
    /// newline. Only called under the lock, before anything is appended.
    fn cut(&mut self, valid_len: u64) -> Result<(), SessionError> {
        let io = |source| SessionError::Io {
            path: self.path.clone(),
            source,
        };
        self.file.set_len(valid_len).map_err(io)?;
        if valid_len > 0 {
            let mut last = [0u8; 1];
            self.file
                .seek(SeekFrom::Start(valid_len - 1))
                .and_then(|_| self.file.read_exact(&mut last))
                .map_err(io)?;
            if last[0] != b'\n' {
                self.file.write_all(b"\n").map_err(io)?;
            }
        }
        Ok(())
    }

    /// Appends one record as one line and flushes it.
    pub fn append(&mut self, record: &Record) -> Result<(), SessionError> {
        let line = line_of(&self.path, record)?;
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

    /// Makes everything appended so far durable (`fdatasync`); called at
    /// the end of every task.
    pub fn sync(&mut self) -> Result<(), SessionError> {
        self.file.sync_data().map_err(|source| SessionError::Io {
            path: self.path.clone(),
            source,
        })
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
        stem(&self.path)
    }
}

/// A session file written with no file held open: each
/// [`SessionAppender::append`] opens it to append, takes its lock for the
/// one write, and closes it. A process that keeps thousands of sessions
/// going (the proxy) then holds no file descriptor, lock or `.pid` file
/// between records, and two processes appending to one session interleave
/// whole lines only.
#[derive(Debug, Clone)]
pub struct SessionAppender {
    path: PathBuf,
}

impl SessionWriter {
    /// Closes the file (its lock and `.pid` file go with it) and goes on
    /// as a [`SessionAppender`].
    pub fn into_appender(self) -> SessionAppender {
        SessionAppender {
            path: self.path.clone(),
        }
    }
}

impl SessionAppender {
    /// Appends one record as one line, under the session's lock.
    pub fn append(&self, record: &Record) -> Result<(), SessionError> {
        let io = |source| SessionError::Io {
            path: self.path.clone(),
            source,
        };
        let line = line_of(&self.path, record)?;
        let mut file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io)?;
        match try_lock_briefly(&file) {
            Ok(true) => {}
            Ok(false) => {
                return Err(SessionError::InUse {
                    id: stem(&self.path),
                    pid: holder(&pid_path(&self.path)),
                });
            }
            Err(e) => return Err(io(e)),
        }
        file.write_all(line.as_bytes()).map_err(io)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The session id (the file stem).
    pub fn id(&self) -> String {
        stem(&self.path)
    }
}

impl Drop for SessionWriter {
    /// Syncs the file (best effort) and removes the pid file before the
    /// lock goes with the handle.
    fn drop(&mut self) {
        let _ = self.file.sync_data();
        let _ = std::fs::remove_file(&self.pid_path);
    }
}

/// `record` as one line of the session file at `path`.
fn line_of(path: &Path, record: &Record) -> Result<String, SessionError> {
    let mut line = serde_json::to_string(record).map_err(|e| SessionError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e),
    })?;
    line.push('\n');
    Ok(line)
}

/// Takes the lock, trying again for up to a second: a process that
/// forks while it holds the session open (a tool starting in another
/// thread) keeps the lock a moment after the writer closed it.
fn try_lock_briefly(file: &File) -> std::io::Result<bool> {
    for _ in 0..LOCK_TRIES {
        if try_lock(file)? {
            return Ok(true);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    try_lock(file)
}

/// Attempts before a held lock is reported (50 ms apart).
const LOCK_TRIES: u32 = 20;

/// Takes the exclusive lock on `file` without waiting: false when another
/// open file (this process's or another's) holds it.
#[cfg(unix)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Off Unix sessions are not locked: `File::try_lock` is newer than this
/// crate's minimum Rust version.
#[cfg(not(unix))]
fn try_lock(_file: &File) -> std::io::Result<bool> {
    Ok(true)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The pid the lock holder recorded, if it is readable yet.
fn holder(pid_path: &Path) -> Option<u32> {
    // The holder writes its pid right after locking; give it a moment.
    for _ in 0..20 {
        if let Some(pid) = std::fs::read_to_string(pid_path)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            return Some(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::tests::info;

    #[test]
    fn an_appender_holds_nothing_between_records_and_appends_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let writer = SessionWriter::create(dir.path(), &info("s1")).unwrap();
        let path = writer.path().to_owned();
        let appender = writer.into_appender();
        assert!(!pid_path(&path).exists(), "no pid file once closed");
        let note = |text: &str| Record::Note {
            timestamp: None,
            text: text.into(),
        };
        // Two appenders of one session, as two proxies sharing a directory.
        let other = appender.clone();
        appender.append(&note("one")).unwrap();
        other.append(&note("two")).unwrap();
        // Nothing is held: a writer can take the session.
        let (reopened, loaded) = SessionWriter::reopen(&path).unwrap();
        let notes: Vec<&str> = loaded
            .records
            .iter()
            .filter_map(|(_, r)| match r {
                Record::Note { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(notes, ["one", "two"]);
        assert_eq!(appender.id(), "s1");
        // While a writer holds it, an appender is refused, not interleaved.
        #[cfg(unix)]
        assert!(matches!(
            appender.append(&note("three")),
            Err(SessionError::InUse { .. })
        ));
        drop(reopened);
        appender.append(&note("three")).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn only_pid_files_no_live_writer_holds_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let live = SessionWriter::create(dir.path(), &info("live")).unwrap();
        // A writer killed before it could remove its pid file.
        drop(SessionWriter::create(dir.path(), &info("dead")).unwrap());
        std::fs::write(dir.path().join("dead.pid"), "4194304\n").unwrap();
        // A pid file whose session is gone.
        std::fs::write(dir.path().join("gone.pid"), "4194305\n").unwrap();
        std::fs::write(dir.path().join("notes.md"), "kept").unwrap();

        let removed = remove_stale_pids(dir.path()).unwrap();
        assert_eq!(
            removed,
            [dir.path().join("dead.pid"), dir.path().join("gone.pid")]
        );
        assert!(pid_path(&live.path).is_file(), "the live writer's stays");
        assert!(dir.path().join("notes.md").is_file());
        assert!(dir.path().join("dead.jsonl").is_file(), "sessions stay");
        // The check released its locks: the dead session can be resumed.
        assert!(SessionWriter::reopen(&dir.path().join("dead.jsonl")).is_ok());
        assert!(
            remove_stale_pids(&dir.path().join("absent"))
                .unwrap()
                .is_empty()
        );
    }
}
