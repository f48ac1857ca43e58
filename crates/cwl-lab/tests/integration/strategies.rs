//! Engine strategies replayed through the generic policy: the real
//! context-window manager keeps the budget and its guarantees on fixture
//! sessions, side requests are skipped and counted without a model and
//! answered and costed with one, and every policy reports Self-GC's
//! prune rate.

use crate::lab_common as common;

use std::sync::{Arc, Mutex};

use common::{Call, Item};
use cwl::{Estimate, Message, SideRequest, Strategy};
use cwl_lab::metrics::content::Need;
use cwl_lab::metrics::{Call as CallInfo, Recorder, cost};
use cwl_lab::policy::strategy::StrategyPolicy;
use cwl_lab::policy::{Policy, PolicyConfig, PolicyKind, View, pieces_tokens};
use cwl_lab::replay::{ReplayConfig, replay};
use cwl_lab::report::{ReplayReport, json};
use cwl_lab::session::Session;
use cwl_lab::side::testing::{Answers, Asking, PLANNER_PROMPT};
use cwl_lab::side::{NO_MODEL, NoModel, SideError, SideModel};
use cwl_lab::transcript::{Lab, Pairing, Step, Unit};

/// Three tasks of searches and reads with bulky outputs, an edit and a
/// test run each.
fn tasks() -> Vec<Message> {
    let mut items = Vec::new();
    for task in 0..3u8 {
        items.push(Item::User(task));
        for n in 0..5u8 {
            items.push(Item::Step {
                reasoning: 15,
                text: true,
                calls: vec![Call::Grep(n + 10 * task, 50), Call::Read(n + task, 40)],
            });
        }
        items.push(Item::Step {
            reasoning: 0,
            text: true,
            calls: vec![Call::Edit(task), Call::Bash(false, 20)],
        });
        items.push(Item::Step {
            reasoning: 0,
            text: true,
            calls: vec![],
        });
    }
    common::messages(&items)
}

fn report(messages: Vec<Message>, policies: &[PolicyKind], budget: usize) -> ReplayReport {
    let cfg = ReplayConfig {
        policies: policies.to_vec(),
        ..common::config(budget)
    };
    let file = replay(
        Session::from_messages("test", common::tools(), messages),
        "t.jsonl",
        &cfg,
        &mut || {},
    );
    ReplayReport {
        budget,
        budget_typed: budget.to_string(),
        model: Some(cfg.pricing.model.clone()),
        policies: cfg.policies.clone(),
        files: vec![file],
        skipped: Vec::new(),
    }
}

#[test]
fn cwm_is_the_real_manager_within_budget_keeping_every_user_turn() {
    let messages = tasks();
    let users: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content } => Some(content.clone()),
            _ => None,
        })
        .collect();
    let budget = 3_000;
    let report = report(
        messages.clone(),
        &[PolicyKind::None, PolicyKind::CWM],
        budget,
    );
    let file = &report.files[0];
    assert!(file.violations.is_empty(), "{:#?}", file.violations);
    let cwm = file.policies[1].stats.summary();
    assert!(file.policies[1].failed.is_none());
    assert_eq!(cwm.requests, file.requests);
    assert_eq!(
        cwm.budget_unmet,
        Some(0),
        "the manager met the budget every time"
    );
    assert_eq!(cwm.over_budget_share, 0.0);
    assert!(cwm.evictions_total > 0, "the budget forces evictions");
    assert!(cwm.tokens_max as usize <= budget);
    let none = file.policies[0].stats.summary();
    assert!(
        none.tokens_max as usize > 2 * budget,
        "the history outgrows it"
    );
    assert_eq!(none.prune, 0.0, "the full history prunes nothing");
    assert!(
        cwm.prune > 0.2 && cwm.prune < 1.0,
        "cwm prunes part of the history: {}",
        cwm.prune
    );

    // Driven by hand: the lab's view is the strategy's, message for
    // message, and every user turn of the log stays.
    let mut lab = Lab::new(Arc::new(Estimate), &common::tools());
    let config = PolicyConfig {
        budget,
        ..PolicyConfig::default()
    };
    let mut policy = PolicyKind::CWM.build(&config, &lab);
    let mut pairing = Pairing::new();
    let mut seen_users = 0;
    let flush = |pairing: &mut Pairing, lab: &mut Lab, policy: &mut Box<dyn Policy>| {
        if let Some((assistant, results)) = pairing.finish() {
            let step = Step {
                assistant: lab.entry(assistant),
                results: results.into_iter().map(|r| lab.entry(r)).collect(),
                used: Arc::from(Vec::new()),
            };
            policy.push(&Unit::Step(step), &[], lab).unwrap();
        }
    };
    let mut requests = 0;
    for message in messages {
        match &message {
            Message::ToolResult(result) => pairing.result(result.clone()),
            Message::Assistant { .. } => {
                flush(&mut pairing, &mut lab, &mut policy);
                let request = policy.request(&mut lab).unwrap();
                let View::Pieces(pieces) = &request.view else {
                    panic!("pieces expected")
                };
                assert!(pieces_tokens(&lab, pieces) <= budget);
                let sent: Vec<&str> = pieces
                    .iter()
                    .filter_map(|p| match p.message() {
                        Message::User { content } => Some(content.as_str()),
                        _ => None,
                    })
                    .collect();
                assert_eq!(
                    sent,
                    users[..seen_users],
                    "every user turn so far, in order"
                );
                cwl_lab::policy::validate_entries(pieces).unwrap();
                requests += 1;
                pairing.begin(message);
            }
            _ => {
                flush(&mut pairing, &mut lab, &mut policy);
                seen_users += usize::from(matches!(message, Message::User { .. }));
                let entry = lab.entry(message);
                policy.push(&Unit::Message(entry), &[], &mut lab).unwrap();
            }
        }
    }
    assert_eq!(requests, file.requests);
}

#[test]
fn the_json_reports_prune_for_every_policy() {
    let report = report(tasks(), &PolicyKind::all(), 3_000);
    let value: serde_json::Value = serde_json::from_str(&json::to_json(&report)).unwrap();
    for kind in PolicyKind::all() {
        let prune = value["files"][0]["policies"][kind.name()]["prune"]
            .as_f64()
            .unwrap_or_else(|| panic!("{kind}: no prune"));
        assert!((0.0..1.0).contains(&prune), "{kind}: {prune}");
        assert!(value["aggregate"][kind.name()]["prune"].is_number());
        let skipped = value["aggregate"][kind.name()]["side_requests_skipped"]
            .as_u64()
            .unwrap_or_else(|| panic!("{kind}: no side_requests_skipped"));
        if matches!(kind.name(), "cwm" | "self-gc") {
            assert!(skipped > 0, "{kind} asks a model, skipped without one");
        } else {
            assert_eq!(skipped, 0, "{kind}: asks nothing of a model");
        }
    }
    assert_eq!(value["aggregate"]["none"]["prune"], 0.0);
    assert!(value["aggregate"]["cwl"]["prune"].as_f64().unwrap() > 0.2);
}

#[test]
fn cwl_settings_tune_the_engine_under_test_and_leave_the_baselines_alone() {
    let run = |low_water: f64, keep_recent: Option<f64>| {
        let cfg = ReplayConfig {
            policies: vec![
                PolicyKind::Cwl,
                PolicyKind::CWM,
                PolicyKind::Strategy(cwl_selfgc::strategy::NAME),
            ],
            policy: PolicyConfig {
                settings: cwl::EngineSettings {
                    low_water: Some(cwl::Share::new(low_water).unwrap()),
                    keep_recent: Some(cwl::ResidueCap(
                        keep_recent.map(|s| cwl::Share::new(s).unwrap()),
                    )),
                    ..common::config(3_000).policy.settings
                },
                ..common::config(3_000).policy
            },
            ..common::config(3_000)
        };
        let file = replay(
            Session::from_messages("test", common::tools(), tasks()),
            "t.jsonl",
            &cfg,
            &mut || {},
        );
        file.policies
            .iter()
            .map(|p| {
                let s = p.stats.summary();
                (s.tokens_mean, s.evictions_total, s.cache_write_tokens)
            })
            .collect::<Vec<_>>()
    };
    let default = run(0.8, Some(0.1));
    let tuned = run(0.5, None);
    assert_ne!(default[0], tuned[0], "the settings change cwl");
    assert_eq!(default[1..], tuned[1..], "cwm and self-gc run as they are");
}

/// Answers every side request with a fixed text, recording what it saw.
#[derive(Debug)]
struct Scripted {
    answer: Result<String, SideError>,
    seen: Mutex<Vec<SideRequest>>,
}

impl SideModel for Scripted {
    fn answer(&self, request: &SideRequest) -> Result<String, SideError> {
        self.seen.lock().unwrap().push(request.clone());
        self.answer.clone()
    }
}

/// Drives `policy` over `messages` like the replay, recording each request.
fn drive(policy: &mut StrategyPolicy, messages: Vec<Message>, lab: &mut Lab) -> Recorder {
    let mut recorder = Recorder::new(
        100_000,
        Arc::new(cost::lookup("claude-sonnet-4-5").unwrap()),
    );
    let mut pairing = Pairing::new();
    let mut history = 0;
    let need = Need::default();
    let flush = |pairing: &mut Pairing, lab: &mut Lab, policy: &mut StrategyPolicy| {
        if let Some((assistant, results)) = pairing.finish() {
            let step = Step {
                assistant: lab.entry(assistant),
                results: results.into_iter().map(|r| lab.entry(r)).collect(),
                used: Arc::from(Vec::new()),
            };
            let tokens = step.tokens();
            policy.push(&Unit::Step(step), &[], lab).unwrap();
            tokens
        } else {
            0
        }
    };
    for message in messages {
        match &message {
            Message::ToolResult(result) => pairing.result(result.clone()),
            Message::Assistant { .. } => {
                history += flush(&mut pairing, lab, policy);
                let request = policy.request(lab).unwrap();
                let call = CallInfo {
                    time: None,
                    history_tokens: history,
                    history_changed_at: None,
                    output_tokens: 10,
                    at_risk: &[],
                    content: &need,
                    cache_share: 1.0,
                };
                recorder.record(&request, &call, lab.tools_tokens());
                pairing.begin(message);
            }
            _ => {
                history += flush(&mut pairing, lab, policy);
                let entry = lab.entry(message);
                history += entry.tokens();
                policy.push(&Unit::Message(entry), &[], lab).unwrap();
            }
        }
    }
    recorder
}

fn asking(lab: &Lab, every: u64) -> (Box<dyn Strategy>, Answers) {
    let answers: Answers = Arc::new(Mutex::new(Vec::new()));
    let config = PolicyConfig {
        budget: 3_000,
        ..PolicyConfig::default()
    };
    let context = cwl_lab::policy::cwl::context(&config, lab);
    (
        Box::new(Asking::new(context, every, Arc::clone(&answers))),
        answers,
    )
}

#[test]
fn without_a_model_side_requests_are_skipped_counted_and_change_nothing() {
    let messages = tasks();
    let requests = messages
        .iter()
        .filter(|m| matches!(m, Message::Assistant { .. }))
        .count() as u64;
    let mut lab = Lab::new(Arc::new(Estimate), &common::tools());
    let (strategy, answers) = asking(&lab, 1);
    let mut policy = StrategyPolicy::new("asking", strategy, Arc::new(NoModel));
    let stats = drive(&mut policy, messages.clone(), &mut lab).into_stats();
    assert_eq!(
        stats.side_requests_skipped, requests,
        "one asked per request"
    );
    assert_eq!((stats.side_calls, stats.side_requests_failed), (0, 0));
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len() as u64, requests);
    for (n, (id, result)) in answers.iter().enumerate() {
        assert_eq!(*id, n as u64 + 1);
        assert_eq!(
            result.as_ref().unwrap_err(),
            &format!("skipped: {NO_MODEL}")
        );
    }
    assert!(policy.take_warnings().is_empty(), "a skip is no warning");

    // The same replay of plain CWL sends the same requests: skipped
    // requests cost nothing and changed nothing.
    let mut lab = Lab::new(Arc::new(Estimate), &common::tools());
    let config = PolicyConfig {
        budget: 3_000,
        ..PolicyConfig::default()
    };
    let mut plain = cwl_lab::policy::cwl::policy(&config, &lab, Arc::new(NoModel));
    let plain = drive(&mut plain, messages, &mut lab).into_stats();
    assert_eq!(plain.tokens, stats.tokens);
    assert_eq!(plain.input_tokens, stats.input_tokens);
    assert_eq!(plain.side_requests_skipped, 0);
}

#[test]
fn answered_side_requests_reach_the_strategy_and_are_costed() {
    let messages = tasks();
    let mut lab = Lab::new(Arc::new(Estimate), &common::tools());
    let (strategy, answers) = asking(&lab, 4);
    let model = Arc::new(Scripted {
        answer: Ok("<gc_plan></gc_plan>".into()),
        seen: Mutex::new(Vec::new()),
    });
    let mut policy =
        StrategyPolicy::new("asking", strategy, Arc::clone(&model) as Arc<dyn SideModel>);
    let stats = drive(&mut policy, messages, &mut lab).into_stats();
    let seen = model.seen.lock().unwrap();
    assert!(
        seen.len() >= 4,
        "asked every fourth request: {}",
        seen.len()
    );
    assert_eq!(stats.side_calls, seen.len() as u64);
    assert_eq!(
        (stats.side_requests_skipped, stats.side_requests_failed),
        (0, 0)
    );
    assert!(
        seen.iter()
            .all(|r| r.messages.last() == Some(&Message::user(PLANNER_PROMPT)))
    );
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len(), seen.len());
    assert!(
        answers
            .iter()
            .all(|(_, r)| r.as_deref() == Ok("<gc_plan></gc_plan>"))
    );
    let requests_input: u64 = stats.tokens.iter().map(|t| u64::from(*t)).sum();
    assert!(
        stats.input_tokens > requests_input,
        "the planner prompts are billed beside the requests: {} vs {requests_input}",
        stats.input_tokens
    );

    // The planner's fork shares the cached prefix: it reads the previous
    // request whole, so beside plain CWL each side call writes its prompt
    // line and the messages since that request (which the next request,
    // whose breakpoint is its own end, writes again), never the prompt.
    let mut lab = Lab::new(Arc::new(Estimate), &common::tools());
    let config = PolicyConfig {
        budget: 3_000,
        ..PolicyConfig::default()
    };
    let mut plain = cwl_lab::policy::cwl::policy(&config, &lab, Arc::new(NoModel));
    let plain = drive(&mut plain, tasks(), &mut lab).into_stats();
    let extra = stats.cache_write_tokens - plain.cache_write_tokens;
    let mean = requests_input / stats.tokens.len() as u64;
    assert!(
        extra * 10 < stats.side_calls * mean,
        "{extra} more tokens written for {} side calls, requests of {mean}",
        stats.side_calls
    );
    assert!(stats.cache_read_tokens > plain.cache_read_tokens);

    // A model that fails: counted as failed, the error given back, warned.
    let mut lab = Lab::new(Arc::new(Estimate), &common::tools());
    let (strategy, answers) = asking(&lab, 4);
    let failing = Arc::new(Scripted {
        answer: Err(SideError::Failed(
            "the planner call timed out after 5.0s".into(),
        )),
        seen: Mutex::new(Vec::new()),
    });
    let mut policy = StrategyPolicy::new("asking", strategy, failing);
    let stats = drive(&mut policy, tasks(), &mut lab).into_stats();
    assert!(stats.side_requests_failed >= 4);
    assert_eq!((stats.side_calls, stats.side_requests_skipped), (0, 0));
    assert!(
        answers
            .lock()
            .unwrap()
            .iter()
            .all(|(_, r)| r.as_ref().unwrap_err().contains("timed out"))
    );
    let warnings = policy.take_warnings();
    assert_eq!(warnings.len() as u64, stats.side_requests_failed);
    assert!(
        warnings[0].contains("side request `planner` failed"),
        "{warnings:?}"
    );
}
