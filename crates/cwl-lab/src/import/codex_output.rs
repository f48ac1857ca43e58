//! What Codex CLI 0.45 to 0.62 sent the model for a shell output it logged
//! as JSON.
//!
//! Those versions log `{"output": …, "metadata": {"exit_code", …}}` but
//! send the model a text of their own (observed against the requests a
//! local server received, `scripts/real-clients/run.sh`, for 0.34, 0.40,
//! 0.42, 0.44, 0.45, 0.47, 0.49, 0.50, 0.53, 0.57, 0.63 and 0.66):
//! `Exit code: N\nWall time: S seconds\nOutput:\n` and the output. An
//! output over 10 KiB or 256 lines is logged already cut, opening with
//! `Total output lines: N\n\n`; 0.45 to 0.48 send that count in the
//! header instead (`…seconds\nTotal output lines: N\nOutput:\n` and the
//! rest), 0.49 to 0.52 only for an output cut for its lines, and 0.53 to
//! 0.62 send `Total output lines: N\n\n`, the first 5 KiB of the logged
//! JSON and a truncation line when that JSON is over 10 KiB. Codex 0.44 and
//! earlier and 0.63 and later log what they send.

use serde_json::Value;

/// Bytes of output these versions send at most.
const LIMIT: usize = 10 * 1024;

/// Lines of output these versions send at most.
const MAX_LINES: usize = 256;

/// How the count of a cut output's lines opens it as logged.
const COUNT: &str = "Total output lines: ";

/// How a Codex CLI version renders a logged shell output for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Rendering {
    /// As logged.
    #[default]
    Logged,
    /// 0.45 to 0.48: a header; a cut output's line count goes in it.
    Header,
    /// 0.49 to 0.52: a header; the line count goes in it when the output
    /// was cut for its lines.
    HeaderOverLines,
    /// 0.53 to 0.62: a header; a long output is the logged JSON cut after
    /// 5 KiB.
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
            45..=48 => Rendering::Header,
            49..=52 => Rendering::HeaderOverLines,
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
        Some(match (self, cut(output)) {
            (Rendering::Json, _) if logged.len() > LIMIT => format!(
                "{COUNT}{}\n\n{}\n[... output truncated to fit {LIMIT} bytes ...]\n\n",
                logged.lines().count(),
                prefix(logged, LIMIT / 2)
            ),
            (Rendering::Header | Rendering::HeaderOverLines, Some((lines, rest)))
                if self == Rendering::Header || lines > MAX_LINES =>
            {
                format!("{header}{COUNT}{lines}\nOutput:\n{rest}")
            }
            _ => format!("{header}Output:\n{output}"),
        })
    }
}

/// A cut output's line count and the rest of it, when `output` opens with
/// that count.
fn cut(output: &str) -> Option<(usize, &str)> {
    let (count, rest) = output.strip_prefix(COUNT)?.split_once("\n\n")?;
    Some((count.parse().ok()?, rest))
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
        assert_eq!(Rendering::of(Some("0.47.0")), Rendering::Header);
        assert_eq!(Rendering::of(Some("0.45.0")), Rendering::Header);
        assert_eq!(Rendering::of(Some("0.49.0")), Rendering::HeaderOverLines);
        assert_eq!(Rendering::of(Some("0.50.0")), Rendering::HeaderOverLines);
        assert_eq!(Rendering::of(Some("0.44.0")), Rendering::Logged);
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
            Rendering::Header.sent(&logged("x", 1.25)).unwrap(),
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
        let body: String = (0..100)
            .map(|i| format!("line {i} of the file, padded to be long enough\n"))
            .collect();
        let by_lines = logged(&format!("{COUNT}600\n\n{body}"), 0.0);
        let by_bytes = logged(&format!("{COUNT}200\n\n{body}"), 0.0);
        assert!(by_lines.len() < LIMIT);
        let header = "Exit code: 0\nWall time: 0 seconds\n";
        let lifted = |lines: usize| format!("{header}{COUNT}{lines}\nOutput:\n{body}");
        let plain = |lines: usize| format!("{header}Output:\n{COUNT}{lines}\n\n{body}");
        assert_eq!(Rendering::Header.sent(&by_lines).unwrap(), lifted(600));
        assert_eq!(Rendering::Header.sent(&by_bytes).unwrap(), lifted(200));
        assert_eq!(
            Rendering::HeaderOverLines.sent(&by_lines).unwrap(),
            lifted(600)
        );
        assert_eq!(
            Rendering::HeaderOverLines.sent(&by_bytes).unwrap(),
            plain(200),
            "cut for its bytes, not its lines"
        );
        assert_eq!(Rendering::Json.sent(&by_bytes).unwrap(), plain(200));

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
    }
}
