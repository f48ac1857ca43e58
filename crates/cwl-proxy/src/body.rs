//! A JSON request body as an ordered list of top-level fields, each kept
//! as the client's raw bytes, so the proxy can replace one field (the
//! messages) and send every other one back byte for byte.

use std::fmt;

use serde::Deserializer;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;

/// A request body's top-level object, fields in the client's order.
#[derive(Debug)]
pub struct Body {
    fields: Vec<(String, Box<RawValue>)>,
}

impl Body {
    /// Reads a body; `None` when it is not a JSON object.
    pub fn parse(bytes: &[u8]) -> Result<Body, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let fields = deserializer.deserialize_map(Fields)?;
        deserializer.end()?;
        Ok(Body { fields })
    }

    /// The raw value of a field.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.fields
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_ref())
    }

    /// A field read as a typed value; `None` when absent or of another type.
    pub fn read<'a, T: serde::Deserialize<'a>>(&'a self, key: &str) -> Option<T> {
        serde_json::from_str(self.get(key)?.get()).ok()
    }

    /// The body with `key`'s value replaced by `value` (raw JSON text),
    /// every other field as the client sent it.
    pub fn with(&self, key: &str, value: &str) -> Vec<u8> {
        self.with_all(&[(key, value)])
    }

    /// The body with the value of each field named in `replaced` (if the
    /// body has it) replaced by the raw JSON text given with it, every
    /// other field as the client sent it.
    pub fn with_all(&self, replaced: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.fields
                .iter()
                .map(|(k, v)| k.len() + v.get().len() + 4)
                .sum::<usize>()
                + replaced.iter().map(|(_, v)| v.len()).sum::<usize>(),
        );
        out.push(b'{');
        for (at, (name, raw)) in self.fields.iter().enumerate() {
            if at > 0 {
                out.push(b',');
            }
            out.extend_from_slice(
                serde_json::to_string(name)
                    .expect("a string serializes")
                    .as_bytes(),
            );
            out.push(b':');
            let text = replaced
                .iter()
                .find(|(key, _)| key == name)
                .map_or(raw.get(), |(_, value)| *value);
            out.extend_from_slice(text.as_bytes());
        }
        out.push(b'}');
        out
    }
}

struct Fields;

impl<'de> Visitor<'de> for Fields {
    type Value = Vec<(String, Box<RawValue>)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
            fields.push((key, value));
        }
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_one_field_and_keeps_the_others_byte_for_byte() {
        let text = br#"{"model":"m","messages":[1, 2],"z":{"b": 1,"a":[ ]},"stream":true}"#;
        let body = Body::parse(text).unwrap();
        assert_eq!(body.read::<String>("model").as_deref(), Some("m"));
        assert_eq!(body.read::<bool>("stream"), Some(true));
        assert_eq!(body.read::<bool>("missing"), None);
        let out = body.with("messages", "[3]");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"model":"m","messages":[3],"z":{"b": 1,"a":[ ]},"stream":true}"#
        );
    }

    #[test]
    fn replaces_several_fields_and_ignores_absent_ones() {
        let body = Body::parse(br#"{"tools":[1],"messages":[2],"x":0}"#).unwrap();
        let out = body.with_all(&[("messages", "[3]"), ("tools", "[1,4]"), ("absent", "5")]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"tools":[1,4],"messages":[3],"x":0}"#
        );
    }

    #[test]
    fn rejects_what_is_not_one_object() {
        assert!(Body::parse(b"[1]").is_err());
        assert!(Body::parse(b"{\"a\":1} x").is_err());
        assert!(Body::parse(b"{\"a\":").is_err());
    }
}
