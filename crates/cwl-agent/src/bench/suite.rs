//! Task suites: a repository and tasks, each with a command that checks
//! it was done. The built-in suite is generated; a user's comes from a
//! TOML or JSON file.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Deserialize;

/// One task of a suite.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// What the agent is asked.
    pub prompt: String,
    /// A shell command run in the repository after the task: exit status
    /// 0 means the task was done.
    pub check: String,
}

/// A repository and the tasks to run on it, in order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// What the suite is called in the report.
    #[serde(default)]
    pub name: Option<String>,
    /// The repository the tasks work on, copied afresh for each arm;
    /// relative to the suite file. `None`: the built-in generated one.
    #[serde(default)]
    pub repository: Option<PathBuf>,
    /// The tasks, in order.
    pub tasks: Vec<Task>,
}

/// Tasks of the built-in suite at most.
pub const BUILTIN_MAX: usize = 99;

/// Lines of padding in each module of the built-in repository, so that
/// reading one costs about a thousand tokens.
const PADDING_LINES: usize = 40;

impl Suite {
    /// The built-in suite of `tasks` tasks over a generated repository:
    /// module `src/mNN.py` has `value_NN()` returning NN; task NN asks
    /// for it to return NN × 100 and checks the file says so.
    pub fn builtin(tasks: usize) -> Suite {
        Suite {
            name: Some(format!("built-in ({tasks} tasks)")),
            repository: None,
            tasks: (0..tasks).map(builtin_task).collect(),
        }
    }

    /// Reads a suite file: TOML unless its name ends in `.json`.
    pub fn load(path: &Path) -> anyhow::Result<Suite> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the suite file {}", path.display()))?;
        let mut suite: Suite = if path.extension().is_some_and(|e| e == "json") {
            serde_json::from_str(&text)
                .with_context(|| format!("{} is not a valid suite (JSON)", path.display()))?
        } else {
            toml::from_str(&text)
                .with_context(|| format!("{} is not a valid suite (TOML)", path.display()))?
        };
        if suite.tasks.is_empty() {
            anyhow::bail!("{} has no tasks", path.display());
        }
        if let Some((at, _)) = suite
            .tasks
            .iter()
            .enumerate()
            .find(|(_, task)| task.prompt.trim().is_empty() || task.check.trim().is_empty())
        {
            anyhow::bail!(
                "{}: task {} has an empty prompt or check",
                path.display(),
                at + 1
            );
        }
        if let Some(repository) = &suite.repository {
            let base = path.parent().unwrap_or(Path::new("."));
            let repository = base.join(repository);
            if !repository.is_dir() {
                anyhow::bail!(
                    "{}: the repository {} is not a directory",
                    path.display(),
                    repository.display()
                );
            }
            suite.repository = Some(repository);
        }
        suite.name.get_or_insert_with(|| path.display().to_string());
        Ok(suite)
    }

    /// Writes the suite's repository into `dir` (empty): a copy of its
    /// own, or the generated one.
    pub fn create_repository(&self, dir: &Path) -> anyhow::Result<()> {
        match &self.repository {
            Some(source) => copy_dir(source, dir),
            None => {
                std::fs::create_dir_all(dir.join("src"))?;
                for module in 0..self.tasks.len() {
                    std::fs::write(dir.join(module_path(module)), module_text(module))?;
                }
                Ok(())
            }
        }
        .with_context(|| format!("cannot write the suite's repository in {}", dir.display()))
    }
}

/// The built-in task for module `module`.
pub fn builtin_task(module: usize) -> Task {
    let path = module_path(module);
    Task {
        prompt: format!(
            "In {path}, value_{module:02}() returns {module}. Make it return {}.",
            module * 100
        ),
        check: format!("grep -q '^    return {}$' {path}", module * 100),
    }
}

/// The built-in task's module, and the values it asks to change, read
/// back from its prompt.
pub fn parse_builtin(prompt: &str) -> Option<(String, usize, usize)> {
    let rest = prompt.strip_prefix("In ")?;
    let (path, rest) = rest.split_once(", value_")?;
    let (_, rest) = rest.split_once("() returns ")?;
    let (from, rest) = rest.split_once(". Make it return ")?;
    let to = rest.strip_suffix('.')?;
    Some((path.to_string(), from.parse().ok()?, to.parse().ok()?))
}

fn module_path(module: usize) -> String {
    format!("src/m{module:02}.py")
}

fn module_text(module: usize) -> String {
    let mut text = format!("\"\"\"Module {module:02} of the bench repository.\"\"\"\n\n");
    for line in 0..PADDING_LINES {
        text.push_str(&format!(
            "# note {line}: module {module:02} keeps record {} of the ledger in bucket {}\n",
            module * 1000 + line,
            (module * 7 + line) % 13
        ));
    }
    text.push_str(&format!(
        "\n\ndef value_{module:02}():\n    return {module}\n"
    ));
    text
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_prompts_read_back() {
        let task = builtin_task(7);
        assert_eq!(
            parse_builtin(&task.prompt),
            Some(("src/m07.py".to_string(), 7, 700))
        );
        assert_eq!(parse_builtin("fix the bug"), None);
    }

    #[test]
    fn suite_files_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("repo")).unwrap();
        let toml = dir.path().join("suite.toml");
        std::fs::write(
            &toml,
            "repository = \"repo\"\n[[tasks]]\nprompt = \"add a README\"\ncheck = \"test -f README.md\"\n",
        )
        .unwrap();
        let suite = Suite::load(&toml).unwrap();
        assert_eq!(suite.tasks.len(), 1);
        assert_eq!(suite.repository, Some(dir.path().join("repo")));
        let json = dir.path().join("suite.json");
        std::fs::write(&json, r#"{"tasks": [{"prompt": "x", "check": " "}]}"#).unwrap();
        let error = Suite::load(&json).unwrap_err().to_string();
        assert!(
            error.contains("task 1 has an empty prompt or check"),
            "{error}"
        );
        std::fs::write(&json, r#"{"tasks": [{"prompt": "x"}]}"#).unwrap();
        let error = format!("{:#}", Suite::load(&json).unwrap_err());
        assert!(error.contains("check"), "{error}");
        std::fs::write(
            &toml,
            "repository = \"nowhere\"\n[[tasks]]\nprompt = \"x\"\ncheck = \"true\"\n",
        )
        .unwrap();
        let error = Suite::load(&toml).unwrap_err().to_string();
        assert!(error.contains("is not a directory"), "{error}");
    }
}
