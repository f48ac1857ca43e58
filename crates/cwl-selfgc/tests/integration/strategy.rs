//! Self-GC behind the seam: planner rounds, rehearsal, commit, sidecars
//! and recall, the budget backstop, and save/restore.

use cwl::SideCalls;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cwl::strategy::Strategy;
use cwl::tokens::message_tokens;
use cwl::{Block, Config, Estimate, Message, ReasoningScope, ToolCall, delimiter_spec};
use cwl_selfgc::strategy::BACKSTOP_REASON;
use cwl_selfgc::{Action, SelfGc, SelfGcOptions};

pub(crate) const BUDGET: usize = 4_000;

/// A session store with nothing in it: these recalls read sidecars.
const NO_STORE: &Vec<Message> = &Vec::new();

/// Sidecars kept in memory, as the harness keeps them on disk.
type Files = RefCell<HashMap<String, String>>;

fn strategy() -> SelfGc {
    SelfGc::new(
        Config::with_budget(BUDGET),
        Arc::new(Estimate),
        vec![delimiter_spec()],
    )
}

fn body(i: usize) -> String {
    (0..30)
        .map(|line| format!("fn item_{i}_{line}() {{ body of file {i} }}\r\n"))
        .collect()
}

/// Step `i`: a read with its result.
pub(crate) fn step(strategy: &mut dyn Strategy, i: usize) {
    strategy
        .push(Message::Assistant {
            content: vec![
                Block::Text {
                    text: format!("reading file {i}"),
                },
                Block::ToolCall(ToolCall::new(
                    format!("c{i}"),
                    "read",
                    format!("{{\"path\":\"src/f{i}.rs\"}}"),
                )),
            ],
        })
        .unwrap();
    strategy
        .push(Message::tool_result(
            format!("c{i}"),
            "read",
            body(i),
            false,
        ))
        .unwrap();
}

/// What the planner answers to each request: by the request's position.
type Planner<'a> = &'a dyn Fn(u64, &[Message]) -> Result<String, String>;

/// Runs `steps` steps over tasks of 6 steps each, answering side calls
/// with `planner` and keeping the sidecars the strategy asks for.
fn session(strategy: &mut SelfGc, steps: usize, planner: Planner<'_>, files: &Files) -> usize {
    strategy
        .push(Message::system("You are a coding agent."))
        .unwrap();
    let mut users = 0;
    for i in 0..steps {
        if i % 6 == 0 {
            strategy
                .push(Message::user(format!(
                    "task {}: read the next files",
                    i / 6
                )))
                .unwrap();
            users += 1;
        }
        drive(strategy, planner, files);
        step(strategy, i);
    }
    drive(strategy, planner, files);
    users
}

/// One model call's worth: side calls, then the pass.
fn drive(strategy: &mut SelfGc, planner: Planner<'_>, files: &Files) {
    while let Some(request) = strategy.side_request() {
        assert_eq!(request.purpose, "planner");
        let answer = planner(request.id, &request.messages);
        strategy.side_result(request.id, answer);
    }
    let report = strategy.enforce();
    assert_eq!(report.tokens_after, strategy.tokens());
    for file in strategy.take_sidecars() {
        files.borrow_mut().insert(file.name, file.content);
    }
    assert!(
        report.budget_met || report.deferred,
        "the budget holds: {report:?}"
    );
}

/// The guarantees every strategy keeps, checked on a view.
fn check_view(view: &[Message], users: usize) {
    assert_eq!(
        view.iter()
            .filter(|m| matches!(m, Message::User { .. }))
            .count(),
        users,
        "user turns kept"
    );
    let mut open: HashSet<String> = HashSet::new();
    for message in view {
        match message {
            Message::Assistant { content } => {
                assert!(!content.is_empty(), "no empty assistant message");
                assert!(open.is_empty(), "every earlier call has its result");
                open.extend(message.tool_calls().map(|c| c.id.clone()));
            }
            Message::ToolResult(result) => {
                assert!(
                    open.remove(&result.call_id),
                    "{} has its call",
                    result.call_id
                )
            }
            _ => {}
        }
    }
}

/// Folds every read whose id is shown in the request, up to the latest
/// user turn's header.
fn fold_all_shown(_: u64, messages: &[Message]) -> Result<String, String> {
    let mut ids = Vec::new();
    for message in messages {
        if let Message::ToolResult(result) = message
            && let Some(at) = result.content.rfind("<turn id=\"function:")
        {
            let id = &result.content[at + 10..];
            let id = &id[..id.find('"').unwrap()];
            ids.push(id.to_string());
        }
    }
    Ok(format!(
        "<above_conversation_summary>A reading session.</above_conversation_summary>\n<gc_plan>\n<fold kind=\"function\" reason=\"stable_artifact\">\n{}\n</fold>\n</gc_plan>",
        ids.join("\n")
    ))
}

#[test]
fn plans_fold_to_sidecars_and_recall_restores_them_byte_exact() {
    let mut gc = strategy();
    let files = Files::default();
    let users = session(&mut gc, 40, &fold_all_shown, &files);
    let stats = gc.stats();
    assert!(stats.rounds >= 2, "{stats:?}");
    assert!(stats.commits >= 1, "{stats:?}");
    assert_eq!(stats.rejected + stats.accepted, stats.rounds);
    let view: Vec<Message> = gc.view().cloned().collect();
    check_view(&view, users);
    assert!(gc.tokens() <= BUDGET);
    let folds: Vec<_> = gc
        .committed()
        .iter()
        .filter(|t| t.action == Action::Fold)
        .collect();
    assert!(!folds.is_empty());
    assert_eq!(files.borrow().len(), folds.len(), "one sidecar per fold");
    for target in &folds {
        let n = match &target.id {
            cwl_selfgc::ObjectId::Function { n, .. } => *n as usize,
            other => panic!("{other}"),
        };
        let arguments = format!("{{\"id\":\"{}\"}}", target.id);
        let recalled = gc
            .recall_with(&arguments, NO_STORE, &*files.borrow())
            .unwrap();
        assert_eq!(recalled, body(n - 1), "byte-exact, \\r\\n included");
        assert!(
            view.iter().any(|m| matches!(m, Message::ToolResult(r)
                if r.content == format!("[folded as {}; the recall tool restores it exactly]", target.id))),
            "a pointer is left in the view"
        );
    }
    let users_with_reminder = view
        .iter()
        .filter(|m| matches!(m, Message::User { content } if content.contains("<system-reminder>Folded to sidecars")))
        .count();
    assert!(users_with_reminder >= 1);
    // A damaged or lost sidecar: recall falls back to the transcript.
    let first = folds[0].id.clone();
    let name = cwl_selfgc::fold::sidecar_name(&first);
    files.borrow_mut().insert(name.clone(), "damaged".into());
    let arguments = format!("{{\"episode\":\"{}\"}}", first.short());
    let expected = gc.recall(&arguments, NO_STORE).unwrap();
    assert_eq!(
        gc.recall_with(&arguments, NO_STORE, &*files.borrow())
            .unwrap(),
        expected
    );
    files.borrow_mut().remove(&name);
    assert_eq!(
        gc.recall_with(&arguments, NO_STORE, &*files.borrow())
            .unwrap(),
        expected
    );
    // Bad recalls say what was wrong.
    assert!(
        gc.recall("{}", NO_STORE)
            .unwrap_err()
            .contains("recall needs")
    );
    assert!(
        gc.recall(r#"{"id":"read:999"}"#, NO_STORE)
            .unwrap_err()
            .contains("no object")
    );
    let latest = format!("{{\"id\":\"read:{}\"}}", 40);
    assert!(
        gc.recall(&latest, NO_STORE)
            .unwrap_err()
            .contains("still whole"),
        "the latest read is in view"
    );
}

#[test]
fn the_planner_sees_listing_one_and_the_contract() {
    let mut gc = strategy();
    let files = Files::default();
    let seen: RefCell<Vec<Vec<Message>>> = RefCell::default();
    let planner = |_: u64, messages: &[Message]| {
        seen.borrow_mut().push(messages.to_vec());
        Err("offline".to_string())
    };
    session(&mut gc, 20, &planner, &files);
    let seen = seen.borrow();
    let first = &seen[0];
    let Message::User { content } = &first[1] else {
        panic!("{first:?}")
    };
    assert!(
        content.starts_with(
            "Header metadata:\n{\n  \"label\": \"cli\",\n  \"turn_id\": \"conversation:user:1\"\n}\ntask 0"
        ),
        "{content}"
    );
    assert!(first.iter().any(|m| matches!(m, Message::ToolResult(r)
        if r.content.ends_with("<turn id=\"function:read:1\" />"))));
    let Some(Message::User { content }) = first.last() else {
        panic!()
    };
    assert!(content.contains("<gc_plan>") && content.contains("Exclude the latest visible turn"));
}

#[test]
fn errors_garbage_and_useless_plans_change_nothing_and_the_backstop_keeps_the_budget() {
    let answers = [
        Err("the planner call timed out after 60.0s".to_string()),
        Ok("I think you should fold read:1".to_string()),
        Ok("<gc_plan><fold>read:1</prune></gc_plan>".to_string()),
        Ok("<gc_plan><prune>read:999 user:77</prune></gc_plan>".to_string()),
    ];
    for answer in answers {
        let mut gc = strategy();
        let files = Files::default();
        let planner = |_: u64, _: &[Message]| answer.clone();
        let users = session(&mut gc, 30, &planner, &files);
        let stats = gc.stats();
        assert!(stats.rounds >= 1, "{answer:?}: {stats:?}");
        assert_eq!(stats.rejected, stats.rounds, "{answer:?}");
        assert_eq!(stats.commits, 0);
        assert!(stats.backstops > 0, "the backstop kept the budget");
        assert!(
            gc.committed()
                .iter()
                .all(|t| t.action == Action::Prune && t.reason == BACKSTOP_REASON)
        );
        assert!(files.borrow().is_empty(), "nothing folded");
        let notes = gc.take_notes();
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("self-gc:") && n.ends_with("the view is unchanged")),
            "{notes:?}"
        );
        check_view(&gc.view().cloned().collect::<Vec<_>>(), users);
        assert!(gc.tokens() <= BUDGET);
    }
}

#[test]
fn a_restored_session_shows_the_same_view_and_continues_alike() {
    let files = Files::default();
    let mut one = strategy();
    session(&mut one, 24, &fold_all_shown, &files);
    let mut two = strategy();
    session(&mut two, 24, &fold_all_shown, &Files::default());
    assert!(one.view().eq(two.view()), "same answers, same view");
    let saved = one.save().unwrap();
    assert_eq!(saved.pushes as usize, 1 + 4 + 48);
    let mut restored = SelfGc::restore(&saved.state, Arc::new(Estimate)).unwrap();
    assert!(restored.view().eq(one.view()));
    assert_eq!(restored.tokens(), one.tokens());
    assert_eq!(restored.committed(), one.committed());
    for gc in [&mut one, &mut restored] {
        gc.push(Message::user("task 9: more")).unwrap();
        for i in 24..36 {
            drive(gc, &fold_all_shown, &files);
            step(gc, i);
        }
        drive(gc, &fold_all_shown, &files);
    }
    assert!(restored.view().eq(one.view()));
    assert_eq!(restored.stats(), one.stats());
    let wrong = serde_json::json!({"strategy": "cwm"});
    assert!(SelfGc::restore(&wrong, Arc::new(Estimate)).is_err());
}

#[test]
fn options_are_kept_and_the_trigger_is_the_share_of_the_budget() {
    let options = SelfGcOptions {
        trigger: 0.5,
        planner_timeout_ms: 1_500,
        ..SelfGcOptions::default()
    };
    let mut gc = SelfGc::with_options(
        Config::with_budget(BUDGET),
        Arc::new(Estimate),
        Vec::new(),
        options.clone(),
    );
    gc.push(Message::user("go")).unwrap();
    let mut asked = None;
    for i in 0..30 {
        if let Some(request) = gc.side_request() {
            asked = Some((i, gc.tokens(), request));
            break;
        }
        step(&mut gc, i);
    }
    let (_, tokens, request) = asked.expect("asked once over the trigger");
    assert!(tokens >= BUDGET / 2, "{tokens}");
    assert_eq!(request.timeout, std::time::Duration::from_millis(1_500));
    assert_eq!(request.max_output_tokens, Some(2_048));
    assert!(gc.side_request().is_none(), "one planner call at a time");
    let saved = gc.save().unwrap();
    let restored = SelfGc::restore(&saved.state, Arc::new(Estimate)).unwrap();
    assert_eq!(restored.options(), &options);
}

#[test]
fn instruction_reads_and_the_active_episode_are_never_collected() {
    let mut gc = strategy();
    let files = Files::default();
    gc.push(Message::system("You are a coding agent.")).unwrap();
    gc.push(Message::user("task 0: follow the rules")).unwrap();
    gc.push(Message::Assistant {
        content: vec![Block::ToolCall(ToolCall::new(
            "rules",
            "read",
            r#"{"path":"AGENTS.md"}"#,
        ))],
    })
    .unwrap();
    let rules = "Always run the tests.\n".repeat(60);
    gc.push(Message::tool_result("rules", "read", rules.clone(), false))
        .unwrap();
    let start = r#"{"action":"start","name":"survey","type":"expl"}"#;
    let outcomes = gc
        .push(Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new("d1", "delimiter", start))],
        })
        .unwrap();
    gc.push(Message::tool_result(
        "d1",
        "delimiter",
        outcomes[0].text(),
        false,
    ))
    .unwrap();
    for i in 0..8 {
        drive(&mut gc, &fold_all_shown, &files);
        step(&mut gc, i);
    }
    drive(&mut gc, &fold_all_shown, &files);
    let view: Vec<Message> = gc.view().cloned().collect();
    assert!(
        view.iter()
            .any(|m| matches!(m, Message::ToolResult(r) if r.content == rules)),
        "the instruction file's read stays whole"
    );
    assert!(gc.stats().rounds >= 1, "the planner was asked");
    assert!(
        gc.committed().iter().all(|t| t.id.short() != "read:1"),
        "{:?}",
        gc.committed()
    );
    let survey: Vec<&Message> = view
        .iter()
        .filter(|m| matches!(m, Message::ToolResult(r) if r.call_id.starts_with('c')))
        .collect();
    assert!(
        survey
            .iter()
            .all(|m| matches!(m, Message::ToolResult(r) if !r.content.starts_with("[folded"))),
        "the active episode's results stay"
    );
    assert!(!gc.committed().iter().any(|t| t.action == Action::Fold));
}

/// A tiny deterministic generator (xorshift), so the random sessions
/// below are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// A random planner answer: a plan over random ids (some unknown, some
/// in the latest turn), garbage, malformed XML or an error.
fn random_answer(rng: &mut Rng) -> Result<String, String> {
    match rng.next(8) {
        0 => Err("the planner call timed out after 60.0s".into()),
        1 => Ok("no plan today".into()),
        2 => Ok("<gc_plan><fold>read:1</mask></gc_plan>".into()),
        _ => {
            let mut xml = String::from("<gc_plan>");
            for _ in 0..1 + rng.next(6) {
                let tag = ["fold", "mask", "prune"][rng.next(3) as usize];
                let id = if rng.next(4) == 0 {
                    format!("user:{}", 1 + rng.next(8))
                } else {
                    let tool = ["read", "delimiter", "bash"][rng.next(3) as usize];
                    format!("{tool}:{}", 1 + rng.next(60))
                };
                xml.push_str(&format!("<{tag}>{id}</{tag}>"));
            }
            Ok(xml + "</gc_plan>")
        }
    }
}

/// One random step: sometimes a user turn, then a response with text,
/// reasoning and any number of calls (delimiter ones included), then
/// their results.
fn random_step(strategy: &mut dyn Strategy, rng: &mut Rng, step: u64) -> usize {
    let user = rng.next(7) == 0;
    if user {
        strategy
            .push(Message::user(format!("task {step}")))
            .unwrap();
    }
    let mut content = Vec::new();
    if rng.next(3) == 0 {
        content.push(Block::Reasoning {
            text: "think ".repeat(1 + rng.next(30) as usize),
            signature: Some("sig".into()),
        });
    }
    content.push(Block::Text {
        text: format!("step {step}"),
    });
    let calls = rng.next(3);
    for n in 0..calls {
        let name = match rng.next(6) {
            0 => "delimiter",
            1 => "bash",
            _ => "read",
        };
        let arguments = if name == "delimiter" {
            if rng.next(2) == 0 {
                format!(r#"{{"action":"start","name":"e{step}","type":"expl"}}"#)
            } else {
                r#"{"action":"end","description":"done"}"#.to_string()
            }
        } else {
            format!(r#"{{"path":"m{}.rs"}}"#, rng.next(9))
        };
        content.push(Block::ToolCall(ToolCall::new(
            format!("s{step}c{n}"),
            name,
            arguments,
        )));
    }
    let outcomes = strategy.push(Message::Assistant { content }).unwrap();
    for n in 0..calls {
        let id = format!("s{step}c{n}");
        let (name, text) = match outcomes.iter().find(|o| o.call_id == id) {
            Some(outcome) => ("delimiter", outcome.text()),
            None => (
                "read",
                format!("line of step {step}\n").repeat(1 + rng.next(50) as usize),
            ),
        };
        strategy
            .push(Message::tool_result(id, name, text, false))
            .unwrap();
    }
    usize::from(user)
}

#[test]
fn random_sessions_and_answers_keep_every_guarantee_and_restore_anywhere() {
    let (mut commits, mut folds, mut backstops) = (0, 0, 0);
    for seed in 1..=16u64 {
        let budget = 1_500 + 400 * (seed as usize % 6);
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut gc = SelfGc::new(
            Config::with_budget(budget),
            Arc::new(Estimate),
            vec![delimiter_spec()],
        );
        gc.push(Message::system("system")).unwrap();
        gc.push(Message::user("first task")).unwrap();
        let mut users = 1;
        let mut restored: Option<SelfGc> = None;
        let files = Files::default();
        for step in 0..90 {
            let view: Vec<Message> = gc.view().cloned().collect();
            let latest = view
                .iter()
                .rposition(|m| matches!(m, Message::Assistant { .. }))
                .map(|at| view[at..].to_vec())
                .unwrap_or_default();
            let mut answers = Vec::new();
            while let Some(request) = gc.side_request() {
                let answer = random_answer(&mut rng);
                answers.push(answer.clone());
                gc.side_result(request.id, answer);
            }
            let report = gc.enforce();
            for file in gc.take_sidecars() {
                files.borrow_mut().insert(file.name, file.content);
            }
            let view: Vec<Message> = gc.view().cloned().collect();
            assert!(
                view.ends_with(&latest),
                "seed {seed} step {step}: the latest response is untouched"
            );
            assert_eq!(report.tokens_after, gc.tokens());
            assert!(
                report.budget_met || report.deferred,
                "seed {seed} step {step}: {report:?}"
            );
            check_view(&view, users);
            assert_eq!(
                gc.tokens(),
                gc.counted_tokens(),
                "no calibration in this test"
            );
            if let Some(other) = restored.as_mut() {
                let mut replayed = answers.into_iter();
                while let Some(request) = other.side_request() {
                    other.side_result(request.id, replayed.next().expect("same requests"));
                }
                assert!(replayed.next().is_none(), "seed {seed} step {step}");
                other.enforce();
                other.take_sidecars();
                assert!(
                    other.view().eq(gc.view()),
                    "seed {seed} step {step}: the restored copy agrees"
                );
            }
            if step == 45 {
                let saved = gc.save().unwrap();
                restored = Some(SelfGc::restore(&saved.state, Arc::new(Estimate)).unwrap());
            }
            let mut copy = Rng(rng.0);
            users += random_step(&mut gc, &mut rng, step);
            if let Some(other) = restored.as_mut() {
                random_step(other, &mut copy, step);
            }
        }
        for target in gc.committed().iter().filter(|t| t.action == Action::Fold) {
            let arguments = format!("{{\"id\":\"{}\"}}", target.id);
            let exact = gc.recall(&arguments, NO_STORE).unwrap();
            assert_eq!(
                gc.recall_with(&arguments, NO_STORE, &*files.borrow())
                    .unwrap(),
                exact
            );
        }
        assert!(gc.stats().rounds > 0, "seed {seed}: the planner was asked");
        commits += gc.stats().commits;
        backstops += gc.stats().backstops;
        folds += files.borrow().len();
    }
    assert!(
        commits > 0 && folds > 0 && backstops > 0,
        "plans committed ({commits}), payloads folded ({folds}), backstops ({backstops})"
    );
}

#[test]
fn an_answered_round_is_not_asked_again_until_the_prompt_grows() {
    let mut gc = SelfGc::new(Config::with_budget(1_000), Arc::new(Estimate), Vec::new());
    gc.push(Message::user("go")).unwrap();
    for i in 0..6 {
        step(&mut gc, i);
    }
    assert!(gc.tokens() > 1_000, "over the budget before the pass");
    let request = gc.side_request().expect("a round over the trigger");
    gc.side_result(request.id, Err("offline".into()));
    assert!(
        gc.side_request().is_none(),
        "no second round at the same size, even over the budget"
    );
    gc.enforce();
    assert!(gc.tokens() <= 1_000);
    assert!(gc.side_request().is_none(), "nor after the backstop");
    let mut asked = false;
    for i in 6..12 {
        step(&mut gc, i);
        gc.enforce();
        asked |= gc.side_request().is_some();
        if asked {
            break;
        }
    }
    assert!(asked, "the grown prompt is planned again");
}

/// A large reasoning block (600 tokens by [`Estimate`]).
fn thinking(turn: usize) -> Block {
    Block::Reasoning {
        text: format!("{:<2400}", format!("thinking about task {turn}")),
        signature: None,
    }
}

/// The view's size as a provider of `scope` bills it: under
/// `CurrentTurn` assistant messages before the latest user message count
/// without their reasoning.
fn billed(view: &[Message], scope: ReasoningScope) -> usize {
    let turn = match scope {
        ReasoningScope::AllTurns => 0,
        ReasoningScope::CurrentTurn => view
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }))
            .unwrap_or(0),
    };
    view.iter()
        .enumerate()
        .map(|(at, m)| {
            if at < turn {
                message_tokens(&Estimate, &m.without_reasoning())
            } else {
                message_tokens(&Estimate, m)
            }
        })
        .sum()
}

/// `turns` user turns, each a read (its response reasoning at length)
/// and a closing answer (reasoning too), enforcing the budget before
/// each model call; `check` runs after every push. The reports of the
/// passes.
fn reasoning_session(gc: &mut SelfGc, turns: usize, check: &dyn Fn(&SelfGc)) -> Vec<cwl::Report> {
    let mut reports = Vec::new();
    let push = |gc: &mut SelfGc, message: Message| {
        gc.push(message).unwrap();
        check(gc);
    };
    push(gc, Message::system("You are a coding agent."));
    for turn in 0..turns {
        push(gc, Message::user(format!("task {turn}: read file {turn}")));
        reports.push(gc.enforce());
        push(
            gc,
            Message::Assistant {
                content: vec![
                    thinking(turn),
                    Block::Text {
                        text: format!("reading file {turn}"),
                    },
                    Block::ToolCall(ToolCall::new(
                        format!("c{turn}"),
                        "read",
                        format!("{{\"path\":\"src/f{turn}.rs\"}}"),
                    )),
                ],
            },
        );
        push(
            gc,
            Message::tool_result(
                format!("c{turn}"),
                "read",
                format!("fn file_{turn}() {{}}\n").repeat(10),
                false,
            ),
        );
        reports.push(gc.enforce());
        push(
            gc,
            Message::Assistant {
                content: vec![
                    thinking(turn),
                    Block::Text {
                        text: format!("task {turn} done"),
                    },
                ],
            },
        );
    }
    reports
}

fn reasoning_strategy(budget: usize, scope: ReasoningScope) -> SelfGc {
    SelfGc::new(
        Config::with_budget(budget).reasoning(scope),
        Arc::new(Estimate),
        Vec::new(),
    )
}

#[test]
fn under_current_turn_reasoning_of_earlier_turns_is_not_counted() {
    let scope = ReasoningScope::CurrentTurn;
    let mut gc = reasoning_strategy(1_000_000, scope);
    let check = |gc: &SelfGc| {
        let view: Vec<Message> = gc.view().cloned().collect();
        assert_eq!(
            gc.tokens(),
            billed(&view, scope),
            "tokens() is the billed size"
        );
        assert_eq!(gc.counted_tokens(), gc.tokens());
    };
    reasoning_session(&mut gc, 5, &check);
    gc.push(Message::user("task 5: sum up")).unwrap();
    check(&gc);
    let view: Vec<Message> = gc.view().cloned().collect();
    let full: usize = view.iter().map(|m| message_tokens(&Estimate, m)).sum();
    assert!(
        gc.tokens() + 10 * 600 <= full,
        "ten earlier reasoning blocks are not counted: {} of {full}",
        gc.tokens()
    );
    // Only the counting changes: the view still sends every reasoning block.
    let reasoning = view
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { content } => content.as_slice(),
            _ => &[],
        })
        .filter(|b| matches!(b, Block::Reasoning { .. }))
        .count();
    assert_eq!(reasoning, 10);
    assert!(gc.committed().is_empty());
    // Health: nothing was pruned, so the transcript is counted as the view.
    let metrics = gc.metrics_now();
    assert_eq!(metrics.tokens, gc.tokens());
    assert_eq!(metrics.prune.view_tokens, gc.tokens());
    assert_eq!(metrics.prune.transcript_tokens, gc.tokens());
    assert_eq!(metrics.prune.cumulative, 0.0);
    // A restored session (its view rebuilt) counts alike.
    let saved = gc.save().unwrap();
    let restored = SelfGc::restore(&saved.state, Arc::new(Estimate)).unwrap();
    assert_eq!(restored.tokens(), gc.tokens());
    check(&restored);
    // Under AllTurns the same session counts everything.
    let mut all = reasoning_strategy(1_000_000, ReasoningScope::AllTurns);
    reasoning_session(&mut all, 5, &|_| {});
    all.push(Message::user("task 5: sum up")).unwrap();
    assert_eq!(all.tokens(), full);
}

#[test]
fn the_backstop_prunes_only_when_the_billed_size_is_over_the_budget() {
    // The largest billed prompt of the session at a model call.
    let mut probe = reasoning_strategy(1_000_000, ReasoningScope::CurrentTurn);
    let reports = reasoning_session(&mut probe, 6, &|_| {});
    let peak = reports.iter().map(|r| r.tokens_before).max().unwrap();
    let mut probe_all = reasoning_strategy(1_000_000, ReasoningScope::AllTurns);
    let reports_all = reasoning_session(&mut probe_all, 6, &|_| {});
    let peak_all = reports_all.iter().map(|r| r.tokens_before).max().unwrap();
    assert!(
        peak_all > peak + 5_000,
        "the full size is far over the billed one: {peak_all} vs {peak}"
    );

    // With τ at the billed peak, CurrentTurn never prunes ...
    let mut current = reasoning_strategy(peak, ReasoningScope::CurrentTurn);
    let reports = reasoning_session(&mut current, 6, &|_| {});
    assert!(
        reports
            .iter()
            .all(|r| r.budget_met && r.warnings.is_empty())
    );
    assert_eq!(current.stats().backstops, 0);
    assert!(current.committed().is_empty());
    assert!(
        current.view().eq(probe.view()),
        "the view is the whole session"
    );

    // ... while AllTurns, counting the stale reasoning, must.
    let mut all = reasoning_strategy(peak, ReasoningScope::AllTurns);
    reasoning_session(&mut all, 6, &|_| {});
    assert!(all.stats().backstops > 0);
    assert!(!all.committed().is_empty());
    assert!(
        all.committed()
            .iter()
            .all(|t| t.action == Action::Prune && t.reason == BACKSTOP_REASON)
    );
}

#[test]
fn the_backstop_estimates_an_old_turn_as_billed() {
    // Turns of one answer each, reasoning at length: pruning an old turn
    // frees only its answer's text, the reasoning not being billed.
    let budget = 1_000;
    let floor = (budget as f64 * Config::with_budget(budget).low_water.get()) as usize;
    let mut gc = reasoning_strategy(budget, ReasoningScope::CurrentTurn);
    gc.push(Message::system("You are a coding agent.")).unwrap();
    let answer = |turn: usize| Message::Assistant {
        content: vec![
            thinking(turn),
            Block::Text {
                text: format!("{:<400}", format!("answer {turn}")),
            },
        ],
    };
    for turn in 0..8 {
        gc.push(Message::user(format!("question {turn}"))).unwrap();
        gc.push(answer(turn)).unwrap();
    }
    let before = gc.tokens();
    assert!(before > budget, "{before}");
    let report = gc.enforce();
    assert!(report.budget_met, "{report:?}");
    assert_eq!(gc.stats().backstops, 1, "one pass reaches the floor");
    let pruned = gc.committed().len();
    let freed = message_tokens(&Estimate, &answer(0).without_reasoning());
    assert_eq!(
        before - gc.tokens(),
        pruned * freed,
        "each prune freed its answer's text"
    );
    assert!(gc.tokens() <= floor, "down to the low-water mark");
    assert!(
        gc.tokens() + freed > floor,
        "no more than needed: {} with {pruned} turns pruned",
        gc.tokens()
    );
}

#[test]
fn a_commit_counts_the_view_as_billed() {
    let options = SelfGcOptions {
        trigger: 0.0,
        ..SelfGcOptions::default()
    };
    let mut gc = SelfGc::with_options(
        Config::with_budget(100_000).reasoning(ReasoningScope::CurrentTurn),
        Arc::new(Estimate),
        Vec::new(),
        options,
    );
    gc.push(Message::system("You are a coding agent.")).unwrap();
    gc.push(Message::user("task 0: read the parser")).unwrap();
    step(&mut gc, 0);
    gc.push(Message::Assistant {
        content: vec![
            thinking(0),
            Block::Text {
                text: "read it".to_string(),
            },
        ],
    })
    .unwrap();
    gc.push(Message::user("task 1: now the lexer")).unwrap();
    let request = gc.side_request().expect("a round");
    gc.side_result(
        request.id,
        Ok("<gc_plan>\n<prune kind=\"function\" reason=\"obsolete_trace\">read:1</prune>\n</gc_plan>".to_string()),
    );
    assert!(gc.has_pending_plan(), "{:?}", gc.take_notes());
    let view: Vec<Message> = gc.view().cloned().collect();
    let before = gc.tokens();
    assert!(
        before
            < view
                .iter()
                .map(|m| message_tokens(&Estimate, m))
                .sum::<usize>()
    );
    gc.enforce();
    let commit = gc
        .stats()
        .last_commit
        .expect("committed at the task boundary");
    assert_eq!(commit.before as usize, before, "|C| as billed");
    assert_eq!(commit.after as usize, gc.tokens(), "|C'| as billed");
}
