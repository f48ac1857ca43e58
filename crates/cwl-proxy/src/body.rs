//! A JSON request body as an ordered list of top-level fields, each kept
//! as the client's raw bytes, so the proxy can replace one field (the
//! messages) and send every other one back byte for byte.

use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// A request body's top-level object, fields in the client's order.
#[derive(Debug)]
pub struct Body {
    fields: Vec<(String, Box<RawValue>)>,
    /// The field read apart by [`Body::split`], and its place.
    apart: Option<(usize, String)>,
}

/// What a body's history field held ([`Body::split`]).
#[derive(Debug)]
pub enum History {
    /// An array: each item's JSON as the client sent it.
    Items(Vec<Box<RawValue>>),
    /// A string (a Responses request's whole input).
    Text,
    /// Another JSON value.
    Other,
    /// No such field.
    Missing,
}

impl Body {
    /// Reads a body; an error when it is not one JSON object.
    pub fn parse(bytes: &[u8]) -> Result<Body, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let fields = deserializer.deserialize_map(Fields { apart: None })?;
        deserializer.end()?;
        Ok(Body {
            fields: fields.fields,
            apart: None,
        })
    }

    /// Reads a body with its field `key` apart, an array's items read
    /// once: a request repeats its whole history, so reading it as one
    /// raw field and then again as items would read it twice. The field
    /// is written back only in place of a replacement ([`Body::with_all`]),
    /// and [`Body::get`] does not see it.
    pub fn split(bytes: &[u8], key: &str) -> Result<(Body, History), serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let read = deserializer.deserialize_map(Fields { apart: Some(key) })?;
        deserializer.end()?;
        let (apart, history) = match read.history {
            Some((at, history)) => (Some((at, key.to_string())), history),
            None => (None, History::Missing),
        };
        Ok((
            Body {
                fields: read.fields,
                apart,
            },
            history,
        ))
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
    /// other field as the client sent it; a field read apart is left out
    /// unless replaced.
    pub fn with_all(&self, replaced: &[(&str, &str)]) -> Vec<u8> {
        let replacement = |name: &str| {
            replaced
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| *value)
        };
        let apart = self
            .apart
            .as_ref()
            .and_then(|(at, name)| replacement(name).map(|text| (*at, name.as_str(), text)));
        let mut written: Vec<(&str, &str)> = self
            .fields
            .iter()
            .map(|(name, raw)| (name.as_str(), replacement(name).unwrap_or(raw.get())))
            .collect();
        if let Some((at, name, text)) = apart {
            written.insert(at, (name, text));
        }
        let mut out = Vec::with_capacity(
            written
                .iter()
                .map(|(name, text)| name.len() + text.len() + 4)
                .sum::<usize>(),
        );
        out.push(b'{');
        for (at, (name, text)) in written.iter().enumerate() {
            if at > 0 {
                out.push(b',');
            }
            out.extend_from_slice(
                serde_json::to_string(name)
                    .expect("a string serializes")
                    .as_bytes(),
            );
            out.push(b':');
            out.extend_from_slice(text.as_bytes());
        }
        out.push(b'}');
        out
    }
}

/// The fields of a body, and the field named `apart` read on its own.
struct Fields<'k> {
    apart: Option<&'k str>,
}

/// What [`Fields`] read.
struct Read {
    fields: Vec<(String, Box<RawValue>)>,
    history: Option<(usize, History)>,
}

impl<'de> Visitor<'de> for Fields<'_> {
    type Value = Read;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut read = Read {
            fields: Vec::new(),
            history: None,
        };
        while let Some(key) = map.next_key::<String>()? {
            if self.apart == Some(key.as_str()) && read.history.is_none() {
                let history = map.next_value_seed(HistorySeed)?;
                read.history = Some((read.fields.len(), history));
            } else {
                read.fields.push((key, map.next_value::<Box<RawValue>>()?));
            }
        }
        Ok(read)
    }
}

/// Reads a history field: an array's items raw, anything else by kind.
struct HistorySeed;

impl<'de> DeserializeSeed<'de> for HistorySeed {
    type Value = History;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<History, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for HistorySeed {
    type Value = History;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<History, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<Box<RawValue>>()? {
            items.push(item);
        }
        Ok(History::Items(items))
    }

    fn visit_str<E>(self, _: &str) -> Result<History, E> {
        Ok(History::Text)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<History, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(History::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<History, E> {
        Ok(History::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<History, E> {
        Ok(History::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<History, E> {
        Ok(History::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<History, E> {
        Ok(History::Other)
    }

    fn visit_unit<E>(self) -> Result<History, E> {
        Ok(History::Other)
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
        assert!(Body::split(b"[1]", "messages").is_err());
        assert!(Body::split(b"{\"messages\":[1,]}", "messages").is_err());
        assert!(Body::split(b"{\"messages\":[{\"a\":}]}", "messages").is_err());
        assert!(Body::split(b"{\"messages\":[]} x", "messages").is_err());
    }

    #[test]
    fn split_reads_the_history_apart_and_writes_it_back_in_its_place() {
        let text = br#"{"model":"m","messages":[ {"b": 1, "a":2} ,"x" ],"stream":true}"#;
        let (body, history) = Body::split(text, "messages").unwrap();
        let History::Items(items) = history else {
            panic!("{history:?}")
        };
        let items: Vec<&str> = items.iter().map(|item| item.get()).collect();
        assert_eq!(items, [r#"{"b": 1, "a":2}"#, r#""x""#]);
        assert!(body.get("messages").is_none(), "held apart");
        assert_eq!(body.read::<bool>("stream"), Some(true));
        assert_eq!(
            String::from_utf8(body.with_all(&[("messages", "[3]"), ("stream", "false")])).unwrap(),
            r#"{"model":"m","messages":[3],"stream":false}"#
        );
        let first = Body::split(br#"{"messages":[],"a":1}"#, "messages")
            .unwrap()
            .0;
        assert_eq!(
            String::from_utf8(first.with("messages", "[2]")).unwrap(),
            r#"{"messages":[2],"a":1}"#
        );
        let last = Body::split(br#"{"a":1,"messages":[]}"#, "messages")
            .unwrap()
            .0;
        assert_eq!(
            String::from_utf8(last.with("messages", "[2]")).unwrap(),
            r#"{"a":1,"messages":[2]}"#
        );
    }

    #[test]
    fn split_tells_what_else_the_history_field_held() {
        let kind = |text: &[u8]| format!("{:?}", Body::split(text, "input").unwrap().1);
        assert_eq!(kind(br#"{"input":"hello"}"#), "Text");
        assert_eq!(kind(br#"{"input":{"a":[1]}}"#), "Other");
        assert_eq!(kind(br#"{"input":null}"#), "Other");
        assert_eq!(kind(br#"{"input":-1.5}"#), "Other");
        assert_eq!(kind(br#"{"model":"m"}"#), "Missing");
        assert_eq!(kind(br#"{"input":[]}"#), "Items([])");
    }
}
