//! MCP client: tools from Model Context Protocol servers join the agent's
//! [`Registry`](crate::tools::Registry), through the official Rust SDK
//! (`rmcp`).
//!
//! Servers come from the config file's `[[mcp_servers]]` entries (see
//! [`McpServerConfig`]): a stdio server is started as a child process with
//! the environment `bash` gets (provider keys and `env_deny` variables
//! withheld) plus its own `env`; a streamable-HTTP server is reached at its
//! `url`. All are started when the agent starts and listed at once; each
//! tool is offered as `SERVER__TOOL`. A server that does not start or list
//! its tools within [`STARTUP_TIMEOUT`] is left out with a warning naming
//! it and what failed: the agent runs without its tools.
//!
//! A tool asks for approval under `--approval on-mutate` unless it declares
//! `readOnlyHint: true` (or its entry says `mutating = false`). Its output
//! is evicted as its entry's `class` says (intermediate by default). Stdio
//! servers run in their own process group, killed with it when the agent
//! ends (also after Ctrl-C).

mod child;
mod config;
mod connect;
mod content;
pub mod resume;
#[cfg(feature = "testing")]
pub mod testing;
mod tool;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use child::kill_all;
pub use config::{
    DEFAULT_CALL_TIMEOUT, McpServerConfig, McpTransport, check_unique, secret_env, token_vars,
};
pub use connect::{STARTUP_TIMEOUT, StartError};
pub use tool::{McpTool, SEPARATOR, is_mcp_name, offered_name};

use crate::tools::{Tool, Toolbox};
use connect::Connection;
use cwl_provider::secrets::Secrets;

/// The MCP servers in use and their tools. Dropping it (and the toolbox
/// holding its tools) ends the sessions and kills stdio servers.
#[derive(Default)]
pub struct McpServers {
    /// Each server's name and the names its tools are offered under.
    loaded: Vec<(String, Vec<String>)>,
    tools: Vec<Arc<McpTool>>,
    /// Problems worth telling the user: servers left out, tools skipped.
    warnings: Vec<String>,
    _connections: Vec<Arc<Connection>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("loaded", &self.loaded)
            .field("warnings", &self.warnings)
            .finish()
    }
}

impl McpServers {
    /// Starts every server of `configs` at once (see the module doc), each
    /// within `timeout`. Never fails: a server that cannot be used is a
    /// [`McpServers::warnings`] line.
    pub async fn start(
        configs: &[McpServerConfig],
        secrets: &Secrets,
        root: &Path,
        timeout: Duration,
    ) -> McpServers {
        let started = futures_util::future::join_all(
            configs
                .iter()
                .map(|config| connect::connect(config, secrets, root, timeout)),
        )
        .await;
        let mut servers = McpServers::default();
        for (config, started) in configs.iter().zip(started) {
            let (connection, listed) = match started {
                Ok(started) => started,
                Err(error) => {
                    servers.warnings.push(format!(
                        "{error}; the agent runs without its tools (check the config file's mcp_servers entry)"
                    ));
                    continue;
                }
            };
            let connection = Arc::new(connection);
            let policy = tool::Policy {
                mutating: config.mutating,
                class: config.class,
                timeout: config.timeout,
            };
            let mut names = Vec::new();
            for listed in &listed {
                let Some(name) = offered_name(&config.name, &listed.name) else {
                    servers.warnings.push(format!(
                        "MCP server `{}`: tool {:?} left out: its name cannot be offered as `{}{SEPARATOR}…` within 64 characters",
                        config.name, listed.name, config.name
                    ));
                    continue;
                };
                if names.contains(&name) {
                    servers.warnings.push(format!(
                        "MCP server `{}`: tool {:?} left out: another of its tools is also offered as `{name}`",
                        config.name, listed.name
                    ));
                    continue;
                }
                names.push(name.clone());
                servers.tools.push(Arc::new(McpTool::new(
                    name,
                    listed,
                    &policy,
                    Arc::clone(&connection),
                )));
            }
            servers.loaded.push((config.name.clone(), names));
            servers._connections.push(connection);
        }
        servers
    }

    /// Adds every tool to `toolbox`; a refused one (e.g. a name taken) is
    /// left out with a warning.
    pub fn register(&mut self, toolbox: &mut Toolbox) {
        for tool in &self.tools {
            let name = tool.spec().name;
            let shared: Arc<dyn Tool> = Arc::clone(tool) as Arc<dyn Tool>;
            if let Err(error) = toolbox.register(shared) {
                self.warnings.push(format!("MCP tool left out: {error}"));
                for (_, names) in &mut self.loaded {
                    names.retain(|known| *known != name);
                }
            }
        }
    }

    /// The servers in use, each with the names its tools are offered
    /// under.
    pub fn loaded(&self) -> &[(String, Vec<String>)] {
        &self.loaded
    }

    /// Servers left out and tools skipped, one line each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// One line for the start-up info: which servers and tools are in use
    /// (`None` when no server is).
    pub fn summary(&self) -> Option<String> {
        if self.loaded.is_empty() {
            return None;
        }
        let servers: Vec<String> = self
            .loaded
            .iter()
            .map(|(server, tools)| match tools.len() {
                0 => format!("{server} (no tools)"),
                _ => format!("{server} ({})", tools.join(", ")),
            })
            .collect();
        Some(format!("MCP tools: {}", servers.join("; ")))
    }
}
