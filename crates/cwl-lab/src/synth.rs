//! `cwl gen`: synthetic annotated sessions for scale tests, shaped like
//! the CWL paper's 89-task run: many sequential tasks in one session, each
//! a user turn followed by expl episodes (bulky searches, file reads) and
//! act episodes (edits, test runs) that depend on them, with real
//! `delimiter` calls and results, reasoning blocks, and occasional follow-up
//! tasks that revisit earlier tasks' files.
//!
//! **Size.** `tokens` is the session's cumulative *sent* tokens at budget:
//! the sum, over every model call, of min(H, τ), where H is the full
//! history before the call (tool definitions and every earlier message,
//! counted with the chosen tokenizer) and τ the budget. It is what a
//! session held at τ by CWL would send in total; the paper's "80 million
//! tokens" were likewise cumulative tokens processed across requests.
//! Task *i* of *n* ends at the first task boundary after the sum reaches
//! i/n of the target, so the session stops just past the target.
//!
//! Output is one [`cwl::Record`] per line (a `session` header, then
//! `message` records), written as it is generated: memory stays constant
//! whatever the size. The same seed gives the same bytes.

use std::io::Write;

use chrono::{DateTime, Duration, Utc};
use cwl::tokens::{message_tokens, tools_tokens};
use cwl::{Annotation, Block, EpisodeKind, Message, Record, TokenCounter, ToolCall, ToolSpec};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use serde_json::json;

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthConfig {
    /// Sequential tasks (user turns).
    pub tasks: usize,
    /// Target cumulative sent tokens at budget (see the module docs).
    pub tokens: u64,
    /// The budget τ the target is measured at.
    pub budget: usize,
    /// PRNG seed.
    pub seed: u64,
    /// Model name written in the session header.
    pub model: String,
}

/// What was generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SynthSummary {
    /// Tasks written.
    pub tasks: usize,
    /// Model calls (assistant messages).
    pub calls: u64,
    /// Messages written.
    pub messages: u64,
    /// Episodes opened.
    pub episodes: u64,
    /// Cumulative sent tokens at budget (the quantity `tokens` targets).
    pub sent_tokens: u64,
    /// Tokens of the full history at the end.
    pub history_tokens: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// A parameter out of range.
    #[error("invalid generator setting: {0}")]
    Invalid(String),
    /// Writing failed.
    #[error("cannot write the session: {0}")]
    Io(#[from] std::io::Error),
}

const MODULES: &[&str] = &[
    "auth", "billing", "cache", "config", "db", "events", "http", "jobs", "metrics", "parser",
    "render", "search", "session", "storage", "sync", "users",
];
const FILES: &[&str] = &[
    "mod.rs",
    "client.rs",
    "handler.rs",
    "model.rs",
    "service.rs",
    "store.rs",
    "types.rs",
    "util.rs",
    "error.rs",
    "retry.rs",
];
const VERBS: &[&str] = &[
    "parse", "load", "save", "fetch", "build", "apply", "merge", "resolve", "validate", "render",
    "encode", "decode", "flush", "spawn", "retry", "refresh",
];
const NOUNS: &[&str] = &[
    "config", "token", "session", "record", "batch", "query", "header", "payload", "cursor",
    "entry", "index", "schema", "snapshot", "budget", "event", "policy",
];
const WORDS: &[&str] = &[
    "the", "value", "is", "checked", "before", "we", "return", "when", "missing", "fall", "back",
    "to", "default", "keep", "order", "stable", "and", "avoid", "extra", "copies", "here", "this",
    "path", "handles", "errors", "from", "upstream", "callers", "expect", "it", "never", "panics",
];
const FEATURES: &[&str] = &[
    "add retry with backoff to",
    "fix the off-by-one in",
    "make pagination stable in",
    "add metrics for",
    "remove the global lock from",
    "support streaming in",
    "validate input of",
    "cache results of",
    "handle timeouts in",
    "deduplicate events in",
];

struct Gen<'a> {
    rng: ChaCha8Rng,
    counter: &'a dyn TokenCounter,
    out: &'a mut dyn Write,
    budget: u64,
    history: u64,
    summary: SynthSummary,
    time: DateTime<Utc>,
    next_call: u64,
    touched: Vec<(String, String)>,
}

/// The task being generated.
struct Task {
    /// Its number, from 1.
    index: usize,
    /// The module it changes.
    module: String,
    /// The earlier change (path, function) it builds on, in a follow-up.
    revisit: Option<(String, String)>,
}

impl Gen<'_> {
    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n.max(1) as u64) as usize
    }

    fn range(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high - low + 1)
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.below(items.len())]
    }

    fn path(&mut self) -> String {
        format!("src/{}/{}", self.pick(MODULES), self.pick(FILES))
    }

    fn function(&mut self) -> String {
        format!("{}_{}", self.pick(VERBS), self.pick(NOUNS))
    }

    fn type_name(&mut self) -> String {
        let a = self.pick(NOUNS);
        let b = self.pick(&[
            "Store", "Cache", "Client", "Builder", "Error", "State", "Handle",
        ]);
        format!("{}{}{b}", a[..1].to_ascii_uppercase(), &a[1..])
    }

    fn words(&mut self, n: usize) -> String {
        let words: Vec<&str> = (0..n).map(|_| self.pick(WORDS)).collect();
        words.join(" ")
    }

    fn call_id(&mut self) -> String {
        self.next_call += 1;
        format!("call_{:06}", self.next_call)
    }

    fn write(&mut self, message: Message) -> Result<(), SynthError> {
        let seconds = self.range(2, 40) as i64;
        self.time += Duration::seconds(seconds);
        if matches!(message, Message::Assistant { .. }) {
            self.summary.calls += 1;
            self.summary.sent_tokens += self.history.min(self.budget);
        }
        self.history += message_tokens(self.counter, &message) as u64;
        let record = Record::Message {
            timestamp: Some(self.time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            message,
            usage: None,
            cost_usd: None,
        };
        self.emit(&record)
    }

    fn emit(&mut self, record: &Record) -> Result<(), SynthError> {
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.out.write_all(&line)?;
        self.summary.bytes += line.len() as u64;
        self.summary.messages += u64::from(matches!(record, Record::Message { .. }));
        Ok(())
    }

    /// One assistant message with `calls` (name, arguments, result) and its results.
    fn step(
        &mut self,
        text: Option<String>,
        calls: Vec<(String, String, String)>,
    ) -> Result<(), SynthError> {
        let mut content = Vec::new();
        if self.chance(40) {
            let n = self.range(20, 160);
            content.push(Block::Reasoning {
                text: self.words(n),
                signature: None,
            });
        }
        if let Some(text) = text {
            content.push(Block::Text { text });
        }
        let mut results = Vec::new();
        for (name, arguments, output) in calls {
            let id = self.call_id();
            content.push(Block::ToolCall(ToolCall::new(&id, &name, arguments)));
            results.push(Message::tool_result(id, name, output, false));
        }
        self.write(Message::Assistant { content })?;
        for result in results {
            self.write(result)?;
        }
        Ok(())
    }

    fn file_body(&mut self, path: &str, lines: usize) -> String {
        let mut body = String::new();
        let mut line = 1;
        while line <= lines {
            let f = self.function();
            let t = self.type_name();
            let arg = self.pick(NOUNS);
            let chunk = [
                format!("/// {} in {path}.", self.words(6)),
                format!("pub fn {f}(&self, {arg}: &{t}) -> Result<{t}, Error> {{"),
                format!("    let {arg}_id = self.{}({arg})?;", self.function()),
                format!("    // {}", self.words(8)),
                format!("    Ok({t}::from({arg}_id))"),
                "}".to_string(),
            ];
            for text in chunk {
                body.push_str(&format!("{line:>5}\t{text}\n"));
                line += 1;
            }
        }
        body
    }

    fn grep_output(&mut self, pattern: &str, hits: usize) -> String {
        let mut out = String::new();
        for _ in 0..hits {
            let path = self.path();
            let line = self.range(1, 900);
            let t = self.type_name();
            out.push_str(&format!(
                "{path}:{line}:    let out = {pattern}(&{}, {t}::default())?;\n",
                self.pick(NOUNS)
            ));
        }
        out
    }

    fn test_output(&mut self, module: &str) -> String {
        let n = self.range(10, 60);
        let mut out = format!("running {n} tests\n");
        for _ in 0..n {
            out.push_str(&format!(
                "test {module}::tests::{}_works ... ok\n",
                self.function()
            ));
        }
        let seconds = self.range(1, 90);
        out.push_str(&format!(
            "\ntest result: ok. {n} passed; 0 failed; finished in {seconds}.{:02}s\n",
            self.below(100)
        ));
        out
    }

    /// A delimiter call for `annotation` on an episode of `kind`, with the
    /// result text the engine gives.
    fn delimiter(annotation: &Annotation, kind: EpisodeKind) -> (String, String, String) {
        let result = match annotation {
            Annotation::Start { name, .. } => format!("Started {kind} episode `{name}`."),
            Annotation::End { name, .. } => {
                format!("Ended {kind} episode `{}`.", name.as_deref().unwrap_or(""))
            }
        };
        (
            cwl::DELIMITER.to_string(),
            annotation.to_arguments(),
            result,
        )
    }

    /// Task `index`: its prompt, then rounds of exploring and changing
    /// until the sent tokens reach `target`, then a closing answer.
    /// `episodes` lists every explore episode so far, with its task.
    fn task(
        &mut self,
        index: usize,
        target: u64,
        episodes: &mut Vec<(usize, String)>,
    ) -> Result<(), SynthError> {
        let task = self.open_task(index)?;
        let mut round = 0;
        loop {
            round += 1;
            let expl = format!("t{index}-explore-{round}");
            let (pattern, files) = self.explore(&task, &expl)?;
            let act = self.plan(&task, round, expl, &pattern, &files, episodes)?;
            self.change(&task, &files, act)?;
            if self.summary.sent_tokens >= target {
                break;
            }
        }
        let words = self.words(12);
        self.step(
            Some(format!("Done with task {index}: {words}.")),
            Vec::new(),
        )?;
        if self.touched.len() > 256 {
            let keep = self.touched.split_off(self.touched.len() - 128);
            self.touched = keep;
        }
        Ok(())
    }

    /// Picks task `index`'s module and feature, and at times an earlier
    /// change to build on, and writes its user prompt.
    fn open_task(&mut self, index: usize) -> Result<Task, SynthError> {
        let module = self.pick(MODULES).to_string();
        let feature = self.pick(FEATURES);
        let follow_up = index > 1 && !self.touched.is_empty() && self.chance(30);
        let mut prompt = format!("Task {index}: {feature} the `{module}` module (src/{module}/).");
        let mut revisit = None;
        if follow_up {
            let pick = self.below(self.touched.len());
            let (path, function) = self.touched[pick].clone();
            prompt.push_str(&format!(
                " It builds on the earlier change to `{function}` in {path}."
            ));
            revisit = Some((path, function));
        }
        self.pause();
        self.write(Message::user(prompt))?;
        Ok(Task {
            index,
            module,
            revisit,
        })
    }

    /// Opens the explore episode `expl`: a search, file reads and at times
    /// a listing. Returns the pattern searched for and the files read.
    fn explore(&mut self, task: &Task, expl: &str) -> Result<(String, Vec<String>), SynthError> {
        let module = &task.module;
        self.summary.episodes += 1;
        let pattern = self.function();
        let start = Annotation::Start {
            name: expl.to_string(),
            kind: EpisodeKind::Expl,
            dependencies: vec![],
        };
        let hits = self.range(40, 320);
        let grep = self.grep_output(&pattern, hits);
        let text = format!("Looking for uses of `{pattern}` in src/{module}/.");
        self.step(
            Some(text),
            vec![
                Self::delimiter(&start, EpisodeKind::Expl),
                (
                    "grep".into(),
                    json!({"pattern": pattern, "path": format!("src/{module}")}).to_string(),
                    grep,
                ),
            ],
        )?;
        let files = self.read_files(task, &pattern)?;
        if self.chance(30) {
            let listing: String = FILES
                .iter()
                .map(|f| format!("src/{module}/{f}\n"))
                .collect();
            self.step(
                None,
                vec![(
                    "ls".into(),
                    json!({"path": format!("src/{module}")}).to_string(),
                    listing,
                )],
            )?;
        }
        Ok((pattern, files))
    }

    /// Reads two to five files of the task's module (the revisited file
    /// first), one step each; returns their paths.
    fn read_files(&mut self, task: &Task, pattern: &str) -> Result<Vec<String>, SynthError> {
        let reads = self.range(2, 5);
        let mut files = Vec::new();
        for r in 0..reads {
            let path = match (&task.revisit, r) {
                (Some((path, _)), 0) => path.clone(),
                _ => format!("src/{}/{}", task.module, self.pick(FILES)),
            };
            let lines = self.range(60, 400);
            let body = self.file_body(&path, lines);
            let text = format!("Reading {path} to see how `{pattern}` is handled.");
            self.step(
                Some(text),
                vec![("read".into(), json!({"path": path}).to_string(), body)],
            )?;
            files.push(path);
        }
        Ok(files)
    }

    /// Ends the explore episode `expl` with what it found and opens the act
    /// episode of `round` that depends on it (and, in a follow-up task, on
    /// an earlier task's). Returns the act episode's name.
    fn plan(
        &mut self,
        task: &Task,
        round: usize,
        expl: String,
        pattern: &str,
        files: &[String],
        episodes: &mut Vec<(usize, String)>,
    ) -> Result<String, SynthError> {
        let (index, module) = (task.index, &task.module);
        let description = format!(
            "`{pattern}` is used across src/{module}/; read {}; the change belongs in {}.",
            files.join(", "),
            files[0]
        );
        let end = Annotation::End {
            name: Some(expl.clone()),
            description: Some(description),
        };
        episodes.push((index, expl.clone()));
        let act = format!("t{index}-change-{round}");
        self.summary.episodes += 1;
        let mut dependencies = vec![expl];
        let follow_up = task.revisit.is_some();
        if let Some((_, earlier)) = episodes
            .iter()
            .find(|(earlier_task, _)| follow_up && *earlier_task < index)
        {
            dependencies.push(earlier.clone());
        }
        let start = Annotation::Start {
            name: act.clone(),
            kind: EpisodeKind::Act,
            dependencies,
        };
        self.step(
            Some(format!("Plan: change {} and test.", files[0])),
            vec![
                Self::delimiter(&end, EpisodeKind::Expl),
                Self::delimiter(&start, EpisodeKind::Act),
            ],
        )?;
        Ok(act)
    }

    /// One to three edits of `files`, each followed by a test run, then
    /// the end of the act episode `act`.
    fn change(&mut self, task: &Task, files: &[String], act: String) -> Result<(), SynthError> {
        let module = &task.module;
        let cycles = self.range(1, 3);
        for _ in 0..cycles {
            let path = files[self.below(files.len())].clone();
            let function = match &task.revisit {
                Some((p, f)) if *p == path => f.clone(),
                _ => self.function(),
            };
            let old = format!("    let out = {function}(&input)?;");
            let new = format!(
                "    let out = {function}(&input).map_err(|e| Error::{module}(e))?;\n    self.metrics.record(\"{function}\");"
            );
            let args = json!({"path": path, "old_string": old, "new_string": new}).to_string();
            self.step(
                Some(format!("Editing `{function}` in {path}.")),
                vec![(
                    "edit".into(),
                    args,
                    format!("Edited {path}: 1 replacement."),
                )],
            )?;
            self.touched.push((path, function));
            let tests = self.test_output(module);
            self.step(
                None,
                vec![(
                    "bash".into(),
                    json!({"command": format!("cargo test -p {module}")}).to_string(),
                    tests,
                )],
            )?;
        }
        let end = Annotation::End {
            name: Some(act),
            description: None,
        };
        self.step(None, vec![Self::delimiter(&end, EpisodeKind::Act)])
    }

    fn pause(&mut self) {
        if self.chance(10) {
            let minutes = self.range(6, 30) as i64;
            self.time += Duration::minutes(minutes);
        }
    }
}

/// The tool definitions of a generated session (the delimiter included).
pub fn tools() -> Vec<ToolSpec> {
    let tool = |name: &str, description: &str, parameters: serde_json::Value| ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters,
    };
    let path =
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    vec![
        tool("read", "Read a file with line numbers.", path.clone()),
        tool(
            "grep",
            "Search file contents with a regular expression.",
            json!({"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"]}),
        ),
        tool("ls", "List a directory.", path),
        tool(
            "edit",
            "Replace an exact string in a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}}, "required": ["path", "old_string", "new_string"]}),
        ),
        tool(
            "bash",
            "Run a shell command.",
            json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        ),
        cwl::delimiter_spec(),
    ]
}

/// Writes a synthetic session to `out`, counting with `counter`.
pub fn generate(
    config: &SynthConfig,
    counter: &dyn TokenCounter,
    out: &mut dyn Write,
) -> Result<SynthSummary, SynthError> {
    if config.tasks == 0 {
        return Err(SynthError::Invalid("--tasks must be at least 1".into()));
    }
    if config.budget == 0 {
        return Err(SynthError::Invalid("--budget must be above zero".into()));
    }
    let start = DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    let tools = tools();
    let mut generator = Gen {
        rng: ChaCha8Rng::seed_from_u64(config.seed),
        counter,
        out,
        budget: config.budget as u64,
        history: tools_tokens(counter, &tools) as u64,
        summary: SynthSummary::default(),
        time: start,
        next_call: 0,
        touched: Vec::new(),
    };
    generator.emit(&Record::Session {
        version: cwl::record::SESSION_FORMAT_VERSION,
        id: format!("synthetic-{}", config.seed),
        timestamp: start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        cwd: "/work/synthetic".into(),
        provider: "synthetic".into(),
        model: config.model.clone(),
        budget: config.budget as u64,
        tools,
    })?;
    generator.write(Message::system(
        "You are a coding agent working in one long session. Mark your work with the delimiter tool: \
         start an expl episode before exploring and end it with a description of what you learned; \
         start an act episode (declaring the expl episodes it relies on) before changing anything.",
    ))?;
    let mut episodes = Vec::new();
    for index in 1..=config.tasks {
        let target = (u128::from(config.tokens) * index as u128 / config.tasks as u128) as u64;
        generator.task(index, target, &mut episodes)?;
        generator.summary.tasks = index;
    }
    generator.out.flush()?;
    generator.summary.history_tokens = generator.history;
    Ok(generator.summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::Estimate;

    fn config(seed: u64) -> SynthConfig {
        SynthConfig {
            tasks: 4,
            tokens: 400_000,
            budget: 20_000,
            seed,
            model: "claude-sonnet-4-5".into(),
        }
    }

    #[test]
    fn same_seed_same_bytes_and_target_reached() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        let sa = generate(&config(7), &Estimate, &mut a).unwrap();
        let sb = generate(&config(7), &Estimate, &mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(sa, sb);
        assert!(sa.sent_tokens >= 400_000, "{sa:?}");
        assert_eq!(sa.tasks, 4);
        assert_eq!(sa.bytes as usize, a.len());
        let mut c = Vec::new();
        generate(&config(8), &Estimate, &mut c).unwrap();
        assert_ne!(a, c);
    }

    #[test]
    fn writes_valid_annotated_records() {
        let mut out = Vec::new();
        let summary = generate(&config(1), &Estimate, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let records: Vec<Record> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            matches!(&records[0], Record::Session { tools, .. } if tools.iter().any(|t| t.name == cwl::DELIMITER))
        );
        let messages: Vec<Message> = records
            .into_iter()
            .filter_map(|r| match r {
                Record::Message { message, .. } => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(messages.len() as u64, summary.messages);
        crate::policy::validate(&messages).unwrap();
        let mut context = cwl::Context::new(
            cwl::Config::with_budget(20_000),
            std::sync::Arc::new(Estimate),
            tools(),
        );
        for message in messages {
            for outcome in context.push(message).unwrap() {
                assert!(!outcome.is_error(), "{}", outcome.text());
            }
        }
    }

    #[test]
    fn rejects_zero_tasks() {
        let mut out = Vec::new();
        let bad = SynthConfig {
            tasks: 0,
            ..config(1)
        };
        assert!(matches!(
            generate(&bad, &Estimate, &mut out),
            Err(SynthError::Invalid(_))
        ));
    }
}
