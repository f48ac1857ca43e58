//! Secrets: which environment variables the agent's child processes do not
//! get, and the redaction of their values from everything the session
//! records, the model is sent or the terminal shows.
//!
//! A variable is withheld when it holds a provider key
//! ([`PROVIDER_KEY_VARS`]) or its name matches a pattern of the config
//! file's `env_deny` ([`EnvDeny`], default [`DEFAULT_ENV_DENY`]). Patterns
//! use `*` as the only wildcard and match names ignoring ASCII case, so
//! `*_TOKEN` also catches `github_token`. The values of withheld variables
//! that are at least [`MIN_SECRET_LEN`] characters long are replaced by
//! `[redacted NAME]` wherever they appear ([`Redactor`]).

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::fmt;

use cwl::{Block, Message};
use serde::Deserialize;

use crate::{anthropic, openai};

/// The `env_deny` patterns used when the config file gives none.
pub const DEFAULT_ENV_DENY: [&str; 3] = ["*_API_KEY", "*_TOKEN", "*SECRET*"];

/// The variables the providers read their API keys from; always withheld.
pub const PROVIDER_KEY_VARS: [&str; 2] = [openai::KEY_VAR, anthropic::KEY_VAR];

/// Values shorter than this (after trimming) are withheld but not
/// redacted: redacting `1` or `true` everywhere would garble every output.
pub const MIN_SECRET_LEN: usize = 8;

/// An `env_deny` pattern that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("env_deny pattern {pattern:?} {reason}")]
pub struct PatternError {
    /// The pattern as given.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Name patterns of environment variables withheld from child processes.
///
/// `*` matches any run of characters (also none); everything else matches
/// itself, ignoring ASCII case.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Vec<String>")]
pub struct EnvDeny {
    /// The patterns in upper case.
    patterns: Vec<String>,
}

impl Default for EnvDeny {
    fn default() -> Self {
        EnvDeny::new(DEFAULT_ENV_DENY).expect("the default patterns are valid")
    }
}

impl TryFrom<Vec<String>> for EnvDeny {
    type Error = PatternError;

    fn try_from(patterns: Vec<String>) -> Result<Self, PatternError> {
        EnvDeny::new(patterns)
    }
}

impl EnvDeny {
    /// Checks and keeps `patterns`; an empty list withholds only the
    /// provider keys.
    pub fn new<I>(patterns: I) -> Result<Self, PatternError>
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let patterns = patterns
            .into_iter()
            .map(|p| {
                let pattern: String = p.into();
                check_pattern(&pattern)?;
                Ok(pattern.to_ascii_uppercase())
            })
            .collect::<Result<_, PatternError>>()?;
        Ok(EnvDeny { patterns })
    }

    /// These patterns and the variable `names` too (e.g. the MCP servers'
    /// `bearer_token_env`), checked as patterns.
    pub fn with_names<I>(mut self, names: I) -> Result<Self, PatternError>
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let more = EnvDeny::new(names)?;
        self.patterns.extend(more.patterns);
        Ok(self)
    }

    /// Whether a pattern matches `name`.
    pub fn matches(&self, name: &str) -> bool {
        let name = name.to_ascii_uppercase();
        self.patterns.iter().any(|p| wildcard_match(p, &name))
    }

    /// Whether variable `name` is withheld: a provider key or a match.
    pub fn withholds(&self, name: &str) -> bool {
        PROVIDER_KEY_VARS.contains(&name) || self.matches(name)
    }
}

fn check_pattern(pattern: &str) -> Result<(), PatternError> {
    let fail = |reason: String| {
        Err(PatternError {
            pattern: pattern.to_owned(),
            reason,
        })
    };
    if pattern.is_empty() {
        return fail("is empty; give a variable name, with `*` as a wildcard".into());
    }
    for c in pattern.chars() {
        if matches!(c, '?' | '[' | ']' | '{' | '}' | '!' | '\\') {
            return fail(format!(
                "uses `{c}`, which is not supported: `*` is the only wildcard"
            ));
        }
        if c == '=' || c.is_whitespace() || c.is_control() {
            return fail(format!("holds {c:?}, which cannot be in a variable name"));
        }
    }
    Ok(())
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters.
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let mut parts: Vec<&str> = parts.collect();
    let Some(last) = parts.pop() else {
        return rest.is_empty();
    };
    for part in parts {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The environment the agent's child processes get, and the redactor for
/// the values withheld from it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secrets {
    env: Vec<(OsString, OsString)>,
    withheld: Vec<String>,
    redactor: Redactor,
}

impl Default for Secrets {
    /// This process's environment under the default patterns.
    fn default() -> Self {
        Secrets::from_process(&EnvDeny::default())
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets")
            .field("passed", &self.env.len())
            .field("withheld", &self.withheld)
            .finish()
    }
}

impl Secrets {
    /// Splits this process's environment by `deny`.
    pub fn from_process(deny: &EnvDeny) -> Self {
        Secrets::from_vars(std::env::vars_os(), deny)
    }

    /// Splits the variables `vars` by `deny`: those withheld are redacted,
    /// the rest is what child processes get.
    pub fn from_vars<I, K, V>(vars: I, deny: &EnvDeny) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let mut env = Vec::new();
        let mut withheld = Vec::new();
        let mut values = Vec::new();
        for (name, value) in vars {
            let (name, value): (OsString, OsString) = (name.into(), value.into());
            let text = name.to_string_lossy().into_owned();
            if deny.withholds(&text) {
                if let Some(value) = value.to_str() {
                    values.push((text.clone(), value.to_owned()));
                }
                withheld.push(text);
            } else {
                env.push((name, value));
            }
        }
        withheld.sort();
        Secrets {
            env,
            withheld,
            redactor: Redactor::new(values),
        }
    }

    /// The variables child processes get (set it after `env_clear`).
    pub fn child_env(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// The names of the variables withheld, sorted.
    pub fn withheld(&self) -> &[String] {
        &self.withheld
    }

    /// The redactor for the withheld values.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}

/// Replaces known secret values in text by `[redacted NAME]`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// (value, marker), longest value first.
    secrets: Vec<(String, String)>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let markers: Vec<&str> = self.secrets.iter().map(|(_, m)| m.as_str()).collect();
        f.debug_struct("Redactor")
            .field("secrets", &markers)
            .finish()
    }
}

impl Redactor {
    /// A redactor for the (name, value) pairs; values are trimmed and
    /// those shorter than [`MIN_SECRET_LEN`] are ignored. A value held by
    /// several names is redacted under the first of them in name order.
    pub fn new<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: AsRef<str>,
    {
        let mut pairs: Vec<(String, String)> = pairs
            .into_iter()
            .map(|(name, value)| (name.into(), value.as_ref().trim().to_owned()))
            .filter(|(_, value)| value.chars().count() >= MIN_SECRET_LEN)
            .collect();
        pairs.sort();
        let mut secrets: Vec<(String, String)> = Vec::new();
        for (name, value) in pairs {
            if !secrets.iter().any(|(v, _)| *v == value) {
                secrets.push((value, format!("[redacted {name}]")));
            }
        }
        secrets.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Redactor { secrets }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret value replaced by its marker; where two
    /// values overlap, the one starting first (then the longer) wins.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut hits: Vec<(usize, usize, &str)> = Vec::new();
        for (value, marker) in &self.secrets {
            hits.extend(
                text.match_indices(value.as_str())
                    .map(|(at, _)| (at, at + value.len(), marker.as_str())),
            );
        }
        if hits.is_empty() {
            return Cow::Borrowed(text);
        }
        hits.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut out = String::with_capacity(text.len());
        let mut done = 0;
        for (start, end, marker) in hits {
            if start < done {
                continue;
            }
            out.push_str(&text[done..start]);
            out.push_str(marker);
            done = end;
        }
        out.push_str(&text[done..]);
        Cow::Owned(out)
    }

    /// Redacts `text` in place.
    pub fn redact_string(&self, text: &mut String) {
        if let Cow::Owned(redacted) = self.redact(text) {
            *text = redacted;
        }
    }

    /// `message` with its text redacted: prompts, user turns, tool results,
    /// assistant text and tool-call arguments, and reasoning that carries no
    /// provider signature (a signed one must go back unchanged).
    pub fn redact_message(&self, mut message: Message) -> Message {
        if self.is_empty() {
            return message;
        }
        match &mut message {
            Message::System { content } | Message::User { content } => {
                self.redact_string(content);
            }
            Message::ToolResult(result) => self.redact_string(&mut result.content),
            Message::Assistant { content } => {
                for block in content {
                    match block {
                        Block::Text { text } => self.redact_string(text),
                        Block::Reasoning {
                            text,
                            signature: None,
                        } => self.redact_string(text),
                        Block::Reasoning { .. } => {}
                        Block::ToolCall(call) => self.redact_string(&mut call.arguments),
                    }
                }
            }
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deny(patterns: &[&str]) -> EnvDeny {
        EnvDeny::new(patterns.iter().copied()).unwrap()
    }

    #[test]
    fn patterns_match_whole_names_with_star_wildcards_ignoring_case() {
        let d = EnvDeny::default();
        for name in [
            "GITHUB_TOKEN",
            "github_token",
            "MY_SERVICE_TOKEN",
            "FOO_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "secret",
            "CLIENT_SECRET",
        ] {
            assert!(d.matches(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "TOKENS_USED",
            "API_KEYRING",
            "KEEP_ME",
            "_API_KE",
        ] {
            assert!(!d.matches(name), "{name}");
        }
        let exact = deny(&["PGPASSWORD", "A*B*C"]);
        assert!(exact.matches("PGPASSWORD") && exact.matches("pgpassword"));
        assert!(!exact.matches("PGPASSWORD2") && !exact.matches("MY_PGPASSWORD"));
        assert!(exact.matches("ABC") && exact.matches("AxxBxxC") && exact.matches("ABBC"));
        assert!(!exact.matches("AC") && !exact.matches("ACB") && !exact.matches("ABCD"));
        assert!(deny(&["*"]).matches("PATH"));
        assert!(deny(&["A*A"]).matches("AA") && !deny(&["A*A"]).matches("A"));
    }

    #[test]
    fn provider_keys_are_withheld_whatever_the_patterns() {
        let none = deny(&[]);
        assert!(none.withholds("OPENAI_API_KEY") && none.withholds("ANTHROPIC_API_KEY"));
        assert!(!none.withholds("MY_SERVICE_TOKEN"));
    }

    #[test]
    fn bad_patterns_are_refused_with_the_reason() {
        for (pattern, says) in [
            ("", "is empty"),
            ("A?B", "`?`"),
            ("[AB]_KEY", "`[`"),
            ("MY KEY", "cannot be in a variable name"),
            ("A=B", "cannot be in a variable name"),
        ] {
            let error = EnvDeny::new([pattern]).unwrap_err();
            let text = error.to_string();
            assert!(text.contains(&format!("{pattern:?}")), "{text}");
            assert!(text.contains(says), "{text}");
        }
    }

    #[test]
    fn secrets_split_the_environment_and_redact_the_withheld_values() {
        let vars = [
            ("OPENAI_API_KEY", "sk-live-0123456789abcdef"),
            ("MY_SERVICE_TOKEN", "tok-98765432"),
            ("SHORT_TOKEN", "abc"),
            ("KEEP_ME", "visible-value-123"),
            ("PATH", "/usr/bin"),
        ];
        let secrets = Secrets::from_vars(vars, &EnvDeny::default());
        let passed: Vec<_> = secrets
            .child_env()
            .map(|(k, _)| k.to_str().unwrap())
            .collect();
        assert_eq!(passed, ["KEEP_ME", "PATH"]);
        assert_eq!(
            secrets.withheld(),
            ["MY_SERVICE_TOKEN", "OPENAI_API_KEY", "SHORT_TOKEN"]
        );
        let text = "key=sk-live-0123456789abcdef tok=tok-98765432 abc visible-value-123";
        assert_eq!(
            secrets.redactor().redact(text),
            "key=[redacted OPENAI_API_KEY] tok=[redacted MY_SERVICE_TOKEN] abc visible-value-123"
        );
        let debug = format!("{secrets:?} {:?}", secrets.redactor());
        assert!(
            !debug.contains("sk-live") && debug.contains("OPENAI_API_KEY"),
            "{debug}"
        );
    }

    #[test]
    fn overlapping_values_redact_the_longer_and_text_without_secrets_is_borrowed() {
        let r = Redactor::new([("A_TOKEN", "abcdefgh"), ("B_TOKEN", "abcdefghijkl")]);
        assert_eq!(
            r.redact("xabcdefghijkly abcdefgh"),
            "x[redacted B_TOKEN]y [redacted A_TOKEN]"
        );
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
        let same = Redactor::new([("Z_TOKEN", "samevalue1"), ("A_TOKEN", "samevalue1")]);
        assert_eq!(same.redact("samevalue1"), "[redacted A_TOKEN]");
        assert!(Redactor::new([("X", "  short ")]).is_empty());
    }

    #[test]
    fn messages_are_redacted_except_signed_reasoning() {
        let r = Redactor::new([("K_TOKEN", "secret-value-1")]);
        let message = Message::Assistant {
            content: vec![
                Block::Text {
                    text: "it is secret-value-1".into(),
                },
                Block::Reasoning {
                    text: "secret-value-1".into(),
                    signature: Some("sig".into()),
                },
                Block::Reasoning {
                    text: "secret-value-1".into(),
                    signature: None,
                },
                Block::ToolCall(cwl::ToolCall::new(
                    "c",
                    "bash",
                    r#"{"command":"echo secret-value-1"}"#,
                )),
            ],
        };
        let Message::Assistant { content } = r.redact_message(message) else {
            unreachable!()
        };
        let texts: Vec<String> = content
            .iter()
            .map(|b| match b {
                Block::Text { text } | Block::Reasoning { text, .. } => text.clone(),
                Block::ToolCall(call) => call.arguments.clone(),
            })
            .collect();
        assert_eq!(
            texts,
            [
                "it is [redacted K_TOKEN]",
                "secret-value-1",
                "[redacted K_TOKEN]",
                r#"{"command":"echo [redacted K_TOKEN]"}"#
            ]
        );
        let result = r.redact_message(Message::tool_result("c", "bash", "x secret-value-1", false));
        let Message::ToolResult(result) = result else {
            unreachable!()
        };
        assert_eq!(result.content, "x [redacted K_TOKEN]");
    }
}
