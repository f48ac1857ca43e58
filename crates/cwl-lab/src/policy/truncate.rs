//! `truncate`: recency truncation. The system prompt and the first user
//! turn (the task) always stay; of the rest, the oldest units are dropped
//! until the request fits the budget. The latest user turn is kept even
//! when older than everything else that fits. Dropping is final: a unit
//! never comes back, so memory stays bounded by the budget.

use std::collections::VecDeque;
use std::sync::Arc;

use cwl::Annotation;

use super::{Policy, PolicyConfig, PolicyError, Request};
use crate::transcript::{Entry, Lab, Unit};

/// The recency-truncation policy.
#[derive(Debug)]
pub struct Truncate {
    budget: usize,
    head: Vec<Arc<Entry>>,
    first_user_seen: bool,
    latest_user: Option<Arc<Entry>>,
    window: VecDeque<Unit>,
    window_tokens: usize,
    head_tokens: usize,
}

impl Truncate {
    /// A truncation policy for `config.budget`.
    pub fn new(config: &PolicyConfig, _: &Lab) -> Self {
        Truncate {
            budget: config.budget,
            head: Vec::new(),
            first_user_seen: false,
            latest_user: None,
            window: VecDeque::new(),
            window_tokens: 0,
            head_tokens: 0,
        }
    }
}

impl Policy for Truncate {
    fn name(&self) -> &'static str {
        "truncate"
    }

    fn push(&mut self, unit: &Unit, _: &[Annotation], lab: &mut Lab) -> Result<(), PolicyError> {
        let pinned = match unit {
            Unit::Message(entry)
                if unit.is_system() && self.window.is_empty() && !self.first_user_seen =>
            {
                Some(entry)
            }
            Unit::Message(entry) if unit.is_user() && !self.first_user_seen => {
                self.first_user_seen = true;
                Some(entry)
            }
            _ => None,
        };
        if let Some(entry) = pinned {
            self.head_tokens += entry.tokens();
            self.head.push(Arc::clone(entry));
            return Ok(());
        }
        if unit.is_user() {
            self.latest_user = None;
            // Earlier turns' reasoning may no longer be billed.
            self.window_tokens = self.window.iter().map(|u| u.billed(lab)).sum();
        }
        self.window_tokens += unit.billed(lab);
        self.window.push_back(unit.clone());
        Ok(())
    }

    fn request(&mut self, lab: &mut Lab) -> Result<Request, PolicyError> {
        let fixed = lab.tools_tokens() + self.head_tokens;
        let pinned = |latest: &Option<Arc<Entry>>| latest.as_ref().map_or(0, |e| e.tokens());
        while fixed + pinned(&self.latest_user) + self.window_tokens > self.budget {
            let Some(unit) = self.window.pop_front() else {
                break;
            };
            self.window_tokens -= unit.billed(lab);
            if unit.is_user()
                && !self.window.iter().any(Unit::is_user)
                && let Unit::Message(entry) = unit
            {
                self.latest_user = Some(entry);
            }
        }
        let mut pieces = self.head.clone();
        pieces.extend(self.latest_user.iter().cloned());
        for unit in &self.window {
            pieces.extend(unit.entries().cloned());
        }
        Ok(Request::pieces(pieces))
    }
}
