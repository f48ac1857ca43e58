//! Property tests over random annotated sessions: the invariants of the
//! paper's episode graph and eviction policy hold for any transcript.

use crate::common::{Script, counter, recount, validate};
use cwl::{Block, Config, Context, EpisodeKind, EpisodeState, Evictor, Message, PaperOrder, evict};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Op {
    User(usize),
    Expl {
        calls: Vec<Call>,
        close: bool,
    },
    Act {
        deps: Vec<prop::sample::Index>,
        calls: Vec<Call>,
        close: bool,
    },
    Loose(Vec<Call>),
    BadDelimiter,
}

#[derive(Debug, Clone)]
struct Call {
    tool: &'static str,
    output: usize,
    reasoning: usize,
}

fn call() -> impl Strategy<Value = Call> {
    (
        prop::sample::select(vec![
            "grep", "glob", "ls", "read", "bash", "edit", "write", "mystery",
        ]),
        0usize..400,
        prop::option::weighted(0.3, 1usize..200),
    )
        .prop_map(|(tool, output, reasoning)| Call {
            tool,
            output,
            reasoning: reasoning.unwrap_or(0),
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (1usize..60).prop_map(Op::User),
        4 => (prop::collection::vec(call(), 0..4), prop::bool::weighted(0.9))
            .prop_map(|(calls, close)| Op::Expl { calls, close }),
        4 => (
            prop::collection::vec(any::<prop::sample::Index>(), 1..3),
            prop::collection::vec(call(), 0..4),
            prop::bool::weighted(0.9)
        )
            .prop_map(|(deps, calls, close)| Op::Act { deps, calls, close }),
        1 => prop::collection::vec(call(), 1..3).prop_map(Op::Loose),
        1 => Just(Op::BadDelimiter),
    ]
}

fn text(tokens: usize) -> String {
    "w ".repeat(tokens * 2)
}

/// Tool output of about `tokens` tokens: the first lines of one shared
/// file, so later outputs repeat earlier ones (superseded episodes).
fn output(tokens: usize) -> String {
    (0..tokens.div_ceil(6))
        .map(|line| format!("shared line {line:04}\n"))
        .collect()
}

fn emit_calls(script: &mut Script, calls: &[Call]) {
    for call in calls {
        if call.reasoning > 0 {
            script.tool_with_reasoning(&text(call.reasoning), call.tool, &output(call.output));
        } else {
            script.tool(call.tool, &output(call.output));
        }
    }
}

fn session(ops: &[Op]) -> Vec<Message> {
    let mut script = Script::new();
    script.system("You are a test agent.").user("first task");
    let mut closed_expls: Vec<String> = Vec::new();
    for (index, op) in ops.iter().enumerate() {
        match op {
            Op::User(length) => {
                script.user(&text(*length));
            }
            Op::Expl { calls, close } => {
                let name = format!("e{index}");
                script.start_expl(&name);
                emit_calls(&mut script, calls);
                if *close {
                    script.end_expl(&format!("learned {index}"));
                    closed_expls.push(name);
                }
            }
            Op::Act { deps, calls, close } => {
                let deps: Vec<&str> = if closed_expls.is_empty() {
                    vec!["nothing-yet"]
                } else {
                    deps.iter()
                        .map(|dep| dep.get(&closed_expls).as_str())
                        .collect()
                };
                script.start_act(&format!("a{index}"), &deps);
                emit_calls(&mut script, calls);
                if *close {
                    script.end_act();
                }
            }
            Op::Loose(calls) => emit_calls(&mut script, calls),
            Op::BadDelimiter => {
                script.delimiter(json!({"action": "start", "type": "act"}));
            }
        }
    }
    script.build()
}

fn protected(messages: &[Message]) -> Vec<&Message> {
    messages
        .iter()
        .filter(|message| matches!(message, Message::User { .. } | Message::System { .. }))
        .collect()
}

fn context(messages: &[Message], budget: usize) -> Context {
    let mut context = Context::new(
        Config::paper(budget),
        counter(),
        vec![cwl::delimiter_spec()],
    );
    for message in messages {
        context
            .push(message.clone())
            .expect("generated transcripts are valid");
    }
    context
}

/// Invariants that hold after any pass.
fn check_view(
    input: &[Message],
    context: &Context,
    report: &cwl::Report,
) -> Result<(), TestCaseError> {
    let view: Vec<Message> = context.view().cloned().collect();
    validate(&view).map_err(TestCaseError::fail)?;
    prop_assert_eq!(
        protected(input),
        protected(&view),
        "user turns and system prompt intact"
    );
    prop_assert_eq!(
        context.tokens(),
        recount(context),
        "incremental count matches a recount"
    );
    prop_assert_eq!(report.tokens_after, context.tokens());
    if report.budget_met {
        prop_assert!(context.tokens() <= report.budget);
    } else {
        prop_assert!(
            PaperOrder.select(context.graph().candidates()).is_none(),
            "unmet only when no candidate is left"
        );
        let graph = context.graph();
        let over = context.tokens() - report.budget;
        prop_assert_eq!(
            report.deferred,
            graph.waiting_on_response() && graph.in_flight_tokens() >= over,
            "deferred only when what waits on the response covers the overshoot"
        );
        prop_assert!(context.tokens() > report.budget);
    }
    let last_response = |messages: &[Message]| {
        messages
            .iter()
            .rev()
            .find(|message| matches!(message, Message::Assistant { .. }))
            .cloned()
    };
    prop_assert_eq!(
        last_response(input),
        last_response(&view),
        "the latest response is untouched"
    );
    let graph = context.graph();
    let first_start = graph
        .episodes()
        .iter()
        .find_map(|episode| episode.start_call());
    let prologue_end = first_start.map_or(input.len(), |start| {
        input
            .iter()
            .position(|message| message.tool_calls().any(|call| call.id == start))
            .expect("start message")
    });
    prop_assert_eq!(
        &view[..prologue_end],
        &input[..prologue_end],
        "the prologue is intact"
    );
    if let Some(active) = graph.active() {
        let start = graph.episode(active).start_call().expect("in-band");
        let at = input
            .iter()
            .position(|message| message.tool_calls().any(|call| call.id == start))
            .expect("start message");
        let tail = &input[at..];
        prop_assert!(view.len() >= tail.len());
        prop_assert_eq!(
            &view[view.len() - tail.len()..],
            tail,
            "the active episode is untouched"
        );
    }
    for touched in report
        .episodes
        .iter()
        .filter(|episode| episode.kind == EpisodeKind::Expl)
    {
        let id = graph
            .episodes()
            .iter()
            .position(|episode| episode.name() == touched.name)
            .expect("touched episode exists");
        for (later_id, later) in graph.episodes().iter().enumerate() {
            if later.kind() != EpisodeKind::Act {
                continue;
            }
            let explicit = later.dependencies().contains(&(id as u32));
            let implicit = !touched.annotated && later_id > id;
            if explicit || implicit {
                prop_assert!(
                    later.is_removed(),
                    "expl {} touched while dependent {} keeps content",
                    touched.name,
                    later.name()
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn one_pass_keeps_every_invariant(ops in prop::collection::vec(op(), 1..30), budget in 50usize..4000) {
        let messages = session(&ops);
        let mut stateful = context(&messages, budget);
        let report = stateful.enforce();
        check_view(&messages, &stateful, &report)?;

        let expl_touched = report.episodes.iter().any(|episode| episode.kind == EpisodeKind::Expl);
        let latest_response = messages
            .iter()
            .rposition(|message| matches!(message, Message::Assistant { .. }))
            .unwrap_or(0) as u64;
        if expl_touched {
            for episode in stateful.graph().episodes() {
                let in_flight = episode.span().1 >= latest_response;
                if episode.kind() == EpisodeKind::Act && episode.state() == EpisodeState::Closed && !in_flight {
                    prop_assert!(episode.is_removed(), "an expl was touched while closed act {} keeps content", episode.name());
                }
            }
        }

        let oneshot = evict(messages.clone(), vec![cwl::delimiter_spec()], Config::paper(budget), counter())
            .expect("generated transcripts are valid");
        let view: Vec<Message> = stateful.view().cloned().collect();
        prop_assert_eq!(&oneshot.messages, &view, "stateful and one-shot agree");
        prop_assert_eq!(oneshot.report.episodes.clone(), report.episodes.clone());
        prop_assert_eq!(oneshot.report.tokens_after, report.tokens_after);

        let again = evict(messages, vec![cwl::delimiter_spec()], Config::paper(budget), counter())
            .expect("valid");
        prop_assert_eq!(
            serde_json::to_string(&again.messages).expect("json"),
            serde_json::to_string(&oneshot.messages).expect("json"),
            "deterministic"
        );
    }

    #[test]
    fn enforcing_before_every_call_keeps_every_invariant(ops in prop::collection::vec(op(), 1..30), budget in 50usize..3000) {
        let messages = session(&ops);
        let mut context = Context::new(Config::paper(budget), counter(), vec![cwl::delimiter_spec()]);
        for (index, message) in messages.iter().enumerate() {
            context.push(message.clone()).expect("valid");
            let next_is_result = matches!(messages.get(index + 1), Some(Message::ToolResult(_)));
            if !next_is_result {
                let report = context.enforce();
                check_view(&messages[..=index], &context, &report)?;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The engine's defaults beyond the paper (low water, residue cap,
    /// superseded episodes and act outputs first):
    /// the view stays valid and counted, changes only when over τ and only
    /// after the reported first change, and keeps the current task.
    #[test]
    fn low_water_and_residue_cap_keep_the_view_valid_and_stable(
        ops in prop::collection::vec(op(), 1..40),
        budget in 50usize..3000,
        low_water in 0.3f64..1.0,
        share in 0.05f64..0.5,
        superseded in prop::option::of(0.1f64..1.0),
        restated in prop::option::of(0.1f64..=1.0),
        stub_act_outputs in any::<bool>(),
    ) {
        let messages = session(&ops);
        let config = Config::with_budget(budget)
            .low_water(cwl::Share::new(low_water).expect("in range"))
            .residue_share(Some(cwl::Share::new(share).expect("in range")))
            .superseded(superseded.map(|s| cwl::Share::new(s).expect("in range")))
            .restated(restated.map(|s| cwl::Share::new(s).expect("in range")))
            .stub_act_outputs(stub_act_outputs);
        let mut context = Context::new(config, counter(), vec![cwl::delimiter_spec()]);
        let mut previous: Vec<Message> = Vec::new();
        for (index, message) in messages.iter().enumerate() {
            context.push(message.clone()).expect("valid");
            if matches!(messages.get(index + 1), Some(Message::ToolResult(_))) {
                continue;
            }
            let grown: Vec<Message> = context.view().cloned().collect();
            let report = context.enforce();
            for (source, message) in context.view_sources() {
                match source {
                    cwl::Source::Pushed(at) => prop_assert_eq!(&messages[at as usize], message),
                    cwl::Source::Altered(at) => prop_assert!(&messages[at as usize] != message),
                    _ => {}
                }
            }
            let view: Vec<Message> = context.view().cloned().collect();
            validate(&view).map_err(TestCaseError::fail)?;
            prop_assert_eq!(context.tokens(), recount(&context));
            prop_assert_eq!(report.tokens_after, context.tokens());
            if report.tokens_before <= budget {
                prop_assert_eq!(&view, &grown, "within τ nothing changes");
            }
            match report.first_changed {
                None => prop_assert_eq!(&view, &grown),
                Some(first) => {
                    prop_assert!(first <= view.len());
                    prop_assert_eq!(&view[..first], &grown[..first], "prefix before the first change");
                    prop_assert!(first == view.len() || first >= grown.len() || view[first] != grown[first]);
                }
            }
            if report.budget_met {
                prop_assert!(context.tokens() <= budget);
            }
            let input = &messages[..=index];
            let last = |m: &[Message]| m.iter().rev().find(|m| matches!(m, Message::Assistant { .. })).cloned();
            prop_assert_eq!(last(input), last(&view), "latest response untouched");
            let last_user = input.iter().rev().find(|m| matches!(m, Message::User { .. }));
            if let Some(user) = last_user {
                prop_assert!(view.contains(user), "the current task's user turn stays");
            }
            let head = input.len().min(2);
            prop_assert_eq!(&view[..head], &input[..head], "system prompt and first task stay");
            // Pushed views only ever grow at the tail between passes.
            if !previous.is_empty() && report.first_changed.is_none() {
                prop_assert_eq!(&view[..previous.len().min(view.len())], &previous[..previous.len().min(view.len())]);
            }
            previous = view;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With a provider that drops earlier turns' reasoning, the view holds
    /// no reasoning before its latest user message and all of it after,
    /// and stays valid and counted, with every default on.
    #[test]
    fn earlier_turns_reasoning_leaves_the_view(
        ops in prop::collection::vec(op(), 1..40),
        budget in 50usize..3000,
    ) {
        let messages = session(&ops);
        let config = Config::with_budget(budget).reasoning(cwl::ReasoningScope::CurrentTurn);
        let mut context = Context::new(config, counter(), vec![cwl::delimiter_spec()]);
        let reasoning = |message: &Message| match message {
            Message::Assistant { content } => content.iter().filter(|b| matches!(b, Block::Reasoning { .. })).count(),
            _ => 0,
        };
        for (index, message) in messages.iter().enumerate() {
            context.push(message.clone()).expect("valid");
            prop_assert_eq!(context.tokens(), recount(&context));
            if matches!(messages.get(index + 1), Some(Message::ToolResult(_))) {
                continue;
            }
            let report = context.enforce();
            let view: Vec<Message> = context.view().cloned().collect();
            validate(&view).map_err(TestCaseError::fail)?;
            prop_assert_eq!(context.tokens(), recount(&context));
            if report.budget_met {
                prop_assert!(context.tokens() <= budget);
            }
            let turn = view.iter().rposition(|m| matches!(m, Message::User { .. })).unwrap_or(0);
            prop_assert_eq!(view[..turn].iter().map(reasoning).sum::<usize>(), 0, "no earlier turn's reasoning");
            for (source, message) in context.view_sources() {
                match source {
                    cwl::Source::Pushed(at) => prop_assert_eq!(&messages[at as usize], message),
                    cwl::Source::Altered(at) => prop_assert!(&messages[at as usize] != message),
                    _ => {}
                }
            }
            let input = &messages[..=index];
            let input_turn = input.iter().rposition(|m| matches!(m, Message::User { .. })).unwrap_or(0);
            let last = |m: &[Message]| m.iter().rev().find(|m| matches!(m, Message::Assistant { .. })).cloned();
            if input_turn < input.len() - 1 {
                prop_assert_eq!(last(input), last(&view), "the current turn's latest response untouched");
            }
        }
    }
}
