//! Episodes for a model that forgets the protocol.
//!
//! Models sometimes never call `delimiter`, or stop calling it. Their tool
//! use outside any episode they opened is grouped by the rules the proxy
//! uses ([`cwl_infer`]): runs of reads become expl episodes, runs of edits
//! and commands act episodes on what they touched. Those episodes are
//! evictable like any other, so nothing is refused for lack of an episode
//! and nothing is pinned in the prologue. When the model opens an episode
//! of its own, the inferred one closes first; a user turn closes it too.
//!
//! Every inferred annotation is written to the session file
//! ([`cwl::Record::Annotate`]) before the message it precedes, so a resume
//! applies it at the same point.

use std::collections::HashMap;

use cwl::{Annotation, DELIMITER, Graph, Message};
use cwl_infer::Inferrer;

/// The share of the budget one inferred episode may gather: it cannot be
/// evicted while open, so a run of large reads is split well under it.
const EPISODE_SHARE: f64 = 0.2;

/// The inference state of one agent.
#[derive(Debug, Default)]
pub(super) struct Inference {
    /// Whether episodes are inferred at all.
    on: bool,
    inferrer: Inferrer,
    /// The inferrer's names to the engine's, where the engine's differ
    /// (a name already taken: an earlier process's, or the model's).
    names: HashMap<String, String>,
    /// The engine's name of the inferred episode open now.
    open: Option<String>,
    /// Whether `open` was left open by an earlier process of a resumed
    /// session (this inferrer does not know it, so it is closed first).
    adopted: bool,
}

impl Inference {
    /// Inference for an engine budget of `budget` tokens.
    pub(super) fn new(budget: usize) -> Self {
        let tokens = (budget as f64 * EPISODE_SHARE) as usize;
        Inference {
            on: true,
            inferrer: Inferrer::with_max_chars((tokens * 4).min(cwl_infer::MAX_EPISODE_CHARS)),
            ..Self::default()
        }
    }

    /// No inference: for strategies that keep their own account of
    /// unannotated work.
    pub(super) fn off() -> Self {
        Self::default()
    }

    /// The annotations to apply before `message` is pushed, in the
    /// engine's names; `graph` is the engine's episode graph as it is.
    pub(super) fn before(&mut self, message: &Message, graph: &Graph) -> Vec<Annotation> {
        if !self.on {
            return Vec::new();
        }
        self.adopt(graph);
        let mut out = Vec::new();
        if self.adopted && matches!(message, Message::User { .. } | Message::Assistant { .. }) {
            out.push(Annotation::End {
                name: self.open.clone(),
                description: None,
            });
            self.adopted = false;
        }
        let inferred = match message {
            Message::User { .. } => self.inferrer.before(message),
            Message::ToolResult(result) => {
                self.inferrer.result(result);
                Vec::new()
            }
            Message::System { .. } => Vec::new(),
            Message::Assistant { .. } => {
                if message.tool_calls().any(|call| call.name == DELIMITER) {
                    self.inferrer.close_open()
                } else if graph.active().is_some() && self.open.is_none() {
                    // The model's own episode: its work belongs there.
                    Vec::new()
                } else {
                    self.inferrer.before(message)
                }
            }
        };
        out.extend(
            inferred
                .into_iter()
                .map(|annotation| self.rename(annotation, graph)),
        );
        out
    }

    /// Notes that `annotation` was applied.
    pub(super) fn applied(&mut self, annotation: &Annotation) {
        match annotation {
            Annotation::Start { name, .. } => self.open = Some(name.clone()),
            Annotation::End { .. } => self.open = None,
        }
    }

    /// Whether `name` is the inferred episode open now.
    pub(super) fn is_open(&self, name: &str) -> bool {
        self.open.as_deref() == Some(name)
    }

    /// Forgets an open inferred episode the engine no longer has active
    /// (the model ended it), and takes over one a resumed session left
    /// open (its name has the inferrer's shape).
    fn adopt(&mut self, graph: &Graph) {
        let active = graph
            .active()
            .map(|id| graph.episode(id).name().to_string());
        match (&self.open, active) {
            (Some(open), Some(active)) if *open == active => {}
            (Some(_), _) => {
                self.open = None;
                self.adopted = false;
            }
            (None, Some(active)) if is_inferred_name(&active) => {
                self.open = Some(active);
                self.adopted = true;
            }
            (None, _) => {}
        }
    }

    /// `annotation` in the engine's names: a start whose name is taken gets
    /// a free one, and ends and dependencies follow.
    fn rename(&mut self, annotation: Annotation, graph: &Graph) -> Annotation {
        let names = &mut self.names;
        let engine = |names: &HashMap<String, String>, name: &str| {
            names.get(name).cloned().unwrap_or_else(|| name.to_string())
        };
        match annotation {
            Annotation::Start {
                name,
                kind,
                dependencies,
            } => {
                let free = graph.free_name(&name);
                if free != name {
                    names.insert(name, free.clone());
                }
                Annotation::Start {
                    name: free,
                    kind,
                    dependencies: dependencies.iter().map(|d| engine(names, d)).collect(),
                }
            }
            Annotation::End { name, description } => Annotation::End {
                name: name.map(|n| engine(names, &n)),
                description,
            },
        }
    }
}

/// Whether an episode name has the inferrer's shape (`t3-expl-12`, or
/// `t3-expl-12-2` when that name was taken).
fn is_inferred_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('-').collect();
    let numeric = |part: &&str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    parts.len() >= 3
        && parts[0].strip_prefix('t').is_some_and(|t| numeric(&t))
        && matches!(parts[1], "expl" | "act")
        && parts[2..].iter().all(numeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inferred_names_are_recognised() {
        assert!(is_inferred_name("t1-expl-3"));
        assert!(is_inferred_name("t12-act-40"));
        assert!(!is_inferred_name("find-save"));
        assert!(!is_inferred_name("t1-fix-3"));
        assert!(is_inferred_name("t1-expl-3-2"));
        assert!(!is_inferred_name("t-expl-3"));
    }
}
