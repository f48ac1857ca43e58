//! OpenAI Chat Completions and Responses through the proxy, against
//! scripted upstreams.

use crate::support;

use serde_json::Value;
use serde_json::value::RawValue;
use support::porting::{TOOLS, content_tokens};
use support::{Scripted, quoted};

const RESPONSE_TOOLS: &str = r#"[{"type": "function", "name": "exec_command", "description": "Runs a command", "parameters": {"type": "object"}}]"#;

fn lines(step: usize) -> String {
    (0..8)
        .map(|j| format!("value_{step}_{j} = compute_{j}(input_{step})  # src/mod_{step}.py:{j}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn history(body: &[u8], key: &str) -> Vec<Box<RawValue>> {
    let value: std::collections::BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(body).unwrap();
    serde_json::from_str(value[key].get()).unwrap()
}

fn parsed(raw: &[Box<RawValue>]) -> Vec<Value> {
    raw.iter()
        .map(|r| serde_json::from_str(r.get()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_stay_within_budget_with_calls_paired() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let budget = 3_000;
    let proxy = support::proxy(budget, &anthropic, &openai, None, None).await;
    let client = reqwest::Client::new();
    let mut messages = vec![
        r#"{"role": "system", "content": "You are pi."}"#.to_string(),
        r#"{"role": "user", "content": "Task: port the module"}"#.to_string(),
    ];
    let mut requests = 0;
    for step in 1..=40 {
        // Every fifth step reads two files at once.
        let calls: Vec<String> = if step % 5 == 0 {
            vec![format!("call_{step}a"), format!("call_{step}b")]
        } else {
            vec![format!("call_{step}")]
        };
        let listed: Vec<String> = calls
            .iter()
            .map(|id| {
                format!(
                    r#"{{"id": "{id}", "type": "function", "function": {{"name": "read", "arguments": {}}}}}"#,
                    quoted(&format!(r#"{{"path": "src/{id}.py"}}"#))
                )
            })
            .collect();
        messages.push(format!(
            r#"{{"role": "assistant", "content": null, "tool_calls": [{}]}}"#,
            listed.join(", ")
        ));
        for id in &calls {
            messages.push(format!(
                r#"{{"role": "tool", "tool_call_id": "{id}", "content": {}}}"#,
                quoted(&lines(step))
            ));
        }
        if step % 10 == 0 && step < 40 {
            messages.push(format!(
                r#"{{"role": "assistant", "content": "done part {step}"}}"#
            ));
            messages.push(format!(
                r#"{{"role": "user", "content": "Task: part {step} next"}}"#
            ));
        }
        let body = format!(
            r#"{{"model": "gpt-test", "tools": {TOOLS}, "stream": true, "stream_options": {{"include_usage": true}}, "messages": [{}]}}"#,
            messages.join(", ")
        );
        let response = client
            .post(proxy.url("/v1/chat/completions"))
            .header("authorization", "Bearer sk-secret")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        requests += 1;
    }
    assert!(anthropic.seen().is_empty());
    let seen = openai.seen();
    assert_eq!(seen.len(), requests);
    let full: usize = messages
        .iter()
        .map(|m| content_tokens(&serde_json::from_str(m).unwrap()))
        .sum();
    assert!(full > 2 * budget, "{full}");
    for (at, request) in seen.iter().enumerate() {
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(request.headers["authorization"], "Bearer sk-secret");
        let text = request.text();
        assert!(text.contains(&format!(r#""tools":{TOOLS}"#)));
        assert!(text.contains(r#""stream_options":{"include_usage": true}"#));
        let raw = history(&request.body, "messages");
        let sent = parsed(&raw);
        let size: usize = sent.iter().map(content_tokens).sum();
        assert!(size <= budget, "request {at}: {size} tokens");
        // Pairing: each call answered right after its assistant message.
        for (i, message) in sent.iter().enumerate() {
            if message["role"] == "tool" {
                let id = &message["tool_call_id"];
                let owner = sent[..i]
                    .iter()
                    .rev()
                    .find(|m| m["role"] != "tool")
                    .unwrap();
                let calls = owner["tool_calls"]
                    .as_array()
                    .expect("a tool result follows its call");
                assert!(calls.iter().any(|c| &c["id"] == id));
            }
            if let Some(calls) = message["tool_calls"].as_array() {
                for call in calls {
                    let answered = sent[i + 1..]
                        .iter()
                        .take_while(|m| m["role"] == "tool")
                        .any(|m| m["tool_call_id"] == call["id"]);
                    assert!(
                        answered || i + 1 == sent.len(),
                        "call {} unanswered",
                        call["id"]
                    );
                }
            }
        }
        assert_eq!(sent[0]["content"], "You are pi.");
    }
    let last = history(&seen.last().unwrap().body, "messages");
    // The latest assistant turn (two parallel calls) and its results, byte for byte.
    let n = last.len();
    for back in 1..=3 {
        assert_eq!(last[n - back].get(), messages[messages.len() - back]);
    }
    assert!(last[n - 3].get().contains("call_40a"));
    let text = seen.last().unwrap().text();
    for turn in [
        "Task: port the module",
        "Task: part 10 next",
        "Task: part 20 next",
    ] {
        assert!(text.contains(turn), "{turn} lost");
    }
    let events = proxy.events();
    assert!(events.iter().all(|e| e.api == "openai-chat"));
    assert!(events.iter().any(|e| !e.evicted.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_like_codex_stay_within_budget_and_keep_reasoning_with_its_call() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let budget = 3_000;
    let proxy = support::proxy(budget, &anthropic, &openai, None, None).await;
    let client = reqwest::Client::new();
    let mut input = vec![
        r#"{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox rules"}]}"#.to_string(),
        r#"{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the tests"}]}"#.to_string(),
    ];
    for step in 1..=40 {
        input.push(format!(
            r#"{{"type": "reasoning", "id": "rs_{step}", "summary": [], "encrypted_content": "enc-{step}"}}"#
        ));
        input.push(format!(
            r#"{{"type": "function_call", "call_id": "call_{step}", "name": "exec_command", "arguments": {}}}"#,
            quoted(&format!(r#"{{"cmd": "cat src/mod_{step}.py"}}"#))
        ));
        input.push(format!(
            r#"{{"type": "function_call_output", "call_id": "call_{step}", "output": {}}}"#,
            quoted(&lines(step))
        ));
        let body = format!(
            r#"{{"model": "gpt-5-codex", "instructions": "You are Codex.", "store": false, "include": ["reasoning.encrypted_content"], "tools": {RESPONSE_TOOLS}, "input": [{}], "stream": true}}"#,
            input.join(", ")
        );
        let response = client
            .post(proxy.url("/v1/responses"))
            .header("authorization", "Bearer sk-secret")
            .header("session_id", "abc")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let seen = openai.seen();
    assert_eq!(seen.len(), 40);
    let mut notes = 0;
    for (at, request) in seen.iter().enumerate() {
        assert_eq!(request.path, "/v1/responses");
        assert_eq!(request.headers["session_id"], "abc");
        let text = request.text();
        assert!(text.contains(r#""include":["reasoning.encrypted_content"]"#));
        assert!(text.contains(&format!(r#""tools":{RESPONSE_TOOLS}"#)));
        let items = parsed(&history(&request.body, "input"));
        let size: usize = items.iter().map(content_tokens).sum();
        assert!(size <= budget, "request {at}: {size} tokens");
        for (i, item) in items.iter().enumerate() {
            match item["type"].as_str().unwrap() {
                "reasoning" => assert_eq!(items[i + 1]["type"], "function_call", "reasoning alone"),
                "function_call_output" => assert!(
                    items[..i]
                        .iter()
                        .any(|c| c["type"] == "function_call" && c["call_id"] == item["call_id"])
                ),
                "function_call" => assert!(items[i + 1..].iter().any(|o| o["type"]
                    == "function_call_output"
                    && o["call_id"] == item["call_id"])),
                _ => {}
            }
        }
        assert!(text.contains("Fix the tests") && text.contains("sandbox rules"));
        // The engine's notes go as the assistant's: a user message would
        // end the turn, and gpt-5-codex drops earlier turns' reasoning.
        let prompt = items
            .iter()
            .position(|item| item["role"] == "user")
            .unwrap();
        assert!(
            items[prompt + 1..]
                .iter()
                .all(|item| item["role"] != "user"),
            "request {at}: a user message inside the turn"
        );
        for item in items.iter().filter(|item| item["role"] == "assistant") {
            assert_eq!(item["type"], "message");
            assert_eq!(item["content"][0]["type"], "output_text");
            notes += usize::from(
                item["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .starts_with('['),
            );
        }
    }
    assert!(notes > 0, "no request carried a note");
    let last = history(&seen.last().unwrap().body, "input");
    let n = last.len();
    for back in 1..=3 {
        assert_eq!(last[n - back].get(), input[input.len() - back]);
    }
    let events = proxy.events();
    assert!(events.iter().all(|e| e.api == "openai-responses"));
    assert!(events.iter().any(|e| !e.evicted.is_empty()));
    assert!(events.iter().all(|e| e.tokens_after <= budget));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_the_proxy_cannot_manage_go_unchanged() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &anthropic, &openai, None, None).await;
    let client = reqwest::Client::new();
    let bodies = [
        r#"{"model": "m", "input": "just a question"}"#,
        r#"{"model": "m", "previous_response_id": "resp_1", "input": [{"role": "user", "content": "more"}]}"#,
    ];
    for body in bodies {
        client
            .post(proxy.url("/v1/responses"))
            .body(body)
            .send()
            .await
            .unwrap();
    }
    let seen: Vec<String> = openai.seen().iter().map(|s| s.text()).collect();
    assert_eq!(seen, bodies);
    assert!(proxy.events().is_empty());
}
