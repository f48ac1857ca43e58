//! What Codex CLI 0.47 to 0.62 sent the model for a shell output it logged
//! as JSON.
//!
//! Those versions log `{"output": …, "metadata": {"exit_code", …}}` whole
//! but send the model a text of their own (observed against the requests
//! a local server received, `scripts/real-clients/run.sh`): under 10 KiB,
//! `Exit code: N\nWall time: S seconds\nOutput:\n` and the output; over
//! it, 0.53 to 0.62 send `Total output lines: N\n\n`, the first 5 KiB of
//! the logged JSON and a truncation line, and 0.47 to 0.52 the same header
//! as a short one with the output's first and last lines within 10 KiB
//! (the split between head and tail is approximated). Codex 0.63 and later
//! log what they send; versions before 0.47 are not known to differ.

use serde_json::Value;

/// Bytes of output these versions send at most.
const LIMIT: usize = 10 * 1024;

/// How a Codex CLI version renders a logged shell output for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Rendering {
    /// As logged.
    #[default]
    Logged,
    /// 0.47 to 0.52: the header, the output's head and tail lines.
    Lines,
    /// 0.53 to 0.62: a long output is the logged JSON cut after 5 KiB.
    Json,
}

impl Rendering {
    /// The rendering of Codex CLI `version` (`0.57.0`); as logged when
    /// unknown.
    pub(crate) fn of(version: Option<&str>) -> Self {
        let Some((minor, _)) = version.and_then(minor) else {
            return Rendering::Logged;
        };
        match minor {
            47..=52 => Rendering::Lines,
            53..=62 => Rendering::Json,
            _ => Rendering::Logged,
        }
    }

    /// What the model was sent for an output logged as `logged`; `None`
    /// when that is the logged text itself (not a JSON shell output, or a
    /// version that logs what it sends).
    pub(crate) fn sent(self, logged: &str) -> Option<String> {
        if self == Rendering::Logged || !logged.starts_with('{') {
            return None;
        }
        let json: Value = serde_json::from_str(logged).ok()?;
        let output = json.get("output")?.as_str()?;
        let metadata = json.get("metadata")?;
        let code = metadata.get("exit_code")?.as_i64()?;
        let seconds = metadata
            .get("duration_seconds")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let header = format!(
            "Exit code: {code}\nWall time: {} seconds\n",
            seconds_text(seconds)
        );
        if logged.len() <= LIMIT {
            return Some(format!("{header}Output:\n{output}"));
        }
        Some(match self {
            Rendering::Json => format!(
                "Total output lines: {}\n\n{}\n[... output truncated to fit {LIMIT} bytes ...]\n\n",
                logged.lines().count(),
                prefix(logged, LIMIT / 2)
            ),
            _ => {
                let lines: Vec<&str> = output.lines().collect();
                let (head, tail) = head_and_tail(&lines, LIMIT / 2);
                format!(
                    "{header}Total output lines: {}\nOutput:\n{}\n[... omitted {} of {} lines ...]\n\n{}",
                    lines.len(),
                    lines[..head].join("\n"),
                    lines.len() - head - tail,
                    lines.len(),
                    lines[lines.len() - tail..].join("\n"),
                )
            }
        })
    }
}

/// `0.57.0` → `(57, 0)`: Codex CLI's 0.x versions, the only ones here.
fn minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim().split('.');
    (parts.next()? == "0").then_some(())?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts
        .next()
        .and_then(|p| p.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    Some((minor, patch))
}

/// Seconds as Codex writes them, rounded to a tenth (`0`, `0.1`, `2`).
fn seconds_text(seconds: f64) -> String {
    let tenths = (seconds * 10.0).round() / 10.0;
    if tenths.fract() == 0.0 {
        format!("{}", tenths as i64)
    } else {
        format!("{tenths}")
    }
}

/// The longest prefix of `text` of at most `bytes` bytes.
fn prefix(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// How many first and last lines fit in `bytes` bytes each.
fn head_and_tail(lines: &[&str], bytes: usize) -> (usize, usize) {
    let head = fitting(lines.iter(), bytes);
    (head, fitting(lines[head..].iter().rev(), bytes))
}

/// How many of `lines`, in order, fit in `bytes` bytes with their newlines.
fn fitting<'a>(lines: impl Iterator<Item = &'a &'a str>, bytes: usize) -> usize {
    let mut used = 0;
    lines
        .take_while(|line| {
            used += line.len() + 1;
            used <= bytes
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(output: &str, seconds: f64) -> String {
        serde_json::json!({"output": output, "metadata": {"exit_code": 0, "duration_seconds": seconds}})
            .to_string()
    }

    #[test]
    fn versions_choose_the_rendering() {
        assert_eq!(Rendering::of(Some("0.57.0")), Rendering::Json);
        assert_eq!(Rendering::of(Some("0.53.0")), Rendering::Json);
        assert_eq!(Rendering::of(Some("0.47.0")), Rendering::Lines);
        assert_eq!(Rendering::of(Some("0.63.0")), Rendering::Logged);
        assert_eq!(Rendering::of(Some("0.29.0")), Rendering::Logged);
        assert_eq!(Rendering::of(Some("0.171.0")), Rendering::Logged);
        assert_eq!(Rendering::of(Some("1.2.0")), Rendering::Logged);
        assert_eq!(Rendering::of(None), Rendering::Logged);
        assert_eq!(Rendering::of(Some("0.60.1-alpha")), Rendering::Json);
    }

    #[test]
    fn a_short_output_is_sent_with_its_exit_code_and_time() {
        let text = logged("a.py\nb.py\n", 0.0);
        assert_eq!(
            Rendering::Json.sent(&text).unwrap(),
            "Exit code: 0\nWall time: 0 seconds\nOutput:\na.py\nb.py\n"
        );
        assert_eq!(
            Rendering::Lines.sent(&logged("x", 1.25)).unwrap(),
            "Exit code: 0\nWall time: 1.3 seconds\nOutput:\nx"
        );
        assert_eq!(Rendering::Logged.sent(&text), None);
        assert_eq!(
            Rendering::Json.sent("Plan updated"),
            None,
            "not a shell output"
        );
    }

    #[test]
    fn a_long_output_is_cut_to_what_the_version_sent() {
        let output: String = (0..600)
            .map(|i| format!("line {i} of the file\n"))
            .collect();
        let text = logged(&output, 0.0);
        assert!(text.len() > LIMIT);
        let json = Rendering::Json.sent(&text).unwrap();
        assert!(
            json.starts_with("Total output lines: 1\n\n{") && json.contains("line 0 of"),
            "{json}"
        );
        assert!(json.ends_with("\n[... output truncated to fit 10240 bytes ...]\n\n"));
        assert!(json.len() < LIMIT / 2 + 100);
        let lines = Rendering::Lines.sent(&text).unwrap();
        assert!(lines.starts_with(
            "Exit code: 0\nWall time: 0 seconds\nTotal output lines: 600\nOutput:\nline 0 "
        ));
        assert!(lines.contains("[... omitted "));
        assert!(lines.ends_with("line 599 of the file"));
        assert!(lines.len() <= LIMIT + 100, "{}", lines.len());
    }
}
