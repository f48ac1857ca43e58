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

/// A cache breakpoint to place: on the view message from this source, a
/// copy of this `cache_control` value.
#[derive(Debug, Clone, Copy)]
pub struct Mark<'m> {
    /// Where the message comes from.
    pub source: Source,
    /// The `cache_control` value to give it.
    pub control: &'m serde_json::Value,
}

/// The view as a JSON array of wire items: unchanged units as the client's
/// bytes, altered ones rebuilt, notes for residues; units the engine holds
/// nothing for (items it has no use for) go where they stood. The message
/// `mark` names, if any, gets a cache breakpoint.
///
/// `items` are the request's items, of which `layout` covers a prefix.
pub fn render<'a>(
    wire: &dyn Wire,
    items: &[Item],
    layout: &Layout,
    view: impl Iterator<Item = (Source, &'a Message)>,
    mark: Option<Mark<'_>>,
) -> String {
    let mut renderer = Renderer {
        wire,
        items,
        layout,
        mark,
        out: Out::default(),
    };
    let mut next = 0;
    let mut open: Option<Open<'a>> = None;
    for (source, message) in view {
        let (push, altered) = match source {
            Source::Pushed(push) => (push, false),
            Source::Altered(push) => (push, true),
            _ => {
                renderer.flush(open.take());
                let mut note = wire.note(&note_text(message));
                if let Some(mark) = mark.filter(|mark| mark.source == source) {
                    wire.mark(&mut note, mark.control);
                }
                renderer.out.value(&note);
                continue;
            }
        };
        let Some(unit) = layout.unit_of(push) else {
            continue;
        };
        if open.as_ref().is_none_or(|o| o.unit != unit) {
            renderer.flush(open.take());
            renderer.passthrough(next..unit);
            next = unit + 1;
            open = Some(Open {
                unit,
                parts: Vec::new(),
                marked: false,
            });
        }
        if let Some(open) = &mut open {
            open.marked |= mark.is_some_and(|mark| mark.source == source);
            open.parts.push(Part {
                index: (push - layout.spans[unit].pushes.start) as usize,
                message,
                altered,
            });
        }
    }
    renderer.flush(open.take());
    renderer.passthrough(next..layout.spans.len());
    for item in &items[layout.items.min(items.len())..] {
        renderer.out.raw(item.raw.get());
    }
    renderer.out.finish()
}

struct Open<'a> {
    unit: usize,
    parts: Vec<Part<'a>>,
    marked: bool,
}

struct Renderer<'r> {
    wire: &'r dyn Wire,
    items: &'r [Item],
    layout: &'r Layout,
    mark: Option<Mark<'r>>,
    out: Out,
}

impl Renderer<'_> {
    /// Emits the units in `units` that hold no engine message.
    fn passthrough(&mut self, units: Range<usize>) {
        for span in &self.layout.spans[units] {
            if span.pushes.is_empty() {
                for item in &self.items[span.items.clone()] {
                    self.out.raw(item.raw.get());
                }
            }
        }
    }

    fn flush(&mut self, open: Option<Open<'_>>) {
        let Some(open) = open else {
            return;
        };
        let span = &self.layout.spans[open.unit];
        let items = &self.items[span.items.clone()];
        let whole = open.parts.len() as u64 == span.pushes.end - span.pushes.start
            && open.parts.iter().all(|part| !part.altered);
        if whole && !open.marked {
            for item in items {
                self.out.raw(item.raw.get());
            }
            return;
        }
        let mut values: Vec<serde_json::Value> = if whole {
            items.iter().map(|item| item.value().clone()).collect()
        } else {
            self.wire.rebuild(items, &open.parts)
        };
        if let (true, Some(mark), Some(last)) = (open.marked, self.mark, values.last_mut()) {
            self.wire.mark(last, mark.control);
        }
        for value in &values {
            self.out.value(value);
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
