//! One MCP server tool as a [`Tool`] of the registry.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceError;

use super::connect::Connection;
use super::content;
use crate::tools::registry::BoxFuture;
use crate::tools::{ExecContext, Tool, ToolOutput};

/// Separates the server's name from its tool's in the names offered.
pub const SEPARATOR: &str = "__";

/// Whether `name` is an MCP tool's (built-in tools have no `__`).
pub fn is_mcp_name(name: &str) -> bool {
    name.contains(SEPARATOR)
}

/// The name offered for `server`'s tool `tool`: `server__tool`, with
/// characters model APIs refuse replaced by `_`; `None` when longer than
/// the 64 they take.
pub fn offered_name(server: &str, tool: &str) -> Option<String> {
    let tool: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("{server}{SEPARATOR}{tool}");
    (!tool.is_empty() && name.len() <= 64).then_some(name)
}

/// A tool of an MCP server.
pub struct McpTool {
    spec: cwl::ToolSpec,
    /// The tool's own name on its server.
    remote: String,
    mutating: bool,
    class: cwl::ToolClass,
    timeout: Duration,
    connection: Arc<Connection>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .field("mutating", &self.mutating)
            .finish()
    }
}

/// How a server's tools are offered, from its config entry.
pub(crate) struct Policy {
    /// `Some` overrides the tools' own `readOnlyHint`.
    pub(crate) mutating: Option<bool>,
    pub(crate) class: cwl::ToolClass,
    pub(crate) timeout: Duration,
}

impl McpTool {
    /// The registry tool for `tool` of the server behind `connection`,
    /// offered as `name`. It counts as mutating unless the policy says
    /// otherwise or the tool declares `readOnlyHint: true`.
    pub(crate) fn new(
        name: String,
        tool: &rmcp::model::Tool,
        policy: &Policy,
        connection: Arc<Connection>,
    ) -> McpTool {
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        let about = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or("(no description)");
        McpTool {
            spec: cwl::ToolSpec {
                name,
                description: format!("[MCP server {}] {about}", connection.name),
                parameters: serde_json::Value::Object((*tool.input_schema).clone()),
            },
            remote: tool.name.to_string(),
            mutating: policy.mutating.unwrap_or(!read_only),
            class: policy.class,
            timeout: policy.timeout,
            connection,
        }
    }

    async fn call(&self, arguments: &str) -> ToolOutput {
        let server = &self.connection.name;
        let arguments = match arguments.trim() {
            "" | "null" => None,
            text => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(serde_json::Value::Object(map)) => Some(map),
                Ok(_) => return ToolOutput::error("the arguments must be a JSON object"),
                Err(e) => return ToolOutput::error(format!("the arguments are not JSON: {e}")),
            },
        };
        let mut params = CallToolRequestParams::new(self.remote.clone());
        if let Some(map) = arguments {
            params = params.with_arguments(map);
        }
        let called = self.connection.service.call_tool(params);
        match tokio::time::timeout(self.timeout, called).await {
            Ok(Ok(result)) => match serde_json::to_value(&result) {
                Ok(value) => content::output(&value),
                Err(e) => {
                    ToolOutput::error(format!("MCP server `{server}`: unreadable result: {e}"))
                }
            },
            Ok(Err(ServiceError::McpError(error))) => ToolOutput::error(format!(
                "MCP server `{server}` refused the call: {}",
                error.message
            )),
            Ok(Err(error)) => ToolOutput::error(format!(
                "MCP server `{server}` failed: {error} (it may have stopped; its tools stay unavailable until cwl is restarted)"
            )),
            Err(_) => ToolOutput::error(format!(
                "MCP server `{server}` did not answer within {}s (its config entry's `timeout`)",
                self.timeout.as_secs_f64()
            )),
        }
    }
}

impl Tool for McpTool {
    fn spec(&self) -> cwl::ToolSpec {
        self.spec.clone()
    }

    fn is_mutating(&self) -> bool {
        self.mutating
    }

    fn class(&self) -> cwl::ToolClass {
        self.class
    }

    fn run<'a>(&'a self, arguments: &'a str, _ctx: &'a ExecContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(self.call(arguments))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_cleaned() {
        assert_eq!(
            offered_name("fs", "read_file").as_deref(),
            Some("fs__read_file")
        );
        assert_eq!(
            offered_name("gh", "repo.get/x").as_deref(),
            Some("gh__repo_get_x")
        );
        assert_eq!(offered_name("fs", ""), None);
        let long = "t".repeat(61);
        assert_eq!(offered_name("fs", &long), None);
        assert_eq!(offered_name("fs", &long[..60]).map(|n| n.len()), Some(64));
        assert!(is_mcp_name("fs__read") && !is_mcp_name("read") && !is_mcp_name("bash"));
    }
}
