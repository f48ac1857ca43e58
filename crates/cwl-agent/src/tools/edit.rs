//! `edit`: replace one exact, unique occurrence of a text in a file. The
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
pub(crate) const NAME: &str = "edit";

/// How many match locations an ambiguity error lists.
const MAX_LISTED: usize = 10;

/// The tool's definition for the model.
pub(crate) fn spec() -> cwl::ToolSpec {
    cwl::ToolSpec {
        name: NAME.to_owned(),
        description: "Replace exactly one occurrence of old_text in a file with new_text. \
                      old_text must match the file exactly (including whitespace) and occur \
                      exactly once; include enough surrounding lines to make it unique."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace or absolute."},
                "old_text": {"type": "string", "description": "The exact text to replace; must occur exactly once."},
                "new_text": {"type": "string", "description": "The replacement text."}
            },
            "required": ["path", "old_text", "new_text"],
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
    let args = Args::parse(NAME, raw, &["path", "old_text", "new_text"])?;
    let target = ToolPath::new(root, args.string("path")?);
    let old = args.string("old_text")?;
    let new = args.string("new_text")?;
    if old.is_empty() {
        return Err(args.error(
            "old_text",
            "must not be empty; use write to create or replace a whole file",
        ));
    }
    if old == new {
        return Err(args.error("new_text", "is identical to `old_text`; nothing to change"));
    }
    let real = mutation_target(NAME, root, cfg, ctx, &target)?;
    if real.is_dir() {
        return Err(ToolError::IsDirectory { path: target.shown });
    }
    let bytes = fs::read(&real).map_err(|e| ToolError::io("read", &target.shown, e))?;
    let content = String::from_utf8(bytes).map_err(|_| {
        ToolError::Other(format!(
            "`{}` is not valid UTF-8 text; edit cannot change it",
            target.shown
        ))
    })?;

    let (old, new) = match matches(&content, old).len() {
        0 if content.contains("\r\n") && old.contains('\n') && !old.contains('\r') => {
            (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"))
        }
        _ => (old.to_owned(), new.to_owned()),
    };
    let found = matches(&content, &old);
    match found.as_slice() {
        [] => Err(ToolError::Other(format!(
            "`old_text` was not found in `{}`; {}",
            target.shown,
            not_found_hint(&content, &old)
        ))),
        [at] => {
            let line = line_of(&content, *at);
            let updated = format!("{}{new}{}", &content[..*at], &content[at + old.len()..]);
            replace_file(&real, updated.as_bytes())
                .map_err(|e| ToolError::io("write", &target.shown, e))?;
            Ok(format!(
                "edited `{}`: replaced {} lines with {} lines at line {line}",
                target.shown,
                line_count(&old),
                line_count(&new)
            ))
        }
        many => {
            let mut lines: Vec<String> = many
                .iter()
                .take(MAX_LISTED)
                .map(|&at| line_of(&content, at).to_string())
                .collect();
            if many.len() > MAX_LISTED {
                lines.push("…".to_owned());
            }
            Err(ToolError::Other(format!(
                "`old_text` is ambiguous: it matches {} times in `{}` (at lines {}); include more \
                 surrounding lines to make it unique",
                many.len(),
                target.shown,
                lines.join(", ")
            )))
        }
    }
}

fn matches(content: &str, needle: &str) -> Vec<usize> {
    content.match_indices(needle).map(|(i, _)| i).collect()
}

fn line_of(content: &str, at: usize) -> usize {
    content[..at].matches('\n').count() + 1
}

fn line_count(text: &str) -> usize {
    text.lines().count().max(1)
}

/// Points at a place that matches when surrounding whitespace is ignored,
/// the usual cause of a failed edit.
fn not_found_hint(content: &str, old: &str) -> String {
    let want: Vec<&str> = old.lines().map(str::trim).collect();
    let have: Vec<&str> = content.lines().map(str::trim).collect();
    if want.iter().any(|l| !l.is_empty())
        && want.len() <= have.len()
        && let Some(start) = have.windows(want.len()).position(|w| w == want.as_slice())
    {
        return format!(
            "lines {}-{} match when leading/trailing whitespace is ignored; copy the exact \
                 text (read the file again)",
            start + 1,
            start + want.len()
        );
    }
    "read the file and copy the exact text, including whitespace".to_owned()
}
