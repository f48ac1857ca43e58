//! `write`: create or overwrite a file, creating parent directories. The
//! file is replaced by a temp file and a rename (see [`super::replace`]).

use std::fs;
use std::path::Path;

use serde_json::json;

use super::args::Args;
use super::error::ToolError;
use super::guard::mutation_target;
use super::paths::ToolPath;
use super::replace::replace_file;
use super::{ExecContext, ToolConfig};

/// The tool's name.
pub(crate) const NAME: &str = "write";

/// The tool's definition for the model.
pub(crate) fn spec() -> cwl::ToolSpec {
    cwl::ToolSpec {
        name: NAME.to_owned(),
        description: "Create or overwrite a file with the given content, creating missing parent \
                      directories. Prefer edit for changing part of an existing file."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace or absolute."},
                "content": {"type": "string", "description": "The complete new content of the file."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }),
    }
}

/// Runs the tool.
pub(crate) fn run(
    root: &Path,
    cfg: &ToolConfig,
    ctx: &ExecContext,
    raw: &str,
) -> Result<String, ToolError> {
    let args = Args::parse(NAME, raw, &["path", "content"])?;
    let target = ToolPath::new(root, args.string("path")?);
    let content = args.string("content")?;
    let real = mutation_target(NAME, root, cfg, ctx, &target)?;
    let existed = match fs::metadata(&real) {
        Ok(m) if m.is_dir() => return Err(ToolError::IsDirectory { path: target.shown }),
        Ok(_) => true,
        Err(_) => false,
    };
    if let Some(parent) = real.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| ToolError::io("create the parent directory of", &target.shown, e))?;
    }
    replace_file(&real, content.as_bytes())
        .map_err(|e| ToolError::io("write", &target.shown, e))?;
    let lines = content.lines().count();
    let verb = if existed { "overwrote" } else { "created" };
    Ok(format!(
        "{verb} `{}` ({lines} lines, {} bytes)",
        target.shown,
        content.len()
    ))
}
