//! Is a shell command read-only? A conservative, purely lexical check:
//! every command of every pipeline segment must be a known read-only
//! command (`cat`, `ls`, `grep`, `git status`...) and nothing may be
//! redirected into a file. Anything unknown counts as mutating.

/// Commands that only read, whatever their arguments (with the exceptions
/// handled in [`segment_is_read_only`]).
const READ_ONLY: &[&str] = &[
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "bat",
    "ls",
    "ll",
    "la",
    "exa",
    "eza",
    "tree",
    "find",
    "fd",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "ack",
    "wc",
    "file",
    "stat",
    "du",
    "df",
    "pwd",
    "echo",
    "printf",
    "which",
    "whereis",
    "type",
    "whoami",
    "id",
    "hostname",
    "uname",
    "date",
    "env",
    "printenv",
    "sort",
    "uniq",
    "cut",
    "tr",
    "nl",
    "column",
    "realpath",
    "readlink",
    "basename",
    "dirname",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "shasum",
    "cksum",
    "xxd",
    "hexdump",
    "od",
    "strings",
    "test",
    "[",
    "true",
    "false",
    "cd",
    "pushd",
    "popd",
    "jq",
    "yq",
    "diff",
    "cmp",
    "comm",
    "sed",
    "awk",
    "gawk",
    "ps",
    "free",
    "uptime",
    "lsof",
    "look",
    "fold",
    "rev",
    "tac",
    "paste",
    "expand",
    "seq",
    "sleep",
    "ldd",
    "nm",
    "objdump",
    "readelf",
    "locate",
];

/// Read-only `git` subcommands.
const GIT_READ_ONLY: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "grep",
    "ls-files",
    "ls-tree",
    "rev-parse",
    "describe",
    "shortlog",
    "cat-file",
    "rev-list",
    "whatchanged",
    "merge-base",
    "name-rev",
    "show-ref",
    "for-each-ref",
    "help",
    "version",
];

/// Wrappers that run the command after them.
const WRAPPERS: &[&str] = &[
    "sudo", "time", "nice", "nohup", "command", "builtin", "exec", "xargs",
];

/// Whether running `command` in a shell only reads.
pub fn is_read_only(command: &str) -> bool {
    let Some(segments) = split(command) else {
        return false;
    };
    let mut any = false;
    for segment in segments {
        let segment = segment.trim();
        if segment.is_empty() {
            continue;
        }
        any = true;
        if !segment_is_read_only(segment) {
            return false;
        }
    }
    any
}

/// Splits at unquoted `;`, `&&`, `||`, `|`, `&`, newlines and command
/// substitutions. `None` when quoting is unbalanced or output is
/// redirected into a file.
fn split(command: &str) -> Option<Vec<String>> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut chars = command.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some('\'') => {
                current.push(c);
                if c == '\'' {
                    quote = None;
                }
            }
            Some(_) => {
                current.push(c);
                if c == '\\' {
                    if let Some(next) = chars.next() {
                        current.push(next);
                    }
                } else if c == '"' {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    current.push(c);
                }
                '\\' => {
                    current.push(c);
                    if let Some(next) = chars.next() {
                        current.push(next);
                    }
                }
                ';' | '|' | '&' | '\n' | '`' | '(' | ')' => {
                    if c == '&' && (current.ends_with('>') || chars.peek() == Some(&'>')) {
                        current.push(c);
                        continue;
                    }
                    segments.push(std::mem::take(&mut current));
                }
                '$' if chars.peek() == Some(&'(') => {
                    segments.push(std::mem::take(&mut current));
                }
                '>' => {
                    if !redirect_is_harmless(&mut chars) {
                        return None;
                    }
                    current.push(' ');
                }
                _ => current.push(c),
            },
        }
    }
    if quote.is_some() {
        return None;
    }
    segments.push(current);
    Some(segments)
}

/// After an unquoted `>`: whether the redirection goes nowhere that
/// matters (`/dev/null`, another descriptor). Consumes the target.
fn redirect_is_harmless(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    if chars.peek() == Some(&'>') {
        chars.next();
    }
    if chars.peek() == Some(&'&') {
        chars.next();
        let mut target = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_ascii_digit() || c == '-' {
                target.push(c);
                chars.next();
            } else {
                break;
            }
        }
        return !target.is_empty();
    }
    while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
        chars.next();
    }
    let mut target = String::new();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() || matches!(c, ';' | '|' | '&' | ')') {
            break;
        }
        target.push(c);
        chars.next();
    }
    target == "/dev/null"
}

fn segment_is_read_only(segment: &str) -> bool {
    let Some(words) = shlex::split(segment) else {
        return false;
    };
    let mut words = words.into_iter().peekable();
    while words
        .peek()
        .is_some_and(|w| is_assignment(w) || w == "!" || w == "{" || w == "}")
    {
        words.next();
    }
    let mut words: Vec<String> = words.collect();
    while let Some(first) = words.first() {
        let name = base_name(first);
        if WRAPPERS.contains(&name) {
            words.remove(0);
            while words.first().is_some_and(|w| w.starts_with('-')) {
                words.remove(0);
            }
        } else if name == "timeout" {
            words.remove(0);
            while words.first().is_some_and(|w| w.starts_with('-')) {
                words.remove(0);
            }
            if !words.is_empty() {
                words.remove(0);
            }
        } else {
            break;
        }
    }
    let Some(first) = words.first() else {
        return true;
    };
    let name = base_name(first);
    let args = &words[1..];
    if args.len() == 1 && matches!(args[0].as_str(), "--version" | "-V" | "--help" | "-h") {
        return true;
    }
    match name {
        "git" => git_is_read_only(args),
        "find" => !args.iter().any(|a| {
            matches!(
                a.as_str(),
                "-delete"
                    | "-exec"
                    | "-execdir"
                    | "-ok"
                    | "-okdir"
                    | "-fprint"
                    | "-fprintf"
                    | "-fls"
            )
        }),
        "sed" => !args
            .iter()
            .any(|a| a.starts_with("-i") || a == "--in-place"),
        "sort" => !args.iter().any(|a| a == "-o" || a.starts_with("--output")),
        "env" | "printenv" => args.iter().all(|a| a.starts_with('-') || is_assignment(a)),
        _ => READ_ONLY.contains(&name),
    }
}

fn git_is_read_only(args: &[String]) -> bool {
    let mut rest = args.iter().skip_while(|a| a.starts_with('-'));
    let Some(sub) = rest.next() else {
        return true;
    };
    let rest: Vec<&String> = rest.collect();
    let only_flags = rest.iter().all(|a| a.starts_with('-'));
    match sub.as_str() {
        "branch" | "tag" | "remote" => only_flags,
        "stash" => rest.first().is_some_and(|a| *a == "list" || *a == "show"),
        "config" => rest
            .iter()
            .any(|a| matches!(a.as_str(), "--get" | "--list" | "-l" | "--get-all")),
        "reflog" => rest.first().is_none_or(|a| *a == "show"),
        other => GIT_READ_ONLY.contains(&other),
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use super::is_read_only;

    #[test]
    fn read_only_commands() {
        for command in [
            "cat src/main.rs",
            "ls -la",
            "grep -rn 'foo' src | head -20",
            "git status",
            "git log --oneline -5 && git diff HEAD~1",
            "cd /repo && find . -name '*.rs' | wc -l",
            "sed -n '10,20p' file.py",
            "rg foo 2>/dev/null",
            "cat a.txt 2>&1 | less",
            "FOO=1 ls",
            "echo $(pwd)",
            "git branch",
            "python --version",
            "nl -ba django/db/models.py | sed -n '1,80p'",
        ] {
            assert!(is_read_only(command), "{command}");
        }
    }

    #[test]
    fn mutating_commands() {
        for command in [
            "rm -rf build",
            "echo hi > out.txt",
            "cat a >> b",
            "sed -i 's/a/b/' f.py",
            "git commit -am x",
            "git checkout main",
            "git branch -D old",
            "find . -name '*.pyc' -delete",
            "python script.py",
            "cargo test",
            "ls && touch x",
            "cat <<EOF > f.txt\nhello\nEOF",
            "echo 'unbalanced",
            "",
            "ls | tee out.log",
        ] {
            assert!(!is_read_only(command), "{command}");
        }
    }
}
