//! Starting one MCP server (or connecting to it) and listing its tools.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::child::ServerProcess;
use super::config::{McpServerConfig, McpTransport};
use cwl_provider::secrets::Secrets;

/// How long a server may take to start, answer `initialize` and list its
/// tools.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// A live session with one MCP server.
pub(crate) struct Connection {
    /// The server's name in the config file.
    pub(crate) name: String,
    /// The MCP client session.
    pub(crate) service: RunningService<RoleClient, ()>,
    /// The child process of a stdio server (killed when dropped).
    _process: Option<ServerProcess>,
}

/// A server that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server `{server}` not used: {reason}")]
pub struct StartError {
    /// The server's name in the config file.
    pub server: String,
    /// What failed, with the server's own words when it gave any.
    pub reason: String,
}

/// Starts (or connects to) `config`'s server and lists its tools, within
/// `timeout`. Stdio servers get `secrets`' filtered environment plus their
/// own `env`, and run in `root` unless they name a `cwd`.
pub(crate) async fn connect(
    config: &McpServerConfig,
    secrets: &Secrets,
    root: &Path,
    timeout: Duration,
) -> Result<(Connection, Vec<rmcp::model::Tool>), StartError> {
    let fail = |reason: String| StartError {
        server: config.name.clone(),
        reason,
    };
    let (service, mut process) = match &config.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut child = tokio::process::Command::new(command);
            child
                .args(args)
                .env_clear()
                .envs(secrets.child_env())
                .envs(env)
                .current_dir(cwd.as_deref().unwrap_or(root))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            #[cfg(unix)]
            child.process_group(0);
            let child = child
                .spawn()
                .map_err(|e| fail(format!("cannot start `{command}`: {e}")))?;
            let (mut process, stdout, stdin) = ServerProcess::adopt(child);
            match tokio::time::timeout(timeout, ().serve((stdout, stdin))).await {
                Ok(Ok(service)) => (service, Some(process)),
                Ok(Err(error)) => {
                    let why = process.failure().await;
                    return Err(fail(format!(
                        "`{command}` did not answer `initialize` ({}){why}",
                        init_cause(&error)
                    )));
                }
                Err(_) => {
                    let why = process.failure().await;
                    return Err(fail(format!(
                        "`{command}` did not answer `initialize` within {}s{why}",
                        timeout.as_secs_f64()
                    )));
                }
            }
        }
        McpTransport::Http {
            url,
            bearer_token_env,
        } => {
            let token = match bearer_token_env {
                None => None,
                Some(var) => match std::env::var(var) {
                    Ok(token) if !token.trim().is_empty() => Some(token),
                    _ => {
                        return Err(fail(format!(
                            "its bearer_token_env {var} is not set (or empty) in cwl's environment"
                        )));
                    }
                },
            };
            // rmcp's HTTP client takes rustls' process-wide crypto provider.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(token) = token {
                config = config.auth_header(token);
            }
            let transport = StreamableHttpClientTransport::from_config(config);
            match tokio::time::timeout(timeout, ().serve(transport)).await {
                Ok(Ok(service)) => (service, None),
                Ok(Err(error)) => {
                    return Err(fail(format!(
                        "{url} did not answer `initialize` ({})",
                        init_cause(&error)
                    )));
                }
                Err(_) => {
                    return Err(fail(format!(
                        "{url} did not answer `initialize` within {}s",
                        timeout.as_secs_f64()
                    )));
                }
            }
        }
    };
    let tools = match tokio::time::timeout(timeout, service.list_all_tools()).await {
        Ok(Ok(tools)) => tools,
        Ok(Err(error)) => {
            let why = match process.as_mut() {
                Some(process) => process.failure().await,
                None => String::new(),
            };
            return Err(fail(format!(
                "listing its tools failed ({}){why}",
                innermost(&error)
            )));
        }
        Err(_) => {
            return Err(fail(format!(
                "it did not list its tools within {}s",
                timeout.as_secs_f64()
            )));
        }
    };
    let connection = Connection {
        name: config.name.clone(),
        service,
        _process: process,
    };
    Ok((connection, tools))
}

/// The innermost cause of `error`: what actually went wrong (`Connection
/// refused`, `Broken pipe`), without the SDK's wrapping.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// What went wrong in a failed `initialize`: the transport's own error
/// (which the SDK does not chain as a source), else the error itself.
fn init_cause(error: &rmcp::service::ClientInitializeError) -> String {
    match error {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => {
            innermost(error.error.as_ref())
        }
        other => innermost(other),
    }
}
