//! The tool registry: a tool from outside registered at run time is
//! offered, run, classed for eviction and asked about like a built-in one;
//! bad registrations are refused; the engine's classes come from it.

use crate::support;

use std::sync::Arc;

use cwl::{ToolCall, ToolClass};
use cwl_agent::agent::{Agent, Silent};
use cwl_agent::tools::{
    ExecContext, RegistryError, Tool, ToolConfig, ToolOutput, Toolbox, is_read_only_command,
};
use cwl_provider::testing::ScriptedServer;
use futures_util::future::BoxFuture;
use serde_json::json;
use support::*;

/// A tool from outside: echoes its `text` argument, bulk, not mutating.
struct Echo {
    name: &'static str,
}

impl Tool for Echo {
    fn spec(&self) -> cwl::ToolSpec {
        cwl::ToolSpec {
            name: self.name.to_string(),
            description: "Echo the text.".into(),
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        }
    }

    fn class(&self) -> ToolClass {
        ToolClass::Bulk
    }

    fn run<'a>(&'a self, arguments: &'a str, ctx: &'a ExecContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let args: serde_json::Value = serde_json::from_str(arguments).unwrap();
            let place = ctx.exploration.as_deref().unwrap_or("no episode");
            ToolOutput::ok(format!("{} ({place})", args["text"].as_str().unwrap()))
        })
    }
}

fn toolbox(dir: &std::path::Path) -> Toolbox {
    Toolbox::new(dir, ToolConfig::default()).unwrap()
}

#[tokio::test]
async fn a_registered_tool_is_offered_run_and_classed() {
    let dir = workspace();
    let mut tb = toolbox(dir.path());
    tb.register(Arc::new(Echo { name: "echo_mcp" })).unwrap();
    let names = tb.registry().names();
    assert_eq!(names.last().map(String::as_str), Some("echo_mcp"));
    assert_eq!(names.len(), 8);
    assert!(tb.specs().iter().any(|s| s.name == "echo_mcp"));
    assert!(tb.has("echo_mcp") && !tb.is_mutating("echo_mcp"));
    let call = ToolCall::new("c1", "echo_mcp", json!({"text": "hi"}).to_string());
    let out = tb.execute(&call, &ExecContext::exploring("look")).await;
    assert_eq!(out, ToolOutput::ok("hi (look)"));
    let classes = tb.classes();
    assert_eq!(classes.class("echo_mcp"), ToolClass::Bulk);
    assert_eq!(classes.class("grep"), ToolClass::Bulk);
    assert_eq!(classes.class("read"), ToolClass::Intermediate);
    // Not registered here: the engine's default bulk names do not apply.
    assert_eq!(classes.class("find"), ToolClass::Intermediate);
    let unknown = ToolCall::new("c2", "nope", "{}");
    let out = tb.execute(&unknown, &ExecContext::default()).await;
    assert!(out.is_error);
    assert!(
        out.content.ends_with("glob, ls, echo_mcp"),
        "{}",
        out.content
    );
}

#[test]
fn bad_registrations_are_refused_and_change_nothing() {
    let dir = workspace();
    let mut tb = toolbox(dir.path());
    let cases = [
        ("bash", RegistryError::Duplicate("bash".into())),
        ("delimiter", RegistryError::Reserved("delimiter".into())),
        ("recall", RegistryError::Reserved("recall".into())),
        ("two words", RegistryError::InvalidName("two words".into())),
        ("", RegistryError::InvalidName(String::new())),
    ];
    for (name, expected) in cases {
        let error = tb.register(Arc::new(Echo { name })).unwrap_err();
        assert_eq!(error, expected);
    }
    assert_eq!(tb.registry().names().len(), 7);
    assert!(
        RegistryError::Duplicate("bash".into())
            .to_string()
            .contains("already registered")
    );
}

#[tokio::test]
async fn the_engine_classes_tools_as_the_registry_does() {
    let server = ScriptedServer::start([]).await.unwrap();
    let dir = workspace();
    let sessions = tempfile::tempdir().unwrap();
    let mut tb = toolbox(dir.path());
    tb.register(Arc::new(Echo { name: "echo_mcp" })).unwrap();
    let agent = Agent::create(
        openai(&server),
        tb,
        options(80_000),
        sessions.path(),
        Box::new(Silent),
    )
    .unwrap();
    let classes = &agent.context().config().classes;
    assert_eq!(classes.class("echo_mcp"), ToolClass::Bulk);
    assert_eq!(classes.class("ls"), ToolClass::Bulk);
    assert_eq!(classes.class("bash"), ToolClass::Intermediate);
    assert_eq!(classes.class("find"), ToolClass::Intermediate);
    assert!(agent.context().tools().iter().any(|t| t.name == "echo_mcp"));
}

#[test]
fn bash_calls_mutate_unless_their_command_only_reads() {
    let dir = workspace();
    let tb = toolbox(dir.path());
    let bash = |command: &str| ToolCall::new("b", "bash", json!({"command": command}).to_string());
    assert!(!tb.call_mutates(&bash("git status && cat src/lib.rs")));
    assert!(tb.call_mutates(&bash("rm -rf target")));
    assert!(tb.call_mutates(&bash("sed -n '1w copy' a")));
    assert!(tb.call_mutates(&ToolCall::new("b", "bash", "not json")));
    let write = ToolCall::new(
        "w",
        "write",
        json!({"path": "a", "content": ""}).to_string(),
    );
    assert!(tb.call_mutates(&write));
    assert!(!tb.call_mutates(&ToolCall::new("r", "read", r#"{"path":"a"}"#)));
    assert!(!tb.call_mutates(&ToolCall::new("x", "unknown", "{}")));
    assert!(is_read_only_command("ls -la | wc -l"));
    assert!(!is_read_only_command("awk '{print}' a"));
}
