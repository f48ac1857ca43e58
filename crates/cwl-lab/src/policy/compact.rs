//! `compact`: LLM summarization, modeled (no model runs in the lab).
//!
//! When the prompt passes `trigger` × the model's context window, the
//! history except the system prompt and the most recent `keep_recent`
//! tokens is replaced by a summary. The summary call is costed as a side
//! call (its prompt is the history as it stood plus a short instruction;
//! its output is the summary). The summary's size is `summary_ratio` of
//! what it summarizes; each anchor of the summarized text is kept in it
//! with probability `keep_anchors` (a deterministic hash of the anchor and
//! the compaction number, so repeated compactions compound their losses).
//! The latest user turn always stays.
//!
//! Defaults and their sources:
//! - `trigger` 0.92: pi compacts at window − 16,384 reserved tokens (0.92
//!   of a 200k window; its two real compactions in `shared/traces/pi` fired
//!   at 175k and 185k); the context-window-manager design's cascade also
//!   puts conversation compaction at 0.92.
//! - `summary_ratio` 0.01: the pi traces' summaries are 0.75–0.93% of the
//!   history they replace (4,291 and 3,649 characters for ~460k–490k).
//! - `keep_anchors` 0.05: 4.7–5.0% of the distinct anchors of the
//!   summarized history appear in those summaries.
//! - `keep_recent` 20,000 tokens: pi's `keepRecentTokens` default (its
//!   traces keep ~62k characters after each compaction).

use std::collections::VecDeque;
use std::sync::Arc;

use cwl::{Annotation, Message};

use super::{Policy, PolicyConfig, PolicyError, Request, SideCall, pieces_tokens};
use crate::metrics::anchors::AnchorId;
use crate::transcript::{Entry, Lab, Unit};

/// The instruction sent with the summary call (its tokens are costed).
pub const INSTRUCTION: &str = "Summarize the conversation so far into a structured checkpoint: goal, \
decisions and their rationale, files and identifiers touched, unresolved errors with exact messages, \
current progress and next steps. A new session must be able to resume from this summary alone.";

/// The parameters of the summarization model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactParams {
    /// Share of the context window at which compaction fires.
    pub trigger: f64,
    /// Summary size as a share of the summarized tokens.
    pub summary_ratio: f64,
    /// Share of the summarized anchors the summary keeps.
    pub keep_anchors: f64,
    /// Most recent tokens kept verbatim after a compaction.
    pub keep_recent: usize,
}

impl Default for CompactParams {
    fn default() -> Self {
        CompactParams {
            trigger: 0.92,
            summary_ratio: 0.01,
            keep_anchors: 0.05,
            keep_recent: 20_000,
        }
    }
}

/// The summarization policy.
#[derive(Debug)]
pub struct Compact {
    params: CompactParams,
    threshold: usize,
    head: Vec<Arc<Entry>>,
    summary: Option<Arc<Entry>>,
    units: VecDeque<Unit>,
    tokens: usize,
    compactions: u64,
}

impl Compact {
    /// A summarization policy for `config.window` and `config.compact`.
    pub fn new(config: &PolicyConfig, _: &Lab) -> Self {
        let params = config.compact;
        Compact {
            params,
            threshold: (config.window as f64 * params.trigger).floor() as usize,
            head: Vec::new(),
            summary: None,
            units: VecDeque::new(),
            tokens: 0,
            compactions: 0,
        }
    }

    fn pieces(&self) -> Vec<Arc<Entry>> {
        let mut pieces = self.head.clone();
        pieces.extend(self.summary.iter().cloned());
        for unit in &self.units {
            pieces.extend(unit.entries().cloned());
        }
        pieces
    }

    fn compact(&mut self, lab: &mut Lab) -> Option<SideCall> {
        let mut tail_tokens = 0;
        let mut tail_start = self.units.len();
        while tail_start > 0
            && tail_tokens + self.units[tail_start - 1].billed(lab) <= self.params.keep_recent
        {
            tail_start -= 1;
            tail_tokens += self.units[tail_start].billed(lab);
        }
        if tail_start == 0 {
            return None;
        }
        let mut input = self.pieces();
        input.push(lab.written(Message::user(INSTRUCTION)));
        self.compactions += 1;
        let salt = self.compactions;
        let latest_user = self
            .units
            .iter()
            .rposition(Unit::is_user)
            .filter(|&i| i < tail_start);
        let mut summarized = self.summary.as_ref().map_or(0, |s| s.tokens());
        let mut anchors: Vec<AnchorId> = self
            .summary
            .iter()
            .flat_map(|s| s.anchors().iter().copied())
            .collect();
        let mut kept_user = None;
        for (i, unit) in self.units.drain(..tail_start).enumerate() {
            if Some(i) == latest_user {
                kept_user = Some(unit);
                continue;
            }
            for entry in unit.entries() {
                summarized += lab.billed(entry);
                anchors.extend_from_slice(entry.anchors());
            }
        }
        anchors.sort_unstable();
        anchors.dedup();
        let kept: Vec<AnchorId> = anchors
            .into_iter()
            .filter(|&a| keeps(lab.anchors().name(a), salt, self.params.keep_anchors))
            .collect();
        let size = ((summarized as f64) * self.params.summary_ratio)
            .ceil()
            .max(1.0) as usize;
        let text = format!(
            "[Compaction summary #{salt}: stands for {summarized} tokens of earlier conversation, modeled as {size} tokens keeping {} anchors.]",
            kept.len()
        );
        let summary = lab.modeled(
            Message::user(text),
            size + cwl::tokens::MESSAGE_OVERHEAD,
            kept,
        );
        self.summary = Some(summary);
        if let Some(unit) = kept_user {
            self.units.push_front(unit);
        }
        self.tokens = self.units.iter().map(|u| u.billed(lab)).sum();
        Some(SideCall {
            input,
            output_tokens: size,
        })
    }
}

/// Whether a compaction numbered `salt` keeps `anchor`, with probability
/// `share`: a draw on the string, so the same whatever else was replayed.
fn keeps(anchor: &str, salt: u64, share: f64) -> bool {
    let fnv = anchor.bytes().fold(0xCBF2_9CE4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    });
    let mut x = fnv ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    ((x >> 11) as f64 / (1u64 << 53) as f64) < share
}

impl Policy for Compact {
    fn name(&self) -> &'static str {
        "compact"
    }

    fn push(&mut self, unit: &Unit, _: &[Annotation], lab: &mut Lab) -> Result<(), PolicyError> {
        if unit.is_system()
            && self.units.is_empty()
            && self.summary.is_none()
            && let Unit::Message(entry) = unit
        {
            self.head.push(Arc::clone(entry));
            return Ok(());
        }
        if unit.is_user() {
            // Earlier turns' reasoning may no longer be billed.
            self.tokens = self.units.iter().map(|u| u.billed(lab)).sum();
        }
        self.tokens += unit.billed(lab);
        self.units.push_back(unit.clone());
        Ok(())
    }

    fn request(&mut self, lab: &mut Lab) -> Result<Request, PolicyError> {
        let head: usize = self.head.iter().map(|e| e.tokens()).sum();
        let summary = self.summary.as_ref().map_or(0, |s| s.tokens());
        let total = lab.tools_tokens() + head + summary + self.tokens;
        let side_calls = if total > self.threshold {
            self.compact(lab).into_iter().collect()
        } else {
            Vec::new()
        };
        let pieces = self.pieces();
        debug_assert_eq!(
            pieces_tokens(lab, &pieces),
            lab.tools_tokens()
                + head
                + self.summary.as_ref().map_or(0, |s| s.tokens())
                + self.tokens
        );
        Ok(Request {
            view: super::View::Pieces(pieces),
            side: super::SideTally::default(),
            side_calls,
            budget_met: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cwl::{Estimate, Message};

    use super::{Compact, CompactParams, keeps};
    use crate::policy::{Policy, PolicyConfig};
    use crate::transcript::{Lab, Unit};

    /// The names a compaction kept, in a lab that had interned `before`.
    fn kept_after(before: &[&str]) -> Vec<String> {
        let mut lab = Lab::new(Arc::new(Estimate), &[]);
        for name in before {
            lab.anchors_mut().intern(name);
        }
        let config = PolicyConfig {
            window: 4000,
            compact: CompactParams {
                keep_recent: 200,
                keep_anchors: 0.5,
                ..CompactParams::default()
            },
            ..PolicyConfig::default()
        };
        let mut policy = Compact::new(&config, &lab);
        for n in 0..60 {
            let text = format!("src/module_{n}.rs and handler_{n} {}", "x ".repeat(100));
            let entry = lab.entry(Message::user(text));
            policy.push(&Unit::Message(entry), &[], &mut lab).unwrap();
            policy.request(&mut lab).unwrap();
        }
        let summary = policy.summary.as_ref().expect("compacted");
        let mut names: Vec<String> = summary
            .anchors()
            .iter()
            .map(|&a| lab.anchors().name(a).to_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn what_a_summary_keeps_does_not_depend_on_what_was_interned_before() {
        let kept = kept_after(&[]);
        assert!(kept.len() > 5, "{kept:?}");
        let others: Vec<String> = (0..50).map(|n| format!("other_name_{n}")).collect();
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        assert_eq!(kept, kept_after(&others));
    }

    #[test]
    fn anchor_keeping_follows_the_share_and_the_salt() {
        let names: Vec<String> = (0..10_000).map(|n| format!("src/module_{n}.rs")).collect();
        let draw = |salt, share| -> Vec<&str> {
            names
                .iter()
                .map(String::as_str)
                .filter(|a| keeps(a, salt, share))
                .collect()
        };
        let kept = draw(1, 0.05).len();
        assert!((400..600).contains(&kept), "{kept}");
        assert!(draw(1, 0.0).is_empty());
        assert_eq!(draw(1, 1.0).len(), names.len());
        let (first, second) = (draw(1, 0.5), draw(2, 0.5));
        assert_ne!(first, second, "each compaction draws anew");
        assert_eq!(first, draw(1, 0.5));
    }
}
