//! Whether a `bash` command only reads, for approvals: the lexical check of
//! [`cwl_infer::shell`] made stricter where a "reading" command can still
//! write files or run programs through its arguments.

/// Commands whose programs can write files and run commands.
const SCRIPTED: &[&str] = &["awk", "gawk", "mawk", "nawk"];

/// Words that end a command inside a pipeline or list.
const SEPARATORS: &[&str] = &["|", "||", "&&", ";", "&"];

/// Whether running `command` only reads, so `--approval on-mutate` runs it
/// without asking. Conservative: anything unknown, any redirection into a
/// file, variable assignments before a command, `awk`, a `sed` script that is not a plain print, `uniq`/`xxd` with
/// an output file, `yq -i`, `tree -o` and `--output`/`--pre` options count
/// as changing something.
pub fn is_read_only_command(command: &str) -> bool {
    if !cwl_infer::shell::is_read_only(command) || sets_variables(command) {
        return false;
    }
    let Some(words) = shlex::split(command) else {
        return false;
    };
    let base = |word: &str| word.rsplit('/').next().unwrap_or(word).to_owned();
    let has = |flag: &str| words.iter().any(|w| w == flag);
    for (index, word) in words.iter().enumerate() {
        if word.starts_with("--output") || word.starts_with("--pre") {
            return false;
        }
        let rest = &words[index + 1..];
        let operands = || {
            rest.iter()
                .take_while(|w| !SEPARATORS.contains(&w.as_str()))
                .filter(|w| !w.starts_with('-'))
        };
        match base(word).as_str() {
            name if SCRIPTED.contains(&name) => return false,
            "sed" if !sed_only_prints(rest) => return false,
            "uniq" | "xxd" if operands().count() >= 2 => return false,
            "yq" if has("-i") || words.iter().any(|w| w.starts_with("--inplace")) => {
                return false;
            }
            "tree" if has("-o") => return false,
            _ => {}
        }
    }
    true
}

/// Whether a command of `command` starts with a variable assignment
/// (`LD_PRELOAD=x cat f`, `PAGER=sh git log`): the environment can make a
/// reader run anything. Coarse: splits at separators even inside quotes,
/// which can only make more commands ask.
fn sets_variables(command: &str) -> bool {
    command
        .split([';', '|', '&', '(', ')', '`', '\n', '{', '}', '!'])
        .filter_map(|part| part.split_whitespace().next())
        .any(|word| {
            word.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
}

/// Whether the `sed` scripts among `args` (the words after `sed`) only
/// select and print lines (`10,20p`, `1d`, `$=`): no `w`, `e` or `s///w`.
fn sed_only_prints(args: &[String]) -> bool {
    let plain = |script: &str| {
        script.chars().all(|c| {
            c.is_ascii_digit()
                || matches!(
                    c,
                    ',' | '$' | 'p' | 'd' | 'q' | '=' | ';' | ' ' | '!' | '~' | '+'
                )
        })
    };
    let mut scripts = Vec::new();
    let mut words = args
        .iter()
        .take_while(|w| !SEPARATORS.contains(&w.as_str()));
    let mut explicit = false;
    while let Some(word) = words.next() {
        if word == "-e" || word == "--expression" {
            explicit = true;
            scripts.extend(words.next().cloned());
        } else if let Some(script) = word.strip_prefix("--expression=") {
            explicit = true;
            scripts.push(script.to_owned());
        } else if word == "-f" || word.starts_with("--file") {
            return false;
        } else if !word.starts_with('-') && !explicit && scripts.is_empty() {
            scripts.push(word.clone());
        }
    }
    scripts.iter().all(|script| plain(script))
}

#[cfg(test)]
mod tests {
    use super::is_read_only_command;

    #[test]
    fn plain_reads_run_without_asking() {
        for command in [
            "cat src/main.rs",
            "ls -la",
            "grep -rn 'foo' src | head -20",
            "git status && git diff HEAD~1",
            "sed -n '10,20p' file.py",
            "sed -n -e 1,5p -e '$p' f",
            "nl -ba a.rs | sed -n '1,80p'",
            "uniq -c counts.txt | sort",
            "xxd file.bin | head",
            "grep -o foo a.txt",
            "tree src",
            "grep -n FOO=1 .env.example",
            "git log --format='%h %s' -3",
        ] {
            assert!(is_read_only_command(command), "{command}");
        }
    }

    #[test]
    fn writes_through_arguments_ask() {
        for command in [
            "rm -rf build",
            "echo hi > out.txt",
            "awk 'BEGIN { system(\"rm -rf x\") }'",
            "awk '{ print > \"f\" }' a",
            "sed -n '1w out.txt' a",
            "sed 's/a/b/w changed.txt' a",
            "sed -n '/x/e date' a",
            "sed -f script.sed a",
            "uniq in.txt out.txt",
            "xxd in.bin out.hex",
            "yq -i '.a = 1' f.yaml",
            "tree -o listing.txt",
            "git diff --output=patch.diff",
            "rg --pre ./evil foo",
            "cargo test",
            "LD_PRELOAD=./evil.so cat x",
            "ls && PAGER='sh -c id' git log",
            "FOO=1 ls",
        ] {
            assert!(!is_read_only_command(command), "{command}");
        }
    }
}
