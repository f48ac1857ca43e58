//! The engine's view back in wire form, unit by unit.

use std::ops::Range;

use cwl::{Message, Source};

use super::{Item, Part, Unit, Wire, note_text};

#[derive(Debug, Clone)]
struct Span {
    items: Range<usize>,
    pushes: Range<u64>,
}

/// Which wire items each engine message came from, for one conversation.
///
/// Conversations grow by prefix, so the items of every later request
/// start with the same items at the same positions.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    spans: Vec<Span>,
    items: usize,
    pushes: u64,
}

impl Layout {
    /// An empty layout after `prologue` engine messages that come from no
    /// wire item (the system prompt, sent in its own field).
    pub fn new(prologue: u64) -> Self {
        Layout {
            spans: Vec::new(),
            items: 0,
            pushes: prologue,
        }
    }

    /// Records the next unit, once its messages are pushed.
    pub fn add(&mut self, unit: &Unit) {
        let pushes = self.pushes..self.pushes + unit.messages.len() as u64;
        let items = self.items..self.items + unit.items;
        self.items = items.end;
        self.pushes = pushes.end;
        self.spans.push(Span { items, pushes });
    }

    /// Wire items covered so far.
    pub fn items(&self) -> usize {
        self.items
    }

    /// Engine messages pushed so far, the prologue included.
    pub fn pushes(&self) -> u64 {
        self.pushes
    }

    fn unit_of(&self, push: u64) -> Option<usize> {
        let at = self.spans.partition_point(|span| span.pushes.end <= push);
        self.spans
            .get(at)
            .filter(|span| span.pushes.contains(&push))
            .map(|_| at)
    }
}

/// The view as a JSON array of wire items: unchanged units as the client's
/// bytes, altered ones rebuilt, notes for residues; units the engine holds
/// nothing for (items it has no use for) go where they stood.
///
/// `items` are the request's items, of which `layout` covers a prefix.
pub fn render<'a>(
    wire: &dyn Wire,
    items: &[Item],
    layout: &Layout,
    view: impl Iterator<Item = (Source, &'a Message)>,
) -> String {
    let mut out = Out::default();
    let mut next = 0;
    let mut open: Option<(usize, Vec<Part<'a>>)> = None;
    for (source, message) in view {
        let (push, altered) = match source {
            Source::Pushed(push) => (push, false),
            Source::Altered(push) => (push, true),
            _ => {
                flush(wire, items, layout, &mut open, &mut out);
                out.value(&wire.note(&note_text(message)));
                continue;
            }
        };
        let Some(unit) = layout.unit_of(push) else {
            continue;
        };
        if open.as_ref().is_none_or(|(at, _)| *at != unit) {
            flush(wire, items, layout, &mut open, &mut out);
            passthrough(items, layout, next..unit, &mut out);
            next = unit + 1;
            open = Some((unit, Vec::new()));
        }
        if let Some((_, parts)) = &mut open {
            parts.push(Part {
                index: (push - layout.spans[unit].pushes.start) as usize,
                message,
                altered,
            });
        }
    }
    flush(wire, items, layout, &mut open, &mut out);
    passthrough(items, layout, next..layout.spans.len(), &mut out);
    for item in &items[layout.items.min(items.len())..] {
        out.raw(item.raw.get());
    }
    out.finish()
}

/// Emits the units in `units` that hold no engine message.
fn passthrough(items: &[Item], layout: &Layout, units: Range<usize>, out: &mut Out) {
    for span in &layout.spans[units] {
        if span.pushes.is_empty() {
            for item in &items[span.items.clone()] {
                out.raw(item.raw.get());
            }
        }
    }
}

fn flush(
    wire: &dyn Wire,
    items: &[Item],
    layout: &Layout,
    open: &mut Option<(usize, Vec<Part<'_>>)>,
    out: &mut Out,
) {
    let Some((unit, parts)) = open.take() else {
        return;
    };
    let span = &layout.spans[unit];
    let whole = parts.len() as u64 == span.pushes.end - span.pushes.start
        && parts.iter().all(|part| !part.altered);
    if whole {
        for item in &items[span.items.clone()] {
            out.raw(item.raw.get());
        }
    } else {
        for value in wire.rebuild(&items[span.items.clone()], &parts) {
            out.value(&value);
        }
    }
}

#[derive(Default)]
struct Out {
    text: String,
    count: usize,
}

impl Out {
    fn raw(&mut self, raw: &str) {
        self.text.push(if self.count == 0 { '[' } else { ',' });
        self.text.push_str(raw);
        self.count += 1;
    }

    fn value(&mut self, value: &serde_json::Value) {
        self.raw(&value.to_string());
    }

    fn finish(mut self) -> String {
        if self.count == 0 {
            self.text.push('[');
        }
        self.text.push(']');
        self.text
    }
}
