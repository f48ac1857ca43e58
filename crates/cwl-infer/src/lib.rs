//! Inferred episodes for logs whose agent never called `delimiter`.
//!
//! Runs of read-only tool use (reads, searches, listings, read-only shell
//! commands such as `cat`, `ls`, `grep`, `git status`/`log`/`diff`) become
//! `expl` episodes; runs of mutating use become `act` episodes; a run of
//! more than [`MAX_EPISODE_CALLS`] calls is split. A user turn
//! ends the open episode and starts a new task. Steps without tool calls,
//! or whose calls neither explore nor change the workspace (planning, task
//! lists, questions to the user: [`Access::Neutral`]), stay in whatever
//! episode is open.
//!
//! An act depends on the expl episodes its calls *touch*, in any earlier
//! task ([`touch`]):
//! - for each path it names (argument keys such as `file_path`/`path`,
//!   `apply_patch` file headers, path-like words of shell commands): the
//!   latest expl that named the same file (absolute and relative spellings
//!   agree), or, when none did, the latest expl that listed or searched the
//!   deepest directory containing it (`.` and the like never count);
//! - for each symbol an expl searched (identifier runs of 4+ characters of
//!   a `pattern`/`query`, or of a read-only shell command's operands) that
//!   is also an identifier run of the act's arguments (an edit's old or new
//!   text, a command): the latest expl that searched it.
//!
//! Only the latest expl per file or symbol counts: an older read of the
//! same file is superseded. When a step touches nothing known, it stays in
//! the open act, or starts one on the session's latest expl; with no expl
//! at all it stays unannotated, which the engine keeps conservatively. A
//! mutating step that touches an expl the open act does not depend on
//! closes it and starts a new act on what the step touches, since the
//! engine takes an act's dependencies when it starts. So in a long
//! single-prompt session an act pins only what it used, not every earlier
//! exploration.
//!
//! Descriptions are built from the calls (paths, patterns, commands), never
//! by a model, so the same log always yields the same annotations. The
//! annotations are applied out of band ([`cwl::Context::annotate`]) and
//! cost no tokens. This is also what lets CWL run under harnesses that do
//! not annotate.
//!
//! It depends on the engine only (`cwl`): never on a provider, the session
//! store, the agent or a front end.

mod describe;
pub mod shell;
pub mod touch;

pub use describe::{Access, CallInfo, call_info};

use cwl::{Annotation, DELIMITER, EpisodeKind, Message};

use touch::{Footprints, Touch};

/// Longest inferred description, in characters.
pub const MAX_DESCRIPTION: usize = 240;

/// Most tool calls in one inferred episode: a longer run is split, as an
/// agent annotating its own work ends one exploration and starts the next,
/// so a long read-only run never becomes one active episode that nothing
/// may evict.
pub const MAX_EPISODE_CALLS: usize = 8;

/// Most characters of tool output in one inferred episode (about 8k
/// tokens): a run of a few large reads is split too, for the same reason.
pub const MAX_EPISODE_CHARS: usize = 32_000;

#[derive(Debug)]
struct Open {
    name: String,
    kind: EpisodeKind,
    labels: Vec<String>,
    calls: usize,
    chars: usize,
    touches: Vec<Touch>,
    dependencies: Vec<String>,
}

/// Turns a message stream into episode annotations, one message at a time.
///
/// Call [`Inferrer::before`] with each message *before* it is appended;
/// apply the returned annotations first, then append the message.
#[derive(Debug, Default)]
pub struct Inferrer {
    disabled: bool,
    /// Tool output an episode may gather before the next call starts
    /// another; `None`: [`MAX_EPISODE_CHARS`].
    max_chars: Option<usize>,
    task: u32,
    episodes: u32,
    open: Option<Open>,
    footprints: Footprints,
}

impl Inferrer {
    /// A fresh inferrer at the start of a session.
    pub fn new() -> Self {
        Self::default()
    }

    /// An inferrer whose episodes gather at most about `chars` characters
    /// of tool output (at least one call's), for a budget too small for
    /// [`MAX_EPISODE_CHARS`]: the open episode cannot be evicted, so it
    /// must stay well under the budget.
    pub fn with_max_chars(chars: usize) -> Self {
        Inferrer {
            max_chars: Some(chars),
            ..Self::default()
        }
    }

    /// Whether inference stopped because the log annotates itself.
    pub fn disabled(&self) -> bool {
        self.disabled
    }

    /// The annotations to apply before `message` is appended.
    pub fn before(&mut self, message: &Message) -> Vec<Annotation> {
        if self.disabled {
            return Vec::new();
        }
        match message {
            Message::User { .. } => {
                let out = self.close();
                self.task += 1;
                out
            }
            Message::System { .. } => Vec::new(),
            Message::ToolResult(result) => {
                self.result(result);
                Vec::new()
            }
            Message::Assistant { .. } => {
                if message.tool_calls().any(|c| c.name == DELIMITER) {
                    self.disabled = true;
                    return self.close();
                }
                let calls: Vec<CallInfo> = message
                    .tool_calls()
                    .map(|c| call_info(&c.name, &c.arguments))
                    .filter(|c| c.access != Access::Neutral)
                    .collect();
                if calls.is_empty() {
                    return Vec::new();
                }
                let kind = if calls.iter().all(|c| c.access == Access::Read) {
                    EpisodeKind::Expl
                } else {
                    EpisodeKind::Act
                };
                let touches: Vec<Touch> = message
                    .tool_calls()
                    .map(|c| touch::touch(&c.arguments))
                    .collect();
                let mut out = Vec::new();
                let max_chars = self.max_chars.unwrap_or(MAX_EPISODE_CHARS);
                let full = self
                    .open
                    .as_ref()
                    .is_some_and(|open| open.calls >= MAX_EPISODE_CALLS || open.chars >= max_chars);
                if full || self.open.as_ref().is_none_or(|open| open.kind != kind) {
                    out.extend(self.close());
                    out.extend(self.start(kind, &touches));
                } else if kind == EpisodeKind::Act {
                    let needed = self.footprints.dependencies(&touches);
                    let open = self.open.as_ref().map_or(&[][..], |o| &o.dependencies[..]);
                    if needed.iter().any(|d| !open.contains(d)) {
                        out.extend(self.close());
                        out.extend(self.start(kind, &touches));
                    }
                }
                if let Some(open) = &mut self.open {
                    open.calls += calls.len();
                    for call in calls {
                        if !open.labels.contains(&call.label) {
                            open.labels.push(call.label);
                        }
                    }
                    if open.kind == EpisodeKind::Expl {
                        open.touches.extend(touches);
                    }
                }
                out
            }
        }
    }

    /// Counts a tool result toward the open episode's size (what
    /// [`Inferrer::before`] does for a result message; a harness that
    /// pairs results itself calls this instead).
    pub fn result(&mut self, result: &cwl::ToolResult) {
        if let Some(open) = &mut self.open {
            open.chars += result.content.len();
        }
    }

    /// Closes the open episode, if any, and goes on inferring: for a
    /// harness whose model opens an episode of its own at times and works
    /// outside one at others (that message is then not given to
    /// [`Inferrer::before`], which would stop inference).
    pub fn close_open(&mut self) -> Vec<Annotation> {
        self.close()
    }

    /// Closes the open episode at the end of the session.
    pub fn finish(&mut self) -> Vec<Annotation> {
        if self.disabled {
            Vec::new()
        } else {
            self.close()
        }
    }

    fn start(&mut self, kind: EpisodeKind, touches: &[Touch]) -> Option<Annotation> {
        let dependencies = match kind {
            EpisodeKind::Expl => Vec::new(),
            EpisodeKind::Act => {
                let touched = self.footprints.dependencies(touches);
                if touched.is_empty() {
                    vec![self.footprints.latest()?.to_string()]
                } else {
                    touched
                }
            }
        };
        self.episodes += 1;
        let name = format!("t{}-{}-{}", self.task, kind, self.episodes);
        self.open = Some(Open {
            name: name.clone(),
            kind,
            labels: Vec::new(),
            calls: 0,
            chars: 0,
            touches: Vec::new(),
            dependencies: dependencies.clone(),
        });
        Some(Annotation::Start {
            name,
            kind,
            dependencies,
        })
    }

    fn close(&mut self) -> Vec<Annotation> {
        let Some(open) = self.open.take() else {
            return Vec::new();
        };
        let description = match open.kind {
            EpisodeKind::Act => None,
            EpisodeKind::Expl => {
                self.footprints.add(&open.name, &open.touches);
                Some(describe(open.calls, &open.labels))
            }
        };
        vec![Annotation::End {
            name: Some(open.name),
            description,
        }]
    }
}

/// `3 read-only calls: read src/a.rs; searched "x"; … (+2 more)`, at most
/// [`MAX_DESCRIPTION`] characters.
fn describe(calls: usize, labels: &[String]) -> String {
    let plural = if calls == 1 { "" } else { "s" };
    let mut out = format!("{calls} read-only call{plural}:");
    for (i, label) in labels.iter().enumerate() {
        let more = labels.len() - i;
        let tail = format!(" (+{more} more)");
        if out.chars().count() + label.chars().count() + 2 + tail.len() > MAX_DESCRIPTION
            && more > 1
        {
            out.push_str(&tail);
            return out;
        }
        out.push_str(if i == 0 { " " } else { "; " });
        out.push_str(label);
    }
    cwl::shorten(&out, MAX_DESCRIPTION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Block, ToolCall};

    fn step(calls: &[(&str, &str)]) -> Message {
        Message::Assistant {
            content: calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| {
                    Block::ToolCall(ToolCall::new(format!("c{i}"), *name, *args))
                })
                .collect(),
        }
    }

    fn run(messages: &[Message]) -> Vec<Annotation> {
        let mut inferrer = Inferrer::new();
        let mut out = Vec::new();
        for m in messages {
            out.extend(inferrer.before(m));
        }
        out.extend(inferrer.finish());
        out
    }

    #[test]
    fn reads_then_edits_make_expl_then_dependent_act() {
        let out = run(&[
            Message::user("fix the bug"),
            step(&[("grep", r#"{"pattern":"panic"}"#)]),
            step(&[("read", r#"{"path":"src/a.rs"}"#)]),
            step(&[("edit", r#"{"path":"src/a.rs"}"#)]),
            step(&[("bash", r#"{"command":"cargo test"}"#)]),
            Message::assistant_text("done"),
        ]);
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(
            out[0],
            Annotation::Start {
                name: "t1-expl-1".into(),
                kind: EpisodeKind::Expl,
                dependencies: vec![]
            }
        );
        assert_eq!(
            out[1],
            Annotation::End {
                name: Some("t1-expl-1".into()),
                description: Some("2 read-only calls: searched \"panic\"; read src/a.rs".into())
            }
        );
        assert_eq!(
            out[2],
            Annotation::Start {
                name: "t1-act-2".into(),
                kind: EpisodeKind::Act,
                dependencies: vec!["t1-expl-1".into()]
            }
        );
        assert_eq!(
            out[3],
            Annotation::End {
                name: Some("t1-act-2".into()),
                description: None
            }
        );
    }

    #[test]
    fn acts_depend_on_their_own_task_and_fall_back_to_the_latest_expl() {
        let out = run(&[
            Message::user("task one"),
            step(&[("ls", r#"{"path":"."}"#)]),
            Message::user("task two"),
            step(&[("write", r#"{"path":"b.txt"}"#)]),
            step(&[("cat", r#"{"path":"b.txt"}"#)]),
            step(&[("edit", r#"{"path":"b.txt"}"#)]),
        ]);
        let deps: Vec<Vec<String>> = out
            .iter()
            .filter_map(|a| match a {
                Annotation::Start {
                    kind: EpisodeKind::Act,
                    dependencies,
                    ..
                } => Some(dependencies.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            deps,
            vec![vec!["t1-expl-1".to_string()], vec!["t2-expl-3".to_string()]]
        );
    }

    fn act_dependencies(out: &[Annotation]) -> Vec<(String, Vec<String>)> {
        out.iter()
            .filter_map(|a| match a {
                Annotation::Start {
                    name,
                    kind: EpisodeKind::Act,
                    dependencies,
                } => Some((name.clone(), dependencies.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn in_one_long_task_an_act_depends_only_on_what_it_touches() {
        let out = run(&[
            Message::user("refactor everything"),
            step(&[("read", r#"{"path":"src/a.rs"}"#)]),
            step(&[("edit", r#"{"path":"src/a.rs","old_string":"x"}"#)]),
            step(&[("grep", r#"{"pattern":"parse_budget","path":"crates"}"#)]),
            step(&[("read", r#"{"path":"src/b.rs"}"#)]),
            step(&[("edit", r#"{"path":"/repo/src/b.rs","old_string":"y"}"#)]),
            step(&[(
                "edit",
                r#"{"path":"src/b.rs","old_string":"parse_budget(1)"}"#,
            )]),
            step(&[("edit", r#"{"path":"src/a.rs","old_string":"z"}"#)]),
            step(&[("bash", r#"{"command":"cargo test"}"#)]),
            step(&[("ls", r#"{"path":"src/net"}"#)]),
            step(&[(
                "write",
                r#"{"path":"src/net/http.rs","content":"fn get() {}"}"#,
            )]),
            step(&[("bash", r#"{"command":"rm -rf target/tmp"}"#)]),
        ]);
        // The grep and the read of b.rs are one expl; the second edit of b.rs
        // touches only it and stays in its act; `cargo test` and `rm` touch
        // nothing known and stay in the open act.
        assert_eq!(
            act_dependencies(&out),
            vec![
                ("t1-act-2".to_string(), vec!["t1-expl-1".to_string()]),
                ("t1-act-4".to_string(), vec!["t1-expl-3".to_string()]),
                ("t1-act-5".to_string(), vec!["t1-expl-1".to_string()]),
                ("t1-act-7".to_string(), vec!["t1-expl-6".to_string()]),
            ],
            "{out:#?}"
        );
    }

    #[test]
    fn edits_before_any_exploration_stay_unannotated() {
        let out = run(&[Message::user("go"), step(&[("write", r#"{"path":"a"}"#)])]);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn an_annotated_log_disables_inference() {
        let mut inferrer = Inferrer::new();
        assert_eq!(
            inferrer
                .before(&step(&[("read", r#"{"path":"a.rs"}"#)]))
                .len(),
            1
        );
        let closing = inferrer.before(&step(&[(DELIMITER, r#"{"action":"start"}"#)]));
        assert!(matches!(closing.as_slice(), [Annotation::End { .. }]));
        assert!(inferrer.disabled());
        assert!(inferrer.before(&step(&[("edit", "{}")])).is_empty());
        assert!(inferrer.finish().is_empty());
    }

    #[test]
    fn long_runs_are_split_into_episodes_of_bounded_size() {
        let read = step(&[("read", r#"{"path":"src/a.rs"}"#)]);
        let messages: Vec<Message> = std::iter::repeat_n(read, 3 * MAX_EPISODE_CALLS).collect();
        let out = run(&messages);
        let starts = out
            .iter()
            .filter(|a| matches!(a, Annotation::Start { .. }))
            .count();
        assert_eq!(starts, 3, "{out:?}");
    }

    #[test]
    fn a_few_large_reads_are_split_too() {
        let read = step(&[("read", r#"{"path":"src/a.rs"}"#)]);
        let big = Message::tool_result("c1", "read", "x".repeat(MAX_EPISODE_CHARS / 2), false);
        let mut inferrer = Inferrer::new();
        let mut starts = 0;
        for message in std::iter::repeat_n([read, big], 4).flatten() {
            starts += inferrer
                .before(&message)
                .iter()
                .filter(|a| matches!(a, Annotation::Start { .. }))
                .count();
        }
        assert_eq!(starts, 2, "two reads of half the cap fill an episode");
    }

    #[test]
    fn descriptions_are_bounded() {
        let labels: Vec<String> = (0..100)
            .map(|i| format!("read src/module_{i}/file.rs"))
            .collect();
        let text = describe(100, &labels);
        assert!(text.chars().count() <= MAX_DESCRIPTION + 12, "{text}");
        assert!(text.ends_with("more)"), "{text}");
        assert!(text.starts_with("100 read-only calls: read src/module_0/file.rs"));
    }

    #[test]
    fn planning_calls_stay_in_the_open_episode() {
        let out = run(&[
            Message::user("fix it"),
            step(&[("read", r#"{"path":"a.rs"}"#)]),
            step(&[("TodoWrite", r#"{"todos":[]}"#)]),
            step(&[("edit", r#"{"path":"a.rs"}"#)]),
            step(&[("update_plan", r#"{"plan":[]}"#)]),
            step(&[("edit", r#"{"path":"b.rs"}"#)]),
        ]);
        let starts: Vec<_> = out
            .iter()
            .filter(|a| matches!(a, Annotation::Start { .. }))
            .collect();
        assert_eq!(starts.len(), 2, "one expl, one act: {out:?}");
    }
}
