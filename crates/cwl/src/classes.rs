//! Which eviction level strips a tool's calls: the tool → class table,
//! and which tools restate a whole plan with every call.

use std::collections::{BTreeMap, BTreeSet};

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

/// Plan tools by default: each call carries the whole plan or task list
/// (Claude Code's `TodoWrite`, Codex's `update_plan`), so a later call of
/// the same tool leaves nothing of an earlier one worth keeping.
pub const DEFAULT_PLAN_TOOLS: &[&str] = &["todowrite", "update_plan"];

/// The tool → class table, and the plan tools. Unknown tools are
/// [`ToolClass::Intermediate`] and not plan tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolClasses {
    classes: BTreeMap<String, ToolClass>,
    /// Lowercase names; the defaults are not written, and a table saved
    /// before plan tools existed reads as the defaults.
    #[serde(default = "default_plans", skip_serializing_if = "is_default_plans")]
    plans: BTreeSet<String>,
}

fn default_plans() -> BTreeSet<String> {
    DEFAULT_PLAN_TOOLS
        .iter()
        .map(|name| name.to_string())
        .collect()
}

fn is_default_plans(plans: &BTreeSet<String>) -> bool {
    plans.len() == DEFAULT_PLAN_TOOLS.len()
        && DEFAULT_PLAN_TOOLS.iter().all(|name| plans.contains(*name))
}

impl Default for ToolClasses {
    fn default() -> Self {
        let classes = DEFAULT_BULK_TOOLS
            .iter()
            .map(|name| (name.to_string(), ToolClass::Bulk))
            .collect();
        ToolClasses {
            classes,
            plans: default_plans(),
        }
    }
}

impl ToolClasses {
    /// A table where every tool is intermediate and none is a plan tool.
    pub fn empty() -> Self {
        ToolClasses {
            classes: BTreeMap::new(),
            plans: BTreeSet::new(),
        }
    }

    /// Marks a tool as a plan tool (see [`DEFAULT_PLAN_TOOLS`]), or not.
    pub fn set_plan(&mut self, tool: &str, plan: bool) -> &mut Self {
        let name = tool.to_ascii_lowercase();
        if plan {
            self.plans.insert(name);
        } else {
            self.plans.remove(&name);
        }
        self
    }

    /// Whether each call of this tool restates the whole plan.
    pub fn is_plan(&self, tool: &str) -> bool {
        self.plans
            .iter()
            .any(|plan| plan.eq_ignore_ascii_case(tool))
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

    #[test]
    fn plan_tools_by_default_and_by_choice() {
        let mut classes = ToolClasses::default();
        assert!(classes.is_plan("TodoWrite"));
        assert!(classes.is_plan("update_plan"));
        assert!(!classes.is_plan("read"));
        assert!(!ToolClasses::empty().is_plan("TodoWrite"));
        classes.set_plan("Plan", true).set_plan("todowrite", false);
        assert!(classes.is_plan("plan"));
        assert!(!classes.is_plan("TodoWrite"));
    }

    #[test]
    fn a_table_saved_before_plan_tools_reads_with_the_defaults() {
        let old = r#"{"classes":{"grep":"bulk"}}"#;
        let classes: ToolClasses = serde_json::from_str(old).unwrap();
        assert!(classes.is_plan("TodoWrite"));
        assert_eq!(classes.class("grep"), ToolClass::Bulk);
        let saved = serde_json::to_string(&ToolClasses::default()).unwrap();
        assert!(!saved.contains("plans"), "{saved}");
        let none = serde_json::to_string(&ToolClasses::empty()).unwrap();
        let back: ToolClasses = serde_json::from_str(&none).unwrap();
        assert_eq!(back, ToolClasses::empty());
    }
}
