//! `clear-tool-uses`: Anthropic's server-side tool-result clearing
//! (`clear_tool_uses_20250919`, beta `context-management-2025-06-27`), the
//! context edit a Claude user gets from the API itself, so the baseline CWL
//! must beat side by side.
//!
//! When the prompt passes the trigger, every tool result but the `keep`
//! most recent is replaced by a placeholder, oldest first (with
//! `clear_inputs`, the calls' arguments too); with `clear_at_least`, an
//! edit that would free fewer tokens is not applied. The lab triggers at
//! the budget τ (the API's default is 100k input tokens); `keep` defaults
//! to the API's 3. Nothing else is ever removed, so user turns, answers and
//! calls can still carry the prompt over τ.
//!
//! The edit is a function of the request: the API applies it server-side
//! to the full history the client sends unmodified, in real time, and its
//! token counter previews "how many tokens your prompt will use after
//! context editing is applied" from that history alone, which only holds
//! if no earlier request's edit is remembered (nor could an API's output
//! hinge on whether a best-effort cache entry survived). So once the
//! unedited history passes the trigger, every request clears all but the
//! latest `keep` results, and the prefix changes each time a result
//! leaves them (LangChain's mirror of the edit works so); `clear_at_least`
//! only holds back the first activation. [`ClearParams::every_request`]
//! set to `false` replays the other reading, as an event: what one edit
//! cleared stays cleared and the prompt grows from there until it passes
//! the trigger again.

use std::sync::Arc;

use cwl::tokens::MESSAGE_OVERHEAD;
use cwl::{Annotation, Block, Message};

use super::work::replaced_result;
use super::{Policy, PolicyConfig, PolicyError, Request};
use crate::transcript::{Entry, Lab, Unit};

/// The API's default number of recent tool uses kept.
pub const DEFAULT_KEEP: usize = 3;

/// What a cleared tool result says instead.
pub const PLACEHOLDER: &str = "[Old tool result content cleared]";

/// What a cleared call's arguments become with `clear_inputs`.
const EMPTY_INPUT: &str = "{}";

/// The edit's settings, as the API names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClearParams {
    /// `keep`: the most recent tool uses left whole.
    pub keep: usize,
    /// `clear_at_least`: an edit freeing fewer tokens is not applied (0: no
    /// minimum).
    pub clear_at_least: usize,
    /// `clear_tool_inputs`: also empty the cleared calls' arguments.
    pub clear_inputs: bool,
    /// Apply the edit to every request as a function of the unedited
    /// history, as the API does: past the trigger, each request keeps only
    /// the latest `keep` results (`false`: clearing is an event whose
    /// clears persist, see the module).
    pub every_request: bool,
}

impl Default for ClearParams {
    fn default() -> Self {
        ClearParams {
            keep: DEFAULT_KEEP,
            clear_at_least: 0,
            clear_inputs: false,
            every_request: true,
        }
    }
}

/// One transcript unit as it is sent now.
#[derive(Debug)]
struct Slot {
    /// The message, or the assistant message then its results.
    entries: Vec<Arc<Entry>>,
    /// Call ids whose arguments were emptied (`clear_inputs`).
    emptied: Vec<String>,
    /// The assistant message as logged, once its calls are edited.
    logged: Option<Arc<Entry>>,
}

/// A tool result and where it sits.
#[derive(Debug, Clone)]
struct ToolUse {
    slot: usize,
    position: usize,
    call_id: String,
}

/// The `clear-tool-uses` policy.
#[derive(Debug)]
pub struct ClearToolUses {
    params: ClearParams,
    budget: usize,
    slots: Vec<Slot>,
    /// Tokens of the history as sent now and billed (tool definitions
    /// excluded).
    tokens: usize,
    uses: Vec<ToolUse>,
    /// `freed[i]`: tokens clearing the first `i` tool uses frees.
    freed: Vec<usize>,
    /// The first this many tool uses are cleared.
    cleared: usize,
}

impl ClearToolUses {
    /// The edit with `config.clear`, triggered at `config.budget`.
    pub fn new(config: &PolicyConfig) -> Self {
        ClearToolUses {
            params: config.clear,
            budget: config.budget,
            slots: Vec::new(),
            tokens: 0,
            uses: Vec::new(),
            freed: vec![0],
            cleared: 0,
        }
    }

    /// Tokens clearing one result (and its call's arguments) frees.
    fn saving(&self, result: &Entry, call: Option<&Block>, lab: &Lab) -> usize {
        let placeholder = MESSAGE_OVERHEAD + lab.counter().count(PLACEHOLDER);
        let mut saving = result.tokens().saturating_sub(placeholder);
        if self.params.clear_inputs
            && let Some(Block::ToolCall(call)) = call
        {
            saving += lab
                .counter()
                .count(&call.arguments)
                .saturating_sub(lab.counter().count(EMPTY_INPUT));
        }
        saving
    }

    fn clear(&mut self, index: usize, lab: &mut Lab) {
        let ToolUse {
            slot,
            position,
            call_id,
        } = self.uses[index].clone();
        let slot = &mut self.slots[slot];
        let cleared = replaced_result(lab, &slot.entries[position], PLACEHOLDER.to_string());
        self.tokens = self.tokens + cleared.tokens() - slot.entries[position].tokens();
        slot.entries[position] = cleared;
        if self.params.clear_inputs {
            slot.emptied.push(call_id);
            let logged = Arc::clone(
                slot.logged
                    .get_or_insert_with(|| Arc::clone(&slot.entries[0])),
            );
            let Message::Assistant { content } = logged.message() else {
                return;
            };
            let content = content
                .iter()
                .map(|block| match block {
                    Block::ToolCall(call) if slot.emptied.contains(&call.id) => {
                        let mut call = call.clone();
                        call.arguments = EMPTY_INPUT.to_string();
                        Block::ToolCall(call)
                    }
                    other => other.clone(),
                })
                .collect();
            let edited = lab.derived(Message::Assistant { content }, &logged);
            self.tokens = self.tokens + lab.billed(&edited) - lab.billed(&slot.entries[0]);
            slot.entries[0] = edited;
        }
    }
}

impl Policy for ClearToolUses {
    fn name(&self) -> &'static str {
        "clear-tool-uses"
    }

    fn push(&mut self, unit: &Unit, _: &[Annotation], lab: &mut Lab) -> Result<(), PolicyError> {
        if unit.is_user() {
            // Earlier turns' reasoning may no longer be billed: the trigger
            // reads the size the provider reports.
            self.tokens = self
                .slots
                .iter()
                .flat_map(|s| s.entries.iter())
                .map(|e| lab.billed(e))
                .sum();
        }
        self.tokens += unit.billed(lab);
        let slot = self.slots.len();
        if let Unit::Step(step) = unit {
            let blocks: &[Block] = match step.assistant.message() {
                Message::Assistant { content } => content,
                _ => &[],
            };
            for (index, result) in step.results.iter().enumerate() {
                let Message::ToolResult(r) = result.message() else {
                    continue;
                };
                let call = blocks
                    .iter()
                    .find(|b| matches!(b, Block::ToolCall(c) if c.id == r.call_id));
                let saving = self.saving(result, call, lab);
                self.freed.push(self.freed[self.uses.len()] + saving);
                self.uses.push(ToolUse {
                    slot,
                    position: index + 1,
                    call_id: r.call_id.clone(),
                });
            }
        }
        self.slots.push(Slot {
            entries: unit.entries().cloned().collect(),
            emptied: Vec::new(),
            logged: None,
        });
        Ok(())
    }

    fn request(&mut self, lab: &mut Lab) -> Result<Request, PolicyError> {
        let target = self.uses.len().saturating_sub(self.params.keep);
        // With `every_request` the edit sees the unedited history and
        // counts everything it clears, earlier requests' clears included.
        let before = if self.params.every_request {
            self.freed[self.cleared]
        } else {
            0
        };
        let triggered = lab.tools_tokens() + self.tokens + before > self.budget;
        let frees = self.freed[target.max(self.cleared)] - self.freed[self.cleared] + before;
        if triggered && frees >= self.params.clear_at_least.max(1) {
            while self.cleared < target {
                self.clear(self.cleared, lab);
                self.cleared += 1;
            }
        }
        Ok(Request::pieces(
            self.slots
                .iter()
                .flat_map(|s| s.entries.iter().cloned())
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::validate_entries;
    use crate::transcript::Step;
    use cwl::{Estimate, ToolCall};

    fn step(lab: &mut Lab, id: &str, output: &str) -> Unit {
        let assistant = lab.entry(Message::Assistant {
            content: vec![
                Block::Text {
                    text: format!("reading {id}"),
                },
                Block::ToolCall(ToolCall::new(
                    id,
                    "read",
                    format!(r#"{{"path":"{id}.rs"}}"#),
                )),
            ],
        });
        let results = vec![lab.entry(Message::tool_result(id, "read", output, false))];
        Unit::Step(Step {
            assistant,
            results,
            used: Arc::from(Vec::new()),
        })
    }

    fn session(lab: &mut Lab, steps: usize) -> Vec<Unit> {
        let mut units = vec![
            Unit::Message(lab.entry(Message::system("be brief"))),
            Unit::Message(lab.entry(Message::user("look at the files"))),
        ];
        for i in 0..steps {
            units.push(step(
                lab,
                &format!("f{i}"),
                &format!("line of f{i}\n").repeat(40),
            ));
        }
        units
    }

    fn config(budget: usize, clear: ClearParams) -> PolicyConfig {
        PolicyConfig {
            budget,
            clear,
            ..PolicyConfig::default()
        }
    }

    /// The policy at `budget` with `params`, every unit of `units` pushed.
    fn loaded(lab: &mut Lab, units: &[Unit], budget: usize, params: ClearParams) -> ClearToolUses {
        let mut policy = ClearToolUses::new(&config(budget, params));
        for unit in units {
            policy.push(unit, &[], lab).unwrap();
        }
        policy
    }

    /// The call ids of the results `view` still shows whole.
    fn whole(view: &[Arc<Entry>]) -> Vec<String> {
        results(view)
            .into_iter()
            .filter(|(_, c)| c != PLACEHOLDER)
            .map(|(id, _)| id)
            .collect()
    }

    fn results(view: &[Arc<Entry>]) -> Vec<(String, String)> {
        view.iter()
            .filter_map(|e| match e.message() {
                Message::ToolResult(r) => Some((r.call_id.clone(), r.content.clone())),
                _ => None,
            })
            .collect()
    }

    fn request(policy: &mut ClearToolUses, lab: &mut Lab) -> Vec<Arc<Entry>> {
        match policy.request(lab).unwrap().view {
            super::super::View::Pieces(pieces) => pieces,
            super::super::View::Full => panic!("clear-tool-uses sends pieces"),
        }
    }

    #[test]
    fn under_the_trigger_nothing_is_cleared() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let units = session(&mut lab, 6);
        let total: usize = units.iter().map(Unit::tokens).sum();
        let mut policy = loaded(&mut lab, &units, total, ClearParams::default());
        let view = request(&mut policy, &mut lab);
        assert_eq!(view.iter().map(|e| e.tokens()).sum::<usize>(), total);
        assert!(results(&view).iter().all(|(_, c)| c != PLACEHOLDER));
    }

    #[test]
    fn as_an_event_all_but_the_latest_three_are_cleared_until_the_next_trigger() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let units = session(&mut lab, 8);
        let total: usize = units.iter().map(Unit::tokens).sum();
        let event = ClearParams {
            every_request: false,
            ..ClearParams::default()
        };
        let mut policy = loaded(&mut lab, &units, total - 1, event);
        let view = request(&mut policy, &mut lab);
        validate_entries(&view).unwrap();
        let kept = whole(&view);
        assert_eq!(kept, ["f5", "f6", "f7"]);
        assert_eq!(
            results(&view).len(),
            8,
            "cleared results stay as placeholders"
        );
        let arguments = view.iter().find_map(|e| match e.message() {
            Message::Assistant { content } => content.iter().find_map(|b| match b {
                Block::ToolCall(c) => Some(c.arguments.clone()),
                _ => None,
            }),
            _ => None,
        });
        assert_eq!(arguments.as_deref(), Some(r#"{"path":"f0.rs"}"#));

        // Clearing is an event: the next steps append to the edited prompt
        // until it passes the trigger again, and only then is more cleared.
        let after_first = view.iter().map(|e| e.tokens()).sum::<usize>();
        let mut n = 8;
        loop {
            let next = step(&mut lab, &format!("f{n}"), &"more\n".repeat(200));
            policy.push(&next, &[], &mut lab).unwrap();
            n += 1;
            let view = request(&mut policy, &mut lab);
            let kept = whole(&view);
            if kept.len() == 3 {
                assert_eq!(kept, [n - 3, n - 2, n - 1].map(|i| format!("f{i}")));
                assert!(n > 9, "one step more did not pass the trigger again");
                break;
            }
            assert_eq!(kept[..3], ["f5", "f6", "f7"], "nothing more cleared yet");
            assert!(view.iter().map(|e| e.tokens()).sum::<usize>() > after_first);
        }
    }

    #[test]
    fn by_default_every_request_past_the_trigger_keeps_only_the_latest_three() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let units = session(&mut lab, 8);
        let total: usize = units.iter().map(Unit::tokens).sum();
        let mut policy = loaded(&mut lab, &units, total - 1, ClearParams::default());
        let first: usize = request(&mut policy, &mut lab)
            .iter()
            .map(|e| e.tokens())
            .sum();
        for n in 8..11 {
            let next = step(&mut lab, &format!("f{n}"), &"more\n".repeat(200));
            policy.push(&next, &[], &mut lab).unwrap();
            let view = request(&mut policy, &mut lab);
            validate_entries(&view).unwrap();
            let kept = whole(&view);
            assert_eq!(
                kept,
                [n - 2, n - 1, n].map(|i| format!("f{i}")),
                "each request clears what left the latest three, though the edited prompt is under the trigger"
            );
            assert!(view.iter().map(|e| e.tokens()).sum::<usize>() < first + 3 * 200);
        }
    }

    #[test]
    fn clear_inputs_empties_the_cleared_calls() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let units = session(&mut lab, 5);
        let params = ClearParams {
            keep: 1,
            clear_inputs: true,
            ..ClearParams::default()
        };
        let mut policy = loaded(&mut lab, &units, 100, params);
        let full = policy.tokens;
        let view = request(&mut policy, &mut lab);
        validate_entries(&view).unwrap();
        let calls: Vec<String> = view
            .iter()
            .filter_map(|e| match e.message() {
                Message::Assistant { content } => content.iter().find_map(|b| match b {
                    Block::ToolCall(c) => Some(c.arguments.clone()),
                    _ => None,
                }),
                _ => None,
            })
            .collect();
        assert_eq!(calls, ["{}", "{}", "{}", "{}", r#"{"path":"f4.rs"}"#]);
        let after: usize = view.iter().map(|e| e.tokens()).sum();
        assert_eq!(
            after, policy.tokens,
            "the edits are counted as they are made"
        );
        assert_eq!(
            full - after,
            policy.freed[4],
            "the savings the edit counts are what the view sheds"
        );
        let results_only = loaded(&mut lab, &units, 100, ClearParams::default());
        assert!(
            policy.freed[4] > results_only.freed[4],
            "the arguments count too"
        );
    }

    #[test]
    fn an_edit_freeing_less_than_clear_at_least_is_not_applied() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let units = session(&mut lab, 5);
        let total: usize = units.iter().map(Unit::tokens).sum();
        let probe = loaded(&mut lab, &units, 0, ClearParams::default());
        let frees = probe.freed[2];
        let strict = ClearParams {
            clear_at_least: frees + 1,
            ..ClearParams::default()
        };
        let mut policy = loaded(&mut lab, &units, total - 1, strict);
        let view = request(&mut policy, &mut lab);
        assert!(results(&view).iter().all(|(_, c)| c != PLACEHOLDER));
        assert_eq!(view.iter().map(|e| e.tokens()).sum::<usize>(), total);

        let loose = ClearParams {
            clear_at_least: frees,
            ..ClearParams::default()
        };
        let mut policy = loaded(&mut lab, &units, total - 1, loose);
        let view = request(&mut policy, &mut lab);
        assert_eq!(
            results(&view)
                .iter()
                .filter(|(_, c)| c == PLACEHOLDER)
                .count(),
            2
        );
    }
}
