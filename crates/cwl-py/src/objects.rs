//! A view message in the Chat Completions shape (the default) as Python
//! objects, straight from the engine's message: what
//! [`cwl::openai::to_message`] writes, key for key and in its order, in
//! read-only containers ([`crate::frozen`]), without a JSON value between.

use cwl::{Block, Message};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::frozen;

/// Writes `message` as a Chat Completions message.
pub fn chat<'py>(py: Python<'py>, message: &Message) -> PyResult<Bound<'py, PyAny>> {
    let dict = frozen::dict(py)?;
    match message {
        Message::System { content } => {
            dict.set_item(intern!(py, "content"), content)?;
            dict.set_item(intern!(py, "role"), intern!(py, "system"))?;
        }
        Message::User { content } => {
            dict.set_item(intern!(py, "content"), content)?;
            dict.set_item(intern!(py, "role"), intern!(py, "user"))?;
        }
        Message::ToolResult(result) => {
            dict.set_item(intern!(py, "content"), &result.content)?;
            dict.set_item(intern!(py, "role"), intern!(py, "tool"))?;
            dict.set_item(intern!(py, "tool_call_id"), &result.call_id)?;
        }
        Message::Assistant { content } => assistant(&dict, content)?,
    }
    Ok(dict.into_any())
}

/// An assistant message's fields, in the order of the JSON map
/// `to_message` builds (sorted keys).
fn assistant(dict: &Bound<'_, PyDict>, content: &[Block]) -> PyResult<()> {
    let py = dict.py();
    let parts = cwl::openai::assistant_fields(content);
    match &parts.content {
        None => dict.set_item(intern!(py, "content"), py.None())?,
        Some(text) => dict.set_item(intern!(py, "content"), text.as_ref())?,
    }
    if let Some(reasoning) = &parts.reasoning {
        dict.set_item(intern!(py, "reasoning_content"), reasoning.as_ref())?;
    }
    if let Some(signature) = parts.signature {
        dict.set_item(intern!(py, "reasoning_signature"), signature)?;
    }
    dict.set_item(intern!(py, "role"), intern!(py, "assistant"))?;
    let calls = frozen::list(py)?;
    for call in parts.calls {
        let function = frozen::dict(py)?;
        function.set_item(intern!(py, "arguments"), &call.arguments)?;
        function.set_item(intern!(py, "name"), &call.name)?;
        let entry = frozen::dict(py)?;
        entry.set_item(intern!(py, "function"), function)?;
        entry.set_item(intern!(py, "id"), &call.id)?;
        entry.set_item(intern!(py, "type"), intern!(py, "function"))?;
        calls.append(entry)?;
    }
    if !calls.is_empty() {
        dict.set_item(intern!(py, "tool_calls"), calls)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{Containers, write};
    use cwl::ToolCall;

    fn call(id: &str, name: &str, arguments: &str) -> Block {
        Block::ToolCall(ToolCall::new(id, name, arguments.to_string()))
    }

    fn reasoning(text: &str, signature: Option<&str>) -> Block {
        Block::Reasoning {
            text: text.into(),
            signature: signature.map(str::to_string),
        }
    }

    fn texts(value: &str) -> Block {
        Block::Text { text: value.into() }
    }

    fn messages() -> Vec<Message> {
        let assistant = |content: Vec<Block>| Message::Assistant { content };
        vec![
            Message::system("You are a coding agent."),
            Message::user("Find the bug — in «main»."),
            Message::tool_result("c1", "read_file", "fn main() {}\n", false),
            Message::tool_result("c2", "grep", "no match", true),
            assistant(vec![texts("Done.")]),
            assistant(vec![texts("One."), texts("Two.")]),
            assistant(vec![call("c1", "read_file", r#"{"path":"a.rs"}"#)]),
            assistant(vec![
                reasoning("Look at main.", Some("sig")),
                reasoning("Then lib.", None),
                texts("Reading both."),
                call("c1", "read_file", r#"{"path":"main.rs"}"#),
                call("c2", "grep", "not json"),
            ]),
            assistant(vec![reasoning("", None), reasoning("x", Some("s2"))]),
        ]
    }

    #[test]
    fn a_chat_message_is_what_the_json_path_writes_key_for_key() {
        Python::initialize();
        Python::attach(|py| {
            let json = py.import("json").unwrap();
            let dumps = |object: &Bound<'_, PyAny>| -> String {
                json.call_method1("dumps", (object,))
                    .unwrap()
                    .extract()
                    .unwrap()
            };
            for message in messages() {
                let direct = chat(py, &message).unwrap();
                let through =
                    write(py, &cwl::openai::to_message(&message), Containers::Frozen).unwrap();
                assert_eq!(dumps(&direct), dumps(&through), "{message:?}");
                assert!(direct.eq(&through).unwrap());
                assert_eq!(direct.get_type().name().unwrap().to_string(), "FrozenDict");
            }
            let message = chat(py, &messages()[7]).unwrap();
            let calls = message.get_item("tool_calls").unwrap();
            assert_eq!(calls.get_type().name().unwrap().to_string(), "FrozenList");
        });
    }
}
