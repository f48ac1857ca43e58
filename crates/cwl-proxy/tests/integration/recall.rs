//! `recall` through the proxy, on all three wires: the proxy adds the
//! tool after the client's own, the client answers the model's call with
//! an unknown-tool error (as Claude Code, pi and Codex do), and the next
//! request carries the strategy's answer in its place: Self-GC's folded
//! payload byte for byte, or its error text; every later request carries
//! the same bytes, and a conversation rebuilt from the store too.

use crate::support;

use std::path::Path;
use std::time::Duration;

use cwl::{Message, Record};
use cwl_proxy::event::{Event, RecallEvent};
use cwl_session::strategy::StrategyName;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use support::porting::{fold_plan, output};
use support::{Reply, Scripted, Seen, quoted};

const PLANNER: &str = "context garbage collector";

/// A client of one wire, building its history as the real one does.
#[derive(Debug, Clone, Copy)]
enum Client {
    /// Claude Code: Anthropic Messages.
    Claude,
    /// pi: Chat Completions.
    Pi,
    /// Codex CLI: Responses.
    Codex,
}

impl Client {
    fn path(self) -> &'static str {
        match self {
            Client::Claude => "/v1/messages?beta=true",
            Client::Pi => "/v1/chat/completions",
            Client::Codex => "/v1/responses",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Client::Codex => "input",
            _ => "messages",
        }
    }

    fn tools(self) -> &'static str {
        match self {
            Client::Claude => {
                r#"[{"name": "read", "description": "Reads a file", "input_schema": {"type": "object"}}]"#
            }
            Client::Pi => {
                r#"[{"type": "function", "function": {"name": "read", "description": "Reads a file", "parameters": {"type": "object"}}}]"#
            }
            Client::Codex => {
                r#"[{"type": "function", "name": "read", "parameters": {"type": "object"}, "strict": false}]"#
            }
        }
    }

    fn tool_name(self, tool: &Value) -> String {
        let name = match self {
            Client::Pi => &tool["function"]["name"],
            _ => &tool["name"],
        };
        name.as_str().unwrap_or_default().to_string()
    }

    fn body(self, items: &[String], tools: Option<&str>) -> String {
        let tools = tools
            .map(|t| format!(r#""tools": {t}, "#))
            .unwrap_or_default();
        let items = items.join(", ");
        match self {
            Client::Claude => format!(
                r#"{{"model": "claude-test", "max_tokens": 1000, "system": "You are Claude Code.", {tools}"stream": true, "messages": [{items}]}}"#
            ),
            Client::Pi => format!(
                r#"{{"model": "gpt-test", {tools}"stream": true, "messages": [{{"role": "system", "content": "You are pi."}}, {items}]}}"#
            ),
            Client::Codex => format!(
                r#"{{"model": "codex-test", "instructions": "You are Codex.", {tools}"stream": true, "store": false, "input": [{items}]}}"#
            ),
        }
    }

    fn user(self, text: &str) -> String {
        match self {
            Client::Codex => format!(
                r#"{{"type": "message", "role": "user", "content": [{{"type": "input_text", "text": {}}}]}}"#,
                quoted(text)
            ),
            _ => format!(r#"{{"role": "user", "content": {}}}"#, quoted(text)),
        }
    }

    /// The items of one assistant turn making `calls` (id, tool, arguments).
    fn calls(self, calls: &[(&str, &str, &str)]) -> Vec<String> {
        match self {
            Client::Claude => {
                let blocks: Vec<String> = calls
                    .iter()
                    .map(|(id, name, arguments)| {
                        format!(
                            r#"{{"type": "tool_use", "id": "{id}", "name": "{name}", "input": {arguments}}}"#
                        )
                    })
                    .collect();
                vec![format!(
                    r#"{{"role": "assistant", "content": [{{"type": "text", "text": "on it"}}, {}]}}"#,
                    blocks.join(", ")
                )]
            }
            Client::Pi => {
                let calls: Vec<String> = calls
                    .iter()
                    .map(|(id, name, arguments)| {
                        format!(
                            r#"{{"id": "{id}", "type": "function", "function": {{"name": "{name}", "arguments": {}}}}}"#,
                            quoted(arguments)
                        )
                    })
                    .collect();
                vec![format!(
                    r#"{{"role": "assistant", "content": "on it", "tool_calls": [{}]}}"#,
                    calls.join(", ")
                )]
            }
            Client::Codex => calls
                .iter()
                .map(|(id, name, arguments)| {
                    format!(
                        r#"{{"type": "function_call", "call_id": "{id}", "name": "{name}", "arguments": {}}}"#,
                        quoted(arguments)
                    )
                })
                .collect(),
        }
    }

    /// The items answering calls with (id, content, is_error).
    fn results(self, results: &[(&str, &str, bool)]) -> Vec<String> {
        match self {
            Client::Claude => {
                let blocks: Vec<String> = results
                    .iter()
                    .map(|(id, content, error)| {
                        let flag = if *error { r#", "is_error": true"# } else { "" };
                        format!(
                            r#"{{"type": "tool_result", "tool_use_id": "{id}", "content": {}{flag}}}"#,
                            quoted(content)
                        )
                    })
                    .collect();
                vec![format!(
                    r#"{{"role": "user", "content": [{}]}}"#,
                    blocks.join(", ")
                )]
            }
            Client::Pi => results
                .iter()
                .map(|(id, content, _)| {
                    format!(
                        r#"{{"role": "tool", "tool_call_id": "{id}", "content": {}}}"#,
                        quoted(content)
                    )
                })
                .collect(),
            Client::Codex => results
                .iter()
                .map(|(id, content, _)| {
                    format!(
                        r#"{{"type": "function_call_output", "call_id": "{id}", "output": {}}}"#,
                        quoted(content)
                    )
                })
                .collect(),
        }
    }

    /// What the client answers a call to a tool it does not have.
    fn unknown_tool(self) -> &'static str {
        match self {
            Client::Claude => {
                "<tool_use_error>Error: No such tool available: recall</tool_use_error>"
            }
            Client::Pi => "Tool recall not found",
            Client::Codex => "unsupported call: recall",
        }
    }

    /// Arguments that are not a recall's.
    fn malformed(self) -> &'static str {
        match self {
            // Anthropic tool inputs are JSON objects.
            Client::Claude => r#"{"ids": 3}"#,
            _ => "{not json",
        }
    }

    /// The content and error flag of the result for `id` in `item`.
    fn result_of(self, item: &Value, id: &str) -> Option<(String, bool)> {
        match self {
            Client::Claude => item["content"].as_array()?.iter().find_map(|block| {
                (block["type"] == "tool_result" && block["tool_use_id"] == id).then(|| {
                    (
                        block["content"].as_str().unwrap_or("(not a string)").into(),
                        block["is_error"] == true,
                    )
                })
            }),
            Client::Pi => (item["role"] == "tool" && item["tool_call_id"] == id)
                .then(|| (item["content"].as_str().unwrap_or_default().into(), false)),
            Client::Codex => (item["type"] == "function_call_output" && item["call_id"] == id)
                .then(|| (item["output"].as_str().unwrap_or_default().into(), false)),
        }
    }

    fn planner_reply(self, plan: &str) -> Reply {
        let body = match self {
            Client::Claude => json!({"type": "message",
                "content": [{"type": "text", "text": plan}],
                "usage": {"input_tokens": 900, "output_tokens": 40}}),
            Client::Pi => json!({"choices": [{"message": {"role": "assistant", "content": plan}}],
                "usage": {"prompt_tokens": 900, "completion_tokens": 40}}),
            Client::Codex => json!({"output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": plan}]}],
                "usage": {"input_tokens": 900, "output_tokens": 40}}),
        };
        Reply::Whole {
            status: 200,
            headers: vec![("content-type", "application/json")],
            body: body.to_string(),
        }
    }

    async fn send(self, proxy: &support::Running, items: &[String], tools: Option<&str>) {
        let mut request = reqwest::Client::new()
            .post(proxy.url(self.path()))
            .header("authorization", "Bearer sk-client");
        if let Client::Claude = self {
            request = request.header("anthropic-version", "2023-06-01");
        }
        let response = request.body(self.body(items, tools)).send().await.unwrap();
        assert_eq!(response.status(), 200);
    }
}

/// The history items of a forwarded body, each as the bytes sent.
fn raw_items(seen: &Seen, key: &str) -> Vec<String> {
    let fields: std::collections::HashMap<String, Box<RawValue>> =
        serde_json::from_slice(&seen.body).unwrap();
    let items: Vec<Box<RawValue>> = serde_json::from_str(fields[key].get()).unwrap();
    items.into_iter().map(|raw| raw.get().to_string()).collect()
}

/// The bytes of the item holding the result for `id`, and its content
/// and error flag.
fn result_in(client: Client, seen: &Seen, id: &str) -> (String, String, bool) {
    raw_items(seen, client.key())
        .into_iter()
        .find_map(|raw| {
            let value: Value = serde_json::from_str(&raw).unwrap();
            client
                .result_of(&value, id)
                .map(|(content, error)| (raw, content, error))
        })
        .unwrap_or_else(|| panic!("no result for {id} in {}", seen.text()))
}

/// Ids of the recall calls the scripted conversation makes.
const GOOD: &str = "recall_good";
const UNKNOWN: &str = "recall_unknown";
const MALFORMED: &str = "recall_malformed";

/// Reads until Self-GC folds `function:read:1`, then recalls it, then
/// recalls an unknown id and with malformed arguments at once, then reads
/// three more; returns the client's requests as forwarded (planner calls
/// apart) and the routes of the requests.
async fn converse(client: Client, idle: Duration, store: &Path) -> (Vec<Seen>, Vec<Event>) {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let upstream = match client {
        Client::Claude => anthropic.clone(),
        _ => openai.clone(),
    };
    upstream.respond(move |seen| {
        seen.text()
            .contains(PLANNER)
            .then(|| client.planner_reply(&fold_plan(seen)))
    });
    let proxy = support::proxy_side(
        StrategyName::SelfGc,
        3_000,
        &anthropic.url(),
        &openai.url(),
        Some(store),
        None,
        idle,
        None,
        Some(Duration::from_secs(5)),
    )
    .await;
    let tools = Some(client.tools());
    let main = |upstream: &Scripted| -> Vec<Seen> {
        upstream
            .seen()
            .into_iter()
            .filter(|s| s.json().get("tools").is_some())
            .collect()
    };
    let mut items = vec![client.user("Task: port the module")];
    let mut step = 0;
    loop {
        step += 1;
        assert!(step <= 40, "function:read:1 was never folded");
        let id = format!("read_{step}");
        let arguments = format!(r#"{{"path": "src/mod_{step}.py"}}"#);
        items.extend(client.calls(&[(&id, "read", &arguments)]));
        items.extend(client.results(&[(&id, &output(step, 8), false)]));
        client.send(&proxy, &items, tools).await;
        let last = main(&upstream).pop().unwrap();
        if last.text().contains("[folded as function:read:1;") {
            break;
        }
    }
    let unknown = client.unknown_tool();
    items.extend(client.calls(&[(GOOD, "recall", r#"{"episode": "function:read:1"}"#)]));
    items.extend(client.results(&[(GOOD, unknown, true)]));
    client.send(&proxy, &items, tools).await;
    items.extend(client.calls(&[
        (UNKNOWN, "recall", r#"{"id": "function:read:999"}"#),
        (MALFORMED, "recall", client.malformed()),
    ]));
    items.extend(client.results(&[(UNKNOWN, unknown, true), (MALFORMED, unknown, true)]));
    client.send(&proxy, &items, tools).await;
    for _ in 0..3 {
        step += 1;
        let id = format!("read_{step}");
        let arguments = format!(r#"{{"path": "src/mod_{step}.py"}}"#);
        items.extend(client.calls(&[(&id, "read", &arguments)]));
        items.extend(client.results(&[(&id, &output(step, 8), false)]));
        client.send(&proxy, &items, tools).await;
    }
    (main(&upstream), proxy.events())
}

fn stored_messages(dir: &Path) -> Vec<Message> {
    let sessions = cwl_session::list(dir).unwrap();
    assert_eq!(sessions.len(), 1);
    let loaded = cwl_session::read(&sessions[0].path).unwrap();
    loaded
        .records
        .into_iter()
        .filter_map(|(_, record)| match record {
            Record::Message { message, .. } => Some(message),
            _ => None,
        })
        .collect()
}

async fn recall_round_trip(client: Client) {
    let store = tempfile::tempdir().unwrap();
    let (main, events) = converse(client, Duration::from_secs(600), store.path()).await;
    let n = main.len();
    let recalls: Vec<&RecallEvent> = events.iter().flat_map(|e| &e.recalls).collect();
    let answered = |id: &str, ok: bool, bytes: usize| RecallEvent {
        call_id: id.into(),
        ok,
        bytes,
    };
    assert_eq!(recalls.len(), 3, "each answered once: {recalls:?}");
    assert_eq!(*recalls[0], answered(GOOD, true, output(1, 8).len()));
    assert_eq!(
        (recalls[1].call_id.as_str(), recalls[1].ok),
        (UNKNOWN, false)
    );
    assert_eq!(
        (recalls[2].call_id.as_str(), recalls[2].ok),
        (MALFORMED, false)
    );
    let client_tools: Vec<Value> = serde_json::from_str(client.tools()).unwrap();
    let head = client.tools().strip_suffix(']').unwrap();
    for seen in &main {
        let tools = seen.json()["tools"].as_array().unwrap().clone();
        assert_eq!(tools.len(), client_tools.len() + 1);
        assert_eq!(tools[..client_tools.len()], client_tools[..]);
        assert_eq!(client.tool_name(tools.last().unwrap()), "recall");
        assert!(
            seen.text().contains(head),
            "the client's tools, byte for byte, first"
        );
        assert!(
            !seen.text().contains(client.unknown_tool()),
            "the client's error never goes upstream"
        );
    }

    let recalled = &main[n - 5];
    let (bytes, content, error) = result_in(client, recalled, GOOD);
    assert_eq!(content, output(1, 8), "the folded payload, byte for byte");
    assert!(!error);
    let bad = &main[n - 4];
    let (unknown_bytes, unknown, unknown_error) = result_in(client, bad, UNKNOWN);
    assert!(
        unknown.starts_with("no object `function:read:999` in this session"),
        "{unknown}"
    );
    let (malformed_bytes, malformed, malformed_error) = result_in(client, bad, MALFORMED);
    assert!(
        malformed.starts_with("recall needs {\"id\": ID}"),
        "{malformed}"
    );
    if let Client::Claude = client {
        assert!(unknown_error && malformed_error, "errors stay errors");
    }
    for later in &main[n - 4..] {
        assert_eq!(
            result_in(client, later, GOOD).0,
            bytes,
            "the same bytes later"
        );
    }
    for later in &main[n - 3..] {
        assert_eq!(result_in(client, later, UNKNOWN).0, unknown_bytes);
        assert_eq!(result_in(client, later, MALFORMED).0, malformed_bytes);
    }

    let messages = stored_messages(store.path());
    let result = |id: &str| {
        messages
            .iter()
            .find_map(|m| match m {
                Message::ToolResult(r) if r.call_id == id => Some(r.clone()),
                _ => None,
            })
            .unwrap()
    };
    let good = result(GOOD);
    assert_eq!(
        (good.content.as_str(), good.is_error),
        (output(1, 8).as_str(), false)
    );
    assert_eq!(good.tool_name, "recall");
    assert_eq!(result(UNKNOWN).content, unknown);
    assert_eq!(result(MALFORMED).content, malformed);

    let rebuilt_store = tempfile::tempdir().unwrap();
    let (rebuilt, events) = converse(client, Duration::ZERO, rebuilt_store.path()).await;
    let routes: Vec<&str> = events.iter().map(|e| e.route).collect();
    assert!(
        routes[1..].iter().all(|r| *r == "resume"),
        "every request rebuilds the conversation: {routes:?}"
    );
    assert_eq!(rebuilt.len(), n);
    for (at, (kept, again)) in main.iter().zip(&rebuilt).enumerate() {
        assert!(kept.body == again.body, "request {at} differs once rebuilt");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_restores_a_fold_over_anthropic_messages() {
    recall_round_trip(Client::Claude).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_restores_a_fold_over_chat_completions() {
    recall_round_trip(Client::Pi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_restores_a_fold_over_openai_responses() {
    recall_round_trip(Client::Codex).await;
}

/// A short conversation recalling `{"episode": "nope"}`, answered by the
/// client with `answer`; returns the upstream's request.
async fn one_recall(
    client: Client,
    strategy: StrategyName,
    config: cwl::Config,
    tools: Option<&str>,
    answer: &str,
) -> Seen {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy_configured(
        strategy,
        config,
        &anthropic.url(),
        &openai.url(),
        None,
        None,
        Duration::from_secs(600),
        None,
        None,
    )
    .await;
    let mut items = vec![client.user("Task: look")];
    items.extend(client.calls(&[("r1", "recall", r#"{"episode": "nope"}"#)]));
    items.extend(client.results(&[("r1", answer, false)]));
    client.send(&proxy, &items, tools).await;
    let upstream = match client {
        Client::Claude => anthropic,
        _ => openai,
    };
    let mut seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    seen.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_its_own_recall_or_no_tools_is_left_alone() {
    let own = r#"[{"type": "function", "function": {"name": "read", "parameters": {}}}, {"type": "function", "function": {"name": "recall", "parameters": {}}}]"#;
    let budget = cwl::Config::with_budget(10_000);
    let seen = one_recall(
        Client::Pi,
        StrategyName::SelfGc,
        budget.clone(),
        Some(own),
        "the client's own answer",
    )
    .await;
    assert!(
        seen.text().contains(&format!(r#""tools":{own}"#)),
        "tools as the client sent them: {}",
        seen.text()
    );
    assert_eq!(
        result_in(Client::Pi, &seen, "r1").1,
        "the client's own answer"
    );
    let seen = one_recall(
        Client::Codex,
        StrategyName::SelfGc,
        budget,
        None,
        "unsupported call: recall",
    )
    .await;
    assert!(seen.json().get("tools").is_none(), "no tools added");
    assert_eq!(
        result_in(Client::Codex, &seen, "r1").1,
        "unsupported call: recall"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwl_offers_recall_only_when_it_folds_residues() {
    let folding = cwl::Config::with_budget(10_000);
    assert!(folding.residue_share.is_some());
    let unknown = Client::Claude.unknown_tool();
    let seen = one_recall(
        Client::Claude,
        StrategyName::Cwl,
        folding.clone(),
        Some(Client::Claude.tools()),
        unknown,
    )
    .await;
    let tools = seen.json()["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[1]["name"], "recall");
    let (_, content, error) = result_in(Client::Claude, &seen, "r1");
    assert_eq!(
        content,
        "nothing named `nope` was evicted; use a name or id shown in a residue or the index line"
    );
    assert!(error);

    let seen = one_recall(
        Client::Claude,
        StrategyName::Cwl,
        folding.residue_share(None),
        Some(Client::Claude.tools()),
        unknown,
    )
    .await;
    assert!(
        seen.text()
            .contains(&format!(r#""tools":{}"#, Client::Claude.tools())),
        "{}",
        seen.text()
    );
    assert_eq!(result_in(Client::Claude, &seen, "r1").1, unknown);

    let seen = one_recall(
        Client::Claude,
        StrategyName::Cwm,
        cwl::Config::with_budget(10_000),
        Some(Client::Claude.tools()),
        unknown,
    )
    .await;
    assert_eq!(
        seen.json()["tools"].as_array().unwrap().len(),
        1,
        "cwm recalls nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwl_recalls_an_evicted_episode_from_the_requests_own_history() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy_configured(
        StrategyName::Cwl,
        cwl::Config::with_budget(3_000),
        &anthropic.url(),
        &openai.url(),
        None,
        None,
        Duration::from_secs(600),
        None,
        None,
    )
    .await;
    let client = Client::Pi;
    let tools = Some(client.tools());
    let mut items = vec![client.user("Task: port the module")];
    let mut residue = None;
    for step in 1..=40 {
        let id = format!("read_{step}");
        let arguments = format!(r#"{{"path": "src/mod_{step}.py"}}"#);
        items.extend(client.calls(&[(&id, "read", &arguments)]));
        items.extend(client.results(&[(&id, &output(step, 8), false)]));
        client.send(&proxy, &items, tools).await;
        let text = openai.seen().pop().unwrap().json().to_string();
        if let Some(at) = text.find("[evicted expl episode `") {
            let rest = &text[at..];
            residue = Some(rest[..rest.find(']').unwrap()].to_string());
            break;
        }
    }
    let residue = residue.expect("an episode was evicted");
    let reference = &residue[residue.find("(#").unwrap() + 1..residue.find(')').unwrap()];
    let arguments = json!({"episode": reference}).to_string();
    items.extend(client.calls(&[("recall_1", "recall", &arguments)]));
    items.extend(client.results(&[("recall_1", client.unknown_tool(), true)]));
    client.send(&proxy, &items, tools).await;
    let seen = openai.seen().pop().unwrap();
    let (_, content, _) = result_in(client, &seen, "recall_1");
    let name = &residue["[evicted expl episode ".len()..residue.find(" (#").unwrap()];
    assert!(
        content.starts_with(&format!("Recalled expl episode {name} ({reference})")),
        "{content}"
    );
    assert!(
        content.contains(&output(1, 8)),
        "the first read comes back: {content}"
    );
}
