//! `glob`: find files by name pattern, respecting `.gitignore`.

use std::path::Path;

use serde_json::json;

use super::ToolConfig;
use super::args::Args;
use super::error::ToolError;
use super::paths::{ToolPath, display};
use super::walk::{PathPattern, walker};

/// The tool's name.
pub(crate) const NAME: &str = "glob";

/// The tool's definition for the model.
pub(crate) fn spec(cfg: &ToolConfig) -> cwl::ToolSpec {
    cwl::ToolSpec {
        name: NAME.to_owned(),
        description: format!(
            "Find files whose path matches a glob. A pattern without `/` matches file names at \
             any depth (`*.rs`); one with `/` matches the path relative to `path` \
             (`src/**/*.rs`); `*` stays within a directory, `**` crosses directories. Skips \
             files ignored by .gitignore. Lists at most {} paths, sorted.",
            cfg.list_max_entries
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The glob to match."},
                "path": {"type": "string", "description": "Directory to search. Default: the workspace."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        }),
    }
}

/// Runs the tool.
pub(crate) fn run(root: &Path, cfg: &ToolConfig, raw: &str) -> Result<String, ToolError> {
    let args = Args::parse(NAME, raw, &["pattern", "path"])?;
    let pattern_text = args.string("pattern")?;
    let pattern = PathPattern::new(pattern_text)
        .map_err(|e| args.error("pattern", &format!("is invalid: {e}")))?;
    let base = ToolPath::new(root, args.opt_string("path")?.unwrap_or("."));
    let meta =
        std::fs::metadata(&base.path).map_err(|e| ToolError::io("search", &base.shown, e))?;
    if !meta.is_dir() {
        return Err(ToolError::NotDirectory { path: base.shown });
    }

    let mut out = String::new();
    let (mut total, mut shown, mut unreadable) = (0usize, 0usize, 0usize);
    for entry in walker(&base.path, None) {
        let Ok(entry) = entry else {
            unreadable += 1;
            continue;
        };
        if entry.depth() == 0 || entry.file_type().is_none_or(|t| t.is_dir()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(&base.path) else {
            continue;
        };
        if !pattern.matches(rel) {
            continue;
        }
        total += 1;
        let line = display(root, entry.path());
        if shown < cfg.list_max_entries && out.len() + line.len() < cfg.max_output_bytes {
            out.push_str(&line);
            out.push('\n');
            shown += 1;
        }
    }

    if total == 0 {
        out = format!("no files match `{pattern_text}` in `{}`\n", base.shown);
    } else if shown < total {
        out.push_str(&format!(
            "[showing {shown} of {total} paths; use a narrower pattern or path to see the rest]\n"
        ));
    }
    if unreadable > 0 {
        out.push_str(&format!("[{unreadable} directories could not be read]\n"));
    }
    Ok(out)
}
