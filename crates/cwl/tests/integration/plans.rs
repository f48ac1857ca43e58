//! Superseded plan calls (`Config::superseded_plans`): a plan tool's call
//! carries the whole plan, so an earlier one goes, with its result, before
//! anything else in a pass; the latest plan and the latest response stay.

use std::sync::Arc;

use crate::common::{Script, bulk, counter, has_output, recount, validate};
use cwl::{Block, Checkpoint, Config, Context, Level, Message, PaperOrder, ToolCall};
use serde_json::json;

/// The arguments of a todo list of `items` items, the `done` first done.
fn todos(items: usize, done: usize) -> String {
    let todos: Vec<_> = (0..items)
        .map(|item| {
            json!({
                "content": format!("Step {item}: update the parser module and its tests"),
                "activeForm": format!("Updating the parser module, step {item}"),
                "status": if item < done { "completed" } else { "pending" },
            })
        })
        .collect();
    json!({ "todos": todos }).to_string()
}

/// A plan call (`tool`) with its acknowledging result.
fn plan(script: &mut Script, id: &str, tool: &str, arguments: &str) {
    script.messages.push(Message::Assistant {
        content: vec![
            Block::Text {
                text: "Updating the plan.".into(),
            },
            Block::ToolCall(ToolCall::new(id, tool, arguments)),
        ],
    });
    script.messages.push(Message::tool_result(
        id,
        tool,
        "Todos have been modified successfully.",
        false,
    ));
}

/// Whether any assistant message of the view holds the call `id`.
fn has_call(view: &[Message], id: &str) -> bool {
    view.iter()
        .any(|message| message.tool_calls().any(|call| call.id == id))
}

/// Three todo lists, the first two superseded, around two episodes.
fn session() -> Vec<Message> {
    let mut script = Script::new();
    script.system("sys").user("task").start_expl("look");
    plan(&mut script, "plan_1", "TodoWrite", &todos(12, 0));
    script.tool("read", &bulk(300)).end_expl("read the parser");
    script.start_act("fix", &["look"]);
    plan(&mut script, "plan_2", "TodoWrite", &todos(12, 4));
    script.tool("edit", &bulk(100)).end_act();
    script.start_expl("check");
    plan(&mut script, "plan_3", "todowrite", &todos(12, 8));
    script.tool("bash", &bulk(200)).end_expl("tests pass");
    script.say("done");
    script.build()
}

fn with(config: Config, messages: &[Message]) -> Context {
    let mut context = Context::new(config, counter(), Vec::new());
    for message in messages {
        context.push(message.clone()).expect("valid transcript");
    }
    context
}

fn all_tokens(messages: &[Message]) -> usize {
    with(Config::paper(10_000_000), messages).tokens()
}

#[test]
fn superseded_plans_go_first_with_their_results_and_the_latest_stays() {
    let messages = session();
    let budget = all_tokens(&messages) - 150;
    let mut context = with(Config::paper(budget).superseded_plans(true), &messages);
    let report = context.enforce();
    assert!(report.budget_met, "{report:?}");
    let levels: Vec<Level> = report
        .episodes
        .iter()
        .flat_map(|episode| episode.levels.iter().map(|level| level.level))
        .collect();
    assert_eq!(levels, [Level::Plan], "one superseded plan was enough");
    assert_eq!(report.episodes[0].name, "look");
    assert_eq!(report.episodes[0].levels[0].tool_calls, 1);
    assert_eq!(
        report.episodes[0].levels[0].blocks, 1,
        "its result went too"
    );
    let view: Vec<Message> = context.view().cloned().collect();
    validate(&view).unwrap();
    assert!(!has_call(&view, "plan_1"));
    assert!(has_call(&view, "plan_2") && has_call(&view, "plan_3"));
    assert!(
        has_output(&view, &bulk(300)),
        "the rest of its episode stays"
    );
    assert!(
        view.iter().any(|message| matches!(message,
            Message::Assistant { content } if content.iter().any(|block|
                matches!(block, Block::Text { text } if text == "Updating the plan.")))),
        "the text beside the call stays"
    );
    assert_eq!(context.tokens(), recount(&context));
    let one_plan = report.episodes[0].levels[0].tokens;
    assert!(one_plan > 150, "{one_plan}");

    let tighter = all_tokens(&messages) - one_plan - 50;
    let mut context = with(Config::paper(tighter).superseded_plans(true), &messages);
    let report = context.enforce();
    let view: Vec<Message> = context.view().cloned().collect();
    assert!(!has_call(&view, "plan_1") && !has_call(&view, "plan_2"));
    assert!(
        has_call(&view, "plan_3"),
        "the latest plan is never superseded"
    );
    assert_eq!(report.episodes[0].levels[0].level, Level::Plan);
    assert_eq!(report.episodes[1].levels[0].level, Level::Plan);
    validate(&view).unwrap();
    assert_eq!(context.tokens(), recount(&context));
}

#[test]
fn under_the_budget_or_in_the_papers_order_plans_stay_with_their_episode() {
    let messages = session();
    let all = all_tokens(&messages);
    let mut roomy = with(Config::paper(all).superseded_plans(true), &messages);
    assert!(roomy.enforce().episodes.is_empty());
    assert!(has_call(
        &roomy.view().cloned().collect::<Vec<_>>(),
        "plan_1"
    ));

    let mut paper = with(Config::paper(all - 150), &messages);
    let report = paper.enforce();
    assert!(report.budget_met);
    assert!(
        report
            .episodes
            .iter()
            .flat_map(|episode| &episode.levels)
            .all(|level| level.level != Level::Plan),
        "{report:?}"
    );
    assert!(!Config::paper(1).superseded_plans && Config::default().superseded_plans);
}

#[test]
fn the_latest_response_is_sent_as_it_came() {
    let mut script = Script::new();
    script.system("sys").user("task").start_expl("look");
    script.tool("read", &bulk(300));
    script.messages.push(Message::Assistant {
        content: vec![
            Block::ToolCall(ToolCall::new("plan_a", "update_plan", todos(12, 0))),
            Block::ToolCall(ToolCall::new("plan_b", "update_plan", todos(12, 1))),
        ],
    });
    for id in ["plan_a", "plan_b"] {
        script.messages.push(Message::tool_result(
            id,
            "update_plan",
            "Plan updated",
            false,
        ));
    }
    let messages = script.build();
    let budget = all_tokens(&messages) - 100;
    let mut context = with(Config::paper(budget).superseded_plans(true), &messages);
    context.enforce();
    let view: Vec<Message> = context.view().cloned().collect();
    assert!(has_call(&view, "plan_a") && has_call(&view, "plan_b"));
    validate(&view).unwrap();
}

#[test]
fn a_long_session_of_plans_stays_valid_and_counted_and_resumes_the_same() {
    let mut script = Script::new();
    script.system("sys").user("first task");
    for task in 0..40 {
        if task % 5 == 0 && task > 0 {
            script.user(&format!("task {task}"));
        }
        script.start_expl(&format!("look-{task}"));
        plan(
            &mut script,
            &format!("todo_{task}"),
            "TodoWrite",
            &todos(6 + task % 7, task % 6),
        );
        script
            .tool("read", &bulk(150 + 10 * (task % 9)))
            .end_expl(&format!("learned {task}"));
        script.start_act(&format!("fix-{task}"), &[&format!("look-{task}")]);
        plan(
            &mut script,
            &format!("step_{task}"),
            "update_plan",
            &todos(4, task % 4),
        );
        script.tool("edit", &bulk(80)).end_act().say("next");
    }
    let messages = script.build();
    let config = Config::with_budget(3_000);
    let half = messages.len() / 2;
    let mut whole = Context::new(config.clone(), counter(), Vec::new());
    let mut saved = None;
    let mut dropped = 0;
    for (index, message) in messages.iter().enumerate() {
        if index == half {
            saved = Some(serde_json::to_string(&whole.checkpoint()).unwrap());
        }
        whole.push(message.clone()).unwrap();
        let report = whole.enforce();
        assert!(report.budget_met, "message {index}: {report:?}");
        dropped += report
            .episodes
            .iter()
            .flat_map(|episode| &episode.levels)
            .filter(|level| level.level == Level::Plan)
            .count();
        assert_eq!(whole.tokens(), recount(&whole), "message {index}");
        if whole.pending_calls().is_empty() {
            let view: Vec<Message> = whole.view().cloned().collect();
            validate(&view).unwrap_or_else(|e| panic!("message {index}: {e}"));
        }
    }
    let view: Vec<Message> = whole.view().cloned().collect();
    assert!(has_call(&view, "todo_39") && has_call(&view, "step_39"));
    assert!(dropped > 10, "passes dropped {dropped} superseded plans");

    let checkpoint: Checkpoint = serde_json::from_str(&saved.unwrap()).unwrap();
    let mut resumed = Context::restore(checkpoint, counter(), Arc::new(PaperOrder)).unwrap();
    for message in &messages[half..] {
        resumed.push(message.clone()).unwrap();
        resumed.enforce();
    }
    assert_eq!(
        resumed.view().cloned().collect::<Vec<_>>(),
        view,
        "a resumed session drops the same plans"
    );
}
