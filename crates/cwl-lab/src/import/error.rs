//! Why a file could not be imported at all.

use std::path::PathBuf;

use thiserror::Error;

use super::Format;

/// Why a file could not be imported at all.
#[derive(Debug, Error)]
pub enum ImportError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file has no content.
    #[error("{path} is empty")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file must be UTF-8 text and is not.
    #[error("{path} is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Byte offset of the first invalid byte.
        offset: u64,
    },
    /// The content matches none of the known formats.
    #[error("{path} is not a known session log format: {why}")]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// What the detector saw.
        why: String,
    },
    /// A single-document log is not valid for its format.
    #[error("{path} is not a valid {format} log: {why}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The format it was read as.
        format: Format,
        /// What is wrong.
        why: String,
    },
}
