//! Property tests: whatever lines a log holds, in whatever order, the
//! importers never panic, account for every line, and emit a transcript in
//! which every tool call is answered right after its assistant message.

use crate::import_support;

use std::io::Write;

use cwl_lab::import::{self, Format};
use import_support::{assert_paired, run};
use proptest::prelude::*;

const IDS: &[&str] = &["a", "b", "c", "d"];

fn id() -> impl Strategy<Value = &'static str> {
    prop::sample::select(IDS)
}

fn pi_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#"{"type":"message","message":{"role":"user","content":"hi"}}"#.to_string()),
        prop::collection::vec(id(), 0..3).prop_map(|ids| {
            let calls: Vec<String> = ids
                .iter()
                .map(|id| format!(r#"{{"type":"toolCall","id":"{id}","name":"read","arguments":{{}}}}"#))
                .collect();
            format!(
                r#"{{"type":"message","message":{{"role":"assistant","content":[{}],"usage":{{"input":1,"output":1}}}}}}"#,
                calls.join(",")
            )
        }),
        id().prop_map(|id| format!(
            r#"{{"type":"message","message":{{"role":"toolResult","toolCallId":"{id}","toolName":"read","content":"x"}}}}"#
        )),
        Just(r#"{"type":"compaction","summary":"s","tokensBefore":9}"#.to_string()),
        Just(r#"{"type":"thinking_level_change","thinkingLevel":"low"}"#.to_string()),
        Just("{not json".to_string()),
        Just(r#"{"type":"weird"}"#.to_string()),
    ]
}

fn claude_line() -> impl Strategy<Value = String> {
    let message_id = prop::sample::select(&["m1", "m2", "m3"][..]);
    prop_oneof![
        Just(r#"{"type":"user","sessionId":"s","message":{"role":"user","content":"hi"}}"#.to_string()),
        (message_id, prop::option::of(id())).prop_map(|(message, call)| {
            let block = match call {
                Some(id) => format!(r#"{{"type":"tool_use","id":"{id}","name":"Read","input":{{}}}}"#),
                None => r#"{"type":"text","text":"t"}"#.to_string(),
            };
            format!(
                r#"{{"type":"assistant","sessionId":"s","message":{{"id":"{message}","model":"m","content":[{block}]}}}}"#
            )
        }),
        (id(), any::<bool>()).prop_map(|(id, with_text)| {
            let text = if with_text { r#",{"type":"text","text":"stop"}"# } else { "" };
            format!(
                r#"{{"type":"user","sessionId":"s","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{id}","content":"x"}}{text}]}}}}"#
            )
        }),
        Just(r#"{"type":"system","subtype":"compact_boundary","compactMetadata":{"preTokens":5}}"#.to_string()),
        Just(r#"{"type":"progress"}"#.to_string()),
        Just("garbage".to_string()),
    ]
}

fn codex_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#.to_string()),
        Just(r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"t"}]}}"#.to_string()),
        Just(r#"{"type":"response_item","payload":{"type":"reasoning","summary":[],"encrypted_content":"e"}}"#.to_string()),
        id().prop_map(|id| format!(
            r#"{{"type":"response_item","payload":{{"type":"function_call","name":"shell","arguments":"{{}}","call_id":"{id}"}}}}"#
        )),
        id().prop_map(|id| format!(
            r#"{{"type":"response_item","payload":{{"type":"function_call_output","call_id":"{id}","output":"x"}}}}"#
        )),
        (1u64..1000).prop_map(|n| format!(
            r#"{{"type":"event_msg","payload":{{"type":"token_count","info":{{"last_token_usage":{{"input_tokens":{n},"output_tokens":1}}}}}}}}"#
        )),
        Just(r#"{"type":"compacted","payload":{"message":"m"}}"#.to_string()),
        Just("[1,2".to_string()),
    ]
}

fn check(format: Format, header: &str, lines: &[String]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, "{header}").unwrap();
    for line in lines {
        writeln!(file, "{line}").unwrap();
    }
    drop(file);
    let import = import::open(&path).unwrap();
    prop_assert_eq!(import.meta().format, format);
    let imported = run(import);
    assert_paired(&imported.messages);
    let s = imported.stats;
    prop_assert_eq!(s.records, lines.len() as u64 + 1);
    prop_assert_eq!(s.used + s.ignored + s.rejected, s.records);
    prop_assert_eq!(s.tool_calls, s.tool_results);
    prop_assert!(s.warnings >= s.rejected + s.synthetic_results + s.dropped_results);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pi_logs_always_pair(lines in prop::collection::vec(pi_line(), 0..30)) {
        check(Format::Pi, r#"{"type":"session","id":"p","modelId":"m"}"#, &lines)?;
    }

    #[test]
    fn claude_code_logs_always_pair(lines in prop::collection::vec(claude_line(), 0..30)) {
        check(Format::ClaudeCode, r#"{"type":"file-history-snapshot"}"#, &lines)?;
    }

    #[test]
    fn codex_logs_always_pair(lines in prop::collection::vec(codex_line(), 0..30)) {
        check(Format::Codex, r#"{"type":"session_meta","payload":{"id":"c"}}"#, &lines)?;
    }
}
