//! Deterministic, ignore-aware directory walking shared by grep, glob and ls.

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;

/// A walker over `path` that honours `.gitignore` (also outside a git
/// repository), `.ignore` and `.git/info/exclude`, shows hidden files but
/// never descends into `.git`, and yields entries sorted by path.
pub(crate) fn walker(path: &Path, max_depth: Option<usize>) -> ignore::Walk {
    WalkBuilder::new(path)
        .hidden(false)
        .require_git(false)
        .git_global(false)
        .max_depth(max_depth)
        .filter_entry(|e| e.file_name() != ".git")
        .sort_by_file_path(|a, b| a.cmp(b))
        .build()
}

/// A file pattern: without a `/` it matches a file name at any depth
/// (`*.rs`); with one it matches the path relative to the search directory
/// (`src/**/*.rs`). `*` never crosses `/`; `**` does.
pub(crate) struct PathPattern {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathPattern {
    /// Compiles `pattern`; the error text says what is wrong with it.
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        let trimmed = pattern.strip_prefix("./").unwrap_or(pattern);
        if trimmed.is_empty() {
            return Err("the pattern is empty".to_owned());
        }
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("invalid glob `{pattern}`: {}", e.kind()))?;
        Ok(PathPattern {
            matcher: glob.compile_matcher(),
            by_name: !trimmed.contains('/'),
        })
    }

    /// Whether `rel` (relative to the search directory) matches.
    pub(crate) fn matches(&self, rel: &Path) -> bool {
        if self.by_name {
            rel.file_name().is_some_and(|n| self.matcher.is_match(n))
        } else {
            self.matcher.is_match(rel)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_without_slash_match_names_at_any_depth() {
        let p = PathPattern::new("*.rs").unwrap();
        assert!(p.matches(Path::new("a.rs")));
        assert!(p.matches(Path::new("src/deep/a.rs")));
        assert!(!p.matches(Path::new("src/a.rsx")));
    }

    #[test]
    fn patterns_with_slash_match_relative_paths() {
        let p = PathPattern::new("src/*.rs").unwrap();
        assert!(p.matches(Path::new("src/a.rs")));
        assert!(!p.matches(Path::new("src/deep/a.rs")));
        let p = PathPattern::new("./**/deep/*.rs").unwrap();
        assert!(p.matches(Path::new("src/deep/a.rs")));
        assert!(p.matches(Path::new("deep/a.rs")));
    }

    #[test]
    fn bad_patterns_are_explained() {
        let e = PathPattern::new("src/[a").err().unwrap();
        assert!(e.starts_with("invalid glob `src/[a`"), "{e}");
        assert_eq!(PathPattern::new("").err().unwrap(), "the pattern is empty");
    }
}
