//! The objects a plan can target and the allocator that names them.
//!
//! A user message opens `conversation:user:k`: the request and the
//! execution span that follows it, up to the next user message. Each tool
//! result is `function:<tool>:n`: the call and its result, which can be
//! edited without touching the rest of the turn. Numbers come from one
//! session-local monotonic counter per kind and are never reused, so an id
//! names the same object for the whole session. Assistant messages are no
//! targets: they are kept or normalised as their neighbours change.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use cwl::Message;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// Which of the two kinds of object an id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectKind {
    /// A user request and its execution span.
    Conversation,
    /// One tool call and its result.
    Function,
}

impl ObjectKind {
    /// The name used in ids and in a plan's `kind` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Conversation => "conversation",
            ObjectKind::Function => "function",
        }
    }
}

/// The stable name of one object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectId {
    /// `conversation:user:k` (k from 1).
    User(u32),
    /// `function:<tool>:n` (n from 1, one counter over all tools).
    Function {
        /// The tool's name.
        tool: String,
        /// The allocator's number.
        n: u32,
    },
}

impl ObjectId {
    /// The kind of object it names.
    pub fn kind(&self) -> ObjectKind {
        match self {
            ObjectId::User(_) => ObjectKind::Conversation,
            ObjectId::Function { .. } => ObjectKind::Function,
        }
    }

    /// The short form a plan uses: `user:5`, `read:12`.
    pub fn short(&self) -> String {
        match self {
            ObjectId::User(k) => format!("user:{k}"),
            ObjectId::Function { tool, n } => format!("{tool}:{n}"),
        }
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectId::User(k) => write!(f, "conversation:user:{k}"),
            ObjectId::Function { tool, n } => write!(f, "function:{tool}:{n}"),
        }
    }
}

impl Serialize for ObjectId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ObjectId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A string that is no object id.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("`{0}` is no object id (expected conversation:user:K, function:TOOL:N, user:K or TOOL:N)")]
pub struct ObjectIdError(pub String);

impl FromStr for ObjectId {
    type Err = ObjectIdError;

    /// Reads the full form (`conversation:user:5`, `function:read:12`) or
    /// the short one (`user:5`, `read:12`). The number is what follows the
    /// last colon, so tool names may contain colons.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || ObjectIdError(text.to_string());
        let text = text.trim();
        let (head, number) = text.rsplit_once(':').ok_or_else(bad)?;
        let number: u32 = number.parse().map_err(|_| bad())?;
        if number == 0 {
            return Err(bad());
        }
        let head = head
            .strip_prefix("conversation:")
            .filter(|rest| *rest == "user")
            .unwrap_or(head);
        if head == "user" {
            return Ok(ObjectId::User(number));
        }
        let tool = head.strip_prefix("function:").unwrap_or(head);
        if tool.is_empty() || tool.chars().any(char::is_whitespace) {
            return Err(bad());
        }
        Ok(ObjectId::Function {
            tool: tool.to_string(),
            n: number,
        })
    }
}

/// One object and where it lies in the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Its id.
    pub id: ObjectId,
    /// The messages it spans (indices into the transcript): for a
    /// conversation the user message and its execution span, for a
    /// function its result message alone (the call is in `call`).
    pub messages: Range<usize>,
    /// For a function: the assistant message holding the call, and the
    /// call's id.
    pub call: Option<(usize, String)>,
    /// For a function: the conversation it belongs to, if any.
    pub parent: Option<u32>,
}

/// Every object of a transcript, in order, with the allocator's state.
#[derive(Debug, Clone, Default)]
pub struct ObjectTable {
    objects: Vec<Object>,
    by_id: HashMap<ObjectId, usize>,
    next_user: u32,
    next_function: u32,
    calls: HashMap<String, usize>,
    current: Option<usize>,
    pushed: usize,
    /// Object index by the transcript index of the message opening it.
    starts: HashMap<usize, usize>,
}

impl ObjectTable {
    /// An empty table.
    pub fn new() -> Self {
        ObjectTable::default()
    }

    /// Indexes a whole transcript.
    pub fn of(messages: &[Message]) -> Self {
        let mut table = ObjectTable::new();
        messages.iter().for_each(|message| {
            table.push(message);
        });
        table
    }

    /// Indexes the next message of the transcript; returns the id it was
    /// given, if it opens an object.
    pub fn push(&mut self, message: &Message) -> Option<ObjectId> {
        let index = self.pushed;
        self.pushed += 1;
        if let Some(current) = self
            .current
            .filter(|_| !matches!(message, Message::User { .. }))
        {
            self.objects[current].messages.end = index + 1;
        }
        match message {
            Message::User { .. } => {
                self.next_user += 1;
                let id = ObjectId::User(self.next_user);
                self.current = Some(self.objects.len());
                self.insert(Object {
                    id: id.clone(),
                    messages: index..index + 1,
                    call: None,
                    parent: None,
                });
                Some(id)
            }
            Message::Assistant { .. } => {
                for call in message.tool_calls() {
                    self.calls.insert(call.id.clone(), index);
                }
                None
            }
            Message::ToolResult(result) => {
                self.next_function += 1;
                let id = ObjectId::Function {
                    tool: result.tool_name.clone(),
                    n: self.next_function,
                };
                let call = self
                    .calls
                    .remove(&result.call_id)
                    .map(|at| (at, result.call_id.clone()));
                let parent = self.current.map(|_| self.next_user);
                self.insert(Object {
                    id: id.clone(),
                    messages: index..index + 1,
                    call,
                    parent,
                });
                Some(id)
            }
            Message::System { .. } => None,
        }
    }

    fn insert(&mut self, object: Object) {
        self.starts
            .insert(object.messages.start, self.objects.len());
        self.by_id.insert(object.id.clone(), self.objects.len());
        self.objects.push(object);
    }

    /// Every object, in transcript order.
    pub fn objects(&self) -> &[Object] {
        &self.objects
    }

    /// The object of an id, if the session has one.
    pub fn get(&self, id: &ObjectId) -> Option<&Object> {
        self.by_id.get(id).map(|&at| &self.objects[at])
    }

    /// The id given to the message at `index`, if it opened an object.
    pub fn id_at(&self, index: usize) -> Option<&ObjectId> {
        self.starts.get(&index).map(|&at| &self.objects[at].id)
    }

    /// The latest user request: its conversation is the cut turn, never
    /// edited.
    pub fn latest_user(&self) -> Option<u32> {
        (self.next_user > 0).then_some(self.next_user)
    }

    /// Messages indexed so far.
    pub fn len(&self) -> usize {
        self.pushed
    }

    /// Whether nothing was indexed.
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwl::{Block, ToolCall};

    fn call(id: &str, tool: &str) -> Message {
        Message::Assistant {
            content: vec![Block::ToolCall(ToolCall::new(id, tool, "{}"))],
        }
    }

    #[test]
    fn ids_read_in_both_forms_and_print_in_full() {
        for (text, id) in [
            ("conversation:user:5", ObjectId::User(5)),
            ("user:5", ObjectId::User(5)),
            (
                "function:read:12",
                ObjectId::Function {
                    tool: "read".into(),
                    n: 12,
                },
            ),
            (
                " exec:9 ",
                ObjectId::Function {
                    tool: "exec".into(),
                    n: 9,
                },
            ),
            (
                "function:mcp:fs:3",
                ObjectId::Function {
                    tool: "mcp:fs".into(),
                    n: 3,
                },
            ),
        ] {
            assert_eq!(text.parse::<ObjectId>(), Ok(id.clone()), "{text}");
            assert_eq!(id.to_string().parse::<ObjectId>(), Ok(id.clone()));
        }
        for bad in [
            "",
            "user",
            "user:x",
            "read:0",
            ":4",
            "two words:3",
            "user:-1",
        ] {
            assert!(bad.parse::<ObjectId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_allocator_numbers_objects_once_and_tracks_spans() {
        let messages = vec![
            Message::system("sys"),
            Message::user("first"),
            call("c1", "read"),
            Message::tool_result("c1", "read", "a", false),
            Message::assistant_text("done"),
            Message::user("second"),
            call("c2", "bash"),
            Message::tool_result("c2", "bash", "b", false),
        ];
        let table = ObjectTable::of(&messages);
        let ids: Vec<String> = table.objects().iter().map(|o| o.id.to_string()).collect();
        assert_eq!(
            ids,
            [
                "conversation:user:1",
                "function:read:1",
                "conversation:user:2",
                "function:bash:2"
            ]
        );
        let first = table.get(&ObjectId::User(1)).unwrap();
        assert_eq!(first.messages, 1..5, "the request and its execution span");
        let read = table.get(&"read:1".parse().unwrap()).unwrap();
        assert_eq!(read.messages, 3..4);
        assert_eq!(read.call, Some((2, "c1".to_string())));
        assert_eq!(read.parent, Some(1));
        assert_eq!(table.get(&ObjectId::User(2)).unwrap().messages, 5..8);
        assert_eq!(table.latest_user(), Some(2));
        assert_eq!(table.id_at(6), None);
    }
}
