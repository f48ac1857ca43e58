//! `grep`: regex search over files, respecting `.gitignore`.

use std::path::Path;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde_json::json;

use super::ToolConfig;
use super::args::Args;
use super::cap::shorten_line;
use super::error::ToolError;
use super::paths::{ToolPath, display};
use super::walk::{PathPattern, walker};

/// The tool's name.
pub(crate) const NAME: &str = "grep";

/// The tool's definition for the model.
pub(crate) fn spec(cfg: &ToolConfig) -> cwl::ToolSpec {
    cwl::ToolSpec {
        name: NAME.to_owned(),
        description: format!(
            "Search file contents with a regular expression (Rust regex syntax; prefix (?i) for \
             case-insensitive). Skips files ignored by .gitignore and binary files. Output: \
             each matching file's path, then its matching lines as `line:text`, sorted by path. \
             Shows at most {} matching lines.",
            cfg.grep_max_matches
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The regular expression to search for."},
                "path": {"type": "string", "description": "File or directory to search. Default: the workspace."},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.rs` (file name at any depth) or `src/**/*.rs` (path relative to `path`)."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        }),
    }
}

/// Runs the tool.
pub(crate) fn run(root: &Path, cfg: &ToolConfig, raw: &str) -> Result<String, ToolError> {
    let args = Args::parse(NAME, raw, &["pattern", "path", "glob"])?;
    let pattern = args.string("pattern")?;
    let base = ToolPath::new(root, args.opt_string("path")?.unwrap_or("."));
    let filter = match args.opt_string("glob")? {
        Some(g) => {
            Some(PathPattern::new(g).map_err(|e| args.error("glob", &format!("is invalid: {e}")))?)
        }
        None => None,
    };
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(|e| args.error("pattern", &format!("is not a valid regex: {e}")))?;
    std::fs::metadata(&base.path).map_err(|e| ToolError::io("search", &base.shown, e))?;

    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let mut out = String::new();
    let (mut total, mut shown, mut files, mut unreadable) = (0usize, 0usize, 0usize, 0usize);
    for entry in walker(&base.path, None) {
        let Ok(entry) = entry else {
            unreadable += 1;
            continue;
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = match entry.path().strip_prefix(&base.path) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel,
            _ => Path::new(entry.file_name()),
        };
        if filter.as_ref().is_some_and(|f| !f.matches(rel)) {
            continue;
        }
        let room = cfg.grep_max_matches - shown;
        let mut hits: Vec<String> = Vec::new();
        let mut count = 0usize;
        let result = searcher.search_path(
            &matcher,
            entry.path(),
            Lossy(|line_no, line| {
                count += 1;
                if hits.len() >= room {
                    return Ok(true);
                }
                let text = line.trim_end_matches('\n').trim_end_matches('\r');
                hits.push(format!(
                    "{line_no}:{}\n",
                    shorten_line(text, cfg.grep_max_line_chars)
                ));
                Ok(true)
            }),
        );
        if result.is_err() {
            unreadable += 1;
            continue;
        }
        if count == 0 {
            continue;
        }
        files += 1;
        total += count;
        let mut header = false;
        for hit in hits {
            if shown >= cfg.grep_max_matches || out.len() + hit.len() > cfg.max_output_bytes {
                break;
            }
            if !header {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&display(root, entry.path()));
                out.push('\n');
                header = true;
            }
            out.push_str(&hit);
            shown += 1;
        }
    }

    if total == 0 {
        out = format!("no matches for `{pattern}` in `{}`", base.shown);
        if let Some(g) = args.opt_string("glob")? {
            out.push_str(&format!(" (files matching `{g}`)"));
        }
        out.push('\n');
    } else if shown < total {
        out.push_str(&format!(
            "[showing {shown} of {total} matching lines in {files} files; narrow the pattern, \
             path or glob to see the rest]\n"
        ));
    }
    if unreadable > 0 {
        out.push_str(&format!(
            "[{unreadable} files or directories could not be read]\n"
        ));
    }
    Ok(out)
}
