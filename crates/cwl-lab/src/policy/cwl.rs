//! `cwl`: the engine itself ([`cwl::Context`]), fed the log message by
//! message and enforcing the budget before every model call. Logs whose
//! agent annotated its work are replayed as they are; for the others the
//! replay passes inferred episodes ([`crate::infer`]), applied out of band
//! so they cost no tokens. The engine's view is mapped back to the lab's
//! entries by the position the engine reports for each message
//! ([`cwl::Source`]), so a repeated message is never taken for an earlier
//! one; what the engine rewrote or wrote becomes a new entry once and is
//! reused while it stays the same.

use std::collections::HashMap;
use std::sync::Arc;

use cwl::{Annotation, Config, Context, Source};

use super::{Policy, PolicyConfig, PolicyError, Request, View};
use crate::transcript::{Entry, Lab, Unit};

/// The engine as a policy.
pub struct CwlPolicy {
    context: Context,
    /// The lab's entry for each pushed message still in the view, by push
    /// position.
    pushed: HashMap<u64, Arc<Entry>>,
    pushes: u64,
    /// Entries for what the engine rewrote or wrote, by source.
    written: HashMap<Source, Arc<Entry>>,
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
    /// The engine at `config.budget`, low water, residue cap, recent
    /// working set, superseded share and act-output stubs, with default
    /// tool classes.
    pub fn new(config: &PolicyConfig, lab: &Lab) -> Self {
        CwlPolicy {
            context: Context::new(
                Config::with_budget(config.budget)
                    .low_water(config.low_water)
                    .residue_share(config.residue_share)
                    .keep_recent(config.keep_recent)
                    .superseded(config.superseded)
                    .stub_act_outputs(config.stub_act_outputs),
                lab.counter_arc(),
                lab_tools(lab),
            ),
            pushed: HashMap::new(),
            pushes: 0,
            written: HashMap::new(),
            warnings: Vec::new(),
        }
    }

    /// The engine's context, for inspection.
    pub fn context(&self) -> &Context {
        &self.context
    }

    fn push_entry(&mut self, entry: &Arc<Entry>) -> Result<(), PolicyError> {
        self.pushed.insert(self.pushes, Arc::clone(entry));
        self.pushes += 1;
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
        let mut pushed = HashMap::with_capacity(self.pushed.len());
        let mut written = HashMap::with_capacity(self.written.len());
        for (source, message) in self.context.view_sources() {
            let entry = match source {
                Source::Pushed(index) => self.pushed.get(&index).cloned().inspect(|entry| {
                    pushed.insert(index, Arc::clone(entry));
                }),
                _ => None,
            };
            let entry = match entry {
                Some(entry) => entry,
                None => {
                    let reused = self
                        .written
                        .get(&source)
                        .filter(|entry| entry.message() == message)
                        .cloned();
                    let entry = reused.unwrap_or_else(|| match source {
                        Source::Altered(index) => match self.pushed.get(&index) {
                            Some(original) => lab.derived(message.clone(), original),
                            None => lab.written(message.clone()),
                        },
                        _ => lab.written(message.clone()),
                    });
                    written.insert(source, Arc::clone(&entry));
                    entry
                }
            };
            pieces.push(entry);
        }
        // Altered messages keep their original for `derived` until they leave.
        for source in written.keys() {
            if let Source::Altered(index) = source
                && let Some(original) = self.pushed.get(index)
            {
                pushed.insert(*index, Arc::clone(original));
            }
        }
        self.pushed = pushed;
        self.written = written;
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
