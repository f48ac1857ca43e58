//! `cwl bench`: the paper's protocol as one command. A task suite runs
//! twice on fresh copies of its repository: every task in one CWL session
//! (`one-session`), and each task in a session of its own (`fresh`). The
//! report gives both arms' pass rates, tokens and cost per task, peak
//! prompt and evictions, and plots their prompt curves.
//!
//! The built-in suite (a generated repository and its tasks) is solved by
//! a built-in scripted model, so the bench runs with no key and no
//! network; any suite runs with a real model (`--provider`, `--model`).

mod model;
mod report;
mod suite;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;

pub use model::{BenchModel, MODEL, model_info};
pub use report::{Arm, Report};
pub use suite::{BUILTIN_MAX, Suite, Task};

use crate::agent::{Agent, AgentError, AgentOptions, Collect, Event, Observer, Stats};
use crate::tools::{ToolConfig, Toolbox};
use cwl_provider::{ModelInfo, Provider};

/// Makes the provider each session of the bench talks to.
pub type ProviderFactory = Arc<dyn Fn() -> anyhow::Result<Box<dyn Provider>> + Send + Sync>;

/// How to run a bench.
#[derive(Clone)]
pub struct BenchOptions {
    /// The suite.
    pub suite: Suite,
    /// The model's table entry (name, window, prices).
    pub model: ModelInfo,
    /// Makes the model's provider.
    pub provider: ProviderFactory,
    /// The budget τ of every session.
    pub budget: usize,
    /// Model calls a task may take.
    pub max_turns: usize,
    /// Where `report.json`, `prompt.svg` and the sessions go.
    pub out: PathBuf,
}

impl std::fmt::Debug for BenchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchOptions")
            .field("suite", &self.suite.name)
            .field("model", &self.model.name)
            .field("budget", &self.budget)
            .field("out", &self.out)
            .finish_non_exhaustive()
    }
}

impl BenchOptions {
    /// The built-in suite of `tasks` tasks with the scripted model.
    pub fn builtin(tasks: usize, budget: usize, out: PathBuf) -> BenchOptions {
        BenchOptions {
            suite: Suite::builtin(tasks),
            model: model_info(),
            provider: Arc::new(|| Ok(Box::new(BenchModel) as Box<dyn Provider>)),
            budget,
            max_turns: 20,
            out,
        }
    }
}

/// Runs both arms, writes `report.json` and `prompt.svg` into the output
/// directory and returns the report; `progress` is told each task's
/// outcome as it ends.
pub async fn run(options: &BenchOptions, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Report> {
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("cannot create {}", options.out.display()))?;
    let one = arm(options, false, progress).await?;
    let fresh = arm(options, true, progress).await?;
    let report = Report::new(
        options.suite.name.clone().unwrap_or_default(),
        options.model.name.clone(),
        options.budget,
        vec![one, fresh],
    );
    let json = serde_json::to_string_pretty(&report)?;
    let write = |name: &str, text: &str| {
        let path = options.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write("report.json", &json)?;
    write("prompt.svg", &report.svg())?;
    Ok(report)
}

/// The figures summed over the sessions of one arm.
#[derive(Default)]
struct Totals {
    stats: Vec<Stats>,
    curve: Vec<usize>,
}

/// One arm: every task in one session, or (`fresh`) each in its own.
async fn arm(
    options: &BenchOptions,
    fresh: bool,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Arm> {
    let name = if fresh { "fresh" } else { "one-session" };
    let repo = tempfile::Builder::new()
        .prefix("cwl-bench-")
        .tempdir()
        .context("cannot create the bench's temporary directory")?;
    options.suite.create_repository(repo.path())?;
    let sessions = options.out.join("sessions").join(name);
    std::fs::create_dir_all(&sessions)?;
    let mut totals = Totals::default();
    let mut failed = Vec::new();
    let mut session: Option<(Agent, Arc<Mutex<Collect>>)> = None;
    let tasks = &options.suite.tasks;
    for (at, task) in tasks.iter().enumerate() {
        if session.is_none() || fresh {
            if let Some((agent, shared)) = session.take() {
                totals.add(&agent, &shared);
            }
            session = Some(start(options, repo.path(), &sessions)?);
        }
        let (agent, _) = session.as_mut().expect("a session");
        let outcome = match agent.run_task(&task.prompt).await {
            Ok(_) => None,
            Err(AgentError::OutputClosed) => anyhow::bail!("the output went away"),
            Err(error) => Some(error.to_string()),
        };
        let passed = outcome.is_none() && check(repo.path(), task)?;
        if !passed {
            failed.push(at + 1);
        }
        let verdict = match (&outcome, passed) {
            (Some(error), _) => format!("failed: {error}"),
            (None, true) => "passed".to_string(),
            (None, false) => "its check failed".to_string(),
        };
        progress(&format!(
            "{name}: task {}/{} {verdict}",
            at + 1,
            tasks.len()
        ));
    }
    if let Some((agent, shared)) = session.take() {
        totals.add(&agent, &shared);
    }
    Ok(totals.arm(name, tasks.len(), failed))
}

/// A new session of the arm on the repository at `root`.
fn start(
    options: &BenchOptions,
    root: &Path,
    sessions: &Path,
) -> anyhow::Result<(Agent, Arc<Mutex<Collect>>)> {
    let shared = Arc::new(Mutex::new(Collect::default()));
    let observer: Box<dyn Observer> = Box::new(Arc::clone(&shared));
    let mut agent_options = AgentOptions::new(options.model.clone());
    agent_options.budget = options.budget;
    agent_options.max_turns = options.max_turns;
    agent_options.git_status = false;
    let toolbox = Toolbox::new(root, ToolConfig::default())?;
    let agent = Agent::create(
        (options.provider)()?,
        toolbox,
        agent_options,
        sessions,
        observer,
    )?;
    Ok((agent, shared))
}

/// Runs the task's check in the repository: whether it exits 0.
fn check(root: &Path, task: &Task) -> anyhow::Result<bool> {
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(&task.check)
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .with_context(|| format!("cannot run the check `{}`", task.check))?;
    Ok(status.success())
}

impl Totals {
    fn add(&mut self, agent: &Agent, shared: &Arc<Mutex<Collect>>) {
        self.stats.push(agent.stats().clone());
        let events = shared.lock().unwrap_or_else(|p| p.into_inner());
        self.curve
            .extend(events.events.iter().filter_map(|event| match event {
                Event::Response { request_tokens, .. } => Some(*request_tokens),
                _ => None,
            }));
    }

    fn arm(self, name: &'static str, tasks: usize, failed_tasks: Vec<usize>) -> Arm {
        let sum = |f: fn(&Stats) -> u64| self.stats.iter().map(f).sum::<u64>();
        let input_tokens = sum(|s| s.input_tokens);
        let cost_usd = self
            .stats
            .iter()
            .map(|s| s.cost_usd)
            .try_fold(0.0, |total, cost| cost.map(|c| total + c));
        let per_task = |total: f64| total / tasks.max(1) as f64;
        Arm {
            name,
            tasks,
            passed: tasks - failed_tasks.len(),
            pass_rate: (tasks - failed_tasks.len()) as f64 / tasks.max(1) as f64,
            requests: self.stats.iter().map(|s| s.requests).sum(),
            input_tokens,
            output_tokens: sum(|s| s.output_tokens),
            input_tokens_per_task: per_task(input_tokens as f64),
            cost_usd,
            cost_per_task_usd: cost_usd.map(per_task),
            peak_prompt_tokens: self
                .stats
                .iter()
                .map(|s| s.max_request_tokens)
                .max()
                .unwrap_or(0),
            eviction_passes: self.stats.iter().map(|s| s.eviction_passes).sum(),
            tokens_evicted: self.stats.iter().map(|s| s.tokens_evicted).sum(),
            prompt_curve: self.curve,
            failed_tasks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A suite of the user's that the scripted model cannot solve: every
    /// check fails and is counted so, in both arms.
    #[tokio::test]
    async fn failed_checks_are_counted_in_both_arms() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        let mut options = BenchOptions::builtin(1, 6_000, dir.path().join("out"));
        options.suite = Suite {
            name: Some("mine".into()),
            repository: Some(repo),
            tasks: vec![
                Task {
                    prompt: "add a README".into(),
                    check: "test -f README.md".into(),
                },
                Task {
                    prompt: "keep a.txt".into(),
                    check: "test -f a.txt".into(),
                },
            ],
        };
        let mut lines = Vec::new();
        let report = run(&options, &mut |line| lines.push(line.to_string()))
            .await
            .unwrap();
        for arm in &report.arms {
            assert_eq!((arm.tasks, arm.passed), (2, 1), "{arm:?}");
            assert_eq!(arm.failed_tasks, [1]);
        }
        assert_eq!(lines[0], "one-session: task 1/2 its check failed");
        assert_eq!(lines[3], "fresh: task 2/2 passed");
        assert!(options.out.join("report.json").is_file());
    }
}
