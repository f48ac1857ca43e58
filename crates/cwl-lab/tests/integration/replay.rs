//! Behaviour of the replay: metrics, determinism, reports, the engine
//! policy, and the real traces in `shared/traces` when present.

use crate::lab_common as common;

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use common::{Call, Item};
use cwl::{Block, Estimate, Message, ToolCall};
use cwl_lab::metrics::cost;
use cwl_lab::policy::strategy::StrategyPolicy;
use cwl_lab::policy::{Policy, PolicyConfig, PolicyKind, View, pieces_tokens};
use cwl_lab::replay::{ReplayConfig, replay};
use cwl_lab::report::{ReplayReport, json, table};
use cwl_lab::session::{Session, SessionEvent, SessionInfo};
use cwl_lab::transcript::{Lab, Unit};

fn config(policies: &[PolicyKind], budget: usize) -> ReplayConfig {
    ReplayConfig {
        policies: policies.to_vec(),
        ..common::config(budget)
    }
}

fn report_of(messages: Vec<Message>, cfg: &ReplayConfig) -> ReplayReport {
    let file = replay(
        Session::from_messages("test", common::tools(), messages),
        "t.jsonl",
        cfg,
        &mut || {},
    );
    ReplayReport {
        budget: cfg.policy.budget,
        budget_typed: cfg.policy.budget.to_string(),
        model: Some(cfg.pricing.model.clone()),
        policies: cfg.policies.clone(),
        files: vec![file],
        skipped: Vec::new(),
    }
}

fn summary(report: &ReplayReport, kind: PolicyKind) -> cwl_lab::metrics::Summary {
    report.files[0]
        .policies
        .iter()
        .find(|o| o.kind == kind)
        .unwrap()
        .stats
        .summary()
}

/// Two tasks: explore (grep + reads) then edit, each, with big outputs.
fn two_tasks() -> Vec<Message> {
    let mut items = Vec::new();
    for task in 0..2u8 {
        items.push(Item::User(task));
        for n in 0..6u8 {
            items.push(Item::Step {
                reasoning: 20,
                text: true,
                calls: vec![Call::Grep(n + 10 * task, 60), Call::Read(n, 40)],
            });
        }
        items.push(Item::Step {
            reasoning: 0,
            text: true,
            calls: vec![Call::Edit(task)],
        });
        items.push(Item::Step {
            reasoning: 0,
            text: false,
            calls: vec![Call::Bash(false, 30)],
        });
        items.push(Item::Step {
            reasoning: 0,
            text: true,
            calls: vec![],
        });
    }
    common::messages(&items)
}

#[test]
fn same_input_same_json_bytes() {
    let cfg = config(&PolicyKind::all(), 3000);
    let a = json::to_json(&report_of(two_tasks(), &cfg));
    let b = json::to_json(&report_of(two_tasks(), &cfg));
    assert_eq!(a, b);
    let value: serde_json::Value = serde_json::from_str(&a).unwrap();
    let file = &value["files"][0];
    assert_eq!(file["path"], "t.jsonl");
    assert_eq!(file["format"], "test");
    assert_eq!(file["requests"], 18);
    let names: Vec<&str> = file["policies"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names.len(), PolicyKind::all().len());
    for kind in PolicyKind::all() {
        for key in [
            "tokens_mean",
            "tokens_p95",
            "tokens_max",
            "over_budget_share",
            "evictions",
            "cache_read_tokens",
            "cache_write_tokens",
            "cost_usd",
            "lost_anchor_rate",
            "loss_free_share",
            "prune",
            "side_requests_skipped",
            "side_requests_failed",
        ] {
            assert!(
                file["policies"][kind.name()][key].is_number(),
                "{kind} {key}"
            );
            assert!(
                value["aggregate"][kind.name()][key].is_number(),
                "aggregate {kind} {key}"
            );
        }
    }
}

#[test]
fn none_is_the_full_history_and_budgeted_policies_fit() {
    let messages = two_tasks();
    // The default model, Claude Sonnet 4.5, is not billed for earlier
    // turns' thinking.
    let turn = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
        .unwrap();
    let reasoning: usize = messages[..turn]
        .iter()
        .map(|m| match m {
            Message::Assistant { content } => content
                .iter()
                .filter(|b| matches!(b, cwl::Block::Reasoning { .. }))
                .map(|b| cwl::tokens::block_tokens(&Estimate, b))
                .sum(),
            _ => 0,
        })
        .sum();
    assert!(reasoning > 0, "the first task reasons");
    let total: usize = messages
        .iter()
        .take(messages.len() - 1)
        .map(|m| cwl::tokens::message_tokens(&Estimate, m))
        .sum::<usize>()
        - reasoning;
    let cfg = config(&PolicyKind::all(), 3000);
    let report = report_of(messages, &cfg);
    assert!(
        report.files[0].violations.is_empty(),
        "{:?}",
        report.files[0].violations
    );
    let tools = cwl::tokens::tools_tokens(&Estimate, &common::tools());
    let none = summary(&report, PolicyKind::None);
    assert_eq!(
        none.tokens_max as usize,
        total + tools,
        "the last request holds everything before the last call"
    );
    assert_eq!(none.evictions_total, 0);
    assert_eq!(none.anchors_lost, 0);
    assert!(none.over_budget_share > 0.5);
    for kind in [
        PolicyKind::Truncate,
        PolicyKind::ToolPrune,
        PolicyKind::Weighted,
    ] {
        let s = summary(&report, kind);
        assert!(s.tokens_max <= 3000, "{kind}: {}", s.tokens_max);
        assert_eq!(s.over_budget_share, 0.0, "{kind}");
        assert!(s.evictions_total > 0, "{kind} evicted nothing");
    }
    // The engine cannot evict the active exploration of 6 big steps; it
    // says so for exactly the requests over budget.
    let cwl = &report.files[0]
        .policies
        .iter()
        .find(|o| o.kind == PolicyKind::Cwl)
        .unwrap()
        .stats;
    assert!(cwl.evictions.iter().sum::<u32>() > 0);
    assert_eq!(cwl.budget_unmet, Some(cwl.over_budget));
    assert!(cwl.over_budget < 18);
    assert_eq!(summary(&report, PolicyKind::Truncate).budget_unmet, None);
}

/// A path read early, buried under noise, then named by the last reply.
fn key_store_session() -> Vec<Message> {
    let mut messages = vec![
        Message::system("sys"),
        Message::user("find the config"),
        Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new(
                "a",
                "read",
                r#"{"path":"notes.txt"}"#,
            ))],
        },
        Message::tool_result(
            "a",
            "read",
            format!(
                "the key lives in src/secret/key_store.rs\n{}",
                "filler text here\n".repeat(200)
            ),
            false,
        ),
    ];
    for i in 0..4 {
        let id = format!("b{i}");
        messages.push(Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new(
                &id,
                "grep",
                r#"{"pattern":"x"}"#,
            ))],
        });
        messages.push(Message::tool_result(
            id,
            "grep",
            "noise words only\n".repeat(200),
            false,
        ));
    }
    messages.push(Message::assistant_text(
        "Editing src/secret/key_store.rs now.",
    ));
    messages
}

#[test]
fn lost_anchors_are_counted_against_what_the_policy_dropped() {
    let messages = key_store_session();
    let report = report_of(
        messages,
        &config(&[PolicyKind::None, PolicyKind::Truncate], 1200),
    );
    let none = summary(&report, PolicyKind::None);
    let truncate = summary(&report, PolicyKind::Truncate);
    // src/secret/key_store.rs, key_store.rs and key_store.
    assert_eq!(
        (
            none.anchors_at_risk,
            none.anchors_lost,
            none.loss_free_share
        ),
        (3, 0, 1.0)
    );
    assert_eq!((truncate.anchors_at_risk, truncate.anchors_lost), (3, 3));
    assert_eq!(truncate.lost_anchor_rate, 1.0);
    assert_eq!(truncate.loss_free_share, 0.0);
    assert!(report.files[0].losses.is_empty(), "listed only when asked");
}

#[test]
fn losses_name_what_each_request_lacked() {
    let cfg = ReplayConfig {
        losses: true,
        ..config(&[PolicyKind::None, PolicyKind::Truncate], 1200)
    };
    let report = report_of(key_store_session(), &cfg);
    let losses = &report.files[0].losses;
    assert_eq!(losses.len(), 1, "{losses:?}");
    let loss = &losses[0];
    assert_eq!(
        (loss.request, loss.kind),
        (report.files[0].requests, PolicyKind::Truncate)
    );
    let sorted = |lost: &[cwl_lab::replay::Lost]| {
        let mut names: Vec<(String, u64)> = lost
            .iter()
            .map(|l| (l.name.clone(), l.seen_after))
            .collect();
        names.sort();
        names
    };
    let anchors = sorted(&loss.anchors);
    // Shown in the answer to the first call.
    let after_first = |name: &str| (name.to_string(), 1);
    assert_eq!(
        anchors,
        [
            after_first("key_store"),
            after_first("key_store.rs"),
            after_first("src/secret/key_store.rs")
        ]
    );
    assert_eq!(sorted(&loss.values), anchors, "seen only in a tool output");
    assert_eq!(loss.lines, 0);
}

fn step(id: &str, tool: &str, args: serde_json::Value) -> Message {
    Message::Assistant {
        content: vec![Block::ToolCall(ToolCall::new(id, tool, args.to_string()))],
    }
}

/// Task one reads `src/alpha.rs` and edits it; task two explores other
/// files until the budget forces evictions, then edits a line that only
/// task one's read showed.
fn edit_after_eviction() -> Vec<Message> {
    let source = format!(
        "fn total() -> u32 {{\n    let alpha_total = compute_sum(1);\n{}}}\n",
        "    filler_statement_here();\n".repeat(150)
    );
    let mut messages = vec![
        Message::system("sys"),
        Message::user("task one"),
        step("r0", "read", serde_json::json!({"path": "src/alpha.rs"})),
        Message::tool_result("r0", "read", source, false),
        step(
            "e0",
            "edit",
            serde_json::json!({"path": "src/alpha.rs", "oldText": "fn total() -> u32 {", "newText": "fn total() -> u64 {"}),
        ),
        Message::tool_result("e0", "edit", "ok", false),
        Message::user("task two"),
    ];
    for i in 0..4 {
        let id = format!("g{i}");
        messages.push(step(
            &id,
            "grep",
            serde_json::json!({"pattern": format!("thing_{i}")}),
        ));
        messages.push(Message::tool_result(
            id,
            "grep",
            format!("src/other_{i}.rs: noise line\n").repeat(150),
            false,
        ));
    }
    messages.push(step(
        "e1",
        "edit",
        serde_json::json!({"path": "src/alpha.rs", "oldText": "    let alpha_total = compute_sum(1);", "newText": "    let alpha_total = compute_sum(2);"}),
    ));
    messages.push(Message::tool_result("e1", "edit", "ok", false));
    messages
}

#[test]
fn content_is_lost_when_the_read_an_edit_matches_was_evicted() {
    let report = report_of(
        edit_after_eviction(),
        &config(&[PolicyKind::Cwl, PolicyKind::None, PolicyKind::Mask], 2500),
    );
    let none = summary(&report, PolicyKind::None);
    assert_eq!(none.content_requests_at_risk, 2, "both edits match a read");
    assert_eq!(none.content_loss_free_share, 1.0);
    assert_eq!(none.view_changes, 0.0);
    let cwl = summary(&report, PolicyKind::Cwl);
    assert!(cwl.evictions_total > 0, "the budget forces evictions");
    assert_eq!(cwl.content_requests_at_risk, 2);
    assert_eq!(
        cwl.content_loss_free_share, 0.5,
        "the first edit saw its read, the last one only a residue"
    );
    assert!(cwl.view_changes > 0.0);
    let mask = summary(&report, PolicyKind::Mask);
    assert_eq!(
        mask.content_loss_free_share, 0.5,
        "a masked read's placeholder keeps nothing"
    );
}

#[test]
fn the_engine_runs_on_inferred_episodes_and_counts_like_the_lab() {
    let messages = two_tasks();
    let mut lab = Lab::new(Arc::new(Estimate), &common::tools());
    let cfg = PolicyConfig {
        budget: 2500,
        ..PolicyConfig::default()
    };
    let mut policy = cwl_lab::policy::cwl::policy(&cfg, &lab, Arc::new(cwl_lab::side::NoModel));
    let mut inferrer = cwl_infer::Inferrer::new();
    let mut pairing = cwl_lab::transcript::Pairing::new();
    let mut checked = 0;
    let push_step = |pairing: &mut cwl_lab::transcript::Pairing,
                     lab: &mut Lab,
                     policy: &mut StrategyPolicy,
                     annotations: &[cwl::Annotation]| {
        if let Some((assistant, results)) = pairing.finish() {
            let step = cwl_lab::transcript::Step {
                assistant: lab.entry(assistant),
                results: results.into_iter().map(|r| lab.entry(r)).collect(),
                used: Arc::from(Vec::new()),
            };
            policy.push(&Unit::Step(step), annotations, lab).unwrap();
        }
    };
    let mut pending = Vec::new();
    for message in messages {
        match &message {
            Message::ToolResult(result) => pairing.result(result.clone()),
            Message::Assistant { .. } => {
                push_step(&mut pairing, &mut lab, &mut policy, &pending);
                let request = policy.request(&mut lab).unwrap();
                let View::Pieces(pieces) = &request.view else {
                    panic!("pieces expected")
                };
                assert_eq!(
                    pieces_tokens(&lab, pieces),
                    policy.strategy().tokens(),
                    "lab and engine counts agree"
                );
                if request.budget_met == Some(true) {
                    assert!(policy.strategy().tokens() <= 2500);
                }
                checked += 1;
                pending = inferrer.before(&message);
                pairing.begin(message);
            }
            _ => {
                push_step(&mut pairing, &mut lab, &mut policy, &pending);
                let annotations = inferrer.before(&message);
                let entry = lab.entry(message);
                policy
                    .push(&Unit::Message(entry), &annotations, &mut lab)
                    .unwrap();
            }
        }
    }
    assert_eq!(checked, 18);
    assert!(
        policy.strategy().graph().episodes().len() >= 4,
        "inferred episodes reached the engine"
    );
    assert!(policy.take_warnings().is_empty());
}

#[test]
fn compact_pays_for_its_summaries() {
    let mut cfg = config(&[PolicyKind::Compact, PolicyKind::None], 100_000);
    cfg.policy.window = 4000;
    cfg.policy.compact.keep_recent = 1000;
    let report = report_of(two_tasks(), &cfg);
    let compact = summary(&report, PolicyKind::Compact);
    let none = summary(&report, PolicyKind::None);
    assert!(compact.side_calls >= 1);
    assert!(compact.tokens_max < none.tokens_max);
    assert!(
        compact.output_tokens > none.output_tokens,
        "summary output is costed"
    );
    assert!(
        report.files[0].violations.is_empty(),
        "{:?}",
        report.files[0].violations
    );
}

fn timed(gap_seconds: i64) -> Session {
    let start = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
    let messages = vec![
        Message::user("x ".repeat(3000)),
        Message::assistant_text("one"),
        Message::user("y"),
        Message::assistant_text("two"),
    ];
    let events = messages
        .into_iter()
        .enumerate()
        .map(move |(i, message)| SessionEvent::Message {
            message,
            timestamp: Some(start + chrono::Duration::seconds(gap_seconds * i as i64)),
            usage: None,
            cost_usd: None,
        });
    Session {
        info: SessionInfo {
            format: "test".into(),
            model: None,
            window: None,
            tools: Vec::new(),
            bytes: None,
            client_prompt: false,
        },
        events: Box::new(events.collect::<Vec<_>>().into_iter()),
    }
}

#[test]
fn cache_reads_expire_after_five_minutes_of_log_time() {
    let cfg = config(&[PolicyKind::None], 80_000);
    let warm = replay(timed(60), "warm", &cfg, &mut || {});
    let cold = replay(timed(400), "cold", &cfg, &mut || {});
    assert!(warm.policies[0].stats.cache_read_tokens > 1000);
    assert_eq!(cold.policies[0].stats.cache_read_tokens, 0);
    assert!(cold.policies[0].stats.cost_usd > warm.policies[0].stats.cost_usd);
}

#[test]
fn openai_rules_bill_no_writes() {
    let mut cfg = config(&[PolicyKind::None], 80_000);
    cfg.pricing = Arc::new(cost::lookup("gpt-4o").unwrap());
    let file = replay(timed(60), "openai", &cfg, &mut || {});
    let stats = &file.policies[0].stats;
    assert_eq!(stats.cache_write_tokens, 0);
    assert!(stats.cache_read_tokens >= 1024);
}

#[test]
fn the_table_names_every_policy_and_the_aggregate() {
    let cfg = config(&PolicyKind::all(), 3000);
    let text = table::render(&report_of(two_tasks(), &cfg));
    for kind in PolicyKind::all() {
        assert!(text.contains(kind.name()), "{kind}");
    }
    assert!(text.contains("aggregate over 1 files, 18 requests"));
    assert!(text.contains("inferred episodes"));
}

#[test]
fn real_pi_trace_replays_cleanly() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces/pi/before-compaction.jsonl");
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return;
    }
    let session = Session::open(&path).unwrap();
    assert_eq!(session.info.format, "pi");
    let mut cfg = config(&PolicyKind::all(), 80_000);
    cfg.counter = Arc::new(Estimate);
    cfg.policy.window = 200_000;
    let file = replay(session, "pi", &cfg, &mut || {});
    assert!(
        file.violations.is_empty(),
        "{:#?}",
        &file.violations[..file.violations.len().min(5)]
    );
    assert_eq!(file.log_compactions, 2);
    assert!(!file.annotated);
    assert!(file.requests > 400);
    for outcome in &file.policies {
        assert!(
            outcome.failed.is_none(),
            "{}: {:?}",
            outcome.kind,
            outcome.failed
        );
    }
    let cwl = file
        .policies
        .iter()
        .find(|o| o.kind == PolicyKind::Cwl)
        .unwrap()
        .stats
        .summary();
    // Over budget only where the engine said so: an episode closed by the
    // latest response waits one model call before it can be evicted.
    let over = (cwl.over_budget_share * cwl.requests as f64).round() as u64;
    assert!(cwl.over_budget_share < 0.01, "{}", cwl.over_budget_share);
    assert_eq!(cwl.budget_unmet, Some(over));
}

/// Three user turns whose steps think at length: under a provider that
/// bills only the current turn's reasoning, the full history as billed
/// fits a budget that the history as sent does not.
fn thinking_turns() -> Vec<Message> {
    let mut items = Vec::new();
    for task in 0..3u8 {
        items.push(Item::User(task));
        for n in 0..4u8 {
            items.push(Item::Step {
                reasoning: 150,
                text: false,
                calls: vec![Call::Read(n + 10 * task, 8)],
            });
        }
        items.push(Item::Step {
            reasoning: 0,
            text: true,
            calls: vec![],
        });
    }
    common::messages(&items)
}

fn replay_as(model: &str, kinds: &[PolicyKind], budget: usize) -> ReplayReport {
    let cfg = config(kinds, budget);
    let mut session = Session::from_messages("test", common::tools(), thinking_turns());
    session.info.model = Some(model.to_string());
    let file = replay(session, "t.jsonl", &cfg, &mut || {});
    assert!(file.violations.is_empty(), "{:?}", file.violations);
    ReplayReport {
        budget,
        budget_typed: budget.to_string(),
        model: Some(model.to_string()),
        policies: kinds.to_vec(),
        files: vec![file],
        skipped: Vec::new(),
    }
}

#[test]
fn budgeted_baselines_count_reasoning_as_the_provider_bills_it() {
    // gpt-5-codex bills only the current turn's reasoning; gpt-4.1 has
    // none to drop, so every block counts as sent.
    let billed = replay_as("gpt-5-codex", &[PolicyKind::None], 1_000_000);
    let sent = replay_as("gpt-4.1", &[PolicyKind::None], 1_000_000);
    let billed_max = summary(&billed, PolicyKind::None).tokens_max as usize;
    let sent_max = summary(&sent, PolicyKind::None).tokens_max as usize;
    let budget = billed_max + 20;
    assert!(
        sent_max > budget + 500,
        "the stale reasoning must matter: {sent_max} sent vs {billed_max} billed"
    );
    // Every budgeted baseline but the context-window manager, which evicts
    // from 75% of τ (its own tests cover it).
    let kinds: Vec<PolicyKind> = PolicyKind::all()
        .into_iter()
        .filter(|kind| {
            !matches!(
                kind,
                PolicyKind::Cwl | PolicyKind::None | PolicyKind::Mask | PolicyKind::Compact
            ) && *kind != PolicyKind::CWM
        })
        .collect();
    assert!(kinds.contains(&"self-gc".parse().unwrap()));
    let current = replay_as("gpt-5-codex", &kinds, budget);
    let all = replay_as("gpt-4.1", &kinds, budget);
    for &kind in &kinds {
        let (c, a) = (summary(&current, kind), summary(&all, kind));
        assert_eq!(
            c.evictions_total,
            0,
            "{}: the billed history fits, nothing to evict",
            kind.name()
        );
        assert_eq!(c.over_budget_share, 0.0, "{}", kind.name());
        assert!(
            a.evictions_total > 0,
            "{}: reasoning counted as sent must force evictions",
            kind.name()
        );
    }
}

#[test]
fn the_aggregate_view_lists_ten_skipped_files_and_counts_the_rest() {
    let cfg = config(&[PolicyKind::None], 80_000);
    let mut report = report_of(two_tasks(), &cfg);
    report.skipped = (0..12)
        .map(|n| cwl_lab::report::Skipped {
            path: format!("junk-{n}.json"),
            why: "not a session log".into(),
        })
        .collect();
    let listed = |text: &str| {
        text.lines()
            .filter(|line| line.starts_with("skipped junk-"))
            .count()
    };
    let summary = table::render_with(&report, false);
    assert_eq!(listed(&summary), 10);
    assert!(summary.contains("… and 2 more skipped (--per-file or --json lists every one)"));
    assert!(summary.contains(", 12 skipped,"), "{summary}");
    let full = table::render_with(&report, true);
    assert_eq!(listed(&full), 12);
    assert!(!full.contains("more skipped"));
}
