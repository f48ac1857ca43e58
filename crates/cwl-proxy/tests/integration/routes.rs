//! What the proxy passes through untouched, and what it refuses.

use crate::support;

use serde_json::Value;
use support::{Reply, Scripted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_passthrough_routes() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &anthropic, &openai, None, None).await;
    let client = reqwest::Client::new();

    let health = client.get(proxy.url("/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert!(anthropic.seen().is_empty() && openai.seen().is_empty());

    // count_tokens goes to Anthropic byte for byte, whatever it holds.
    let body = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
    anthropic.reply(Reply::Whole {
        status: 200,
        headers: vec![("content-type", "application/json")],
        body: r#"{"input_tokens": 3}"#.into(),
    });
    let response = client
        .post(proxy.url("/v1/messages/count_tokens?beta=true"))
        .header("x-api-key", "k")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.text().await.unwrap(), r#"{"input_tokens": 3}"#);
    let seen = anthropic.seen();
    assert_eq!(seen[0].path, "/v1/messages/count_tokens?beta=true");
    assert_eq!(seen[0].text(), body);

    // Other paths: to the upstream whose API the request speaks.
    client
        .get(proxy.url("/v1/models"))
        .header("authorization", "Bearer sk-test")
        .send()
        .await
        .unwrap();
    let seen = openai.seen();
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-test");
    client
        .get(proxy.url("/v1/models?limit=5"))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap();
    assert_eq!(anthropic.seen()[1].path, "/v1/models?limit=5");
    assert!(proxy.events().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_the_proxy_cannot_read_goes_on_unchanged() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &anthropic, &openai, None, None).await;
    let client = reqwest::Client::new();
    let bodies = [
        "not json at all".to_string(),
        r#"{"model": "m", "messages": "a string"}"#.to_string(),
        r#"{"model": "m"}"#.to_string(),
        r#"[1, 2]"#.to_string(),
        // The engine refuses a result that answers no call.
        r#"{"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]}]}"#.to_string(),
    ];
    for body in &bodies {
        anthropic.reply(Reply::Whole {
            status: 400,
            headers: vec![],
            body: "upstream says no".into(),
        });
        let response = client
            .post(proxy.url("/v1/messages"))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        assert_eq!(response.text().await.unwrap(), "upstream says no");
    }
    let seen: Vec<String> = anthropic.seen().iter().map(|s| s.text()).collect();
    assert_eq!(seen, bodies);
    assert_eq!(
        proxy.proxy.conversations(),
        0,
        "a refused history is forgotten"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_gets_a_provider_shaped_413() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &anthropic, &openai, None, Some(1_000)).await;
    let client = reqwest::Client::new();
    let big = format!(
        r#"{{"messages": [{{"role": "user", "content": "{}"}}]}}"#,
        "x".repeat(2_000)
    );
    let response = client
        .post(proxy.url("/v1/messages"))
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "request_too_large");
    let response = client
        .post(proxy.url("/v1/chat/completions"))
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "request_too_large");
    assert!(anthropic.seen().is_empty() && openai.seen().is_empty());
}
