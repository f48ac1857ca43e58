//! The demo's throwaway project: a few small Python files, a changelog and
//! an AGENTS.md, committed to a fresh git repository when git is installed.

use std::path::Path;
use std::process::{Command, Stdio};

const FILES: &[(&str, &str)] = &[
    (
        "AGENTS.md",
        "# Notes for agents\n\nThis is a tiny Python project used by `cwl demo`.\n\
Keep changes small and record user-visible changes in CHANGELOG.md.\n",
    ),
    (
        "README.md",
        "# greeter\n\nA tiny program that greets people and adds numbers.\n\n\
Run it with `python3 src/app.py NAME`.\n",
    ),
    (
        "CHANGELOG.md",
        "# Changelog\n\n## Unreleased\n\n## 0.1.0\n\n- First release: greetings and sums.\n",
    ),
    (
        "src/greet.py",
        r#""""Greetings for the command line."""

import sys


def shout(text):
    """Upper-case `text` and add an exclamation mark."""
    return text.upper() + "!"


def whisper(text):
    """Lower-case `text` and trail off."""
    return text.lower() + "..."


def greeting(name=None):
    """The greeting shown when the program starts."""
    # TODO: greet the user by name when one is given
    return "Hi world"


def farewell(name):
    """The line printed on exit."""
    return "Goodbye, " + name


def banner(width=40):
    """A line of dashes as wide as the terminal banner."""
    return "-" * width


def title_case(text):
    """Capitalise every word of `text`."""
    return " ".join(word.capitalize() for word in text.split())


def initials(name):
    """The initials of a full name, e.g. "Ada Lovelace" -> "A.L."."""
    return "".join(part[0].upper() + "." for part in name.split() if part)


def pad(text, width, fill=" "):
    """`text` centred in a field of `width` characters."""
    if len(text) >= width:
        return text
    left = (width - len(text)) // 2
    right = width - len(text) - left
    return fill * left + text + fill * right


def boxed(text, width=40):
    """`text` framed by a box of dashes and bars."""
    inner = pad(text, width - 2)
    return "\n".join(["+" + "-" * (width - 2) + "+", "|" + inner + "|", "+" + "-" * (width - 2) + "+"])


def wrap(text, width=60):
    """`text` split into lines of at most `width` characters."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = word if not line else line + " " + word
    if line:
        lines.append(line)
    return lines


def greeting_for(hour):
    """A greeting that suits the hour of the day (0-23)."""
    if hour < 12:
        return "Good morning"
    if hour < 18:
        return "Good afternoon"
    return "Good evening"


if __name__ == "__main__":
    print(greeting(sys.argv[1] if len(sys.argv) > 1 else None))
"#,
    ),
    (
        "src/mathutil.py",
        r#""""Small arithmetic helpers."""


def add_numbers(a, b):
    """Add two numbers."""
    return a + b


def mean(values):
    """The arithmetic mean of a non-empty list."""
    # TODO: raise a clear error for an empty list
    return sum(values) / len(values)


def clamp(value, low, high):
    """`value` limited to the range [low, high]."""
    return max(low, min(high, value))


def percent(part, whole):
    """`part` as a percentage of `whole`."""
    # TODO: handle whole == 0
    return 100.0 * part / whole


def median(values):
    """The middle value of a non-empty list (the mean of the two middle ones
    when the length is even)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def variance(values):
    """The population variance of a non-empty list."""
    centre = mean(values)
    return sum((v - centre) ** 2 for v in values) / len(values)


def gcd(a, b):
    """The greatest common divisor of two integers (Euclid)."""
    while b:
        a, b = b, a % b
    return abs(a)


def lcm(a, b):
    """The least common multiple of two integers."""
    return abs(a * b) // gcd(a, b) if a and b else 0


def is_prime(n):
    """Whether `n` is a prime number (trial division)."""
    if n < 2:
        return False
    factor = 2
    while factor * factor <= n:
        if n % factor == 0:
            return False
        factor += 1
    return True


def running_total(values):
    """The running sums of `values`: [1, 2, 3] -> [1, 3, 6]."""
    totals, total = [], 0
    for value in values:
        total += value
        totals.append(total)
    return totals
"#,
    ),
    (
        "src/app.py",
        r#""""The greeter program."""

import sys

from greet import banner, greeting
from mathutil import add_numbers


def main(argv):
    print(banner())
    print(greeting(argv[1] if len(argv) > 1 else None))
    total = add_numbers(2, 3)
    print("2 + 3 =", total)
    # TODO: add a --quiet flag that skips the banner
    print(banner())


if __name__ == "__main__":
    main(sys.argv)
"#,
    ),
];

/// Writes the demo project into `dir` and, when git is installed, commits
/// it. Returns whether `dir` is a git repository.
pub fn create(dir: &Path) -> std::io::Result<bool> {
    for (path, text) in FILES {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .args([
                "-c",
                "user.name=cwl demo",
                "-c",
                "user.email=demo@cwl.invalid",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    Ok(
        git(&["init", "-q"])
            && git(&["add", "-A"])
            && git(&["commit", "-q", "-m", "greeter 0.1.0"]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let is_git = create(dir.path()).unwrap();
        for (path, _) in FILES {
            assert!(dir.path().join(path).is_file(), "{path}");
        }
        let greet = std::fs::read_to_string(dir.path().join("src/greet.py")).unwrap();
        assert_eq!(greet.matches("\"Hi world\"").count(), 1);
        for file in ["src/mathutil.py", "src/app.py"] {
            let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
            assert_eq!(text.matches("add_numbers(").count(), 1, "{file}");
        }
        if is_git {
            assert!(dir.path().join(".git").is_dir());
        }
    }
}
