//! An MCP tool result as the text the model reads.
//!
//! Text blocks are kept as they are; images, audio and resources are
//! described in one line each (the model APIs here take text tool
//! results); structured content is shown as JSON when there is no text.
//! A result flagged `isError` becomes an error result.

use serde_json::Value;

use crate::tools::ToolOutput;

/// The output for a `tools/call` result, read as its JSON form (so new
/// content kinds are described, not lost).
pub fn output(result: &Value) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    for block in result["content"].as_array().into_iter().flatten() {
        parts.push(describe(block));
    }
    let structured = &result["structuredContent"];
    if parts.is_empty() && !structured.is_null() {
        parts.push(structured.to_string());
    }
    let text = if parts.is_empty() {
        "(the tool returned no content)".to_string()
    } else {
        parts.join("\n")
    };
    if result["isError"] == Value::Bool(true) {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    }
}

/// One content block as text.
fn describe(block: &Value) -> String {
    let text = |key: &str| block[key].as_str().unwrap_or_default();
    let size = |key: &str| {
        // Base64: 4 characters carry 3 bytes.
        block[key].as_str().map_or(0, |data| data.len() / 4 * 3)
    };
    match text("type") {
        "text" => text("text").to_string(),
        "image" => format!(
            "[image: {}, about {} bytes, not shown]",
            text("mimeType"),
            size("data")
        ),
        "audio" => format!(
            "[audio: {}, about {} bytes, not shown]",
            text("mimeType"),
            size("data")
        ),
        "resource_link" => format!(
            "[resource link: {}{}]",
            text("uri"),
            match block["name"].as_str() {
                Some(name) => format!(" ({name})"),
                None => String::new(),
            }
        ),
        "resource" => {
            let resource = &block["resource"];
            let uri = resource["uri"].as_str().unwrap_or("?");
            match resource["text"].as_str() {
                Some(body) => format!("[resource {uri}]\n{body}"),
                None => format!(
                    "[resource {uri}: {} binary data, not shown]",
                    resource["mimeType"].as_str().unwrap_or("unknown type")
                ),
            }
        }
        other => format!(
            "[{} content, not shown]",
            if other.is_empty() { "untyped" } else { other }
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_is_kept_and_other_content_described() {
        let out = output(&json!({"content": [
            {"type": "text", "text": "line one"},
            {"type": "image", "mimeType": "image/png", "data": "AAAABBBB"},
            {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a"},
            {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "bee"}},
            {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AA==", "mimeType": "application/zip"}},
            {"type": "hologram"}
        ]}));
        assert!(!out.is_error);
        assert_eq!(
            out.content,
            "line one\n[image: image/png, about 6 bytes, not shown]\n[audio: audio/wav, about 3 bytes, not shown]\n[resource link: file:///a.txt (a)]\n[resource file:///b.txt]\nbee\n[resource file:///c.bin: application/zip binary data, not shown]\n[hologram content, not shown]"
        );
    }

    #[test]
    fn errors_and_empty_results() {
        let out = output(
            &json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}),
        );
        assert_eq!(out, ToolOutput::error("no such file"));
        let out = output(&json!({"content": [], "structuredContent": {"n": 3}}));
        assert_eq!(out, ToolOutput::ok("{\"n\":3}"));
        assert_eq!(
            output(&json!({"content": []})),
            ToolOutput::ok("(the tool returned no content)")
        );
    }
}
