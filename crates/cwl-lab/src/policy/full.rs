//! `none`: the full history, what the log's own harness sent before any
//! compaction. Kept as a running token sum: the request of a long session
//! is never materialized.

use cwl::Annotation;

use super::{Policy, PolicyError, Request, View};
use crate::transcript::{Lab, Unit};

/// The full-history policy.
#[derive(Debug, Default)]
pub struct Full {
    tokens: usize,
}

impl Policy for Full {
    fn name(&self) -> &'static str {
        "none"
    }

    fn push(&mut self, unit: &Unit, _: &[Annotation], _: &mut Lab) -> Result<(), PolicyError> {
        self.tokens += unit.tokens();
        Ok(())
    }

    fn request(&mut self, _: &mut Lab) -> Result<Request, PolicyError> {
        Ok(Request {
            view: View::Full {
                tokens: self.tokens,
            },
            side: super::SideTally::default(),
            side_calls: Vec::new(),
            budget_met: None,
        })
    }
}
