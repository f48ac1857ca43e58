//! Self-GC's no-impact rate: a judge sees every sampled request that left
//! something out, with what it left out and the logged reply; verdicts,
//! failed judgments and sampling are counted per policy.

use crate::lab_common as common;

use std::sync::{Arc, Mutex};

use common::{Call, Item};
use cwl::{Message, SideRequest};
use cwl_lab::judge::Judge;
use cwl_lab::metrics::Summary;
use cwl_lab::policy::PolicyKind;
use cwl_lab::replay::{FileReport, ReplayConfig, replay};
use cwl_lab::session::Session;
use cwl_lab::side::{SideError, SideModel};

/// Two tasks whose bulky reads force eviction at a small budget.
fn messages() -> Vec<Message> {
    let mut items = Vec::new();
    for task in 0..2u8 {
        items.push(Item::User(task));
        for n in 0..5u8 {
            items.push(Item::Step {
                reasoning: 10,
                text: true,
                calls: vec![Call::Read(n + 7 * task, 60)],
            });
        }
        items.push(Item::Step {
            reasoning: 0,
            text: true,
            calls: vec![Call::Edit(task)],
        });
    }
    common::messages(&items)
}

/// A deterministic judge: `valid` when every path the future turn names
/// is still in the retained prefix; or garbage when `garbage`.
#[derive(Debug, Default)]
struct Judging {
    garbage: bool,
    seen: Mutex<Vec<SideRequest>>,
}

impl SideModel for Judging {
    fn answer(&self, request: &SideRequest) -> Result<String, SideError> {
        self.seen.lock().unwrap().push(request.clone());
        if self.garbage {
            return Ok("I think it is fine.".into());
        }
        let Message::User { content } = &request.messages[1] else {
            return Err(SideError::Failed("no user message".into()));
        };
        let section = |open: &str, close: &str| {
            content[content.find(open).unwrap()..content.find(close).unwrap()].to_string()
        };
        let retained = section("<retained_prefix>", "</retained_prefix>");
        let future = section("<future_turn>", "</future_turn>");
        let valid = future
            .split(|c: char| c.is_whitespace() || c == '"')
            .filter(|word| word.starts_with("src/"))
            .all(|path| retained.contains(path));
        Ok(format!(
            r#"{{"valid": {valid}, "uncertain": false, "overall_score": 4, "summary": "s", "dimension_scores": {{}}, "failure_culprit": null}}"#
        ))
    }
}

fn run(judge: Arc<Judging>, every: u64) -> FileReport {
    let cfg = ReplayConfig {
        policies: vec![PolicyKind::None, PolicyKind::Cwl, PolicyKind::CWM],
        judge: Some(Judge {
            model: judge,
            every,
        }),
        ..common::config(2_500)
    };
    replay(
        Session::from_messages("test", common::tools(), messages()),
        "t.jsonl",
        &cfg,
        &mut || {},
    )
}

fn summary(file: &FileReport, kind: PolicyKind) -> Summary {
    file.policies
        .iter()
        .find(|o| o.kind == kind)
        .unwrap()
        .stats
        .summary()
}

#[test]
fn pruned_requests_are_judged_and_counted() {
    let judge = Arc::new(Judging::default());
    let file = run(Arc::clone(&judge), 1);
    assert!(file.violations.is_empty(), "{:#?}", file.violations);
    let none = summary(&file, PolicyKind::None);
    assert_eq!(
        (none.judged, none.no_impact_rate, none.no_impact_ci),
        (0, None, None)
    );
    let mut asked = 0;
    for kind in [PolicyKind::Cwl, PolicyKind::CWM] {
        let s = summary(&file, kind);
        let pruned = file.policies.iter().find(|o| o.kind == kind).unwrap();
        assert!(s.judged > 0, "{kind} evicts at this budget");
        assert!(s.judged <= s.requests);
        assert_eq!(s.judge_failed, 0);
        let rate = s.no_impact_rate.unwrap();
        assert!(
            rate > 0.0 && rate < 1.0,
            "{kind}: the verdicts follow what was removed, both ways: {rate} of {}",
            s.judged
        );
        let [low, high] = s.no_impact_ci.unwrap();
        assert!(low <= rate && rate <= high, "{kind}: {low} {rate} {high}");
        assert!(pruned.stats.no_impact <= pruned.stats.judged);
        asked += s.judged;
    }
    let seen = judge.seen.lock().unwrap();
    assert_eq!(
        seen.len() as u64,
        asked,
        "one judge call per judged request"
    );
    assert!(seen.iter().all(|r| r.purpose == "judge"));
    assert!(
        seen.iter().any(|r| matches!(&r.messages[1], Message::User { content } if content.contains("src/mod_0/") && content.contains("<future_turn>"))),
        "the removed reads reach the judge"
    );
    let ids: Vec<u64> = seen.iter().map(|r| r.id).collect();
    assert_eq!(ids, (1..=asked).collect::<Vec<_>>());

    // Every third pruned request only.
    let sampled = run(Arc::new(Judging::default()), 3);
    for kind in [PolicyKind::Cwl, PolicyKind::CWM] {
        let all = summary(&file, kind).judged;
        assert_eq!(summary(&sampled, kind).judged, all.div_ceil(3), "{kind}");
    }
}

#[test]
fn an_answer_that_is_not_listing_3_is_a_failed_judgment() {
    let file = run(
        Arc::new(Judging {
            garbage: true,
            ..Judging::default()
        }),
        1,
    );
    let cwl = summary(&file, PolicyKind::Cwl);
    assert_eq!(cwl.judged, 0);
    assert!(cwl.judge_failed > 0);
    assert_eq!(cwl.no_impact_rate, None, "never counted as a verdict");
}
