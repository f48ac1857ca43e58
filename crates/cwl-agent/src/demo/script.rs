//! What the demo model does for each task, step by step. Each step sees
//! the result of the previous tool call and the notes kept so far, the way
//! a model would read them from its context.

use std::collections::BTreeMap;

use cwl::{Annotation, Block, DELIMITER, EpisodeKind, RECALL, ToolCall};
use serde_json::{Value, json};

/// The demo's tasks, in order.
pub const TASKS: [&str; 5] = [
    "The greeting says \"Hi world\". Make it say \"Hello, world!\" instead.",
    "Add an entry for the greeting change to CHANGELOG.md under Unreleased.",
    "Collect every TODO comment in src/ into a new file TODO.md.",
    "Rename the function add_numbers to add everywhere.",
    "Summarise what changed in this session.",
];

/// The model's state within one task.
#[derive(Debug, Default)]
pub struct Memory {
    /// Facts gathered from tool results, by key.
    pub notes: BTreeMap<&'static str, String>,
}

/// Builds one reply.
pub struct Turn<'a> {
    /// The result of the last tool call in the request.
    pub last_result: &'a str,
    /// What the model remembers of this task.
    pub memory: &'a mut Memory,
    prefix: String,
    blocks: Vec<Block>,
}

impl<'a> Turn<'a> {
    /// A reply whose call ids start with `prefix`.
    pub fn new(prefix: String, last_result: &'a str, memory: &'a mut Memory) -> Self {
        Turn {
            last_result,
            memory,
            prefix,
            blocks: Vec::new(),
        }
    }

    fn think(&mut self, text: &str) -> &mut Self {
        self.blocks.push(Block::Reasoning {
            text: text.to_string(),
            signature: None,
        });
        self
    }

    fn say(&mut self, text: &str) -> &mut Self {
        self.blocks.push(Block::Text {
            text: text.to_string(),
        });
        self
    }

    fn call(&mut self, name: &str, arguments: Value) -> &mut Self {
        self.raw_call(name, arguments.to_string())
    }

    fn raw_call(&mut self, name: &str, arguments: String) -> &mut Self {
        let id = format!("{}_{}", self.prefix, self.blocks.len());
        self.blocks
            .push(Block::ToolCall(ToolCall::new(id, name, arguments)));
        self
    }

    fn start(&mut self, name: &str, kind: EpisodeKind, dependencies: &[&str]) -> &mut Self {
        let annotation = Annotation::Start {
            name: name.to_string(),
            kind,
            dependencies: dependencies.iter().map(|d| d.to_string()).collect(),
        };
        self.raw_call(DELIMITER, annotation.to_arguments())
    }

    fn end(&mut self, description: Option<&str>) -> &mut Self {
        let annotation = Annotation::End {
            name: None,
            description: description.map(str::to_string),
        };
        self.raw_call(DELIMITER, annotation.to_arguments())
    }

    fn note(&mut self, key: &'static str, value: String) {
        self.memory.notes.insert(key, value);
    }

    fn recall(&self, key: &str) -> String {
        self.memory.notes.get(key).cloned().unwrap_or_default()
    }

    /// The blocks built.
    pub fn finish(self) -> Vec<Block> {
        self.blocks
    }
}

/// Grep output as `(path, line, text)` hits.
fn grep_hits(output: &str) -> Vec<(String, String, String)> {
    let mut file = String::new();
    let mut hits = Vec::new();
    for line in output.lines() {
        match line.split_once(':') {
            Some((number, text))
                if number.chars().all(|c| c.is_ascii_digit()) && !number.is_empty() =>
            {
                hits.push((file.clone(), number.to_string(), text.trim().to_string()));
            }
            _ if !line.trim().is_empty() => file = line.trim().to_string(),
            _ => {}
        }
    }
    hits
}

/// Fills `turn` with step `step` of task `task`; false when the task's
/// script is over (the model then just answers).
pub fn step(task: usize, step: usize, turn: &mut Turn<'_>) -> bool {
    match task {
        0 => greeting(step, turn),
        1 => changelog(step, turn),
        2 => todos(step, turn),
        3 => rename(step, turn),
        4 => review(step, turn),
        _ => false,
    }
}

fn greeting(step: usize, t: &mut Turn<'_>) -> bool {
    match step {
        0 => t
            .think("I need to find where the greeting text is built before changing it.")
            .say("Let me find where the greeting is built.")
            .start("find-greeting", EpisodeKind::Expl, &[])
            .call("grep", json!({"pattern": "Hi world"})),
        1 => {
            let hits = grep_hits(t.last_result);
            let (path, line, _) = hits.first().cloned().unwrap_or_default();
            t.note("path", path.clone());
            t.note("line", line);
            t.think("One match; read the file around it to see the function.")
                .call("read", json!({"path": path}))
        }
        2 => {
            let description = format!(
                "greeting() in {} returns the literal \"Hi world\" (line {}); greet.py also has shout, whisper, farewell and banner helpers.",
                t.recall("path"),
                t.recall("line")
            );
            let edit = json!({"path": t.recall("path"), "old_text": "return \"Hi world\"", "new_text": "return \"Hello, world!\""});
            t.end(Some(&description))
                .start("fix-greeting", EpisodeKind::Act, &["find-greeting"])
                .call("edit", edit)
        }
        3 => t.call(
            "bash",
            json!({"command": format!("grep -n 'Hello, world!' {}", t.recall("path"))}),
        ),
        4 => {
            let check = t.last_result.lines().next().unwrap_or("").to_string();
            t.note("check", check);
            t.end(None)
        }
        5 => {
            let answer = format!(
                "The greeting in {} now returns \"Hello, world!\" (checked: `{}`).",
                t.recall("path"),
                t.recall("check").trim()
            );
            t.say(&answer)
        }
        _ => return false,
    };
    true
}

fn changelog(step: usize, t: &mut Turn<'_>) -> bool {
    match step {
        0 => t
            .start("read-changelog", EpisodeKind::Expl, &[])
            .call("read", json!({"path": "CHANGELOG.md"})),
        1 => t
            .end(Some("CHANGELOG.md has an empty `## Unreleased` section above `## 0.1.0`; entries are `- ` bullets."))
            .start("changelog-entry", EpisodeKind::Act, &["read-changelog"])
            .call(
                "edit",
                json!({"path": "CHANGELOG.md", "old_text": "## Unreleased\n", "new_text": "## Unreleased\n\n- The greeting now says \"Hello, world!\".\n"}),
            ),
        2 => t.call("bash", json!({"command": "head -n 6 CHANGELOG.md"})),
        3 => t.end(None),
        4 => t.say("Added a changelog entry for the new greeting under Unreleased in CHANGELOG.md."),
        _ => return false,
    };
    true
}

fn todos(step: usize, t: &mut Turn<'_>) -> bool {
    match step {
        0 => t
            .start("find-todos", EpisodeKind::Expl, &[])
            .call("grep", json!({"pattern": "TODO", "path": "src"})),
        1 => {
            let list: Vec<String> = grep_hits(t.last_result)
                .into_iter()
                .map(|(path, line, text)| {
                    let text = text.trim_start_matches('#').trim();
                    format!("- {path}:{line}: {text}")
                })
                .collect();
            t.note("count", list.len().to_string());
            t.note("list", list.join("\n"));
            // Writing inside an exploration episode is refused: the model
            // learns to close it first.
            t.call("write", json!({"path": "TODO.md", "content": "# TODO\n"}))
        }
        2 => {
            let description = format!(
                "{} TODO comments in src/:\n{}",
                t.recall("count"),
                t.recall("list")
            );
            t.say("Writing is refused while exploring; closing the exploration first.")
                .end(Some(&description))
                .start("write-todo-list", EpisodeKind::Act, &["find-todos"])
        }
        3 => {
            let content = format!("# TODO\n\n{}\n", t.recall("list"));
            t.call("write", json!({"path": "TODO.md", "content": content}))
        }
        4 => t.call("bash", json!({"command": "wc -l < TODO.md"})),
        5 => t.end(None),
        6 => {
            let answer = format!(
                "Wrote TODO.md with the {} TODO comments found in src/.",
                t.recall("count")
            );
            t.say(&answer)
        }
        _ => return false,
    };
    true
}

fn rename(step: usize, t: &mut Turn<'_>) -> bool {
    match step {
        0 => t
            .start("find-add-numbers", EpisodeKind::Expl, &[])
            .call("grep", json!({"pattern": "add_numbers"})),
        1 => {
            let hits: Vec<String> = grep_hits(t.last_result)
                .into_iter()
                .map(|(path, _, text)| format!("{path}\t{text}"))
                .collect();
            t.note("hits", hits.join("\n"));
            t.call("read", json!({"path": "src/mathutil.py"}))
        }
        2 => {
            let places: Vec<String> = t
                .recall("hits")
                .lines()
                .map(|hit| hit.replace('\t', ": "))
                .collect();
            let description = format!(
                "add_numbers appears {} times, each line unique in its file: {}",
                places.len(),
                places.join("; ")
            );
            t.end(Some(&description))
                .start("rename-add", EpisodeKind::Act, &["find-add-numbers"])
        }
        3 => {
            for hit in t.recall("hits").lines() {
                let Some((path, text)) = hit.split_once('\t') else {
                    continue;
                };
                let new_text = text.replace("add_numbers", "add");
                t.call(
                    "edit",
                    json!({"path": path, "old_text": text, "new_text": new_text}),
                );
            }
            t
        }
        4 => t.call(
            "bash",
            json!({"command": "grep -rn 'add_numbers' src || echo 'no add_numbers left'"}),
        ),
        5 => t.end(None),
        6 => {
            let mut files: Vec<&str> = Vec::new();
            let hits = t.recall("hits");
            for hit in hits.lines() {
                let path = hit.split('\t').next().unwrap_or("");
                if !files.contains(&path) {
                    files.push(path);
                }
            }
            let answer = format!(
                "Renamed add_numbers to add in {} ({} places).",
                files.join(" and "),
                hits.lines().count()
            );
            t.say(&answer)
        }
        _ => return false,
    };
    true
}

fn review(step: usize, t: &mut Turn<'_>) -> bool {
    match step {
        0 => t
            .say("The first task's exploration was evicted; I recall it to check the fix.")
            .call(RECALL, json!({"episode": "find-greeting"})),
        1 => {
            let greeting = t
                .last_result
                .lines()
                .find(|line| line.contains("return \"Hi world\""))
                .map_or("not recalled", str::trim)
                .to_string();
            t.note("greeting", greeting);
            t.start("review-changes", EpisodeKind::Expl, &[]).call(
                "bash",
                json!({"command": "git status --short 2>/dev/null || ls -R"}),
            )
        }
        2 => {
            let changed: Vec<String> = t
                .last_result
                .lines()
                .filter(|l| {
                    l.len() > 3
                        && (l.starts_with(" M") || l.starts_with("??") || l.starts_with("M "))
                })
                .map(|l| l[3..].trim().to_string())
                .collect();
            let summary = if changed.is_empty() {
                "no git status available".to_string()
            } else {
                changed.join(", ")
            };
            t.note("changed", summary.clone());
            t.end(Some(&format!("Changed files: {summary}.")))
        }
        3 => {
            let answer = format!(
                "This session changed: {}. The greeting says \"Hello, world!\" (it was `{}`), the change is in the changelog, TODO.md lists the TODO comments, and add_numbers is now add.",
                t.recall("changed"),
                t.recall("greeting")
            );
            t.say(&answer)
        }
        _ => return false,
    };
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grep_hits_read_the_grep_tool_format() {
        let output =
            "src/app.py\n14:    # TODO: add a flag\n\nsrc/greet.py\n18:    # TODO: greet by name\n";
        assert_eq!(
            grep_hits(output),
            vec![
                (
                    "src/app.py".into(),
                    "14".into(),
                    "# TODO: add a flag".into()
                ),
                (
                    "src/greet.py".into(),
                    "18".into(),
                    "# TODO: greet by name".into()
                ),
            ]
        );
    }

    #[test]
    fn every_task_script_ends() {
        for task in 0..TASKS.len() {
            let mut memory = Memory::default();
            let mut steps = 0;
            loop {
                let mut turn = Turn::new(format!("t{task}"), "", &mut memory);
                if !step(task, steps, &mut turn) {
                    break;
                }
                steps += 1;
                assert!(steps < 20);
            }
            assert!(steps >= 3, "task {task}");
        }
    }
}
