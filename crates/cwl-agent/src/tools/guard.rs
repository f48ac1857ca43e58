//! The checks every file-mutating tool passes before touching the disk.

use std::path::{Path, PathBuf};

use super::error::ToolError;
use super::paths::{ToolPath, real_target};
use super::{ExecContext, ToolConfig};

/// Refuses `tool` inside an exploration episode (unless configured) and
/// outside the workspace root (unless configured); returns the real target.
pub(crate) fn mutation_target(
    tool: &'static str,
    root: &Path,
    cfg: &ToolConfig,
    ctx: &ExecContext,
    path: &ToolPath,
) -> Result<PathBuf, ToolError> {
    if let Some(episode) = &ctx.exploration
        && !cfg.allow_writes_in_exploration
    {
        return Err(ToolError::InExploration {
            tool,
            episode: episode.clone(),
        });
    }
    let real = real_target(path)?;
    if !cfg.allow_outside_writes && !real.starts_with(root) {
        return Err(ToolError::OutsideRoot {
            tool,
            path: real.display().to_string(),
            root: root.display().to_string(),
        });
    }
    Ok(real)
}
