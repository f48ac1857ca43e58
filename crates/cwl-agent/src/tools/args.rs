//! Parsing a tool call's raw JSON arguments with errors that name the field.

use serde_json::{Map, Value};

use super::error::ToolError;

/// The arguments object of one call, checked against the tool's field list.
pub(crate) struct Args {
    tool: &'static str,
    map: Map<String, Value>,
}

impl Args {
    /// Parses `raw` as a JSON object whose keys are all in `fields`.
    /// Empty input counts as `{}`; `null` values count as absent.
    pub(crate) fn parse(tool: &'static str, raw: &str, fields: &[&str]) -> Result<Self, ToolError> {
        let value = if raw.trim().is_empty() {
            Value::Object(Map::new())
        } else {
            serde_json::from_str(raw)
                .map_err(|e| ToolError::args(tool, format!("arguments are not valid JSON ({e})")))?
        };
        let Value::Object(mut map) = value else {
            return Err(ToolError::args(
                tool,
                format!("arguments must be a JSON object, got {}", type_name(&value)),
            ));
        };
        map.retain(|_, v| !v.is_null());
        if let Some(unknown) = map.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(ToolError::args(
                tool,
                format!(
                    "unknown field `{unknown}` (accepted: {})",
                    fields.join(", ")
                ),
            ));
        }
        Ok(Args { tool, map })
    }

    /// A required string field.
    pub(crate) fn string(&self, field: &str) -> Result<&str, ToolError> {
        self.opt_string(field)?
            .ok_or_else(|| self.error(field, "is required (a string)"))
    }

    /// An optional string field.
    pub(crate) fn opt_string(&self, field: &str) -> Result<Option<&str>, ToolError> {
        match self.map.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.error(
                field,
                &format!("must be a string, got {}", type_name(other)),
            )),
        }
    }

    /// An optional non-negative integer field.
    pub(crate) fn opt_u64(&self, field: &str) -> Result<Option<u64>, ToolError> {
        match self.map.get(field) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) => Ok(Some(n)),
                None => Err(self.error(field, &format!("must be a non-negative integer, got {v}"))),
            },
        }
    }

    /// An optional number field.
    pub(crate) fn opt_f64(&self, field: &str) -> Result<Option<f64>, ToolError> {
        match self.map.get(field) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(n) => Ok(Some(n)),
                None => Err(self.error(field, &format!("must be a number, got {v}"))),
            },
        }
    }

    /// An error about `field`.
    pub(crate) fn error(&self, field: &str, problem: &str) -> ToolError {
        ToolError::args(self.tool, format!("field `{field}` {problem}"))
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_is_an_empty_object() {
        let a = Args::parse("ls", "  ", &["path"]).unwrap();
        assert_eq!(a.opt_string("path").unwrap(), None);
    }

    #[test]
    fn null_counts_as_absent() {
        let a = Args::parse("read", r#"{"path":"a","offset":null}"#, &["path", "offset"]).unwrap();
        assert_eq!(a.opt_u64("offset").unwrap(), None);
    }

    #[test]
    fn errors_name_the_field() {
        let a = Args::parse("read", r#"{"offset":"x"}"#, &["path", "offset"]).unwrap();
        let e = a.string("path").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid arguments for `read`: field `path` is required (a string)"
        );
        let e = a.opt_u64("offset").unwrap_err().to_string();
        assert!(
            e.contains("field `offset` must be a non-negative integer, got \"x\""),
            "{e}"
        );
    }

    #[test]
    fn rejects_non_objects_unknown_fields_and_bad_json() {
        let e = Args::parse("ls", "[1]", &["path"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("must be a JSON object, got an array"), "{e}");
        let e = Args::parse("ls", r#"{"dir":"x"}"#, &["path"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unknown field `dir` (accepted: path)"), "{e}");
        let e = Args::parse("ls", "{", &["path"]).err().unwrap().to_string();
        assert!(e.contains("not valid JSON"), "{e}");
    }
}
