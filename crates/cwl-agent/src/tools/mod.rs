//! The coding agent's tools: `read`, `write`, `edit`, `bash`, `grep`, `glob`
//! and `ls`, run against one workspace directory, held in a [`Registry`] of
//! [`Tool`]s that tools from outside (MCP) join at run time.
//!
//! Results are compact, capped with notices that say how to see more, and
//! deterministic for the same file system state; failures are error results
//! whose text says what to fix. The `delimiter` tool is not here: the engine
//! owns it.
//!
//! The toolbox does not know the engine. The caller describes the active
//! episode through [`ExecContext`]; inside an exploration episode `write`
//! and `edit` are refused so the agent marks its changes as an act episode.

mod args;
mod bash;
mod builtin;
pub mod registry;
mod shell;

pub use bash::sandbox::{self, Sandbox};

#[cfg(all(test, target_os = "linux"))]
pub(crate) use bash::gone;
mod cap;
mod edit;
mod error;
mod glob;
mod grep;
mod guard;
mod ls;
mod paths;
mod read;
mod replace;
mod walk;
mod write;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use error::ToolError;

pub use registry::{Registry, RegistryError, Tool};
pub use shell::is_read_only_command;

use cwl_provider::secrets::Secrets;

/// Limits and permissions of a [`Toolbox`].
#[derive(Debug, Clone, PartialEq)]
pub struct ToolConfig {
    /// Allow `write`/`edit` outside the workspace root. Default: false.
    pub allow_outside_writes: bool,
    /// Allow `write`/`edit` inside an exploration episode. Default: false.
    pub allow_writes_in_exploration: bool,
    /// Lines `read` shows per call. Default: 2000.
    pub read_max_lines: usize,
    /// Bytes of output `read` produces per call. Default: 50,000.
    pub read_max_bytes: usize,
    /// Characters of one line `read` shows before shortening it. Default: 2000.
    pub read_max_line_chars: usize,
    /// `bash` timeout when the call gives none. Default: 120 s.
    pub bash_timeout: Duration,
    /// The largest timeout a `bash` call may ask for. Default: 600 s.
    pub bash_max_timeout: Duration,
    /// Bytes of `bash` output kept (head and tail halves). Default: 30,000.
    pub bash_max_bytes: usize,
    /// Matching lines `grep` shows. Default: 200.
    pub grep_max_matches: usize,
    /// Characters of one matching line `grep` shows. Default: 300.
    pub grep_max_line_chars: usize,
    /// Paths `glob` and entries `ls` show. Default: 500.
    pub list_max_entries: usize,
    /// Bytes of output `grep`, `glob` and `ls` produce. Default: 30,000.
    pub max_output_bytes: usize,
    /// The environment `bash` runs with and the values redacted from every
    /// result. Default: this process's environment under the default
    /// `env_deny` patterns.
    pub secrets: Secrets,
    /// What `bash` commands may write (see [`sandbox`]). Default: off (the
    /// `cwl` commands default to workspace-write where the kernel has it).
    pub sandbox: Sandbox,
}

impl Default for ToolConfig {
    fn default() -> Self {
        ToolConfig {
            allow_outside_writes: false,
            allow_writes_in_exploration: false,
            read_max_lines: 2000,
            read_max_bytes: 50_000,
            read_max_line_chars: 2000,
            bash_timeout: Duration::from_secs(120),
            bash_max_timeout: Duration::from_secs(600),
            bash_max_bytes: 30_000,
            grep_max_matches: 200,
            grep_max_line_chars: 300,
            list_max_entries: 500,
            max_output_bytes: 30_000,
            secrets: Secrets::default(),
            sandbox: Sandbox::Off,
        }
    }
}

/// What the harness tells the toolbox about the session for one call.
///
/// This is the toolbox's only view of the engine: the agent loop fills
/// `exploration` from `Context::active_episode()` when the active episode
/// is an `expl` one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecContext {
    /// The name of the active exploration episode, if one is active.
    pub exploration: Option<String>,
}

impl ExecContext {
    /// A context inside the exploration episode `name`.
    pub fn exploring(name: impl Into<String>) -> Self {
        ExecContext {
            exploration: Some(name.into()),
        }
    }
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text shown to the model.
    pub content: String,
    /// Whether the call failed (bad arguments, refused, non-zero exit, ...).
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
        }
    }

    /// A failed result.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
        }
    }

    /// The transcript's tool result answering `call`.
    pub fn into_result(self, call: &cwl::ToolCall) -> cwl::ToolResult {
        cwl::ToolResult {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: self.content,
            is_error: self.is_error,
        }
    }
}

impl From<Result<String, ToolError>> for ToolOutput {
    fn from(r: Result<String, ToolError>) -> Self {
        match r {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

/// Why a [`Toolbox`] could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ToolboxError {
    /// The workspace root cannot be resolved.
    #[error("workspace root `{path}` cannot be used: {source}")]
    Root {
        /// The root as given.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The workspace root is not a directory.
    #[error("workspace root `{0}` is not a directory")]
    NotDirectory(PathBuf),
}

/// The tools, bound to a workspace root: the built-in ones, then any
/// [`registered`](Toolbox::register) at run time.
#[derive(Debug, Clone)]
pub struct Toolbox {
    root: PathBuf,
    config: ToolConfig,
    registry: Registry,
}

impl Toolbox {
    /// A toolbox working in `root` (made canonical; it must be a directory)
    /// with the built-in tools.
    pub fn new(root: impl AsRef<Path>, config: ToolConfig) -> Result<Self, ToolboxError> {
        let given = root.as_ref();
        let root = given.canonicalize().map_err(|source| ToolboxError::Root {
            path: given.to_owned(),
            source,
        })?;
        if !root.is_dir() {
            return Err(ToolboxError::NotDirectory(root));
        }
        let registry = builtin::registry(&root, &config);
        Ok(Toolbox {
            root,
            config,
            registry,
        })
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The limits and permissions in force.
    pub fn config(&self) -> &ToolConfig {
        &self.config
    }

    /// The tools, in the order they are offered.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Adds a tool from outside (e.g. an MCP server's) after the others;
    /// see [`Registry::register`] for what is refused.
    pub fn register(&mut self, tool: std::sync::Arc<dyn Tool>) -> Result<(), RegistryError> {
        self.registry.register(tool)
    }

    /// The tool definitions to offer the model (without `delimiter`).
    pub fn specs(&self) -> Vec<cwl::ToolSpec> {
        self.registry.specs()
    }

    /// Whether this toolbox has a tool called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.registry.get(name).is_some()
    }

    /// Whether the tool `name` exists to change files (`write`, `edit`):
    /// inside exploration episodes and outside the workspace these are
    /// refused. `bash` is not counted: exploration needs to run commands.
    pub fn is_mutating(&self, name: &str) -> bool {
        self.registry.is_mutating(name)
    }

    /// Whether `call` may change anything ([`Tool::call_mutates`]); false
    /// for a tool this toolbox does not have (it will not run).
    pub fn call_mutates(&self, call: &cwl::ToolCall) -> bool {
        self.registry
            .get(&call.name)
            .is_some_and(|tool| tool.call_mutates(&call.arguments))
    }

    /// The engine's tool → class table for these tools.
    pub fn classes(&self) -> cwl::ToolClasses {
        self.registry.classes()
    }

    /// Runs `call`. Never fails: every problem becomes an error result.
    pub async fn execute(&self, call: &cwl::ToolCall, ctx: &ExecContext) -> ToolOutput {
        self.registry.execute(call, ctx).await
    }
}
