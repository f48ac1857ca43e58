//! Conformance tests: one per rule of the CWL paper (sections 4.2–4.4) and
//! per delimiter validation error, plus the behaviours DESIGN.md adds.

use crate::common::{Script, bulk, context, counter, has_output, recount, texts, validate};
use cwl::{
    Accepted, Annotation, Block, Config, Context, DelimiterError, EpisodeKind, EvictError, Level,
    Message, ToolCall, TranscriptError, evict,
};
use serde_json::json;
use std::sync::Arc;

fn delimiter_outcome(
    context: &mut Context,
    id: &str,
    arguments: serde_json::Value,
) -> Result<Accepted, DelimiterError> {
    let outcomes = context
        .push(Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new(
                id,
                "delimiter",
                arguments.to_string(),
            ))],
        })
        .expect("valid message");
    context
        .push(Message::tool_result(id, "delimiter", "ok", false))
        .expect("result");
    assert_eq!(outcomes.len(), 1);
    outcomes.into_iter().next().expect("one outcome").result
}

/// A context with closed expl `e1`, closed act `a1` (depends on e1) and an
/// active expl `e2`.
fn graph_fixture() -> Context {
    let mut script = Script::new();
    script
        .system("sys")
        .user("task")
        .start_expl("e1")
        .tool("grep", "found")
        .end_expl("e1 learned")
        .start_act("a1", &["e1"])
        .tool("edit", "done")
        .end_act()
        .start_expl("e2");
    context(&script.build(), 100_000)
}

#[test]
fn protocol_rejections_say_what_to_fix_and_leave_the_graph_unchanged() {
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (
            json!({"action": "start", "name": "x", "type": "expl"}),
            "`e2` is still active",
        ),
        (json!({"action": "end"}), "needs a non-empty `description`"),
        (
            json!({"action": "end", "description": "  "}),
            "needs a non-empty `description`",
        ),
        (
            json!({"action": "end", "name": "e1", "description": "d"}),
            "`e1` is not the active episode",
        ),
        (json!({"action": "finish"}), "must be \"start\" or \"end\""),
    ];
    for (arguments, expected) in cases {
        let mut context = graph_fixture();
        let episodes = context.graph().episodes().len();
        let error = delimiter_outcome(&mut context, "c", arguments.clone()).expect_err("rejected");
        assert!(error.to_string().contains(expected), "{arguments}: {error}");
        assert_eq!(context.graph().episodes().len(), episodes);
        assert_eq!(context.active_episode(), Some(("e2", EpisodeKind::Expl)));
    }
}

#[test]
fn start_rules_are_enforced() {
    let cases: Vec<(serde_json::Value, DelimiterError)> = vec![
        (
            json!({"action": "start", "name": "e1", "type": "expl"}),
            DelimiterError::DuplicateName {
                name: "e1".into(),
                suggestion: "e1-2".into(),
            },
        ),
        (
            json!({"action": "start", "name": "a1", "type": "act", "dependencies": ["e1"]}),
            DelimiterError::DuplicateName {
                name: "a1".into(),
                suggestion: "a1-2".into(),
            },
        ),
        (
            json!({"action": "start", "name": "a2", "type": "act"}),
            DelimiterError::MissingDependencies("a2".into()),
        ),
        (
            json!({"action": "start", "name": "a2", "type": "act", "dependencies": []}),
            DelimiterError::MissingDependencies("a2".into()),
        ),
        (
            json!({"action": "start", "name": "a2", "type": "act", "dependencies": ["nope"]}),
            DelimiterError::UnknownDependency("nope".into()),
        ),
        (
            json!({"action": "start", "name": "a2", "type": "act", "dependencies": ["a1"]}),
            DelimiterError::DependencyNotExpl("a1".into()),
        ),
        (
            json!({"action": "start", "name": "a2", "type": "act", "dependencies": ["a2"]}),
            DelimiterError::SelfDependency("a2".into()),
        ),
        (
            json!({"action": "start", "name": "e3", "type": "expl", "dependencies": ["e1"]}),
            DelimiterError::ExplDependencies("e3".into()),
        ),
        (
            json!({"action": "start", "type": "expl"}),
            DelimiterError::MissingName,
        ),
        (
            json!({"action": "start", "name": "z"}),
            DelimiterError::MissingType,
        ),
    ];
    for (arguments, expected) in cases {
        let mut script = Script::new();
        script
            .user("task")
            .start_expl("e1")
            .end_expl("learned")
            .start_act("a1", &["e1"])
            .end_act();
        let mut context = context(&script.build(), 100_000);
        let episodes = context.graph().episodes().len();
        let error = delimiter_outcome(&mut context, "c", arguments.clone()).expect_err("rejected");
        assert_eq!(error, expected, "{arguments}");
        // The rejected call itself is ordinary content in an unannotated segment.
        assert_eq!(context.graph().episodes().len(), episodes + 1);
        assert!(!context.graph().episodes()[episodes].is_annotated());
        assert_eq!(context.active_episode(), None);
    }
}

#[test]
fn a_dependency_must_be_closed() {
    // An expl that is not closed is the active one, so starting an act that
    // depends on it is refused by the one-active-episode rule.
    let mut script = Script::new();
    script.user("task").start_expl("e1");
    let mut context = context(&script.build(), 100_000);
    let error = delimiter_outcome(
        &mut context,
        "c",
        json!({"action": "start", "name": "a", "type": "act", "dependencies": ["e1"]}),
    )
    .expect_err("rejected");
    assert_eq!(error, DelimiterError::AlreadyActive("e1".into()));
    assert_eq!(context.active_episode(), Some(("e1", EpisodeKind::Expl)));
}

#[test]
fn end_rules_are_enforced() {
    let mut context = Context::new(Config::default(), counter(), Vec::new());
    assert_eq!(
        delimiter_outcome(&mut context, "c0", json!({"action": "end"})),
        Err(DelimiterError::NothingActive)
    );
    delimiter_outcome(
        &mut context,
        "c1",
        json!({"action": "start", "name": "e", "type": "expl"}),
    )
    .expect("start");
    delimiter_outcome(
        &mut context,
        "c2",
        json!({"action": "end", "description": "learned"}),
    )
    .expect("end");
    delimiter_outcome(
        &mut context,
        "c3",
        json!({"action": "start", "name": "a", "type": "act", "dependencies": ["e"]}),
    )
    .expect("start act");
    assert_eq!(
        delimiter_outcome(
            &mut context,
            "c4",
            json!({"action": "end", "description": "did it"})
        ),
        Err(DelimiterError::ActDescription("a".into()))
    );
    assert_eq!(
        delimiter_outcome(&mut context, "c5", json!({"action": "end", "name": "a"})),
        Ok(Accepted::Ended {
            name: "a".into(),
            kind: EpisodeKind::Act,
            description: None,
        })
    );
}

#[test]
fn several_delimiter_calls_in_one_message_apply_in_order() {
    let mut context = Context::new(Config::default(), counter(), Vec::new());
    delimiter_outcome(
        &mut context,
        "c1",
        json!({"action": "start", "name": "e", "type": "expl"}),
    )
    .expect("start");
    let outcomes = context
        .push(Message::Assistant {
            content: vec![
                Block::ToolCall(ToolCall::new(
                    "c2",
                    "delimiter",
                    json!({"action": "end", "description": "d"}).to_string(),
                )),
                Block::ToolCall(ToolCall::new(
                    "c3",
                    "delimiter",
                    json!({"action": "start", "name": "a", "type": "act", "dependencies": ["e"]})
                        .to_string(),
                )),
                Block::ToolCall(ToolCall::new(
                    "c4",
                    "delimiter",
                    json!({"action": "end"}).to_string(),
                )),
            ],
        })
        .expect("push");
    let results: Vec<bool> = outcomes.iter().map(|outcome| outcome.is_error()).collect();
    assert_eq!(results, vec![false, false, false]);
    assert_eq!(outcomes[1].text(), "Started act episode `a`.");
    assert_eq!(context.active_episode(), None);
    assert_eq!(context.graph().episodes().len(), 2);
}

#[test]
fn prologue_is_never_evicted_and_unmet_budget_is_reported() {
    let mut script = Script::new();
    script
        .system("system prompt")
        .user("task one")
        .tool("read", &bulk(500));
    let messages = script.build();
    let mut context = context(&messages, 50);
    let report = context.enforce();
    assert!(!report.budget_met);
    assert!(report.episodes.is_empty());
    assert!(
        report.warnings[0].contains("budget cannot be met"),
        "{:?}",
        report.warnings
    );
    assert_eq!(context.view().cloned().collect::<Vec<_>>(), messages);
}

#[test]
fn act_episodes_are_evicted_before_older_expl_episodes() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("look")
        .tool("read", &bulk(300))
        .end_expl("file has fn x")
        .start_act("change", &["look"])
        .tool("edit", &bulk(300))
        .end_act()
        .say("next")
        .user("next");
    let messages = script.build();
    let mut context = context(&messages, 100_000);
    context.set_budget(context.tokens() - 100);
    let report = context.enforce();
    assert!(report.budget_met);
    assert_eq!(report.episodes.len(), 1);
    assert_eq!(report.episodes[0].name, "change");
    let view: Vec<Message> = context.view().cloned().collect();
    assert!(has_output(&view, &bulk(300)), "the expl read survives");
}

#[test]
fn levels_apply_in_order_and_stop_as_soon_as_the_budget_is_met() {
    let reasoning = "r".repeat(400);
    let grep = "g".repeat(800);
    let read = "f".repeat(1200);
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e")
        .tool_with_reasoning(&reasoning, "read", &read)
        .tool("grep", &grep)
        .end_expl("learned")
        .say("next");
    let messages = script.build();

    let full = context(&messages, 100_000).tokens();
    let expectations = [
        (full - 50, vec![Level::Reasoning]),
        (full - 150, vec![Level::Reasoning, Level::Bulk]),
        (
            full - 400,
            vec![Level::Reasoning, Level::Bulk, Level::Intermediate],
        ),
        (
            20,
            vec![
                Level::Reasoning,
                Level::Bulk,
                Level::Intermediate,
                Level::Removed,
            ],
        ),
    ];
    for (budget, levels) in expectations {
        let mut context = context(&messages, budget);
        let report = context.enforce();
        let applied: Vec<Level> = report.episodes[0]
            .levels
            .iter()
            .map(|level| level.level)
            .collect();
        assert_eq!(applied, levels, "budget {budget}");
        assert_eq!(context.tokens(), recount(&context));
    }
}

#[test]
fn reasoning_level_applies_to_expl_only() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e")
        .end_expl("learned")
        .start_act("a", &["e"])
        .tool_with_reasoning(&"r".repeat(400), "bash", &bulk(200))
        .end_act()
        .say("next");
    let messages = script.build();
    let mut context = context(&messages, 100_000);
    context.set_budget(context.tokens() - 10);
    let report = context.enforce();
    let levels: Vec<Level> = report.episodes[0]
        .levels
        .iter()
        .map(|level| level.level)
        .collect();
    assert_eq!(
        levels,
        vec![Level::Intermediate],
        "no reasoning level for an act; no bulk level without bulk calls"
    );
    let view: Vec<Message> = context.view().cloned().collect();
    let reasoning_left = view.iter().any(|message| {
        matches!(message, Message::Assistant { content } if content.iter().any(|block| matches!(block, Block::Reasoning { .. })))
    });
    assert!(
        !reasoning_left,
        "a message left with nothing but reasoning is not a valid request, so it goes with its call: {view:?}"
    );
}

#[test]
fn full_removal_leaves_the_expl_description_as_residue_and_keeps_user_turns() {
    let mut script = Script::new();
    script
        .system("sys")
        .user("task")
        .start_expl("locate-auth")
        .tool("grep", &bulk(200))
        .user("also check the tests")
        .tool("read", &bulk(200))
        .end_expl("Auth lives in src/auth.rs")
        .say("next")
        .user("thanks");
    let messages = script.build();
    let mut context = context(&messages, 60);
    let report = context.enforce();
    assert_eq!(
        report.episodes[0].levels.last().map(|level| level.level),
        Some(Level::Removed)
    );
    let view: Vec<Message> = context.view().cloned().collect();
    assert_eq!(
        texts(&view),
        vec![
            "[evicted expl episode `locate-auth` (#0): Auth lives in src/auth.rs]".to_string(),
            "next".to_string()
        ]
    );
    let users: Vec<&Message> = view
        .iter()
        .filter(|message| matches!(message, Message::User { .. }))
        .collect();
    assert_eq!(
        users.len(),
        3,
        "every user turn survives, including the one inside the episode"
    );
    assert_eq!(view[0], Message::system("sys"));
    validate(&view).expect("valid view");
    assert_eq!(context.tokens(), recount(&context));
}

#[test]
fn full_removal_of_an_act_leaves_nothing() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e")
        .end_expl("learned")
        .start_act("a", &["e"])
        .tool("edit", &bulk(200))
        .end_act()
        .say("next");
    let messages = script.build();
    let mut context = context(&messages, 100_000);
    let before: Vec<Message> = context.view().cloned().collect();
    context.set_budget(context.tokens() - 240);
    let report = context.enforce();
    assert_eq!(report.episodes.len(), 1);
    assert_eq!(
        report.episodes[0].levels.last().map(|level| level.level),
        Some(Level::Removed)
    );
    let view: Vec<Message> = context.view().cloned().collect();
    assert!(!view.iter().any(|message| {
        message
            .tool_calls()
            .any(|call| call.arguments.contains("\"act\""))
    }));
    assert_eq!(
        view.len(),
        before.len() - 6,
        "start, edit and end pairs are gone"
    );
}

#[test]
fn an_expl_is_kept_while_a_dependent_act_has_content() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e1")
        .tool("read", &bulk(300))
        .end_expl("e1 learned")
        .start_expl("e2")
        .tool("read", &bulk(300))
        .end_expl("e2 learned")
        .start_act("a", &["e1"]);
    // `a` stays active: its dependency e1 can never be chosen, e2 can.
    let messages = script.build();
    let mut context = context(&messages, 100);
    let report = context.enforce();
    let names: Vec<&str> = report
        .episodes
        .iter()
        .map(|episode| episode.name.as_str())
        .collect();
    assert_eq!(names, vec!["e2"]);
    assert!(!report.budget_met);
    let view: Vec<Message> = context.view().cloned().collect();
    assert!(has_output(&view, &bulk(300)), "e1's read is still there");
}

#[test]
fn the_active_episode_is_never_touched() {
    let mut script = Script::new();
    script.user("task").start_expl("e").tool("grep", &bulk(500));
    let messages = script.build();
    let mut context = context(&messages, 10);
    let report = context.enforce();
    assert!(!report.budget_met);
    assert_eq!(context.view().cloned().collect::<Vec<_>>(), messages);
}

#[test]
fn a_dependency_on_an_evicted_expl_is_recorded_and_nothing_is_restored() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e")
        .tool("read", &bulk(300))
        .end_expl("learned")
        .say("next");
    let mut context = context(&script.build(), 50);
    context.enforce();
    assert!(context.graph().episodes()[0].is_removed());
    let outcome = delimiter_outcome(
        &mut context,
        "late",
        json!({"action": "start", "name": "a", "type": "act", "dependencies": ["e"]}),
    );
    assert!(outcome.is_ok());
    let act = context
        .graph()
        .episodes()
        .iter()
        .find(|episode| episode.name() == "a");
    assert_eq!(act.map(|act| act.dependencies()), Some(&[0][..]));
    let view: Vec<Message> = context.view().cloned().collect();
    assert!(!has_output(&view, &bulk(300)));
}

#[test]
fn unannotated_segments_are_kept_until_later_acts_are_gone() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e")
        .end_expl("learned")
        .tool("read", &bulk(300)) // unannotated, between episodes
        .start_act("a", &["e"])
        .tool("edit", &bulk(300))
        .end_act()
        .say("next");
    let messages = script.build();
    let mut context = context(&messages, 100_000);
    context.set_budget(context.tokens() - 320);
    let report = context.enforce();
    assert_eq!(report.episodes.len(), 1);
    assert_eq!(report.episodes[0].name, "a");
    assert!(
        context.graph().episodes()[2].is_removed(),
        "episodes: e, the unannotated segment, a"
    );
    let view: Vec<Message> = context.view().cloned().collect();
    assert!(
        has_output(&view, &bulk(300)),
        "the unannotated read outlives the act"
    );
    context.set_budget(context.tokens() - 250);
    let report = context.enforce();
    // Both expl now; the oldest goes first.
    let names: Vec<&str> = report
        .episodes
        .iter()
        .map(|episode| episode.name.as_str())
        .collect();
    assert_eq!(names, vec!["e", "(unannotated #1)"]);
    assert!(!report.episodes[1].annotated);
    validate(&context.view().cloned().collect::<Vec<_>>()).expect("valid");
}

#[test]
fn an_unannotated_segment_waits_for_an_active_later_act() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e")
        .end_expl("learned")
        .tool("read", &bulk(300))
        .start_act("a", &["e"]);
    let mut context = context(&script.build(), 10);
    let report = context.enforce();
    assert!(!report.budget_met);
    assert!(
        report.episodes.iter().all(|episode| episode.annotated),
        "{report:?}"
    );
}

#[test]
fn tool_calls_and_results_leave_together() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e")
        .tool("grep", &bulk(300))
        .tool("read", &bulk(10))
        .end_expl("learned")
        .say("next");
    let messages = script.build();
    let mut context = context(&messages, 100_000);
    context.set_budget(context.tokens() - 100);
    context.enforce();
    let view: Vec<Message> = context.view().cloned().collect();
    validate(&view).expect("valid");
    assert!(
        !view
            .iter()
            .any(|message| message.tool_calls().any(|call| call.name == "grep"))
    );
    assert!(
        view.iter()
            .any(|message| message.tool_calls().any(|call| call.name == "read"))
    );
    assert_eq!(context.tokens(), recount(&context));
}

#[test]
fn eviction_persists_so_the_prefix_only_changes_where_eviction_happens() {
    let mut script = Script::new();
    script
        .system("sys")
        .user("task")
        .start_expl("e")
        .tool("read", &bulk(300))
        .end_expl("learned")
        .start_act("a", &["e"])
        .tool("edit", &bulk(300))
        .end_act()
        .say("next");
    let mut context = context(&script.build(), 100_000);
    context.set_budget(context.tokens() - 100);
    assert!(context.enforce().evicted());
    let after_first: Vec<Message> = context.view().cloned().collect();
    context.push(Message::user("more")).expect("push");
    let report = context.enforce();
    assert!(
        !report.evicted(),
        "under budget again after the first pass: {report:?}"
    );
    let after_second: Vec<Message> = context.view().cloned().collect();
    assert_eq!(&after_second[..after_first.len()], &after_first[..]);
}

#[test]
fn a_result_for_an_evicted_pending_call_is_dropped() {
    let mut context = Context::new(Config::paper(10), counter(), Vec::new());
    let open = |name: &str| json!({"action": "start", "name": name, "type": "expl"}).to_string();
    context
        .push(Message::Assistant {
            content: vec![
                Block::ToolCall(ToolCall::new("s", "delimiter", open("e"))),
                Block::ToolCall(ToolCall::new("r", "read", "{}")),
                Block::ToolCall(ToolCall::new(
                    "x",
                    "delimiter",
                    json!({"action": "end", "description": "d"}).to_string(),
                )),
            ],
        })
        .expect("push");
    context
        .push(Message::tool_result("s", "delimiter", "ok", false))
        .expect("s");
    context
        .push(Message::tool_result("x", "delimiter", "ok", false))
        .expect("x");
    // Out of order on purpose: a later response before the read's result.
    context
        .push(Message::assistant_text("meanwhile"))
        .expect("reply");
    context.enforce();
    context
        .push(Message::tool_result("r", "read", bulk(100), false))
        .expect("late result");
    let view: Vec<Message> = context.view().cloned().collect();
    validate(&view).expect("valid");
    assert!(!has_output(&view, &bulk(100)));
}

#[test]
fn out_of_band_annotations_cost_nothing_and_leave_a_residue_message() {
    let mut context = Context::new(Config::paper(100_000), counter(), Vec::new());
    context.push(Message::user("task")).expect("user");
    let before = context.tokens();
    context
        .annotate(Annotation::Start {
            name: "look".into(),
            kind: EpisodeKind::Expl,
            dependencies: vec![],
        })
        .expect("start");
    assert_eq!(context.tokens(), before);
    context
        .push(Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new("c", "read", "{}"))],
        })
        .expect("call");
    context
        .push(Message::tool_result("c", "read", bulk(300), false))
        .expect("result");
    context
        .push(Message::assistant_text(bulk(100)))
        .expect("text");
    context
        .annotate(Annotation::End {
            name: None,
            description: Some("read main.rs".into()),
        })
        .expect("end");
    context
        .push(Message::assistant_text("read it"))
        .expect("reply");
    context.push(Message::user("next")).expect("user");
    context.set_budget(30);
    context.enforce();
    let view: Vec<Message> = context.view().cloned().collect();
    assert_eq!(
        view,
        vec![
            Message::user("task"),
            Message::assistant_text("[evicted expl episode `look` (#0): read main.rs]"),
            Message::assistant_text("read it"),
            Message::user("next"),
        ]
    );
    assert_eq!(context.tokens(), recount(&context));
}

#[test]
fn transcript_errors_leave_the_context_unchanged() {
    let mut context = Context::new(Config::default(), counter(), Vec::new());
    context.push(Message::user("task")).expect("user");
    let tokens = context.tokens();
    assert_eq!(
        context.push(Message::tool_result("nope", "read", "x", false)),
        Err(TranscriptError::UnknownCall("nope".into()))
    );
    assert_eq!(
        context.push(Message::Assistant { content: vec![] }),
        Err(TranscriptError::EmptyAssistant)
    );
    let twice = Message::Assistant {
        content: vec![
            Block::ToolCall(ToolCall::new("a", "read", "{}")),
            Block::ToolCall(ToolCall::new("a", "read", "{}")),
        ],
    };
    assert_eq!(
        context.push(twice),
        Err(TranscriptError::DuplicateCallId("a".into()))
    );
    assert_eq!(context.tokens(), tokens);
    assert_eq!(context.view().count(), 1);
}

#[test]
fn calibration_shifts_the_count() {
    let mut script = Script::new();
    script.user("task");
    let mut context = context(&script.build(), 1000);
    let local = context.tokens();
    context.calibrate(local, local + 40);
    assert_eq!(context.tokens(), local + 40);
    assert_eq!(context.counted_tokens(), local);
}

#[test]
fn one_shot_reports_invalid_delimiter_calls_and_keeps_them() {
    let mut script = Script::new();
    script
        .user("task")
        .start_act("a", &["missing"])
        .start_expl("e")
        .end_expl("learned");
    let evicted = evict(script.build(), Vec::new(), Config::default(), counter()).expect("evict");
    assert_eq!(evicted.report.warnings.len(), 1);
    assert!(evicted.report.warnings[0].contains("message 1: delimiter call `call_1` ignored"));
    assert!(evicted.report.warnings[0].contains("`missing` names no earlier episode"));
    assert_eq!(evicted.messages.len(), 7);
}

#[test]
fn one_shot_rejects_broken_transcripts_with_the_message_index() {
    let orphan = vec![
        Message::user("task"),
        Message::tool_result("x", "read", "out", false),
    ];
    let error = evict(orphan, Vec::new(), Config::default(), counter()).expect_err("orphan");
    assert_eq!(
        error.to_string(),
        "message 1: tool result for unknown call `x` (no earlier tool call with this id is waiting for a result)"
    );
    let unanswered = vec![
        Message::user("task"),
        Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new("y", "read", "{}"))],
        },
    ];
    let error =
        evict(unanswered, Vec::new(), Config::default(), counter()).expect_err("unanswered");
    assert_eq!(
        error,
        EvictError::MissingResult {
            index: 1,
            call_id: "y".into()
        }
    );
}

#[test]
fn the_pass_is_deterministic() {
    let mut script = Script::new();
    script.user("task");
    for task in 0..20 {
        let expl = format!("e{task}");
        script
            .start_expl(&expl)
            .tool("grep", &bulk(50 + task))
            .tool_with_reasoning("hmm", "read", &bulk(80))
            .end_expl(&format!("found {task}"))
            .start_act(&format!("a{task}"), &[&expl])
            .tool("edit", &bulk(40))
            .end_act()
            .user(&format!("task {task}"));
    }
    let messages = script.build();
    let run = || {
        let evicted = evict(
            messages.clone(),
            Vec::new(),
            Config::with_budget(1500),
            counter(),
        )
        .expect("evict");
        (
            serde_json::to_string(&evicted.messages).expect("json"),
            serde_json::to_string(&evicted.report).expect("json"),
        )
    };
    assert_eq!(run(), run());
}

#[test]
fn an_episode_the_latest_response_closed_waits_for_the_next_response() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("e")
        .tool_with_reasoning("thinking hard", "read", &bulk(300))
        .end_expl("learned");
    let mut context = context(&script.build(), 50);
    let report = context.enforce();
    assert!(
        !report.budget_met,
        "the last response must reach the model unmodified"
    );
    assert!(report.deferred);
    assert!(report.warnings[0].contains("until the next response"));
    assert!(report.episodes.is_empty());
    context
        .push(Message::assistant_text("next"))
        .expect("reply");
    let report = context.enforce();
    assert!(report.budget_met);
    assert_eq!(report.episodes[0].name, "e");
}

#[test]
fn an_act_in_flight_protects_only_its_own_dependencies() {
    let mut script = Script::new();
    script
        .user("task")
        .start_expl("old")
        .tool("read", &bulk(300))
        .end_expl("old learned")
        .start_expl("e")
        .tool("read", &bulk(300))
        .end_expl("learned")
        .start_act("a", &["e"])
        .tool("edit", &bulk(300))
        .end_act();
    let mut context = context(&script.build(), 50);
    let report = context.enforce();
    let names: Vec<&str> = report
        .episodes
        .iter()
        .map(|episode| episode.name.as_str())
        .collect();
    assert_eq!(names, ["old"], "the unrelated expl goes; `e` waits for `a`");
    assert!(report.deferred, "{report:?}");
    let view: Vec<Message> = context.view().cloned().collect();
    assert_eq!(
        view.iter()
            .filter(|m| has_output(std::slice::from_ref(m), &bulk(300)))
            .count(),
        2,
        "e's read and a's edit stay"
    );
    context
        .push(Message::assistant_text("done"))
        .expect("reply");
    let report = context.enforce();
    let names: Vec<&str> = report
        .episodes
        .iter()
        .map(|episode| episode.name.as_str())
        .collect();
    assert_eq!(names, ["a", "e"]);
}

fn reasoning_blocks(context: &Context) -> usize {
    context
        .view()
        .map(|message| match message {
            Message::Assistant { content } => content
                .iter()
                .filter(|block| matches!(block, Block::Reasoning { .. }))
                .count(),
            _ => 0,
        })
        .sum()
}

#[test]
fn a_user_turn_takes_earlier_reasoning_out_when_the_provider_drops_it() {
    let mut script = Script::new();
    script
        .system("agent")
        .user("task")
        .tool_with_reasoning(&"why ".repeat(200), "read", "x = 1");
    let mut messages = script.build();
    messages.push(Message::Assistant {
        content: vec![Block::Reasoning {
            text: "only thinking".into(),
            signature: Some("sig".into()),
        }],
    });
    let run = |scope: cwl::ReasoningScope| {
        let config = Config::with_budget(80_000).reasoning(scope);
        let mut context = Context::new(config, counter(), vec![cwl::delimiter_spec()]);
        for message in &messages {
            context.push(message.clone()).expect("valid");
        }
        assert_eq!(reasoning_blocks(&context), 2, "the current turn's stays");
        let before = (context.tokens(), context.view().count());
        context.push(Message::user("next")).expect("user");
        assert_eq!(context.tokens(), recount(&context));
        (before, context)
    };

    let ((tokens, count), kept) = run(cwl::ReasoningScope::AllTurns);
    assert_eq!(reasoning_blocks(&kept), 2);
    assert_eq!(kept.view().count(), count + 1);
    assert!(kept.tokens() > tokens);

    let ((tokens, count), dropped) = run(cwl::ReasoningScope::CurrentTurn);
    assert_eq!(reasoning_blocks(&dropped), 0);
    assert_eq!(
        dropped.view().count(),
        count,
        "the user turn came in, the message of only reasoning went"
    );
    assert!(
        dropped.tokens() + 150 < tokens,
        "{} of {tokens}",
        dropped.tokens()
    );
    let view: Vec<Message> = dropped.view().cloned().collect();
    validate(&view).expect("valid");
    let sources: Vec<cwl::Source> = dropped.view_sources().map(|(source, _)| source).collect();
    assert!(matches!(sources[2], cwl::Source::Altered(2)), "{sources:?}");

    let mut dropped = dropped;
    dropped
        .push(Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "fresh".into(),
                    signature: None,
                },
                Block::Text {
                    text: "done".into(),
                },
            ],
        })
        .expect("reply");
    assert_eq!(
        reasoning_blocks(&dropped),
        1,
        "the new turn's reasoning counts"
    );
}

#[test]
fn the_reasoning_scope_is_saved_only_when_it_is_not_the_default() {
    let saved = serde_json::to_value(Config::default()).expect("json");
    assert!(saved.get("reasoning").is_none(), "{saved}");
    let config = Config::default().reasoning(cwl::ReasoningScope::CurrentTurn);
    let saved = serde_json::to_value(&config).expect("json");
    assert_eq!(saved["reasoning"], "current_turn");
    let restored: Config = serde_json::from_value(saved).expect("restores");
    assert_eq!(restored, config);
}

#[test]
fn a_restored_engine_goes_on_dropping_earlier_turns_reasoning() {
    let config = Config::with_budget(80_000).reasoning(cwl::ReasoningScope::CurrentTurn);
    let mut context = Context::new(config, counter(), vec![cwl::delimiter_spec()]);
    let mut script = Script::new();
    script
        .system("agent")
        .user("task")
        .tool_with_reasoning("why", "read", "x = 1");
    for message in script.build() {
        context.push(message).expect("valid");
    }
    let saved = serde_json::to_string(&context.checkpoint()).expect("json");
    let checkpoint: cwl::Checkpoint = serde_json::from_str(&saved).expect("restores");
    let mut restored =
        Context::restore(checkpoint, counter(), Arc::new(cwl::PaperOrder)).expect("same version");
    assert_eq!(reasoning_blocks(&restored), 1);
    restored.push(Message::user("next")).expect("user");
    assert_eq!(reasoning_blocks(&restored), 0);
    assert_eq!(restored.tokens(), recount(&restored));
}

/// Under a provider that keeps only the current turn's reasoning, a pass
/// takes the old episodes' reasoning before any of their content: within
/// one long turn, every closed episode's reasoning goes before the oldest
/// loses its output. Under the default the oldest episode goes level by
/// level, output included, while the later ones keep their reasoning.
#[test]
fn old_reasoning_goes_before_content_when_the_provider_drops_reasoning() {
    let mut script = Script::new();
    script.system("agent").user("task");
    for n in 0..4 {
        script
            .start_expl(&format!("e{n}"))
            .tool_with_reasoning(
                &"why ".repeat(300),
                "read",
                &format!("out{n} {}", bulk(150)),
            )
            .end_expl(&format!("e{n} learned"));
    }
    let messages = script.build();
    let run = |scope: cwl::ReasoningScope| {
        let mut config = Config::paper(10_000).reasoning(scope);
        config.keep_recent = None;
        let mut context = Context::new(config, counter(), Vec::new());
        for message in &messages {
            context.push(message.clone()).expect("valid");
        }
        // Over by more than one episode's reasoning, less than three's.
        let tokens = context.tokens();
        context.set_budget(tokens - 500);
        let report = context.enforce();
        assert!(report.budget_met);
        assert_eq!(context.tokens(), recount(&context));
        let view: Vec<Message> = context.view().cloned().collect();
        validate(&view).expect("valid");
        (view, reasoning_blocks(&context))
    };

    let (view, left) = run(cwl::ReasoningScope::CurrentTurn);
    for n in 0..4 {
        let output = format!("out{n} {}", bulk(150));
        assert!(has_output(&view, &output), "e{n}'s output stays");
    }
    assert!(left < 4, "some reasoning went: {left} left");

    let (view, left) = run(cwl::ReasoningScope::AllTurns);
    assert!(
        !has_output(&view, &format!("out0 {}", bulk(150))),
        "the oldest episode goes, output included"
    );
    assert!(left >= 3, "the later episodes keep their reasoning: {left}");
}
