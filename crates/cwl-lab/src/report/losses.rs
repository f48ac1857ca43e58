//! What each request lacked that its reply used, request by request: the
//! evidence behind the retention figures (`--losses`).

use std::fmt::Write;

use crate::replay::{Loss, Lost};

use super::ReplayReport;

/// Most names shown per kind in one line; the rest are counted.
const NAMES_SHOWN: usize = 8;

/// Every file's losses, in request order, one line per request and policy;
/// an empty string when no request lost anything.
pub fn render(report: &ReplayReport) -> String {
    let mut out = String::new();
    for file in report.files.iter().filter(|f| !f.losses.is_empty()) {
        let _ = writeln!(
            out,
            "losses in {} ({} lines, a request and policy each; `after #N`: last shown after request N):",
            file.path,
            file.losses.len()
        );
        for loss in &file.losses {
            let _ = writeln!(out, "  {}", line(loss));
        }
        out.push('\n');
    }
    out
}

/// `#12 cwl: anchors a (after #3), b (after #9); values c (after #3); 3 edit lines`.
fn line(loss: &Loss) -> String {
    let mut parts = Vec::new();
    if !loss.anchors.is_empty() {
        parts.push(format!("anchors {}", names(&loss.anchors)));
    }
    if !loss.values.is_empty() {
        parts.push(format!("values {}", names(&loss.values)));
    }
    if loss.lines > 0 {
        let s = if loss.lines == 1 { "" } else { "s" };
        parts.push(format!("{} edit line{s}", loss.lines));
    }
    format!(
        "#{} {}: {}",
        loss.request,
        loss.kind.name(),
        parts.join("; ")
    )
}

fn names(names: &[Lost]) -> String {
    let mut shown = names
        .iter()
        .take(NAMES_SHOWN)
        .map(|lost| format!("{} (after #{})", lost.name, lost.seen_after))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NAMES_SHOWN {
        let _ = write!(shown, " and {} more", names.len() - NAMES_SHOWN);
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicyKind;

    fn lost(names: &[&str]) -> Vec<Lost> {
        names
            .iter()
            .map(|name| Lost {
                name: name.to_string(),
                seen_after: 3,
            })
            .collect()
    }

    fn loss(anchors: &[&str], values: &[&str], lines: usize) -> Loss {
        Loss {
            request: 12,
            kind: PolicyKind::Truncate,
            anchors: lost(anchors),
            values: lost(values),
            lines,
        }
    }

    #[test]
    fn a_line_names_what_went() {
        assert_eq!(
            line(&loss(&["src/a.rs", "parse_row"], &["004144"], 3)),
            "#12 truncate: anchors src/a.rs (after #3), parse_row (after #3); values 004144 (after #3); 3 edit lines"
        );
        assert_eq!(line(&loss(&[], &[], 1)), "#12 truncate: 1 edit line");
    }

    #[test]
    fn long_lists_are_counted() {
        let many: Vec<String> = (0..11).map(|i| format!("name_{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(line(&loss(&many, &[], 0)).ends_with("name_7 (after #3) and 3 more"));
    }
}
