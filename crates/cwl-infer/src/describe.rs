//! What a tool call does and touches, read from its name and arguments:
//! whether it only reads, and a short deterministic label for inferred
//! episode descriptions (`read src/a.rs`, `searched "foo" in src`).

use cwl::shorten;
use serde_json::Value;

use super::shell;

/// Tools that only read, by lowercase name.
const READ_TOOLS: &[&str] = &[
    "read",
    "read_file",
    "readfile",
    "view",
    "view_file",
    "open_file",
    "cat",
    "grep",
    "rg",
    "search",
    "search_files",
    "grep_search",
    "codebase_search",
    "file_search",
    "semantic_search",
    "glob",
    "find",
    "find_files",
    "ls",
    "list",
    "list_dir",
    "list_directory",
    "list_files",
    "tree",
    "webfetch",
    "web_fetch",
    "fetch",
    "websearch",
    "web_search",
    "todoread",
    "notebookread",
    "bashoutput",
    "taskoutput",
    "skill",
    "view_image",
    "get_file",
    "read_many_files",
];

/// Tools that neither explore nor change the workspace (planning, task
/// lists, questions to the user, goals), by lowercase name.
const NEUTRAL_TOOLS: &[&str] = &[
    "todowrite",
    "update_plan",
    "exitplanmode",
    "enterplanmode",
    "taskcreate",
    "taskupdate",
    "tasklist",
    "taskget",
    "taskstop",
    "killshell",
    "askuserquestion",
    "request_user_input",
    "get_goal",
    "create_goal",
    "update_goal",
    "tool_search",
    "croncreate",
    "crondelete",
    "cronlist",
    "schedulewakeup",
    "sendmessage",
];

/// Tools that delegate to a sub-agent, whose reply is information for the
/// parent, by lowercase name.
const AGENT_TOOLS: &[&str] = &["task", "agent", "spawn_agent"];

/// Words in an MCP tool's own name that mark it as changing something.
const MCP_WRITE_WORDS: &[&str] = &[
    "write", "edit", "create", "update", "delete", "remove", "move", "rename", "insert", "apply",
    "commit", "push", "set", "put",
];

/// Tools that run a shell command, by lowercase name.
const SHELL_TOOLS: &[&str] = &[
    "bash",
    "shell",
    "shell_command",
    "sh",
    "zsh",
    "exec",
    "exec_command",
    "execute_command",
    "run_command",
    "run_terminal_cmd",
    "terminal",
    "local_shell",
    "run_shell_command",
];

/// Editor tools whose `command: "view"` only reads.
const EDITOR_TOOLS: &[&str] = &[
    "str_replace_based_edit_tool",
    "str_replace_editor",
    "text_editor",
];

/// How a call touches the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only reads (reads, searches, listings, read-only shell commands).
    Read,
    /// May change something (edits, writes, any other command or tool).
    Write,
    /// Neither reads the workspace nor changes it (planning, task lists,
    /// questions to the user): the call stays in whatever episode is open.
    Neutral,
}

/// A parsed tool call: its access and a label for descriptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallInfo {
    /// Read-only or mutating.
    pub access: Access,
    /// `read src/a.rs`, `searched "foo" in src`, `ran git status`...
    pub label: String,
}

/// Classifies and labels one call.
pub fn call_info(name: &str, arguments: &str) -> CallInfo {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let lower = name.to_ascii_lowercase();
    let path = first_str(
        &args,
        &[
            "file_path",
            "path",
            "filePath",
            "filename",
            "file",
            "target_file",
            "dir",
            "directory",
            "url",
        ],
    );
    let pattern = first_str(&args, &["pattern", "query", "regex", "glob", "search", "q"]);
    if lower == "write_stdin" {
        let polls = args
            .get("chars")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        return CallInfo {
            access: if polls { Access::Read } else { Access::Write },
            label: format!(
                "{} a running command",
                if polls { "polled" } else { "typed into" }
            ),
        };
    }
    if SHELL_TOOLS.contains(&lower.as_str()) {
        let command = shell_command(&args).unwrap_or_else(|| arguments.to_string());
        let access = if shell::is_read_only(&command) {
            Access::Read
        } else {
            Access::Write
        };
        return CallInfo {
            access,
            label: format!("ran `{}`", shorten(first_line(&command), 60)),
        };
    }
    if EDITOR_TOOLS.contains(&lower.as_str()) {
        let view = args.get("command").and_then(Value::as_str) == Some("view");
        let access = if view { Access::Read } else { Access::Write };
        let verb = if view { "read" } else { "edited" };
        return CallInfo {
            access,
            label: format!("{verb} {}", path.unwrap_or("a file")),
        };
    }
    if NEUTRAL_TOOLS.contains(&lower.as_str()) {
        return CallInfo {
            access: Access::Neutral,
            label: format!("used {name}"),
        };
    }
    if AGENT_TOOLS.contains(&lower.as_str()) {
        let task = first_str(&args, &["description", "message", "prompt"]);
        return CallInfo {
            access: Access::Read,
            label: match task {
                Some(task) => format!("delegated \"{}\"", shorten(first_line(task), 60)),
                None => format!("used {name}"),
            },
        };
    }
    if let Some(tool) = mcp_tool(&lower) {
        let writes = tool
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| MCP_WRITE_WORDS.contains(&word));
        return CallInfo {
            access: if writes { Access::Write } else { Access::Read },
            label: match path.or(pattern) {
                Some(target) => format!("{name} {target}"),
                None => format!("used {name}"),
            },
        };
    }
    if READ_TOOLS.contains(&lower.as_str()) {
        let label = match (pattern, path) {
            (Some(p), Some(dir)) => format!("searched \"{}\" in {}", shorten(p, 40), dir),
            (Some(p), None) => format!("searched \"{}\"", shorten(p, 40)),
            (None, Some(path))
                if lower.contains("ls") || lower.contains("list") || lower == "tree" =>
            {
                format!("listed {path}")
            }
            (None, Some(path)) => format!("read {path}"),
            (None, None) => format!("used {name}"),
        };
        return CallInfo {
            access: Access::Read,
            label,
        };
    }
    CallInfo {
        access: Access::Write,
        label: match path {
            Some(path) => format!("{name} {path}"),
            None => format!("used {name}"),
        },
    }
}

/// The tool part of an MCP tool name (`mcp__server__tool` → `tool`).
fn mcp_tool(lower: &str) -> Option<&str> {
    let rest = lower.strip_prefix("mcp__")?;
    Some(rest.split_once("__").map_or(rest, |(_, tool)| tool))
}

fn first_str<'a>(args: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| args.get(k).and_then(Value::as_str))
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The command of a shell call: a string, or an argv array (`["bash", "-lc", "ls"]`).
fn shell_command(args: &Value) -> Option<String> {
    let value = ["command", "cmd", "script", "input"]
        .iter()
        .find_map(|k| args.get(k))?;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            match words.as_slice() {
                [shell, flag, script] if shell.ends_with("sh") && flag.starts_with('-') => {
                    Some(script.to_string())
                }
                _ => Some(words.join(" ")),
            }
        }
        _ => None,
    }
}

fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_tools() {
        assert_eq!(
            call_info("read", r#"{"path":"src/a.rs"}"#).access,
            Access::Read
        );
        assert_eq!(
            call_info("Grep", r#"{"pattern":"foo"}"#).access,
            Access::Read
        );
        assert_eq!(
            call_info("edit", r#"{"path":"src/a.rs"}"#).access,
            Access::Write
        );
        assert_eq!(call_info("mystery_tool", "{}").access, Access::Write);
        assert_eq!(
            call_info("bash", r#"{"command":"git status"}"#).access,
            Access::Read
        );
        assert_eq!(
            call_info("bash", r#"{"command":"make"}"#).access,
            Access::Write
        );
        assert_eq!(
            call_info("shell", r#"{"command":["bash","-lc","ls -la"]}"#).access,
            Access::Read
        );
        assert_eq!(
            call_info(
                "str_replace_based_edit_tool",
                r#"{"command":"view","path":"a.py"}"#
            )
            .access,
            Access::Read
        );
        assert_eq!(
            call_info(
                "str_replace_based_edit_tool",
                r#"{"command":"create","path":"a.py"}"#
            )
            .access,
            Access::Write
        );
        assert_eq!(call_info("bash", "not json").access, Access::Write);
    }

    #[test]
    fn planning_sub_agent_and_mcp_tools_do_not_count_as_edits() {
        for name in [
            "TodoWrite",
            "update_plan",
            "ExitPlanMode",
            "EnterPlanMode",
            "TaskCreate",
            "TaskUpdate",
            "AskUserQuestion",
        ] {
            assert_eq!(call_info(name, "{}").access, Access::Neutral, "{name}");
        }
        for name in ["WebFetch", "WebSearch", "TaskOutput", "view_image"] {
            assert_eq!(call_info(name, "{}").access, Access::Read, "{name}");
        }
        let agent = call_info(
            "Agent",
            r#"{"description":"Find the parser","prompt":"Look for it","subagent_type":"Explore"}"#,
        );
        assert_eq!(agent.access, Access::Read);
        assert_eq!(agent.label, "delegated \"Find the parser\"");
        assert_eq!(
            call_info("Task", r#"{"prompt":"explore"}"#).access,
            Access::Read
        );
        let search = call_info("mcp__github__search_issues", r#"{"query":"panic"}"#);
        assert_eq!(search.access, Access::Read);
        assert_eq!(search.label, "mcp__github__search_issues panic");
        assert_eq!(
            call_info("mcp__fs__write_file", r#"{"path":"a.txt"}"#).access,
            Access::Write
        );
        assert_eq!(call_info("mcp__memory", "{}").access, Access::Read);
        assert_eq!(call_info("ScheduleWakeup", "{}").access, Access::Neutral);
    }

    #[test]
    fn polling_a_running_command_only_reads() {
        let poll = call_info("write_stdin", r#"{"session_id":3,"chars":""}"#);
        assert_eq!(poll.access, Access::Read);
        assert_eq!(poll.label, "polled a running command");
        assert_eq!(
            call_info("write_stdin", r#"{"session_id":3,"chars":"y\n"}"#).access,
            Access::Write
        );
    }

    #[test]
    fn labels_say_what_was_touched() {
        assert_eq!(
            call_info("read", r#"{"path":"src/a.rs"}"#).label,
            "read src/a.rs"
        );
        assert_eq!(
            call_info("grep", r#"{"pattern":"fn main","path":"src"}"#).label,
            "searched \"fn main\" in src"
        );
        assert_eq!(
            call_info("ls", r#"{"path":"crates"}"#).label,
            "listed crates"
        );
        assert_eq!(
            call_info("bash", r#"{"command":"git log -3\nmore"}"#).label,
            "ran `git log -3`"
        );
        assert_eq!(shorten("abcdef", 4), "abc…");
    }
}
