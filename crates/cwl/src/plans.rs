//! Plan calls: a plan tool's call ([`crate::classes::DEFAULT_PLAN_TOOLS`])
//! carries the whole plan, so once the same tool is called again the
//! earlier call and its result show nothing the later one does not.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

/// One plan call: where its assistant message sits and its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PlanCall {
    pub(crate) seq: u64,
    pub(crate) id: String,
}

/// The latest call of each plan tool and the calls they superseded.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Plans {
    /// Per plan tool (lowercase name): its latest call.
    latest: BTreeMap<String, PlanCall>,
    /// Superseded calls, oldest first; some may have left the view with
    /// their episode since.
    superseded: VecDeque<PlanCall>,
}

impl Plans {
    /// Records a call of plan tool `tool`, which supersedes its previous one.
    pub(crate) fn called(&mut self, tool: &str, seq: u64, id: &str) {
        let call = PlanCall {
            seq,
            id: id.to_string(),
        };
        if let Some(earlier) = self.latest.insert(tool.to_ascii_lowercase(), call) {
            self.superseded.push_back(earlier);
        }
    }

    /// The oldest superseded call not yet taken.
    pub(crate) fn oldest(&self) -> Option<&PlanCall> {
        self.superseded.front()
    }

    /// Takes the oldest superseded call.
    pub(crate) fn take_oldest(&mut self) -> Option<PlanCall> {
        self.superseded.pop_front()
    }

    /// Whether no plan tool was called (nothing to save).
    pub(crate) fn is_empty(&self) -> bool {
        self.latest.is_empty() && self.superseded.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_call_of_the_same_tool_supersedes_the_earlier_one() {
        let mut plans = Plans::default();
        assert!(plans.is_empty());
        plans.called("TodoWrite", 4, "a");
        plans.called("update_plan", 6, "b");
        assert_eq!(plans.oldest(), None);
        plans.called("todowrite", 8, "c");
        plans.called("TodoWrite", 10, "d");
        let first = plans.take_oldest().unwrap();
        assert_eq!((first.seq, first.id.as_str()), (4, "a"));
        assert_eq!(plans.take_oldest().map(|call| call.id), Some("c".into()));
        assert_eq!(plans.take_oldest(), None);
        assert!(!plans.is_empty());
    }
}
