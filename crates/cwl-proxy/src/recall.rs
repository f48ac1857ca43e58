//! `recall` through the proxy.
//!
//! Strategies that take content out of the view and can bring it back
//! (Self-GC's folds; CWL's index of folded residues and user turns when
//! the residue cap is on) point the model to a `recall` tool, which the
//! proxy's clients do not define. So the proxy offers it, statelessly:
//!
//! 1. It appends `recall` ([`cwl::recall_spec`]) to the request's `tools`,
//!    in the wire's own format, after the client's tools (their bytes, and
//!    so the cached prefix, unchanged). Only when the client offers tools
//!    (a client without any could not answer a call) and none of them is
//!    called `recall` (then the client's own tool answers, and the proxy
//!    adds and rewrites nothing).
//! 2. A `recall` call streams to the client as the model made it; the
//!    client, not knowing the tool, answers it with an error (Claude Code:
//!    "No such tool available: recall"; Codex: "unsupported call:
//!    recall") and sends its next request. There the proxy replaces the
//!    content of every result answering a `recall` call (paired by call id
//!    with the call earlier in the history) with the strategy's answer
//!    (the folded payload byte for byte, or the strategy's error text),
//!    before the engine, the session store or the upstream see it.
//! 3. The answer is given once, when the result is first pushed, and kept
//!    with the conversation (the session stores the result as answered), so
//!    every later request carries the same bytes for it and the cached
//!    prefix holds.

use std::sync::OnceLock;

use cwl::{Config, Message, RECALL, ToolSpec, TranscriptStore};
use cwl_session::strategy::StrategyName;

use crate::wire::{CallNames, Item, Wire};

/// Whether a strategy can bring back what it took out of the view:
/// Self-GC always (its folds), CWL when its residue cap folds residues and
/// user turns into an index line, cwm never (its `recall` answers that
/// nothing can be recalled).
pub fn strategy_recalls(strategy: StrategyName, config: &Config) -> bool {
    match strategy {
        StrategyName::SelfGc => true,
        StrategyName::Cwl => config.residue_share.is_some(),
        StrategyName::Cwm => false,
    }
}

/// Whether the proxy adds `recall` to a request offering `tools` (when its
/// strategy recalls): the client offers tools, none called `recall`.
pub fn offered(tools: &[ToolSpec]) -> bool {
    !tools.is_empty() && !tools.iter().any(|tool| tool.name == RECALL)
}

/// Whether requests get `recall` ([`offered`]), remembered by the bytes of
/// their `tools` array: clients send the same tools with every request
/// (Claude Code about 15k tokens of them), and reading them again each
/// time would cost more than reading the rest of the request.
#[derive(Debug, Default)]
pub struct Offers {
    /// The latest tools arrays seen, most recent first.
    seen: std::sync::Mutex<Vec<(Box<str>, bool)>>,
}

/// Tools arrays [`Offers`] remembers.
const OFFERS_KEPT: usize = 16;

impl Offers {
    /// Whether a request with `body` offering these tools gets `recall`.
    pub fn offered(&self, wire: &dyn Wire, body: &crate::body::Body) -> bool {
        let Some(tools) = body.get("tools").map(|raw| raw.get()) else {
            return false;
        };
        let lock = || self.seen.lock().unwrap_or_else(|e| e.into_inner());
        {
            let mut seen = lock();
            if let Some(at) = seen.iter().position(|(known, _)| **known == *tools) {
                let entry = seen.remove(at);
                let answer = entry.1;
                seen.insert(0, entry);
                return answer;
            }
        }
        let answer = offered(&wire.tools(body));
        let mut seen = lock();
        seen.insert(0, (tools.into(), answer));
        seen.truncate(OFFERS_KEPT);
        answer
    }
}

/// The raw `tools` array with `recall` appended in `wire`'s format, the
/// client's own bytes before it; `None` when `tools` is not an array.
pub fn with_tool(wire: &dyn Wire, tools: &str) -> Option<String> {
    let inner = tools.trim_end().strip_suffix(']')?.trim_end();
    if !inner.trim_start().starts_with('[') {
        return None;
    }
    let tool = wire.tool(&cwl::recall_spec()).to_string();
    let separator = if inner.ends_with('[') { "" } else { "," };
    Some(format!("{inner}{separator}{tool}]"))
}

/// The messages a request's history makes, in push order (the system
/// prompt first when the conversation pushed one): what a strategy reads
/// evicted content back from when it answers a `recall` (the client
/// resends the whole history, so the proxy keeps no copy).
pub(crate) struct Transcript<'a> {
    system: Option<&'a Message>,
    wire: &'a dyn Wire,
    items: &'a [Item],
    messages: OnceLock<Vec<Message>>,
}

impl<'a> Transcript<'a> {
    /// The transcript of `items`, after `system` if any.
    pub(crate) fn new(system: Option<&'a Message>, wire: &'a dyn Wire, items: &'a [Item]) -> Self {
        Transcript {
            system,
            wire,
            items,
            messages: OnceLock::new(),
        }
    }
}

impl TranscriptStore for Transcript<'_> {
    fn messages(&self, first: u64, last: u64) -> Result<Vec<Message>, String> {
        let all = self.messages.get_or_init(|| {
            let mut out: Vec<Message> = self.system.cloned().into_iter().collect();
            for unit in self.wire.units(self.items, &mut CallNames::default()) {
                out.extend(unit.messages);
            }
            out
        });
        all.messages(first, last)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::api::Api;

    #[test]
    fn offers_are_remembered_by_the_tools_bytes_and_stay_right() {
        let offers = Offers::default();
        let wire = Api::Anthropic.wire();
        let body = |tools: &str| {
            crate::body::Body::parse(format!(r#"{{"tools":{tools},"messages":[]}}"#).as_bytes())
                .unwrap()
        };
        let tool =
            |name: &str| format!(r#"{{"name":"{name}","input_schema":{{"type":"object"}}}}"#);
        let ours = format!("[{}]", tool(RECALL));
        assert!(!offers.offered(wire, &crate::body::Body::parse(b"{}").unwrap()));
        assert!(!offers.offered(wire, &body("[]")));
        for round in 0..2 {
            for n in 0..2 * OFFERS_KEPT {
                let tools = format!("[{}]", tool(&format!("t{n}")));
                assert!(offers.offered(wire, &body(&tools)), "round {round}, t{n}");
                assert!(
                    !offers.offered(wire, &body(&ours)),
                    "round {round}, after t{n}"
                );
            }
        }
        assert!(offers.seen.lock().unwrap().len() <= OFFERS_KEPT);
    }

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }

    #[test]
    fn recall_is_added_after_the_clients_tools_in_each_wire_format() {
        let recall = cwl::recall_spec();
        let cases = [
            (
                Api::Anthropic,
                r#"[{"name": "Read", "input_schema": {"type": "object"}} ]"#,
                json!({"name": "recall", "description": recall.description,
                    "input_schema": recall.parameters}),
            ),
            (
                Api::OpenAiChat,
                r#"[{"type": "function", "function": {"name": "read"}}]"#,
                json!({"type": "function", "function": {"name": "recall",
                    "description": recall.description, "parameters": recall.parameters}}),
            ),
            (
                Api::OpenAiResponses,
                r#"[{"type": "local_shell"},{"type": "function", "name": "read"}]"#,
                json!({"type": "function", "name": "recall", "description": recall.description,
                    "parameters": recall.parameters, "strict": false}),
            ),
        ];
        for (api, tools, expected) in cases {
            let out = with_tool(api.wire(), tools).unwrap();
            let client = tools.trim_end().trim_end_matches(']').trim_end();
            assert!(out.starts_with(client), "{}: {out}", api.name());
            let parsed: Vec<Value> = serde_json::from_str(&out).unwrap();
            let original: Vec<Value> = serde_json::from_str(tools).unwrap();
            assert_eq!(parsed[..original.len()], original[..], "{}", api.name());
            assert_eq!(parsed.last(), Some(&expected), "{}", api.name());
            assert_eq!(parsed.len(), original.len() + 1);
        }
    }

    #[test]
    fn the_tool_list_read_back_names_recall_with_its_schema() {
        for api in [Api::Anthropic, Api::OpenAiChat, Api::OpenAiResponses] {
            let body = format!(r#"{{"tools": {}}}"#, with_tool(api.wire(), "[ ]").unwrap());
            let body = crate::body::Body::parse(body.as_bytes()).unwrap();
            assert_eq!(
                api.wire().tools(&body),
                vec![cwl::recall_spec()],
                "{}",
                api.name()
            );
        }
    }

    #[test]
    fn a_result_is_answered_in_each_wire_format_and_reads_back_so() {
        let cases = [
            (
                Api::Anthropic,
                json!({"role": "assistant", "content": [
                    {"type": "tool_use", "id": "c1", "name": "recall", "input": {}},
                    {"type": "tool_use", "id": "c2", "name": "read", "input": {}}]}),
                json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "is_error": true,
                        "content": [{"type": "text", "text": "No such tool available: recall"}],
                        "cache_control": {"type": "ephemeral"}},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "file"}]}),
            ),
            (
                Api::OpenAiChat,
                json!({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "recall", "arguments": "{}"}}]}),
                json!({"role": "tool", "tool_call_id": "c1", "content": "Tool recall not found"}),
            ),
            (
                Api::OpenAiResponses,
                json!({"type": "function_call", "call_id": "c1", "name": "recall", "arguments": "{}"}),
                json!({"type": "function_call_output", "call_id": "c1",
                    "output": "unsupported call: recall"}),
            ),
        ];
        for (api, call, result) in cases {
            let wire = api.wire();
            assert_eq!(
                wire.answer(&result, "c9", "x", false),
                None,
                "{}",
                api.name()
            );
            assert_eq!(wire.answer(&call, "c1", "x", false), None, "{}", api.name());
            for is_error in [false, true] {
                let answered = wire.answer(&result, "c1", "payload\n", is_error).unwrap();
                let items = [Item::of(call.clone()), Item::of(answered.clone())];
                let units = wire.units(&items, &mut CallNames::default());
                let Some(Message::ToolResult(read)) = units.last().unwrap().messages.first() else {
                    panic!("{}: {units:?}", api.name())
                };
                assert_eq!(read.call_id, "c1");
                assert_eq!(read.tool_name, RECALL);
                assert_eq!(read.content, "payload\n", "{}", api.name());
                let flagged = is_error && api == Api::Anthropic;
                assert_eq!(read.is_error, flagged, "{}", api.name());
                if api == Api::Anthropic {
                    let block = &answered["content"][0];
                    assert_eq!(block["cache_control"], json!({"type": "ephemeral"}));
                    assert_eq!(answered["content"][1], result["content"][1], "others kept");
                }
            }
        }
    }

    #[test]
    fn what_is_not_an_array_gets_nothing() {
        let wire = Api::Anthropic.wire();
        assert_eq!(with_tool(wire, r#"{"a": 1}"#), None);
        assert_eq!(with_tool(wire, r#""[]""#), None);
        assert_eq!(with_tool(wire, "null"), None);
    }

    #[test]
    fn only_a_client_with_tools_and_no_recall_of_its_own_gets_it() {
        assert!(offered(&[spec("read")]));
        assert!(!offered(&[]), "a client without tools");
        assert!(
            !offered(&[spec("read"), spec(RECALL)]),
            "a client's own recall"
        );
    }

    #[test]
    fn self_gc_always_recalls_cwl_when_it_folds_residues_cwm_never() {
        let folding = Config::with_budget(1_000);
        let off = Config::with_budget(1_000).residue_share(None);
        assert!(strategy_recalls(StrategyName::SelfGc, &off));
        assert!(strategy_recalls(StrategyName::Cwl, &folding));
        assert!(!strategy_recalls(StrategyName::Cwl, &off));
        assert!(!strategy_recalls(StrategyName::Cwm, &folding));
    }

    #[test]
    fn the_transcript_counts_the_system_prompt_first() {
        let system = Message::system("sys");
        let items: Vec<Item> = [
            json!({"role": "user", "content": "a"}),
            json!({"role": "assistant", "content": "b"}),
        ]
        .into_iter()
        .map(Item::of)
        .collect();
        let wire = Api::OpenAiChat.wire();
        let transcript = Transcript::new(Some(&system), wire, &items);
        assert_eq!(transcript.messages(1, 1).unwrap(), vec![Message::user("a")]);
        assert_eq!(transcript.messages(0, 0).unwrap(), vec![system.clone()]);
        let error = transcript.messages(2, 3).unwrap_err();
        assert!(error.contains("3 messages"), "{error}");
        let bare = Transcript::new(None, wire, &items);
        assert_eq!(bare.messages(0, 0).unwrap(), vec![Message::user("a")]);
    }
}
