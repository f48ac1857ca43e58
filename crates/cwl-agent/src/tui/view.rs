//! Laying a [`Screen`] out: status line, conversation beside the episode
//! panel, the context gauge, the input.

use cwl::EpisodeKind;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Gauge as Bar, Paragraph};

use super::screen::{Entry, Screen};
use crate::agent::status::human_tokens;

/// Draws `screen` on the whole frame.
pub fn draw(frame: &mut Frame<'_>, screen: &Screen) {
    let input_rows = screen.input.lines().count().clamp(1, 5) as u16 + 2;
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
    let title = match &screen.approval {
        Some(call) => format!(" allow {call}? [y]es / [n]o / [a]lways "),
        None => " Enter sends · Alt-Enter newline · /help ".to_string(),
    };
    frame.render_widget(
        Paragraph::new(screen.input.as_str())
            .block(Block::default().borders(Borders::ALL).title(title)),
        input,
    );
}

fn status_line(screen: &Screen) -> Line<'static> {
    let cost = match screen.cost_usd {
        Some(cost) => format!("${cost:.4}"),
        None => "cost unknown".to_string(),
    };
    Line::from(vec![
        Span::styled(" cwl ", Style::default().add_modifier(Modifier::REVERSED)),
        Span::raw(format!(
            " {} · session {} · {cost}",
            screen.model, screen.session
        )),
    ])
}

/// The conversation's last lines: only the entries that reach the pane
/// are turned into lines, so a long session draws as fast as a short one.
fn draw_conversation(frame: &mut Frame<'_>, area: Rect, screen: &Screen) {
    let rows = area.height.saturating_sub(2) as usize;
    let wanted = rows + screen.scroll;
    let mut lines: Vec<Line<'static>> = Vec::new();
    for entry in screen.entries.iter().rev() {
        let mut block = entry_lines(entry);
        block.append(&mut lines);
        lines = block;
        if lines.len() >= wanted {
            break;
        }
    }
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

fn entry_lines(entry: &Entry) -> Vec<Line<'static>> {
    let dim = Style::default().add_modifier(Modifier::DIM);
    let text_lines = |text: &str, prefix: &str, style: Style| -> Vec<Line<'static>> {
        text.lines()
            .enumerate()
            .map(|(i, line)| {
                let lead = if i == 0 { prefix } else { "  " };
                Line::styled(format!("{lead}{line}"), style)
            })
            .collect()
    };
    match entry {
        Entry::User(text) => text_lines(text, "› ", Style::default().fg(Color::Cyan)),
        Entry::Assistant(text) => text_lines(text, "", Style::default()),
        Entry::Reasoning(text) => text_lines(text, "· ", dim),
        Entry::Tool {
            name,
            arguments,
            is_error,
        } => {
            let mark = if *is_error { "✗" } else { "⚙" };
            let style = if *is_error {
                Style::default().fg(Color::Red)
            } else {
                Style::default().fg(Color::Yellow)
            };
            let one_line: String = arguments.split_whitespace().collect::<Vec<_>>().join(" ");
            vec![Line::styled(format!("{mark} {name} {one_line}"), style)]
        }
        Entry::Note(text) => text_lines(text, "ℹ ", dim),
    }
}

fn draw_episodes(frame: &mut Frame<'_>, area: Rect, screen: &Screen) {
    let rows = area.height.saturating_sub(2) as usize;
    let skip = screen.episodes.len().saturating_sub(rows);
    let lines: Vec<Line<'static>> = screen.episodes[skip..]
        .iter()
        .map(|row| {
            let kind = match row.kind {
                EpisodeKind::Expl => "expl",
                EpisodeKind::Act => "act ",
            };
            let state = if row.active {
                "▶".to_string()
            } else {
                row.level
                    .map_or("·".to_string(), |l| format!("[{}]", l.label()))
            };
            let deps = if row.dependencies.is_empty() {
                String::new()
            } else {
                format!(" ← {}", row.dependencies.join(","))
            };
            let residue = match (&row.residue, row.level) {
                (Some(text), Some(cwl::Level::Removed)) => format!(" “{text}”"),
                _ => String::new(),
            };
            let style = if row.active {
                Style::default().add_modifier(Modifier::BOLD)
            } else if row.level.is_some() {
                Style::default().add_modifier(Modifier::DIM)
            } else {
                Style::default()
            };
            Line::styled(format!("{kind} {}{deps} {state}{residue}", row.name), style)
        })
        .collect();
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
        "context {} / τ {} ({percent:.0}%){floor} · evicted {}{cache}",
        human_tokens(gauge.tokens),
        human_tokens(gauge.budget),
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
    use crate::agent::Event;
    use crate::tui::Screen;
    use cwl::{EpisodeReport, Level, LevelReport, Usage};
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
        // Debug build; the target (16 ms) is for release.
        assert!(each < std::time::Duration::from_millis(160), "{each:?}");
        eprintln!("redraw of a 10,000-message session (200x60, debug): {each:?}");
    }
}
