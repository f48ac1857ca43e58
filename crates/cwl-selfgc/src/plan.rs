//! The planner's answer (the paper's Listing 2), parsed.
//!
//! Planners are models: the answer may carry prose around the XML, ids in
//! full or short form, separated by lines, spaces or commas. What cannot be
//! read as a plan at all is an error (the plan is rejected and nothing
//! changes); a single id that cannot be read is kept as invalid so that
//! rehearsal reports it.

use std::fmt;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::objects::{ObjectId, ObjectKind};

/// A lifecycle action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Gone from the view; still in the transcript on disk.
    Prune,
    /// Boundary lines kept, the middle elided.
    Mask,
    /// Exact payload to a sidecar, a recovery pointer left behind.
    Fold,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Prune => "prune",
            Action::Mask => "mask",
            Action::Fold => "fold",
        })
    }
}

/// One action on one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// What to do.
    pub action: Action,
    /// The object.
    pub id: ObjectId,
    /// The `kind` the plan gave, when it gave one.
    pub kind: Option<ObjectKind>,
    /// The planner's reason (`resolved_turn`, `obsolete_trace`…).
    pub reason: String,
}

/// A parsed plan.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The one-sentence `above_conversation_summary`.
    pub summary: String,
    /// Every action, in the plan's order.
    pub targets: Vec<Target>,
    /// Entries that named no object: (action, the text given).
    pub invalid: Vec<(Action, String)>,
}

/// Why an answer is no plan.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    /// No `<gc_plan>` element.
    #[error("the answer has no <gc_plan> element")]
    NoPlan,
    /// The `<gc_plan>` element is not well-formed XML.
    #[error("the <gc_plan> element is malformed at byte {position}: {message}")]
    Malformed {
        /// Byte offset in the `<gc_plan>` element.
        position: u64,
        /// What the XML reader said.
        message: String,
    },
    /// An element other than fold, mask or prune.
    #[error("<gc_plan> holds <{0}>; only <fold>, <mask> and <prune> are actions")]
    UnknownAction(String),
    /// A `kind` attribute other than conversation or function.
    #[error("kind=\"{0}\" is neither \"conversation\" nor \"function\"")]
    UnknownKind(String),
}

/// Reads a planner's answer.
pub fn parse_plan(answer: &str) -> Result<Plan, PlanError> {
    let summary = element(answer, "above_conversation_summary")
        .map(|inner| inner.trim().to_string())
        .unwrap_or_default();
    let start = answer.find("<gc_plan").ok_or(PlanError::NoPlan)?;
    let end = answer[start..]
        .find("</gc_plan>")
        .map(|at| start + at + "</gc_plan>".len())
        .unwrap_or(answer.len());
    let mut plan = Plan {
        summary,
        ..Plan::default()
    };
    let mut reader = Reader::from_str(&answer[start..end]);
    let mut open: Option<(Action, Option<ObjectKind>, String)> = None;
    let malformed = |reader: &Reader<&[u8]>, message: String| PlanError::Malformed {
        position: reader.buffer_position(),
        message,
    };
    loop {
        let event = reader
            .read_event()
            .map_err(|error| malformed(&reader, error.to_string()))?;
        match event {
            Event::Start(tag) if tag.name().as_ref() == b"gc_plan" => {}
            Event::Empty(tag) if tag.name().as_ref() == b"gc_plan" => break,
            Event::Start(tag) => {
                if open.is_some() {
                    return Err(malformed(&reader, "actions cannot nest".into()));
                }
                open = Some(action_of(&tag)?);
            }
            Event::Empty(tag) => {
                action_of(&tag)?;
            }
            Event::Text(text) => {
                let text = String::from_utf8_lossy(text.as_ref()).into_owned();
                match &open {
                    Some((action, kind, reason)) => {
                        for word in text.split(|c: char| c.is_whitespace() || c == ',') {
                            if word.is_empty() {
                                continue;
                            }
                            match word.parse::<ObjectId>() {
                                Ok(id) => plan.targets.push(Target {
                                    action: *action,
                                    id,
                                    kind: *kind,
                                    reason: reason.clone(),
                                }),
                                Err(_) => plan.invalid.push((*action, word.to_string())),
                            }
                        }
                    }
                    None if text.trim().is_empty() => {}
                    None => {
                        return Err(malformed(
                            &reader,
                            format!("text outside any action: `{}`", text.trim()),
                        ));
                    }
                }
            }
            Event::End(tag) if tag.name().as_ref() == b"gc_plan" => break,
            Event::End(_) => open = None,
            Event::Eof => {
                if open.is_some() || !answer[start..end].ends_with("</gc_plan>") {
                    return Err(malformed(
                        &reader,
                        "the answer ends inside <gc_plan>".into(),
                    ));
                }
                break;
            }
            _ => {}
        }
    }
    Ok(plan)
}

fn action_of(tag: &BytesStart<'_>) -> Result<(Action, Option<ObjectKind>, String), PlanError> {
    let name = String::from_utf8_lossy(tag.name().as_ref()).into_owned();
    let action = match name.as_str() {
        "fold" => Action::Fold,
        "mask" => Action::Mask,
        "prune" => Action::Prune,
        _ => return Err(PlanError::UnknownAction(name)),
    };
    let mut kind = None;
    let mut reason = String::new();
    for attribute in tag.attributes().flatten() {
        let value = String::from_utf8_lossy(&attribute.value).into_owned();
        match attribute.key.as_ref() {
            b"kind" => {
                kind = Some(match value.as_str() {
                    "conversation" => ObjectKind::Conversation,
                    "function" => ObjectKind::Function,
                    _ => return Err(PlanError::UnknownKind(value)),
                })
            }
            b"reason" => reason = value,
            _ => {}
        }
    }
    Ok((action, kind, reason))
}

/// The text inside the first `<name>…</name>` of `text`.
fn element<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&close)?;
    Some(&text[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING_2: &str = r#"<above_conversation_summary>
One short sentence describing the session type, likely future dependencies,
and a light compression bias.
</above_conversation_summary>
<gc_plan>
<fold kind="conversation" reason="resolved_turn">
user:5
</fold>
<fold kind="function" reason="stable_artifact">
read:12
</fold>
<prune kind="function" reason="obsolete_trace">
exec:9
</prune>
</gc_plan>"#;

    #[test]
    fn listing_two_parses() {
        let plan = parse_plan(LISTING_2).unwrap();
        assert!(plan.summary.starts_with("One short sentence"));
        let got: Vec<(Action, String, String)> = plan
            .targets
            .iter()
            .map(|t| (t.action, t.id.to_string(), t.reason.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    Action::Fold,
                    "conversation:user:5".into(),
                    "resolved_turn".into()
                ),
                (
                    Action::Fold,
                    "function:read:12".into(),
                    "stable_artifact".into()
                ),
                (
                    Action::Prune,
                    "function:exec:9".into(),
                    "obsolete_trace".into()
                ),
            ]
        );
        assert_eq!(plan.targets[0].kind, Some(ObjectKind::Conversation));
        assert!(plan.invalid.is_empty());
    }

    #[test]
    fn prose_around_the_xml_several_ids_and_bad_ids() {
        let answer = "Here is my plan.\n<gc_plan>\n<mask kind=\"function\">bash:3, bash:4\nfunction:grep:7 nonsense</mask>\n<prune>user:2</prune></gc_plan>\nThanks!";
        let plan = parse_plan(answer).unwrap();
        assert_eq!(plan.summary, "");
        let ids: Vec<String> = plan.targets.iter().map(|t| t.id.short()).collect();
        assert_eq!(ids, ["bash:3", "bash:4", "grep:7", "user:2"]);
        assert_eq!(plan.targets[3].kind, None);
        assert_eq!(plan.invalid, [(Action::Mask, "nonsense".to_string())]);
        assert_eq!(parse_plan("<gc_plan></gc_plan>").unwrap().targets, []);
        assert_eq!(parse_plan("<gc_plan/>").unwrap().targets, []);
    }

    #[test]
    fn what_is_no_plan_is_an_error() {
        assert_eq!(parse_plan("I would fold user:3."), Err(PlanError::NoPlan));
        for (answer, what) in [
            ("<gc_plan><fold>user:1</prune></gc_plan>", "malformed"),
            ("<gc_plan><fold>user:1", "ends inside"),
            ("<gc_plan><delete>user:1</delete></gc_plan>", "only <fold>"),
            (
                "<gc_plan><fold kind=\"turn\">user:1</fold></gc_plan>",
                "kind=\"turn\"",
            ),
            (
                "<gc_plan><fold><mask>user:1</mask></fold></gc_plan>",
                "nest",
            ),
            ("<gc_plan>user:1</gc_plan>", "outside any action"),
        ] {
            let error = parse_plan(answer).unwrap_err().to_string();
            assert!(error.contains(what), "{answer}: {error}");
        }
    }
}
