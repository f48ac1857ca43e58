//! `ls`: list one directory, respecting `.gitignore`.

use std::path::Path;

use serde_json::json;

use super::ToolConfig;
use super::args::Args;
use super::error::ToolError;
use super::paths::ToolPath;
use super::walk::walker;

/// The tool's name.
pub(crate) const NAME: &str = "ls";

/// The tool's definition for the model.
pub(crate) fn spec(cfg: &ToolConfig) -> cwl::ToolSpec {
    cwl::ToolSpec {
        name: NAME.to_owned(),
        description: format!(
            "List a directory's entries, sorted by name; directories end with `/`. Entries \
             ignored by .gitignore (and .git) are left out and counted. Lists at most {} entries.",
            cfg.list_max_entries
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list. Default: the workspace."}
            },
            "additionalProperties": false
        }),
    }
}

/// Runs the tool.
pub(crate) fn run(root: &Path, cfg: &ToolConfig, raw: &str) -> Result<String, ToolError> {
    let args = Args::parse(NAME, raw, &["path"])?;
    let dir = ToolPath::new(root, args.opt_string("path")?.unwrap_or("."));
    let io_err = |e| ToolError::io("list", &dir.shown, e);
    let meta = std::fs::metadata(&dir.path).map_err(io_err)?;
    if !meta.is_dir() {
        return Err(ToolError::NotDirectory { path: dir.shown });
    }
    let present = std::fs::read_dir(&dir.path).map_err(io_err)?.count();

    let mut out = String::new();
    let (mut listed, mut shown) = (0usize, 0usize);
    for entry in walker(&dir.path, Some(1)) {
        let Ok(entry) = entry else { continue };
        if entry.depth() != 1 {
            continue;
        }
        listed += 1;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            name.push('/');
        }
        if shown < cfg.list_max_entries && out.len() + name.len() < cfg.max_output_bytes {
            out.push_str(&name);
            out.push('\n');
            shown += 1;
        }
    }

    if listed == 0 {
        out = format!("`{}` has no entries to show\n", dir.shown);
    } else if shown < listed {
        out.push_str(&format!(
            "[showing {shown} of {listed} entries; use glob or a subdirectory to see the rest]\n"
        ));
    }
    let ignored = present.saturating_sub(listed);
    if ignored > 0 {
        out.push_str(&format!(
            "[{ignored} ignored entries not shown (.gitignore, .git)]\n"
        ));
    }
    Ok(out)
}
