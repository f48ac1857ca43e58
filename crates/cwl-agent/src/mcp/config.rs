//! The `[[mcp_servers]]` entries of the config file, checked when read.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// The longest server name: with `__` and a tool name of at least 1
/// character the tool names stay within the 64 model APIs take.
pub const MAX_NAME: usize = 32;

/// How long a tool call may take when the entry sets no `timeout`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// One MCP server the agent starts (stdio) or connects to (HTTP).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "RawServer")]
pub struct McpServerConfig {
    /// The prefix of its tools' names (`fs` → `fs__read_file`).
    pub name: String,
    /// Where the server is.
    pub transport: McpTransport,
    /// How the engine evicts its tools' output.
    pub class: cwl::ToolClass,
    /// `Some` overrides each tool's own `readOnlyHint` for approvals.
    pub mutating: Option<bool>,
    /// How long one tool call may take.
    pub timeout: Duration,
}

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set on top of the filtered environment `bash` gets.
        env: BTreeMap<String, String>,
        /// Its working directory (default: the agent's `--cwd`).
        cwd: Option<PathBuf>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        /// The endpoint URL (`http://127.0.0.1:9000/mcp`).
        url: String,
        /// The variable of cwl's environment holding a bearer token sent
        /// as `Authorization: Bearer TOKEN` (withheld from child processes
        /// and redacted like `env_deny` matches).
        bearer_token_env: Option<String>,
    },
}

/// The entry as written, before it is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    name: String,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    bearer_token_env: Option<String>,
    class: Option<String>,
    mutating: Option<bool>,
    #[serde(default, deserialize_with = "crate::config::duration_text")]
    timeout: Option<String>,
}

impl TryFrom<RawServer> for McpServerConfig {
    type Error = String;

    fn try_from(raw: RawServer) -> Result<Self, String> {
        let name = raw.name;
        let fail = |what: String| Err(format!("mcp_servers entry {name:?}: {what}"));
        let valid = (1..=MAX_NAME).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && !name.contains("__");
        if !valid {
            return fail(format!(
                "the name must be 1 to {MAX_NAME} letters, digits, `_` or `-`, without `__` (it prefixes the tool names, as `NAME__tool`)"
            ));
        }
        let transport = match (raw.command, raw.url) {
            (Some(command), None) => {
                if raw.bearer_token_env.is_some() {
                    return fail("`bearer_token_env` is for a `url`, not a `command`".into());
                }
                if command.trim().is_empty() {
                    return fail("`command` is empty".into());
                }
                McpTransport::Stdio {
                    command,
                    args: raw.args,
                    env: raw.env,
                    cwd: raw.cwd,
                }
            }
            (None, Some(url)) => {
                if !raw.args.is_empty() || !raw.env.is_empty() || raw.cwd.is_some() {
                    return fail("`args`, `env` and `cwd` are for a `command`, not a `url`".into());
                }
                match reqwest::Url::parse(&url) {
                    Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
                    Ok(_) => return fail(format!("url {url:?} is not http:// or https://")),
                    Err(error) => return fail(format!("url {url:?}: {error}")),
                }
                if let Some(var) = &raw.bearer_token_env {
                    let valid = !var.is_empty()
                        && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if !valid {
                        return fail(format!(
                            "bearer_token_env {var:?} is not a variable name (letters, digits, `_`)"
                        ));
                    }
                }
                McpTransport::Http {
                    url,
                    bearer_token_env: raw.bearer_token_env,
                }
            }
            (Some(_), Some(_)) => return fail("give `command` or `url`, not both".into()),
            (None, None) => {
                return fail(
                    "give `command` (a stdio server) or `url` (a streamable-HTTP server)".into(),
                );
            }
        };
        let class = match raw.class.as_deref() {
            None | Some("intermediate") => cwl::ToolClass::Intermediate,
            Some("bulk") => cwl::ToolClass::Bulk,
            Some(other) => {
                return fail(format!(
                    "class {other:?} is not \"intermediate\" or \"bulk\""
                ));
            }
        };
        let timeout = match raw.timeout {
            None => DEFAULT_CALL_TIMEOUT,
            Some(text) => match crate::config::parse_duration(&text) {
                Ok(timeout) => timeout,
                Err(error) => return fail(format!("timeout: {error}")),
            },
        };
        Ok(McpServerConfig {
            name,
            transport,
            class,
            mutating: raw.mutating,
            timeout,
        })
    }
}

/// The variables named by `bearer_token_env`: cwl withholds and redacts
/// them like `env_deny` matches.
pub fn token_vars(servers: &[McpServerConfig]) -> Vec<String> {
    servers
        .iter()
        .filter_map(|server| match &server.transport {
            McpTransport::Http {
                bearer_token_env, ..
            } => bearer_token_env.clone(),
            McpTransport::Stdio { .. } => None,
        })
        .collect()
}

/// The entries of stdio servers' `env` whose names `deny` withholds: their
/// values are secrets to redact.
pub fn secret_env<'a>(
    servers: &'a [McpServerConfig],
    deny: &'a cwl_provider::secrets::EnvDeny,
) -> impl Iterator<Item = (String, String)> + 'a {
    servers
        .iter()
        .filter_map(|server| match &server.transport {
            McpTransport::Stdio { env, .. } => Some(env),
            McpTransport::Http { .. } => None,
        })
        .flatten()
        .filter(|(name, _)| deny.withholds(name))
        .map(|(name, value)| (name.clone(), value.clone()))
}

/// Refuses two entries with one name: their tools would clash.
pub fn check_unique(servers: &[McpServerConfig]) -> Result<(), String> {
    for (index, server) in servers.iter().enumerate() {
        if servers[..index].iter().any(|s| s.name == server.name) {
            return Err(format!(
                "two mcp_servers entries are named {:?}: names must differ",
                server.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    use super::*;

    #[test]
    fn stdio_and_http_entries_parse() {
        let config = parse(
            r#"
[[mcp_servers]]
name = "fs"
command = "npx"
args = ["-y", "server"]
env = { ROOT = "/tmp" }

[[mcp_servers]]
name = "web-2"
url = "http://127.0.0.1:9000/mcp"
class = "bulk"
mutating = false
timeout = "20s"
"#,
        )
        .unwrap();
        let [fs, web] = &config.mcp_servers[..] else {
            panic!("two servers: {:?}", config.mcp_servers);
        };
        assert_eq!(fs.class, cwl::ToolClass::Intermediate);
        assert_eq!(fs.mutating, None);
        assert_eq!(fs.timeout, DEFAULT_CALL_TIMEOUT);
        let McpTransport::Stdio {
            command, args, env, ..
        } = &fs.transport
        else {
            panic!("stdio: {fs:?}");
        };
        assert_eq!((command.as_str(), args.len()), ("npx", 2));
        assert_eq!(env["ROOT"], "/tmp");
        assert_eq!(web.class, cwl::ToolClass::Bulk);
        assert_eq!(web.mutating, Some(false));
        assert_eq!(web.timeout, Duration::from_secs(20));
        assert!(
            matches!(&web.transport, McpTransport::Http { url, bearer_token_env: None } if url.ends_with("/mcp"))
        );
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let error = |entry: &str| parse(&format!("[[mcp_servers]]\n{entry}")).unwrap_err();
        for (entry, expected) in [
            ("name = \"a__b\"\ncommand = \"x\"", "without `__`"),
            ("name = \"a.b\"\ncommand = \"x\"", "letters, digits"),
            ("name = \"\"\ncommand = \"x\"", "1 to 32"),
            ("name = \"a\"", "give `command`"),
            (
                "name = \"a\"\ncommand = \"x\"\nurl = \"http://h/\"",
                "not both",
            ),
            ("name = \"a\"\nurl = \"ftp://h/\"", "not http"),
            ("name = \"a\"\nurl = \"nonsense\"", "url \"nonsense\""),
            (
                "name = \"a\"\nurl = \"http://h/\"\nargs = [\"x\"]",
                "not a `url`",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nclass = \"huge\"",
                "class \"huge\"",
            ),
            ("name = \"a\"\ncommand = \"x\"\ntimeout = \"0s\"", "timeout"),
            ("name = \"a\"\ncommand = \"x\"\ncomand = \"y\"", "comand"),
            (
                "name = \"a\"\ncommand = \"x\"\nbearer_token_env = \"T\"",
                "not a `command`",
            ),
            (
                "name = \"a\"\nurl = \"http://h/\"\nbearer_token_env = \"$T\"",
                "not a variable name",
            ),
        ] {
            let text = error(entry);
            assert!(text.contains(expected), "{entry}: {text}");
            assert!(text.contains("line"), "{entry}: {text}");
        }
        let config = parse("[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"a\"\nurl = \"http://h/\"").unwrap();
        let error = check_unique(&config.mcp_servers).unwrap_err();
        assert!(error.contains("\"a\""), "{error}");
    }
}
