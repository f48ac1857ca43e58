//! Helpers shared by the agent's integration tests: scripted replies,
//! agents wired to the scripted server, and checks of request bodies.

#![allow(dead_code)]

pub mod selfgc;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cwl::{Block, Message, O200k, ToolCall, Usage};
use cwl_agent::agent::{Agent, AgentOptions, Collect, Event, Observer};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::testing::{RecordedRequest, Reply, ScriptedServer};
use cwl_provider::{
    AnthropicConfig, AnthropicProvider, ModelInfo, OpenAiConfig, OpenAiProvider, Provider,
    RetryPolicy,
};
use serde_json::{Value, json};

/// The session at `path` replayed under `config` from its last checkpoint,
/// and from its start.
pub fn replay_both(
    loaded: &cwl_session::Loaded,
    path: &Path,
    config: cwl::Config,
) -> (cwl_session::Replayed, cwl_session::Replayed) {
    let replay = |options| {
        cwl_session::replay(loaded, path, Arc::new(O200k), config.clone(), options).unwrap()
    };
    (
        replay(cwl_session::ReplayOptions::default()),
        replay(cwl_session::ReplayOptions::from_start()),
    )
}

/// A tool call block.
pub fn call(id: &str, name: &str, arguments: Value) -> Block {
    Block::ToolCall(ToolCall::new(id, name, arguments.to_string()))
}

/// A delimiter start.
pub fn start(id: &str, name: &str, kind: &str, deps: &[&str]) -> Block {
    let mut args = json!({"action": "start", "name": name, "type": kind});
    if !deps.is_empty() {
        args["dependencies"] = json!(deps);
    }
    call(id, "delimiter", args)
}

/// A delimiter end.
pub fn end(id: &str, description: Option<&str>) -> Block {
    let mut args = json!({"action": "end"});
    if let Some(d) = description {
        args["description"] = json!(d);
    }
    call(id, "delimiter", args)
}

/// Text.
pub fn text(t: &str) -> Block {
    Block::Text { text: t.into() }
}

/// An assistant message.
pub fn assistant(blocks: Vec<Block>) -> Message {
    Message::Assistant { content: blocks }
}

/// OpenAI replies for these messages, with no usage reported.
pub fn openai_replies(messages: &[Message]) -> Vec<Reply> {
    messages
        .iter()
        .map(|m| Reply::openai(m, Usage::default()))
        .collect()
}

/// A retry policy that never sleeps.
pub fn fast_retry() -> RetryPolicy {
    let mut policy = RetryPolicy::default().with_sleep(|_| Box::pin(async {}));
    policy.max_attempts = 4;
    policy
}

/// An OpenAI provider for the server.
pub fn openai(server: &ScriptedServer) -> Box<dyn Provider> {
    Box::new(
        OpenAiProvider::new(
            OpenAiConfig::new(format!("{}/v1", server.url()))
                .with_api_key("sk-test-secret-key")
                .with_retry(fast_retry()),
        )
        .unwrap(),
    )
}

/// An Anthropic provider for the server.
pub fn anthropic(server: &ScriptedServer) -> Box<dyn Provider> {
    Box::new(
        AnthropicProvider::new(
            AnthropicConfig::new(server.url())
                .with_api_key("ak-test-secret-key")
                .with_retry(fast_retry()),
        )
        .unwrap(),
    )
}

/// An OpenAI Responses provider for the server.
pub fn responses(server: &ScriptedServer) -> Box<dyn Provider> {
    Box::new(
        cwl_provider::ResponsesProvider::new(
            cwl_provider::ResponsesConfig::new(format!("{}/v1", server.url()))
                .with_api_key("sk-test-secret-key")
                .with_retry(fast_retry()),
        )
        .unwrap(),
    )
}

/// A model entry with a window and prices.
pub fn model(window: u64) -> ModelInfo {
    ModelInfo {
        name: "test-model".into(),
        context_window: window,
        max_output_tokens: None,
        input_price: Some(1.0),
        cached_input_price: None,
        cache_write_price: None,
        output_price: Some(2.0),
        cache_rules: None,
    }
}

/// Agent options with `budget` and no git status (tests do not depend on
/// the temp dir being outside a repository).
pub fn options(budget: usize) -> AgentOptions {
    let mut options = AgentOptions::new(model(200_000));
    options.budget = budget;
    options.git_status = false;
    options
}

/// A workspace with a few files of known content.
pub fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: String| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let mut auth = String::from(
        "//! Authentication.\n\npub fn login(user: &str) -> bool {\n    !user.is_empty()\n}\n",
    );
    for i in 0..40 {
        auth.push_str(&format!(
            "\n/// Helper number {i} checks one more property of a session token.\npub fn check_{i}(token: &str) -> bool {{\n    token.len() > {i}\n}}\n"
        ));
    }
    write("src/auth.rs", auth);
    let mut store = String::from("//! Storage.\n\npub fn save(key: &str) {\n    let _ = key;\n}\n");
    for i in 0..40 {
        store.push_str(&format!(
            "\n/// Loads record {i} from the store and returns its size in bytes.\npub fn load_{i}() -> usize {{\n    {i} * 16\n}}\n"
        ));
    }
    write("src/store.rs", store);
    write("README.md", "# demo\n\nA test workspace.\n".into());
    dir
}

/// An observer that keeps events and can be read after the agent is gone.
pub fn collector() -> (Arc<Mutex<Collect>>, Box<dyn Observer>) {
    let shared = Arc::new(Mutex::new(Collect::default()));
    let observer: Box<dyn Observer> = Box::new(Arc::clone(&shared));
    (shared, observer)
}

/// The events collected so far.
pub fn events(shared: &Arc<Mutex<Collect>>) -> Vec<Event> {
    shared.lock().unwrap().events.clone()
}

/// A new OpenAI-backed agent in `dir`.
pub fn openai_agent(
    server: &ScriptedServer,
    dir: &Path,
    sessions: &Path,
    options: AgentOptions,
) -> (Agent, Arc<Mutex<Collect>>) {
    let (shared, observer) = collector();
    let toolbox = Toolbox::new(dir, ToolConfig::default()).unwrap();
    let agent = Agent::create(openai(server), toolbox, options, sessions, observer).unwrap();
    (agent, shared)
}

/// A scripted server and a new OpenAI-backed agent wired to it, working
/// in a fresh [`workspace`] and saving its session in a directory of its
/// own. Fields drop in order: the agent before the directories it uses.
pub struct Scripted {
    /// The agent.
    pub agent: Agent,
    /// What the agent reported (read with [`events`]).
    pub shared: Arc<Mutex<Collect>>,
    /// Where the session is saved.
    pub sessions: tempfile::TempDir,
    /// The workspace.
    pub dir: tempfile::TempDir,
    /// The server answering the agent's requests.
    pub server: ScriptedServer,
}

impl Scripted {
    /// Starts a server answering `replies` and an agent with `options`.
    pub async fn start(replies: impl IntoIterator<Item = Reply>, options: AgentOptions) -> Self {
        let server = ScriptedServer::start(replies).await.unwrap();
        let dir = workspace();
        let sessions = tempfile::tempdir().unwrap();
        let (agent, shared) = openai_agent(&server, dir.path(), sessions.path(), options);
        Scripted {
            agent,
            shared,
            sessions,
            dir,
            server,
        }
    }
}

/// A [`Scripted`] run whose agent is gone, as after `cwl run` ends: the
/// session's lock is released and it can be resumed.
pub struct Closed {
    /// The session file.
    pub path: PathBuf,
    /// What the agent reported.
    pub shared: Arc<Mutex<Collect>>,
    /// Where the session is saved.
    pub sessions: tempfile::TempDir,
    /// The workspace.
    pub dir: tempfile::TempDir,
    /// The server that answered the agent.
    pub server: ScriptedServer,
}

impl Scripted {
    /// Drops the agent (releasing the session), keeping the rest.
    pub fn close(self) -> Closed {
        let path = self.agent.session_path();
        let Scripted {
            agent,
            shared,
            sessions,
            dir,
            server,
        } = self;
        drop(agent);
        Closed {
            path,
            shared,
            sessions,
            dir,
            server,
        }
    }
}

/// Tokens of an OpenAI request body, counted as the engine counts.
pub fn openai_request_tokens(body: &Value) -> usize {
    let request = cwl::openai::parse_request(body).expect("request parses as chat completions");
    request
        .messages
        .iter()
        .map(|m| cwl::tokens::message_tokens(&O200k, m))
        .sum::<usize>()
        + cwl::tokens::tools_tokens(&O200k, &request.tools)
}

/// Checks an OpenAI Chat Completions body: system prompt first, each tool
/// result right after the assistant message that called it (ids exactly
/// as sent), every call answered, no empty assistant message, and the
/// request ends with a user message (the status block).
pub fn check_openai_request(body: &Value) {
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["role"], "system", "system prompt first");
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("delimiter"),
        "system prompt teaches the delimiter"
    );
    let mut waiting: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap();
        if role != "tool" {
            assert!(
                waiting.is_empty(),
                "message {i} ({role}) comes before results for {waiting:?}"
            );
        }
        match role {
            "assistant" => {
                let calls = message["tool_calls"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let text = message["content"].as_str().unwrap_or("");
                assert!(
                    !calls.is_empty() || !text.is_empty(),
                    "empty assistant message {i}"
                );
                waiting = calls
                    .iter()
                    .map(|c| c["id"].as_str().unwrap().to_string())
                    .collect();
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap();
                assert_eq!(
                    waiting.first().map(String::as_str),
                    Some(id),
                    "tool result {i} out of order"
                );
                waiting.remove(0);
            }
            "system" => assert!(
                i == 0 || messages[i - 1]["role"] == "system",
                "system messages only in the prologue"
            ),
            _ => assert_eq!(role, "user"),
        }
    }
    assert!(waiting.is_empty(), "unanswered calls {waiting:?}");
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"].as_str().unwrap().starts_with("<status>"),
        "status block last"
    );
    let statuses = messages
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("<status>"))
        })
        .count();
    assert_eq!(statuses, 1, "exactly one status block");
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"delimiter") && tools.contains(&"read"));
}

/// Checks an Anthropic Messages body: system field, alternating roles
/// starting with user, each assistant tool_use answered by tool_result
/// blocks first in the next user message, status block last.
pub fn check_anthropic_request(body: &Value) {
    assert!(
        body["system"][0]["text"]
            .as_str()
            .unwrap()
            .contains("delimiter")
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    for pair in messages.windows(2) {
        assert_ne!(pair[0]["role"], pair[1]["role"], "roles alternate");
    }
    for (i, message) in messages.iter().enumerate() {
        if message["role"] != "assistant" {
            continue;
        }
        let ids: Vec<&str> = message["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap())
            .collect();
        let next = messages.get(i + 1).expect("a user turn follows");
        let results: Vec<&str> = next["content"]
            .as_array()
            .unwrap()
            .iter()
            .take(ids.len())
            .map(|b| {
                assert_eq!(b["type"], "tool_result");
                b["tool_use_id"].as_str().unwrap()
            })
            .collect();
        assert_eq!(results, ids, "tool results follow their calls in order");
    }
    let last = messages.last().unwrap()["content"].as_array().unwrap();
    let tail = last.last().unwrap();
    assert_eq!(tail["type"], "text");
    assert!(tail["text"].as_str().unwrap().starts_with("<status>"));
}

/// The user turns (not status blocks) of an OpenAI body, in order.
pub fn user_turns(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .filter(|c| !c.starts_with("<status>"))
        .map(str::to_string)
        .collect()
}

/// Whether process `pid` is gone (or a zombie: dead, not yet reaped).
#[cfg(target_os = "linux")]
pub fn gone(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .next();
    matches!(state, None | Some("Z" | "X"))
}

/// Whether a request is a strategy's side call (a summary, a plan): it
/// offers no tools, the main loop always does.
pub fn is_side_call(request: &RecordedRequest) -> bool {
    request.json().get("tools").is_none()
}

/// The main loop's requests to `server`, side calls left out.
pub fn main_requests(server: &ScriptedServer) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|request| !is_side_call(request))
        .collect()
}

/// The last message's text of an OpenAI request body.
pub fn last_content(request: &RecordedRequest) -> String {
    let body = request.json();
    body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Answers side calls with a short gist of their prompt (its own words,
/// so a summary check finds them related); main calls are left to the
/// script.
pub fn gist_side(request: &RecordedRequest) -> Option<Reply> {
    if !is_side_call(request) {
        return None;
    }
    let gist = last_content(request)
        .split_whitespace()
        .skip(3)
        .take(12)
        .collect::<Vec<_>>()
        .join(" ");
    Some(Reply::openai(
        &Message::assistant_text(gist),
        Usage::default(),
    ))
}

/// The settings a test wrote for its child process, one field a line, from
/// the file the environment variable `env` names.
pub fn child_fields(env: &str) -> Vec<String> {
    let path = std::env::var(env).expect("run by the tests");
    let settings = std::fs::read_to_string(path).expect("the settings file");
    settings.lines().map(str::to_string).collect()
}

/// The agent arguments a child process starts from: the scripted OpenAI
/// model at the base URL `fields[0]`, then the workspace, session
/// directory and config file.
pub fn child_agent(fields: &[String]) -> cwl_agent::cli::AgentArgs {
    cwl_agent::cli::AgentArgs {
        provider: Some(cwl_provider::ProviderKind::OpenAi),
        model: Some("gpt-test".into()),
        base_url: Some(fields[0].clone()),
        cwd: Some(PathBuf::from(&fields[1])),
        session_dir: Some(PathBuf::from(&fields[2])),
        config: Some(PathBuf::from(&fields[3])),
        ..Default::default()
    }
}

/// The name `--exact` wants for the test `name` of the module `module`
/// (the caller's `module_path!()`), for the tests that run this test binary
/// again to run one ignored test in a child process. Libtest names a test
/// by its path in this binary without the crate (`agent_approval::cwl_process`).
/// `--exact` with a name that matches no test runs nothing and passes, so
/// the name is checked first: this binary must list exactly that one
/// ignored test under it.
pub fn child_test(module: &str, name: &str) -> String {
    static CHECKED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let full = match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    };
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if !checked.contains(&full) {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--list", "--ignored", "--exact", &full])
            .output()
            .unwrap();
        let listed = String::from_utf8_lossy(&output.stdout);
        let tests: Vec<&str> = listed
            .lines()
            .filter_map(|line| line.strip_suffix(": test"))
            .collect();
        assert_eq!(
            tests,
            [full.as_str()],
            "the child test {full} is not in this binary:\n{listed}"
        );
        checked.push(full.clone());
    }
    full
}
