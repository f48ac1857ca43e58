//! Showing a run: the model's text streamed to stdout, compact lines for
//! tool calls, episodes and evictions on stderr, a summary at the end; or,
//! with `--json`, every event as one JSON line on stdout.
//!
//! Colors only when stderr is a terminal and `NO_COLOR` is unset. A closed
//! pipe never panics: the first failed write marks the renderer closed,
//! nothing more is written, and the agent stops at its next step.

#[cfg(any(test, feature = "testing"))]
pub mod capture;
pub mod describe;

use std::io::{IsTerminal, Write};
use std::path::Path;

use serde::Serialize;

use crate::agent::status::human_tokens;
use crate::agent::{Event, Observer, Stats};

/// How to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RenderOptions {
    /// JSON lines instead of text.
    pub json: bool,
    /// ANSI colors on stderr.
    pub color: bool,
    /// Whether stderr is a terminal, where the retry line updates in
    /// place; elsewhere only a model call's first retry is told.
    pub terminal: bool,
}

impl RenderOptions {
    /// Text or JSON, with colors when stderr is a terminal and `NO_COLOR`
    /// is not set to a non-empty value.
    pub fn detect(json: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let terminal = std::io::stderr().is_terminal();
        RenderOptions {
            json,
            color: !json && !no_color && terminal,
            terminal: !json && terminal,
        }
    }
}

/// The end-of-run figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary<'a> {
    /// Figures of the run.
    #[serde(flatten)]
    pub stats: &'a Stats,
    /// The user's budget.
    pub budget: usize,
    /// The session file.
    pub session: &'a Path,
}

#[derive(Clone, Copy)]
enum Style {
    Dim,
    Episode,
    Evict,
    Warn,
    Error,
    Good,
}

impl Style {
    fn code(self) -> &'static str {
        match self {
            Style::Dim => "\x1b[2m",
            Style::Episode => "\x1b[36m",
            Style::Evict => "\x1b[33m",
            Style::Warn => "\x1b[1;33m",
            Style::Error => "\x1b[31m",
            Style::Good => "\x1b[32m",
        }
    }
}

/// Writes events to stdout and stderr (or any two writers).
pub struct Renderer {
    out: Box<dyn Write + Send>,
    err: Box<dyn Write + Send>,
    options: RenderOptions,
    closed: bool,
    /// Whether stdout's last text did not end with a newline.
    mid_line: bool,
    last_request: Option<(usize, usize)>,
    /// Whether the current model call's retries have been told: on a
    /// terminal, the retry line stands unfinished on stderr.
    retry_told: bool,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("options", &self.options)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl Renderer {
    /// A renderer on the process's stdout and stderr.
    pub fn stdio(options: RenderOptions) -> Self {
        Renderer::new(
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
            options,
        )
    }

    /// A renderer on two writers: `out` for the model's text (or all JSON),
    /// `err` for the compact lines.
    pub fn new(
        out: Box<dyn Write + Send>,
        err: Box<dyn Write + Send>,
        options: RenderOptions,
    ) -> Self {
        Renderer {
            out,
            err,
            options,
            closed: false,
            mid_line: false,
            last_request: None,
            retry_told: false,
        }
    }

    /// Whether output is JSON.
    pub fn is_json(&self) -> bool {
        self.options.json
    }

    /// Prints an informational line on stderr (as a JSON `note` in JSON mode).
    pub fn info(&mut self, text: &str) {
        if self.options.json {
            self.json(&Event::Note {
                text: text.to_string(),
            });
        } else {
            self.line(None, text);
        }
    }

    /// Prints the end-of-run summary: tasks, requests, tokens, cost, the
    /// largest request against the budget, evictions and the session file.
    pub fn summary(&mut self, summary: &Summary<'_>) {
        if self.options.json {
            #[derive(Serialize)]
            struct Line<'a> {
                event: &'static str,
                #[serde(flatten)]
                summary: &'a Summary<'a>,
            }
            self.json(&Line {
                event: "summary",
                summary,
            });
            return;
        }
        let s = summary.stats;
        let cost = match s.cost_usd {
            Some(cost) => format!("${cost:.4}"),
            None => "cost unknown (no prices for this model)".to_string(),
        };
        let cached = if s.cached_input_tokens > 0 {
            format!(" ({} cached)", human_tokens(s.cached_input_tokens as usize))
        } else {
            String::new()
        };
        let d = &s.delegated;
        let delegated = if d.runs > 0 {
            format!(
                " · of which sub-agents {} requests, {} in / {} out{}",
                d.requests,
                human_tokens(d.input_tokens as usize),
                human_tokens(d.output_tokens as usize),
                d.cost_usd
                    .map(|cost| format!(", ${cost:.4}"))
                    .unwrap_or_default()
            )
        } else {
            String::new()
        };
        self.line(
            Some(Style::Good),
            &format!(
                "{} tasks · {} requests · {} in{cached} / {} out · {cost}{delegated}",
                s.tasks,
                s.requests,
                human_tokens(s.input_tokens as usize),
                human_tokens(s.output_tokens as usize),
            ),
        );
        self.line(
            None,
            &format!(
                "largest request {} of budget {} · {} eviction passes removed {} from {} episodes",
                human_tokens(s.max_request_tokens),
                human_tokens(summary.budget),
                s.eviction_passes,
                human_tokens(s.tokens_evicted),
                s.episodes_evicted,
            ),
        );
        self.line(None, &format!("session: {}", summary.session.display()));
    }

    fn json<T: Serialize>(&mut self, value: &T) {
        if self.closed {
            return;
        }
        let Ok(mut line) = serde_json::to_string(value) else {
            return;
        };
        line.push('\n');
        let written = self
            .out
            .write_all(line.as_bytes())
            .and_then(|()| self.out.flush());
        self.closed |= written.is_err();
    }

    fn text(&mut self, text: &str) {
        if self.closed || text.is_empty() {
            return;
        }
        let written = self
            .out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.flush());
        self.closed |= written.is_err();
        self.mid_line = !text.ends_with('\n');
    }

    fn end_text_line(&mut self) {
        if self.mid_line {
            self.text("\n");
        }
    }

    fn line(&mut self, style: Option<Style>, text: &str) {
        self.end_text_line();
        self.end_retry_line();
        self.write_err(style, "", text, "\n");
    }

    /// Writes `text` on stderr between `before` and `after`, in `style`
    /// when colors are on; a failed write marks the renderer closed.
    fn write_err(&mut self, style: Option<Style>, before: &str, text: &str, after: &str) {
        if self.closed {
            return;
        }
        let styled = match style {
            Some(style) if self.options.color => {
                format!("{before}{}{text}\x1b[0m{after}", style.code())
            }
            _ => format!("{before}{text}{after}"),
        };
        let written = self
            .err
            .write_all(styled.as_bytes())
            .and_then(|()| self.err.flush());
        self.closed |= written.is_err();
    }

    /// Tells a retry: on a terminal the one retry line is rewritten in
    /// place; elsewhere only the first retry of a model call is told.
    fn retry(&mut self, text: &str) {
        if !self.options.terminal {
            if !self.retry_told {
                self.line(Some(Style::Warn), text);
                self.retry_told = true;
            }
            return;
        }
        self.end_text_line();
        self.write_err(Some(Style::Warn), "\r\x1b[2K", text, "");
        self.retry_told = true;
    }

    /// Finishes an unfinished retry line before anything else is written.
    fn end_retry_line(&mut self) {
        if self.options.terminal && self.retry_told && !self.closed {
            self.closed |= self.err.write_all(b"\n").is_err();
        }
        self.retry_told = false;
    }

    fn human(&mut self, event: &Event) {
        match event {
            Event::TaskStarted { task, text } => {
                let first = cwl::shorten(&describe::one_line(text), 80);
                self.line(Some(Style::Good), &format!("── task {task}: {first}"));
            }
            Event::TextDelta { text } => self.text(text),
            Event::ReasoningDelta { .. } => {}
            Event::Response { .. } => self.end_retry_line(),
            // The caller prints the error it gets back.
            Event::TaskFailed { .. } => self.end_retry_line(),
            Event::ToolResult {
                name,
                arguments,
                is_error,
                content,
                ..
            } => {
                if name == cwl::DELIMITER {
                    return;
                }
                if name == cwl::RECALL {
                    let line = describe::recall(arguments, content, *is_error);
                    let style = if *is_error { Style::Error } else { Style::Episode };
                    self.line(Some(style), &line);
                    return;
                }
                let call = describe::call(name, arguments);
                let result = describe::result(content, *is_error);
                if *is_error {
                    self.line(Some(Style::Error), &format!("  ✗ {call} · {result}"));
                } else {
                    self.line(Some(Style::Dim), &format!("  ▸ {call} · {result}"));
                }
            }
            Event::ApprovalRequest {
                name, arguments, ..
            } => {
                let call = describe::call(name, arguments);
                self.line(Some(Style::Warn), &format!("  ? {call}"));
            }
            Event::EpisodeStarted {
                name,
                kind,
                dependencies,
            } => {
                let deps = describe::dependencies(dependencies);
                self.line(Some(Style::Episode), &format!("⟨{kind}⟩ {name}{deps}"));
            }
            Event::EpisodeEnded {
                name,
                kind,
                description,
            } => {
                let text = match description {
                    Some(d) => format!("⟨/{kind}⟩ {name}: {}", cwl::shorten(&describe::one_line(d), 90)),
                    None => format!("⟨/{kind}⟩ {name}"),
                };
                self.line(Some(Style::Episode), &text);
            }
            Event::DelimiterRejected { error, .. } => {
                self.line(Some(Style::Error), &format!("  ✗ delimiter · {error}"));
            }
            Event::Evicted {
                tokens_before,
                tokens_after,
                first_changed,
                folded,
                episodes,
                ..
            } => {
                for episode in episodes {
                    self.line(Some(Style::Evict), &describe::eviction(episode));
                }
                let mut text = format!(
                    "  context {} → {}",
                    human_tokens(*tokens_before),
                    human_tokens(*tokens_after)
                );
                if *folded > 0 {
                    text.push_str(&format!(" · {folded} folded into the index"));
                }
                if let Some(index) = first_changed {
                    text.push_str(&format!(" · view changed from message {index}"));
                }
                self.line(Some(Style::Dim), &text);
            }
            Event::BudgetUnmet { tokens, budget } => self.line(
                Some(Style::Warn),
                &format!(
                    "⚠ budget cannot be met: {} / {} and nothing more is evictable; the agent is told to close its episode",
                    human_tokens(*tokens),
                    human_tokens(*budget)
                ),
            ),
            Event::Retrying {
                attempt,
                wait_ms,
                reason,
                discarded_output,
            } => {
                let discarded = if *discarded_output {
                    " (partial output discarded)"
                } else {
                    ""
                };
                self.retry(&format!(
                    "↻ attempt {attempt} failed, retrying in {:.1}s{discarded}: {}",
                    *wait_ms as f64 / 1000.0,
                    cwl::shorten(reason, 120)
                ));
            }
            Event::Delegated {
                requests, usage, ..
            } => self.line(
                Some(Style::Dim),
                &format!(
                    "  sub-agent: {requests} model calls, {} in / {} out",
                    human_tokens(usage.input_tokens as usize),
                    human_tokens(usage.output_tokens as usize)
                ),
            ),
            Event::Note { text } => self.line(Some(Style::Warn), &format!("· {text}")),
            Event::Sandbox { warning: Some(warning), .. } => {
                self.line(Some(Style::Warn), &format!("· {warning}"));
            }
            Event::Sandbox { mode, warning: None } => {
                self.line(None, &format!("· bash sandbox: {mode}"));
            }
            Event::Health(_) | Event::Metrics { .. } => {}
            Event::TaskFinished { task, turns } => {
                let gauge = self
                    .last_request
                    .map(|(used, budget)| format!(" · request {}", describe::gauge(used, budget)))
                    .unwrap_or_default();
                self.line(
                    Some(Style::Good),
                    &format!("✓ task {task} done in {turns} model calls{gauge}"),
                );
            }
        }
    }
}

impl Observer for Renderer {
    fn event(&mut self, event: &Event) {
        if let Event::Response {
            request_tokens,
            budget,
            ..
        } = event
        {
            self.last_request = Some((*request_tokens, *budget));
        }
        if self.options.json {
            self.json(event);
        } else {
            self.human(event);
        }
    }

    fn closed(&self) -> bool {
        self.closed
    }
}

#[cfg(test)]
mod tests {
    use super::capture::renderer;
    use super::*;

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
    }

    fn events() -> Vec<Event> {
        vec![
            Event::TaskStarted {
                task: 1,
                text: "fix it".into(),
            },
            Event::EpisodeStarted {
                name: "locate-auth".into(),
                kind: cwl::EpisodeKind::Expl,
                dependencies: vec![],
            },
            Event::ToolResult {
                id: "c1".into(),
                name: "grep".into(),
                arguments: r#"{"pattern":"login"}"#.into(),
                is_error: false,
                content: "a:1\nb:2\n".into(),
            },
            Event::Evicted {
                tokens_before: 5_000,
                tokens_after: 3_000,
                budget: 4_000,
                floor: 3_000,
                first_changed: Some(4),
                folded: 2,
                episodes: vec![],
            },
            Event::ToolResult {
                id: "c2".into(),
                name: cwl::RECALL.into(),
                arguments: r#"{"episode":"find-auth"}"#.into(),
                is_error: false,
                content: "Recalled expl episode `find-auth`\nx\n".into(),
            },
            Event::TextDelta {
                text: "Done".into(),
            },
            Event::TaskFinished { task: 1, turns: 3 },
        ]
    }

    #[test]
    fn text_goes_to_stdout_and_compact_lines_to_stderr() {
        let (mut renderer, out, err) = renderer(RenderOptions::default());
        for event in events() {
            renderer.event(&event);
        }
        assert_eq!(out.text(), "Done\n");
        let err = err.text();
        assert!(err.contains("⟨expl⟩ locate-auth\n"), "{err}");
        assert!(err.contains("  ▸ grep \"login\" · 2 lines\n"), "{err}");
        assert!(
            err.contains(
                "  context 5k → 3k · 2 folded into the index · view changed from message 4\n"
            ),
            "{err}"
        );
        assert!(err.contains("↺ recall find-auth · 2 lines\n"), "{err}");
        assert!(err.contains("✓ task 1 done in 3 model calls"), "{err}");
        assert!(!err.contains('\x1b'), "no colors unless asked");
    }

    #[test]
    fn retries_are_one_line_rewritten_on_a_terminal_and_told_once_elsewhere() {
        let retry = |attempt| Event::Retrying {
            attempt,
            wait_ms: 800,
            reason: "connection refused".into(),
            discarded_output: false,
        };
        let run = |terminal| {
            let (mut renderer, _out, err) = renderer(RenderOptions {
                terminal,
                ..RenderOptions::default()
            });
            for attempt in 1..=3 {
                renderer.event(&retry(attempt));
            }
            renderer.event(&Event::TaskFailed {
                error: "gave up".into(),
            });
            renderer.info("after");
            renderer.event(&retry(1));
            err.text()
        };
        let piped = run(false);
        assert_eq!(
            piped,
            "↻ attempt 1 failed, retrying in 0.8s: connection refused\nafter\n\
             ↻ attempt 1 failed, retrying in 0.8s: connection refused\n"
        );
        let terminal = run(true);
        assert_eq!(terminal.lines().count(), 3, "{terminal:?}");
        assert_eq!(terminal.matches("\r\x1b[2K").count(), 4, "{terminal:?}");
        assert!(
            terminal.contains("attempt 3 failed, retrying in 0.8s: connection refused\nafter\n"),
            "{terminal:?}"
        );
        assert!(!terminal.contains("gave up"), "the caller prints the error");
    }

    #[test]
    fn json_mode_writes_one_event_per_line() {
        let (mut renderer, out, err) = renderer(RenderOptions {
            json: true,
            ..RenderOptions::default()
        });
        for event in events() {
            renderer.event(&event);
        }
        let stats = Stats::default();
        renderer.summary(&Summary {
            stats: &stats,
            budget: 4000,
            session: Path::new("/s.jsonl"),
        });
        let lines: Vec<serde_json::Value> = out
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 8);
        assert_eq!(lines[1]["event"], "episode_started");
        assert_eq!(lines[1]["kind"], "expl");
        assert_eq!(lines[3]["event"], "evicted");
        assert_eq!(lines[3]["first_changed"], 4);
        assert_eq!(lines[3]["folded"], 2);
        assert_eq!(lines[3]["floor"], 3_000);
        assert_eq!(lines[7]["event"], "summary");
        assert_eq!(lines[7]["session"], "/s.jsonl");
        assert!(err.text().is_empty());
    }

    #[test]
    fn the_summary_shows_the_sub_agents_share_of_the_totals() {
        let (mut renderer, _out, err) = renderer(RenderOptions::default());
        renderer.event(&Event::Delegated {
            id: "d1".into(),
            requests: 3,
            usage: cwl::Usage {
                input_tokens: 2_500,
                cached_input_tokens: 0,
                cache_write_tokens: 0,
                output_tokens: 120,
            },
            cost_usd: Some(0.01),
        });
        let stats = Stats {
            tasks: 1,
            requests: 2,
            input_tokens: 4_000,
            output_tokens: 200,
            cost_usd: Some(0.02),
            delegated: crate::agent::Delegated {
                runs: 1,
                requests: 3,
                input_tokens: 2_500,
                output_tokens: 120,
                cost_usd: Some(0.01),
                ..Default::default()
            },
            ..Stats::default()
        };
        renderer.summary(&Summary {
            stats: &stats,
            budget: 4000,
            session: Path::new("/s.jsonl"),
        });
        let err = err.text();
        assert!(
            err.contains("  sub-agent: 3 model calls, 2.5k in / 120 out\n"),
            "{err}"
        );
        assert!(
            err.contains("1 tasks · 2 requests · 4k in / 200 out · $0.0200 · of which sub-agents 3 requests, 2.5k in / 120 out, $0.0100\n"),
            "{err}"
        );
    }

    #[test]
    fn a_closed_pipe_marks_the_renderer_closed_without_panicking() {
        let mut renderer =
            Renderer::new(Box::new(Broken), Box::new(Broken), RenderOptions::default());
        assert!(!renderer.closed());
        for event in events() {
            renderer.event(&event);
        }
        assert!(renderer.closed());
        renderer.info("still quiet");
    }

    #[test]
    fn colors_wrap_stderr_lines_only() {
        let (mut renderer, out, err) = renderer(RenderOptions {
            color: true,
            ..RenderOptions::default()
        });
        for event in events() {
            renderer.event(&event);
        }
        assert!(err.text().contains("\x1b[36m⟨expl⟩ locate-auth\x1b[0m"));
        assert!(!out.text().contains('\x1b'));
    }
}
