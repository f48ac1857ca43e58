//! Transcript builders shared by the lab's integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use cwl::{Block, Estimate, Message, ToolCall, ToolSpec};
use cwl_lab::metrics::cost;
use cwl_lab::policy::compact::CompactParams;
use cwl_lab::policy::{PolicyConfig, PolicyKind};
use cwl_lab::replay::ReplayConfig;
use proptest::prelude::*;
use serde_json::json;

/// One tool call of a generated step: tool, argument, output lines.
#[derive(Debug, Clone)]
pub enum Call {
    Read(u8, usize),
    Grep(u8, usize),
    Ls(u8),
    Edit(u8),
    Bash(bool, usize),
}

/// One item of a generated transcript.
#[derive(Debug, Clone)]
pub enum Item {
    User(u8),
    Step {
        reasoning: usize,
        text: bool,
        calls: Vec<Call>,
    },
}

pub fn path(n: u8) -> String {
    format!("src/mod_{}/file_{}.rs", n % 7, n)
}

fn lines(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{prefix} line {i}: let value_{i} = compute_thing({i});\n"))
        .collect()
}

/// The messages of generated items, with a system prompt first.
pub fn messages(items: &[Item]) -> Vec<Message> {
    let mut out = vec![Message::system("You are a test agent. Be brief.")];
    let mut next = 0;
    for item in items {
        match item {
            Item::User(n) => out.push(Message::user(format!("Please work on {} next.", path(*n)))),
            Item::Step {
                reasoning,
                text,
                calls,
            } => {
                let mut content = Vec::new();
                if *reasoning > 0 {
                    content.push(Block::Reasoning {
                        text: "thinking ".repeat(*reasoning),
                        signature: None,
                    });
                }
                if *text || calls.is_empty() {
                    content.push(Block::Text {
                        text: "Now I will continue with the work.".into(),
                    });
                }
                let mut results = Vec::new();
                for call in calls {
                    next += 1;
                    let id = format!("c{next}");
                    let (name, args, output) = match call {
                        Call::Read(n, k) => {
                            ("read", json!({"path": path(*n)}), lines(&path(*n), *k))
                        }
                        Call::Grep(n, k) => (
                            "grep",
                            json!({"pattern": format!("thing_{n}")}),
                            lines(&path(*n), *k),
                        ),
                        Call::Ls(n) => (
                            "ls",
                            json!({"path": format!("src/mod_{}", n % 7)}),
                            format!("{}\n", path(*n)),
                        ),
                        Call::Edit(n) => (
                            "edit",
                            json!({"path": path(*n), "old": "a", "new": "b"}),
                            format!("Edited {}", path(*n)),
                        ),
                        Call::Bash(read_only, k) => {
                            let command = if *read_only {
                                "git status"
                            } else {
                                "cargo test"
                            };
                            ("bash", json!({"command": command}), lines("out", *k))
                        }
                    };
                    content.push(Block::ToolCall(ToolCall::new(&id, name, args.to_string())));
                    results.push(Message::tool_result(id, name, output, false));
                }
                out.push(Message::Assistant { content });
                out.extend(results);
            }
        }
    }
    out
}

pub fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (any::<u8>(), 1usize..80).prop_map(|(n, k)| Call::Read(n, k)),
        (any::<u8>(), 1usize..120).prop_map(|(n, k)| Call::Grep(n, k)),
        any::<u8>().prop_map(Call::Ls),
        any::<u8>().prop_map(Call::Edit),
        (any::<bool>(), 1usize..40).prop_map(|(r, k)| Call::Bash(r, k)),
    ]
}

pub fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        1 => any::<u8>().prop_map(Item::User),
        6 => (prop_oneof![Just(0usize), 1usize..60], any::<bool>(), prop::collection::vec(call(), 0..4))
            .prop_map(|(reasoning, text, calls)| Item::Step { reasoning, text, calls }),
    ]
}

/// A transcript: a first user turn, then items.
pub fn transcript() -> impl Strategy<Value = Vec<Item>> {
    (any::<u8>(), prop::collection::vec(item(), 1..60)).prop_map(|(first, mut rest)| {
        rest.insert(0, Item::User(first));
        rest
    })
}

/// A replay of every policy at `budget`, with checks on.
pub fn config(budget: usize) -> ReplayConfig {
    ReplayConfig {
        policies: PolicyKind::all(),
        policy: PolicyConfig {
            budget,
            window: budget * 2,
            mask_turns: 3,
            compact: CompactParams {
                keep_recent: budget / 4,
                ..CompactParams::default()
            },
            ..PolicyConfig::default()
        },
        pricing: Arc::new(cost::lookup("claude-sonnet-4-5").unwrap()),
        counter: Arc::new(Estimate),
        side: Arc::new(cwl_lab::side::NoModel),
        judge: None,
        check: true,
        losses: false,
    }
}

/// Tools of a plain (unannotated) session.
pub fn tools() -> Vec<ToolSpec> {
    ["read", "grep", "ls", "edit", "bash"]
        .iter()
        .map(|name| ToolSpec {
            name: name.to_string(),
            description: format!("The {name} tool."),
            parameters: json!({"type": "object"}),
        })
        .collect()
}
