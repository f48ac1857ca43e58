//! Laying a [`Screen`] out: status line, conversation beside the episode
//! panel, the context gauge, the input.

use cwl::EpisodeKind;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Gauge as Bar, Paragraph};

use super::screen::{Entry, RESULT_ROWS, Screen, wrap};
use cwl_agent::agent::status::human_tokens;

/// Lines of the input box shown at most; longer input shows its end.
const INPUT_ROWS: usize = 5;

/// The width of the conversation's text in a frame `width` columns wide.
pub fn conversation_width(width: u16) -> usize {
    let [conversation, _] =
        Layout::horizontal([Constraint::Percentage(68), Constraint::Percentage(32)])
            .areas(Rect::new(0, 0, width, 1));
    conversation.width.saturating_sub(2).max(1) as usize
}

/// Draws `screen` on the whole frame.
pub fn draw(frame: &mut Frame<'_>, screen: &Screen) {
    let input_lines: Vec<&str> = screen.input.split('\n').collect();
    let input_rows = input_lines.len().clamp(1, INPUT_ROWS) as u16 + 2;
    let [status, body, gauge, input] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(input_rows),
    ])
    .areas(frame.area());
    let [conversation, episodes] =
        Layout::horizontal([Constraint::Percentage(68), Constraint::Percentage(32)]).areas(body);
    frame.render_widget(Paragraph::new(status_line(screen)), status);
    draw_conversation(frame, conversation, screen);
    draw_episodes(frame, episodes, screen);
    draw_gauge(frame, gauge, screen);
    let (title, border) = match &screen.approval {
        Some(call) => (
            format!(" allow {call}? [y]es / [n]o / [a]lways "),
            Style::default().fg(Color::Yellow),
        ),
        None if screen.busy => (
            " working · Ctrl-C cancels the turn · PageUp/PageDown scroll ".to_string(),
            Style::default(),
        ),
        None => (
            " Enter sends · Alt-Enter newline · /help · Ctrl-O tool output ".to_string(),
            Style::default(),
        ),
    };
    let skip = input_lines.len().saturating_sub(INPUT_ROWS);
    let title = if skip > 0 {
        format!(
            " {} lines, the last {INPUT_ROWS} shown ·{title}",
            input_lines.len()
        )
    } else {
        title
    };
    let shown: Vec<Line<'_>> = input_lines[skip..]
        .iter()
        .map(|line| Line::raw(*line))
        .collect();
    frame.render_widget(
        Paragraph::new(shown).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(border)
                .title(title),
        ),
        input,
    );
    if screen.approval.is_none() {
        let last = input_lines.last().map_or(0, |l| l.chars().count()) as u16;
        let row = (input_lines.len() - skip) as u16;
        let x = (input.x + 1 + last).min(input.right().saturating_sub(2));
        frame.set_cursor_position((x, input.y + row));
    }
}

fn status_line(screen: &Screen) -> Line<'static> {
    let cost = match screen.cost_usd {
        Some(cost) => format!("${cost:.4}"),
        None => "cost unknown".to_string(),
    };
    let state = if screen.busy { " · working…" } else { "" };
    let strategy = screen
        .strategy
        .as_ref()
        .map_or(String::new(), |name| format!(" · strategy {name}"));
    let sandbox = screen
        .sandbox
        .as_ref()
        .map_or(String::new(), |mode| format!(" · sandbox {mode}"));
    Line::from(vec![
        Span::styled(" cwl ", Style::default().add_modifier(Modifier::REVERSED)),
        Span::raw(format!(
            " {} · session {}{strategy}{sandbox} · {cost}{state}",
            screen.model, screen.session
        )),
    ])
}

/// The conversation's last lines: only the entries that reach the pane
/// are turned into lines, so a long session draws as fast as a short one.
fn draw_conversation(frame: &mut Frame<'_>, area: Rect, screen: &Screen) {
    let rows = area.height.saturating_sub(2) as usize;
    let width = area.width.saturating_sub(2).max(1) as usize;
    let wanted = rows + screen.scroll;
    let mut blocks: Vec<Vec<Line<'static>>> = Vec::new();
    let mut count = 0;
    for entry in screen.entries.iter().rev() {
        let block = entry_lines(entry, width, screen.expanded);
        count += block.len();
        blocks.push(block);
        if count >= wanted {
            break;
        }
    }
    let mut lines: Vec<Line<'static>> = blocks.into_iter().rev().flatten().collect();
    let end = lines.len().saturating_sub(screen.scroll);
    let start = end.saturating_sub(rows);
    let shown: Vec<Line<'static>> = lines.drain(start..end).collect();
    let title = if screen.scroll > 0 {
        format!(" conversation (scrolled {} lines) ", screen.scroll)
    } else {
        " conversation ".to_string()
    };
    frame.render_widget(
        Paragraph::new(shown).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

/// The rows of `text`: its first line after `prefix`, the others indented
/// as much, each wrapped to `width`.
fn text_rows(text: &str, prefix: &str, style: Style, width: usize) -> Vec<Line<'static>> {
    let indent = " ".repeat(prefix.chars().count());
    let room = width.saturating_sub(indent.len()).max(1);
    let mut rows = Vec::new();
    for (i, line) in text
        .lines()
        .chain(text.is_empty().then_some(""))
        .enumerate()
    {
        let lead = if i == 0 { prefix } else { indent.as_str() };
        for (j, piece) in wrap(line, room).into_iter().enumerate() {
            let lead = if j == 0 { lead } else { indent.as_str() };
            rows.push(Line::styled(format!("{lead}{piece}"), style));
        }
    }
    rows
}

/// The model's text, markdown-lite: code blocks (between ``` fences) in
/// green, headings bold.
fn markdown_rows(text: &str, width: usize) -> Vec<Line<'static>> {
    let mut rows = Vec::new();
    let mut code = false;
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        let style = if code || fence {
            Style::default().fg(Color::Green)
        } else if line.starts_with('#') {
            Style::default().add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        };
        if fence {
            code = !code;
        }
        for piece in wrap(line, width) {
            rows.push(Line::styled(piece, style));
        }
    }
    rows
}

fn entry_lines(entry: &Entry, width: usize, expanded: bool) -> Vec<Line<'static>> {
    let dim = Style::default().add_modifier(Modifier::DIM);
    match entry {
        Entry::User(text) => text_rows(text, "› ", Style::default().fg(Color::Cyan), width),
        Entry::Assistant(text) => markdown_rows(text, width),
        Entry::Reasoning(text) => text_rows(text, "· ", dim, width),
        Entry::Tool {
            name,
            arguments,
            is_error,
            content,
        } => {
            let mark = if *is_error { "✗" } else { "⚙" };
            let style = if *is_error {
                Style::default().fg(Color::Red)
            } else {
                Style::default().fg(Color::Yellow)
            };
            let call = cwl_agent::render::describe::call(name, arguments);
            let one_line: String = call.split_whitespace().collect::<Vec<_>>().join(" ");
            let head: String = format!("{mark} {one_line}").chars().take(width).collect();
            let mut rows = vec![Line::styled(head, style)];
            if expanded {
                let lines: Vec<&str> = content.lines().collect();
                for line in lines.iter().take(RESULT_ROWS) {
                    rows.extend(text_rows(line, "  │ ", dim, width));
                }
                if lines.len() > RESULT_ROWS {
                    rows.push(Line::styled(
                        format!("  │ … {} more lines", lines.len() - RESULT_ROWS),
                        dim,
                    ));
                }
            }
            rows
        }
        Entry::Episode(text) => text_rows(text, "", Style::default().fg(Color::Magenta), width),
        Entry::Note(text) => text_rows(text, "ℹ ", dim, width),
        Entry::Output(text) => text_rows(text, "» ", Style::default(), width),
        Entry::Error(text) => text_rows(text, "✗ ", Style::default().fg(Color::Red), width),
    }
}

/// The episode panel: one line per episode (kind, name, dependencies,
/// state: ▶ active, ✓ closed, or the deepest eviction level reached), and
/// under a closed expl what it learned (its residue once removed); the
/// newest episodes when they do not all fit.
fn draw_episodes(frame: &mut Frame<'_>, area: Rect, screen: &Screen) {
    let rows = area.height.saturating_sub(2) as usize;
    let width = area.width.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    for row in screen.episodes.iter().rev() {
        if lines.len() >= rows {
            break;
        }
        let kind = match row.kind {
            EpisodeKind::Expl => "expl",
            EpisodeKind::Act => "act ",
        };
        let state = if row.active {
            "▶".to_string()
        } else {
            row.level
                .map_or("✓".to_string(), |l| format!("[{}]", l.label()))
        };
        let deps = if row.dependencies.is_empty() {
            String::new()
        } else {
            format!(" ← {}", row.dependencies.join(","))
        };
        let style = if row.active {
            Style::default().add_modifier(Modifier::BOLD)
        } else if row.level.is_some() {
            Style::default().add_modifier(Modifier::DIM)
        } else {
            Style::default()
        };
        if let (Some(text), false) = (&row.residue, row.active) {
            let residue: String = format!("  “{text}”").chars().take(width).collect();
            lines.push(Line::styled(
                residue,
                Style::default().add_modifier(Modifier::DIM),
            ));
        }
        let head: String = format!("{kind} {}{deps} {state}", row.name)
            .chars()
            .take(width)
            .collect();
        lines.push(Line::styled(head, style));
    }
    lines.reverse();
    let skip = lines.len().saturating_sub(rows);
    lines.drain(..skip);
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" episodes ")),
        area,
    );
}

fn draw_gauge(frame: &mut Frame<'_>, area: Rect, screen: &Screen) {
    let gauge = &screen.gauge;
    let percent = gauge.percent();
    let floor = gauge.floor.map_or(String::new(), |f| {
        format!(" · low-water {}", human_tokens(f))
    });
    let cache = gauge
        .cache_share
        .map_or(String::new(), |c| format!(" · cache {:.0}%", c * 100.0));
    let label = format!(
        "context {} / τ {} ({percent:.0}%){floor} · history {}, {} evicted{cache}",
        human_tokens(gauge.tokens),
        human_tokens(gauge.budget),
        human_tokens(gauge.tokens + gauge.evicted),
        human_tokens(gauge.evicted),
    );
    let color = if percent > 100.0 {
        Color::Red
    } else if percent > 85.0 {
        Color::Yellow
    } else {
        Color::Green
    };
    frame.render_widget(
        Bar::default()
            .gauge_style(Style::default().fg(color))
            .ratio((percent / 100.0).clamp(0.0, 1.0))
            .label(label),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Screen;
    use cwl::{EpisodeReport, Level, LevelReport, Usage};
    use cwl_agent::agent::Event;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn scripted() -> Screen {
        let mut screen = Screen::new("gpt-test", "20261124-1700-abcd", 8000);
        let events = [
            Event::TaskStarted {
                task: 1,
                text: "fix the parser".into(),
            },
            Event::ReasoningDelta {
                text: "Read the parser first.".into(),
            },
            Event::EpisodeStarted {
                name: "read-parser".into(),
                kind: EpisodeKind::Expl,
                dependencies: vec![],
            },
            Event::ToolResult {
                id: "c1".into(),
                name: "read".into(),
                arguments: "{\"path\": \"src/parse.rs\"}".into(),
                is_error: false,
                content: "fn parse() {}".into(),
            },
            Event::EpisodeEnded {
                name: "read-parser".into(),
                kind: EpisodeKind::Expl,
                description: Some("parse() drops the last token".into()),
            },
            Event::EpisodeStarted {
                name: "fix-parser".into(),
                kind: EpisodeKind::Act,
                dependencies: vec!["read-parser".into()],
            },
            Event::Evicted {
                tokens_before: 9000,
                tokens_after: 6500,
                budget: 8000,
                floor: 6800,
                first_changed: Some(4),
                folded: 0,
                episodes: vec![EpisodeReport {
                    name: "read-parser".into(),
                    kind: EpisodeKind::Expl,
                    annotated: true,
                    levels: vec![LevelReport {
                        level: Level::Removed,
                        tokens: 2500,
                        tool_calls: 1,
                        blocks: 1,
                    }],
                }],
            },
            Event::Response {
                request: 2,
                request_tokens: 6900,
                context_tokens: 6500,
                budget: 8000,
                usage: Usage {
                    input_tokens: 6900,
                    cached_input_tokens: 5175,
                    ..Usage::default()
                },
                cost_usd: Some(0.0123),
            },
            Event::TextDelta {
                text: "Fixed: the loop now\nkeeps the last token.".into(),
            },
        ];
        for event in &events {
            screen.apply(event);
        }
        screen.input = "now add a test".into();
        screen
    }

    fn render(screen: &Screen, width: u16, height: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|frame| draw(frame, screen)).unwrap();
        let buffer = terminal.backend().buffer();
        let mut text = String::new();
        for y in 0..buffer.area.height {
            let row: String = (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol().to_string())
                .collect();
            text.push_str(row.trim_end());
            text.push('\n');
        }
        text
    }

    #[test]
    fn main_layout() {
        insta::assert_snapshot!(render(&scripted(), 100, 16));
    }

    #[test]
    fn the_status_line_shows_the_sandbox_once_it_is_told() {
        let mut screen = scripted();
        let first = render(&screen, 120, 16);
        assert!(!first.contains("sandbox"), "{first}");
        screen.apply(&Event::Sandbox {
            mode: "read-only".into(),
            warning: Some("only partly enforced".into()),
        });
        let told = render(&screen, 120, 16);
        let status = told.lines().find(|line| line.contains(" cwl ")).unwrap();
        assert!(status.contains(" · sandbox read-only · "), "{told}");
        assert!(told.contains("only partly enforced"), "{told}");
    }

    #[test]
    fn approval_prompt_and_scrolled_conversation() {
        let mut screen = scripted();
        screen.apply(&Event::ApprovalRequest {
            id: "c2".into(),
            name: "bash".into(),
            arguments: "{\"command\":\"cargo test\"}".into(),
            mutating: true,
        });
        screen.scroll = 2;
        insta::assert_snapshot!(render(&screen, 100, 12));
    }

    fn key(app: &mut crate::App, code: ratatui::crossterm::event::KeyCode) {
        use ratatui::crossterm::event::{KeyEvent, KeyModifiers};
        app.key(KeyEvent::new(code, KeyModifiers::NONE));
    }

    fn typed(app: &mut crate::App, text: &str) {
        use ratatui::crossterm::event::KeyCode;
        for c in text.chars() {
            key(app, KeyCode::Char(c));
        }
        key(app, KeyCode::Enter);
    }

    #[test]
    fn unknown_command_error_while_a_turn_runs() {
        let mut app = crate::App::new(scripted(), 100, 14);
        typed(&mut app, "fix the tests");
        app.from_agent(crate::FromAgent::Event(Event::TaskStarted {
            task: 2,
            text: "fix the tests".into(),
        }));
        typed(&mut app, "/bogus now");
        insta::assert_snapshot!(render(&app.screen, 100, 14));
    }

    #[test]
    fn scrolled_view_with_tool_output_expanded() {
        use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
        let mut app = crate::App::new(scripted(), 100, 14);
        app.from_agent(crate::FromAgent::Event(Event::ToolResult {
            id: "c3".into(),
            name: "bash".into(),
            arguments: "{\"command\":\"cargo test\"}".into(),
            is_error: true,
            content: (1..=20)
                .map(|i| format!("test t{i} ... FAILED\n"))
                .collect(),
        }));
        for i in 0..8 {
            app.from_agent(crate::FromAgent::Event(Event::Note {
                text: format!("note {i}"),
            }));
        }
        app.key(KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL));
        key(&mut app, KeyCode::PageUp);
        key(&mut app, KeyCode::PageUp);
        insta::assert_snapshot!(render(&app.screen, 100, 14));
    }

    #[test]
    fn a_large_paste_shows_its_last_lines_and_its_size() {
        let mut app = crate::App::new(scripted(), 100, 20);
        let pasted: String = (1..=40).map(|i| format!("pasted line {i}\n")).collect();
        app.paste(&pasted);
        app.paste("and more");
        let text = render(&app.screen, 100, 20);
        assert!(
            text.contains("┌ 41 lines, the last 5 shown · Enter sends"),
            "{text}"
        );
        assert!(text.contains("│pasted line 37"), "{text}");
        assert!(text.contains("│and more"), "{text}");
        assert!(!text.contains("pasted line 36"), "{text}");
    }

    #[test]
    fn a_long_session_draws_only_its_tail() {
        let mut screen = Screen::new("m", "s", 1000);
        for i in 0..10_000 {
            screen
                .entries
                .push(Entry::Assistant(format!("message {i}")));
        }
        let text = render(&screen, 60, 10);
        assert!(text.contains("message 9999"), "{text}");
        assert!(
            text.contains("message 9997") && !text.contains("message 9996"),
            "{text}"
        );
        let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
        let start = std::time::Instant::now();
        for _ in 0..10 {
            terminal.draw(|frame| draw(frame, &screen)).unwrap();
        }
        let each = start.elapsed() / 10;
        // Debug build; the issue's target (16 ms) is for release.
        assert!(each < std::time::Duration::from_millis(160), "{each:?}");
        eprintln!("redraw of a 10,000-message session (200x60, debug): {each:?}");
    }
}
