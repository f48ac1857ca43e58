//! Conversations that replicas share.
//!
//! Proxies behind one load balancer that share a session directory
//! (`--shared-sessions`) leave, for each conversation, one small file
//! `heads/<hash>`: named by the chain hash (see [`crate::conversations`])
//! of the history it last served, holding the name of its session file. A
//! replica that gets a request it holds no conversation for, or whose own
//! copy another replica has since taken further (its head file is gone),
//! looks there for the longest prefix of the request's history and
//! rebuilds the conversation from that session file, as it rebuilds an
//! idle one. The engine is deterministic over the stored records, so the
//! rebuilt conversation sends the view the other replica would have sent.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The head files of a shared session directory.
#[derive(Debug, Clone)]
pub struct Heads {
    sessions: PathBuf,
    dir: PathBuf,
}

impl Heads {
    /// The head files of `sessions` (its folder `heads/`, made if need
    /// be).
    pub fn open(sessions: &Path) -> std::io::Result<Heads> {
        let dir = sessions.join("heads");
        std::fs::create_dir_all(&dir)?;
        Ok(Heads {
            sessions: sessions.to_owned(),
            dir,
        })
    }

    fn path(&self, head: u64) -> PathBuf {
        self.dir.join(format!("{head:016x}"))
    }

    /// Whether a stored conversation ends at `head` (no replica has taken
    /// it further).
    pub fn holds(&self, head: u64) -> bool {
        self.path(head).is_file()
    }

    /// The longest prefix of a request's history, `chains` its chain
    /// hashes, that a stored conversation ends at, among those longer than
    /// `beyond` messages: its session file and how many messages it holds.
    pub fn find(&self, chains: &[u64], beyond: usize) -> Option<(PathBuf, usize)> {
        (beyond..chains.len()).rev().find_map(|at| {
            let name = std::fs::read_to_string(self.path(chains[at])).ok()?;
            let name = name.trim();
            let plain = !name.is_empty() && Path::new(name).file_name() == Some(name.as_ref());
            plain.then(|| (self.sessions.join(name), at + 1))
        })
    }

    /// Records that the conversation stored in `session` now ends at
    /// `head`, and no longer at `previous`.
    pub fn advance(&self, previous: Option<u64>, head: u64, session: &Path) -> std::io::Result<()> {
        let name = session.file_name().ok_or_else(|| {
            std::io::Error::new(ErrorKind::InvalidInput, "a session file has a name")
        })?;
        let path = self.path(head);
        let temporary = self
            .dir
            .join(format!(".{head:016x}.{}.tmp", std::process::id()));
        std::fs::write(&temporary, name.as_encoded_bytes())?;
        std::fs::rename(&temporary, &path)?;
        match previous.filter(|&previous| previous != head) {
            Some(previous) => match std::fs::remove_file(self.path(previous)) {
                Err(error) if error.kind() != ErrorKind::NotFound => Err(error),
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_moves_with_its_conversation_and_the_longest_prefix_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let heads = Heads::open(dir.path()).unwrap();
        let session = dir.path().join("20260101-000000-abcd.jsonl");
        let chains = [11, 12, 13, 14, 15];
        assert_eq!(heads.find(&chains, 0), None);
        heads.advance(None, 12, &session).unwrap();
        assert!(heads.holds(12));
        assert_eq!(heads.find(&chains, 0), Some((session.clone(), 2)));
        assert_eq!(heads.find(&chains, 2), None, "nothing longer than 2");
        heads.advance(Some(12), 14, &session).unwrap();
        assert!(!heads.holds(12), "taken further");
        assert_eq!(heads.find(&chains, 2), Some((session.clone(), 4)));
        heads.advance(Some(14), 14, &session).unwrap();
        assert!(heads.holds(14), "a repeated request keeps its head");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("heads"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, [format!("{:016x}", 14)], "no temporary left");
    }

    #[test]
    fn a_head_naming_anything_but_a_file_in_the_directory_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let heads = Heads::open(dir.path()).unwrap();
        for (head, name) in [(1u64, "../../etc/passwd"), (2, ""), (3, "/abs.jsonl")] {
            std::fs::write(heads.path(head), name).unwrap();
        }
        assert_eq!(heads.find(&[1, 2, 3], 0), None);
    }
}
