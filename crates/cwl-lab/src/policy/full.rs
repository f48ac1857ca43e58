//! `none`: the full history, what the log's own harness sent before any
//! compaction. The request of a long session is never materialized: the
//! replay measures it.

use cwl::Annotation;

use super::{Policy, PolicyError, Request, View};
use crate::transcript::{Lab, Unit};

/// The full-history policy.
#[derive(Debug, Default)]
pub struct Full;

impl Policy for Full {
    fn name(&self) -> &'static str {
        "none"
    }

    fn push(&mut self, _: &Unit, _: &[Annotation], _: &mut Lab) -> Result<(), PolicyError> {
        Ok(())
    }

    fn request(&mut self, _: &mut Lab) -> Result<Request, PolicyError> {
        Ok(Request {
            view: View::Full,
            side: super::SideTally::default(),
            side_calls: Vec::new(),
            budget_met: None,
        })
    }
}
