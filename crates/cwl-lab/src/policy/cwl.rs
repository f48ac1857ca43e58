//! `cwl`: the engine itself ([`cwl::Context`]), fed the log message by
//! message and enforcing the budget before every model call. Logs whose
//! agent annotated its work are replayed as they are; for the others the
//! replay passes inferred episodes ([`crate::infer`]), applied out of band
//! so they cost no tokens. The engine's view is mapped back to the lab's
//! entries by position ([`Mirror`]), so a repeated message is never taken
//! for an earlier one.

use std::sync::Arc;

use cwl::{Annotation, Config, Context};

use super::align::Mirror;
use super::{Policy, PolicyConfig, PolicyError, Request, View};
use crate::transcript::{Entry, Lab, Unit};

/// The engine as a policy.
pub struct CwlPolicy {
    context: Context,
    mirror: Mirror,
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
            mirror: Mirror::new(),
            warnings: Vec::new(),
        }
    }

    /// The engine's context, for inspection.
    pub fn context(&self) -> &Context {
        &self.context
    }

    fn push_entry(&mut self, entry: &Arc<Entry>) -> Result<(), PolicyError> {
        self.mirror.push(Arc::clone(entry));
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
        let pieces = self.mirror.align(self.context.view(), lab);
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
