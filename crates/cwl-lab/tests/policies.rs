//! Property tests: every policy's request is a valid request that keeps the
//! system prompt and the latest user turn, and the engine never exceeds the
//! budget when it reports the budget met — on random unannotated
//! transcripts (inferred episodes) and on annotated synthetic sessions.

mod lab_common;
use lab_common as common;

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
