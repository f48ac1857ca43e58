//! Importers: read agent session logs written by this project or by other
//! harnesses into one provider-neutral stream of [`Event`]s.
//!
//! [`open`] detects the format from the file's content (never its name);
//! [`open_as`] skips detection. JSONL logs are read line by line and never
//! held whole in memory; single-document formats (OpenAI chat JSON,
//! mini-swe-agent trajectories) are parsed as one document.
//!
//! Guarantees of the stream, whatever the input:
//! - every assistant message is one model call of the original session;
//! - every tool call is directly followed (after the assistant message) by
//!   exactly one result per call: results of unknown calls are dropped with a
//!   warning, calls that never got a result get a synthetic error result
//!   ([`MISSING_RESULT`]) with a warning;
//! - corrupt or unknown lines become [`Event::Warning`]s with file and
//!   1-based line, and the rest of the file is still imported;
//! - a file that cannot be read at all is an [`ImportError`]; nothing panics
//!   on bad input.
//!
//! [`::cwl::Usage::input_tokens`] always counts the whole prompt (uncached +
//! cache reads + cache writes), whatever the source's convention.

mod claude_attachment;
mod claude_code;
mod claude_restore;
mod codex;
mod codex_compact;
mod codex_output;
mod common;
mod cwl;
mod detect;
mod error;
mod event;
mod format;
mod lines;
mod mini_swe_agent;
mod openai;
mod pair;
mod pi;
mod stats;
mod walk;

use std::fmt;
use std::path::Path;

use common::{Located, Outcome, Sink};
use lines::LineReader;
use pair::Pairer;

pub use detect::detect;
pub use error::ImportError;
pub use event::{Event, ImportWarning, Meta};
pub use format::{Format, UnknownFormatName};
pub use stats::Stats;
pub use walk::{LOG_EXTENSIONS, WalkError, session_logs};

/// Content of the synthetic tool result inserted for a call that never got one.
pub const MISSING_RESULT: &str = "[no result recorded]";

/// A line-by-line parser of one JSONL format.
trait LineParser: Send {
    /// Handles one non-blank line.
    fn line(&mut self, line: u64, text: &str, sink: &mut Sink) -> Outcome;
    /// Flushes what it still holds at end of file.
    fn finish(&mut self, sink: &mut Sink);
}

enum Source {
    Lines {
        reader: LineReader,
        parser: Box<dyn LineParser>,
    },
    Document(std::vec::IntoIter<Located>),
}

/// An import in progress: the session's [`Meta`] and a pull-based iterator
/// of its [`Event`]s.
pub struct Import {
    meta: Meta,
    source: Source,
    sink: Sink,
    pairer: Pairer,
    stats: Stats,
    done: bool,
}

impl fmt::Debug for Import {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Import")
            .field("meta", &self.meta)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Import {
    /// What the log says about the session.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Counts so far; final once the iterator returned `None`.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    fn step(&mut self) {
        match &mut self.source {
            Source::Lines { reader, parser } => match reader.next_line() {
                Ok(Some((line, bytes))) => match std::str::from_utf8(bytes) {
                    Ok(text) if text.trim().is_empty() => {}
                    Ok(text) => {
                        let outcome = parser.line(line, text, &mut self.sink);
                        self.stats.count_record(outcome);
                    }
                    Err(e) => {
                        self.stats.count_record(Outcome::Rejected);
                        self.sink.warn(
                            Some(line),
                            format!(
                                "line is not UTF-8 text (invalid byte at column {}); skipped",
                                e.valid_up_to() + 1
                            ),
                        );
                    }
                },
                Ok(None) => {
                    parser.finish(&mut self.sink);
                    self.done = true;
                }
                Err(e) => {
                    let line = reader.line_number() + 1;
                    self.sink.warn(
                        Some(line),
                        format!("read failed, rest of the file skipped: {e}"),
                    );
                    parser.finish(&mut self.sink);
                    self.done = true;
                }
            },
            Source::Document(items) => match items.next() {
                Some(item) => self.sink.push(item),
                None => self.done = true,
            },
        }
        for item in self.sink.drain() {
            self.pairer.push(item);
        }
        if self.done {
            self.pairer.finish();
            self.stats.synthetic_results = self.pairer.synthetic;
            self.stats.dropped_results = self.pairer.dropped;
        }
    }
}

impl Iterator for Import {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pairer.pop() {
                self.stats.count_event(&event);
                self.stats.synthetic_results = self.pairer.synthetic;
                self.stats.dropped_results = self.pairer.dropped;
                return Some(event);
            }
            if self.done {
                return None;
            }
            self.step();
        }
    }
}

/// Opens a session log, detecting its format from its content
/// ([`detect`]), and reads its [`Meta`]. Events are read as the returned
/// [`Import`] is iterated.
///
/// Fails when the file cannot be read, is empty, is not UTF-8 where the
/// format requires it, or matches no known format.
pub fn open(path: &Path) -> Result<Import, ImportError> {
    let format = detect(path)?;
    open_as(path, format)
}

/// Opens a session log as the given format, without detection. A JSONL log
/// of another format yields warnings for the lines it cannot read; a
/// document format fails with [`ImportError::Invalid`] when the file is not
/// such a document.
pub fn open_as(path: &Path, format: Format) -> Result<Import, ImportError> {
    let mut meta = Meta::new(path, format);
    let mut sink = Sink::new(path);
    let mut stats = Stats::default();
    let source = if format.is_document() {
        let text = common::read_utf8(path)?;
        if text.trim().is_empty() {
            return Err(ImportError::Empty {
                path: path.to_path_buf(),
            });
        }
        let invalid = |why: String| ImportError::Invalid {
            path: path.to_path_buf(),
            format,
            why,
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| invalid(format!("not JSON: {e}")))?;
        drop(text);
        match format {
            Format::OpenAi => openai::import(&value, &mut meta, &mut sink, &mut stats),
            _ => mini_swe_agent::import(&value, &mut meta, &mut sink, &mut stats),
        }
        .map_err(invalid)?;
        let items: Vec<Located> = sink.drain().collect();
        Source::Document(items.into_iter())
    } else {
        let mut reader = LineReader::open(path)?;
        if reader.is_empty() {
            return Err(ImportError::Empty {
                path: path.to_path_buf(),
            });
        }
        scan_meta(path, &mut meta)?;
        let parser: Box<dyn LineParser> = match format {
            Format::Cwl => Box::new(cwl::Parser::default()),
            Format::Pi => Box::new(pi::Parser::default()),
            Format::ClaudeCode => Box::new(claude_code::Parser::default()),
            _ => Box::new(codex::Parser::default()),
        };
        Source::Lines { reader, parser }
    };
    Ok(Import {
        meta,
        source,
        sink,
        pairer: Pairer::new(path),
        stats,
        done: false,
    })
}

/// How many lines the metadata scan of a JSONL log reads at most.
const META_SCAN_LINES: u64 = 200;

/// Fills `meta` from the first lines of a JSONL log.
fn scan_meta(path: &Path, meta: &mut Meta) -> Result<(), ImportError> {
    let mut reader = LineReader::open(path)?;
    while reader.line_number() < META_SCAN_LINES {
        let Ok(Some((_, bytes))) = reader.next_line() else {
            break;
        };
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) else {
            continue;
        };
        let complete = match meta.format {
            Format::Cwl => cwl::scan(meta, &value),
            Format::Pi => pi::scan(meta, &value),
            Format::ClaudeCode => claude_code::scan(meta, &value),
            _ => codex::scan(meta, &value),
        };
        if complete {
            break;
        }
    }
    Ok(())
}
