//! One-shot throughput: what `cwl evict` does (parse the OpenAI JSON, count
//! with o200k, one pass, write the view) on a large transcript, against the
//! tokenizer alone counting the same text.
//!
//! Run: `cargo bench -p cwl --bench evict_throughput`

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cwl::{Config, O200k, TokenCounter, openai};
use serde_json::{Value, json};

/// A transcript of `tasks` annotated tasks in the OpenAI shape, with
/// code-like tool output.
fn transcript(tasks: usize) -> String {
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."})];
    let mut id = 0;
    let mut call = |messages: &mut Vec<Value>, name: &str, arguments: Value, output: String| {
        id += 1;
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{id}"), "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
        ]}));
        messages
            .push(json!({"role": "tool", "tool_call_id": format!("call_{id}"), "content": output}));
    };
    for task in 0..tasks {
        messages.push(json!({"role": "user", "content": format!("Task {task}: fix the parser in module {task}.")}));
        call(
            &mut messages,
            "delimiter",
            json!({"action": "start", "name": format!("e{task}"), "type": "expl"}),
            "ok".into(),
        );
        for step in 0..4 {
            let output: String = (0..200)
                .map(|line| format!("src/module_{task}/file_{step}.rs:{line}: let value_{line} = parse(input, {line})?;\n"))
                .collect();
            call(
                &mut messages,
                if step % 2 == 0 { "grep" } else { "read" },
                json!({"path": step}),
                output,
            );
        }
        call(
            &mut messages,
            "delimiter",
            json!({"action": "end", "description": format!("parser {task} lives in src/module_{task}")}),
            "ok".into(),
        );
        call(
            &mut messages,
            "delimiter",
            json!({"action": "start", "name": format!("a{task}"), "type": "act", "dependencies": [format!("e{task}")]}),
            "ok".into(),
        );
        call(
            &mut messages,
            "edit",
            json!({"path": "src/lib.rs"}),
            "Edited src/lib.rs: 1 replacement.".into(),
        );
        call(
            &mut messages,
            "delimiter",
            json!({"action": "end"}),
            "ok".into(),
        );
    }
    json!({"messages": messages}).to_string()
}

fn texts(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        if let Some(content) = message["content"].as_str() {
            out.push(content.to_string());
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            out.push(
                call["function"]["arguments"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let input = transcript(400);
    let body: Value = serde_json::from_str(&input).expect("json");
    let all_texts = texts(&body);
    let mut group = c.benchmark_group("evict");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(input.len() as u64));
    group.bench_function("tokenizer alone (o200k)", |b| {
        let counter = O200k::new();
        b.iter(|| {
            all_texts
                .iter()
                .map(|text| counter.count(black_box(text)))
                .sum::<usize>()
        })
    });
    group.bench_function("cwl evict (parse, count, pass, write)", |b| {
        b.iter(|| {
            let body: Value = serde_json::from_str(black_box(&input)).expect("json");
            let request = openai::parse_request(&body).expect("valid");
            let evicted = cwl::evict(request.messages, request.tools, Config::default(), Arc::new(O200k::new()))
                .expect("valid");
            let output = json!({"messages": openai::to_messages(&evicted.messages), "report": evicted.report});
            serde_json::to_vec(&output).expect("json")
        })
    });
    group.finish();
    println!("input: {:.1} MB", input.len() as f64 / 1e6);
}

criterion_group!(benches, bench);
criterion_main!(benches);
