//! The view as Python objects, rebuilt only where it changed: a pass
//! changes the view rarely (in batches, down to the low-water mark) and
//! says from where ([`cwl::Report::first_changed`]), and a push only adds
//! at its end, so each call converts the new messages, keeps the objects
//! of the rest in one list, and hands out a copy of it (a C-level slice).

use cwl::{Context, Message};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::to_py;
use crate::shapes::{self, Shape};

/// A run of view messages and how many objects of the list it made.
struct Group {
    start: usize,
    messages: usize,
    values: usize,
}

/// The last view built, in one shape.
#[derive(Default)]
pub struct ViewCache {
    shape: Option<Shape>,
    groups: Vec<Group>,
    list: Option<Py<PyList>>,
}

impl ViewCache {
    /// The view of `context` in `shape`, as a new list of (shared) dicts;
    /// `changed` is the first position that may have changed since the
    /// last call other than at the end ([`crate::core::Core::take_changed`]).
    pub fn view<'py>(
        &mut self,
        py: Python<'py>,
        shape: Shape,
        context: &Context,
        changed: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        if self.shape != Some(shape) {
            *self = ViewCache {
                shape: Some(shape),
                ..ViewCache::default()
            };
        }
        let list = self
            .list
            .get_or_insert_with(|| PyList::empty(py).unbind())
            .bind(py)
            .clone();
        let valid = changed.unwrap_or(usize::MAX);
        // Groups wholly before the change stay; the last of them is built
        // again, as a run of tool results may have grown (Anthropic writes
        // it as one user message).
        let whole = self
            .groups
            .iter()
            .take_while(|group| group.start + group.messages <= valid)
            .count();
        self.groups.truncate(whole.saturating_sub(1));
        let kept: usize = self.groups.iter().map(|group| group.values).sum();
        list.del_slice(kept, usize::MAX)?;
        let from = self
            .groups
            .last()
            .map_or(0, |group| group.start + group.messages);
        let messages: Vec<&Message> = context.view().skip(from).collect();
        let mut at = 0;
        while at < messages.len() {
            let group = shapes::render_group(shape, &messages[at..]);
            for value in &group.values {
                list.append(to_py(py, value)?)?;
            }
            let used = group.messages.max(1);
            self.groups.push(Group {
                start: from + at,
                messages: used,
                values: group.values.len(),
            });
            at += used;
        }
        Ok(list.get_slice(0, list.len()))
    }
}
