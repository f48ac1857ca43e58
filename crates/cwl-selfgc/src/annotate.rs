//! The ids as the planner sees them (the paper's Listing 1): a user
//! message gets header metadata naming its `turn_id`, a tool result ends
//! with a `<turn id="…" />` tag. They are control metadata, added only to
//! the planner's fork of the context, never to the agent's own view.

use cwl::Message;

use crate::objects::{ObjectId, ObjectTable};

/// The planner's copy of a whole transcript `messages` indexed in `table`,
/// each object marked with its id. `label` names the channel in the
/// header metadata (the paper's `"webchat"`; e.g. `"cli"`).
pub fn annotate(messages: &[Message], table: &ObjectTable, label: &str) -> Vec<Message> {
    let ids: Vec<Option<&ObjectId>> = (0..messages.len()).map(|at| table.id_at(at)).collect();
    annotate_ids(messages, &ids, label)
}

/// The planner's copy of `messages` (a view), the message at `i` marked
/// with `ids[i]` when it opens an object.
pub fn annotate_ids(messages: &[Message], ids: &[Option<&ObjectId>], label: &str) -> Vec<Message> {
    messages
        .iter()
        .enumerate()
        .map(
            |(index, message)| match (message, ids.get(index).copied().flatten()) {
                (Message::User { content }, Some(id)) => {
                    let header = serde_json::to_string_pretty(&serde_json::json!({
                        "label": label,
                        "turn_id": id.to_string(),
                    }))
                    .unwrap_or_default();
                    Message::user(format!("Header metadata:\n{header}\n{content}"))
                }
                (Message::ToolResult(result), Some(id)) => {
                    let mut result = result.clone();
                    result.content = format!("{}\n<turn id=\"{id}\" />", result.content);
                    Message::ToolResult(result)
                }
                _ => message.clone(),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Block, ToolCall};

    #[test]
    fn listing_one() {
        let messages = vec![
            Message::user("What does this file do?"),
            Message::Assistant {
                content: vec![Block::ToolCall(ToolCall::new(
                    "c1",
                    "read",
                    r#"{"path":"src/main.py"}"#,
                ))],
            },
            Message::tool_result(
                "c1",
                "read",
                "def main():\n    print(\"Self-GC System Running...\")",
                false,
            ),
        ];
        let table = ObjectTable::of(&messages);
        let shown = annotate(&messages, &table, "webchat");
        let Message::User { content } = &shown[0] else {
            panic!("{shown:?}")
        };
        assert_eq!(
            content,
            "Header metadata:\n{\n  \"label\": \"webchat\",\n  \"turn_id\": \"conversation:user:1\"\n}\nWhat does this file do?"
        );
        assert_eq!(shown[1], messages[1], "assistant turns are no objects");
        let Message::ToolResult(result) = &shown[2] else {
            panic!("{shown:?}")
        };
        assert!(
            result
                .content
                .ends_with("Running...\")\n<turn id=\"function:read:1\" />")
        );
    }
}
