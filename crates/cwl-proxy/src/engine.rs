//! One conversation's engine: what the proxy pushed, the episodes it
//! inferred, and where each engine message came from on the wire.

use std::sync::Arc;

use cwl::{Config, Context, Message, Report, Source, TokenCounter, ToolSpec, TranscriptError};
use cwl_infer::Inferrer;

use crate::wire::{CallNames, Item, Layout, Mark, Wire, render};

/// The engine of one conversation.
pub struct Engine {
    context: Context,
    inferrer: Inferrer,
    layout: Layout,
    names: CallNames,
    rejected: Vec<String>,
    breakpoint: Option<Source>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("context", &self.context)
            .field("items", &self.layout.items())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A new conversation offering `tools`, whose system prompt (sent in
    /// its own field) counts toward the budget.
    pub fn new(
        config: Config,
        counter: Arc<dyn TokenCounter>,
        tools: Vec<ToolSpec>,
        system: Option<String>,
    ) -> Self {
        let mut context = Context::new(config, counter, tools);
        let mut prologue = 0;
        if let Some(system) = system {
            // A system message is always accepted.
            let _ = context.push(Message::system(system));
            prologue = 1;
        }
        Engine {
            context,
            inferrer: Inferrer::new(),
            layout: Layout::new(prologue),
            names: CallNames::default(),
            rejected: Vec::new(),
            breakpoint: None,
        }
    }

    /// Wire items pushed so far.
    pub fn items(&self) -> usize {
        self.layout.items()
    }

    /// Pushes the items after those already pushed, with the episodes the
    /// inferrer finds before each message; returns the messages pushed.
    /// On error the conversation cannot go on (its engine no longer
    /// matches the client's history).
    pub fn extend(
        &mut self,
        wire: &dyn Wire,
        items: &[Item],
    ) -> Result<Vec<Message>, TranscriptError> {
        let from = self.layout.items().min(items.len());
        let mut pushed = Vec::new();
        for unit in wire.units(&items[from..], &mut self.names) {
            for message in &unit.messages {
                for annotation in self.inferrer.before(message) {
                    if let Err(error) = self.context.annotate(annotation.clone()) {
                        self.rejected
                            .push(format!("inferred {annotation:?} rejected: {error}"));
                    }
                }
                self.context.push(message.clone())?;
                pushed.push(message.clone());
            }
            self.layout.add(&unit);
        }
        Ok(pushed)
    }

    /// Enforces the budget before the request goes upstream. When the
    /// pass changed the view, the cache breakpoint moves to the last
    /// changed message (or the one before the first change): eviction
    /// takes the oldest episodes first, so the next pass changes what
    /// comes after it and the prefix up to it stays cached.
    pub fn enforce(&mut self) -> Report {
        let mut report = self.context.enforce();
        report.warnings.append(&mut self.rejected);
        if report.evicted() {
            let view: Vec<Source> = self.context.view_sources().map(|(s, _)| s).collect();
            let changed = view.iter().rposition(|s| !matches!(s, Source::Pushed(_)));
            let before = report.first_changed.and_then(|at| at.checked_sub(1));
            self.breakpoint = changed.max(before).and_then(|at| view.get(at).copied());
        }
        report
    }

    /// The history to send: the view in wire form (see [`render`]), with
    /// a cache breakpoint of this `cache_control` value when one is given.
    pub fn render(
        &self,
        wire: &dyn Wire,
        items: &[Item],
        cache: Option<&serde_json::Value>,
    ) -> String {
        let mark = self
            .breakpoint
            .zip(cache)
            .map(|(source, control)| Mark { source, control });
        render(wire, items, &self.layout, self.context.view_sources(), mark)
    }

    /// The engine's context, for inspection.
    pub fn context(&self) -> &Context {
        &self.context
    }
}
