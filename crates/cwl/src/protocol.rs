//! The delimiter protocol: the one tool the agent uses to mark episodes.
//!
//! This module parses and describes the calls; [`crate::graph`] checks them
//! against the session's episodes.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::message::ToolSpec;

/// The tool's name.
pub const DELIMITER: &str = "delimiter";

/// What the agent says an episode is for: the paper's two kinds, the
/// whole of the protocol (exhaustive on purpose).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeKind {
    /// Exploration: gathers information (searches, reads, listings).
    Expl,
    /// Action: changes the environment (edits, writes, commands).
    Act,
}

impl fmt::Display for EpisodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EpisodeKind::Expl => "expl",
            EpisodeKind::Act => "act",
        })
    }
}

/// One delimiter call, parsed: open or close an episode.
///
/// Harnesses that do not annotate (or a lab inferring episodes) can apply
/// these out of band with [`crate::Context::annotate`]. The paper's two
/// actions; exhaustive on purpose, as the protocol is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Annotation {
    /// Open an episode.
    Start {
        /// Unique name in the session.
        name: String,
        /// Exploration or action.
        kind: EpisodeKind,
        /// For an act: the earlier, closed expl episodes it relies on.
        dependencies: Vec<String>,
    },
    /// Close the active episode.
    End {
        /// The name of the episode being closed, when the caller states it.
        name: Option<String>,
        /// For an expl: what was learned (kept after full eviction).
        description: Option<String>,
    },
}

/// Why a delimiter call was rejected. Each message says what to fix; a
/// rejected call leaves the episode graph unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DelimiterError {
    /// The arguments are not a JSON object.
    #[error(
        "delimiter arguments must be a JSON object like {{\"action\":\"start\",\"name\":\"...\",\"type\":\"expl\"}}: {0}"
    )]
    NotAnObject(String),
    /// A field has the wrong JSON type.
    #[error("delimiter field `{field}` must be {expected}")]
    FieldType {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// `action` is missing.
    #[error("delimiter needs `action`: \"start\" or \"end\"")]
    MissingAction,
    /// `action` is not start or end.
    #[error("delimiter `action` must be \"start\" or \"end\", not {0:?}")]
    UnknownAction(String),
    /// A start without a name.
    #[error("delimiter start needs a non-empty `name` for the episode")]
    MissingName,
    /// A start without a type.
    #[error(
        "delimiter start needs `type`: \"expl\" (gather information) or \"act\" (change things)"
    )]
    MissingType,
    /// A type that is neither expl nor act.
    #[error("delimiter `type` must be \"expl\" or \"act\", not {0:?}")]
    UnknownType(String),
    /// The name is taken by an episode still in the context.
    #[error(
        "an episode named `{name}` is still in the context; choose another name, e.g. `{suggestion}`"
    )]
    DuplicateName {
        /// The name asked for.
        name: String,
        /// A free name derived from it.
        suggestion: String,
    },
    /// Another episode is still open.
    #[error(
        "episode `{0}` is still active; end it with {{\"action\":\"end\"}} before starting another"
    )]
    AlreadyActive(String),
    /// An act with no dependencies.
    #[error(
        "starting act episode `{0}` needs a non-empty `dependencies` list naming the closed expl episodes it relies on"
    )]
    MissingDependencies(String),
    /// An expl that declares dependencies.
    #[error(
        "expl episode `{0}` cannot declare dependencies; only act episodes do — remove `dependencies`"
    )]
    ExplDependencies(String),
    /// An act that names itself.
    #[error("act episode `{0}` cannot depend on itself")]
    SelfDependency(String),
    /// A dependency that names no episode.
    #[error("dependency `{0}` names no earlier episode; use the name of a closed expl episode")]
    UnknownDependency(String),
    /// A dependency on an act episode.
    #[error("dependency `{0}` is an act episode; dependencies must name expl episodes")]
    DependencyNotExpl(String),
    /// An end with nothing open.
    #[error("no episode is active; start one with {{\"action\":\"start\",...}} first")]
    NothingActive,
    /// An end that names another episode.
    #[error("`{given}` is not the active episode; the active episode is `{active}`")]
    EndNameMismatch {
        /// The name the call gave.
        given: String,
        /// The episode that is actually active.
        active: String,
    },
    /// Ending an expl without a description.
    #[error(
        "ending expl episode `{0}` needs a non-empty `description` of what was learned (it is kept when the episode is evicted)"
    )]
    MissingDescription(String),
    /// Ending an act with a description.
    #[error("ending act episode `{0}` takes no `description`; call {{\"action\":\"end\"}}")]
    ActDescription(String),
}

impl Annotation {
    /// Parses the raw JSON arguments of a delimiter call.
    pub fn parse(arguments: &str) -> Result<Annotation, DelimiterError> {
        let value: Value = serde_json::from_str(arguments)
            .map_err(|error| DelimiterError::NotAnObject(error.to_string()))?;
        let Value::Object(fields) = value else {
            return Err(DelimiterError::NotAnObject(format!(
                "got {}",
                json_kind(&value)
            )));
        };
        match string_field(&fields, "action")? {
            None => Err(DelimiterError::MissingAction),
            Some("start") => parse_start(&fields),
            Some("end") => Ok(Annotation::End {
                name: non_empty(string_field(&fields, "name")?),
                description: non_empty(string_field(&fields, "description")?),
            }),
            Some(other) => Err(DelimiterError::UnknownAction(other.to_string())),
        }
    }

    /// The JSON arguments a model would send for this annotation.
    pub fn to_arguments(&self) -> String {
        let value = match self {
            Annotation::Start {
                name,
                kind,
                dependencies,
            } => {
                let mut value = json!({"action": "start", "name": name, "type": kind});
                if !dependencies.is_empty() {
                    value["dependencies"] = json!(dependencies);
                }
                value
            }
            Annotation::End { name, description } => {
                let mut value = json!({"action": "end"});
                if let Some(name) = name {
                    value["name"] = json!(name);
                }
                if let Some(description) = description {
                    value["description"] = json!(description);
                }
                value
            }
        };
        value.to_string()
    }
}

fn parse_start(fields: &Map<String, Value>) -> Result<Annotation, DelimiterError> {
    let name = non_empty(string_field(fields, "name")?).ok_or(DelimiterError::MissingName)?;
    let kind = match string_field(fields, "type")? {
        None => return Err(DelimiterError::MissingType),
        Some("expl") => EpisodeKind::Expl,
        Some("act") => EpisodeKind::Act,
        Some(other) => return Err(DelimiterError::UnknownType(other.to_string())),
    };
    let mut dependencies: Vec<String> = Vec::new();
    match fields.get("dependencies") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                let dependency = item
                    .as_str()
                    .map(str::trim)
                    .ok_or(DelimiterError::FieldType {
                        field: "dependencies",
                        expected: "an array of episode names (strings)",
                    })?;
                if !dependency.is_empty() && !dependencies.iter().any(|d| d == dependency) {
                    dependencies.push(dependency.to_string());
                }
            }
        }
        Some(_) => {
            return Err(DelimiterError::FieldType {
                field: "dependencies",
                expected: "an array of episode names (strings)",
            });
        }
    }
    Ok(Annotation::Start {
        name,
        kind,
        dependencies,
    })
}

fn string_field<'a>(
    fields: &'a Map<String, Value>,
    field: &'static str,
) -> Result<Option<&'a str>, DelimiterError> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(DelimiterError::FieldType {
            field,
            expected: "a string",
        }),
    }
}

fn non_empty(text: Option<&str>) -> Option<String> {
    text.map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What the tool tells the model it is for.
pub const DELIMITER_DESCRIPTION: &str = "\
Mark your work as episodes so old context can be evicted safely when the \
prompt grows. Start an episode before each piece of work and end it when done; \
one episode is active at a time.
- {\"action\":\"start\",\"name\":\"find-auth\",\"type\":\"expl\"}: exploration \
(searching, reading, listing). End it with {\"action\":\"end\",\"description\":\"...\"}: \
the description must say what you learned (paths, names, facts); it is all \
that remains once the episode is evicted.
- {\"action\":\"start\",\"name\":\"fix-login\",\"type\":\"act\",\"dependencies\":[\"find-auth\"]}: \
action (edits, writes, commands that change things), listing the closed expl \
episodes it relies on. End it with {\"action\":\"end\"} (no description).
Names are unique among episodes still in context; a dependency names the latest \
closed expl of that name. Act episodes are evicted first; an expl episode stays while \
an act that depends on it remains.";

/// The tool definition to offer the model.
pub fn delimiter_spec() -> ToolSpec {
    ToolSpec {
        name: DELIMITER.to_string(),
        description: DELIMITER_DESCRIPTION.to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["start", "end"],
                    "description": "start opens an episode, end closes the active one"},
                "name": {"type": "string",
                    "description": "start: unique episode name, e.g. locate-auth"},
                "type": {"type": "string", "enum": ["expl", "act"],
                    "description": "start: expl to gather information, act to change things"},
                "dependencies": {"type": "array", "items": {"type": "string"},
                    "description": "act start: names of closed expl episodes this action relies on"},
                "description": {"type": "string",
                    "description": "expl end: what was learned; kept after eviction"}
            },
            "required": ["action"],
            "additionalProperties": false
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_four_canonical_calls() {
        assert_eq!(
            Annotation::parse(r#"{"action":"start","name":"a","type":"expl"}"#),
            Ok(Annotation::Start {
                name: "a".into(),
                kind: EpisodeKind::Expl,
                dependencies: vec![]
            })
        );
        assert_eq!(
            Annotation::parse(
                r#"{"action":"start","name":"b","type":"act","dependencies":["a","a"]}"#
            ),
            Ok(Annotation::Start {
                name: "b".into(),
                kind: EpisodeKind::Act,
                dependencies: vec!["a".into()]
            })
        );
        assert_eq!(
            Annotation::parse(r#"{"action":"end","description":"learned"}"#),
            Ok(Annotation::End {
                name: None,
                description: Some("learned".into())
            })
        );
        assert_eq!(
            Annotation::parse(r#"{"action":"end"}"#),
            Ok(Annotation::End {
                name: None,
                description: None
            })
        );
    }

    #[test]
    fn rejects_malformed_calls_with_what_to_fix() {
        let cases = [
            ("not json", "must be a JSON object"),
            ("[1]", "got an array"),
            ("{}", "needs `action`"),
            (r#"{"action":"pause"}"#, "\"pause\""),
            (r#"{"action":3}"#, "`action` must be a string"),
            (r#"{"action":"start","type":"expl"}"#, "non-empty `name`"),
            (
                r#"{"action":"start","name":"  ","type":"expl"}"#,
                "non-empty `name`",
            ),
            (r#"{"action":"start","name":"a"}"#, "needs `type`"),
            (r#"{"action":"start","name":"a","type":"plan"}"#, "\"plan\""),
            (
                r#"{"action":"start","name":"a","type":"act","dependencies":"x"}"#,
                "array of episode names",
            ),
            (
                r#"{"action":"start","name":"a","type":"act","dependencies":[1]}"#,
                "array of episode names",
            ),
        ];
        for (arguments, expected) in cases {
            let error = Annotation::parse(arguments).expect_err(arguments);
            assert!(
                error.to_string().contains(expected),
                "{arguments}: {error} lacks {expected}"
            );
        }
    }

    #[test]
    fn arguments_round_trip() {
        let annotations = [
            Annotation::Start {
                name: "x".into(),
                kind: EpisodeKind::Act,
                dependencies: vec!["e".into()],
            },
            Annotation::End {
                name: Some("x".into()),
                description: Some("d".into()),
            },
        ];
        for annotation in annotations {
            assert_eq!(
                Annotation::parse(&annotation.to_arguments()),
                Ok(annotation)
            );
        }
    }

    #[test]
    fn spec_schema_names_every_field() {
        let spec = delimiter_spec();
        assert_eq!(spec.name, DELIMITER);
        let properties = spec.parameters["properties"]
            .as_object()
            .expect("properties");
        for field in ["action", "name", "type", "dependencies", "description"] {
            assert!(properties.contains_key(field), "{field}");
        }
    }
}
