//! The full-screen terminal UI of `cwl chat` (ratatui and crossterm).
//!
//! [`Screen`] is what the UI shows, fed by the agent's [`Event`]s;
//! [`draw`] lays it out on any ratatui backend; [`App`] turns keys and the
//! agent's messages into screen changes and [`Effect`]s; [`Forward`] and
//! [`UiApprover`] connect the agent to it; [`engine`] answers the slash
//! commands from the engine; [`TerminalGuard`] takes the terminal over and
//! always gives it back. The loop that ties them together is in the CLI
//! (`cli::fullscreen`).
//!
//! [`Event`]: cwl_agent::agent::Event

mod app;
mod bridge;
pub mod engine;
mod fullscreen;
mod input;
mod screen;
mod terminal;
mod view;

pub use app::{App, Effect, FromAgent, HELP, Job, Reset};
pub use bridge::{Forward, UiApprover};
pub use input::{Action, COMMANDS, Editor, Request, complete, parse};
pub use screen::{Entry, EpisodeRow, Gauge, Screen};
pub use terminal::{TerminalGuard, restore};
pub use view::{conversation_width, draw};

use cwl_agent::cli::ChatArgs;

/// Runs `cwl chat`: full screen when stdin and stdout are terminals (and
/// neither `--plain` nor `--json` is given), else as lines
/// ([`cwl_agent::cli::run_chat`]).
pub fn run_chat(args: ChatArgs) -> anyhow::Result<()> {
    if fullscreen::wanted(&args) {
        cwl_agent::cli::runtime()?.block_on(fullscreen::fullscreen(args))
    } else {
        cwl_agent::cli::run_chat(args)
    }
}
