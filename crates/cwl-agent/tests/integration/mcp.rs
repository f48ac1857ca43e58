//! MCP servers' tools in the agent: a stdio server (the
//! `cwl-mcp-test-server` binary) and a streamable-HTTP one on 127.0.0.1
//! (`cwl_agent::mcp::testing`), called by the scripted model; servers
//! that do not start; what a resumed session offers when the servers'
//! tools changed; stdio servers killed when the agent is done.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use cwl::{Message, Record, Usage};
use cwl_agent::agent::Agent;
use cwl_agent::mcp::testing::HttpServer;
use cwl_agent::mcp::{self, McpServerConfig, McpServers, McpTransport};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::secrets::{EnvDeny, Secrets};
use cwl_provider::testing::{Reply, ScriptedServer};
use serde_json::{Value, json};
use support::*;

const SERVER: &str = env!("CARGO_BIN_EXE_cwl-mcp-test-server");

fn stdio(name: &str, args: &[&str], env: &[(&str, &str)]) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        transport: McpTransport::Stdio {
            command: SERVER.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            cwd: None,
        },
        class: cwl::ToolClass::Intermediate,
        mutating: None,
        timeout: mcp::DEFAULT_CALL_TIMEOUT,
    }
}

fn http(name: &str, url: &str) -> McpServerConfig {
    McpServerConfig {
        transport: McpTransport::Http {
            url: url.into(),
            bearer_token_env: None,
        },
        ..stdio(name, &[], &[])
    }
}

fn secrets() -> Secrets {
    Secrets::from_vars(
        [
            ("PATH", "/usr/bin:/bin"),
            ("OPENAI_API_KEY", "sk-fake-0123456789"),
            ("PLAIN", "plain-value"),
        ],
        &EnvDeny::default(),
    )
}

async fn start(configs: &[McpServerConfig], dir: &Path) -> McpServers {
    McpServers::start(configs, &secrets(), dir, Duration::from_secs(20)).await
}

/// A toolbox in `dir` with the servers' tools registered.
async fn mcp_toolbox(configs: &[McpServerConfig], dir: &Path) -> (Toolbox, McpServers) {
    let mut servers = start(configs, dir).await;
    let mut toolbox = Toolbox::new(
        dir,
        ToolConfig {
            secrets: secrets(),
            ..ToolConfig::default()
        },
    )
    .unwrap();
    servers.register(&mut toolbox);
    assert_eq!(servers.warnings(), [] as [String; 0]);
    (toolbox, servers)
}

fn replies(calls: &[(&str, &str, Value)]) -> Vec<Reply> {
    let mut replies: Vec<Reply> = calls
        .iter()
        .map(|(id, name, args)| {
            Reply::openai(
                &assistant(vec![call(id, name, args.clone())]),
                Usage::default(),
            )
        })
        .collect();
    replies.push(Reply::openai(
        &assistant(vec![text("done")]),
        Usage::default(),
    ));
    replies
}

fn results(path: &Path) -> Vec<(String, String, bool)> {
    cwl_session::read(path)
        .unwrap()
        .records
        .into_iter()
        .filter_map(|(_, record)| match record {
            Record::Message {
                message: Message::ToolResult(result),
                ..
            } => Some((result.tool_name, result.content, result.is_error)),
            _ => None,
        })
        .collect()
}

/// The tool messages of the last request the model server got.
fn sent_tool_contents(server: &ScriptedServer) -> Vec<String> {
    let body = server.requests().last().expect("a request").json();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn stdio_tools_reach_the_model_and_the_session() {
    let dir = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let configs = [stdio("t", &[], &[("EXTRA", "from-config")])];
    let (toolbox, servers) = mcp_toolbox(&configs, dir.path()).await;
    assert_eq!(
        servers.summary().as_deref(),
        Some(
            "MCP tools: t (t__echo, t__env, t__write_note, t__fail, t__picture, t__pid, t__whoami)"
        )
    );
    let server = ScriptedServer::start(replies(&[
        ("c1", "t__echo", json!({"text": "hello"})),
        ("c2", "t__fail", json!({"reason": "on purpose"})),
        ("c3", "t__picture", json!({})),
        ("c4", "t__env", json!({"name": "OPENAI_API_KEY"})),
        ("c5", "t__env", json!({"name": "PLAIN"})),
        ("c6", "t__env", json!({"name": "EXTRA"})),
        ("c7", "t__echo", json!("not an object")),
    ]))
    .await
    .unwrap();
    let (_events, observer) = collector();
    let mut agent = Agent::create(
        openai(&server),
        toolbox,
        options(60_000),
        sessions.path(),
        observer,
    )
    .unwrap();
    agent.run_task("use the tools").await.unwrap();
    let path = agent.session_path();
    drop(agent);
    let expected = [
        ("t__echo", "echo: hello", false),
        ("t__fail", "it failed: on purpose", true),
        (
            "t__picture",
            "a red dot\n[image: image/png, about 18 bytes, not shown]",
            false,
        ),
        ("t__env", "(unset)", false),
        ("t__env", "plain-value", false),
        ("t__env", "from-config", false),
        ("t__echo", "the arguments must be a JSON object", true),
    ];
    let got = results(&path);
    let got: Vec<(&str, &str, bool)> = got
        .iter()
        .map(|(n, c, e)| (n.as_str(), c.as_str(), *e))
        .collect();
    assert_eq!(got, expected);
    let sent = sent_tool_contents(&server);
    assert_eq!(sent.len(), expected.len());
    assert!(sent.iter().any(|c| c.contains("echo: hello")), "{sent:?}");
    // The MCP tools were offered with their server in the description.
    let first = server.requests()[0].json();
    let tools = &first["tools"].as_array().unwrap();
    let echo = tools
        .iter()
        .find(|t| t["function"]["name"] == "t__echo")
        .expect("t__echo offered");
    assert_eq!(
        echo["function"]["description"],
        "[MCP server t] Echoes the text."
    );
    assert_eq!(echo["function"]["parameters"]["required"], json!(["text"]));
    drop(servers);
}

#[tokio::test]
async fn streamable_http_tools_work_too() {
    let remote = HttpServer::start(vec!["echo".into(), "write_note".into()]).unwrap();
    let dir = workspace();
    let config = McpServerConfig {
        class: cwl::ToolClass::Bulk,
        ..http("web", remote.url())
    };
    let (mut toolbox, mut servers) = mcp_toolbox(&[config], dir.path()).await;
    assert_eq!(toolbox.classes().class("web__echo"), cwl::ToolClass::Bulk);
    assert_eq!(
        toolbox.classes().class("read"),
        cwl::ToolClass::Intermediate
    );
    assert_eq!(
        servers.loaded(),
        [(
            "web".to_string(),
            vec!["web__echo".to_string(), "web__write_note".to_string()]
        )]
    );
    assert!(!toolbox.call_mutates(&tool_call("web__echo")));
    assert!(toolbox.call_mutates(&tool_call("web__write_note")));
    let note = dir.path().join("note.txt");
    let out = toolbox
        .execute(
            &cwl::ToolCall {
                id: "1".into(),
                name: "web__write_note".into(),
                arguments: json!({"path": note, "text": "over http"}).to_string(),
            },
            &Default::default(),
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "over http");
    // A name already taken is refused and no longer reported as loaded.
    servers.register(&mut toolbox);
    assert_eq!(
        servers.warnings(),
        [
            "MCP tool left out: a tool named `web__echo` is already registered",
            "MCP tool left out: a tool named `web__write_note` is already registered"
        ]
    );
    assert_eq!(servers.loaded(), [("web".to_string(), vec![])]);
    let methods = remote.methods();
    for method in ["initialize", "tools/list", "tools/call"] {
        assert!(methods.iter().any(|m| m == method), "{methods:?}");
    }
}

fn tool_call(name: &str) -> cwl::ToolCall {
    cwl::ToolCall {
        id: "x".into(),
        name: name.into(),
        arguments: "{}".into(),
    }
}

#[tokio::test]
async fn servers_that_fail_are_left_out_with_the_reason() {
    let dir = workspace();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let configs = [
        stdio("dies", &["--fail-start"], &[]),
        McpServerConfig {
            transport: McpTransport::Stdio {
                command: "/nonexistent/mcp-server".into(),
                args: vec![],
                env: BTreeMap::new(),
                cwd: None,
            },
            ..stdio("missing", &[], &[])
        },
        http("offline", &format!("http://{closed}/mcp")),
        stdio("good", &["--tools", "echo"], &[]),
    ];
    let servers = start(&configs, dir.path()).await;
    let warnings = servers.warnings();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    assert!(
        warnings[0].starts_with("MCP server `dies` not used:"),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].contains("exit status: 3"), "{}", warnings[0]);
    assert!(
        warnings[0].contains("cannot open the database (asked to fail)"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].starts_with(
            "MCP server `missing` not used: cannot start `/nonexistent/mcp-server`: No such file"
        ),
        "{}",
        warnings[1]
    );
    assert!(
        warnings[2].starts_with("MCP server `offline` not used:"),
        "{}",
        warnings[2]
    );
    assert!(warnings[2].contains(&closed.to_string()), "{}", warnings[2]);
    for warning in warnings {
        assert!(
            warning.ends_with(
                "the agent runs without its tools (check the config file's mcp_servers entry)"
            ),
            "{warning}"
        );
    }
    assert_eq!(
        servers.loaded(),
        [("good".to_string(), vec!["good__echo".to_string()])]
    );
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let dir = workspace();
    let config = McpServerConfig {
        transport: McpTransport::Stdio {
            command: "sleep".into(),
            args: vec!["30".into()],
            env: BTreeMap::new(),
            cwd: None,
        },
        ..stdio("slow", &[], &[])
    };
    let started = std::time::Instant::now();
    let servers = McpServers::start(
        &[config],
        &secrets(),
        dir.path(),
        Duration::from_millis(500),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let warning = &servers.warnings()[0];
    assert!(
        warning.contains(
            "MCP server `slow` not used: `sleep` did not answer `initialize` within 0.5s"
        ),
        "{warning}"
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn stdio_servers_end_with_the_agent() {
    let dir = workspace();
    let (toolbox, servers) = mcp_toolbox(
        &[stdio("t", &["--tools", "pid", "--linger"], &[])],
        dir.path(),
    )
    .await;
    let out = toolbox
        .execute(&tool_call("t__pid"), &Default::default())
        .await;
    let pid: i32 = out.content.parse().unwrap();
    assert!(!gone(pid), "the server runs while the agent does");
    drop(toolbox);
    drop(servers);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !gone(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "server {pid} still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // No `mcp::kill_all()` here: it kills every server of this process,
    // those of the tests running beside this one included.
}

/// A session made with one set of MCP tools, resumed with another: the
/// tools offered follow the servers, and a note says what changed.
#[tokio::test]
async fn a_resumed_session_offers_the_servers_tools_as_they_are_now() {
    let dir = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(replies(&[(
        "c1",
        "t__write_note",
        json!({"path": dir.path().join("a.txt"), "text": "first run"}),
    )]))
    .await
    .unwrap();
    let (toolbox, servers) = mcp_toolbox(
        &[stdio("t", &["--tools", "echo,write_note"], &[])],
        dir.path(),
    )
    .await;
    let (_events, observer) = collector();
    let mut agent = Agent::create(
        openai(&server),
        toolbox,
        options(60_000),
        sessions.path(),
        observer,
    )
    .unwrap();
    agent.run_task("write a note").await.unwrap();
    let path = agent.session_path();
    drop(agent);
    drop(servers);
    let first = offered(&server.requests()[0].json());
    assert!(first.contains(&"t__write_note".to_string()), "{first:?}");

    let server = ScriptedServer::start(replies(&[("c2", "t__write_note", json!({}))]))
        .await
        .unwrap();
    let (toolbox, _servers) =
        mcp_toolbox(&[stdio("t", &["--tools", "echo,env"], &[])], dir.path()).await;
    let (_events, observer) = collector();
    let mut agent =
        Agent::resume(openai(&server), toolbox, options(60_000), &path, observer).unwrap();
    agent.run_task("write another").await.unwrap();
    drop(agent);
    let now = offered(&server.requests()[0].json());
    assert!(now.contains(&"t__echo".to_string()), "{now:?}");
    assert!(now.contains(&"t__env".to_string()), "{now:?}");
    assert!(!now.contains(&"t__write_note".to_string()), "{now:?}");
    assert!(now.contains(&"read".to_string()) && now.contains(&"delimiter".to_string()));
    let notes: Vec<String> = cwl_session::read(&path)
        .unwrap()
        .records
        .into_iter()
        .filter_map(|(_, record)| match record {
            Record::Note { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert!(
        notes.iter().any(|n| n
            == "MCP tools differ from the last run (added: t__env; no longer offered: t__write_note)"),
        "{notes:#?}"
    );
    // The checkpoint of the first run holds the old tools: not used.
    assert!(
        notes.iter().any(|n| n.contains(
            "checkpoint not used (it was taken with other tools offered); replayed the whole session instead"
        )),
        "{notes:#?}"
    );
    let last = results(&path).pop().unwrap();
    assert_eq!(last.0, "t__write_note");
    assert!(last.2 && last.1.contains("unknown tool"), "{last:?}");
}

/// A stdio server that dies mid-session: its tools answer with an error
/// naming it, and the agent goes on.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_server_that_died_gives_tool_errors() {
    let dir = workspace();
    let (toolbox, _servers) =
        mcp_toolbox(&[stdio("t", &["--tools", "pid,echo"], &[])], dir.path()).await;
    let out = toolbox
        .execute(&tool_call("t__pid"), &Default::default())
        .await;
    let pid = rustix::process::Pid::from_raw(out.content.parse().unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let call = cwl::ToolCall {
        id: "e".into(),
        name: "t__echo".into(),
        arguments: json!({"text": "anyone?"}).to_string(),
    };
    let out = toolbox.execute(&call, &Default::default()).await;
    assert!(out.is_error, "{out:?}");
    assert!(
        out.content.starts_with("MCP server `t` failed: ")
            && out.content.ends_with(
                "(it may have stopped; its tools stay unavailable until cwl is restarted)"
            ),
        "{}",
        out.content
    );
}
