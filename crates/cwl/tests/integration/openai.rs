//! The OpenAI interchange shape: reading and writing keep every field.

use cwl::openai::{OpenAiError, parse_request, to_messages, to_tools};
use cwl::{Block, Message, ToolCall};
use serde_json::json;

#[test]
fn a_request_round_trips() {
    let body = json!({
        "messages": [
            {"content": "sys", "role": "system"},
            {"content": "hi", "role": "user"},
            {"content": "looking", "reasoning_content": "think", "role": "assistant",
             "tool_calls": [{"function": {"arguments": "{\"q\": 1}", "name": "grep"}, "id": "call_A", "type": "function"}]},
            {"content": "out", "role": "tool", "tool_call_id": "call_A"},
            {"content": "done", "role": "assistant"}
        ],
        "tools": [{"function": {"description": "search", "name": "grep", "parameters": {"type": "object"}}, "type": "function"}]
    });
    let request = parse_request(&body).expect("valid");
    assert_eq!(
        request.messages[2],
        Message::Assistant {
            content: vec![
                Block::Reasoning {
                    text: "think".into(),
                    signature: None
                },
                Block::Text {
                    text: "looking".into()
                },
                Block::ToolCall(ToolCall::new("call_A", "grep", "{\"q\": 1}")),
            ]
        }
    );
    assert_eq!(
        request.messages[3],
        Message::tool_result("call_A", "grep", "out", false)
    );
    assert_eq!(json!(to_messages(&request.messages)), body["messages"]);
    assert_eq!(json!(to_tools(&request.tools)), body["tools"]);
}

#[test]
fn content_parts_and_developer_messages_are_read() {
    let body = json!({"messages": [
        {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": [{"type": "text", "text": "q"}]}
    ]});
    let request = parse_request(&body).expect("valid");
    assert_eq!(
        request.messages,
        vec![Message::system("a\nb"), Message::user("q")]
    );
}

#[test]
fn errors_name_the_message_and_the_fault() {
    let cases = [
        (
            json!({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
            "messages[0]: content[0]: unsupported content part type `image_url`",
        ),
        (
            json!({"messages": [{"role": "user", "content": 5}]}),
            "messages[0]: `content` must be a string",
        ),
        (
            json!({"messages": [{"role": "assistant"}]}),
            "messages[0]: assistant message has neither content nor tool_calls",
        ),
        (
            json!({"messages": [{"role": "tool", "content": "x"}]}),
            "messages[0]: tool message has no `tool_call_id`",
        ),
        (
            json!({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 3}}]}]}),
            "`function.arguments` must be a JSON string",
        ),
        (json!({"messages": "x"}), "`messages` must be an array"),
    ];
    for (body, expected) in cases {
        let error: OpenAiError = parse_request(&body).expect_err("invalid");
        assert!(error.to_string().contains(expected), "{body}: {error}");
    }
}

#[test]
fn content_text_joins_texts_and_names_other_parts() {
    use cwl::openai::content_text;
    use serde_json::{Value, json};
    assert_eq!(content_text(&json!("hi")), "hi");
    assert_eq!(content_text(&Value::Null), "");
    assert_eq!(
        content_text(
            &json!([{"type":"text","text":"a"},{"type":"image_url","image_url":{}},{"type":"document"},"b"])
        ),
        "a\n[image]\n[document]\nb"
    );
}
