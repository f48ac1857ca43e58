//! `recall` under Self-GC: which action took an object out of the view,
//! and its exact payload from the transcript.

use cwl::Message;

use crate::objects::ObjectId;
use crate::plan::Action;

use super::SelfGc;

impl SelfGc {
    /// The object a recall names, and the action that took it out of the
    /// view: its own, or its conversation's.
    pub(super) fn collected(&self, id: &ObjectId) -> Result<(Action, &ObjectId), String> {
        let object = self.table.get(id).ok_or_else(|| {
            format!("no object `{id}` in this session; use an id shown in a fold reminder or a `[folded as …]` pointer")
        })?;
        let own = self.committed.iter().rev().find(|t| &t.id == id);
        let parent = match id {
            ObjectId::Function { .. } => object.parent.map(ObjectId::User),
            ObjectId::User(_) => None,
        };
        let covering = parent
            .as_ref()
            .and_then(|p| self.committed.iter().rev().find(|t| &t.id == p));
        match (own, covering) {
            (Some(target), _) => Ok((target.action, &target.id)),
            (None, Some(target)) => Ok((target.action, &target.id)),
            (None, None) => Err(format!(
                "`{id}` is still whole in the context; nothing to recall"
            )),
        }
    }

    /// The exact payload of `id` from the transcript: a tool result's
    /// content, or a conversation's folded span as a JSON array.
    pub(super) fn payload(&self, id: &ObjectId) -> Option<String> {
        let object = self.table.get(id)?;
        match id {
            ObjectId::Function { .. } => match &self.transcript[object.messages.start] {
                Message::ToolResult(result) => Some(result.content.clone()),
                _ => None,
            },
            ObjectId::User(_) => {
                let span: Vec<&Message> = self.transcript
                    [object.messages.start + 1..object.messages.end]
                    .iter()
                    .collect();
                serde_json::to_string(&span).ok()
            }
        }
    }
}

/// The id a recall names: `{"id": "function:read:3"}` or, as CWL's
/// recall is called, `{"episode": "read:3"}`.
pub(super) fn recall_id(arguments: &str) -> Result<ObjectId, String> {
    let usage = "recall needs {\"id\": ID} with an object id shown in the context (function:read:3, conversation:user:2)";
    let value: serde_json::Value =
        serde_json::from_str(arguments).map_err(|_| usage.to_string())?;
    let text = value
        .get("id")
        .or_else(|| value.get("episode"))
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| usage.to_string())?;
    text.parse::<ObjectId>().map_err(|error| error.to_string())
}
