//! The [`Tool`] trait and the [`Registry`] of tools the model may call.
//!
//! Every tool, built in or registered at run time (e.g. from an MCP
//! server), describes itself: its definition for the model, whether it
//! changes files, how the engine evicts its output, and how it runs. The
//! agent asks the registry, never a tool's name, for all of these.

use std::sync::Arc;

pub use futures_util::future::BoxFuture;

use super::error::ToolError;
use super::{ExecContext, ToolOutput};

/// One tool the model can call.
pub trait Tool: Send + Sync {
    /// The definition offered to the model; its `name` is the tool's name.
    fn spec(&self) -> cwl::ToolSpec;

    /// Whether the tool exists to change files (`write`, `edit`). Such
    /// tools always ask for approval under `--approval on-mutate`.
    fn is_mutating(&self) -> bool {
        false
    }

    /// Whether this call, with these raw JSON `arguments`, may change
    /// anything, so that `--approval on-mutate` asks before it runs. By
    /// default [`Tool::is_mutating`]; `bash` looks at the command.
    fn call_mutates(&self, arguments: &str) -> bool {
        let _ = arguments;
        self.is_mutating()
    }

    /// How the engine evicts this tool's output: [`cwl::ToolClass::Bulk`]
    /// for listings and searches, else intermediate.
    fn class(&self) -> cwl::ToolClass {
        cwl::ToolClass::Intermediate
    }

    /// Runs one call with its raw JSON `arguments`. Never fails: every
    /// problem is an error result whose text says what to fix.
    fn run<'a>(&'a self, arguments: &'a str, ctx: &'a ExecContext) -> BoxFuture<'a, ToolOutput>;
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// A tool of that name is already registered.
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
    /// The name belongs to a tool the engine answers (`delimiter`, `recall`).
    #[error("`{0}` is the engine's own tool and cannot be registered")]
    Reserved(String),
    /// The name is empty or has characters model APIs refuse.
    #[error(
        "invalid tool name {0:?}: use 1 to 64 letters, digits, `_` or `-` (model APIs refuse others)"
    )]
    InvalidName(String),
}

/// The tools the model may call, in the order they are offered.
#[derive(Clone, Default)]
pub struct Registry {
    /// Each tool with its name (read once, at registration).
    tools: Vec<(String, Arc<dyn Tool>)>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Adds `tool` after the others. Refuses a name already taken, one of
    /// the engine's tools, or one the model APIs would refuse.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.spec().name;
        if name == cwl::DELIMITER || name == cwl::RECALL {
            return Err(RegistryError::Reserved(name));
        }
        let valid = (1..=64).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(RegistryError::InvalidName(name));
        }
        if self.get(&name).is_some() {
            return Err(RegistryError::Duplicate(name));
        }
        self.tools.push((name, tool));
        Ok(())
    }

    /// The tool called `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, tool)| tool)
    }

    /// The tools' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|(name, _)| name.clone()).collect()
    }

    /// The tool definitions to offer the model, in order.
    pub fn specs(&self) -> Vec<cwl::ToolSpec> {
        self.tools.iter().map(|(_, tool)| tool.spec()).collect()
    }

    /// The engine's tool → class table: each registered tool's class;
    /// any other name is intermediate.
    pub fn classes(&self) -> cwl::ToolClasses {
        let mut classes = cwl::ToolClasses::empty();
        for (name, tool) in &self.tools {
            classes.set(name, tool.class());
        }
        classes
    }

    /// Whether the tool `name` exists to change files (false when unknown).
    pub fn is_mutating(&self, name: &str) -> bool {
        self.get(name).is_some_and(|tool| tool.is_mutating())
    }

    /// Runs `call` in the tool it names; an unknown name is an error result
    /// listing the tools there are.
    pub async fn execute(&self, call: &cwl::ToolCall, ctx: &ExecContext) -> ToolOutput {
        match self.get(&call.name) {
            Some(tool) => tool.run(&call.arguments, ctx).await,
            None => ToolOutput::error(
                ToolError::UnknownTool {
                    name: call.name.clone(),
                    available: self.names().join(", "),
                }
                .to_string(),
            ),
        }
    }
}
