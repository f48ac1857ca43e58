//! Importer tests on small hand-written fixtures (`tests/fixtures/import/`)
//! and logs written inline. Tests of one shape are tables of cases: each
//! case says what its log must import to, and one test checks them all.

use crate::import_support;

use std::io::Write;
use std::path::PathBuf;

use cwl::{Block, Message, ToolCall, ToolResult, Usage};
use cwl_lab::import::{self, Event, Format, ImportError, ImportWarning, MISSING_RESULT, Meta};
use import_support::{Imported, assert_paired, calls, fixture, run, warnings_with};

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

/// An assistant message of `content`.
fn assistant(content: Vec<Block>) -> Message {
    Message::Assistant { content }
}

/// A reasoning block with no signature.
fn thought(text: &str) -> Block {
    Block::Reasoning {
        text: text.into(),
        signature: None,
    }
}

fn text(text: &str) -> Block {
    Block::Text { text: text.into() }
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

fn temp_file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
    (dir, path)
}

fn lines_of(warnings: &[ImportWarning]) -> Vec<Option<u64>> {
    warnings.iter().map(|w| w.line).collect()
}

/// Names the case being checked when a check fails, wherever it asserted
/// (helpers included).
struct Naming<'a>(&'a str);

impl Drop for Naming<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failing case: {}", self.0);
        }
    }
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
    for (name, written_as, format) in [
        ("session.pi.jsonl", "trajectory.traj.json", Format::Pi),
        ("task.traj.json", "rollout-2025.jsonl", Format::MiniSweAgent),
    ] {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let (_dir, path) = temp_file(written_as, &bytes);
        assert_eq!(
            import::detect(&path).unwrap(),
            format,
            "{name} as {written_as}"
        );
    }
}

#[test]
fn a_byte_order_mark_is_skipped() {
    for (name, written_as, format, (stat, count)) in [
        ("session.pi.jsonl", "bom.jsonl", Format::Pi, ("rejected", 3)),
        (
            "task.traj.json",
            "bom.json",
            Format::MiniSweAgent,
            ("assistant_messages", 4),
        ),
    ] {
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend(std::fs::read(fixture(name)).unwrap());
        let (_dir, path) = temp_file(written_as, &bytes);
        assert_eq!(import::detect(&path).unwrap(), format, "{name}");
        let imported = run(import::open(&path).unwrap());
        assert_eq!(stat_of(&imported.stats, stat), count, "{name}: {stat}");
    }
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

// ------------------------------------------------------------------- errors

/// Where a log that fails to open is.
enum Log {
    /// Nowhere: the name is a path that does not exist.
    Absent,
    /// In a file of the case's name holding these bytes.
    Bytes(&'static [u8]),
    /// In the fixture of the case's name.
    Fixture,
}

/// A log that cannot be imported, and the error it gives.
struct Fails {
    /// The file's name (for [`Log::Absent`], its path).
    name: &'static str,
    log: Log,
    /// Read as this format instead of detecting it.
    format: Option<Format>,
    /// Whether the error is the expected one.
    error: fn(&ImportError) -> bool,
    /// What the error's text must say.
    says: Vec<&'static str>,
}

fn fails(
    name: &'static str,
    log: Log,
    format: Option<Format>,
    error: fn(&ImportError) -> bool,
    says: &[&'static str],
) -> Fails {
    Fails {
        name,
        log,
        format,
        error,
        says: says.to_vec(),
    }
}

fn fails_cases() -> Vec<Fails> {
    const ABSENT: &str = "/nonexistent/dir/session.jsonl";
    let io: fn(&ImportError) -> bool = |e| matches!(e, ImportError::Io { .. });
    let empty: fn(&ImportError) -> bool = |e| matches!(e, ImportError::Empty { .. });
    let unknown: fn(&ImportError) -> bool = |e| matches!(e, ImportError::UnknownFormat { .. });
    let mut cases = vec![
        fails(ABSENT, Log::Absent, None, io, &[ABSENT]),
        fails(ABSENT, Log::Absent, Some(Format::Pi), io, &[]),
        fails(ABSENT, Log::Absent, Some(Format::OpenAi), io, &[]),
        fails(
            "empty.jsonl",
            Log::Bytes(b""),
            None,
            empty,
            &["empty.jsonl is empty"],
        ),
        fails(
            "empty.jsonl",
            Log::Bytes(b"\n  \n\t\n"),
            None,
            empty,
            &["empty.jsonl is empty"],
        ),
        fails(
            "empty.json",
            Log::Bytes(b""),
            Some(Format::Codex),
            empty,
            &[],
        ),
        fails(
            "empty.json",
            Log::Bytes(b""),
            Some(Format::MiniSweAgent),
            empty,
            &[],
        ),
        fails(
            "blob.jsonl",
            Log::Bytes(b"\x00\xff\xfe garbage"),
            None,
            |e| matches!(e, ImportError::NotUtf8 { offset: 1, .. }),
            &["not UTF-8"],
        ),
        fails(
            "blob.json",
            Log::Bytes(b"{\"messages\": [\"\xff\"]}"),
            Some(Format::OpenAi),
            |e| matches!(e, ImportError::NotUtf8 { offset: 15, .. }),
            &[],
        ),
        // A document format forced on JSONL.
        fails(
            "session.pi.jsonl",
            Log::Fixture,
            Some(Format::OpenAi),
            |e| {
                matches!(
                    e,
                    ImportError::Invalid {
                        format: Format::OpenAi,
                        ..
                    }
                )
            },
            &["not a valid openai log: not JSON"],
        ),
    ];
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
        cases.push(fails(
            "mystery.json",
            Log::Bytes(bytes),
            None,
            unknown,
            &[why, "mystery.json"],
        ));
    }
    cases
}

#[test]
fn a_log_that_cannot_be_read_is_an_error_saying_why() {
    for case in fails_cases() {
        let (_dir, path) = match case.log {
            Log::Absent => (None, PathBuf::from(case.name)),
            Log::Bytes(bytes) => {
                let (dir, path) = temp_file(case.name, bytes);
                (Some(dir), path)
            }
            Log::Fixture => (None, fixture(case.name)),
        };
        let opened = match case.format {
            Some(format) => import::open_as(&path, format),
            None => import::open(&path),
        };
        let name = format!("{} as {:?}", case.name, case.format);
        let err = opened.unwrap_err();
        assert!((case.error)(&err), "{name}: {err}");
        for says in &case.says {
            assert!(err.to_string().contains(says), "{name}: {err}");
        }
    }
}

#[test]
fn a_chat_document_forced_as_a_trajectory_reads() {
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

// ----------------------------------------------------------- damaged lines

/// A fixture with a bad line before or after it: the import warns about
/// that line and reads the rest.
struct Damaged {
    case: &'static str,
    fixture: &'static str,
    before: &'static [u8],
    after: &'static [u8],
    /// The warnings about the bad line: exactly one.
    warning: fn(&[ImportWarning]) -> Vec<&ImportWarning>,
    line: u64,
    says: &'static str,
    /// Checks of this case alone.
    more: fn(&str, &Imported),
}

#[test]
fn a_damaged_line_is_a_warning_and_the_rest_is_imported() {
    let cases = [
        Damaged {
            case: "a corrupt first line is passed over by detection",
            fixture: "session.pi.jsonl",
            before: b"{\"type\":\"sess\n",
            after: b"",
            warning: |w| w.iter().take(1).collect(),
            line: 1,
            says: "not a pi session entry",
            more: |case, imported| {
                assert_eq!(imported.stats.assistant_messages, 3, "{case}");
            },
        },
        Damaged {
            case: "a line that is not UTF-8",
            fixture: "session.pi.jsonl",
            before: b"",
            after: b"{\"type\":\"message\",\"x\":\"\xff\"}\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"after\"}}\n",
            warning: |w| warnings_with(w, "not UTF-8"),
            line: 16,
            says: "column 24",
            more: |case, imported| {
                assert_eq!(
                    imported.messages.last(),
                    Some(&Message::user("after")),
                    "{case}"
                );
            },
        },
        Damaged {
            case: "a truncated last line",
            fixture: "session.claude.jsonl",
            before: b"",
            after: b"{\"type\":\"assistant\",\"message\":{\"id\":\"msg_Z\",\"content\":[{\"type\":\"te",
            warning: |w| w.last().into_iter().collect(),
            line: 19,
            says: "EOF",
            more: |_, _| {},
        },
    ];
    for case in cases {
        let mut bytes = case.before.to_vec();
        bytes.extend(std::fs::read(fixture(case.fixture)).unwrap());
        bytes.extend(case.after);
        let (_dir, path) = temp_file("damaged.jsonl", &bytes);
        let imported = run(import::open(&path).unwrap());
        let name = case.case;
        let warning = (case.warning)(&imported.warnings);
        assert_eq!(warning.len(), 1, "{name}: {warning:?}");
        assert_eq!(warning[0].line, Some(case.line), "{name}");
        assert!(
            warning[0].what.contains(case.says),
            "{name}: {}",
            warning[0].what
        );
        (case.more)(name, &imported);
    }
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

// ------------------------------------------------------------ what imports

/// What a warning's text must say.
enum Says {
    Contains(&'static str),
    StartsWith(&'static str),
    StartsAndEnds(&'static str, &'static str),
}

impl Says {
    fn holds(&self, what: &str) -> bool {
        match self {
            Says::Contains(text) => what.contains(text),
            Says::StartsWith(text) => what.starts_with(text),
            Says::StartsAndEnds(start, end) => what.starts_with(start) && what.ends_with(end),
        }
    }
}

/// A log and what importing it must give. Fields left `None` (or empty,
/// for the lists of fields) are not checked.
struct Case {
    /// The fixture, or the name the inline `lines` are written under.
    name: &'static str,
    /// The log's lines; `None`: the fixture `name`.
    lines: Option<Vec<String>>,
    /// Read as this format instead of detecting it.
    format: Option<Format>,
    /// The format detection must find.
    detected: Option<Format>,
    /// Fields of the log's metadata ([`meta_field`]).
    meta: Vec<(&'static str, Option<&'static str>)>,
    messages: Option<Vec<Message>>,
    /// Compare `messages` with reasoning signatures as their token counts.
    priced: bool,
    /// The (usage, model) of each model call.
    calls: Option<Vec<(Option<Usage>, Option<&'static str>)>>,
    /// Each warning's line and what it says, all of them in order.
    warnings: Option<Vec<(Option<u64>, Says)>>,
    /// Counts of the import ([`stat_of`]).
    stats: Vec<(&'static str, u64)>,
    /// Checks of this case alone.
    more: fn(&str, &Meta, &Imported),
}

impl Case {
    /// The fixture `name`, nothing checked yet.
    fn fixture(name: &'static str) -> Case {
        Case {
            name,
            lines: None,
            format: None,
            detected: None,
            meta: Vec::new(),
            messages: None,
            priced: false,
            calls: None,
            warnings: None,
            stats: Vec::new(),
            more: |_, _, _| {},
        }
    }

    /// `lines` written to a file called `name`, nothing checked yet.
    fn lines<S: ToString>(name: &'static str, lines: &[S]) -> Case {
        Case {
            lines: Some(lines.iter().map(|l| l.to_string()).collect()),
            ..Case::fixture(name)
        }
    }

    /// Imports the log and runs every check the case has.
    fn check(self) {
        let name = self.name;
        let _naming = Naming(name);
        let (_dir, path) = match &self.lines {
            Some(lines) => {
                let (dir, path) = temp_file(name, lines.join("\n").as_bytes());
                (Some(dir), path)
            }
            None => (None, fixture(name)),
        };
        if let Some(format) = self.detected {
            assert_eq!(import::detect(&path).unwrap(), format, "{name}");
        }
        let import = match self.format {
            Some(format) => import::open_as(&path, format),
            None => import::open(&path),
        }
        .unwrap();
        let meta = import.meta().clone();
        for (field, value) in &self.meta {
            assert_eq!(
                meta_field(&meta, field).as_deref(),
                *value,
                "{name}: meta `{field}`"
            );
        }
        let imported = run(import);
        assert_paired(&imported.messages);
        if let Some(messages) = &self.messages {
            let got = if self.priced {
                priced(&imported.messages)
            } else {
                imported.messages.clone()
            };
            assert_eq!(&got, messages, "{name}");
        }
        if let Some(expected) = &self.calls {
            let expected: Vec<_> = expected
                .iter()
                .map(|(usage, model)| (*usage, model.map(String::from)))
                .collect();
            assert_eq!(calls(&imported.events), expected, "{name}");
        }
        if let Some(warnings) = &self.warnings {
            let lines: Vec<Option<u64>> = warnings.iter().map(|(line, _)| *line).collect();
            assert_eq!(
                lines_of(&imported.warnings),
                lines,
                "{name}: {:#?}",
                imported.warnings
            );
            for (warning, (_, says)) in imported.warnings.iter().zip(warnings) {
                assert!(says.holds(&warning.what), "{name}: {}", warning.what);
            }
        }
        for (stat, count) in &self.stats {
            assert_eq!(stat_of(&imported.stats, stat), *count, "{name}: {stat}");
        }
        (self.more)(name, &meta, &imported);
    }
}

/// The metadata field `field`, as text.
fn meta_field(meta: &Meta, field: &str) -> Option<String> {
    match field {
        "format" => Some(meta.format.name().to_string()),
        "session_id" => meta.session_id.clone(),
        "model" => meta.model.clone(),
        "provider" => meta.provider.clone(),
        "cwd" => meta.cwd.clone(),
        "budget" => meta.budget.map(|b| b.to_string()),
        "window" => meta.window.map(|w| w.to_string()),
        "started" => meta.started.map(|t| t.to_rfc3339()),
        "tools" => Some(
            meta.tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => panic!("no meta field `{field}`"),
    }
}

/// The import count `stat`.
fn stat_of(stats: &import::Stats, stat: &str) -> u64 {
    match stat {
        "records" => stats.records,
        "used" => stats.used,
        "ignored" => stats.ignored,
        "rejected" => stats.rejected,
        "assistant_messages" => stats.assistant_messages,
        "tool_calls" => stats.tool_calls,
        "tool_results" => stats.tool_results,
        "synthetic_results" => stats.synthetic_results,
        "dropped_results" => stats.dropped_results,
        "compactions" => stats.compactions,
        _ => panic!("no stat `{stat}`"),
    }
}

/// The first compaction's tokens before and summary.
fn compaction(imported: &Imported) -> Option<(Option<u64>, Option<String>)> {
    imported.events.iter().find_map(|e| match e {
        Event::Compaction {
            tokens_before,
            summary,
            ..
        } => Some((*tokens_before, summary.clone())),
        _ => None,
    })
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
fn every_log_imports_as_expected() {
    let cases = [
        cwl_session(),
        openai_chat(),
        openai_one_line("oneline.openai.json"),
        openai_one_line("array.openai.json"),
        pi_aborted(),
        pi_session(),
        claude_code_session(),
        claude_code_restored_context(),
        claude_code_attachments(),
        claude_code_context_alone(),
        claude_code_newer_lines(),
        claude_code_sub_agent(),
        codex_rollout(),
        codex_usage_from_totals(),
        codex_model_in_session_meta(),
        codex_bare_rollout(),
        codex_exec_rollout(),
        codex_parallel_calls(),
        codex_calls_counted_before_outputs(),
        mini_swe_agent(),
    ];
    for case in cases {
        case.check();
    }
}

// ---------------------------------------------------------------------- cwl

fn cwl_session() -> Case {
    Case {
        meta: vec![
            ("session_id", Some("s-1")),
            ("model", Some("test-model")),
            ("provider", Some("scripted")),
            ("cwd", Some("/tmp/w")),
            ("budget", Some("80000")),
            ("tools", Some("read")),
            ("started", Some("2025-01-02T03:04:05+00:00")),
        ],
        messages: Some(vec![
            Message::system("You are a test."),
            Message::user("Read a.txt"),
            assistant(vec![
                text("Reading."),
                call("c1", "read", r#"{"path":"a.txt"}"#),
            ]),
            result("c1", "read", "hello", false),
            assistant(vec![call("c2", "read", r#"{"path":"b.txt"}"#)]),
            missing("c2", "read"),
        ]),
        calls: Some(vec![
            (usage(120, 100, 0, 12), Some("test-model")),
            (None, Some("test-model")),
        ]),
        warnings: Some(vec![
            (Some(6), Says::Contains("not a cwl session record")),
            (Some(8), Says::Contains("frobnicate")),
            (
                Some(9),
                Says::Contains("tool call `c2` (read) has no recorded result"),
            ),
        ]),
        stats: vec![
            ("records", 9),
            ("used", 6),
            ("ignored", 1),
            ("rejected", 2),
            ("tool_calls", 2),
            ("tool_results", 2),
            ("synthetic_results", 1),
        ],
        more: |name, _, imported| {
            let cost = imported.events.iter().find_map(|e| match e {
                Event::Message {
                    cost_usd: Some(c), ..
                } => Some(*c),
                _ => None,
            });
            assert_eq!(cost, Some(0.001), "{name}");
        },
        ..Case::fixture("session.cwl.jsonl")
    }
}

// ------------------------------------------------------------------- openai

fn openai_chat() -> Case {
    Case {
        meta: vec![("model", Some("gpt-test")), ("tools", Some("read"))],
        messages: Some(vec![
            Message::system("Be brief."),
            Message::user("Look at\n[image]"),
            assistant(vec![
                thought("Two files."),
                call("a", "read", r#"{"path": "a"}"#),
                call("b", "read", r#"{"path": "b"}"#),
            ]),
            result("b", "read", "B", false),
            result("a", "read", "A", false),
            assistant(vec![call("c", "read", "{}")]),
            missing("c", "read"),
            Message::user("stop"),
            Message::assistant_text("Done."),
        ]),
        // The user's "stop" waits for the call's run to end, at the next
        // assistant message; the warnings of the entries between come first.
        warnings: Some(vec![
            (
                None,
                Says::StartsAndEnds("tools[1]: a tool must be {", "tool skipped"),
            ),
            (None, Says::Contains("unknown tool call `zzz`")),
            (None, Says::StartsWith("messages[8]: unknown role `wizard`")),
            (
                None,
                Says::StartsWith("messages[9]: assistant message with no content"),
            ),
            (
                None,
                Says::Contains("tool call `c` (read) has no recorded result"),
            ),
        ]),
        stats: vec![
            ("records", 11),
            ("used", 9),
            ("rejected", 2),
            ("dropped_results", 1),
            ("synthetic_results", 1),
        ],
        more: |name, _, imported| {
            assert_eq!(
                calls(&imported.events)[0].1.as_deref(),
                Some("gpt-test"),
                "{name}"
            );
        },
        ..Case::fixture("chat.openai.json")
    }
}

fn openai_one_line(name: &'static str) -> Case {
    Case {
        messages: Some(vec![Message::user("hi"), Message::assistant_text("hello")]),
        warnings: Some(Vec::new()),
        ..Case::fixture(name)
    }
}

// ----------------------------------------------------------------------- pi

/// Signatures and calls that ended in error are dropped.
fn pi_aborted() -> Case {
    Case {
        messages: Some(vec![
            Message::user("edit it"),
            Message::user("again"),
            assistant(vec![thought("ok"), text("done")]),
        ]),
        warnings: Some(vec![
            (Some(3), Says::Contains("ended `error`, error: terminated")),
            (Some(5), Says::Contains("ended `aborted`")),
        ]),
        ..Case::fixture("aborted.pi.jsonl")
    }
}

fn pi_session() -> Case {
    Case {
        meta: vec![
            ("session_id", Some("pi-1")),
            ("model", Some("claude-a")),
            ("provider", Some("anthropic")),
            ("tools", Some("")),
        ],
        messages: Some(vec![
            Message::user("list files"),
            assistant(vec![
                thought("ls it"),
                // Arguments are kept byte for byte, spacing included.
                call("t1", "bash", r#"{"command":"ls", "timeout": 5}"#),
            ]),
            result("t1", "bash", "a\nb", false),
            assistant(vec![
                text("two reads"),
                call("t2", "read", r#"{"path":"a"}"#),
                call("t3", "read", r#"{"path":"b"}"#),
            ]),
            result("t3", "read", "B", true),
            missing("t2", "read"),
            Message::user("Ran `pwd`\n```\n/w\n```"),
            Message::assistant_text("done"),
        ]),
        // input = input + cacheRead + cacheWrite; model_change applies to later calls.
        calls: Some(vec![
            (usage(350, 300, 40, 20), Some("claude-a")),
            (usage(5, 0, 0, 5), Some("claude-b")),
            (usage(1, 0, 0, 1), Some("claude-b")),
        ]),
        warnings: Some(vec![
            (Some(7), Says::Contains("not a pi session entry")),
            (Some(8), Says::Contains("unknown tool call `ghost`")),
            (
                Some(9),
                Says::Contains("no content (stop reason `aborted`, error: Request was aborted)"),
            ),
            (
                Some(10),
                Says::Contains("tool call `t2` (read) has no recorded result"),
            ),
            (
                Some(14),
                Says::Contains("unknown entry type `branch_summary`"),
            ),
        ]),
        stats: vec![
            ("records", 15),
            ("used", 11),
            ("ignored", 1),
            ("rejected", 3),
            ("tool_calls", 3),
            ("tool_results", 3),
            ("synthetic_results", 1),
            ("dropped_results", 1),
        ],
        more: |name, _, imported| {
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
                Some((Some(1234), Some("We listed files.".into()), true)),
                "{name}"
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
            assert_eq!(kinds[kinds.len() - 2], "compaction", "{name}");
        },
        ..Case::fixture("session.pi.jsonl")
    }
}

// -------------------------------------------------------------- claude code

/// Split messages are merged and results paired.
fn claude_code_session() -> Case {
    Case {
        meta: vec![
            ("session_id", Some("cc-1")),
            ("model", Some("claude-x")),
            ("cwd", Some("/proj")),
        ],
        messages: Some(vec![
            Message::user("fix the bug"),
            // Three lines sharing message.id msg_A, results interleaved.
            assistant(vec![
                // The signature is opaque: dropped, never counted.
                thought("look first"),
                call("toolu_1", "Read", r#"{"file_path": "/proj/a.rs"}"#),
                call("toolu_2", "Grep", r#"{"pattern":"bug"}"#),
            ]),
            result("toolu_1", "Read", "fn main() {}", false),
            result("toolu_2", "Grep", "a.rs:1: bug", false),
            assistant(vec![
                text("Editing."),
                call("toolu_3", "Edit", r#"{"file_path":"/proj/a.rs"}"#),
            ]),
            missing("toolu_3", "Edit"),
            Message::user("[Request interrupted by user for tool use]"),
            // The compaction summary is the compaction's text, not a turn.
            Message::assistant_text("All done."),
        ]),
        // Usage of the last line of the call; cache reads and writes count as input.
        calls: Some(vec![
            (usage(1103, 1000, 100, 60), Some("claude-x")),
            (usage(1202, 1200, 0, 30), Some("claude-x")),
            (usage(1, 0, 0, 3), Some("claude-x")),
        ]),
        warnings: Some(vec![
            (Some(10), Says::Contains("not a Claude Code session line")),
            (Some(12), Says::Contains("unknown tool call `toolu_9`")),
            (
                Some(11),
                Says::Contains("`toolu_3` (Edit) has no recorded result"),
            ),
            (Some(16), Says::Contains("unknown line type `mystery`")),
        ]),
        // Ignored: snapshot, progress, sidechain, synthetic message, repeated uuid.
        stats: vec![
            ("records", 18),
            ("used", 11),
            ("ignored", 5),
            ("rejected", 2),
            ("assistant_messages", 3),
        ],
        more: |name, _, imported| {
            assert_eq!(
                compaction(imported),
                Some((
                    Some(155_000),
                    Some("This session is being continued. Summary: fixed a.rs.".into())
                )),
                "{name}"
            );
        },
        ..Case::fixture("session.claude.jsonl")
    }
}

/// Context restored after a compaction is not counted again.
fn claude_code_restored_context() -> Case {
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
    let read = "Called the Read tool with the following input: {\"file_path\":\"/p/a.py\"}\nResult of calling the Read tool:\n1\tx = 1";
    Case {
        messages: Some(vec![
            Message::user("read a.py"),
            Message::assistant_text("Read it."),
            // The file re-attached by the compaction is left out; the
            // queued prompt is a user turn all the same.
            Message::user("now b.py"),
            Message::assistant_text("On it."),
            Message::user(format!("and c.py\n{read}")),
        ]),
        warnings: Some(Vec::new()),
        ..Case::lines("s.jsonl", &lines)
    }
}

/// Attachments join the turn and summaries stay out of it.
fn claude_code_attachments() -> Case {
    let file = "Called the Read tool with the following input: {\"file_path\":\"/p/calc.py\"}\nResult of calling the Read tool:\n1\tdef add(a, b):\n2\t    return a - b";
    Case {
        meta: vec![("model", Some("claude-y"))],
        messages: Some(vec![
            Message::user(format!(
                "what is in @calc.py\n{file}\n- review: reviews code"
            )),
            assistant(vec![
                thought("check the dir"),
                call(
                    "toolu_1",
                    "Bash",
                    r#"{"command":"ls nope","description":"List a missing dir"}"#,
                ),
            ]),
            result(
                "toolu_1",
                "Bash",
                // Hook context after a tool result is sent inside it.
                "Exit code 2\nls: cannot access 'nope'\n\nLint: clean",
                true,
            ),
            // A prompt queued while the agent worked: a user turn.
            Message::user("also look at util.py"),
            Message::assistant_text("add subtracts; util.py not read yet."),
            Message::user(
                "<command-name>/compact</command-name>\n<local-command-stdout>Compacted</local-command-stdout>\nand now?",
            ),
            assistant(vec![thought(""), text("Still subtracts.")]),
        ]),
        calls: Some(vec![
            (usage(903, 0, 900, 52), Some("claude-y")),
            (usage(963, 900, 60, 12), Some("claude-y")),
            (usage(132, 100, 30, 8), Some("claude-y")),
        ]),
        warnings: Some(Vec::new()),
        // Ignored: the queue operation, the empty hook success, the mode line,
        // the date change.
        stats: vec![
            ("records", 19),
            ("ignored", 4),
            ("rejected", 0),
            ("compactions", 1),
        ],
        more: |name, _, imported| {
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
                ],
                "{name}"
            );
        },
        ..Case::fixture("attachments.claude.jsonl")
    }
}

/// Context without a turn or result to join is a system message.
fn claude_code_context_alone() -> Case {
    let lines = [
        r#"{"type":"user","isSidechain":false,"uuid":"u1","message":{"role":"user","content":"hi"}}"#,
        r#"{"type":"assistant","isSidechain":false,"uuid":"a1","message":{"id":"m1","role":"assistant","model":"c","content":[{"type":"text","text":"hello"}]}}"#,
        r#"{"type":"attachment","isSidechain":false,"uuid":"t1","attachment":{"type":"edited_text_file","filename":"/p/a.py","snippet":"1\tx = 2"}}"#,
    ];
    Case {
        format: Some(Format::ClaudeCode),
        messages: Some(vec![
            Message::user("hi"),
            Message::assistant_text("hello"),
            Message::system("1\tx = 2"),
        ]),
        warnings: Some(Vec::new()),
        ..Case::lines("s.jsonl", &lines)
    }
}

/// Newer Claude Code lines give what the model was sent.
fn claude_code_newer_lines() -> Case {
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
    Case {
        detected: Some(Format::ClaudeCode),
        messages: Some(vec![
            Message::user("hi\n<system-reminder>\nToday's date is 2026-11-25.\n</system-reminder>"),
            Message::assistant_text("hello"),
        ]),
        warnings: Some(Vec::new()),
        stats: vec![("rejected", 0)],
        ..Case::lines("s.jsonl", &lines)
    }
}

/// A sub-agent's file reads as a session.
fn claude_code_sub_agent() -> Case {
    Case {
        meta: vec![("model", Some("claude-small"))],
        messages: Some(vec![
            Message::user("find add"),
            assistant(vec![call(
                "toolu_s1",
                "Bash",
                r#"{"command":"grep -rn 'def add' ."}"#,
            )]),
            result("toolu_s1", "Bash", "calc.py:4:def add(a, b):", false),
            Message::assistant_text("In calc.py."),
        ]),
        warnings: Some(Vec::new()),
        stats: vec![("ignored", 0)],
        ..Case::fixture("agent.claude.jsonl")
    }
}

// -------------------------------------------------------------------- codex

/// Calls are grouped and token counts attached.
fn codex_rollout() -> Case {
    let patch = serde_json::json!({"input": "*** Begin Patch\n*** Add File: t.rs\n+#[test] fn t() {}\n*** End Patch"}).to_string();
    Case {
        meta: vec![
            ("session_id", Some("cx-1")),
            ("model", Some("gpt-5-codex")),
            ("provider", Some("openai")),
            ("cwd", Some("/repo")),
            // token_count's model_context_window.
            ("window", Some("272000")),
        ],
        messages: Some(vec![
            Message::system("<permissions>sandboxed</permissions>"),
            Message::user("add a test"),
            assistant(vec![
                // The ciphertext counts as the call's 30 reasoning tokens.
                Block::Reasoning {
                    text: "**Looking around**".into(),
                    signature: Some(" xxx".repeat(30)),
                },
                call(
                    "call_1",
                    "shell_command",
                    r#"{"command":"ls","workdir":"/repo"}"#,
                ),
                call("call_2", "shell_command", r#"{"command":"cat x"}"#),
            ]),
            result(
                "call_2",
                "shell_command",
                r#"{"output":"cat: x: No such file","metadata":{"exit_code":1,"duration_seconds":0.0}}"#,
                true,
            ),
            result(
                "call_1",
                "shell_command",
                "Exit code: 0\nOutput:\nsrc\n",
                false,
            ),
            assistant(vec![call("call_3", "apply_patch", &patch)]),
            result(
                "call_3",
                "apply_patch",
                r#"{"output":"Success.","metadata":{"exit_code":0,"duration_seconds":0.0}}"#,
                false,
            ),
            assistant(vec![call(
                "call_4",
                "shell_command",
                r#"{"command":"cargo test"}"#,
            )]),
            missing("call_4", "shell_command"),
            Message::assistant_text("Added the test."),
        ]),
        // A token_count after the call's items, one before them (older Codex),
        // a repeated one, and one with the call still open.
        calls: Some(vec![
            (usage(5000, 4000, 0, 50), Some("gpt-5-codex")),
            (usage(5500, 4900, 0, 100), Some("gpt-5-codex")),
            (usage(6000, 5100, 0, 20), Some("gpt-5-codex")),
            (usage(500, 0, 0, 10), Some("gpt-5-codex")),
        ]),
        warnings: Some(vec![
            (Some(13), Says::Contains("unknown tool call `call_zz`")),
            (Some(18), Says::Contains("not a Codex rollout line")),
            (
                Some(20),
                Says::Contains("`call_4` (shell_command) has no recorded result"),
            ),
            (
                Some(24),
                Says::Contains("unknown response item type `teleport`"),
            ),
            (Some(26), Says::Contains("unknown line type `mystery`")),
        ]),
        stats: vec![
            ("records", 26),
            ("rejected", 3),
            ("assistant_messages", 4),
            ("tool_calls", 4),
            ("tool_results", 4),
        ],
        more: |name, _, imported| {
            let summary = imported.events.iter().find_map(|e| match e {
                Event::Compaction { summary, .. } => Some(summary.clone()),
                _ => None,
            });
            assert_eq!(summary, Some(Some("Summary: added t.rs.".into())), "{name}");
        },
        ..Case::fixture("rollout.codex.jsonl")
    }
}

/// Usage falls back to differences of totals.
fn codex_usage_from_totals() -> Case {
    let lines = [
        r#"{"type":"session_meta","payload":{"id":"x"}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]}}"#,
        r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":5}}}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"more"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]}}"#,
        r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":250,"cached_input_tokens":90,"output_tokens":12}}}}"#,
    ];
    Case {
        calls: Some(vec![
            (usage(100, 0, 0, 5), None),
            (usage(150, 90, 0, 7), None),
        ]),
        warnings: Some(Vec::new()),
        ..Case::lines("r.jsonl", &lines)
    }
}

/// A model named only in `session_meta` is the session's model.
fn codex_model_in_session_meta() -> Case {
    let lines = [
        r#"{"type":"session_meta","payload":{"id":"d1","model":"gpt-5.4","originator":"Codex Desktop"}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]}}"#,
        r#"{"type":"turn_context","payload":{"model":"gpt-5.5"}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"more"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]}}"#,
    ];
    Case {
        meta: vec![
            ("model", Some("gpt-5.4")),
            // No token_count names a window.
            ("window", None),
        ],
        warnings: Some(Vec::new()),
        more: |name, _, imported| {
            let models: Vec<_> = calls(&imported.events).into_iter().map(|c| c.1).collect();
            assert_eq!(
                models,
                vec![Some("gpt-5.4".to_string()), Some("gpt-5.5".to_string())],
                "{name}: a later turn_context names the model of the calls after it"
            );
        },
        ..Case::lines("r.jsonl", &lines)
    }
}

/// A rollout from before the envelope imports.
fn codex_bare_rollout() -> Case {
    Case {
        meta: vec![
            ("format", Some("codex")),
            ("session_id", Some("0196a1b2-0000-7000-8000-00000000b4e1")),
            ("provider", Some("openai")),
            // Rollouts of that era name no model.
            ("model", None),
        ],
        messages: Some(vec![
            Message::system("Follow the repository's AGENTS.md."),
            Message::user("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"),
            Message::user("why does the build fail?"),
            assistant(vec![
                thought("**Checking the build**"),
                call(
                    "call_1",
                    "shell",
                    r#"{"command":["bash","-lc","cargo build"],"workdir":"/repo"}"#,
                ),
            ]),
            result(
                "call_1",
                "shell",
                r#"{"output":"error[E0425]: cannot find value `x`\n","metadata":{"exit_code":101,"duration_seconds":1.2}}"#,
                true,
            ),
            assistant(vec![call(
                "call_2",
                "shell",
                r#"{"command":["bash","-lc","sed -n 1,40p src/main.rs"]}"#,
            )]),
            result(
                "call_2",
                "shell",
                r#"{"output":"fn main() { println!(\"{}\", x); }\n","metadata":{"exit_code":0,"duration_seconds":0.0}}"#,
                false,
            ),
            Message::assistant_text("`x` is never defined in src/main.rs."),
        ]),
        // The state markers are bookkeeping; a line that is neither a marker,
        // the header nor an item is reported; the ciphertext with no logged
        // token count is noted.
        warnings: Some(vec![
            (Some(14), Says::Contains("line has no `type`")),
            (Some(6), Says::Contains("encrypted reasoning")),
        ]),
        stats: vec![
            ("records", 14),
            ("rejected", 1),
            ("assistant_messages", 3),
            ("tool_calls", 2),
            ("tool_results", 2),
        ],
        more: |name, meta, _| {
            assert!(meta.started.is_some(), "{name}: the header's timestamp");
        },
        ..Case::fixture("bare.codex.jsonl")
    }
}

/// Reasoning is priced from the logged counts and exit codes read from
/// the output's header.
fn codex_exec_rollout() -> Case {
    let patch = serde_json::json!({"input": "*** Begin Patch\n*** Update File: calc.py\n@@\n def mul(a, b):\n-    return a + b\n+    return a * b\n*** End Patch\n"}).to_string();
    Case {
        meta: vec![("session_id", Some("cx-2")), ("model", Some("gpt-5.5"))],
        priced: true,
        messages: Some(vec![
            // Sent as the first developer message, logged in session_meta.
            Message::system("You are a coding agent."),
            Message::user("fix mul"),
            assistant(vec![
                // The ciphertext is replaced by the logged 64 reasoning tokens.
                Block::Reasoning {
                    text: "**Find mul**".into(),
                    signature: Some("64 tokens".into()),
                },
                call(
                    "call_1",
                    "exec_command",
                    r#"{"cmd":"grep -n 'def mul' calc.py","workdir":"/r"}"#,
                ),
            ]),
            result(
                "call_1",
                "exec_command",
                "Chunk ID: ab12\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 7\nOutput:\n8:def mul(a, b):\n",
                false,
            ),
            assistant(vec![call("call_2", "apply_patch", &patch)]),
            result(
                "call_2",
                "apply_patch",
                "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM calc.py\n",
                false,
            ),
            assistant(vec![call(
                "call_3",
                "exec_command",
                r#"{"cmd":"python3 test_calc.py"}"#,
            )]),
            // The header says 1; the output's own "Exit code: 0" is not read.
            result(
                "call_3",
                "exec_command",
                "Chunk ID: cd34\nWall time: 0.0100 seconds\nProcess exited with code 1\nOriginal token count: 9\nOutput:\nAssertionError: Exit code: 0\n",
                true,
            ),
            assistant(vec![call(
                "call_4",
                "update_plan",
                r#"{"plan":[{"step":"Fix mul","status":"completed"}]}"#,
            )]),
            result("call_4", "update_plan", "Plan updated", false),
            // The call that wrote the compaction summary is not a turn.
            // No token count for this call: its reasoning counts as nothing.
            assistant(vec![thought(""), text("Done.")]),
        ]),
        calls: Some(vec![
            (usage(900, 0, 0, 80), Some("gpt-5.5")),
            (usage(950, 900, 0, 40), Some("gpt-5.5")),
            (usage(1000, 950, 0, 20), Some("gpt-5.5")),
            (usage(1050, 1000, 0, 10), Some("gpt-5.5")),
            (None, Some("gpt-5.6-sol")),
        ]),
        warnings: Some(vec![(
            Some(24),
            Says::StartsWith(
                "1 encrypted reasoning item(s) without a logged reasoning token count",
            ),
        )]),
        stats: vec![("records", 25), ("rejected", 0), ("compactions", 1)],
        more: |name, _, imported| {
            let summary = imported.events.iter().find_map(|e| match e {
                Event::Compaction { summary, .. } => summary.clone(),
                _ => None,
            });
            assert_eq!(
                summary.as_deref(),
                Some("Another model produced this summary:\nSummary: mul fixed."),
                "{name}"
            );
        },
        ..Case::fixture("exec.codex.jsonl")
    }
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
/// (`C O C O`), and each shell output as JSON where the model got a text:
/// the calls are one response and the outputs what the model got.
fn codex_parallel_calls() -> Case {
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
    Case {
        messages: Some(vec![
            Message::user("list the files"),
            assistant(vec![
                call("plan_1", "update_plan", "{\"plan\":[]}"),
                call("ls_1", "shell", "{\"command\":[\"ls\"]}"),
            ]),
            result("plan_1", "update_plan", "Plan updated", false),
            result(
                "ls_1",
                "shell",
                "Exit code: 0\nWall time: 0 seconds\nOutput:\nsrc\n",
                false,
            ),
            assistant(vec![text("src holds the code.")]),
        ]),
        // Two model calls, not three.
        stats: vec![("assistant_messages", 2)],
        ..Case::lines("rollout-057.jsonl", &lines)
    }
}

/// A Codex rollout that logs each response's `token_count` after its items
/// and before its outputs, with nothing else between responses: each
/// response is a model call of its own.
fn codex_calls_counted_before_outputs() -> Case {
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
    Case {
        more: |name, _, imported| {
            let calls: Vec<usize> = imported
                .messages
                .iter()
                .filter_map(|m| match m {
                    Message::Assistant { content } => Some(content.len()),
                    _ => None,
                })
                .collect();
            assert_eq!(calls, [1, 1], "{name}: {:?}", imported.messages);
        },
        ..Case::lines("rollout-066.jsonl", &lines)
    }
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

// ----------------------------------------------------------- mini-swe-agent

/// Actions become bash calls.
fn mini_swe_agent() -> Case {
    Case {
        meta: vec![
            ("session_id", Some("demo__demo-1")),
            ("model", Some("test/model-1")),
        ],
        messages: Some(vec![
            Message::system("You run bash."),
            Message::user("<pr_description>Fix it</pr_description>"),
            assistant(vec![
                text("THOUGHT: look around."),
                call("mswe-1", "bash", r#"{"command":"ls -la"}"#),
            ]),
            result(
                "mswe-1",
                "bash",
                "<returncode>0</returncode>\n<output>\na.py\n</output>",
                false,
            ),
            Message::assistant_text("Two at once.\n\n```bash\necho 1\n```\n\n```bash\necho 2\n```"),
            Message::user(
                "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.",
            ),
            assistant(vec![
                text("THOUGHT: run tests."),
                call("mswe-2", "bash", r#"{"command":"python -m pytest -q"}"#),
            ]),
            result(
                "mswe-2",
                "bash",
                "<returncode>1</returncode>\n<output>\n1 failed\n</output>",
                true,
            ),
            assistant(vec![call(
                "mswe-3",
                "bash",
                r#"{"command":"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}"#,
            )]),
            missing("mswe-3", "bash"),
        ]),
        warnings: Some(vec![
            (
                None,
                Says::StartsWith("messages[8]: unknown role `narrator`"),
            ),
            (
                None,
                Says::Contains("`mswe-3` (bash) has no recorded result"),
            ),
        ]),
        stats: vec![
            ("records", 10),
            ("used", 9),
            ("rejected", 1),
            ("assistant_messages", 4),
        ],
        more: |name, _, imported| {
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
                )),
                "{name}"
            );
        },
        ..Case::fixture("task.traj.json")
    }
}
