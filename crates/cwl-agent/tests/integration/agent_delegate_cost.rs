//! A `delegate` call's sub-agent costs like any model call: its calls'
//! usage and cost are in the run's totals, shown apart as the delegated
//! share (an event, the stats, the session file), and counted once in
//! `cwl sessions show` across a resume.

use crate::support;

use cwl::{Message, Record, Usage};
use cwl_agent::agent::{Agent, AgentOptions, Event};
use cwl_agent::tools::{ToolConfig, Toolbox};
use cwl_provider::testing::{Reply, ScriptedServer};
use cwl_session::Spent;
use cwl_session::strategy::StrategyName;
use serde_json::json;
use support::*;

const BUDGET: usize = 10_000;
const TASK: &str = "Which function logs users in?";

fn cwm_options() -> AgentOptions {
    let mut options = options(BUDGET);
    options.strategy = Some(StrategyName::Cwm);
    options
}

fn used(input: u64, cached: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        cached_input_tokens: cached,
        cache_write_tokens: 0,
        output_tokens: output,
    }
}

/// Usage summed, and its cost at the test model's prices.
fn sum(usages: &[Usage]) -> (Usage, f64) {
    let model = model(200_000);
    let mut total = Usage::default();
    let mut cost = 0.0;
    for u in usages {
        total.input_tokens += u.input_tokens;
        total.cached_input_tokens += u.cached_input_tokens;
        total.output_tokens += u.output_tokens;
        cost += model.cost(u).unwrap();
    }
    (total, cost)
}

/// Whether a known cost is `b`.
fn close_to(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-12)
}

fn spent_is(spent: &Spent, usage: &Usage, cost: f64) {
    assert_eq!(spent.input_tokens, usage.input_tokens, "{spent:?}");
    assert_eq!(spent.cached_input_tokens, usage.cached_input_tokens);
    assert_eq!(spent.output_tokens, usage.output_tokens);
    assert!(
        close_to(spent.cost_usd, cost),
        "{:?} vs {cost}",
        spent.cost_usd
    );
}

#[tokio::test]
async fn a_delegated_childs_calls_are_in_the_totals_once_and_shown_apart() {
    let parent = [used(900, 300, 40), used(1_100, 800, 25)];
    let child = [used(700, 0, 30), used(1_300, 600, 60)];
    let replies = [
        Reply::openai(
            &assistant(vec![call(
                "d1",
                "delegate",
                json!({"task": "Find the function that logs users in."}),
            )]),
            parent[0],
        ),
        Reply::openai(
            &assistant(vec![call("c1", "read", json!({"path": "src/auth.rs"}))]),
            child[0],
        ),
        Reply::openai(
            &assistant(vec![text("`login` in src/auth.rs, line 3.")]),
            child[1],
        ),
        Reply::openai(&assistant(vec![text("`login` does.")]), parent[1]),
    ];
    let t = Scripted::start(replies, cwm_options()).await;
    t.server.answer_side(gist_side);
    let mut t = t;
    t.agent.run_task(TASK).await.unwrap();
    assert_eq!(t.server.requests().len(), 4, "no side calls");

    let (all, all_cost) = sum(&[parent[0], parent[1], child[0], child[1]]);
    let (children, child_cost) = sum(&child);
    let stats = t.agent.stats().clone();
    assert_eq!(stats.requests, 2, "the main loop's calls");
    assert_eq!(stats.input_tokens, all.input_tokens);
    assert_eq!(stats.cached_input_tokens, all.cached_input_tokens);
    assert_eq!(stats.output_tokens, all.output_tokens);
    assert!(close_to(stats.cost_usd, all_cost), "{:?}", stats.cost_usd);
    let delegated = &stats.delegated;
    assert_eq!((delegated.runs, delegated.requests), (1, 2));
    assert_eq!(delegated.input_tokens, children.input_tokens);
    assert_eq!(delegated.cached_input_tokens, children.cached_input_tokens);
    assert_eq!(delegated.output_tokens, children.output_tokens);
    assert!(close_to(delegated.cost_usd, child_cost));
    let summary = serde_json::to_value(&stats).unwrap();
    assert_eq!(summary["delegated"]["requests"], 2, "{summary}");

    // Events: the parent's responses, and one for the child's calls; the
    // two add up to the totals.
    let events = events(&t.shared);
    let responses: Vec<Usage> = events
        .iter()
        .filter_map(|e| match e {
            Event::Response { usage, .. } => Some(*usage),
            _ => None,
        })
        .collect();
    assert_eq!(responses, parent);
    let told: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::Delegated { .. }))
        .collect();
    assert_eq!(told.len(), 1);
    let Event::Delegated {
        id,
        requests,
        usage,
        cost_usd,
    } = told[0]
    else {
        unreachable!()
    };
    assert_eq!((id.as_str(), *requests), ("d1", 2));
    assert_eq!(*usage, children);
    assert!(close_to(*cost_usd, child_cost));
    let line = serde_json::to_value(told[0]).unwrap();
    assert_eq!(line["event"], "delegated");
    assert_eq!(line["usage"]["output_tokens"], children.output_tokens);

    // The file records the child's calls once, on the delegate result.
    let closed = t.close();
    let loaded = cwl_session::read(&closed.path).unwrap();
    let recorded: Vec<(Option<Usage>, Option<f64>)> = loaded
        .records
        .iter()
        .filter_map(|(_, r)| match r {
            Record::Message {
                message: Message::ToolResult(result),
                usage,
                cost_usd,
                ..
            } if result.tool_name == "delegate" => Some((*usage, *cost_usd)),
            _ => None,
        })
        .collect();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].0, Some(children));
    let report = cwl_agent::show::report(&closed.path).unwrap();
    assert_eq!(report.usage.requests, 2);
    assert_eq!(report.usage.delegated_runs, 1);
    spent_is(&report.usage.total, &all, all_cost);
    spent_is(&report.usage.delegated, &children, child_cost);
    let shown = cwl_agent::show::render(&report);
    assert!(
        shown.contains("usage 2 requests · 4k in (1.7k cached) / 155 out · $0.0043; of which 1 sub-agent runs: 2k in (600 cached) / 90 out · $0.0022"),
        "{shown}"
    );
    let listed = cwl_session::list(closed.sessions.path()).unwrap();
    assert!(
        close_to(listed[0].cost_usd, all_cost),
        "the list's cost too"
    );

    // A resume neither runs the child again nor counts it twice.
    let later = used(2_000, 1_500, 10);
    let next =
        ScriptedServer::start([Reply::openai(&assistant(vec![text("Still login.")]), later)])
            .await
            .unwrap();
    let (_shared, observer) = collector();
    let toolbox = Toolbox::new(closed.dir.path(), ToolConfig::default()).unwrap();
    let mut resumed = Agent::resume(
        openai(&next),
        toolbox,
        cwm_options(),
        &closed.path,
        observer,
    )
    .unwrap();
    resumed.run_task("And which one saves?").await.unwrap();
    let stats = resumed.stats().clone();
    assert_eq!(stats.requests, 1);
    assert_eq!(stats.input_tokens, later.input_tokens, "this process only");
    assert_eq!(stats.delegated.runs, 0);
    drop(resumed);
    let report = cwl_agent::show::report(&closed.path).unwrap();
    let (whole, whole_cost) = sum(&[parent[0], parent[1], child[0], child[1], later]);
    assert_eq!(report.usage.requests, 3);
    assert_eq!(report.usage.delegated_runs, 1);
    spent_is(&report.usage.total, &whole, whole_cost);
    spent_is(&report.usage.delegated, &children, child_cost);
}

#[tokio::test]
async fn a_child_that_fails_midway_still_counts_what_it_spent() {
    let parent = [used(800, 0, 20), used(900, 0, 15)];
    let child = used(600, 100, 40);
    let replies = [
        Reply::openai(
            &assistant(vec![call(
                "d1",
                "delegate",
                json!({"task": "Find the loaders."}),
            )]),
            parent[0],
        ),
        Reply::openai(
            &assistant(vec![call("c1", "read", json!({"path": "src/store.rs"}))]),
            child,
        ),
        Reply::status(400, r#"{"error":{"message":"context too long"}}"#),
        Reply::openai(&assistant(vec![text("The sub-agent failed.")]), parent[1]),
    ];
    let mut t = Scripted::start(replies, cwm_options()).await;
    t.agent.run_task(TASK).await.unwrap();
    let stats = t.agent.stats().clone();
    let (all, all_cost) = sum(&[parent[0], parent[1], child]);
    assert_eq!((stats.delegated.runs, stats.delegated.requests), (1, 1));
    assert_eq!(stats.delegated.input_tokens, child.input_tokens);
    assert_eq!(stats.input_tokens, all.input_tokens);
    assert!(close_to(stats.cost_usd, all_cost));
    let failed = events(&t.shared).into_iter().any(|e| {
        matches!(e, Event::ToolResult { name, is_error: true, content, .. }
            if name == "delegate" && content.starts_with("the sub-agent's model call failed"))
    });
    assert!(failed, "the child failed");
    let closed = t.close();
    let report = cwl_agent::show::report(&closed.path).unwrap();
    spent_is(&report.usage.total, &all, all_cost);
    spent_is(&report.usage.delegated, &child, sum(&[child]).1);
}

#[tokio::test]
async fn a_delegate_call_without_a_task_runs_no_child_and_spends_nothing() {
    let parent = [used(800, 0, 20), used(900, 0, 15)];
    let replies = [
        Reply::openai(
            &assistant(vec![call("d1", "delegate", json!({"task": " "}))]),
            parent[0],
        ),
        Reply::openai(&assistant(vec![text("Never mind.")]), parent[1]),
    ];
    let mut t = Scripted::start(replies, cwm_options()).await;
    t.agent.run_task(TASK).await.unwrap();
    let stats = t.agent.stats().clone();
    assert_eq!(stats.delegated, Default::default());
    assert_eq!(stats.input_tokens, 1_700);
    assert!(
        !events(&t.shared)
            .iter()
            .any(|e| matches!(e, Event::Delegated { .. }))
    );
    let closed = t.close();
    let report = cwl_agent::show::report(&closed.path).unwrap();
    assert_eq!(report.usage.delegated_runs, 0);
    assert!(!cwl_agent::show::render(&report).contains("sub-agent"));
}

#[tokio::test]
async fn an_interrupted_child_still_counts_the_calls_it_made() {
    let parent = used(800, 0, 20);
    let child = used(600, 100, 40);
    let replies = [
        Reply::openai(
            &assistant(vec![call(
                "d1",
                "delegate",
                json!({"task": "Find the loaders."}),
            )]),
            parent,
        ),
        Reply::openai(
            &assistant(vec![call("c1", "read", json!({"path": "src/store.rs"}))]),
            child,
        ),
        Reply::Silence,
    ];
    let mut t = Scripted::start(replies, cwm_options()).await;
    let interrupt = t.agent.interrupt();
    let server = &t.server;
    let (ran, ()) = tokio::join!(t.agent.run_task(TASK), async {
        while server.requests().len() < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        interrupt.trigger("SIGINT");
    });
    assert!(ran.is_err(), "interrupted");
    let stats = t.agent.stats().clone();
    assert_eq!((stats.delegated.runs, stats.delegated.requests), (1, 1));
    let (all, _) = sum(&[parent, child]);
    assert_eq!(stats.input_tokens, all.input_tokens);
    assert_eq!(stats.delegated.output_tokens, child.output_tokens);
    let closed = t.close();
    let report = cwl_agent::show::report(&closed.path).unwrap();
    let (children, child_cost) = sum(&[child]);
    spent_is(&report.usage.delegated, &children, child_cost);
    assert_eq!(report.usage.delegated_runs, 1);
}
