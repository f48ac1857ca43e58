//! Importer tests on small hand-written fixtures (`tests/fixtures/import/`).

mod import_support;

use std::io::Write;
use std::path::Path;

use cwl::{Block, Message, ToolCall, ToolResult, Usage};
use cwl_lab::import::{self, Event, Format, ImportError, MISSING_RESULT};
use import_support::{assert_paired, calls, fixture, run, warnings_with};

fn call(id: &str, name: &str, arguments: &str) -> Block {
    Block::ToolCall(ToolCall::new(id, name, arguments))
}

fn result(id: &str, name: &str, content: &str, is_error: bool) -> Message {
    Message::ToolResult(ToolResult {
        call_id: id.into(),
        tool_name: name.into(),
        content: content.into(),
        is_error,
    })
}

fn missing(id: &str, name: &str) -> Message {
    result(id, name, MISSING_RESULT, true)
}

fn usage(input: u64, cached: u64, written: u64, output: u64) -> Option<Usage> {
    Some(Usage {
        input_tokens: input,
        cached_input_tokens: cached,
        cache_write_tokens: written,
        output_tokens: output,
    })
}

fn temp_file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
    (dir, path)
}

fn lines_of(warnings: &[cwl_lab::import::ImportWarning]) -> Vec<Option<u64>> {
    warnings.iter().map(|w| w.line).collect()
}

// ---------------------------------------------------------------- detection

#[test]
fn every_fixture_is_detected_by_content() {
    for (name, format) in [
        ("session.cwl.jsonl", Format::Cwl),
        ("chat.openai.json", Format::OpenAi),
        ("oneline.openai.json", Format::OpenAi),
        ("array.openai.json", Format::OpenAi),
        ("session.pi.jsonl", Format::Pi),
        ("session.claude.jsonl", Format::ClaudeCode),
        ("rollout.codex.jsonl", Format::Codex),
        ("attachments.claude.jsonl", Format::ClaudeCode),
        ("exec.codex.jsonl", Format::Codex),
        ("bare.codex.jsonl", Format::Codex),
        ("agent.claude.jsonl", Format::ClaudeCode),
        ("task.traj.json", Format::MiniSweAgent),
    ] {
        assert_eq!(import::detect(&fixture(name)).unwrap(), format, "{name}");
        assert_eq!(
            import::open(&fixture(name)).unwrap().meta().format,
            format,
            "{name}"
        );
    }
}

#[test]
fn detection_ignores_the_file_name() {
    let pi = std::fs::read(fixture("session.pi.jsonl")).unwrap();
    let (_dir, path) = temp_file("trajectory.traj.json", &pi);
    assert_eq!(import::detect(&path).unwrap(), Format::Pi);
    let mswe = std::fs::read(fixture("task.traj.json")).unwrap();
    let (_dir, path) = temp_file("rollout-2025.jsonl", &mswe);
    assert_eq!(import::detect(&path).unwrap(), Format::MiniSweAgent);
}

#[test]
fn detection_passes_over_a_corrupt_first_line() {
    let mut bytes = b"{\"type\":\"sess\n".to_vec();
    bytes.extend(std::fs::read(fixture("session.pi.jsonl")).unwrap());
    let (_dir, path) = temp_file("x.jsonl", &bytes);
    let imported = run(import::open(&path).unwrap());
    assert_eq!(imported.warnings[0].line, Some(1));
    assert!(imported.warnings[0].what.contains("not a pi session entry"));
    assert_eq!(imported.stats.assistant_messages, 3);
}

#[test]
fn an_import_can_move_to_another_thread() {
    fn send<T: Send>(_: &T) {}
    let import = import::open(&fixture("session.pi.jsonl")).unwrap();
    send(&import);
    let handle = std::thread::spawn(move || import.count());
    assert_eq!(handle.join().unwrap(), 14);
}

#[test]
fn a_byte_order_mark_is_skipped() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(fixture("session.pi.jsonl")).unwrap());
    let (_dir, path) = temp_file("bom.jsonl", &bytes);
    assert_eq!(import::detect(&path).unwrap(), Format::Pi);
    let imported = run(import::open(&path).unwrap());
    assert_eq!(imported.stats.rejected, 3);
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(fixture("task.traj.json")).unwrap());
    let (_dir, path) = temp_file("bom.json", &bytes);
    assert_eq!(
        run(import::open(&path).unwrap()).stats.assistant_messages,
        4
    );
}

#[test]
fn format_names_are_stable() {
    let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(
        names,
        [
            "cwl",
            "openai",
            "pi",
            "claude-code",
            "codex",
            "mini-swe-agent"
        ]
    );
    for format in Format::ALL {
        assert_eq!(format.to_string().parse::<Format>().unwrap(), format);
        assert_eq!(serde_json::to_value(format).unwrap(), format.name());
    }
    let err = "claude".parse::<Format>().unwrap_err();
    assert!(err.to_string().contains("unknown format `claude`"));
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let path = Path::new("/nonexistent/dir/session.jsonl");
    let err = import::open(path).unwrap_err();
    assert!(matches!(err, ImportError::Io { .. }));
    assert!(
        err.to_string().contains("/nonexistent/dir/session.jsonl"),
        "{err}"
    );
    assert!(matches!(
        import::open_as(path, Format::Pi),
        Err(ImportError::Io { .. })
    ));
    assert!(matches!(
        import::open_as(path, Format::OpenAi),
        Err(ImportError::Io { .. })
    ));
}

#[test]
fn an_empty_file_is_an_error() {
    for bytes in [&b""[..], b"\n  \n\t\n"] {
        let (_dir, path) = temp_file("empty.jsonl", bytes);
        let err = import::open(&path).unwrap_err();
        assert!(matches!(err, ImportError::Empty { .. }), "{err}");
        assert!(err.to_string().contains("empty.jsonl is empty"), "{err}");
    }
    let (_dir, path) = temp_file("empty.json", b"");
    assert!(matches!(
        import::open_as(&path, Format::Codex),
        Err(ImportError::Empty { .. })
    ));
    assert!(matches!(
        import::open_as(&path, Format::MiniSweAgent),
        Err(ImportError::Empty { .. })
    ));
}

#[test]
fn a_binary_file_is_an_error() {
    let (_dir, path) = temp_file("blob.jsonl", b"\x00\xff\xfe garbage");
    let err = import::open(&path).unwrap_err();
    assert!(
        matches!(err, ImportError::NotUtf8 { offset: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("not UTF-8"), "{err}");
    let (_dir, path) = temp_file("blob.json", b"{\"messages\": [\"\xff\"]}");
    let err = import::open_as(&path, Format::OpenAi).unwrap_err();
    assert!(
        matches!(err, ImportError::NotUtf8 { offset: 15, .. }),
        "{err}"
    );
}

#[test]
fn unknown_content_is_an_error_saying_why() {
    for (bytes, why) in [
        (
            &b"hello world\nthis is prose\n"[..],
            "no line among the first 64 identifies a format",
        ),
        (b"{\"a\": 1}\n{\"b\": 2}\n", "no line among the first 64"),
        (b"{\n  \"a\": 1\n}\n", "without a `messages` array"),
        (b"{\n  \"messages\": [1, \n", "not valid JSON"),
        (b"[1, 2, 3]", "not a list of chat messages"),
    ] {
        let (_dir, path) = temp_file("mystery.json", bytes);
        let err = import::open(&path).unwrap_err();
        assert!(matches!(err, ImportError::UnknownFormat { .. }), "{err}");
        assert!(err.to_string().contains(why), "{err}");
        assert!(err.to_string().contains("mystery.json"), "{err}");
    }
}

#[test]
fn a_document_format_forced_on_jsonl_is_an_error() {
    let err = import::open_as(&fixture("session.pi.jsonl"), Format::OpenAi).unwrap_err();
    assert!(
        matches!(
            err,
            ImportError::Invalid {
                format: Format::OpenAi,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("not a valid openai log: not JSON"),
        "{err}"
    );
    let err = import::open_as(&fixture("chat.openai.json"), Format::MiniSweAgent);
    assert!(
        err.is_ok(),
        "a chat document has `messages`, so it reads as a trajectory"
    );
}

#[test]
fn a_jsonl_format_forced_on_the_wrong_log_warns_per_line_and_never_panics() {
    for format in [Format::Cwl, Format::Pi, Format::ClaudeCode, Format::Codex] {
        for name in [
            "task.traj.json",
            "session.claude.jsonl",
            "rollout.codex.jsonl",
            "session.pi.jsonl",
        ] {
            let imported = run(import::open_as(&fixture(name), format).unwrap());
            assert_paired(&imported.messages);
            assert_eq!(
                imported.stats.used + imported.stats.ignored + imported.stats.rejected,
                imported.stats.records
            );
        }
    }
}

#[test]
fn a_line_that_is_not_utf8_is_a_warning_and_the_rest_is_imported() {
    let mut bytes = std::fs::read(fixture("session.pi.jsonl")).unwrap();
    bytes.extend(b"{\"type\":\"message\",\"x\":\"\xff\"}\n");
    bytes.extend(b"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"after\"}}\n");
    let (_dir, path) = temp_file("s.jsonl", &bytes);
    let imported = run(import::open(&path).unwrap());
    let bad = warnings_with(&imported.warnings, "not UTF-8");
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].line, Some(16));
    assert!(bad[0].what.contains("column 24"), "{}", bad[0].what);
    assert_eq!(imported.messages.last(), Some(&Message::user("after")));
}

#[test]
fn a_truncated_last_line_is_a_warning() {
    let mut bytes = std::fs::read(fixture("session.claude.jsonl")).unwrap();
    bytes.extend(
        b"{\"type\":\"assistant\",\"message\":{\"id\":\"msg_Z\",\"content\":[{\"type\":\"te",
    );
    let (_dir, path) = temp_file("s.jsonl", &bytes);
    let imported = run(import::open(&path).unwrap());
    let last = imported.warnings.last().unwrap();
    assert_eq!(last.line, Some(19));
    assert!(last.what.contains("EOF"), "{}", last.what);
}

#[test]
fn events_serialize_with_a_kind_tag() {
    let events = run(import::open(&fixture("session.pi.jsonl")).unwrap()).events;
    let json = serde_json::to_value(&events[0]).unwrap();
    assert_eq!(json["kind"], "message");
    assert_eq!(json["message"]["role"], "user");
    let compaction = events
        .iter()
        .find(|e| matches!(e, Event::Compaction { .. }))
        .unwrap();
    assert_eq!(
        serde_json::to_value(compaction).unwrap()["kind"],
        "compaction"
    );
}

// ---------------------------------------------------------------------- cwl

#[test]
fn cwl_session_imports_with_meta_pairing_and_warnings() {
    let import = import::open(&fixture("session.cwl.jsonl")).unwrap();
    let meta = import.meta().clone();
    assert_eq!(meta.session_id.as_deref(), Some("s-1"));
    assert_eq!(meta.model.as_deref(), Some("test-model"));
    assert_eq!(meta.provider.as_deref(), Some("scripted"));
    assert_eq!(meta.cwd.as_deref(), Some("/tmp/w"));
    assert_eq!(meta.budget, Some(80_000));
    assert_eq!(meta.tools.len(), 1);
    assert_eq!(meta.tools[0].name, "read");
    assert_eq!(
        meta.started.unwrap().to_rfc3339(),
        "2025-01-02T03:04:05+00:00"
    );

    let imported = run(import);
    assert_eq!(
        imported.messages,
        vec![
            Message::system("You are a test."),
            Message::user("Read a.txt"),
            Message::Assistant {
                content: vec![
                    Block::Text {
                        text: "Reading.".into()
                    },
                    call("c1", "read", r#"{"path":"a.txt"}"#),
                ]
            },
            result("c1", "read", "hello", false),
            Message::Assistant {
                content: vec![call("c2", "read", r#"{"path":"b.txt"}"#)]
            },
            missing("c2", "read"),
        ]
    );
    assert_eq!(
        calls(&imported.events),
        vec![
            (usage(120, 100, 0, 12), Some("test-model".into())),
            (None, Some("test-model".into()))
        ]
    );
    let cost = imported.events.iter().find_map(|e| match e {
        Event::Message {
            cost_usd: Some(c), ..
        } => Some(*c),
        _ => None,
    });
    assert_eq!(cost, Some(0.001));
    assert_eq!(
        lines_of(&imported.warnings),
        vec![Some(6), Some(8), Some(9)]
    );
    assert!(
        imported.warnings[0]
            .what
            .contains("not a cwl session record")
    );
    assert!(imported.warnings[1].what.contains("frobnicate"));
    assert!(
        imported.warnings[2]
            .what
            .contains("tool call `c2` (read) has no recorded result")
    );
    let s = imported.stats;
    assert_eq!((s.records, s.used, s.ignored, s.rejected), (9, 6, 1, 2));
    assert_eq!(
        (s.tool_calls, s.tool_results, s.synthetic_results),
        (2, 2, 1)
    );
}

// ------------------------------------------------------------------- openai

#[test]
fn openai_chat_imports_reasoning_calls_and_tools() {
    let import = import::open(&fixture("chat.openai.json")).unwrap();
    assert_eq!(import.meta().model.as_deref(), Some("gpt-test"));
    assert_eq!(import.meta().tools.len(), 1);
    let imported = run(import);
    assert_eq!(
        imported.messages,
        vec![
            Message::system("Be brief."),
            Message::user("Look at\n[image]"),
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: "Two files.".into(),
                        signature: None
                    },
                    call("a", "read", r#"{"path": "a"}"#),
                    call("b", "read", r#"{"path": "b"}"#),
                ]
            },
            result("b", "read", "B", false),
            result("a", "read", "A", false),
            Message::Assistant {
                content: vec![call("c", "read", "{}")]
            },
            missing("c", "read"),
            Message::user("stop"),
            Message::assistant_text("Done."),
        ]
    );
    assert_paired(&imported.messages);
    let whats: Vec<&str> = imported.warnings.iter().map(|w| w.what.as_str()).collect();
    assert_eq!(whats.len(), 5, "{whats:#?}");
    assert!(
        whats[0].starts_with("tools[1]: a tool must be {") && whats[0].ends_with("tool skipped"),
        "{}",
        whats[0]
    );
    assert!(whats[1].contains("unknown tool call `zzz`"));
    // The user's "stop" waits for the call's run to end, at the next
    // assistant message; the warnings of the entries between come first.
    assert!(whats[2].starts_with("messages[8]: unknown role `wizard`"));
    assert!(whats[3].starts_with("messages[9]: assistant message with no content"));
    assert!(whats[4].contains("tool call `c` (read) has no recorded result"));
    assert!(imported.warnings.iter().all(|w| w.line.is_none()));
    let s = imported.stats;
    assert_eq!((s.records, s.used, s.rejected), (11, 9, 2));
    assert_eq!((s.dropped_results, s.synthetic_results), (1, 1));
    assert_eq!(calls(&imported.events)[0].1.as_deref(), Some("gpt-test"));
}

#[test]
fn openai_one_line_and_bare_array_documents_import() {
    for name in ["oneline.openai.json", "array.openai.json"] {
        let imported = run(import::open(&fixture(name)).unwrap());
        assert_eq!(
            imported.messages,
            vec![Message::user("hi"), Message::assistant_text("hello")],
            "{name}"
        );
        assert!(imported.warnings.is_empty());
    }
}

// ----------------------------------------------------------------------- pi

#[test]
fn pi_drops_signatures_and_calls_that_ended_in_error() {
    let imported = run(import::open(&fixture("aborted.pi.jsonl")).unwrap());
    assert_eq!(
        imported.messages,
        vec![
            Message::user("edit it"),
            Message::user("again"),
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: "ok".into(),
                        signature: None
                    },
                    Block::Text {
                        text: "done".into()
                    },
                ]
            },
        ]
    );
    let whats: Vec<&str> = imported.warnings.iter().map(|w| w.what.as_str()).collect();
    assert_eq!(whats.len(), 2, "{whats:?}");
    assert!(whats[0].contains("ended `error`, error: terminated"));
    assert!(whats[1].contains("ended `aborted`"));
    assert_eq!(
        imported.warnings.iter().map(|w| w.line).collect::<Vec<_>>(),
        [Some(3), Some(5)]
    );
}

#[test]
fn pi_session_imports_with_usage_pairing_and_warnings() {
    let import = import::open(&fixture("session.pi.jsonl")).unwrap();
    let meta = import.meta();
    assert_eq!(meta.session_id.as_deref(), Some("pi-1"));
    assert_eq!(meta.model.as_deref(), Some("claude-a"));
    assert_eq!(meta.provider.as_deref(), Some("anthropic"));
    assert!(meta.tools.is_empty());
    let imported = run(import);
    assert_eq!(
        imported.messages,
        vec![
            Message::user("list files"),
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: "ls it".into(),
                        signature: None
                    },
                    // Arguments are kept byte for byte, spacing included.
                    call("t1", "bash", r#"{"command":"ls", "timeout": 5}"#),
                ]
            },
            result("t1", "bash", "a\nb", false),
            Message::Assistant {
                content: vec![
                    Block::Text {
                        text: "two reads".into()
                    },
                    call("t2", "read", r#"{"path":"a"}"#),
                    call("t3", "read", r#"{"path":"b"}"#),
                ]
            },
            result("t3", "read", "B", true),
            missing("t2", "read"),
            Message::user("Ran `pwd`\n```\n/w\n```"),
            Message::assistant_text("done"),
        ]
    );
    // input = input + cacheRead + cacheWrite; model_change applies to later calls.
    assert_eq!(
        calls(&imported.events),
        vec![
            (usage(350, 300, 40, 20), Some("claude-a".into())),
            (usage(5, 0, 0, 5), Some("claude-b".into())),
            (usage(1, 0, 0, 1), Some("claude-b".into())),
        ]
    );
    let compaction = imported.events.iter().find_map(|e| match e {
        Event::Compaction {
            tokens_before,
            summary,
            timestamp,
            ..
        } => Some((*tokens_before, summary.clone(), timestamp.is_some())),
        _ => None,
    });
    assert_eq!(
        compaction,
        Some((Some(1234), Some("We listed files.".into()), true))
    );
    // The compaction sits between the user's bash run and the last answer.
    let kinds: Vec<&str> = imported
        .events
        .iter()
        .filter(|e| !matches!(e, Event::Warning(_)))
        .map(|e| match e {
            Event::Compaction { .. } => "compaction",
            _ => "message",
        })
        .collect();
    assert_eq!(kinds[kinds.len() - 2], "compaction");
    assert_eq!(
        lines_of(&imported.warnings),
        vec![Some(7), Some(8), Some(9), Some(10), Some(14)]
    );
    let whats: Vec<&str> = imported.warnings.iter().map(|w| w.what.as_str()).collect();
    assert!(whats[0].contains("not a pi session entry"));
    assert!(whats[1].contains("unknown tool call `ghost`"));
    assert!(whats[2].contains("no content (stop reason `aborted`, error: Request was aborted)"));
    assert!(whats[3].contains("tool call `t2` (read) has no recorded result"));
    assert!(whats[4].contains("unknown entry type `branch_summary`"));
    let s = imported.stats;
    assert_eq!((s.records, s.used, s.ignored, s.rejected), (15, 11, 1, 3));
    assert_eq!(
        (
            s.tool_calls,
            s.tool_results,
            s.synthetic_results,
            s.dropped_results
        ),
        (3, 3, 1, 1)
    );
}

// -------------------------------------------------------------- claude code

#[test]
fn claude_code_merges_split_messages_and_pairs_results() {
    let import = import::open(&fixture("session.claude.jsonl")).unwrap();
    let meta = import.meta();
    assert_eq!(meta.session_id.as_deref(), Some("cc-1"));
    assert_eq!(meta.model.as_deref(), Some("claude-x"));
    assert_eq!(meta.cwd.as_deref(), Some("/proj"));
    let imported = run(import);
    assert_eq!(
        imported.messages,
        vec![
            Message::user("fix the bug"),
            // Three lines sharing message.id msg_A, results interleaved.
            Message::Assistant {
                content: vec![
                    // The signature is opaque: dropped, never counted.
                    Block::Reasoning {
                        text: "look first".into(),
                        signature: None
                    },
                    call("toolu_1", "Read", r#"{"file_path": "/proj/a.rs"}"#),
                    call("toolu_2", "Grep", r#"{"pattern":"bug"}"#),
                ]
            },
            result("toolu_1", "Read", "fn main() {}", false),
            result("toolu_2", "Grep", "a.rs:1: bug", false),
            Message::Assistant {
                content: vec![
                    Block::Text {
                        text: "Editing.".into()
                    },
                    call("toolu_3", "Edit", r#"{"file_path":"/proj/a.rs"}"#),
                ]
            },
            missing("toolu_3", "Edit"),
            Message::user("[Request interrupted by user for tool use]"),
            // The compaction summary is the compaction's text, not a turn.
            Message::assistant_text("All done."),
        ]
    );
    // Usage of the last line of the call; cache reads and writes count as input.
    assert_eq!(
        calls(&imported.events),
        vec![
            (usage(1103, 1000, 100, 60), Some("claude-x".into())),
            (usage(1202, 1200, 0, 30), Some("claude-x".into())),
            (usage(1, 0, 0, 3), Some("claude-x".into())),
        ]
    );
    let compaction = imported.events.iter().find_map(|e| match e {
        Event::Compaction {
            tokens_before,
            summary,
            ..
        } => Some((*tokens_before, summary.clone())),
        _ => None,
    });
    assert_eq!(
        compaction,
        Some((
            Some(155_000),
            Some("This session is being continued. Summary: fixed a.rs.".into())
        ))
    );
    assert_eq!(
        lines_of(&imported.warnings),
        vec![Some(10), Some(12), Some(11), Some(16)]
    );
    let whats: Vec<&str> = imported.warnings.iter().map(|w| w.what.as_str()).collect();
    assert!(whats[0].contains("not a Claude Code session line"));
    assert!(whats[1].contains("unknown tool call `toolu_9`"));
    assert!(whats[2].contains("`toolu_3` (Edit) has no recorded result"));
    assert!(whats[3].contains("unknown line type `mystery`"));
    let s = imported.stats;
    // Ignored: snapshot, progress, sidechain, synthetic message, repeated uuid.
    assert_eq!((s.records, s.used, s.ignored, s.rejected), (18, 11, 5, 2));
    assert_eq!(s.assistant_messages, 3);
}

#[test]
fn claude_code_context_restored_after_a_compaction_is_not_counted_again() {
    let file = r#"{"type":"file","filename":"/p/a.py","content":{"type":"text","file":{"filePath":"/p/a.py","content":"x = 1\n","numLines":1}}}"#;
    let lines = [
        r#"{"type":"user","uuid":"u1","message":{"role":"user","content":"read a.py"}}"#.to_string(),
        r#"{"type":"assistant","uuid":"a1","message":{"id":"m1","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Read it."}]}}"#.to_string(),
        r#"{"type":"system","subtype":"compact_boundary","uuid":"b1","compactMetadata":{"trigger":"auto","preTokens":1000}}"#.to_string(),
        r#"{"type":"user","uuid":"s1","isCompactSummary":true,"message":{"role":"user","content":"Summary: read a.py."}}"#.to_string(),
        format!(r#"{{"type":"attachment","uuid":"f1","attachment":{file}}}"#),
        r#"{"type":"attachment","uuid":"q1","attachment":{"type":"queued_command","prompt":"now b.py"}}"#.to_string(),
        r#"{"type":"assistant","uuid":"a2","message":{"id":"m2","role":"assistant","model":"claude-x","content":[{"type":"text","text":"On it."}]}}"#.to_string(),
        r#"{"type":"user","uuid":"u2","message":{"role":"user","content":"and c.py"}}"#.to_string(),
        format!(r#"{{"type":"attachment","uuid":"f2","attachment":{file}}}"#),
    ];
    let (_dir, path) = temp_file("s.jsonl", lines.join("\n").as_bytes());
    let imported = run(import::open(&path).unwrap());
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    let read = "Called the Read tool with the following input: {\"file_path\":\"/p/a.py\"}\nResult of calling the Read tool:\n1\tx = 1";
    assert_eq!(
        imported.messages,
        vec![
            Message::user("read a.py"),
            Message::assistant_text("Read it."),
            // The file re-attached by the compaction is left out; the
            // queued prompt is a user turn all the same.
            Message::user("now b.py"),
            Message::assistant_text("On it."),
            Message::user(format!("and c.py\n{read}")),
        ]
    );
}

// -------------------------------------------------------------------- codex

#[test]
fn codex_rollout_groups_calls_and_attaches_token_counts() {
    let import = import::open(&fixture("rollout.codex.jsonl")).unwrap();
    let meta = import.meta();
    assert_eq!(meta.session_id.as_deref(), Some("cx-1"));
    assert_eq!(meta.model.as_deref(), Some("gpt-5-codex"));
    assert_eq!(meta.provider.as_deref(), Some("openai"));
    assert_eq!(meta.cwd.as_deref(), Some("/repo"));
    assert_eq!(
        meta.window,
        Some(272_000),
        "token_count's model_context_window"
    );
    let imported = run(import);
    let patch = serde_json::json!({"input": "*** Begin Patch\n*** Add File: t.rs\n+#[test] fn t() {}\n*** End Patch"}).to_string();
    assert_eq!(
        imported.messages,
        vec![
            Message::system("<permissions>sandboxed</permissions>"),
            Message::user("add a test"),
            Message::Assistant {
                content: vec![
                    // The ciphertext counts as the call's 30 reasoning tokens.
                    Block::Reasoning {
                        text: "**Looking around**".into(),
                        signature: Some(" xxx".repeat(30))
                    },
                    call(
                        "call_1",
                        "shell_command",
                        r#"{"command":"ls","workdir":"/repo"}"#
                    ),
                    call("call_2", "shell_command", r#"{"command":"cat x"}"#),
                ]
            },
            result(
                "call_2",
                "shell_command",
                r#"{"output":"cat: x: No such file","metadata":{"exit_code":1,"duration_seconds":0.0}}"#,
                true
            ),
            result(
                "call_1",
                "shell_command",
                "Exit code: 0\nOutput:\nsrc\n",
                false
            ),
            Message::Assistant {
                content: vec![call("call_3", "apply_patch", &patch)]
            },
            result(
                "call_3",
                "apply_patch",
                r#"{"output":"Success.","metadata":{"exit_code":0,"duration_seconds":0.0}}"#,
                false
            ),
            Message::Assistant {
                content: vec![call(
                    "call_4",
                    "shell_command",
                    r#"{"command":"cargo test"}"#
                )]
            },
            missing("call_4", "shell_command"),
            Message::assistant_text("Added the test."),
        ]
    );
    // A token_count after the call's items, one before them (older Codex),
    // a repeated one, and one with the call still open.
    assert_eq!(
        calls(&imported.events),
        vec![
            (usage(5000, 4000, 0, 50), Some("gpt-5-codex".into())),
            (usage(5500, 4900, 0, 100), Some("gpt-5-codex".into())),
            (usage(6000, 5100, 0, 20), Some("gpt-5-codex".into())),
            (usage(500, 0, 0, 10), Some("gpt-5-codex".into())),
        ]
    );
    let summary = imported.events.iter().find_map(|e| match e {
        Event::Compaction { summary, .. } => Some(summary.clone()),
        _ => None,
    });
    assert_eq!(summary, Some(Some("Summary: added t.rs.".into())));
    assert_eq!(
        lines_of(&imported.warnings),
        vec![Some(13), Some(18), Some(20), Some(24), Some(26)]
    );
    let whats: Vec<&str> = imported.warnings.iter().map(|w| w.what.as_str()).collect();
    assert!(whats[0].contains("unknown tool call `call_zz`"));
    assert!(whats[1].contains("not a Codex rollout line"));
    assert!(whats[2].contains("`call_4` (shell_command) has no recorded result"));
    assert!(whats[3].contains("unknown response item type `teleport`"));
    assert!(whats[4].contains("unknown line type `mystery`"));
    let s = imported.stats;
    assert_eq!((s.records, s.rejected), (26, 3));
    assert_eq!(
        (s.assistant_messages, s.tool_calls, s.tool_results),
        (4, 4, 4)
    );
}

#[test]
fn codex_usage_falls_back_to_differences_of_totals() {
    let lines = [
        r#"{"type":"session_meta","payload":{"id":"x"}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]}}"#,
        r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":5}}}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"more"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]}}"#,
        r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":250,"cached_input_tokens":90,"output_tokens":12}}}}"#,
    ];
    let (_dir, path) = temp_file("r.jsonl", lines.join("\n").as_bytes());
    let imported = run(import::open(&path).unwrap());
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    assert_eq!(
        calls(&imported.events),
        vec![(usage(100, 0, 0, 5), None), (usage(150, 90, 0, 7), None)]
    );
}

#[test]
fn codex_model_named_only_in_session_meta_is_the_sessions_model() {
    let lines = [
        r#"{"type":"session_meta","payload":{"id":"d1","model":"gpt-5.4","originator":"Codex Desktop"}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]}}"#,
        r#"{"type":"turn_context","payload":{"model":"gpt-5.5"}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"more"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]}}"#,
    ];
    let (_dir, path) = temp_file("r.jsonl", lines.join("\n").as_bytes());
    let import = import::open(&path).unwrap();
    assert_eq!(import.meta().model.as_deref(), Some("gpt-5.4"));
    assert_eq!(import.meta().window, None, "no token_count names a window");
    let imported = run(import);
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    let models: Vec<_> = calls(&imported.events).into_iter().map(|c| c.1).collect();
    assert_eq!(
        models,
        vec![Some("gpt-5.4".to_string()), Some("gpt-5.5".to_string())],
        "a later turn_context names the model of the calls after it"
    );
}

#[test]
fn codex_rollout_from_before_the_envelope_imports() {
    let import = import::open(&fixture("bare.codex.jsonl")).unwrap();
    let meta = import.meta();
    assert_eq!(meta.format, Format::Codex);
    assert_eq!(
        meta.session_id.as_deref(),
        Some("0196a1b2-0000-7000-8000-00000000b4e1")
    );
    assert_eq!(meta.provider.as_deref(), Some("openai"));
    assert!(meta.started.is_some(), "the header's timestamp");
    assert_eq!(meta.model, None, "rollouts of that era name no model");
    let imported = run(import);
    assert_eq!(
        imported.messages,
        vec![
            Message::system("Follow the repository's AGENTS.md."),
            Message::user("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"),
            Message::user("why does the build fail?"),
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: "**Checking the build**".into(),
                        signature: None
                    },
                    call(
                        "call_1",
                        "shell",
                        r#"{"command":["bash","-lc","cargo build"],"workdir":"/repo"}"#
                    ),
                ]
            },
            result(
                "call_1",
                "shell",
                r#"{"output":"error[E0425]: cannot find value `x`\n","metadata":{"exit_code":101,"duration_seconds":1.2}}"#,
                true
            ),
            Message::Assistant {
                content: vec![call(
                    "call_2",
                    "shell",
                    r#"{"command":["bash","-lc","sed -n 1,40p src/main.rs"]}"#
                )]
            },
            result(
                "call_2",
                "shell",
                r#"{"output":"fn main() { println!(\"{}\", x); }\n","metadata":{"exit_code":0,"duration_seconds":0.0}}"#,
                false
            ),
            Message::assistant_text("`x` is never defined in src/main.rs."),
        ]
    );
    // The state markers are bookkeeping; a line that is neither a marker,
    // the header nor an item is reported; the ciphertext with no logged
    // token count is noted.
    assert_eq!(lines_of(&imported.warnings), vec![Some(14), Some(6)]);
    assert!(imported.warnings[0].what.contains("line has no `type`"));
    assert!(imported.warnings[1].what.contains("encrypted reasoning"));
    let s = imported.stats;
    assert_eq!((s.records, s.rejected), (14, 1));
    assert_eq!(
        (s.assistant_messages, s.tool_calls, s.tool_results),
        (3, 2, 2)
    );
}

#[test]
fn a_rollout_before_and_after_the_envelope_imports_the_same() {
    let bare = std::fs::read_to_string(fixture("bare.codex.jsonl")).unwrap();
    let wrapped: Vec<String> = bare
        .lines()
        .filter(|line| !line.contains("not a rollout line"))
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            if value.get("record_type").is_some() {
                // Current rollouts keep the marker at times.
                line.to_string()
            } else if value.get("type").is_none() {
                serde_json::json!({"type": "session_meta", "payload": value}).to_string()
            } else {
                serde_json::json!({"type": "response_item", "payload": value}).to_string()
            }
        })
        .collect();
    let (_dir, path) = temp_file("wrapped.jsonl", wrapped.join("\n").as_bytes());
    let wrapped = run(import::open(&path).unwrap());
    let bare = run(import::open(&fixture("bare.codex.jsonl")).unwrap());
    assert_eq!(wrapped.messages, bare.messages);
    assert_eq!(wrapped.warnings.len(), 1, "{:?}", wrapped.warnings);
    assert!(wrapped.warnings[0].what.contains("encrypted reasoning"));
}

/// Each message with its reasoning signatures replaced by their o200k token
/// counts (a stand-in for opaque reasoning is checked by what it costs).
fn priced(messages: &[Message]) -> Vec<Message> {
    use cwl::TokenCounter;
    let counter = cwl::O200k::new();
    messages
        .iter()
        .map(|message| match message {
            Message::Assistant { content } => Message::Assistant {
                content: content
                    .iter()
                    .map(|block| match block {
                        Block::Reasoning { text, signature } => Block::Reasoning {
                            text: text.clone(),
                            signature: signature
                                .as_deref()
                                .map(|s| format!("{} tokens", counter.count(s))),
                        },
                        other => other.clone(),
                    })
                    .collect(),
            },
            other => other.clone(),
        })
        .collect()
}

#[test]
fn claude_code_attachments_join_the_turn_and_summaries_stay_out_of_it() {
    let import = import::open(&fixture("attachments.claude.jsonl")).unwrap();
    assert_eq!(import.meta().model.as_deref(), Some("claude-y"));
    let imported = run(import);
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    let file = "Called the Read tool with the following input: {\"file_path\":\"/p/calc.py\"}\nResult of calling the Read tool:\n1\tdef add(a, b):\n2\t    return a - b";
    assert_eq!(
        imported.messages,
        vec![
            Message::user(format!(
                "what is in @calc.py\n{file}\n- review: reviews code"
            )),
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: "check the dir".into(),
                        signature: None
                    },
                    call(
                        "toolu_1",
                        "Bash",
                        r#"{"command":"ls nope","description":"List a missing dir"}"#
                    ),
                ]
            },
            result(
                "toolu_1",
                "Bash",
                // Hook context after a tool result is sent inside it.
                "Exit code 2\nls: cannot access 'nope'\n\nLint: clean",
                true
            ),
            // A prompt queued while the agent worked: a user turn.
            Message::user("also look at util.py"),
            Message::assistant_text("add subtracts; util.py not read yet."),
            Message::user(
                "<command-name>/compact</command-name>\n<local-command-stdout>Compacted</local-command-stdout>\nand now?"
            ),
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: String::new(),
                        signature: None
                    },
                    Block::Text {
                        text: "Still subtracts.".into()
                    },
                ]
            },
        ]
    );
    assert_paired(&imported.messages);
    assert_eq!(
        calls(&imported.events),
        vec![
            (usage(903, 0, 900, 52), Some("claude-y".into())),
            (usage(963, 900, 60, 12), Some("claude-y".into())),
            (usage(132, 100, 30, 8), Some("claude-y".into())),
        ]
    );
    let kinds: Vec<String> = imported
        .events
        .iter()
        .map(|e| match e {
            Event::Message { message, .. } => match message {
                Message::User { .. } => "user".to_string(),
                Message::Assistant { .. } => "assistant".to_string(),
                Message::System { .. } => "system".to_string(),
                Message::ToolResult(_) => "result".to_string(),
            },
            Event::Compaction {
                tokens_before,
                summary,
                ..
            } => format!("compaction {tokens_before:?} {summary:?}"),
            Event::Warning(w) => format!("warning {}", w.what),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "user",
            "assistant",
            "result",
            "user",
            "assistant",
            "compaction Some(963) Some(\"This session is being continued from a previous conversation. Summary: add subtracts.\")",
            "user",
            "assistant",
        ]
    );
    let s = imported.stats;
    // Ignored: the queue operation, the empty hook success, the mode line,
    // the date change.
    assert_eq!(
        (s.records, s.ignored, s.rejected, s.compactions),
        (19, 4, 0, 1)
    );
}

#[test]
fn claude_code_context_without_a_turn_or_result_is_a_system_message() {
    let lines = [
        r#"{"type":"user","isSidechain":false,"uuid":"u1","message":{"role":"user","content":"hi"}}"#,
        r#"{"type":"assistant","isSidechain":false,"uuid":"a1","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"hello"}]}}"#,
        r#"{"type":"attachment","isSidechain":false,"uuid":"t1","attachment":{"type":"edited_text_file","filename":"/p/a.py","snippet":"1\tx = 2"}}"#,
    ];
    let (_dir, path) = temp_file("s.jsonl", lines.join("\n").as_bytes());
    let imported = run(import::open_as(&path, Format::ClaudeCode).unwrap());
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    assert_eq!(
        imported.messages,
        vec![
            Message::user("hi"),
            Message::assistant_text("hello"),
            Message::system("1\tx = 2"),
        ]
    );
}

#[test]
fn claude_code_newer_lines_give_what_the_model_was_sent() {
    let lines = [
        r#"{"type":"atis-latch","atis":"","sessionId":"s"}"#,
        r#"{"type":"user","isSidechain":false,"uuid":"u1","sessionId":"s","message":{"role":"user","content":"hi"}}"#,
        r#"{"type":"attachment","isSidechain":false,"uuid":"t1","attachment":{"type":"date","date":"2026-11-25"},"rendered":[{"content":"<system-reminder>\nToday's date is 2026-11-25.\n</system-reminder>"}],"renderedRole":"system"}"#,
        r#"{"type":"attachment","isSidechain":false,"uuid":"t2","attachment":{"type":"prompt_snapshot","systemPrompt":["You are an agent."]}}"#,
        r#"{"type":"api-request-shape","sessionId":"s","shapeHash":"h","shape":{"system":[{"type":"text","text":"You are an agent."}]}}"#,
        r#"{"type":"api-request-blob","sessionId":"s","hash":"b","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}"#,
        r#"{"type":"api-request","sessionId":"s","id":"r1","params":{"model":"c"}}"#,
        r#"{"type":"assistant","isSidechain":false,"uuid":"a1","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"hello"}]}}"#,
        r#"{"type":"tools-used","tools":["Bash"],"sessionId":"s"}"#,
        r#"{"type":"cost-state","sessionId":"s","totalCostUSD":0.1}"#,
    ];
    let (_dir, path) = temp_file("s.jsonl", lines.join("\n").as_bytes());
    assert_eq!(import::detect(&path).unwrap(), Format::ClaudeCode);
    let imported = run(import::open(&path).unwrap());
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    assert_eq!(
        imported.messages,
        vec![
            Message::user("hi\n<system-reminder>\nToday's date is 2026-11-25.\n</system-reminder>"),
            Message::assistant_text("hello"),
        ]
    );
    assert_eq!(imported.stats.rejected, 0);
}

#[test]
fn claude_code_sub_agent_file_is_read_as_a_session() {
    let import = import::open(&fixture("agent.claude.jsonl")).unwrap();
    assert_eq!(import.meta().model.as_deref(), Some("claude-small"));
    let imported = run(import);
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
    assert_eq!(
        imported.messages,
        vec![
            Message::user("find add"),
            Message::Assistant {
                content: vec![call(
                    "toolu_s1",
                    "Bash",
                    r#"{"command":"grep -rn 'def add' ."}"#
                )]
            },
            result("toolu_s1", "Bash", "calc.py:4:def add(a, b):", false),
            Message::assistant_text("In calc.py."),
        ]
    );
    assert_eq!(imported.stats.ignored, 0);
}

#[test]
fn codex_exec_rollout_prices_reasoning_and_reads_exit_codes() {
    let import = import::open(&fixture("exec.codex.jsonl")).unwrap();
    assert_eq!(import.meta().session_id.as_deref(), Some("cx-2"));
    assert_eq!(import.meta().model.as_deref(), Some("gpt-5.5"));
    let imported = run(import);
    let patch = serde_json::json!({"input": "*** Begin Patch\n*** Update File: calc.py\n@@\n def mul(a, b):\n-    return a + b\n+    return a * b\n*** End Patch\n"}).to_string();
    assert_eq!(
        priced(&imported.messages),
        vec![
            // Sent as the first developer message, logged in session_meta.
            Message::system("You are a coding agent."),
            Message::user("fix mul"),
            Message::Assistant {
                content: vec![
                    // The ciphertext is replaced by the logged 64 reasoning tokens.
                    Block::Reasoning {
                        text: "**Find mul**".into(),
                        signature: Some("64 tokens".into())
                    },
                    call(
                        "call_1",
                        "exec_command",
                        r#"{"cmd":"grep -n 'def mul' calc.py","workdir":"/r"}"#
                    ),
                ]
            },
            result(
                "call_1",
                "exec_command",
                "Chunk ID: ab12\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 7\nOutput:\n8:def mul(a, b):\n",
                false
            ),
            Message::Assistant {
                content: vec![call("call_2", "apply_patch", &patch)]
            },
            result(
                "call_2",
                "apply_patch",
                "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM calc.py\n",
                false
            ),
            Message::Assistant {
                content: vec![call(
                    "call_3",
                    "exec_command",
                    r#"{"cmd":"python3 test_calc.py"}"#
                )]
            },
            // The header says 1; the output's own "Exit code: 0" is not read.
            result(
                "call_3",
                "exec_command",
                "Chunk ID: cd34\nWall time: 0.0100 seconds\nProcess exited with code 1\nOriginal token count: 9\nOutput:\nAssertionError: Exit code: 0\n",
                true
            ),
            Message::Assistant {
                content: vec![call(
                    "call_4",
                    "update_plan",
                    r#"{"plan":[{"step":"Fix mul","status":"completed"}]}"#
                )]
            },
            result("call_4", "update_plan", "Plan updated", false),
            // The call that wrote the compaction summary is not a turn.
            // No token count for this call: its reasoning counts as nothing.
            Message::Assistant {
                content: vec![
                    Block::Reasoning {
                        text: String::new(),
                        signature: None
                    },
                    Block::Text {
                        text: "Done.".into()
                    },
                ]
            },
        ]
    );
    assert_paired(&imported.messages);
    assert_eq!(
        calls(&imported.events),
        vec![
            (usage(900, 0, 0, 80), Some("gpt-5.5".into())),
            (usage(950, 900, 0, 40), Some("gpt-5.5".into())),
            (usage(1000, 950, 0, 20), Some("gpt-5.5".into())),
            (usage(1050, 1000, 0, 10), Some("gpt-5.5".into())),
            (None, Some("gpt-5.6-sol".into())),
        ]
    );
    let summary = imported.events.iter().find_map(|e| match e {
        Event::Compaction { summary, .. } => summary.clone(),
        _ => None,
    });
    assert_eq!(
        summary.as_deref(),
        Some("Another model produced this summary:\nSummary: mul fixed.")
    );
    assert_eq!(lines_of(&imported.warnings), vec![Some(24)]);
    assert!(
        imported.warnings[0]
            .what
            .starts_with("1 encrypted reasoning item(s) without a logged reasoning token count"),
        "{:?}",
        imported.warnings
    );
    let s = imported.stats;
    assert_eq!((s.records, s.rejected, s.compactions), (25, 0, 1));
}

// ----------------------------------------------------------- mini-swe-agent

#[test]
fn mini_swe_agent_actions_become_bash_calls() {
    let import = import::open(&fixture("task.traj.json")).unwrap();
    assert_eq!(import.meta().session_id.as_deref(), Some("demo__demo-1"));
    assert_eq!(import.meta().model.as_deref(), Some("test/model-1"));
    let imported = run(import);
    assert_eq!(
        imported.messages,
        vec![
            Message::system("You run bash."),
            Message::user("<pr_description>Fix it</pr_description>"),
            Message::Assistant {
                content: vec![
                    Block::Text {
                        text: "THOUGHT: look around.".into()
                    },
                    call("mswe-1", "bash", r#"{"command":"ls -la"}"#),
                ]
            },
            result(
                "mswe-1",
                "bash",
                "<returncode>0</returncode>\n<output>\na.py\n</output>",
                false
            ),
            Message::assistant_text("Two at once.\n\n```bash\necho 1\n```\n\n```bash\necho 2\n```"),
            Message::user(
                "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."
            ),
            Message::Assistant {
                content: vec![
                    Block::Text {
                        text: "THOUGHT: run tests.".into()
                    },
                    call("mswe-2", "bash", r#"{"command":"python -m pytest -q"}"#),
                ]
            },
            result(
                "mswe-2",
                "bash",
                "<returncode>1</returncode>\n<output>\n1 failed\n</output>",
                true
            ),
            Message::Assistant {
                content: vec![call(
                    "mswe-3",
                    "bash",
                    r#"{"command":"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}"#
                )]
            },
            missing("mswe-3", "bash"),
        ]
    );
    let first = imported.events.iter().find_map(|e| match e {
        Event::Message {
            message: Message::Assistant { .. },
            usage,
            timestamp,
            cost_usd,
            model,
        } => Some((
            *usage,
            timestamp.map(|t| t.timestamp()),
            *cost_usd,
            model.clone(),
        )),
        _ => None,
    });
    assert_eq!(
        first,
        Some((
            usage(100, 60, 0, 20),
            Some(1_763_510_130),
            Some(0.002),
            Some("test/model-1".into())
        ))
    );
    let whats: Vec<&str> = imported.warnings.iter().map(|w| w.what.as_str()).collect();
    assert_eq!(whats.len(), 2, "{whats:#?}");
    assert!(whats[0].starts_with("messages[8]: unknown role `narrator`"));
    assert!(whats[1].contains("`mswe-3` (bash) has no recorded result"));
    let s = imported.stats;
    assert_eq!((s.records, s.used, s.rejected), (10, 9, 1));
    assert_eq!(s.assistant_messages, 4);
}

/// A line of a Codex rollout.
fn rollout_line(kind: &str, payload: serde_json::Value) -> String {
    serde_json::json!({"timestamp": "2025-11-10T08:00:00.000Z", "type": kind, "payload": payload})
        .to_string()
}

/// A rollout's first lines: the session of Codex CLI `version`, and the
/// user's `prompt`.
fn rollout_start(version: &str, prompt: &str) -> Vec<String> {
    vec![
        rollout_line(
            "session_meta",
            serde_json::json!({"id": "cx", "cwd": "/repo", "cli_version": version}),
        ),
        rollout_line(
            "response_item",
            serde_json::json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": prompt}]}),
        ),
    ]
}

/// A rollout's `token_count` for a call whose prompt was `input` tokens.
fn token_count(input: u64) -> String {
    let usage = serde_json::json!({"input_tokens": input, "cached_input_tokens": 0,
        "output_tokens": 10, "total_tokens": input + 10});
    rollout_line(
        "event_msg",
        serde_json::json!({"type": "token_count", "info": {"total_token_usage": usage, "last_token_usage": usage}}),
    )
}

/// Codex CLI 0.57.0 logs the calls of one response each with its output
/// (`C O C O`), and each shell output as JSON where the model got a text.
#[test]
fn codex_parallel_calls_are_one_response_and_outputs_are_what_the_model_got() {
    let line = rollout_line;
    let usage = token_count;
    let item = |payload: serde_json::Value| line("response_item", payload);
    let call_item = |name: &str, arguments: &str, id: &str| {
        item(
            serde_json::json!({"type": "function_call", "name": name, "arguments": arguments, "call_id": id}),
        )
    };
    let output_item = |id: &str, output: &str| {
        item(serde_json::json!({"type": "function_call_output", "call_id": id, "output": output}))
    };
    let context = line(
        "turn_context",
        serde_json::json!({"cwd": "/repo", "model": "gpt-5-codex"}),
    );
    let shell = r#"{"output":"src\n","metadata":{"exit_code":0,"duration_seconds":0.0}}"#;
    let mut lines = rollout_start("0.57.0", "list the files");
    lines.extend([
        context.clone(),
        usage(1000),
        call_item("update_plan", "{\"plan\":[]}", "plan_1"),
        output_item("plan_1", "Plan updated"),
        call_item("shell", "{\"command\":[\"ls\"]}", "ls_1"),
        output_item("ls_1", shell),
        context,
        usage(1200),
        line(
            "response_item",
            serde_json::json!({"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "src holds the code."}]}),
        ),
    ]);
    let (_dir, path) = temp_file("rollout-057.jsonl", lines.join("\n").as_bytes());
    let imported = run(import::open(&path).unwrap());
    assert_eq!(
        imported.messages,
        vec![
            Message::user("list the files"),
            Message::Assistant {
                content: vec![
                    call("plan_1", "update_plan", "{\"plan\":[]}"),
                    call("ls_1", "shell", "{\"command\":[\"ls\"]}"),
                ]
            },
            result("plan_1", "update_plan", "Plan updated", false),
            result(
                "ls_1",
                "shell",
                "Exit code: 0\nWall time: 0 seconds\nOutput:\nsrc\n",
                false
            ),
            Message::Assistant {
                content: vec![Block::Text {
                    text: "src holds the code.".into()
                }]
            },
        ]
    );
    assert_eq!(
        imported.stats.assistant_messages, 2,
        "two model calls, not three"
    );
}

/// A Codex rollout that logs each response's `token_count` after its items
/// and before its outputs, with nothing else between responses: each
/// response is a model call of its own.
#[test]
fn codex_calls_counted_before_their_outputs_stay_apart() {
    let line = rollout_line;
    let mut lines = rollout_start("0.66.0", "read both");
    for (n, input) in [(1, 1000), (2, 1200)] {
        let id = format!("call_{n}");
        lines.push(line(
            "response_item",
            serde_json::json!({"type": "function_call", "name": "exec_command",
                "arguments": format!("{{\"cmd\":\"cat f{n}\"}}"), "call_id": id}),
        ));
        lines.push(token_count(input));
        lines.push(line(
            "response_item",
            serde_json::json!({"type": "function_call_output", "call_id": id, "output": "ok"}),
        ));
    }
    let (_dir, path) = temp_file("rollout-066.jsonl", lines.join("\n").as_bytes());
    let imported = run(import::open(&path).unwrap());
    let calls: Vec<usize> = imported
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant { content } => Some(content.len()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, [1, 1], "{:?}", imported.messages);
}
