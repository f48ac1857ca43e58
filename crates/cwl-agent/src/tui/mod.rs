//! The full-screen terminal UI's model and drawing (issue 13, first part):
//! [`Screen`] is what the UI shows, fed by the agent's [`Event`]s;
//! [`draw`] lays it out on any ratatui backend. The interactive loop that
//! drives it from `cwl chat` is not wired yet (see the README).
//!
//! [`Event`]: crate::agent::Event

mod input;
mod screen;
mod view;

pub use input::{Action, COMMANDS, Editor, Request, complete, parse};
pub use screen::{Entry, EpisodeRow, Gauge, Screen};
pub use view::draw;
