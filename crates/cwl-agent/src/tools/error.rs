//! Why a tool call failed, phrased for the model.

use std::io;

/// A failed tool call. The `Display` text is what the model sees, so every
/// message names the tool, field or path at fault and, where possible, the fix.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The call's arguments were not valid JSON or did not fit the schema.
    #[error("invalid arguments for `{tool}`: {message}")]
    Args {
        /// The tool that was called.
        tool: &'static str,
        /// What was wrong, naming the field.
        message: String,
    },
    /// The model called a tool this toolbox does not have.
    #[error("unknown tool `{name}`; available tools: {available}")]
    UnknownTool {
        /// The name the model used.
        name: String,
        /// The toolbox's tool names, comma separated.
        available: String,
    },
    /// A path that must exist does not.
    #[error("`{path}` does not exist")]
    NotFound {
        /// The path as shown to the model.
        path: String,
    },
    /// A file was expected but the path is a directory.
    #[error("`{path}` is a directory; use ls to list it")]
    IsDirectory {
        /// The path as shown to the model.
        path: String,
    },
    /// A directory was expected but the path is a file.
    #[error("`{path}` is not a directory; use read to read it")]
    NotDirectory {
        /// The path as shown to the model.
        path: String,
    },
    /// The file holds binary data, which is not shown.
    #[error("`{path}` is a binary file ({bytes} bytes); not shown")]
    Binary {
        /// The path as shown to the model.
        path: String,
        /// The file's size.
        bytes: u64,
    },
    /// A file system operation failed.
    #[error("cannot {action} `{path}`: {source}")]
    Io {
        /// What was being done ("read", "write", ...).
        action: &'static str,
        /// The path as shown to the model.
        path: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A write or edit outside the workspace root was refused.
    #[error(
        "{tool} refused: `{path}` is outside the workspace `{root}`; writes outside it are disabled"
    )]
    OutsideRoot {
        /// The mutating tool.
        tool: &'static str,
        /// The resolved target path.
        path: String,
        /// The workspace root.
        root: String,
    },
    /// A write or edit inside an exploration episode was refused.
    #[error(
        "{tool} is not allowed inside exploration episode `{episode}`: end it with a description \
         and start an act episode that depends on it"
    )]
    InExploration {
        /// The mutating tool.
        tool: &'static str,
        /// The active exploration episode.
        episode: String,
    },
    /// Any other failure, already phrased for the model.
    #[error("{0}")]
    Other(String),
}

impl ToolError {
    /// An argument error for `tool`.
    pub(crate) fn args(tool: &'static str, message: impl Into<String>) -> Self {
        ToolError::Args {
            tool,
            message: message.into(),
        }
    }

    /// An I/O error, mapping "not found" to [`ToolError::NotFound`].
    pub(crate) fn io(action: &'static str, path: &str, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            ToolError::NotFound {
                path: path.to_owned(),
            }
        } else {
            ToolError::Io {
                action,
                path: path.to_owned(),
                source,
            }
        }
    }
}
