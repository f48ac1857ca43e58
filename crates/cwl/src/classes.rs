//! Which eviction level strips a tool's calls: the tool → class table.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How recoverable a tool's output is, which decides when it is stripped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolClass {
    /// Enumerating output (searches, listings): noisy and cheap to redo.
    Bulk,
    /// Everything else (reads, commands, edits): real signal, stripped later.
    Intermediate,
}

/// Tools whose output is bulk by default (names compared case-insensitively).
pub const DEFAULT_BULK_TOOLS: &[&str] = &[
    "grep",
    "glob",
    "find",
    "ls",
    "list",
    "list_dir",
    "list_directory",
    "list_files",
    "find_files",
    "search",
    "search_files",
    "codebase_search",
    "file_search",
    "rg",
    "tree",
];

/// The tool → class table. Unknown tools are [`ToolClass::Intermediate`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolClasses {
    classes: BTreeMap<String, ToolClass>,
}

impl Default for ToolClasses {
    fn default() -> Self {
        let classes = DEFAULT_BULK_TOOLS
            .iter()
            .map(|name| (name.to_string(), ToolClass::Bulk))
            .collect();
        ToolClasses { classes }
    }
}

impl ToolClasses {
    /// A table where every tool is intermediate.
    pub fn empty() -> Self {
        ToolClasses {
            classes: BTreeMap::new(),
        }
    }

    /// Sets the class of a tool, overriding any default.
    pub fn set(&mut self, tool: &str, class: ToolClass) -> &mut Self {
        self.classes.insert(tool.to_ascii_lowercase(), class);
        self
    }

    /// The class of a tool.
    pub fn class(&self, tool: &str) -> ToolClass {
        if let Some(class) = self.classes.get(tool) {
            return *class;
        }
        self.classes
            .get(&tool.to_ascii_lowercase())
            .copied()
            .unwrap_or(ToolClass::Intermediate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let mut classes = ToolClasses::default();
        assert_eq!(classes.class("grep"), ToolClass::Bulk);
        assert_eq!(classes.class("Glob"), ToolClass::Bulk);
        assert_eq!(classes.class("read"), ToolClass::Intermediate);
        assert_eq!(classes.class("mystery"), ToolClass::Intermediate);
        classes
            .set("Read", ToolClass::Bulk)
            .set("ls", ToolClass::Intermediate);
        assert_eq!(classes.class("read"), ToolClass::Bulk);
        assert_eq!(classes.class("ls"), ToolClass::Intermediate);
    }
}
