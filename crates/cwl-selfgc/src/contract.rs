//! The planner contract: an object-action contract, not a summary prompt
//! (the paper's four rules and its output schema, Listing 2).

use cwl::Message;

/// The instructions appended to the planner's fork of the context.
pub const PLANNER_CONTRACT: &str = "\
You are the context garbage collector of the agent whose conversation is above. \
Do not continue the conversation and do not call tools. Decide which indexed objects \
(ids in `turn_id` header metadata and `<turn id=\"...\" />` tags) can leave the active \
context, by these rules, in order:
1. Exclude the latest visible turn, active instruction files, live handles (job ids, \
URLs, ports, paths still in use), editable artifact bodies, and exact evidence that \
future turns may need verbatim.
2. Prefer tool-level actions (function ids) when they preserve the same future support \
more precisely than folding a whole turn.
3. Use prune only for obsolete low-signal trace (failed attempts, superseded searches), \
mask for repetitive log-like middle content, and fold for large bodies that may need \
exact recovery.
4. Answer with XML only: one short <above_conversation_summary> sentence (session type, \
likely future dependencies, a light compression bias), then one <gc_plan> with grouped \
<fold>, <mask> and <prune> elements over existing ids only, one id per line, for example:
<above_conversation_summary>
A coding session; later turns will edit src/app.rs again.
</above_conversation_summary>
<gc_plan>
<fold kind=\"conversation\" reason=\"resolved_turn\">
user:5
</fold>
<fold kind=\"function\" reason=\"stable_artifact\">
read:12
</fold>
<prune kind=\"function\" reason=\"obsolete_trace\">
exec:9
</prune>
</gc_plan>
An empty <gc_plan></gc_plan> is a valid answer when nothing should go.";

/// The planner's request: the annotated fork of the context (see
/// [`crate::annotate::annotate`]) followed by the contract as a user turn.
pub fn planner_request(mut annotated: Vec<Message>) -> Vec<Message> {
    annotated.push(Message::user(PLANNER_CONTRACT));
    annotated
}
