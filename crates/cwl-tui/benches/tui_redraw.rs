//! How long the full-screen UI takes to redraw a 10,000-message session
//! (the issue's target: under 16 ms, one frame at 60 Hz). Prints figures;
//! no statistics crate. Run with
//! `cargo bench -p cwl-agent --bench tui_redraw`.

use std::time::{Duration, Instant};

use cwl::{EpisodeKind, Level};
use cwl_tui::{Entry, EpisodeRow, Screen, draw};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// A session of `messages` conversation entries of every kind and one
/// episode per ten of them.
fn session(messages: usize) -> Screen {
    let mut screen = Screen::new("gpt-5", "20261124-1700-abcd", 80_000);
    for i in 0..messages {
        let entry = match i % 5 {
            0 => Entry::User(format!("task {i}: fix the parser and add a test for it")),
            1 => Entry::Reasoning(format!(
                "Reasoning {i}: the parser drops the last token when the input ends without a newline."
            )),
            2 => Entry::Tool {
                name: "bash".into(),
                arguments: format!("{{\"command\":\"cargo test parser_{i}\"}}"),
                is_error: i % 3 == 0,
                content: (0..30)
                    .map(|l| format!("test parser_{i}_{l} ... ok\n"))
                    .collect(),
            },
            3 => Entry::Assistant(format!(
                "Answer {i}: fixed.\n```rust\nfn parse(tokens: &[Token]) -> Ast {{\n    todo!()\n}}\n```\nThe loop now keeps the last token, and a test covers it. {}",
                "More words to wrap. ".repeat(8)
            )),
            _ => Entry::Note(format!("evicted 1200 tokens from 2 episode(s) ({i})")),
        };
        screen.entries.push(entry);
    }
    for i in 0..messages / 10 {
        screen.episodes.push(EpisodeRow {
            name: format!("episode-{i}"),
            kind: if i % 2 == 0 {
                EpisodeKind::Expl
            } else {
                EpisodeKind::Act
            },
            dependencies: if i % 2 == 1 {
                vec![format!("episode-{}", i - 1)]
            } else {
                vec![]
            },
            active: i + 1 == messages / 10,
            level: (i < messages / 20).then_some(Level::Removed),
            residue: Some(format!("what episode {i} learned")),
        });
    }
    screen.gauge.tokens = 68_000;
    screen.gauge.floor = Some(68_000);
    screen.gauge.evicted = 1_200_000;
    screen.gauge.cache_share = Some(0.92);
    screen.input = "now add a test\nfor the empty input".into();
    screen
}

fn measure(name: &str, screen: &Screen, width: u16, height: u16) -> Duration {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    for _ in 0..20 {
        terminal.draw(|frame| draw(frame, screen)).unwrap();
    }
    let mut times: Vec<Duration> = (0..300)
        .map(|_| {
            // A redraw from scratch: every cell is compared and written.
            terminal.clear().unwrap();
            let start = Instant::now();
            terminal.draw(|frame| draw(frame, screen)).unwrap();
            start.elapsed()
        })
        .collect();
    times.sort();
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    let p99 = times[times.len() * 99 / 100];
    println!(
        "{name:<44} {width}x{height}: mean {mean:>9.3?}  median {:>9.3?}  p99 {p99:>9.3?}  max {:>9.3?}",
        times[times.len() / 2],
        times[times.len() - 1]
    );
    p99
}

fn main() {
    let mut screen = session(10_000);
    println!("redraw of a {}-message session:", screen.entries.len());
    let mut worst = Duration::ZERO;
    worst = worst.max(measure("at the bottom", &screen, 120, 40));
    worst = worst.max(measure("at the bottom", &screen, 250, 80));
    screen.scroll = 5_000;
    worst = worst.max(measure("scrolled 5,000 lines up", &screen, 250, 80));
    screen.scroll = 0;
    screen.expanded = true;
    worst = worst.max(measure("tool output expanded (Ctrl-O)", &screen, 250, 80));
    println!("worst p99: {worst:.3?} (target: under 16 ms)");
}
