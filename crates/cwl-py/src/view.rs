//! The view as Python objects, written only where it changed. A push only
//! adds at the view's end, and a pass changes it from its report's
//! [`cwl::Report::first_changed`] on; even there, a message the view still
//! holds unchanged ([`cwl::Source::Pushed`]) keeps the objects written for
//! it. Each call writes the new and changed messages and hands out a new
//! list of the objects (a C-level slice of the one kept here): the list is
//! the caller's; its dicts are read-only ([`crate::frozen`]), as every
//! view shares them.

use std::ops::Range;

use cwl::{Context, Message, Source};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::{Containers, write};
use crate::objects;
use crate::shapes::{self, Shape};

/// A run of view messages written together (one message, or an Anthropic
/// run of tool results) and its objects in the list.
struct Group {
    /// View position of its first message.
    start: usize,
    /// View messages it stands for.
    messages: usize,
    /// Position of its first object in the list.
    first: usize,
    /// Objects it was written as.
    values: usize,
    /// The pushed positions of its messages when the view holds every one
    /// unchanged: the same key, the same objects.
    key: Option<Box<[u64]>>,
}

/// The last view written, in one shape.
#[derive(Default)]
pub struct ViewCache {
    shape: Option<Shape>,
    groups: Vec<Group>,
    list: Option<Py<PyList>>,
}

impl ViewCache {
    /// The view of `context` in `shape`, as a new list of (shared,
    /// read-only) dicts; `changed` is the first position that may have
    /// changed since the last call other than at the end
    /// ([`crate::core::Core::take_changed`]).
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
        let view = self.update(py, shape, context, changed);
        if view.is_err() {
            // Half written: the next call starts afresh.
            *self = ViewCache::default();
        }
        view
    }

    fn update<'py>(
        &mut self,
        py: Python<'py>,
        shape: Shape,
        context: &Context,
        changed: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = self
            .list
            .get_or_insert_with(|| PyList::empty(py).unbind())
            .bind(py)
            .clone();
        // Groups wholly before the change stay; the last of them is looked
        // at again, as a run of tool results may have grown (Anthropic
        // writes it as one user message).
        let valid = changed.unwrap_or(usize::MAX);
        let whole = self
            .groups
            .partition_point(|group| group.start + group.messages <= valid);
        let old = self.groups.split_off(whole.saturating_sub(1));
        let kept = old.first().map_or(list.len(), |group| group.first);
        let mut reuse = Reuse {
            groups: &old,
            objects: list.get_slice(kept, list.len()),
            offset: kept,
            at: 0,
        };
        list.del_slice(kept, usize::MAX)?;
        let from = self
            .groups
            .last()
            .map_or(0, |group| group.start + group.messages);
        let (sources, messages): (Vec<Source>, Vec<&Message>) =
            context.view_sources().skip(from).unzip();
        let mut at = 0;
        while at < messages.len() {
            let used = shapes::group_len(shape, &messages[at..]).max(1);
            let key = key(&sources[at..at + used]);
            let first = list.len();
            match key.as_deref().and_then(|key| reuse.find(key)) {
                Some(objects) => {
                    for index in objects {
                        list.append(reuse.objects.get_item(index)?)?;
                    }
                }
                None => {
                    for object in write_group(py, shape, &messages[at..at + used])? {
                        list.append(object)?;
                    }
                }
            }
            self.groups.push(Group {
                start: from + at,
                messages: used,
                first,
                values: list.len() - first,
                key,
            });
            at += used;
        }
        Ok(list.get_slice(0, list.len()))
    }
}

/// The pushed positions of `sources`, if every one is a pushed message
/// the view holds unchanged.
fn key(sources: &[Source]) -> Option<Box<[u64]>> {
    sources
        .iter()
        .map(|source| match source {
            Source::Pushed(index) => Some(*index),
            _ => None,
        })
        .collect()
}

/// Writes the messages of one group as Python objects.
fn write_group<'py>(
    py: Python<'py>,
    shape: Shape,
    messages: &[&Message],
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if shape == Shape::Chat {
        return Ok(vec![objects::chat(py, messages[0])?]);
    }
    shapes::render_group(shape, messages)
        .values
        .iter()
        .map(|value| write(py, value, Containers::Frozen))
        .collect()
}

/// The groups taken off the end of the view, whose objects a group
/// written again with the same key takes back. Keys come in view order,
/// and pushed positions grow along the view, so one walk finds them.
struct Reuse<'a, 'py> {
    groups: &'a [Group],
    /// Their objects, the list's from `offset` on.
    objects: Bound<'py, PyList>,
    offset: usize,
    at: usize,
}

impl Reuse<'_, '_> {
    /// Where the objects of the group keyed `key` are in `objects`, if
    /// one was taken off.
    fn find(&mut self, key: &[u64]) -> Option<Range<usize>> {
        let first = |group: &Group| group.key.as_deref().and_then(|key| key.first().copied());
        while let Some(group) = self.groups.get(self.at) {
            match first(group) {
                None => self.at += 1,
                Some(index) if index < key[0] => self.at += 1,
                Some(_) if group.key.as_deref() == Some(key) => {
                    self.at += 1;
                    let start = group.first - self.offset;
                    return Some(start..start + group.values);
                }
                Some(_) => return None,
            }
        }
        None
    }
}
