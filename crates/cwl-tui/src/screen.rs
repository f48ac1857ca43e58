//! What the UI shows, built from the agent's events.

use cwl::{EpisodeKind, Level};

use cwl_agent::agent::Event;

/// One item of the conversation pane.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A task the user sent.
    User(String),
    /// The model's visible text (streamed deltas joined).
    Assistant(String),
    /// The model's reasoning, shown dimmed.
    Reasoning(String),
    /// One tool call, one line: the tool, its arguments, whether it failed.
    Tool {
        /// The tool.
        name: String,
        /// The raw JSON arguments.
        arguments: String,
        /// Whether the result was an error.
        is_error: bool,
        /// The result sent back to the model, shown when tool calls are
        /// expanded.
        content: String,
    },
    /// An episode opened or closed (`▶ expl read-parser`).
    Episode(String),
    /// A note or an eviction, in the harness's words.
    Note(String),
    /// What a slash command answered (never sent to the model).
    Output(String),
    /// An error: a refused command, a failed turn.
    Error(String),
}

impl Entry {
    /// Rows it takes in a pane `width` characters wide (as the view wraps
    /// it), for scrolling bounds.
    fn rows(&self, width: usize, expanded: bool) -> usize {
        let width = width.max(3);
        let wrapped = |text: &str, indent: usize| -> usize {
            let room = (width - indent.min(width - 1)).max(1);
            text.lines()
                .map(|line| wrap(line, room).len())
                .sum::<usize>()
                .max(1)
        };
        match self {
            Entry::Tool { content, .. } if expanded => {
                let lines = content.lines().count();
                1 + lines.min(RESULT_ROWS) + usize::from(lines > RESULT_ROWS)
            }
            Entry::Tool { .. } => 1,
            Entry::Assistant(text) | Entry::Episode(text) => wrapped(text, 0),
            Entry::User(text)
            | Entry::Reasoning(text)
            | Entry::Note(text)
            | Entry::Output(text)
            | Entry::Error(text) => wrapped(text, 2),
        }
    }
}

/// `line` cut into rows of at most `width` characters, between words
/// where it can (a word longer than a row is cut).
pub(super) fn wrap(line: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    if line.chars().count() <= width {
        return vec![line.to_string()];
    }
    let mut rows = Vec::new();
    let mut row = String::new();
    let mut len = 0;
    for word in line.split_inclusive(' ') {
        let mut word_len = word.chars().count();
        if len + word.trim_end().chars().count() > width && len > 0 {
            rows.push(std::mem::take(&mut row).trim_end().to_string());
            len = 0;
        }
        let mut rest = word;
        while word_len > width {
            let cut = rest
                .char_indices()
                .nth(width - len)
                .map_or(rest.len(), |(i, _)| i);
            row.push_str(&rest[..cut]);
            rows.push(std::mem::take(&mut row));
            rest = &rest[cut..];
            word_len = rest.chars().count();
            len = 0;
        }
        row.push_str(rest);
        len += word_len;
    }
    if !row.trim_end().is_empty() || rows.is_empty() {
        rows.push(row.trim_end().to_string());
    }
    rows
}

/// Lines of a tool result shown when tool calls are expanded.
pub(super) const RESULT_ROWS: usize = 12;

/// The context gauge: how full the prompt is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauge {
    /// Tokens of the last request (calibrated), or of the context before any.
    pub tokens: usize,
    /// The budget τ.
    pub budget: usize,
    /// The low-water mark of the last eviction pass, if one ran.
    pub floor: Option<usize>,
    /// Tokens removed by eviction so far in this process: history no
    /// longer in view (in view plus this: the whole history).
    pub evicted: usize,
    /// Share of the last request's input served from the provider's cache.
    pub cache_share: Option<f64>,
}

impl Gauge {
    /// Tokens in view as a share of the budget, in percent.
    pub fn percent(&self) -> f64 {
        if self.budget == 0 {
            0.0
        } else {
            self.tokens as f64 * 100.0 / self.budget as f64
        }
    }
}

/// One line of the episode panel.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeRow {
    /// The episode's name.
    pub name: String,
    /// Exploration or action.
    pub kind: EpisodeKind,
    /// For an act: the expls it depends on.
    pub dependencies: Vec<String>,
    /// Whether it is still open.
    pub active: bool,
    /// The furthest eviction level it reached.
    pub level: Option<Level>,
    /// For a closed expl: what was learned (its residue once removed).
    pub residue: Option<String>,
}

/// Everything the UI draws.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Screen {
    /// The model's name.
    pub model: String,
    /// The session id.
    pub session: String,
    /// The context strategy, when it is not CWL (`--strategy`).
    pub strategy: Option<String>,
    /// What `bash` commands may write (`--sandbox`), once known.
    pub sandbox: Option<String>,
    /// Cost so far in US dollars, when the model's prices are known.
    pub cost_usd: Option<f64>,
    /// The conversation, oldest first.
    pub entries: Vec<Entry>,
    /// The context gauge.
    pub gauge: Gauge,
    /// The episodes, oldest first.
    pub episodes: Vec<EpisodeRow>,
    /// The text being typed.
    pub input: String,
    /// Lines scrolled up from the bottom of the conversation.
    pub scroll: usize,
    /// A tool call waiting for y/n/a, shown above the input.
    pub approval: Option<String>,
    /// Whether tool calls show their results (Ctrl-O toggles).
    pub expanded: bool,
    /// Whether a turn is running.
    pub busy: bool,
}

impl Screen {
    /// An empty screen for `model` in session `session` with budget τ.
    pub fn new(model: &str, session: &str, budget: usize) -> Self {
        Screen {
            model: model.to_string(),
            session: session.to_string(),
            gauge: Gauge {
                budget,
                ..Gauge::default()
            },
            ..Screen::default()
        }
    }

    /// Takes one agent event into the screen.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::TaskStarted { text, .. } => self.entries.push(Entry::User(text.clone())),
            Event::TextDelta { text } => match self.entries.last_mut() {
                Some(Entry::Assistant(sofar)) => sofar.push_str(text),
                _ => self.entries.push(Entry::Assistant(text.clone())),
            },
            Event::ReasoningDelta { text } => match self.entries.last_mut() {
                Some(Entry::Reasoning(sofar)) => sofar.push_str(text),
                _ => self.entries.push(Entry::Reasoning(text.clone())),
            },
            Event::ApprovalRequest {
                name, arguments, ..
            } => {
                self.approval = Some(cwl_agent::render::describe::call(name, arguments));
            }
            Event::ToolResult {
                name,
                arguments,
                is_error,
                content,
                ..
            } => {
                self.approval = None;
                // The episode events say what a delimiter call did.
                if name == cwl::DELIMITER && !is_error {
                    return;
                }
                self.entries.push(Entry::Tool {
                    name: name.clone(),
                    arguments: arguments.clone(),
                    is_error: *is_error,
                    content: content.clone(),
                });
            }
            Event::EpisodeStarted {
                name,
                kind,
                dependencies,
            } => {
                let deps = cwl_agent::render::describe::dependencies(dependencies);
                self.entries
                    .push(Entry::Episode(format!("▶ {kind} {name}{deps}")));
                self.close_active();
                self.episodes.push(EpisodeRow {
                    name: name.clone(),
                    kind: *kind,
                    dependencies: dependencies.clone(),
                    active: true,
                    level: None,
                    residue: None,
                });
            }
            Event::EpisodeEnded {
                name, description, ..
            } => {
                let learned = description
                    .as_ref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                self.entries
                    .push(Entry::Episode(format!("■ {name} ended{learned}")));
                if let Some(row) = self.episodes.iter_mut().rev().find(|r| &r.name == name) {
                    row.active = false;
                    row.residue = description.clone();
                }
            }
            Event::Evicted {
                tokens_before,
                tokens_after,
                budget,
                floor,
                episodes,
                ..
            } => {
                self.gauge.tokens = *tokens_after;
                self.gauge.budget = *budget;
                self.gauge.floor = Some(*floor);
                self.gauge.evicted += tokens_before.saturating_sub(*tokens_after);
                for report in episodes {
                    let deepest = report.levels.iter().map(|l| l.level).max();
                    if let Some(row) = self.episodes.iter_mut().find(|r| r.name == report.name) {
                        row.level = row.level.max(deepest);
                    }
                }
                let removed = tokens_before.saturating_sub(*tokens_after);
                // Strategies that evict block by block (cwm) name no episodes.
                self.entries.push(Entry::Note(if episodes.is_empty() {
                    format!("evicted {removed} tokens")
                } else {
                    format!(
                        "evicted {removed} tokens from {} episode(s)",
                        episodes.len()
                    )
                }));
            }
            Event::Response {
                request_tokens,
                budget,
                usage,
                cost_usd,
                ..
            } => {
                self.gauge.tokens = *request_tokens;
                self.gauge.budget = *budget;
                self.gauge.cache_share = (usage.input_tokens > 0)
                    .then(|| usage.cached_input_tokens as f64 / usage.input_tokens as f64);
                if let Some(cost) = cost_usd {
                    *self.cost_usd.get_or_insert(0.0) += cost;
                }
            }
            Event::Delegated { cost_usd, .. } => {
                if let Some(cost) = cost_usd {
                    *self.cost_usd.get_or_insert(0.0) += cost;
                }
            }
            Event::Note { text } => self.entries.push(Entry::Note(text.clone())),
            Event::Sandbox { mode, warning } => {
                self.sandbox = Some(mode.clone());
                if let Some(warning) = warning {
                    self.entries.push(Entry::Note(warning.clone()));
                }
            }
            // The task's error comes back from the call and is shown from there.
            Event::Health(_) | Event::Metrics { .. } | Event::TaskFailed { .. } => {}
            Event::DelimiterRejected { error, .. } => {
                self.entries
                    .push(Entry::Note(format!("delimiter rejected: {error}")));
            }
            Event::BudgetUnmet { tokens, budget } => self.entries.push(Entry::Note(format!(
                "over budget: {tokens} tokens of {budget}, nothing left to evict"
            ))),
            Event::Retrying {
                attempt, reason, ..
            } => self.entries.push(Entry::Note(format!(
                "retrying (attempt {attempt}): {reason}"
            ))),
            Event::TaskFinished { .. } => {}
        }
    }

    /// Rows of the whole conversation in a pane `width` characters wide.
    pub fn total_rows(&self, width: usize) -> usize {
        self.entries
            .iter()
            .map(|e| e.rows(width, self.expanded))
            .sum()
    }

    /// Scrolls by `lines` (positive: up, into the past), within the
    /// conversation as shown `width` characters wide.
    pub fn scroll_by(&mut self, lines: i32, width: usize) {
        let most = self.total_rows(width).saturating_sub(1);
        let to = self.scroll as i64 + i64::from(lines);
        self.scroll = to.clamp(0, most as i64) as usize;
    }

    /// Replaces the episode panel with the engine's episodes.
    pub fn set_episodes(&mut self, rows: Vec<EpisodeRow>) {
        self.episodes = rows;
    }

    fn close_active(&mut self) {
        for row in &mut self.episodes {
            row.active = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{EpisodeReport, LevelReport, Usage};

    #[test]
    fn wrap_breaks_between_words_and_cuts_long_ones() {
        assert_eq!(wrap("short", 10), ["short"]);
        assert_eq!(wrap("one two three four", 9), ["one two", "three", "four"]);
        assert_eq!(wrap("abcdefghij klm", 4), ["abcd", "efgh", "ij", "klm"]);
        assert_eq!(wrap("", 5), [""]);
        assert!(
            wrap("a ünïcödé wörd wrapped at five", 5)
                .iter()
                .all(|row| row.chars().count() <= 5)
        );
    }

    #[test]
    fn events_build_the_conversation_gauge_and_episodes() {
        let mut screen = Screen::new("m", "s", 1000);
        for event in [
            Event::TaskStarted {
                task: 1,
                text: "fix it".into(),
            },
            Event::ReasoningDelta { text: "hm".into() },
            Event::TextDelta {
                text: "Look".into(),
            },
            Event::TextDelta { text: "ing".into() },
            Event::EpisodeStarted {
                name: "read".into(),
                kind: EpisodeKind::Expl,
                dependencies: vec![],
            },
            Event::EpisodeEnded {
                name: "read".into(),
                kind: EpisodeKind::Expl,
                description: Some("parser is in src/p.rs".into()),
            },
            Event::Evicted {
                tokens_before: 1200,
                tokens_after: 800,
                budget: 1000,
                floor: 850,
                first_changed: Some(3),
                folded: 0,
                episodes: vec![EpisodeReport {
                    name: "read".into(),
                    kind: EpisodeKind::Expl,
                    annotated: true,
                    levels: vec![
                        LevelReport {
                            level: Level::Reasoning,
                            tokens: 10,
                            tool_calls: 0,
                            blocks: 1,
                        },
                        LevelReport {
                            level: Level::Removed,
                            tokens: 390,
                            tool_calls: 1,
                            blocks: 0,
                        },
                    ],
                }],
            },
            Event::Response {
                request: 1,
                request_tokens: 900,
                context_tokens: 800,
                budget: 1000,
                usage: Usage {
                    input_tokens: 900,
                    cached_input_tokens: 450,
                    ..Usage::default()
                },
                cost_usd: Some(0.25),
            },
        ] {
            screen.apply(&event);
        }
        assert_eq!(screen.entries[0], Entry::User("fix it".into()));
        assert_eq!(screen.entries[1], Entry::Reasoning("hm".into()));
        assert_eq!(screen.entries[2], Entry::Assistant("Looking".into()));
        assert_eq!(screen.entries[3], Entry::Episode("▶ expl read".into()));
        assert_eq!(
            screen.entries[4],
            Entry::Episode("■ read ended: parser is in src/p.rs".into())
        );
        assert_eq!(screen.gauge.tokens, 900);
        assert_eq!(screen.gauge.floor, Some(850));
        assert_eq!(screen.gauge.evicted, 400);
        assert_eq!(screen.gauge.cache_share, Some(0.5));
        assert_eq!(screen.cost_usd, Some(0.25));
        let row = &screen.episodes[0];
        assert!(!row.active);
        assert_eq!(row.level, Some(Level::Removed));
        assert_eq!(row.residue.as_deref(), Some("parser is in src/p.rs"));
        assert_eq!(
            screen.entries[5],
            Entry::Note("evicted 400 tokens from 1 episode(s)".into())
        );
        screen.apply(&Event::Delegated {
            id: "d1".into(),
            requests: 2,
            usage: Usage::default(),
            cost_usd: Some(0.5),
        });
        assert_eq!(screen.cost_usd, Some(0.75), "a sub-agent's cost counts");
        assert_eq!(screen.gauge.tokens, 900, "not the parent's request");
    }

    #[test]
    fn a_pass_that_names_no_episode_says_only_what_it_removed() {
        let mut screen = Screen::new("m", "s", 1000);
        screen.apply(&Event::Evicted {
            tokens_before: 1200,
            tokens_after: 900,
            budget: 1000,
            floor: 900,
            first_changed: Some(2),
            folded: 0,
            episodes: vec![],
        });
        assert_eq!(screen.entries, [Entry::Note("evicted 300 tokens".into())]);
        assert_eq!(screen.gauge.evicted, 300);
    }
}
