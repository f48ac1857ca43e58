//! `cwl`: the engine itself ([`cwl::Context`]), fed the log message by
//! message and enforcing the budget before every model call. Logs whose
//! agent annotated its work are replayed as they are; for the others the
//! replay passes inferred episodes ([`crate::infer`]), applied out of band
//! so they cost no tokens.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use cwl::{Annotation, Block, Config, Context, Message};

use super::{Policy, PolicyConfig, PolicyError, Request, View};
use crate::transcript::{Entry, Lab, Unit};

/// The engine as a policy.
pub struct CwlPolicy {
    context: Context,
    known: HashMap<u64, Arc<Entry>>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for CwlPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CwlPolicy")
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl CwlPolicy {
    /// The engine at `config.budget`, low water and residue cap, with
    /// default tool classes.
    pub fn new(config: &PolicyConfig, lab: &Lab) -> Self {
        CwlPolicy {
            context: Context::new(
                Config::with_budget(config.budget)
                    .low_water(config.low_water)
                    .residue_share(config.residue_share),
                lab.counter_arc(),
                lab_tools(lab),
            ),
            known: HashMap::new(),
            warnings: Vec::new(),
        }
    }

    /// The engine's context, for inspection.
    pub fn context(&self) -> &Context {
        &self.context
    }

    fn push_entry(&mut self, entry: &Arc<Entry>) -> Result<(), PolicyError> {
        self.known
            .insert(message_hash(entry.message()), Arc::clone(entry));
        let outcomes = self
            .context
            .push(entry.message().clone())
            .map_err(|e| PolicyError {
                policy: "cwl",
                what: e.to_string(),
            })?;
        for outcome in outcomes.iter().filter(|o| o.is_error()) {
            self.warnings.push(format!(
                "delimiter call `{}` rejected: {}",
                outcome.call_id,
                outcome.text()
            ));
        }
        Ok(())
    }
}

/// The tool definitions the replayed session offered.
fn lab_tools(lab: &Lab) -> Vec<cwl::ToolSpec> {
    lab.tools().to_vec()
}

impl Policy for CwlPolicy {
    fn name(&self) -> &'static str {
        "cwl"
    }

    fn push(
        &mut self,
        unit: &Unit,
        annotations: &[Annotation],
        _: &mut Lab,
    ) -> Result<(), PolicyError> {
        for annotation in annotations {
            if let Err(error) = self.context.annotate(annotation.clone()) {
                self.warnings.push(format!(
                    "inferred annotation {annotation:?} rejected: {error}"
                ));
            }
        }
        for entry in unit.entries() {
            self.push_entry(entry)?;
        }
        Ok(())
    }

    fn request(&mut self, lab: &mut Lab) -> Result<Request, PolicyError> {
        let report = self.context.enforce();
        let mut pieces = Vec::new();
        let mut next = HashMap::with_capacity(self.known.len());
        for message in self.context.view() {
            let hash = message_hash(message);
            let entry = match self.known.get(&hash) {
                Some(entry) => Arc::clone(entry),
                None => lab.entry(message.clone()),
            };
            next.insert(hash, Arc::clone(&entry));
            pieces.push(entry);
        }
        self.known = next;
        Ok(Request {
            view: View::Pieces(pieces),
            side_calls: Vec::new(),
            budget_met: Some(report.budget_met),
        })
    }

    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }
}

/// A content hash of a message (stable within a process run).
pub fn message_hash(message: &Message) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match message {
        Message::System { content } => (0u8, content).hash(&mut h),
        Message::User { content } => (1u8, content).hash(&mut h),
        Message::ToolResult(r) => {
            (2u8, &r.call_id, &r.tool_name, &r.content, r.is_error).hash(&mut h)
        }
        Message::Assistant { content } => {
            3u8.hash(&mut h);
            for block in content {
                match block {
                    Block::Text { text } => (0u8, text).hash(&mut h),
                    Block::Reasoning { text, signature } => (1u8, text, signature).hash(&mut h),
                    Block::ToolCall(c) => (2u8, &c.id, &c.name, &c.arguments).hash(&mut h),
                }
            }
        }
    }
    h.finish()
}
