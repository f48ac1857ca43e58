//! Folded payloads: where each goes (a sidecar file named for its object)
//! and how a read-back is checked to be byte-exact.

use serde::{Deserialize, Serialize};

use crate::objects::ObjectId;

/// What the strategy remembers of one folded payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldRecord {
    /// The sidecar's file name.
    pub file: String,
    /// The payload's length in bytes.
    pub bytes: usize,
    /// Its FNV-1a 64 hash, to tell a damaged sidecar from the payload.
    pub hash: u64,
}

impl FoldRecord {
    /// The record of `payload` folded from `id`.
    pub fn of(id: &ObjectId, payload: &str) -> Self {
        FoldRecord {
            file: sidecar_name(id),
            bytes: payload.len(),
            hash: fnv1a(payload.as_bytes()),
        }
    }

    /// Whether `text` is the payload this record describes.
    pub fn matches(&self, text: &str) -> bool {
        text.len() == self.bytes && fnv1a(text.as_bytes()) == self.hash
    }
}

/// The sidecar file name of `id`: `function-read-3.txt`,
/// `conversation-user-2.json` (a folded conversation is a JSON array of
/// its messages). Characters other than ASCII letters, digits, `-` and
/// `_` become `_`; names stay unique since each number is used once.
pub fn sidecar_name(id: &ObjectId) -> String {
    let stem: String = id
        .to_string()
        .chars()
        .map(|c| match c {
            ':' => '-',
            c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => c,
            _ => '_',
        })
        .collect();
    let extension = match id {
        ObjectId::User(_) => "json",
        ObjectId::Function { .. } => "txt",
    };
    format!("{stem}.{extension}")
}

/// FNV-1a, 64 bits: stable across builds and platforms.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_files_and_records_check_bytes() {
        let read: ObjectId = "function:read:3".parse().unwrap();
        assert_eq!(sidecar_name(&read), "function-read-3.txt");
        assert_eq!(sidecar_name(&ObjectId::User(2)), "conversation-user-2.json");
        let odd: ObjectId = "function:mcp/fs.read:7".parse().unwrap();
        assert_eq!(sidecar_name(&odd), "function-mcp_fs_read-7.txt");
        let record = FoldRecord::of(&read, "exact\r\npayload ");
        assert!(record.matches("exact\r\npayload "));
        assert!(!record.matches("exact\npayload "));
        assert!(!record.matches("exact\r\npayload"));
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }
}
