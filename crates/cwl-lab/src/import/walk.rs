//! Session logs named on the command line: files as given, directories
//! searched for the logs under them.

use std::path::{Path, PathBuf};

/// File extensions of session logs found under a directory: JSONL logs
/// (cwl, pi, Claude Code, Codex) and JSON documents (OpenAI chat,
/// mini-swe-agent trajectories). A file named directly is read whatever
/// its name, since formats are detected from content.
pub const LOG_EXTENSIONS: &[&str] = &["jsonl", "json"];

/// A directory named as a log source that holds nothing to replay, or
/// cannot be searched.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// No file with a log extension under the directory.
    #[error("{0}: no session logs under this directory (files ending in .jsonl or .json)")]
    Empty(String),
    /// The directory or something under it could not be read.
    #[error("{path}: cannot search this directory: {source}")]
    Unreadable {
        /// The directory named.
        path: String,
        /// Why.
        source: ignore::Error,
    },
}

/// The logs `paths` name, in order: each file as given, each directory
/// replaced by the files with a [`LOG_EXTENSIONS`] extension anywhere under
/// it (hidden folders such as `~/.codex` included, ignore files not
/// applied), sorted by path so a run is reproducible.
pub fn session_logs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, WalkError> {
    let mut logs = Vec::new();
    for path in paths {
        if path.is_dir() {
            logs.extend(logs_under(path)?);
        } else {
            logs.push(path.clone());
        }
    }
    Ok(logs)
}

fn logs_under(dir: &Path) -> Result<Vec<PathBuf>, WalkError> {
    let shown = || dir.display().to_string();
    let mut found = Vec::new();
    for entry in ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .build()
    {
        let entry = entry.map_err(|source| WalkError::Unreadable {
            path: shown(),
            source,
        })?;
        let is_log = entry.file_type().is_some_and(|t| t.is_file())
            && entry
                .path()
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| LOG_EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)));
        if is_log {
            found.push(entry.into_path());
        }
    }
    if found.is_empty() {
        return Err(WalkError::Empty(shown()));
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::{WalkError, session_logs};

    #[test]
    fn a_directory_gives_its_logs_at_any_depth_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("2026/11/25")).unwrap();
        fs::create_dir_all(root.join(".hidden")).unwrap();
        for name in [
            "2026/11/25/rollout-b.jsonl",
            "2026/11/25/rollout-a.jsonl",
            ".hidden/session.jsonl",
            "task.traj.json",
            "notes.txt",
        ] {
            fs::write(root.join(name), "{}").unwrap();
        }
        let single = root.join("notes.txt");
        let logs = session_logs(&[single.clone(), root.to_path_buf()]).unwrap();
        let relative: Vec<_> = logs
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            relative,
            [
                "notes.txt",
                ".hidden/session.jsonl",
                "2026/11/25/rollout-a.jsonl",
                "2026/11/25/rollout-b.jsonl",
                "task.traj.json",
            ],
            "a file named is kept whatever its name; under a directory only logs, sorted"
        );
    }

    #[test]
    fn a_directory_without_logs_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("README.md"), "no logs").unwrap();
        let error = session_logs(&[dir.path().to_path_buf()]).unwrap_err();
        assert!(matches!(error, WalkError::Empty(_)), "{error}");
        assert!(
            error
                .to_string()
                .contains(&dir.path().display().to_string())
        );
    }

    #[test]
    fn a_missing_path_is_left_for_the_reader_to_report() {
        let logs = session_logs(&["no/such/file.jsonl".into()]).unwrap();
        assert_eq!(logs, [std::path::PathBuf::from("no/such/file.jsonl")]);
    }
}
