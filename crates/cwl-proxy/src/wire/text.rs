//! Plain text of provider content values.

use serde_json::Value;

/// The text of a content value: a string, or a list of parts whose texts
/// are joined by newlines (parts without text, such as images, become
/// `[image]`, `[document]`...), as the lab's importers read them.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().map(part_text).collect::<Vec<_>>().join("\n"),
        other => other.to_string(),
    }
}

fn part_text(part: &Value) -> String {
    if let Some(text) = part.as_str() {
        return text.to_string();
    }
    match part.get("text").and_then(Value::as_str) {
        Some(text) => text.to_string(),
        None => {
            let kind = part.get("type").and_then(Value::as_str).unwrap_or("part");
            let kind = if kind.contains("image") {
                "image"
            } else {
                kind
            };
            format!("[{kind}]")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn joins_texts_and_names_other_parts() {
        assert_eq!(content_text(&json!("hi")), "hi");
        assert_eq!(content_text(&Value::Null), "");
        assert_eq!(
            content_text(&json!([{"type":"text","text":"a"},{"type":"image","source":{}},"b"])),
            "a\n[image]\nb"
        );
    }
}
