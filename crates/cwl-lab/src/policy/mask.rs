//! `mask`: observation masking. Tool outputs older than the last N steps
//! are replaced by a one-line placeholder; everything else stays. No
//! budget: the prompt still grows with the assistant's own messages.
//!
//! Default N = 10, the window of Lindenbauer et al., "The Complexity Trap:
//! Simple Observation Masking Is as Efficient as LLM Summarization for
//! Agent Context Management" (NeurIPS 2025 DL4C workshop), cited by the CWL
//! paper.

use std::sync::Arc;

use cwl::Annotation;

use super::work::replaced_result;
use super::{Policy, PolicyConfig, PolicyError, Request};
use crate::transcript::{Entry, Lab, Unit};

/// Default number of recent steps whose tool outputs stay whole.
pub const DEFAULT_TURNS: usize = 10;

/// The observation-masking policy.
#[derive(Debug)]
pub struct Mask {
    turns: usize,
    units: Vec<Vec<Arc<Entry>>>,
    steps: Vec<usize>,
    masked_steps: usize,
}

impl Mask {
    /// A masking policy keeping the outputs of the last `config.mask_turns` steps.
    pub fn new(config: &PolicyConfig) -> Self {
        Mask {
            turns: config.mask_turns,
            units: Vec::new(),
            steps: Vec::new(),
            masked_steps: 0,
        }
    }
}

/// The placeholder for an old tool output.
pub fn placeholder_text(content: &str) -> String {
    format!(
        "[Old tool output omitted ({} lines).]",
        content.lines().count()
    )
}

impl Policy for Mask {
    fn name(&self) -> &'static str {
        "mask"
    }

    fn push(&mut self, unit: &Unit, _: &[Annotation], _: &mut Lab) -> Result<(), PolicyError> {
        if matches!(unit, Unit::Step(_)) {
            self.steps.push(self.units.len());
        }
        self.units.push(unit.entries().cloned().collect());
        Ok(())
    }

    fn request(&mut self, lab: &mut Lab) -> Result<Request, PolicyError> {
        let old = self.steps.len().saturating_sub(self.turns);
        while self.masked_steps < old {
            let unit = &mut self.units[self.steps[self.masked_steps]];
            for result in unit.iter_mut().skip(1) {
                let text = match result.message() {
                    cwl::Message::ToolResult(r) => placeholder_text(&r.content),
                    _ => continue,
                };
                let masked = replaced_result(lab, result, text);
                if masked.tokens() < result.tokens() {
                    *result = masked;
                }
            }
            self.masked_steps += 1;
        }
        Ok(Request::pieces(
            self.units.iter().flatten().cloned().collect(),
        ))
    }
}
