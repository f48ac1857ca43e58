//! Whatever a planner answers, an accepted projection keeps the view
//! valid: user turns kept, calls and results paired, the cut turn
//! untouched, every fold's payload byte-exact.

use std::collections::{HashMap, HashSet};

use cwl::{Block, Estimate, Message, ToolCall};
use cwl_selfgc::{ObjectId, ObjectTable, Rehearsal, parse_plan};
use proptest::prelude::*;

const TOOLS: [&str; 3] = ["read", "bash", "grep"];

fn session(turns: &[Vec<(usize, usize)>]) -> Vec<Message> {
    let mut messages = vec![Message::system("sys")];
    let mut id = 0;
    for (t, calls) in turns.iter().enumerate() {
        messages.push(Message::user(format!("task {t}")));
        for &(tool, size) in calls {
            id += 1;
            let name = TOOLS[tool];
            messages.push(Message::Assistant {
                content: vec![
                    Block::Text {
                        text: format!("step {id}"),
                    },
                    Block::ToolCall(ToolCall::new(format!("c{id}"), name, "{}")),
                ],
            });
            let body: String = (0..size)
                .map(|i| format!("{name} {id} line {i}\n"))
                .collect();
            messages.push(Message::tool_result(format!("c{id}"), name, body, false));
        }
    }
    messages
}

fn plan_text(actions: &[(usize, bool, u32)], tools_used: u32, users: u32) -> String {
    let mut xml = String::from("<gc_plan>");
    for &(action, conversation, n) in actions {
        let tag = ["fold", "mask", "prune"][action];
        let id = if conversation {
            format!("user:{}", 1 + n % (users + 1))
        } else {
            format!("{}:{}", TOOLS[(n % 3) as usize], 1 + n % (tools_used + 2))
        };
        xml.push_str(&format!("<{tag}>{id}</{tag}>"));
    }
    xml + "</gc_plan>"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn accepted_projections_are_valid(
        turns in prop::collection::vec(prop::collection::vec((0usize..3, 0usize..40), 0..5), 1..6),
        actions in prop::collection::vec((0usize..3, any::<bool>(), 0u32..40), 0..12),
    ) {
        let messages = session(&turns);
        let table = ObjectTable::of(&messages);
        let calls = turns.iter().map(Vec::len).sum::<usize>() as u32;
        let plan = parse_plan(&plan_text(&actions, calls, turns.len() as u32)).unwrap();
        let protected = HashSet::new();
        let in_flight = messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
            .unwrap_or(messages.len());
        let rehearsal = Rehearsal {
            messages: &messages,
            table: &table,
            counter: &Estimate,
            protected: &protected,
            min_prune: 0.0,
            in_flight,
            committed: &[],
        };
        let Ok(rehearsed) = rehearsal.run(&plan) else { return Ok(()); };
        let view = &rehearsed.projection.messages;
        let mut open: HashMap<String, ()> = HashMap::new();
        for message in view {
            match message {
                Message::Assistant { content } => {
                    prop_assert!(!content.is_empty());
                    for call in message.tool_calls() { open.insert(call.id.clone(), ()); }
                }
                Message::ToolResult(result) => prop_assert!(open.remove(&result.call_id).is_some()),
                _ => {}
            }
        }
        prop_assert!(open.is_empty());
        let users = |m: &[Message]| m.iter().filter(|m| matches!(m, Message::User { .. })).count();
        prop_assert_eq!(users(view), users(&messages));
        prop_assert!(view.ends_with(&messages[in_flight..]), "the latest response is untouched");
        let cut = table.get(&ObjectId::User(turns.len() as u32)).unwrap().messages.start;
        let Message::User { content } = &messages[cut] else { unreachable!() };
        let kept = view.iter().any(|m| matches!(m, Message::User { content: c } if c.starts_with(content.as_str())));
        prop_assert!(kept, "the latest user turn is kept");
        for sidecar in &rehearsed.projection.sidecars {
            let object = table.get(&sidecar.id).unwrap();
            match &sidecar.id {
                ObjectId::Function { .. } => {
                    let Message::ToolResult(result) = &messages[object.messages.start] else { unreachable!() };
                    prop_assert_eq!(&sidecar.payload, &result.content);
                }
                ObjectId::User(_) => {
                    let span: Vec<Message> = serde_json::from_str(&sidecar.payload).unwrap();
                    prop_assert_eq!(&span[..], &messages[object.messages.start + 1..object.messages.end]);
                }
            }
        }
        prop_assert!(rehearsed.tokens_after <= rehearsed.tokens_before);
    }
}
