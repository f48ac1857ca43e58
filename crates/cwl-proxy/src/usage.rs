//! The prompt size a provider reports, read from the response as it is
//! relayed (the bytes go on untouched), so the engine's count can be
//! calibrated to the provider's tokenizer.
//!
//! A streamed response is read line by line and only `data:` lines that
//! mention `usage` are parsed; a whole JSON response is read up to
//! [`MAX_HELD`] bytes. The prompt size is `prompt_tokens` (Chat
//! Completions) or `input_tokens` plus Anthropic's separately reported
//! `cache_creation_input_tokens` and `cache_read_input_tokens`.

use serde_json::Value;

/// Most bytes held at once: one SSE line, or a whole JSON response.
pub const MAX_HELD: usize = 1 << 20;

/// Reads a response's reported prompt size as its bytes pass.
#[derive(Debug, Default)]
pub struct Meter {
    held: Vec<u8>,
    overflow: bool,
    stream: Option<bool>,
    found: Option<u64>,
}

impl Meter {
    /// A meter for a response whose content type says whether it streams.
    pub fn new(event_stream: bool) -> Self {
        Meter {
            stream: Some(event_stream),
            ..Meter::default()
        }
    }

    /// Reads the next piece of the body.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if self.stream != Some(true) {
            self.hold(bytes);
            return;
        }
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            self.hold(&bytes[..end]);
            self.line();
            bytes = &bytes[end + 1..];
        }
        self.hold(bytes);
    }

    /// The prompt size reported, once the body has ended.
    pub fn finish(mut self) -> Option<u64> {
        if self.stream == Some(true) {
            self.line();
        } else if !self.overflow
            && let Ok(value) = serde_json::from_slice::<Value>(&self.held)
        {
            self.found = prompt_tokens(&value).or(self.found);
        }
        self.found
    }

    fn hold(&mut self, bytes: &[u8]) {
        if self.held.len() + bytes.len() > MAX_HELD {
            self.overflow = true;
            self.held.clear();
        } else if !self.overflow {
            self.held.extend_from_slice(bytes);
        }
    }

    fn line(&mut self) {
        let line = std::mem::take(&mut self.held);
        let overflow = std::mem::take(&mut self.overflow);
        if overflow {
            return;
        }
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        if !data.windows(7).any(|w| w == b"\"usage\"") {
            return;
        }
        if let Ok(value) = serde_json::from_slice::<Value>(data.trim_ascii())
            && let Some(tokens) = prompt_tokens(&value)
        {
            self.found = Some(tokens);
        }
    }
}

/// The prompt size of the first `usage` object found in `value`.
fn prompt_tokens(value: &Value) -> Option<u64> {
    match value {
        Value::Object(fields) => {
            if let Some(usage) = fields.get("usage").and_then(Value::as_object) {
                let count = |key: &str| usage.get(key).and_then(Value::as_u64);
                if let Some(prompt) = count("prompt_tokens") {
                    return Some(prompt);
                }
                if let Some(input) = count("input_tokens") {
                    return Some(
                        input
                            + count("cache_creation_input_tokens").unwrap_or(0)
                            + count("cache_read_input_tokens").unwrap_or(0),
                    );
                }
            }
            fields.values().find_map(prompt_tokens)
        }
        Value::Array(values) => values.iter().find_map(prompt_tokens),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(event_stream: bool, pieces: &[&str]) -> Option<u64> {
        let mut meter = Meter::new(event_stream);
        for piece in pieces {
            meter.feed(piece.as_bytes());
        }
        meter.finish()
    }

    #[test]
    fn anthropic_streams_report_in_message_start() {
        let stream = [
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usa",
            "ge\":{\"input_tokens\":12,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":3000,\"output_tokens\":1}}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40}}\n\n",
        ];
        assert_eq!(read(true, &stream), Some(3112));
    }

    #[test]
    fn openai_reports_in_the_last_chunk_or_the_body() {
        let chat = [
            "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n",
        ];
        assert_eq!(read(true, &chat), Some(900));
        let responses = [
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":777,\"input_tokens_details\":{\"cached_tokens\":700}}}}\n",
        ];
        assert_eq!(read(true, &responses), Some(777));
        assert_eq!(
            read(
                false,
                &[
                    "{\"id\":\"x\",\"usage\":{\"input",
                    "_tokens\":5,\"output_tokens\":1}}"
                ]
            ),
            Some(5)
        );
    }

    #[test]
    fn nothing_reported_is_none() {
        assert_eq!(read(true, &["data: {\"x\":1}\n\n"]), None);
        assert_eq!(read(false, &["not json"]), None);
        let huge = "x".repeat(MAX_HELD + 1);
        assert_eq!(
            read(
                false,
                &["{\"usage\":{\"input_tokens\":5},\"pad\":\"", &huge, "\"}"]
            ),
            None
        );
    }
}
