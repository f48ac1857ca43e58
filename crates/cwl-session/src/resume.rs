//! Rebuilding a session's engine state from its records.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cwl::{Config, Message, Record, Strategy, TokenCounter};

use super::{Loaded, SessionError, Settings};
use crate::strategy::StrategyName;

/// How the answer to a call that was running when its task stopped begins.
pub const MAY_HAVE_RUN: &str =
    "interrupted: it may have run partly; check before running it again.";

/// What a resume answers a call that never started.
pub const NOT_RUN_ANSWER: &str =
    "Not run: the session stopped before this tool call ran. Run it again if it is still needed.";

/// A tool call that never got its result (the session stopped before it
/// ran, or while it ran).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCall {
    /// The call id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// For a delimiter call: the engine's answer (text, is error), already
    /// applied to the episode graph when the call was pushed.
    pub delimiter: Option<(String, bool)>,
    /// Whether the call may have run: a [`Record::ToolStarted`] names it.
    /// (Files written before that record existed have none: their calls
    /// count as not run.)
    pub started: bool,
}

impl PendingCall {
    /// The result to give the model (text, is error): the delimiter's
    /// answer, [`MAY_HAVE_RUN`] with why, or [`NOT_RUN_ANSWER`].
    pub fn answer(&self) -> (String, bool) {
        match &self.delimiter {
            Some(answer) => answer.clone(),
            None if self.started => (
                format!(
                    "{MAY_HAVE_RUN} (The session stopped while this call was running; its result was never recorded.)"
                ),
                true,
            ),
            None => (NOT_RUN_ANSWER.to_string(), true),
        }
    }
}

/// The engine state rebuilt from a session file.
pub struct Replayed {
    /// The context, exactly as it was after the last record.
    pub context: Box<dyn Strategy>,
    /// Tool calls that never got a result (the session stopped while they
    /// were due), oldest first.
    pub pending: Vec<PendingCall>,
    /// User turns in the transcript.
    pub tasks: usize,
    /// The line of the checkpoint the replay started from, if any.
    pub checkpoint: Option<usize>,
    /// Where the replay disagreed with what was recorded, or a checkpoint
    /// could not be used (should be empty).
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for Replayed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replayed")
            .field("context", &self.context)
            .field("pending", &self.pending)
            .field("tasks", &self.tasks)
            .field("checkpoint", &self.checkpoint)
            .finish_non_exhaustive()
    }
}

/// How [`replay`] rebuilds a session. The default replays it as it
/// records: under its strategy with that strategy's settings, from its
/// last usable checkpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayOptions {
    /// The strategy to replay under (`None`: the one the session records,
    /// CWL when it records none or one this build does not offer). A
    /// checkpoint another strategy wrote is not used.
    pub strategy: Option<StrategyName>,
    /// The strategy's own settings (`None`: those the session records for
    /// it, null when it records another strategy). A checkpoint taken with
    /// other ones is not used.
    pub strategy_options: Option<serde_json::Value>,
    /// Replay every record into a fresh context, whatever checkpoints the
    /// session holds.
    pub from_start: bool,
}

impl ReplayOptions {
    /// Every record replayed into a fresh context, as the session records.
    pub fn from_start() -> Self {
        ReplayOptions {
            from_start: true,
            ..ReplayOptions::default()
        }
    }

    /// Under `strategy` with its settings `options`, from the last usable
    /// checkpoint.
    pub fn configured(strategy: StrategyName, options: serde_json::Value) -> Self {
        ReplayOptions {
            strategy: Some(strategy),
            strategy_options: Some(options),
            from_start: false,
        }
    }
}

fn recorded(loaded: &Loaded) -> Settings {
    Settings::last(loaded.records.iter().map(|(_, record)| record)).unwrap_or_default()
}

/// The options the session records for `strategy` (null when it recorded
/// another strategy).
fn recorded_options(loaded: &Loaded, strategy: StrategyName) -> serde_json::Value {
    let settings = recorded(loaded);
    if settings.strategy == strategy {
        settings.strategy_options
    } else {
        serde_json::Value::Null
    }
}

/// Rebuilds the engine state of `loaded` with `config` (its budget is the
/// one set at the end; [`Record::Enforce`] lines carry their own), as
/// `options` say.
///
/// Unless `options.from_start`, starts from the last checkpoint and
/// replays only the records after it; falls back to replaying every
/// record, with a warning, when that checkpoint cannot be read or
/// restored, does not match the messages before it, or was taken with
/// other eviction settings, strategy or strategy settings than these.
pub fn replay(
    loaded: &Loaded,
    path: &Path,
    counter: Arc<dyn TokenCounter>,
    config: Config,
    options: ReplayOptions,
) -> Result<Replayed, SessionError> {
    let strategy = options
        .strategy
        .unwrap_or_else(|| recorded(loaded).strategy);
    let strategy_options = options
        .strategy_options
        .unwrap_or_else(|| recorded_options(loaded, strategy));
    if options.from_start {
        replay_whole(loaded, path, counter, config, strategy, &strategy_options)
    } else {
        replay_checkpointed(loaded, path, counter, config, strategy, &strategy_options)
    }
}

/// [`replay`] from the last checkpoint, or from the start when it cannot
/// be used.
fn replay_checkpointed(
    loaded: &Loaded,
    path: &Path,
    counter: Arc<dyn TokenCounter>,
    config: Config,
    strategy: StrategyName,
    options: &serde_json::Value,
) -> Result<Replayed, SessionError> {
    let Some(index) = loaded
        .records
        .iter()
        .rposition(|(_, record)| matches!(record, Record::Checkpoint { .. }))
    else {
        return replay_whole(loaded, path, counter, config, strategy, options);
    };
    let (line, Record::Checkpoint { pushes, checkpoint }) = &loaded.records[index] else {
        unreachable!("rposition found a checkpoint");
    };
    let taken_with = Settings::last(loaded.records[..index].iter().map(|(_, record)| record))
        .filter(|settings| settings.strategy == strategy)
        .map_or(serde_json::Value::Null, |settings| {
            settings.strategy_options
        });
    let restored = if &taken_with != options {
        Err(format!(
            "it was taken with strategy options {taken_with}, the session now runs with {options}"
        ))
    } else {
        restore(
            loaded, index, *pushes, checkpoint, &counter, &config, strategy,
        )
    };
    match restored {
        Ok(context) => {
            let mut replayed = replay_from(loaded, path, context, index + 1, config.budget)?;
            replayed.checkpoint = Some(*line);
            Ok(replayed)
        }
        Err(reason) => {
            let mut replayed = replay_whole(loaded, path, counter, config, strategy, options)?;
            replayed.warnings.insert(
                0,
                format!("line {line}: checkpoint not used ({reason}); replayed the whole session instead"),
            );
            Ok(replayed)
        }
    }
}

/// [`replay`] of every record into a fresh context.
fn replay_whole(
    loaded: &Loaded,
    path: &Path,
    counter: Arc<dyn TokenCounter>,
    config: Config,
    strategy: StrategyName,
    options: &serde_json::Value,
) -> Result<Replayed, SessionError> {
    let budget = config.budget;
    let context = strategy
        .create_with(config, counter, loaded.info.tools.clone(), options)
        .map_err(|source| SessionError::StrategyOptions {
            path: path.to_path_buf(),
            source,
        })?;
    replay_from(loaded, path, context, 0, budget)
}

/// The context saved in the checkpoint at `loaded.records[index]`.
fn restore(
    loaded: &Loaded,
    index: usize,
    pushes: u64,
    checkpoint: &serde_json::Value,
    counter: &Arc<dyn TokenCounter>,
    config: &Config,
    strategy: StrategyName,
) -> Result<Box<dyn Strategy>, String> {
    let messages = loaded.records[..index]
        .iter()
        .filter(|(_, record)| matches!(record, Record::Message { .. }))
        .count() as u64;
    let context = strategy.restore(checkpoint, Arc::clone(counter))?;
    let saved = context.save().map_err(|e| e.to_string())?.pushes;
    if saved != pushes || pushes != messages {
        return Err(format!(
            "it follows {saved} pushes but {messages} messages precede it"
        ));
    }
    let now = Settings {
        strategy,
        ..Settings::of(config)
    };
    let taken = Settings::of_strategy(context.as_ref());
    if taken.as_ref() != Some(&now) {
        return Err(format!(
            "it was taken with {}, the session now runs with {now}",
            taken.map_or_else(|| format!("strategy {}", context.name()), |t| t.to_string()),
        ));
    }
    if context.tools() != loaded.info.tools.as_slice() {
        return Err("it was taken with other tools offered".to_string());
    }
    let (taken, now) = (&context.config().classes, &config.classes);
    if let Some(tool) = loaded
        .info
        .tools
        .iter()
        .find(|tool| taken.class(&tool.name) != now.class(&tool.name))
    {
        return Err(format!(
            "it was taken with another eviction class for tool `{}`",
            tool.name
        ));
    }
    if !context.pending_calls().is_empty() {
        return Err("tool calls were pending when it was taken".to_string());
    }
    Ok(context)
}

/// Replays `loaded.records[from..]` into `context`: messages are pushed,
/// calibrations and enforcements re-applied at the same points with the
/// recorded budgets; `budget` is set at the end.
fn replay_from(
    loaded: &Loaded,
    path: &Path,
    mut context: Box<dyn Strategy>,
    from: usize,
    budget: usize,
) -> Result<Replayed, SessionError> {
    let mut names: HashMap<String, String> = HashMap::new();
    let mut answers: HashMap<String, (String, bool)> = HashMap::new();
    let mut warnings = Vec::new();
    let settings = Settings::of_strategy(context.as_ref());
    let mut recorded: Option<Settings> = None;
    let tasks = loaded
        .records
        .iter()
        .filter(|(_, record)| {
            matches!(
                record,
                Record::Message {
                    message: Message::User { .. },
                    ..
                }
            )
        })
        .count();
    for (_, record) in &loaded.records[..from] {
        if let Record::Settings { .. } = record {
            recorded = Settings::last([record]);
        }
    }
    for (line, record) in &loaded.records[from..] {
        match record {
            Record::Message { message, .. } => {
                for call in message.tool_calls() {
                    names.insert(call.id.clone(), call.name.clone());
                }
                let outcomes =
                    context
                        .push(message.clone())
                        .map_err(|error| SessionError::Replay {
                            path: path.to_owned(),
                            line: *line,
                            reason: error.to_string(),
                        })?;
                for outcome in outcomes {
                    answers.insert(
                        outcome.call_id.clone(),
                        (outcome.text(), outcome.is_error()),
                    );
                }
            }
            Record::Enforce { budget, report } => {
                context.set_budget(usize::try_from(*budget).unwrap_or(usize::MAX));
                let replayed = context.enforce();
                let recorded_after = report
                    .get("tokens_after")
                    .and_then(serde_json::Value::as_u64);
                // Passes recorded under other settings need not agree.
                let comparable = recorded.is_some() && recorded == settings;
                if comparable && recorded_after.is_some_and(|t| t != replayed.tokens_after as u64) {
                    warnings.push(format!(
                        "line {line}: the eviction pass left {} tokens on replay but {} when recorded (was the session written with another tokenizer?)",
                        replayed.tokens_after,
                        recorded_after.unwrap_or_default()
                    ));
                }
            }
            Record::Annotate { annotation } => {
                if let Err(error) = context.annotate(annotation.clone()) {
                    warnings.push(format!(
                        "line {line}: the recorded annotation {annotation:?} was refused on replay: {error}"
                    ));
                }
            }
            Record::Calibrate { local, reported } => context.calibrate(
                usize::try_from(*local).unwrap_or(usize::MAX),
                usize::try_from(*reported).unwrap_or(usize::MAX),
            ),
            Record::Settings { .. } => recorded = Settings::last([record]),
            Record::Idle { seconds } => {
                // The strategy minded this gap when recorded; under the
                // same settings it minds it again.
                let minded = context.idle(*seconds);
                if !minded && recorded.is_some() && recorded == settings {
                    warnings.push(format!(
                        "line {line}: the strategy did not mind an idle gap of {seconds} s on replay"
                    ));
                }
            }
            Record::SideCall { id, result, .. } => {
                // The strategy asks again at the same point and gets the
                // recorded answer.
                match context.side_request() {
                    Some(request) if request.id == *id => {}
                    Some(request) => warnings.push(format!(
                        "line {line}: the strategy asked for side call {} on replay where the file records {id}",
                        request.id
                    )),
                    None => warnings.push(format!(
                        "line {line}: the strategy did not ask for side call {id} on replay"
                    )),
                }
                context.side_result(*id, result.clone());
            }
            // Headers, notes, checkpoints and lines of later formats change no state.
            _ => {}
        }
    }
    context.set_budget(budget);
    let started: HashSet<&str> = loaded
        .records
        .iter()
        .filter_map(|(_, record)| match record {
            Record::ToolStarted { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    let pending = context
        .pending_calls()
        .into_iter()
        .map(|id| PendingCall {
            id: id.to_string(),
            name: names.get(id).cloned().unwrap_or_default(),
            delimiter: answers.get(id).cloned(),
            started: started.contains(id),
        })
        .collect();
    Ok(Replayed {
        context,
        pending,
        tasks,
        checkpoint: None,
        warnings,
    })
}

/// The text of the session's last task when it has no final answer: the
/// last message recorded is that user turn, a tool result, or a reply with
/// tool calls (the session stopped while the task ran). `None` when the
/// last task ended with an answer, or there is none.
pub fn unfinished_task(loaded: &Loaded) -> Option<String> {
    let mut messages = loaded
        .records
        .iter()
        .rev()
        .filter_map(|(_, record)| match record {
            Record::Message { message, .. } => Some(message),
            _ => None,
        });
    let last = messages.next()?;
    let open = match last {
        Message::User { .. } | Message::ToolResult(_) => true,
        Message::Assistant { .. } => last.tool_calls().next().is_some(),
        _ => false,
    };
    if !open {
        return None;
    }
    std::iter::once(last)
        .chain(messages)
        .find_map(|message| match message {
            Message::User { content } => Some(content.clone()),
            _ => None,
        })
}

/// The file of session `name` in `dir`: a path to a file, an exact id, or
/// a unique prefix of one.
pub fn find(dir: &Path, name: &str) -> Result<PathBuf, SessionError> {
    let as_path = Path::new(name);
    if as_path.is_file() {
        return Ok(as_path.to_owned());
    }
    let exact = dir.join(format!("{name}.jsonl"));
    if exact.is_file() {
        return Ok(exact);
    }
    let not_found = || SessionError::NotFound {
        name: name.to_string(),
        dir: dir.to_owned(),
    };
    let entries = std::fs::read_dir(dir).map_err(|_| not_found())?;
    let mut matches: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension().is_some_and(|e| e == "jsonl")
                && path
                    .file_stem()
                    .is_some_and(|stem| stem.to_string_lossy().starts_with(name))
        })
        .collect();
    matches.sort();
    match matches.len() {
        0 => Err(not_found()),
        1 => Ok(matches.remove(0)),
        _ => Err(SessionError::Ambiguous {
            name: name.to_string(),
            matches: matches
                .iter()
                .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SessionInfo, SessionWriter, read};
    use cwl::{Block, Context, Estimate, ToolCall};

    fn info() -> SessionInfo {
        SessionInfo {
            id: "r1".into(),
            timestamp: "2025-01-01T00:00:00Z".into(),
            cwd: "/tmp".into(),
            provider: "openai".into(),
            model: "m".into(),
            budget: 100,
            tools: vec![cwl::delimiter_spec()],
        }
    }

    fn assistant(calls: &[(&str, &str, &str)]) -> Message {
        Message::Assistant {
            content: calls
                .iter()
                .map(|(id, name, args)| Block::ToolCall(ToolCall::new(*id, *name, *args)))
                .collect(),
        }
    }

    #[test]
    fn replay_reports_pending_calls_and_counts_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = SessionWriter::create(dir.path(), &info()).unwrap();
        let start = r#"{"action":"start","name":"e","type":"expl"}"#;
        let messages = [
            Message::system("sys"),
            Message::user("task"),
            assistant(&[
                ("c1", "read", "{}"),
                ("c2", "bash", "{}"),
                ("c3", "delimiter", start),
            ]),
            Message::tool_result("c1", "read", "text", false),
        ];
        for message in messages {
            writer.append(&self::message(message)).unwrap();
        }
        let loaded = read(writer.path()).unwrap();
        let replayed = replay(
            &loaded,
            writer.path(),
            Arc::new(Estimate),
            Config::with_budget(50),
            ReplayOptions::default(),
        )
        .unwrap();
        assert_eq!(
            replayed.pending,
            vec![
                PendingCall {
                    id: "c2".into(),
                    name: "bash".into(),
                    delimiter: None,
                    started: false,
                },
                PendingCall {
                    id: "c3".into(),
                    name: "delimiter".into(),
                    delimiter: Some(("Started expl episode `e`.".into(), false)),
                    started: false,
                },
            ]
        );
        assert_eq!(replayed.context.active_episode().map(|(n, _)| n), Some("e"));
        assert_eq!(replayed.tasks, 1);
        assert_eq!(replayed.context.budget(), 50);
        assert_eq!(replayed.context.view().count(), 4);
    }

    fn message(message: Message) -> Record {
        Record::Message {
            timestamp: None,
            message,
            usage: None,
            cost_usd: None,
        }
    }

    fn started(id: &str, name: &str) -> Record {
        Record::ToolStarted {
            timestamp: None,
            call_id: id.into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_checkpoint_with_another_class_for_a_session_tool_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let grep = cwl::ToolSpec {
            name: "grep".into(),
            description: "search".into(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let session = SessionInfo {
            tools: vec![grep.clone(), cwl::delimiter_spec()],
            ..info()
        };
        let mut writer = SessionWriter::create(dir.path(), &session).unwrap();
        let mut context = Context::new(
            Config::with_budget(50),
            Arc::new(Estimate),
            session.tools.clone(),
        );
        for message in [Message::system("sys"), Message::user("task")] {
            context.push(message.clone()).unwrap();
            writer.append(&self::message(message)).unwrap();
        }
        let checkpoint = context.checkpoint();
        writer
            .append(&Record::Checkpoint {
                pushes: checkpoint.pushes(),
                checkpoint: serde_json::to_value(&checkpoint).unwrap(),
            })
            .unwrap();
        let loaded = read(writer.path()).unwrap();
        let same = replay(
            &loaded,
            writer.path(),
            Arc::new(Estimate),
            Config::with_budget(50),
            ReplayOptions::default(),
        )
        .unwrap();
        assert!(same.checkpoint.is_some() && same.warnings.is_empty());
        let mut classes = cwl::ToolClasses::empty();
        classes.set("grep", cwl::ToolClass::Intermediate);
        let other = replay(
            &loaded,
            writer.path(),
            Arc::new(Estimate),
            Config::with_budget(50).classes(classes),
            ReplayOptions::default(),
        )
        .unwrap();
        assert_eq!(other.checkpoint, None);
        assert!(
            other.warnings[0].contains(
                "checkpoint not used (it was taken with another eviction class for tool `grep`)"
            ),
            "{:?}",
            other.warnings
        );
        assert_eq!(other.context.view().count(), 2);
    }

    #[test]
    fn a_started_call_may_have_run_and_a_later_one_did_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = SessionWriter::create(dir.path(), &info()).unwrap();
        let records = [
            message(Message::system("sys")),
            message(Message::user("task")),
            message(assistant(&[("c0", "ls", "{}")])),
            started("c0", "ls"),
            message(Message::tool_result("c0", "ls", "a\n", false)),
            message(assistant(&[
                ("c1", "read", "{}"),
                ("c2", "bash", "{}"),
                ("c3", "bash", "{}"),
            ])),
            started("c1", "read"),
            message(Message::tool_result("c1", "read", "text", false)),
            started("c2", "bash"),
        ];
        for record in &records {
            writer.append(record).unwrap();
        }
        let loaded = read(writer.path()).unwrap();
        let line = std::fs::read_to_string(writer.path()).unwrap();
        assert!(
            line.contains(r#"{"type":"tool_started","call_id":"c2","name":"bash"}"#),
            "{line}"
        );
        let replayed = replay(
            &loaded,
            writer.path(),
            Arc::new(Estimate),
            Config::with_budget(50),
            ReplayOptions::default(),
        )
        .unwrap();
        let answers: Vec<(String, (String, bool))> = replayed
            .pending
            .iter()
            .map(|call| (call.id.clone(), call.answer()))
            .collect();
        assert_eq!(answers.len(), 2, "{answers:?}");
        assert_eq!(answers[0].0, "c2");
        assert!(answers[0].1.0.starts_with(MAY_HAVE_RUN), "{answers:?}");
        assert!(answers[0].1.1);
        assert_eq!(answers[1], ("c3".into(), (NOT_RUN_ANSWER.into(), true)));
        assert_eq!(unfinished_task(&loaded).as_deref(), Some("task"));
    }

    #[test]
    fn a_task_is_unfinished_until_the_model_answers_without_calls() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = SessionWriter::create(dir.path(), &info()).unwrap();
        let mut unfinished = |record: Record| {
            writer.append(&record).unwrap();
            unfinished_task(&read(writer.path()).unwrap())
        };
        assert_eq!(unfinished(message(Message::system("sys"))), None);
        assert_eq!(
            unfinished(message(Message::user("one"))).as_deref(),
            Some("one")
        );
        assert_eq!(unfinished(message(Message::assistant_text("done"))), None);
        assert_eq!(
            unfinished(message(Message::user("two"))).as_deref(),
            Some("two")
        );
        let calls = assistant(&[("c1", "ls", "{}")]);
        assert_eq!(unfinished(message(calls)).as_deref(), Some("two"));
        let result = Message::tool_result("c1", "ls", "x", false);
        assert_eq!(unfinished(message(result)).as_deref(), Some("two"));
        let note = Record::Note {
            timestamp: None,
            text: "interrupted".into(),
        };
        assert_eq!(unfinished(note).as_deref(), Some("two"));
        assert_eq!(unfinished(message(Message::assistant_text("ok"))), None);
    }

    #[test]
    fn recorded_side_calls_go_back_to_the_strategy_at_the_same_point() {
        use cwl_provider::testing::asking::Asking;
        let dir = tempfile::tempdir().unwrap();
        let mut writer = SessionWriter::create(dir.path(), &info()).unwrap();
        writer.append(&message(Message::user("task"))).unwrap();
        for (id, result) in [
            (1, Ok("fold u1".to_string())),
            (2, Err("timed out".to_string())),
        ] {
            writer
                .append(&Record::SideCall {
                    id,
                    purpose: "planner".into(),
                    result,
                })
                .unwrap();
        }
        writer
            .append(&Record::SideCall {
                id: 7,
                purpose: "planner".into(),
                result: Ok("late".into()),
            })
            .unwrap();
        let loaded = read(writer.path()).unwrap();
        let strategy = Asking::new(2, std::time::Duration::from_secs(1));
        let answers = std::sync::Arc::clone(&strategy.answers);
        let replayed = replay_from(&loaded, writer.path(), Box::new(strategy), 0, 100).unwrap();
        assert_eq!(
            *answers.lock().unwrap(),
            [
                (1, Ok("fold u1".to_string())),
                (2, Err("timed out".to_string())),
                (7, Ok("late".to_string()))
            ]
        );
        assert_eq!(replayed.warnings.len(), 1, "{:?}", replayed.warnings);
        assert!(
            replayed.warnings[0].contains("did not ask for side call 7"),
            "{:?}",
            replayed.warnings
        );
        assert_eq!(replayed.context.view().count(), 1);
    }

    #[test]
    fn replay_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = SessionWriter::create(dir.path(), &info()).unwrap();
        writer
            .append(&message(Message::tool_result("nope", "read", "x", false)))
            .unwrap();
        let loaded = read(writer.path()).unwrap();
        let error = replay(
            &loaded,
            writer.path(),
            Arc::new(Estimate),
            Config::with_budget(50),
            ReplayOptions::default(),
        )
        .unwrap_err();
        assert!(error.to_string().contains("line 2"), "{error}");
        assert!(error.to_string().contains("nope"), "{error}");
    }

    #[test]
    fn find_accepts_paths_ids_and_unique_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        for id in [
            "20250101-000000-aaaa",
            "20250101-000000-aabb",
            "20250202-000000-cccc",
        ] {
            std::fs::write(dir.path().join(format!("{id}.jsonl")), "").unwrap();
        }
        let full = dir.path().join("20250202-000000-cccc.jsonl");
        assert_eq!(find(dir.path(), full.to_str().unwrap()).unwrap(), full);
        assert_eq!(find(dir.path(), "20250202-000000-cccc").unwrap(), full);
        assert_eq!(find(dir.path(), "20250202").unwrap(), full);
        let ambiguous = find(dir.path(), "20250101-000000-aa")
            .unwrap_err()
            .to_string();
        assert!(
            ambiguous.contains("aaaa") && ambiguous.contains("aabb"),
            "{ambiguous}"
        );
        assert!(matches!(
            find(dir.path(), "zzz"),
            Err(SessionError::NotFound { .. })
        ));
    }
}
