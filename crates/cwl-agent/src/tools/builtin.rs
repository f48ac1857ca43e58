//! The built-in tools as [`Tool`]s: each wraps its module's `spec` and
//! `run`, bound to one workspace.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::error::ToolError;
use super::registry::{Registry, Tool};
use super::{ExecContext, ToolConfig, ToolOutput};
use super::{bash, edit, glob, grep, ls, read, write};

/// The workspace root and limits every built-in tool runs with.
#[derive(Debug)]
struct Workspace {
    root: PathBuf,
    config: ToolConfig,
}

/// A file tool that blocks (it runs on tokio's blocking pool).
type BlockingRun = fn(&Path, &ToolConfig, &ExecContext, &str) -> Result<String, ToolError>;

/// A built-in tool other than `bash`.
struct FileTool {
    workspace: Arc<Workspace>,
    spec: fn(&ToolConfig) -> cwl::ToolSpec,
    mutating: bool,
    class: cwl::ToolClass,
    run: BlockingRun,
}

impl Tool for FileTool {
    fn spec(&self) -> cwl::ToolSpec {
        (self.spec)(&self.workspace.config)
    }

    fn is_mutating(&self) -> bool {
        self.mutating
    }

    fn class(&self) -> cwl::ToolClass {
        self.class
    }

    fn run<'a>(&'a self, arguments: &'a str, ctx: &'a ExecContext) -> BoxFuture<'a, ToolOutput> {
        let (workspace, run) = (Arc::clone(&self.workspace), self.run);
        let (raw, ctx) = (arguments.to_owned(), ctx.clone());
        Box::pin(async move {
            let task = tokio::task::spawn_blocking(move || {
                ToolOutput::from(run(&workspace.root, &workspace.config, &ctx, &raw))
            });
            match task.await {
                Ok(out) => out,
                Err(e) => {
                    let name = self.spec().name;
                    ToolOutput::error(format!("internal error: `{name}` failed: {e}"))
                }
            }
        })
    }
}

/// `bash`: runs on the async runtime; asks for approval unless its command
/// only reads.
struct Bash {
    workspace: Arc<Workspace>,
}

impl Tool for Bash {
    fn spec(&self) -> cwl::ToolSpec {
        bash::spec(&self.workspace.config)
    }

    fn call_mutates(&self, arguments: &str) -> bool {
        let command = serde_json::from_str::<serde_json::Value>(arguments)
            .ok()
            .and_then(|args| args.get("command")?.as_str().map(str::to_owned));
        command.is_none_or(|command| !super::shell::is_read_only_command(&command))
    }

    fn run<'a>(&'a self, arguments: &'a str, _ctx: &'a ExecContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let ws = &self.workspace;
            match bash::run(&ws.root, &ws.config, arguments).await {
                Ok(out) => out,
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

/// The built-in tools working in `root` (already canonical) under `config`,
/// in the order they are offered: read, write, edit, bash, grep, glob, ls.
pub(super) fn registry(root: &Path, config: &ToolConfig) -> Registry {
    use cwl::ToolClass::{Bulk, Intermediate};
    let workspace = Arc::new(Workspace {
        root: root.to_owned(),
        config: config.clone(),
    });
    let file = |spec, mutating, class, run| -> Arc<dyn Tool> {
        Arc::new(FileTool {
            workspace: Arc::clone(&workspace),
            spec,
            mutating,
            class,
            run,
        })
    };
    let tools: [Arc<dyn Tool>; 7] = [
        file(read::spec, false, Intermediate, |r, c, _, a| {
            read::run(r, c, a)
        }),
        file(|_| write::spec(), true, Intermediate, write::run),
        file(|_| edit::spec(), true, Intermediate, edit::run),
        Arc::new(Bash {
            workspace: Arc::clone(&workspace),
        }),
        file(grep::spec, false, Bulk, |r, c, _, a| grep::run(r, c, a)),
        file(glob::spec, false, Bulk, |r, c, _, a| glob::run(r, c, a)),
        file(ls::spec, false, Bulk, |r, c, _, a| ls::run(r, c, a)),
    ];
    let mut registry = Registry::new();
    for tool in tools {
        registry
            .register(tool)
            .expect("the built-in tools have distinct, valid names");
    }
    registry
}
