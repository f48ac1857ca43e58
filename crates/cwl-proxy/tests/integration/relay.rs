//! Responses and errors relayed as they come, for all three APIs.

use crate::support;

use std::sync::Arc;

use support::{Reply, Scripted};
use tokio::sync::Notify;

/// A small request of each API, and the upstream it goes to.
fn requests() -> [(&'static str, &'static str, bool); 3] {
    [
        (
            "/v1/messages",
            r#"{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}"#,
            true,
        ),
        (
            "/v1/chat/completions",
            r#"{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}"#,
            false,
        ),
        (
            "/v1/responses",
            r#"{"model": "m", "stream": true, "input": [{"role": "user", "content": "hi"}]}"#,
            false,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_errors_and_drops_are_relayed_for_every_api() {
    let anthropic = Scripted::start().await;
    let openai = Scripted::start().await;
    let proxy = support::proxy(80_000, &anthropic, &openai, None, None).await;
    let client = reqwest::Client::new();
    for (path, body, is_anthropic) in requests() {
        let upstream = if is_anthropic { &anthropic } else { &openai };

        // A stream: the first chunk reaches the client while the upstream
        // holds the rest; the rest follows in order.
        let gate = Arc::new(Notify::new());
        let chunks: Vec<String> = (0..4).map(|i| format!("data: {{\"n\":{i}}}\n\n")).collect();
        upstream.reply(Reply::Chunks {
            chunks: chunks.clone(),
            gate: Some(Arc::clone(&gate)),
            drop: false,
        });
        let mut response = client
            .post(proxy.url(path))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.chunk().await.unwrap().unwrap(),
            chunks[0].as_bytes()
        );
        gate.notify_one();
        let mut rest = Vec::new();
        while let Some(chunk) = response.chunk().await.unwrap() {
            rest.extend_from_slice(&chunk);
        }
        assert_eq!(
            String::from_utf8(rest).unwrap(),
            chunks[1..].concat(),
            "{path}"
        );

        // Errors: status, headers and body as the upstream sent them.
        for status in [401, 429, 500, 503] {
            upstream.reply(Reply::Whole {
                status,
                headers: vec![("x-request-id", "req-1")],
                body: format!("error {status}"),
            });
            let response = client
                .post(proxy.url(path))
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), status, "{path}");
            assert_eq!(response.headers()["x-request-id"], "req-1");
            assert_eq!(response.text().await.unwrap(), format!("error {status}"));
        }

        // A drop mid-stream reaches the client as an error after what came.
        let gate = Arc::new(Notify::new());
        upstream.reply(Reply::Chunks {
            chunks: vec!["data: {\"n\":0}\n\n".into()],
            gate: Some(Arc::clone(&gate)),
            drop: true,
        });
        let mut response = client
            .post(proxy.url(path))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.chunk().await.unwrap().unwrap(),
            "data: {\"n\":0}\n\n".as_bytes()
        );
        gate.notify_one();
        let ended = loop {
            match response.chunk().await {
                Ok(Some(_)) => {}
                Ok(None) => break false,
                Err(_) => break true,
            }
        };
        assert!(ended, "{path}: the drop must reach the client");
    }
    let apis: Vec<&str> = proxy.events().iter().map(|e| e.api).collect();
    assert!(
        apis.contains(&"anthropic")
            && apis.contains(&"openai-chat")
            && apis.contains(&"openai-responses")
    );
}
