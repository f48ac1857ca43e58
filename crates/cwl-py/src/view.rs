//! The view as Python objects, rebuilt only where it changed: a pass
//! changes the view rarely (in batches, down to the low-water mark), and a
//! push only adds at its end, so each call converts the new messages and
//! reuses the objects of the rest.

use cwl::{Context, Message, Source};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::to_py;
use crate::shapes::{self, Shape};

/// What a view message was when its objects were built.
enum Key {
    /// A pushed message, unchanged: it never changes.
    Pushed(u64),
    /// Anything else, compared by content.
    Other(Source, Message),
}

impl Key {
    fn of(source: Source, message: &Message) -> Key {
        match source {
            Source::Pushed(index) => Key::Pushed(index),
            other => Key::Other(other, message.clone()),
        }
    }

    fn matches(&self, source: Source, message: &Message) -> bool {
        match self {
            Key::Pushed(index) => source == Source::Pushed(*index),
            Key::Other(was, content) => *was == source && content == message,
        }
    }
}

/// The objects of a run of view messages.
struct Group {
    start: usize,
    messages: usize,
    values: Vec<Py<PyAny>>,
}

/// The last view built, in one shape.
#[derive(Default)]
pub struct ViewCache {
    shape: Option<Shape>,
    keys: Vec<Key>,
    groups: Vec<Group>,
}

impl ViewCache {
    /// The view of `context` in `shape`, as a new list of (shared) dicts.
    pub fn view<'py>(
        &mut self,
        py: Python<'py>,
        shape: Shape,
        context: &Context,
    ) -> PyResult<Bound<'py, PyList>> {
        if self.shape != Some(shape) {
            *self = ViewCache {
                shape: Some(shape),
                ..ViewCache::default()
            };
        }
        let entries: Vec<(Source, &Message)> = context.view_sources().collect();
        let same = self
            .keys
            .iter()
            .zip(&entries)
            .take_while(|(key, (source, message))| key.matches(*source, message))
            .count();
        // The last group kept is built again: a run of tool results may
        // have grown (Anthropic writes it as one user message).
        let whole = self
            .groups
            .iter()
            .take_while(|group| group.start + group.messages <= same)
            .count();
        self.groups.truncate(whole.saturating_sub(1));
        let from = self
            .groups
            .last()
            .map_or(0, |group| group.start + group.messages);
        self.keys.truncate(from);
        let messages: Vec<&Message> = entries[from..]
            .iter()
            .map(|(_, message)| *message)
            .collect();
        let mut at = 0;
        while at < messages.len() {
            let group = shapes::render_group(shape, &messages[at..]);
            let values = group
                .values
                .iter()
                .map(|value| to_py(py, value).map(Bound::unbind))
                .collect::<PyResult<_>>()?;
            let used = group.messages.max(1);
            self.groups.push(Group {
                start: from + at,
                messages: used,
                values,
            });
            at += used;
        }
        self.keys.extend(
            entries[from..]
                .iter()
                .map(|(source, message)| Key::of(*source, message)),
        );
        PyList::new(
            py,
            self.groups
                .iter()
                .flat_map(|group| group.values.iter().map(|value| value.bind(py))),
        )
    }
}
