//! What a tool call touches — the paths it names and the symbols it
//! searches — and which earlier exploration an edit depends on.
//!
//! [`touch`] reads a call's arguments: paths from path-like keys
//! (`file_path`, `path`, `dir`...), from `apply_patch` headers
//! (`*** Update File: p`) and from the words of shell commands that look
//! like paths (a `/` or a file extension); symbols from search keys
//! (`pattern`, `query`, `regex`...) and from the other words of shell
//! commands, as identifier runs of four characters or more. [`Footprints`]
//! indexes what closed expl episodes touched and answers, for the calls of
//! a mutating step, which of them it depends on (see [`crate`]).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

/// Keys whose string value is a path.
const PATH_KEYS: &[&str] = &[
    "file_path",
    "path",
    "filePath",
    "filename",
    "file",
    "target_file",
    "notebook_path",
    "dir",
    "directory",
    "dir_path",
    "paths",
    "file_paths",
];

/// Keys whose string value is a search pattern.
const PATTERN_KEYS: &[&str] = &["pattern", "query", "regex", "search", "q", "glob"];

/// Keys whose string value is a shell command.
const COMMAND_KEYS: &[&str] = &["command", "cmd", "script"];

/// Shortest identifier run that counts as a symbol.
const MIN_SYMBOL: usize = 4;

/// What one call touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touch {
    /// Paths it names, normalized (no `./`, no trailing `/`).
    pub paths: Vec<String>,
    /// Symbols it searches: of search patterns and shell operands.
    pub symbols: Vec<String>,
    /// All string values of its arguments, whose identifier runs are
    /// matched against the symbols explorations searched.
    pub text: String,
}

/// What the call `arguments` (JSON, or raw text) touch.
pub fn touch(arguments: &str) -> Touch {
    let mut out = Touch::default();
    match serde_json::from_str::<Value>(arguments) {
        Ok(value) => walk(&value, None, &mut out),
        Err(_) => string(arguments, None, &mut out),
    }
    out.paths.sort();
    out.paths.dedup();
    out.symbols.sort();
    out.symbols.dedup();
    out
}

fn walk(value: &Value, key: Option<&str>, out: &mut Touch) {
    match value {
        Value::String(s) => string(s, key, out),
        Value::Array(items) if key.is_some_and(|k| COMMAND_KEYS.contains(&k)) => {
            let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            let script = match words.as_slice() {
                [shell, flag, script] if shell.ends_with("sh") && flag.starts_with('-') => {
                    script.to_string()
                }
                _ => words.join(" "),
            };
            string(&script, key, out);
        }
        Value::Array(items) => items.iter().for_each(|v| walk(v, key, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| walk(v, Some(k), out)),
        _ => {}
    }
}

fn string(s: &str, key: Option<&str>, out: &mut Touch) {
    out.text.push_str(s);
    out.text.push('\n');
    match key {
        Some(k) if PATH_KEYS.contains(&k) => out.paths.extend(normalize(s)),
        Some(k) if PATTERN_KEYS.contains(&k) => out.symbols.extend(symbols(s)),
        Some(k) if COMMAND_KEYS.contains(&k) => shell_words(s, out),
        _ => {}
    }
    for line in s.lines() {
        for header in ["*** Update File:", "*** Add File:", "*** Delete File:"] {
            if let Some(path) = line.strip_prefix(header) {
                out.paths.extend(normalize(path));
            }
        }
    }
}

/// Commands whose operands are all paths.
const PATH_COMMANDS: &[&str] = &[
    "ls", "ll", "la", "tree", "find", "fd", "cat", "head", "tail", "less", "more", "bat", "wc",
    "stat", "file", "du", "cd", "nl", "realpath",
];

/// Commands whose first operand is a pattern and the rest paths.
const SEARCH_COMMANDS: &[&str] = &["grep", "egrep", "fgrep", "rg", "ag", "ack"];

/// The paths and symbols among a shell command's words. Command names and
/// flags are skipped; operands of listing and reading commands are paths,
/// the first operand of a search command is a pattern, and any other word
/// is a path when it looks like one (a `/` or a file extension).
fn shell_words(command: &str, out: &mut Touch) {
    let words = shlex::split(command)
        .unwrap_or_else(|| command.split_whitespace().map(str::to_string).collect());
    let mut program: Option<&str> = None;
    let mut operands = 0;
    for word in &words {
        if ["|", "||", "&&", ";", "&"].contains(&word.as_str()) {
            program = None;
            continue;
        }
        let Some(name) = program else {
            program = Some(word.rsplit('/').next().unwrap_or(word));
            operands = 0;
            continue;
        };
        if word.starts_with('-') {
            continue;
        }
        operands += 1;
        let is_pattern = SEARCH_COMMANDS.contains(&name) && operands == 1;
        if !is_pattern && (PATH_COMMANDS.contains(&name) || looks_like_path(word)) {
            out.paths.extend(normalize(word));
        } else {
            out.symbols.extend(symbols(word));
        }
    }
}

fn looks_like_path(word: &str) -> bool {
    let sed = word.starts_with("s/") && word.matches('/').count() >= 3;
    if sed
        || word.contains(['$', '*', '=', ',', '\'', '"', '(', '{', '<', '>'])
        || word.contains("://")
    {
        return false;
    }
    let last = word.rsplit('/').next().unwrap_or("");
    word.contains('/')
        || last.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

/// `path` without surrounding space, a leading `./` or a trailing `/`;
/// `None` for the trivial ones (`.`, `/`, `~`, empty).
fn normalize(path: &str) -> Option<String> {
    let mut p = path.trim();
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    let p = p.trim_end_matches('/');
    (!matches!(p, "" | "." | ".." | "~")).then(|| p.to_string())
}

/// Identifier runs of at least [`MIN_SYMBOL`] characters that start with a
/// letter or `_`.
fn symbols(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            w.len() >= MIN_SYMBOL
                && w.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
        .map(str::to_string)
        .collect()
}

/// Whether `a` and `b` name the same file: equal, or one is the other
/// with more leading directories (an absolute and a relative spelling).
fn same_path(a: &str, b: &str) -> bool {
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    long == short || (long.ends_with(short) && long[..long.len() - short.len()].ends_with('/'))
}

/// Whether `path` lies under directory `dir` (however either is spelled).
fn under(path: &str, dir: &str) -> bool {
    path.match_indices(dir).any(|(at, _)| {
        (at == 0 || path[..at].ends_with('/'))
            && path[at + dir.len()..].starts_with('/')
            && path.len() > at + dir.len() + 1
    })
}

/// What closed expl episodes touched, indexed for dependency lookups.
#[derive(Debug, Default)]
pub struct Footprints {
    names: Vec<String>,
    by_file_name: HashMap<String, Vec<(String, usize)>>,
    dirs: HashMap<String, usize>,
    symbols: HashMap<String, usize>,
}

impl Footprints {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a closed expl episode `name` whose calls touched `touches`.
    pub fn add(&mut self, name: &str, touches: &[Touch]) {
        let index = self.names.len();
        self.names.push(name.to_string());
        for touch in touches {
            for path in &touch.paths {
                let file = path.rsplit('/').next().unwrap_or(path).to_string();
                let entries = self.by_file_name.entry(file).or_default();
                match entries.iter_mut().find(|(p, _)| p == path) {
                    Some(entry) => entry.1 = index,
                    None => entries.push((path.clone(), index)),
                }
                self.dirs.insert(path.clone(), index);
            }
            for symbol in &touch.symbols {
                self.symbols.insert(symbol.clone(), index);
            }
        }
    }

    /// The most recent expl episode, if any.
    pub fn latest(&self) -> Option<&str> {
        self.names.last().map(String::as_str)
    }

    /// The expl episodes that calls touching `touches` depend on, oldest
    /// first: for each path, the latest expl that touched the same file,
    /// or else the one that listed or searched its deepest known directory;
    /// for each identifier run of the calls' arguments that an expl
    /// searched as a symbol, the latest such expl. Empty when they touch
    /// nothing known.
    pub fn dependencies(&self, touches: &[Touch]) -> Vec<String> {
        let mut found = BTreeSet::new();
        for touch in touches {
            for path in &touch.paths {
                let file = path.rsplit('/').next().unwrap_or(path);
                let exact = self
                    .by_file_name
                    .get(file)
                    .into_iter()
                    .flatten()
                    .filter(|(p, _)| same_path(p, path))
                    .map(|(_, i)| *i)
                    .max();
                let in_dir = || {
                    self.dirs
                        .iter()
                        .filter(|(dir, _)| under(path, dir))
                        .max_by_key(|(dir, i)| (dir.len(), **i))
                        .map(|(_, i)| *i)
                };
                found.extend(exact.or_else(in_dir));
            }
            found.extend(
                symbols(&touch.text)
                    .iter()
                    .filter_map(|word| self.symbols.get(word).copied()),
            );
        }
        found.into_iter().map(|i| self.names[i].clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_paths_symbols_and_commands() {
        let t = touch(r#"{"file_path":"./src/a.rs"}"#);
        assert_eq!(t.paths, ["src/a.rs"]);
        let t = touch(r#"{"pattern":"fn\\s+compute_sum","path":"src/"}"#);
        assert_eq!(
            (t.paths.as_slice(), t.symbols.as_slice()),
            (&["src".to_string()][..], &["compute_sum".to_string()][..])
        );
        let t = touch(r#"{"command":"grep -rn parse_budget crates/cwl | head -5"}"#);
        assert_eq!(t.paths, ["crates/cwl"]);
        assert_eq!(t.symbols, ["parse_budget"]);
        let t = touch(r#"{"command":["bash","-lc","sed -i 's/x/y/' src/lib.rs && cargo test"]}"#);
        assert_eq!(t.paths, ["src/lib.rs"]);
        let t = touch("*** Begin Patch\n*** Update File: src/main.rs\n@@\n-a\n+b\n*** End Patch");
        assert_eq!(t.paths, ["src/main.rs"]);
        assert!(
            touch(r#"{"path":"."}"#).paths.is_empty(),
            "the root is no footprint"
        );
    }

    #[test]
    fn paths_match_across_spellings_and_directories() {
        assert!(same_path("/home/u/repo/src/a.rs", "src/a.rs"));
        assert!(!same_path("src/ba.rs", "a.rs"));
        assert!(under("src/net/http.rs", "src/net"));
        assert!(under("/home/u/repo/src/net/http.rs", "src/net"));
        assert!(!under("src/network.rs", "src/net"));
    }

    #[test]
    fn an_edit_depends_on_what_it_touches() {
        let mut f = Footprints::new();
        f.add("read-a", &[touch(r#"{"path":"src/a.rs"}"#)]);
        f.add("list-net", &[touch(r#"{"command":"ls src/net"}"#)]);
        f.add("grep-sum", &[touch(r#"{"pattern":"compute_sum"}"#)]);
        f.add("read-b", &[touch(r#"{"path":"src/b.rs"}"#)]);
        f.add("list-root", &[touch(r#"{"command":"ls src"}"#)]);
        let deps = |args: &str| f.dependencies(&[touch(args)]);
        assert_eq!(
            deps(r#"{"path":"/repo/src/a.rs","old_string":"x"}"#),
            ["read-a"]
        );
        assert_eq!(
            deps(r#"{"path":"src/net/new.rs","content":"x"}"#),
            ["list-net"],
            "deepest directory"
        );
        assert_eq!(
            deps(r#"{"path":"src/a.rs","old_string":"compute_sum(1)"}"#),
            ["read-a", "grep-sum"]
        );
        assert!(deps(r#"{"command":"cargo test"}"#).is_empty());
        f.add("read-a-again", &[touch(r#"{"path":"src/a.rs"}"#)]);
        assert_eq!(
            f.dependencies(&[touch(r#"{"path":"src/a.rs"}"#)]),
            ["read-a-again"],
            "the latest read"
        );
    }
}
