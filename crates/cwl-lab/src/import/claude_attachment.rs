//! Claude Code `attachment` lines: context the harness adds to the next
//! request (an @-mentioned file, hook output, reminders, listings) or a
//! user prompt queued while the agent was busy.
//!
//! Claude Code renders each kind into user-role text (`<system-reminder>`
//! blocks) with templates of its own. Newer versions log that text
//! (`rendered`), which is then taken as it is, whatever the kind; for
//! older ones the importer keeps the logged content, not the templates,
//! so the token count is close but not exact, and kinds that are harness
//! state only, or whose text is all template (plan mode, date changes,
//! hook bookkeeping), are skipped.

use serde_json::Value;

/// What one attachment line contributes to the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attachment {
    /// A user prompt (queued while the agent worked): a user turn.
    Prompt(String),
    /// Context the model saw with the next request.
    Context(String),
    /// Nothing the model saw that the log records.
    Nothing,
}

/// Kinds whose logged text reaches the model, read by [`gather`].
const CONTEXT_KINDS: &[&str] = &[
    "hook_additional_context",
    "hook_system_message",
    "hook_blocking_error",
    "async_hook_response",
    "edited_text_file",
    "todo_reminder",
    "task_reminder",
    "skill_listing",
    "agent_listing_delta",
    "deferred_tools_delta",
    "mcp_instructions_delta",
    "relevant_memories",
    "invoked_skills",
    "memory_update",
    "task_status",
    "mcp_resource",
    "agent_mention",
];

/// Hook events whose success output is shown to the model.
const PROMPT_HOOKS: &[&str] = &["SessionStart", "UserPromptSubmit", "UserPromptExpansion"];

/// Reads the `attachment` object of an attachment line, and the line's
/// `rendered` list (what the model was sent), when logged.
pub(crate) fn read(attachment: &Value, rendered: Option<&Value>) -> Attachment {
    let kind = attachment.get("type").and_then(Value::as_str).unwrap_or("");
    let rendered = rendered.and_then(Value::as_array).map(|parts| {
        parts
            .iter()
            .filter_map(|part| part.get("content"))
            .map(text_of)
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    });
    if kind != "queued_command"
        && let Some(text) = rendered.filter(|text| !text.trim().is_empty())
    {
        return Attachment::Context(text);
    }
    let text = match kind {
        "queued_command" => {
            let prompt = attachment.get("prompt").map(text_of).unwrap_or_default();
            return if prompt.trim().is_empty() {
                Attachment::Nothing
            } else {
                Attachment::Prompt(prompt)
            };
        }
        "file" => file(attachment),
        "hook_success" => {
            let event = attachment.get("hookEvent").and_then(Value::as_str);
            if !event.is_some_and(|e| PROMPT_HOOKS.contains(&e)) {
                return Attachment::Nothing;
            }
            let name = attachment
                .get("hookName")
                .and_then(Value::as_str)
                .unwrap_or("hook");
            let content = attachment.get("content").map(text_of).unwrap_or_default();
            if content.is_empty() {
                String::new()
            } else {
                format!("{name} hook success: {content}")
            }
        }
        kind if CONTEXT_KINDS.contains(&kind) => gather(attachment),
        _ => String::new(),
    };
    if text.trim().is_empty() {
        Attachment::Nothing
    } else {
        Attachment::Context(text)
    }
}

/// An @-mentioned or re-read file, as the Read tool call Claude Code
/// renders it: the call, then the numbered lines.
fn file(attachment: &Value) -> String {
    let path = attachment
        .get("filename")
        .and_then(Value::as_str)
        .unwrap_or("a file");
    let content = attachment
        .pointer("/content/file/content")
        .and_then(Value::as_str);
    let Some(content) = content else {
        return match attachment.pointer("/content/type").and_then(Value::as_str) {
            Some(kind) => format!("Read {path}: [{kind}]"),
            None => String::new(),
        };
    };
    let numbered: Vec<String> = content
        .lines()
        .enumerate()
        .map(|(n, line)| format!("{}\t{line}", n + 1))
        .collect();
    format!(
        "Called the Read tool with the following input: {{\"file_path\":\"{path}\"}}\nResult of calling the Read tool:\n{}",
        numbered.join("\n")
    )
}

/// The text fields of a context attachment, joined by newlines.
fn gather(attachment: &Value) -> String {
    const FIELDS: &[&str] = &[
        "content",
        "addedLines",
        "addedBlocks",
        "snippet",
        "message",
        "systemMessage",
        "additionalContext",
        "blockingError",
        "memories",
        "skills",
        "summary",
        "description",
        "response",
    ];
    FIELDS
        .iter()
        .filter_map(|field| attachment.get(field))
        .map(text_of)
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text in a value: strings as they are, lists item by item, objects
/// by their `content`, `text`, `subject` or `prompt` (other fields are
/// metadata).
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .map(text_of)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(fields) => ["content", "text", "subject", "prompt", "additionalContext"]
            .iter()
            .filter_map(|key| fields.get(*key))
            .map(text_of)
            .find(|t| !t.is_empty())
            .unwrap_or_default(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_queued_command_is_a_prompt() {
        let queued =
            json!({"type": "queued_command", "prompt": "also fix b", "commandMode": "prompt"});
        assert_eq!(read(&queued, None), Attachment::Prompt("also fix b".into()));
        let blocks =
            json!({"type": "queued_command", "prompt": [{"type": "text", "text": "see this"}]});
        assert_eq!(read(&blocks, None), Attachment::Prompt("see this".into()));
    }

    #[test]
    fn a_file_is_rendered_as_a_read() {
        let file = json!({"type": "file", "filename": "/p/a.py", "content": {"type": "text",
            "file": {"filePath": "/p/a.py", "content": "x = 1\ny = 2\n", "numLines": 2}}});
        assert_eq!(
            read(&file, None),
            Attachment::Context(
                "Called the Read tool with the following input: {\"file_path\":\"/p/a.py\"}\nResult of calling the Read tool:\n1\tx = 1\n2\ty = 2".into()
            )
        );
    }

    #[test]
    fn hook_output_counts_only_where_the_model_sees_it() {
        let context =
            json!({"type": "hook_additional_context", "content": ["use tabs"], "hookName": "h"});
        assert_eq!(read(&context, None), Attachment::Context("use tabs".into()));
        let start = json!({"type": "hook_success", "hookEvent": "SessionStart", "hookName": "boot", "content": "ready"});
        assert_eq!(
            read(&start, None),
            Attachment::Context("boot hook success: ready".into())
        );
        let tool = json!({"type": "hook_success", "hookEvent": "PreToolUse", "content": "ok"});
        assert_eq!(read(&tool, None), Attachment::Nothing);
        assert_eq!(
            read(&json!({"type": "date_change"}), None),
            Attachment::Nothing
        );
        assert_eq!(
            read(&json!({"type": "skill_listing", "content": ""}), None),
            Attachment::Nothing
        );
    }

    #[test]
    fn listings_and_reminders_keep_their_items() {
        let agents = json!({"type": "agent_listing_delta", "addedTypes": ["Explore"],
            "addedLines": ["- Explore: searches", "- Plan: plans"]});
        assert_eq!(
            read(&agents, None),
            Attachment::Context("- Explore: searches\n- Plan: plans".into())
        );
        let todos = json!({"type": "todo_reminder", "content": [{"content": "fix a", "status": "pending"}]});
        assert_eq!(read(&todos, None), Attachment::Context("fix a".into()));
    }

    #[test]
    fn rendered_text_is_what_the_model_saw() {
        let rendered = json!([{"content": "<system-reminder>\nToday's date is 2026-11-25.\n</system-reminder>"}]);
        assert_eq!(
            read(
                &json!({"type": "date", "date": "2026-11-25"}),
                Some(&rendered)
            ),
            Attachment::Context(
                "<system-reminder>\nToday's date is 2026-11-25.\n</system-reminder>".into()
            ),
            "a kind the importer has no rule for"
        );
        let listing = json!({"type": "agent_listing_delta", "addedLines": ["- Explore: searches"]});
        let shown =
            json!([{"content": "Available agent types:\n- Explore: searches"}, {"content": ""}]);
        assert_eq!(
            read(&listing, Some(&shown)),
            Attachment::Context("Available agent types:\n- Explore: searches".into()),
            "the template's text, not only the items"
        );
        let queued = json!({"type": "queued_command", "prompt": "also fix b"});
        let echoed = json!([{"content": "<system-reminder>queued</system-reminder>"}]);
        assert_eq!(
            read(&queued, Some(&echoed)),
            Attachment::Prompt("also fix b".into()),
            "a queued prompt stays a user turn"
        );
        let snapshot = json!({"type": "prompt_snapshot", "systemPrompt": ["You are an agent."]});
        assert_eq!(read(&snapshot, None), Attachment::Nothing, "not sent");
    }
}
