//! A session's token usage and cost, summed from its file: each model
//! call of the main loop is recorded with its assistant message, and the
//! calls of a sub-agent (`delegate`) with the result it gave, once each.

use cwl::{Message, Record, Usage};
use serde::Serialize;

use crate::DELEGATE;

/// Usage summed over some model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spent {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Of which served from the provider's cache.
    pub cached_input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Cost in US dollars of the calls whose cost is known (`None` when
    /// none is: the model has no prices).
    pub cost_usd: Option<f64>,
}

impl Spent {
    fn add(&mut self, usage: &Usage, cost_usd: Option<f64>) {
        self.input_tokens += usage.input_tokens;
        self.cached_input_tokens += usage.cached_input_tokens;
        self.output_tokens += usage.output_tokens;
        if let Some(cost) = cost_usd {
            *self.cost_usd.get_or_insert(0.0) += cost;
        }
    }
}

/// What a whole session used, as its file records it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SessionUsage {
    /// Model calls of the main loop (recorded responses).
    pub requests: usize,
    /// All calls, sub-agents' included.
    pub total: Spent,
    /// Sub-agents run by `delegate`.
    pub delegated_runs: usize,
    /// The sub-agents' share of `total`.
    pub delegated: Spent,
}

/// Sums the usage recorded in `records`.
pub fn session_usage<'a>(records: impl IntoIterator<Item = &'a Record>) -> SessionUsage {
    let mut sum = SessionUsage::default();
    for record in records {
        let Record::Message {
            message,
            usage,
            cost_usd,
            ..
        } = record
        else {
            continue;
        };
        match message {
            Message::Assistant { .. } => {
                sum.requests += 1;
                if let Some(usage) = usage {
                    sum.total.add(usage, *cost_usd);
                }
            }
            Message::ToolResult(result) if result.tool_name == DELEGATE => {
                if let Some(usage) = usage {
                    sum.delegated_runs += 1;
                    sum.delegated.add(usage, *cost_usd);
                    sum.total.add(usage, *cost_usd);
                }
            }
            _ => {}
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(message: Message, usage: Option<Usage>, cost_usd: Option<f64>) -> Record {
        Record::Message {
            timestamp: None,
            message,
            usage,
            cost_usd,
        }
    }

    #[test]
    fn delegated_calls_count_once_beside_the_main_loops() {
        let used = |input, cached, output| Usage {
            input_tokens: input,
            cached_input_tokens: cached,
            cache_write_tokens: 0,
            output_tokens: output,
        };
        let records = [
            record(Message::user("go"), None, None),
            record(
                Message::assistant_text("delegating"),
                Some(used(100, 40, 10)),
                Some(0.5),
            ),
            record(
                Message::tool_result("d1", DELEGATE, "summary", false),
                Some(used(300, 0, 30)),
                Some(0.25),
            ),
            record(
                Message::tool_result("r1", "read", "text", false),
                Some(used(9_999, 0, 9_999)),
                None,
            ),
            record(
                Message::tool_result("d2", DELEGATE, "no child", true),
                None,
                None,
            ),
            record(
                Message::assistant_text("done"),
                Some(used(200, 100, 20)),
                None,
            ),
        ];
        let sum = session_usage(&records);
        assert_eq!(sum.requests, 2);
        assert_eq!(sum.delegated_runs, 1);
        assert_eq!(
            sum.delegated,
            Spent {
                input_tokens: 300,
                cached_input_tokens: 0,
                output_tokens: 30,
                cost_usd: Some(0.25)
            }
        );
        assert_eq!(
            sum.total,
            Spent {
                input_tokens: 600,
                cached_input_tokens: 140,
                output_tokens: 60,
                cost_usd: Some(0.75)
            }
        );
    }
}
