//! `cwl demo`: the real agent loop, tools and engine, driven by a built-in
//! scripted model through several tasks on a throwaway repository, with a
//! budget small enough that eviction shows. No API key, no network; the
//! run is deterministic except for paths and timestamps.

mod model;
mod repo;
mod script;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use cwl::Budget;

pub(crate) use model::scripted_response;
pub use model::{DemoModel, MODEL, model_info};
pub use script::TASKS;

use crate::agent::status::human_tokens;
use crate::agent::{Agent, AgentError, AgentOptions, Observer, Stats};
use crate::render::{RenderOptions, Renderer, Summary};
use crate::tools::{ToolConfig, Toolbox};

/// The demo's default budget in tokens.
pub const DEFAULT_BUDGET: usize = 3_600;

/// How to run the demo.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoOptions {
    /// Token budget per request.
    pub budget: Budget,
    /// Where the session file goes (default: the usual session directory).
    pub session_dir: Option<PathBuf>,
    /// Keep the repository after the run.
    pub keep: bool,
    /// JSON lines instead of text.
    pub json: bool,
}

/// What the demo did.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoReport {
    /// Tasks finished.
    pub tasks: usize,
    /// The run's figures.
    pub stats: Stats,
    /// The budget in tokens.
    pub budget: usize,
    /// The session file.
    pub session: PathBuf,
    /// The repository, when kept.
    pub repo: Option<PathBuf>,
    /// Whether the repository was a git repository.
    pub git: bool,
}

/// Runs the demo, printing to stdout and stderr.
pub async fn run(options: DemoOptions) -> anyhow::Result<DemoReport> {
    let renderer = Arc::new(Mutex::new(Renderer::stdio(RenderOptions::detect(
        options.json,
    ))));
    run_with(options, renderer).await
}

/// Runs the demo, reporting to `renderer`.
pub async fn run_with(
    options: DemoOptions,
    renderer: Arc<Mutex<Renderer>>,
) -> anyhow::Result<DemoReport> {
    let budget = options
        .budget
        .resolve(Some(model_info().context_window as usize))?;
    let dir = tempfile::Builder::new()
        .prefix("cwl-demo-")
        .tempdir()
        .context("cannot create the demo's temporary directory")?;
    let git = repo::create(dir.path()).context("cannot write the demo repository")?;
    let session_dir = match options.session_dir {
        Some(dir) => dir,
        None => cwl_session::default_dir()?,
    };
    let toolbox = Toolbox::new(dir.path(), ToolConfig::default())?;
    let info = |renderer: &Arc<Mutex<Renderer>>, text: &str| {
        renderer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .info(text);
    };
    info(
        &renderer,
        &format!(
            "cwl demo: a scripted model (no network) runs {} tasks in one session on a throwaway {} at {}, budget {} tokens per request",
            TASKS.len(),
            if git {
                "git repository"
            } else {
                "directory (git not found)"
            },
            toolbox.root().display(),
            human_tokens(budget)
        ),
    );
    let mut agent_options = AgentOptions::new(model_info());
    agent_options.budget = budget;
    agent_options.max_turns = 20;
    let observer: Box<dyn Observer> = Box::new(Arc::clone(&renderer));
    let model = DemoModel::new(toolbox.root());
    let mut agent = Agent::create(
        Box::new(model),
        toolbox,
        agent_options,
        &session_dir,
        observer,
    )?;
    let mut tasks = 0;
    for task in TASKS {
        match agent.run_task(task).await {
            Ok(_) => tasks += 1,
            Err(AgentError::OutputClosed) => break,
            Err(error) => return Err(error.into()),
        }
    }
    let session = agent.session_path();
    renderer
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .summary(&Summary {
            stats: agent.stats(),
            budget,
            session: &session,
        });
    let repo = if options.keep {
        let path = dir.keep();
        info(
            &renderer,
            &format!("demo repository kept at {}", path.display()),
        );
        Some(path)
    } else {
        None
    };
    Ok(DemoReport {
        tasks,
        stats: agent.stats().clone(),
        budget,
        session,
        repo,
        git,
    })
}
