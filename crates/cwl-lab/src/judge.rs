//! Self-GC's no-impact rate (its paper, "Metrics", and Listing 3): a judge
//! model reads the request a policy built (the retained prefix), what it
//! left out of the full history, and the reply the log's model actually
//! gave at that call (the future turn), and says whether the retained
//! prefix still supports that reply. A request is *no-impact* when the
//! judge answers `"valid": true`.
//!
//! What a request left out is every logged message whose entry it does
//! not hold; a message a policy rewrote (blocks dropped, a residue) counts
//! as left out in its original form, its rewrite being in the prefix.
//!
//! The judge is a [`SideModel`] (the `--model-url` model). Only requests
//! that left something out are judged, every `every`-th of them per policy
//! (`--judge-every`); an answer that is not Listing 3's JSON counts as a
//! failed judgment, never as a verdict.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use cwl::{Block, Message, SideRequest};
use serde::Deserialize;

use crate::side::SideModel;
use crate::transcript::Entry;

/// The judge contract (the paper's appendix) and the answer schema
/// (Listing 3).
pub const CONTRACT: &str = "You judge context pruning for a coding agent. The judge evaluates whether the retained prefix still supports the actual future conversation. It first identifies concrete dependencies in future turns, then checks whether those dependencies remain visible or recoverable after projection. Narrative coherence alone is insufficient: exact identifiers, source-backed explanations, row-level values, and editable bodies dominate high-level summaries.\n\nYou get <retained_prefix> (what the agent saw), <removed> (what pruning took out of its context; for your judgment only, the agent never saw it) and <future_turn> (the reply the agent actually gave next). Answer with this JSON object only:\n{\"valid\": boolean, \"uncertain\": boolean, \"overall_score\": number, \"summary\": string, \"dimension_scores\": {\"goal_retention\": {\"score\": 0-5, \"verdict\": \"pass|warn|fail\"}, \"evidence_retention\": {\"score\": 0-5, \"verdict\": \"pass|warn|fail\"}, \"continuation_readiness\": {\"score\": 0-5, \"verdict\": \"pass|warn|fail\"}, \"compression_safety\": {\"score\": 0-5, \"verdict\": \"pass|warn|fail\"}}, \"failure_culprit\": {\"target_id\": string} | null}\n\"valid\" is true when the retained prefix still supports the future turn.";

/// Characters of one removed message shown to the judge; the rest is
/// elided (the retained prefix is always shown whole).
pub const REMOVED_CHARS: usize = 2_000;

/// How long a judgment may take.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The judge of a replay.
#[derive(Debug, Clone)]
pub struct Judge {
    /// The model asked.
    pub model: Arc<dyn SideModel>,
    /// Every this many pruned requests of a policy, one is judged (1: all).
    pub every: u64,
}

/// The part of Listing 3's answer the rate needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Verdict {
    /// The retained prefix still supports the future turn.
    pub valid: bool,
    /// The judge was not sure.
    #[serde(default)]
    pub uncertain: bool,
    /// Its overall score.
    #[serde(default)]
    pub overall_score: Option<f64>,
}

/// One judgment: a verdict, or why there is none.
pub type Judgment = Result<Verdict, String>;

/// The judge's request for one model call.
pub fn request(
    id: u64,
    retained: &[Arc<Entry>],
    removed: &[&Entry],
    future: &Message,
) -> SideRequest {
    let mut text = String::from("<retained_prefix>\n");
    for entry in retained {
        render(&mut text, entry.message(), usize::MAX);
    }
    text.push_str("</retained_prefix>\n<removed>\n");
    for entry in removed {
        render(&mut text, entry.message(), REMOVED_CHARS);
    }
    text.push_str("</removed>\n<future_turn>\n");
    render(&mut text, future, usize::MAX);
    text.push_str("</future_turn>\n");
    SideRequest {
        id,
        purpose: "judge".into(),
        messages: vec![Message::system(CONTRACT), Message::user(text)],
        timeout: TIMEOUT,
        max_output_tokens: Some(1_024),
    }
}

/// Reads Listing 3's JSON from the judge's answer (the first `{` to the
/// last `}`, so a fenced block or a sentence around it is accepted).
pub fn parse(answer: &str) -> Judgment {
    let (Some(start), Some(end)) = (answer.find('{'), answer.rfind('}')) else {
        return Err(format!(
            "no JSON object in the judge's answer: {}",
            preview(answer)
        ));
    };
    if end < start {
        return Err(format!(
            "no JSON object in the judge's answer: {}",
            preview(answer)
        ));
    }
    serde_json::from_str::<Verdict>(&answer[start..=end]).map_err(|e| {
        format!(
            "the judge's answer is not Listing 3's JSON ({e}): {}",
            preview(answer)
        )
    })
}

fn preview(text: &str) -> String {
    let cut: String = text.chars().take(120).collect();
    if cut.len() < text.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

fn render(out: &mut String, message: &Message, limit: usize) {
    let mut body = String::new();
    let role = match message {
        Message::System { content } => {
            body.push_str(content);
            "system"
        }
        Message::User { content } => {
            body.push_str(content);
            "user"
        }
        Message::Assistant { content } => {
            for block in content {
                match block {
                    Block::Text { text } => body.push_str(text),
                    Block::Reasoning { text, .. } => {
                        let _ = write!(body, "(thinking) {text}");
                    }
                    Block::ToolCall(call) => {
                        let _ =
                            write!(body, "[call {} {}: {}]", call.id, call.name, call.arguments);
                    }
                }
                body.push('\n');
            }
            "assistant"
        }
        Message::ToolResult(result) => {
            let _ = write!(body, "[result of {} {}] ", result.call_id, result.tool_name);
            body.push_str(&result.content);
            "tool"
        }
    };
    let total = body.chars().count();
    if total > limit {
        let kept: String = body.chars().take(limit).collect();
        let _ = writeln!(out, "[{role}] {kept} [… {} more characters]", total - limit);
    } else {
        let _ = writeln!(out, "[{role}] {body}");
    }
}

/// The Wilson 95% interval of `successes` out of `n` (the paper reports
/// no-impact with it).
pub fn wilson(successes: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let z = 1.959_963_984_540_054_f64;
    let n = n as f64;
    let p = successes as f64 / n;
    let denominator = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denominator;
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Lab;
    use cwl::Estimate;

    #[test]
    fn parses_listing_3_and_rejects_the_rest() {
        let answer = "Here it is:\n```json\n{\"valid\": true, \"uncertain\": false, \"overall_score\": 4.5, \"summary\": \"ok\", \"dimension_scores\": {}, \"failure_culprit\": null}\n```";
        let verdict = parse(answer).unwrap();
        assert!(verdict.valid && !verdict.uncertain);
        assert_eq!(verdict.overall_score, Some(4.5));
        assert!(
            !parse(r#"{"valid": false, "uncertain": true}"#)
                .unwrap()
                .valid
        );
        assert!(
            parse("looks fine to me")
                .unwrap_err()
                .contains("no JSON object")
        );
        assert!(
            parse(r#"{"verdict": "pass"}"#)
                .unwrap_err()
                .contains("Listing 3")
        );
        assert!(parse(r#"{"valid": "yes"}"#).is_err());
        assert!(parse("} {").is_err());
    }

    #[test]
    fn the_request_shows_retained_removed_and_future() {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        let kept = lab.entry(Message::user("fix src/a.rs"));
        let gone = lab.entry(Message::tool_result("c1", "read", "x".repeat(5_000), false));
        let future = Message::assistant_text("edited src/a.rs");
        let request = request(7, &[kept], &[&gone], &future);
        assert_eq!((request.id, request.purpose.as_str()), (7, "judge"));
        let Message::User { content } = &request.messages[1] else {
            panic!("a user message")
        };
        assert!(content.contains("<retained_prefix>\n[user] fix src/a.rs"));
        assert!(content.contains("[… 3020 more characters]"), "{content}");
        assert!(content.contains("<future_turn>\n[assistant] edited src/a.rs"));
        assert!(
            matches!(&request.messages[0], Message::System { content } if content.contains("\"valid\": boolean"))
        );
    }

    #[test]
    fn wilson_interval() {
        assert_eq!(wilson(0, 0), None);
        let (low, high) = wilson(28, 33).unwrap();
        assert!(
            (low - 0.690).abs() < 0.01 && (high - 0.934).abs() < 0.01,
            "{low} {high}"
        );
        let (low, high) = wilson(10, 10).unwrap();
        assert!(low > 0.69 && (high - 1.0).abs() < 1e-9, "{low} {high}");
    }
}
