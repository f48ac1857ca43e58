//! Event-stream bodies that make a provider produce a given message, split
//! into small pieces the way real servers stream them.

use cwl::{Block, Message, Usage};
use serde_json::{Value, json};

/// Splits `text` into pieces of at most `size` characters.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn event(name: &str, value: &Value) -> String {
    format!("event: {name}\ndata: {value}\n\n")
}

fn blocks(message: &Message) -> &[Block] {
    match message {
        Message::Assistant { content } => content,
        _ => &[],
    }
}

/// An OpenAI Chat Completions stream for `message` (an assistant message;
/// other roles give an empty reply): reasoning as `reasoning_content`
/// deltas, text deltas, tool calls whose arguments are split across chunks,
/// the finish reason, a usage chunk and `[DONE]`.
pub fn openai_sse(message: &Message, usage: Usage) -> String {
    let chunk = |delta: Value, finish: Value| {
        data(&json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    };
    let mut out = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    let mut call_index = 0;
    for block in blocks(message) {
        match block {
            Block::Reasoning { text, .. } => {
                for piece in pieces(text, 5) {
                    out += &chunk(json!({"reasoning_content": piece}), Value::Null);
                }
            }
            Block::Text { text } => {
                for piece in pieces(text, 5) {
                    out += &chunk(json!({"content": piece}), Value::Null);
                }
            }
            Block::ToolCall(call) => {
                out += &chunk(
                    json!({"tool_calls": [{"index": call_index, "id": call.id, "type": "function",
                        "function": {"name": call.name, "arguments": ""}}]}),
                    Value::Null,
                );
                for piece in pieces(&call.arguments, 7) {
                    out += &chunk(
                        json!({"tool_calls": [{"index": call_index, "function": {"arguments": piece}}]}),
                        Value::Null,
                    );
                }
                call_index += 1;
            }
        }
    }
    let finish = if call_index > 0 { "tool_calls" } else { "stop" };
    out += &chunk(json!({}), json!(finish));
    out += &data(&json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        },
    }));
    out += "data: [DONE]\n\n";
    out
}

/// An OpenAI Responses stream for `message`: `response.created`, then per
/// block an output item (`reasoning` with summary deltas and its signature
/// as the encrypted content, a made-up one when it has none; an assistant
/// `message` with text deltas; a `function_call` with argument deltas)
/// from `response.output_item.added` to `response.output_item.done`, and
/// `response.completed` with the usage.
pub fn responses_sse(message: &Message, usage: Usage) -> String {
    let emit = |kind: &str, mut value: Value| {
        value["type"] = json!(kind);
        event(kind, &value)
    };
    let mut out = emit(
        "response.created",
        json!({"response": {"id": "resp_scripted", "status": "in_progress"}}),
    );
    for (index, block) in blocks(message).iter().enumerate() {
        let (start, pieces_of, delta_kind, done) = match block {
            Block::Reasoning { text, signature } => (
                json!({"type": "reasoning", "id": format!("rs_{index}"), "summary": []}),
                text.as_str(),
                "response.reasoning_summary_text.delta",
                json!({"type": "reasoning", "id": format!("rs_{index}"),
                    "summary": if text.is_empty() { json!([]) } else { json!([{"type": "summary_text", "text": text}]) },
                    "encrypted_content": signature.clone().unwrap_or_else(|| format!("enc-scripted-{index}"))}),
            ),
            Block::Text { text } => (
                json!({"type": "message", "id": format!("msg_{index}"), "role": "assistant", "content": []}),
                text.as_str(),
                "response.output_text.delta",
                json!({"type": "message", "id": format!("msg_{index}"), "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}),
            ),
            Block::ToolCall(call) => (
                json!({"type": "function_call", "id": format!("fc_{index}"), "call_id": call.id,
                    "name": call.name, "arguments": ""}),
                call.arguments.as_str(),
                "response.function_call_arguments.delta",
                json!({"type": "function_call", "id": format!("fc_{index}"), "call_id": call.id,
                    "name": call.name, "arguments": call.arguments}),
            ),
        };
        out += &emit(
            "response.output_item.added",
            json!({"output_index": index, "item": start}),
        );
        for piece in pieces(pieces_of, 5) {
            out += &emit(delta_kind, json!({"output_index": index, "delta": piece}));
        }
        out += &emit(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        );
    }
    out += &emit(
        "response.completed",
        json!({"response": {"id": "resp_scripted", "status": "completed", "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
        }}}),
    );
    out
}

/// An Anthropic Messages stream for `message`: `message_start` with the
/// prompt usage, one content block per block (thinking with its signature,
/// text, tool use with `input_json_delta` pieces), a `ping`,
/// `message_delta` with the stop reason and output tokens, `message_stop`.
/// A reasoning block without a signature is given a made-up one.
pub fn anthropic_sse(message: &Message, usage: Usage) -> String {
    let uncached = usage
        .input_tokens
        .saturating_sub(usage.cached_input_tokens)
        .saturating_sub(usage.cache_write_tokens);
    let mut out = event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": "scripted",
            "content": [], "stop_reason": null,
            "usage": {
                "input_tokens": uncached,
                "cache_read_input_tokens": usage.cached_input_tokens,
                "cache_creation_input_tokens": usage.cache_write_tokens,
                "output_tokens": 1,
            },
        }}),
    );
    out += &event("ping", &json!({"type": "ping"}));
    let mut has_calls = false;
    for (index, block) in blocks(message).iter().enumerate() {
        let start = |content_block: Value| {
            event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": content_block}),
            )
        };
        let delta = |delta: Value| {
            event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )
        };
        match block {
            Block::Reasoning { text, signature } => {
                out += &start(json!({"type": "thinking", "thinking": "", "signature": ""}));
                for piece in pieces(text, 5) {
                    out += &delta(json!({"type": "thinking_delta", "thinking": piece}));
                }
                let signature = signature
                    .clone()
                    .unwrap_or_else(|| "scripted-signature".into());
                out += &delta(json!({"type": "signature_delta", "signature": signature}));
            }
            Block::Text { text } => {
                out += &start(json!({"type": "text", "text": ""}));
                for piece in pieces(text, 5) {
                    out += &delta(json!({"type": "text_delta", "text": piece}));
                }
            }
            Block::ToolCall(call) => {
                has_calls = true;
                out += &start(
                    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
                );
                for piece in pieces(&call.arguments, 7) {
                    out += &delta(json!({"type": "input_json_delta", "partial_json": piece}));
                }
            }
        }
        out += &event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
    }
    let stop = if has_calls { "tool_use" } else { "end_turn" };
    out += &event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": usage.output_tokens}}),
    );
    out += &event("message_stop", &json!({"type": "message_stop"}));
    out
}
