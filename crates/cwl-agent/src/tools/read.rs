//! `read`: a window of a text file with line numbers.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::json;

use super::ToolConfig;
use super::args::Args;
use super::cap::shorten_line;
use super::error::ToolError;
use super::paths::ToolPath;

/// The tool's name.
pub(crate) const NAME: &str = "read";

/// The tool's definition for the model.
pub(crate) fn spec(cfg: &ToolConfig) -> cwl::ToolSpec {
    cwl::ToolSpec {
        name: NAME.to_owned(),
        description: format!(
            "Read a text file. Each output line is prefixed with its line number and a tab \
             (the prefix is not part of the file). Shows at most {} lines / {} bytes per call; \
             a notice at the end says which offset to use to continue.",
            cfg.read_max_lines, cfg.read_max_bytes
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace or absolute."},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based). Default 1."},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to show."}
            },
            "required": ["path"],
            "additionalProperties": false
        }),
    }
}

/// Runs the tool.
pub(crate) fn run(root: &Path, cfg: &ToolConfig, raw: &str) -> Result<String, ToolError> {
    let args = Args::parse(NAME, raw, &["path", "offset", "limit"])?;
    let target = ToolPath::new(root, args.string("path")?);
    let offset = args.opt_u64("offset")?.unwrap_or(1).max(1);
    let limit = match args.opt_u64("limit")? {
        Some(0) => return Err(args.error("limit", "must be at least 1")),
        Some(n) => n.min(cfg.read_max_lines as u64),
        None => cfg.read_max_lines as u64,
    };
    let io_err = |e| ToolError::io("read", &target.shown, e);
    let meta = std::fs::metadata(&target.path).map_err(io_err)?;
    if meta.is_dir() {
        return Err(ToolError::IsDirectory { path: target.shown });
    }
    let mut reader = BufReader::new(File::open(&target.path).map_err(io_err)?);
    if reader.fill_buf().map_err(io_err)?.contains(&0) {
        return Err(ToolError::Binary {
            path: target.shown,
            bytes: meta.len(),
        });
    }

    let mut out = String::new();
    let mut total = 0u64;
    let mut last_shown = 0u64;
    let mut byte_limited = false;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(io_err)? == 0 {
            break;
        }
        total += 1;
        let wanted = total >= offset && total < offset + limit;
        if !wanted || byte_limited {
            continue;
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        let line = format!("{total}\t{}\n", shorten_line(text, cfg.read_max_line_chars));
        if last_shown > 0 && out.len() + line.len() > cfg.read_max_bytes {
            byte_limited = true;
            continue;
        }
        out.push_str(&line);
        last_shown = total;
    }

    if total == 0 {
        return Ok(format!("(`{}` is empty)", target.shown));
    }
    if offset > total {
        return Err(args.error(
            "offset",
            &format!(
                "is {offset}, past the end of `{}` ({total} lines)",
                target.shown
            ),
        ));
    }
    if last_shown < total {
        let why = if byte_limited {
            format!(", output limit of {} bytes reached", cfg.read_max_bytes)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "[lines {offset}-{last_shown} of {total}{why}; use offset={} to continue]",
            last_shown + 1
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(content: &[u8]) -> (tempfile::TempDir, ToolConfig) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), content).unwrap();
        (dir, ToolConfig::default())
    }

    #[test]
    fn numbers_lines_and_windows_with_offset_and_limit() {
        let (dir, cfg) = setup(b"a\r\nb\nc\nd");
        let out = run(dir.path(), &cfg, r#"{"path":"f.txt"}"#).unwrap();
        assert_eq!(out, "1\ta\n2\tb\n3\tc\n4\td\n");
        let out = run(dir.path(), &cfg, r#"{"path":"f.txt","offset":2,"limit":2}"#).unwrap();
        assert_eq!(
            out,
            "2\tb\n3\tc\n[lines 2-3 of 4; use offset=4 to continue]"
        );
    }

    #[test]
    fn line_cap_gives_a_continuation_notice() {
        let text: String = (1..=30).map(|i| format!("l{i}\n")).collect();
        let (dir, mut cfg) = setup(text.as_bytes());
        cfg.read_max_lines = 10;
        let out = run(dir.path(), &cfg, r#"{"path":"f.txt","limit":50}"#).unwrap();
        assert!(out.starts_with("1\tl1\n"));
        assert!(
            out.ends_with("10\tl10\n[lines 1-10 of 30; use offset=11 to continue]"),
            "{out}"
        );
        let out = run(dir.path(), &cfg, r#"{"path":"f.txt","offset":25}"#).unwrap();
        assert!(out.ends_with("30\tl30\n"), "{out}");
    }

    #[test]
    fn byte_cap_and_long_lines() {
        let text: String = (1..=100).map(|i| format!("{i:0>20}\n")).collect();
        let (dir, mut cfg) = setup(text.as_bytes());
        cfg.read_max_bytes = 100;
        cfg.read_max_line_chars = 5;
        let out = run(dir.path(), &cfg, r#"{"path":"f.txt"}"#).unwrap();
        assert!(out.starts_with("1\t00000… [15 more chars]\n"), "{out}");
        assert!(
            out.ends_with(
                "[lines 1-3 of 100, output limit of 100 bytes reached; use offset=4 to continue]"
            ),
            "{out}"
        );
    }

    #[test]
    fn errors_for_missing_dirs_binaries_and_bad_offsets() {
        let (dir, cfg) = setup(b"x\0y");
        let root = dir.path();
        let e = run(root, &cfg, r#"{"path":"f.txt"}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "`f.txt` is a binary file (3 bytes); not shown");
        let e = run(root, &cfg, r#"{"path":"nope"}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "`nope` does not exist");
        let e = run(root, &cfg, r#"{"path":"."}"#).unwrap_err().to_string();
        assert_eq!(e, "`.` is a directory; use ls to list it");
        std::fs::write(root.join("g"), "a\n").unwrap();
        let e = run(root, &cfg, r#"{"path":"g","offset":5}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("field `offset` is 5, past the end of `g` (1 lines)"),
            "{e}"
        );
        let e = run(root, &cfg, r#"{"path":"g","limit":0}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `limit` must be at least 1"), "{e}");
        std::fs::write(root.join("empty"), "").unwrap();
        assert_eq!(
            run(root, &cfg, r#"{"path":"empty"}"#).unwrap(),
            "(`empty` is empty)"
        );
    }
}
