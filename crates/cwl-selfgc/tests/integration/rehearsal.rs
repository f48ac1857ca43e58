//! Rehearsal end to end: a plan over a small session is normalised,
//! projected and counted; the projection keeps every guarantee.

use std::collections::{HashMap, HashSet};

use cwl::{Block, Message, O200k, ToolCall};
use cwl_selfgc::rehearsal::mask;
use cwl_selfgc::{Action, DropReason, ObjectId, ObjectTable, Rehearsal, Rejected, parse_plan};

fn call(id: &str, tool: &str, arguments: &str) -> Message {
    Message::Assistant {
        content: vec![
            Block::Text {
                text: format!("Running {tool}."),
            },
            Block::ToolCall(ToolCall::new(id, tool, arguments)),
        ],
    }
}

fn lines(prefix: &str, n: usize) -> String {
    (1..=n)
        .map(|i| format!("{prefix} line {i} with some words in it"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn session() -> Vec<Message> {
    vec![
        Message::system("You are a coding agent."),
        Message::user("Fix the parser."),
        call("c1", "read", r#"{"path":"src/parser.rs"}"#),
        Message::tool_result("c1", "read", lines("parser", 120), false),
        call("c2", "bash", r#"{"command":"cargo test"}"#),
        Message::tool_result("c2", "bash", lines("test", 200), false),
        Message::assistant_text("Fixed."),
        Message::user("Now the lexer."),
        call("c3", "grep", r#"{"pattern":"lex"}"#),
        Message::tool_result("c3", "grep", lines("match", 80), false),
        Message::assistant_text("Done."),
        Message::user("And the docs."),
        call("c4", "read", r#"{"path":"README.md"}"#),
        Message::tool_result("c4", "read", lines("readme", 50), false),
    ]
}

/// Where the latest model response starts.
fn in_flight(messages: &[Message]) -> usize {
    messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }))
        .unwrap()
}

/// Every call has its result and every result its call; user turns are
/// the original ones, in order, possibly with a reminder appended.
fn check(view: &[Message], original: &[Message]) {
    let mut open: HashMap<String, usize> = HashMap::new();
    for message in view {
        match message {
            Message::Assistant { content } => {
                assert!(!content.is_empty(), "no empty assistant message");
                for call in message.tool_calls() {
                    open.insert(call.id.clone(), 0);
                }
            }
            Message::ToolResult(result) => {
                assert!(
                    open.remove(&result.call_id).is_some(),
                    "{} has no call",
                    result.call_id
                );
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
    let users = |messages: &[Message]| -> Vec<String> {
        messages
            .iter()
            .filter_map(|m| match m {
                Message::User { content } => Some(content.clone()),
                _ => None,
            })
            .collect()
    };
    let (kept, all) = (users(view), users(original));
    assert_eq!(kept.len(), all.len(), "user turns are kept");
    for (kept, original) in kept.iter().zip(&all) {
        assert!(kept.starts_with(original.as_str()));
    }
}

#[test]
fn a_plan_is_normalised_projected_and_counted() {
    let messages = session();
    let table = ObjectTable::of(&messages);
    let protected = HashSet::new();
    let counter = O200k::new();
    let rehearsal = Rehearsal {
        messages: &messages,
        table: &table,
        counter: &counter,
        protected: &protected,
        min_prune: 0.1,
        in_flight: in_flight(&messages),
        committed: &[],
    };
    let plan = parse_plan(
        r#"<above_conversation_summary>A coding session.</above_conversation_summary>
<gc_plan>
<prune kind="function" reason="obsolete_trace">read:1</prune>
<fold kind="function" reason="stable_artifact">read:1</fold>
<mask kind="function" reason="log">bash:2</mask>
<prune kind="conversation" reason="resolved_turn">user:2</prune>
<fold kind="function">grep:3</fold>
<fold kind="conversation">user:3</fold>
<fold kind="function">read:4</fold>
<prune>read:99 garbage</prune>
<fold kind="conversation">bash:2</fold>
</gc_plan>"#,
    )
    .unwrap();
    let rehearsed = rehearsal.run(&plan).unwrap();
    let accepted: Vec<(Action, String)> = rehearsed
        .accepted
        .iter()
        .map(|t| (t.action, t.id.short()))
        .collect();
    assert_eq!(
        accepted,
        [
            (Action::Fold, "read:1".to_string()),
            (Action::Mask, "bash:2".to_string()),
            (Action::Prune, "user:2".to_string()),
        ]
    );
    let reasons: HashMap<String, DropReason> = rehearsed
        .dropped
        .iter()
        .map(|d| (format!("{} {}", d.action, d.target), d.reason))
        .collect();
    assert_eq!(
        reasons["prune read:1"],
        DropReason::Conflict,
        "fold is the conservative one"
    );
    assert_eq!(reasons["fold grep:3"], DropReason::Covered);
    assert_eq!(reasons["fold user:3"], DropReason::CutTurn);
    assert_eq!(reasons["fold read:4"], DropReason::CutTurn);
    assert_eq!(reasons["prune read:99"], DropReason::Unknown);
    assert_eq!(reasons["prune garbage"], DropReason::Malformed);
    assert_eq!(reasons["fold bash:2"], DropReason::KindMismatch);
    assert_eq!(rehearsed.dropped.len(), 7);

    let view = &rehearsed.projection.messages;
    check(view, &messages);
    assert_eq!(view.len(), messages.len() - 3, "user:2's span is pruned");
    let first_user = view.iter().find_map(|m| match m {
        Message::User { content } if content.starts_with("Fix") => Some(content.clone()),
        _ => None,
    });
    let first_user = first_user.unwrap();
    assert!(
        first_user.contains("<system-reminder>")
            && first_user.contains("function:read:1 (read {\"path\":\"src/parser.rs\"}"),
        "{first_user}"
    );
    let results: Vec<&str> = view
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some(r.content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        results[0],
        "[folded as function:read:1; the recall tool restores it exactly]"
    );
    assert!(
        results[1].contains("[… 190 lines masked …]"),
        "{}",
        results[1]
    );
    assert_eq!(results[2], lines("readme", 50), "the cut turn is untouched");

    let sidecars = &rehearsed.projection.sidecars;
    assert_eq!(sidecars.len(), 1);
    assert_eq!(sidecars[0].id, "read:1".parse::<ObjectId>().unwrap());
    assert_eq!(
        sidecars[0].payload,
        lines("parser", 120),
        "byte-exact payload"
    );
    assert!(rehearsed.tokens_after < rehearsed.tokens_before);
    assert!(rehearsed.prune() > 0.5, "{}", rehearsed.prune());
}

#[test]
fn a_folded_conversation_round_trips_and_protected_objects_stay() {
    let messages = session();
    let table = ObjectTable::of(&messages);
    let protected: HashSet<ObjectId> = ["bash:2".parse().unwrap()].into();
    let counter = O200k::new();
    let rehearsal = Rehearsal {
        messages: &messages,
        table: &table,
        counter: &counter,
        protected: &protected,
        min_prune: 0.0,
        in_flight: in_flight(&messages),
        committed: &[],
    };
    let plan = parse_plan("<gc_plan><fold>user:2</fold><prune>bash:2</prune></gc_plan>").unwrap();
    let rehearsed = rehearsal.run(&plan).unwrap();
    assert_eq!(rehearsed.dropped[0].reason, DropReason::Protected);
    let sidecar = &rehearsed.projection.sidecars[0];
    let restored: Vec<Message> = serde_json::from_str(&sidecar.payload).unwrap();
    assert_eq!(restored, messages[8..11], "the folded span, exactly");
    check(&rehearsed.projection.messages, &messages);

    let user_protected: HashSet<ObjectId> = [ObjectId::User(1)].into();
    let rehearsal = Rehearsal {
        protected: &user_protected,
        ..rehearsal
    };
    let plan = parse_plan("<gc_plan><prune>read:1</prune></gc_plan>").unwrap();
    match rehearsal.run(&plan) {
        Err(Rejected::Empty { dropped }) => assert_eq!(dropped[0].reason, DropReason::Protected),
        other => panic!("{other:?}"),
    }
}

#[test]
fn plans_that_do_nothing_useful_are_rejected() {
    let messages = session();
    let table = ObjectTable::of(&messages);
    let protected = HashSet::new();
    let counter = O200k::new();
    let rehearsal = Rehearsal {
        messages: &messages,
        table: &table,
        counter: &counter,
        protected: &protected,
        min_prune: 0.9,
        in_flight: in_flight(&messages),
        committed: &[],
    };
    let only_cut = parse_plan("<gc_plan><prune>user:3</prune></gc_plan>").unwrap();
    assert!(matches!(
        rehearsal.run(&only_cut),
        Err(Rejected::Empty { .. })
    ));
    let small = parse_plan("<gc_plan><prune>grep:3</prune></gc_plan>").unwrap();
    match rehearsal.run(&small) {
        Err(Rejected::TooLittle { prune, min, .. }) => {
            assert!(prune > 0.0 && prune < 0.9, "{prune}");
            assert_eq!(min, 0.9);
        }
        other => panic!("{other:?}"),
    }
    let pruned = Rehearsal {
        min_prune: 0.0,
        ..rehearsal
    }
    .run(&small)
    .unwrap();
    check(&pruned.projection.messages, &messages);
    assert!(
        !pruned
            .projection
            .messages
            .iter()
            .any(|m| m.tool_calls().any(|c| c.id == "c3")),
        "the pruned call goes with its result"
    );
}

#[test]
fn mask_keeps_the_boundaries() {
    assert_eq!(mask("a\nb"), "a\nb", "short outputs stay");
    let masked = mask(&lines("x", 30));
    assert!(masked.starts_with("x line 1 "));
    assert!(masked.ends_with("x line 30 with some words in it"));
    assert!(masked.contains("[… 20 lines masked …]"));
    assert_eq!(masked.lines().count(), 11);
}

#[test]
fn the_latest_response_is_cut_not_the_whole_latest_request() {
    let mut messages = session();
    messages.push(call("c5", "bash", r#"{"command":"make docs"}"#));
    messages.push(Message::tool_result("c5", "bash", lines("docs", 40), false));
    let table = ObjectTable::of(&messages);
    let protected = HashSet::new();
    let counter = O200k::new();
    let rehearsal = Rehearsal {
        messages: &messages,
        table: &table,
        counter: &counter,
        protected: &protected,
        min_prune: 0.0,
        in_flight: in_flight(&messages),
        committed: &[],
    };
    let plan = parse_plan("<gc_plan><prune>read:4 bash:5</prune></gc_plan>").unwrap();
    let rehearsed = rehearsal.run(&plan).unwrap();
    let accepted: Vec<String> = rehearsed.accepted.iter().map(|t| t.id.short()).collect();
    assert_eq!(
        accepted,
        ["read:4"],
        "an earlier result of the latest request may go"
    );
    assert_eq!(rehearsed.dropped[0].target, "bash:5");
    assert_eq!(rehearsed.dropped[0].reason, DropReason::CutTurn);
    let view = &rehearsed.projection.messages;
    check(view, &messages);
    assert!(
        view.ends_with(&messages[14..]),
        "the latest response is untouched"
    );
}

#[test]
fn a_turn_holding_protected_work_is_not_folded_whole() {
    let messages = session();
    let table = ObjectTable::of(&messages);
    let protected: HashSet<ObjectId> = ["read:1".parse().unwrap()].into();
    let counter = O200k::new();
    let rehearsal = Rehearsal {
        messages: &messages,
        table: &table,
        counter: &counter,
        protected: &protected,
        min_prune: 0.0,
        in_flight: in_flight(&messages),
        committed: &[],
    };
    let plan = parse_plan("<gc_plan><fold>user:1</fold><prune>bash:2</prune></gc_plan>").unwrap();
    let rehearsed = rehearsal.run(&plan).unwrap();
    assert_eq!(rehearsed.dropped.len(), 1);
    assert_eq!(rehearsed.dropped[0].target, "user:1");
    assert_eq!(rehearsed.dropped[0].reason, DropReason::Protected);
    assert_eq!(rehearsed.accepted.len(), 1, "bash:2 alone goes");
}

#[test]
fn a_plan_comes_on_top_of_the_committed_actions() {
    let messages = session();
    let table = ObjectTable::of(&messages);
    let protected = HashSet::new();
    let counter = O200k::new();
    let first = parse_plan("<gc_plan><fold>read:1</fold><prune>user:2</prune></gc_plan>").unwrap();
    let base = Rehearsal {
        messages: &messages,
        table: &table,
        counter: &counter,
        protected: &protected,
        min_prune: 0.0,
        in_flight: in_flight(&messages),
        committed: &[],
    };
    let committed = base.run(&first).unwrap();
    let rehearsal = Rehearsal {
        committed: &committed.accepted,
        ..base
    };
    let second =
        parse_plan("<gc_plan><prune>read:1 grep:3</prune><mask>bash:2</mask></gc_plan>").unwrap();
    let rehearsed = rehearsal.run(&second).unwrap();
    let accepted: Vec<String> = rehearsed.accepted.iter().map(|t| t.id.short()).collect();
    assert_eq!(accepted, ["bash:2"]);
    let covered: Vec<&str> = rehearsed
        .dropped
        .iter()
        .filter(|d| d.reason == DropReason::Covered)
        .map(|d| d.target.as_str())
        .collect();
    assert_eq!(
        covered,
        ["read:1", "grep:3"],
        "already folded; inside a pruned turn"
    );
    assert_eq!(
        rehearsed.tokens_before, committed.tokens_after,
        "savings are counted from the committed view"
    );
    assert!(rehearsed.projection.sidecars.is_empty(), "only new folds");
    let view = &rehearsed.projection.messages;
    check(view, &messages);
    assert!(view.iter().any(|m| matches!(m, Message::ToolResult(r)
        if r.content.starts_with("[folded as function:read:1"))));
    assert!(view.iter().any(|m| matches!(m, Message::ToolResult(r)
        if r.content.contains("lines masked"))));
}
