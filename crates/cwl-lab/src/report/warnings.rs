//! Warnings of a replay, ranked by importance and counted instead of
//! listed: a corpus can raise thousands of the same warning.
//!
//! Ranks, most important first:
//! - [`Rank::Figures`]: the figures themselves change — a file skipped, a
//!   policy stopped early, a model call left out (an assistant message
//!   skipped or dropped), an annotation or delimiter call rejected;
//! - [`Rank::Content`]: the replayed transcript differs from the log —
//!   content dropped, removed, skipped or a result inserted;
//! - [`Rank::Note`]: everything else (timestamps, ignored fields).
//!
//! Warnings of the same kind are one line with a count: the text with its
//! file and line, quoted names (`` `…` ``) and numbers taken out, with the
//! first occurrence as an example.

use std::collections::HashMap;

use super::ReplayReport;

/// How much a warning matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rank {
    /// The figures change.
    Figures,
    /// The replayed transcript differs from the log.
    Content,
    /// Neither.
    Note,
}

impl Rank {
    /// The label printed before the warning.
    pub fn label(self) -> &'static str {
        match self {
            Rank::Figures => "changes figures",
            Rank::Content => "changes content",
            Rank::Note => "note",
        }
    }
}

/// Warnings of one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// How much they matter.
    pub rank: Rank,
    /// The kind: the text without file, line, quoted names and numbers.
    pub kind: String,
    /// How many.
    pub count: usize,
    /// The first one, in full (with its file).
    pub example: String,
}

/// The rank of one warning's text.
pub fn rank_of(what: &str) -> Rank {
    let text = what.to_ascii_lowercase();
    let call_lost = text.contains("assistant message")
        && (text.contains("skipped") || text.contains("dropped"));
    if call_lost
        || text.contains("stopped early")
        || text.contains("rejected")
        || text.contains("cannot replay")
    {
        Rank::Figures
    } else if ["dropped", "removed", "skipped", "inserted", "no result"]
        .iter()
        .any(|w| text.contains(w))
    {
        Rank::Content
    } else {
        Rank::Note
    }
}

/// The kind of a warning: `what` without its `path:line:` prefix (when it
/// starts with `path`), quoted names and digits.
pub fn kind_of(path: &str, what: &str) -> String {
    let mut text = what;
    if let Some(rest) = text.strip_prefix(path) {
        let rest = rest.trim_start_matches(':');
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        text = rest.trim_start_matches(':').trim_start();
    }
    let mut out = String::with_capacity(text.len());
    let mut quoted = false;
    let mut last_digit = false;
    for c in text.chars() {
        if c == '`' {
            if !quoted {
                out.push_str("`…`");
            }
            quoted = !quoted;
            last_digit = false;
            continue;
        }
        if quoted {
            continue;
        }
        if c.is_ascii_digit() {
            if !last_digit {
                out.push('N');
            }
            last_digit = true;
            continue;
        }
        last_digit = false;
        out.push(c);
    }
    out
}

/// Every warning of `report` (skipped files, stopped policies, the files'
/// own), grouped by kind, most important and most frequent first.
pub fn rank(report: &ReplayReport) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<(Rank, String), usize> = HashMap::new();
    let mut add = |rank: Rank, kind: String, example: String| match index.get(&(rank, kind.clone()))
    {
        Some(&i) => groups[i].count += 1,
        None => {
            index.insert((rank, kind.clone()), groups.len());
            groups.push(Group {
                rank,
                kind,
                count: 1,
                example,
            });
        }
    };
    for skipped in &report.skipped {
        add(
            Rank::Figures,
            "file skipped: cannot be read or parsed".to_string(),
            skipped.describe(),
        );
    }
    for file in &report.files {
        for outcome in &file.policies {
            if let Some(why) = &outcome.failed {
                add(
                    Rank::Figures,
                    format!("{} stopped early", outcome.kind),
                    format!("{}: {} stopped early: {why}", file.path, outcome.kind),
                );
            }
        }
        for warning in &file.warnings {
            let example = if warning.starts_with(&file.path) {
                warning.clone()
            } else {
                format!("{}: {warning}", file.path)
            };
            add(rank_of(warning), kind_of(&file.path, warning), example);
        }
    }
    groups.sort_by(|a, b| a.rank.cmp(&b.rank).then(b.count.cmp(&a.count)));
    groups
}

/// The groups as lines for stderr, at most `limit` of them, then one line
/// saying how many more kinds and warnings were left out.
pub fn render(groups: &[Group], limit: usize) -> String {
    let mut out = String::new();
    for group in groups.iter().take(limit) {
        if group.count == 1 {
            out.push_str(&format!(
                "warning ({}): {}\n",
                group.rank.label(),
                group.example
            ));
        } else {
            out.push_str(&format!(
                "warning ({}): {}× {} (first: {})\n",
                group.rank.label(),
                group.count,
                group.kind,
                group.example
            ));
        }
    }
    if groups.len() > limit {
        let rest = &groups[limit..];
        out.push_str(&format!(
            "warning: {} more kinds of warning ({} warnings) left out\n",
            rest.len(),
            rest.iter().map(|g| g.count).sum::<usize>()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_what_changes_figures_first() {
        assert_eq!(
            rank_of("f:3: assistant message has no content (stop reason `aborted`); skipped"),
            Rank::Figures
        );
        assert_eq!(
            rank_of("cwl: inferred annotation X rejected: y"),
            Rank::Figures
        );
        assert_eq!(
            rank_of("tool result for call `a` answers no waiting call; dropped"),
            Rank::Content
        );
        assert_eq!(
            rank_of("f:9: timestamp `x` is not RFC 3339; ignored"),
            Rank::Note
        );
    }

    #[test]
    fn kinds_drop_location_names_and_numbers() {
        assert_eq!(
            kind_of(
                "a/b.jsonl",
                "a/b.jsonl:33: tool call `toolu_01` (edit) has no recorded result"
            ),
            "tool call `…` (edit) has no recorded result"
        );
        assert_eq!(
            kind_of("x", "content[12]: unknown block type `image`"),
            "content[N]: unknown block type `…`"
        );
    }
}
