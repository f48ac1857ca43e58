//! Which MCP tools a resumed session offers.
//!
//! A session's header lists the tools offered when it was created. MCP
//! servers may have changed since: on resume the MCP tools offered are
//! always the ones the servers list now. MCP tools the header lists but
//! no server offers now are dropped (a call to one is answered "unknown
//! tool"), new ones are added after the others, and ones whose definition
//! changed are offered as they are now. Built-in and engine tools stay as
//! the header lists them. The caller records a note saying what changed.

use cwl::ToolSpec;

use super::is_mcp_name;

/// The tools a resumed session offers: `recorded` (its header's) with the
/// MCP tools replaced by those of `now` (the toolbox's), and a note saying
/// what changed (`None` when nothing did).
pub fn reconcile(recorded: &[ToolSpec], now: &[ToolSpec]) -> (Vec<ToolSpec>, Option<String>) {
    let current = |name: &str| now.iter().find(|spec| spec.name == name);
    let mut removed = Vec::new();
    let mut changed = Vec::new();
    let mut tools = Vec::new();
    for spec in recorded {
        if !is_mcp_name(&spec.name) {
            tools.push(spec.clone());
            continue;
        }
        match current(&spec.name) {
            None => removed.push(spec.name.clone()),
            Some(fresh) => {
                if fresh != spec {
                    changed.push(spec.name.clone());
                }
                tools.push(fresh.clone());
            }
        }
    }
    let mut added = Vec::new();
    for spec in now {
        if is_mcp_name(&spec.name) && !recorded.iter().any(|r| r.name == spec.name) {
            added.push(spec.name.clone());
            tools.push(spec.clone());
        }
    }
    let mut parts = Vec::new();
    for (what, names) in [
        ("added", &added),
        ("changed", &changed),
        ("no longer offered", &removed),
    ] {
        if !names.is_empty() {
            parts.push(format!("{what}: {}", names.join(", ")));
        }
    }
    let note = (!parts.is_empty())
        .then(|| format!("MCP tools differ from the last run ({})", parts.join("; ")));
    (tools, note)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn names(tools: &[ToolSpec]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn mcp_tools_follow_the_servers_and_others_stay() {
        let recorded = [
            spec("read", "r"),
            spec("fs__list", "l"),
            spec("fs__gone", "g"),
            spec("fs__grown", "old"),
            spec("delimiter", "d"),
        ];
        let now = [
            spec("read", "changed built-in is not ours"),
            spec("fs__list", "l"),
            spec("fs__grown", "new"),
            spec("web__fetch", "f"),
        ];
        let (tools, note) = reconcile(&recorded, &now);
        assert_eq!(
            names(&tools),
            ["read", "fs__list", "fs__grown", "delimiter", "web__fetch"]
        );
        assert_eq!(tools[0].description, "r", "built-ins stay as recorded");
        assert_eq!(tools[2].description, "new");
        assert_eq!(
            note.as_deref(),
            Some(
                "MCP tools differ from the last run (added: web__fetch; changed: fs__grown; no longer offered: fs__gone)"
            )
        );
    }

    #[test]
    fn nothing_changed_is_no_note() {
        let recorded = [spec("read", "r"), spec("fs__list", "l")];
        let (tools, note) = reconcile(&recorded, &recorded);
        assert_eq!(tools, recorded);
        assert_eq!(note, None);
        let (tools, note) = reconcile(&recorded, &[spec("read", "r")]);
        assert_eq!(names(&tools), ["read"]);
        assert!(note.unwrap().contains("no longer offered: fs__list"));
    }
}
