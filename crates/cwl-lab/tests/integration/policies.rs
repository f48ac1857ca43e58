//! Property tests: every policy's request is a valid request that keeps the
//! system prompt and the latest user turn, and the engine never exceeds the
//! budget when it reports the budget met — on random unannotated
//! transcripts (inferred episodes) and on annotated synthetic sessions.

use crate::lab_common as common;

use cwl::{Estimate, Message, Record};
use cwl_lab::replay::replay;
use cwl_lab::session::Session;
use cwl_lab::synth::{self, SynthConfig};
use proptest::prelude::*;

fn check(
    messages: Vec<Message>,
    tools: Vec<cwl::ToolSpec>,
    budget: usize,
) -> Result<(), TestCaseError> {
    let assistants = messages
        .iter()
        .filter(|m| matches!(m, Message::Assistant { .. }))
        .count() as u64;
    let session = Session::from_messages("test", tools, messages);
    let report = replay(session, "test", &common::config(budget), &mut || {});
    prop_assert!(
        report.violations.is_empty(),
        "violations: {:#?}",
        report.violations
    );
    prop_assert_eq!(report.requests, assistants);
    for outcome in &report.policies {
        prop_assert!(
            outcome.failed.is_none(),
            "{} failed: {:?}",
            outcome.kind,
            outcome.failed
        );
        prop_assert_eq!(
            outcome.stats.tokens.len() as u64,
            assistants,
            "{}",
            outcome.kind
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn unannotated_transcripts(items in common::transcript(), budget in 300usize..6000) {
        check(common::messages(&items), common::tools(), budget)?;
    }

    #[test]
    fn annotated_synthetic_sessions(seed in any::<u64>(), tasks in 1usize..5, budget in 2000usize..15000) {
        let config = SynthConfig { tasks, tokens: (budget * 12) as u64, budget, seed, model: "m".into() };
        let mut out = Vec::new();
        synth::generate(&config, &Estimate, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let messages: Vec<Message> = text
            .lines()
            .filter_map(|line| match serde_json::from_str::<Record>(line).unwrap() {
                Record::Message { message, .. } => Some(message),
                _ => None,
            })
            .collect();
        check(messages, synth::tools(), budget)?;
    }
}

/// Evictions per policy of a replay of `messages` at a budget no policy reaches.
fn evictions(messages: Vec<Message>) -> Vec<(String, u64)> {
    let session = Session::from_messages("test", common::tools(), messages);
    let report = replay(session, "test", &common::config(100_000_000), &mut || {});
    report
        .policies
        .iter()
        .map(|o| (o.kind.to_string(), o.stats.summary().evictions_total))
        .collect()
}

/// `messages` with a copy of the message at `at` inserted right after it.
fn duplicated(messages: &[Message], at: usize) -> Vec<Message> {
    let mut out = messages.to_vec();
    out.insert(at + 1, messages[at].clone());
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A repeated user turn ("continue") is a new message, not the earlier
    /// one moved: no policy reports an eviction it would not report anyway.
    #[test]
    fn duplicating_a_user_message_never_creates_an_eviction(items in common::transcript(), pick in any::<prop::sample::Index>()) {
        let messages = common::messages(&items);
        let users: Vec<usize> = messages.iter().enumerate()
            .filter(|(_, m)| matches!(m, Message::User { .. }))
            .map(|(i, _)| i)
            .collect();
        let at = users[pick.index(users.len())];
        prop_assert_eq!(evictions(duplicated(&messages, at)), evictions(messages));
    }

    /// The engine under a budget it never reaches evicts nothing, however
    /// many identical user and text-only assistant messages the log holds.
    #[test]
    fn the_engine_never_evicts_a_duplicate(items in common::transcript(), picks in prop::collection::vec(any::<prop::sample::Index>(), 1..4)) {
        let mut messages = common::messages(&items);
        for pick in picks {
            let unkeyed: Vec<usize> = messages.iter().enumerate()
                .filter(|(_, m)| match m {
                    Message::User { .. } => true,
                    Message::Assistant { .. } => m.tool_calls().next().is_none(),
                    _ => false,
                })
                .map(|(i, _)| i)
                .collect();
            let at = unkeyed[pick.index(unkeyed.len())];
            messages = duplicated(&messages, at);
        }
        let cwl = evictions(messages).into_iter().find(|(name, _)| name == "cwl");
        prop_assert_eq!(cwl, Some(("cwl".to_string(), 0)));
    }
}

/// `cwm` acts from the orange zone: its requests stay near 75% of the
/// budget where `weighted`, the same scorer without the pressure monitor,
/// fills the budget.
#[test]
fn cwm_evicts_from_the_orange_zone_down_to_it() {
    let budget = 8_000;
    let config = SynthConfig {
        tasks: 6,
        tokens: (budget * 20) as u64,
        budget,
        seed: 7,
        model: "m".into(),
    };
    let mut out = Vec::new();
    synth::generate(&config, &Estimate, &mut out).unwrap();
    let messages: Vec<Message> = String::from_utf8(out)
        .unwrap()
        .lines()
        .filter_map(|line| match serde_json::from_str::<Record>(line).unwrap() {
            Record::Message { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    let session = Session::from_messages("test", synth::tools(), messages);
    let mut replay_config = common::config(budget);
    replay_config.policies = vec![
        cwl_lab::policy::PolicyKind::Weighted,
        cwl_lab::policy::PolicyKind::CWM,
    ];
    let report = replay(session, "test", &replay_config, &mut || {});
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    let max = |i: usize| {
        report.policies[i]
            .stats
            .tokens
            .iter()
            .copied()
            .max()
            .unwrap() as usize
    };
    assert!(
        max(0) > budget * 9 / 10,
        "weighted fills the budget: {}",
        max(0)
    );
    assert!(max(1) <= budget, "cwm holds the budget: {}", max(1));
    let over_orange = |i: usize| {
        report.policies[i]
            .stats
            .tokens
            .iter()
            .filter(|&&t| t as usize > budget * 3 / 4)
            .count()
    };
    let requests = report.policies[1].stats.tokens.len();
    assert!(
        over_orange(1) * 10 <= requests && over_orange(1) * 4 < over_orange(0),
        "cwm stays under the orange line but when a large latest step is protected: {} of {requests} (weighted: {})",
        over_orange(1),
        over_orange(0)
    );
}
