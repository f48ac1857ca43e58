//! How well the replay of what the log's harness sent ([`super::as_sent`])
//! matches the prompt sizes the log records, over the whole log.
//!
//! Each logged call is predicted as `overhead + ratio × local` (the
//! [`Calibration`]) plus, after an edit of the harness's that the log does
//! not fully record, the difference measured at the first call after it.
//! That first call is then *anchored*: its size came from the log, so it
//! is not compared. A compaction whose replayed summary and restored
//! messages already explain the first call (within [`EXPLAINED`]) needs
//! no anchor and that call is compared like any other.

use serde::Serialize;

use super::Calibration;
use super::as_sent::{Edit, Point};

/// The largest relative gap at which the first call after a compaction
/// counts as explained by the replayed compaction: the fidelity bound
/// the lab is held to.
pub const EXPLAINED: f64 = 0.10;

/// How the replay of what the log's harness sent compares with the prompt
/// sizes the log recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Fidelity {
    /// Calls that log a prompt size.
    pub logged_calls: u64,
    /// Of those, the calls compared: all but the anchored ones.
    pub compared_calls: u64,
    /// Calls right after an edit of the harness's that the log does not
    /// record whole (a prompt it cut, files it re-read after compacting),
    /// whose size came from the log rather than the replay.
    pub anchored_calls: u64,
    /// Compactions of the harness's that the replay followed.
    pub compactions: u64,
    /// Times the harness cut its prompt with no compaction logged and
    /// the replay applied its clearing rule ([`super::ClearRule`]).
    pub clearings: u64,
    /// Times the harness cut its prompt with no compaction logged and no
    /// rule of its to replay.
    pub cuts: u64,
    /// Mean logged prompt size over the compared calls (`None` when there
    /// are none).
    pub logged_prompt_tokens_mean: Option<f64>,
    /// Mean replayed prompt, as the harness sent it, over the same calls,
    /// in calibrated provider tokens.
    pub replayed_prompt_tokens_mean: Option<f64>,
    /// The same before calibration: local count, log content only.
    pub local_prompt_tokens_mean: Option<f64>,
    /// Mean over the same calls of |replayed − logged| / logged.
    pub prompt_tokens_error_mean: Option<f64>,
    /// Median of the same.
    pub prompt_tokens_error_median: Option<f64>,
    /// What the log says its calls before the first compaction cost, when
    /// it records the cost of each of them (pi, mini-swe-agent).
    pub logged_cost_usd: Option<f64>,
    /// What the replayed full history (`none`) costs over the same calls.
    pub replayed_cost_usd: Option<f64>,
}

/// Share of the calls that log a prompt size the replay must compare.
pub const MIN_COMPARED_SHARE: f64 = 0.9;
/// Largest gap between the replayed and the logged mean.
pub const MAX_MEAN_GAP: f64 = 0.10;
/// Largest median per-call error.
pub const MAX_MEDIAN_ERROR: f64 = 0.05;

impl Fidelity {
    /// What keeps the replay from agreeing with the log within the bounds
    /// the lab holds itself to ([`MIN_COMPARED_SHARE`], [`MAX_MEAN_GAP`],
    /// [`MAX_MEDIAN_ERROR`]); empty when it agrees, or when the log
    /// records no prompt size.
    pub fn out_of_bounds(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.logged_calls == 0 {
            return out;
        }
        if self.compared_share() < MIN_COMPARED_SHARE {
            out.push(format!(
                "{} of {} calls compared",
                self.compared_calls, self.logged_calls
            ));
        }
        if let (Some(logged), Some(replayed)) = (
            self.logged_prompt_tokens_mean,
            self.replayed_prompt_tokens_mean,
        ) {
            let gap = (replayed - logged) / logged;
            if gap.abs() > MAX_MEAN_GAP {
                out.push(format!("{:+.1}% on the mean", gap * 100.0));
            }
        }
        if let Some(median) = self
            .prompt_tokens_error_median
            .filter(|m| *m > MAX_MEDIAN_ERROR)
        {
            out.push(format!("{:.1}% median call error", median * 100.0));
        }
        out
    }

    /// Share of the calls that log a prompt size that were compared (1
    /// when none log one).
    pub fn compared_share(&self) -> f64 {
        if self.logged_calls == 0 {
            1.0
        } else {
            self.compared_calls as f64 / self.logged_calls as f64
        }
    }
}

/// Compares `points` with their replay under `calibration`.
pub fn compare(points: &[Point], calibration: &Calibration) -> Fidelity {
    let mut fidelity = Fidelity {
        logged_calls: points.len() as u64,
        ..Fidelity::default()
    };
    let mut offset = 0.0;
    let mut errors = Vec::with_capacity(points.len());
    let (mut logged_sum, mut replayed_sum, mut local_sum) = (0.0, 0.0, 0.0);
    for point in points {
        let logged = point.logged as f64;
        let modeled = calibration.provider_tokens(point.local as usize) as f64;
        if point.first {
            match point.segment.opened_by {
                None => offset = 0.0,
                Some(edit) => {
                    match edit {
                        Edit::Compaction => fidelity.compactions += 1,
                        Edit::Clearing => fidelity.clearings += 1,
                        Edit::Drop => fidelity.cuts += 1,
                    }
                    let explained =
                        edit != Edit::Drop && (modeled - logged).abs() <= EXPLAINED * logged;
                    if !explained {
                        offset = logged - modeled;
                        fidelity.anchored_calls += 1;
                        continue;
                    }
                    offset = 0.0;
                }
            }
        }
        let replayed = (modeled + offset).max(0.0);
        errors.push((replayed - logged).abs() / logged.max(1.0));
        logged_sum += logged;
        replayed_sum += replayed;
        local_sum += point.local as f64;
    }
    if errors.is_empty() {
        return fidelity;
    }
    let n = errors.len() as f64;
    fidelity.compared_calls = errors.len() as u64;
    fidelity.logged_prompt_tokens_mean = Some(round(logged_sum / n, 1));
    fidelity.replayed_prompt_tokens_mean = Some(round(replayed_sum / n, 1));
    fidelity.local_prompt_tokens_mean = Some(round(local_sum / n, 1));
    fidelity.prompt_tokens_error_mean = Some(round(errors.iter().sum::<f64>() / n, 4));
    fidelity.prompt_tokens_error_median = Some(round(median(&mut errors), 4));
    fidelity
}

/// The median of `values` (reordered); `values` is not empty.
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::super::as_sent::Segment;
    use super::*;

    fn point(local: u64, logged: u64, index: u32, edit: Option<Edit>, first: bool) -> Point {
        Point {
            local,
            logged,
            segment: Segment {
                index,
                opened_by: edit,
            },
            first,
        }
    }

    fn calibration() -> Calibration {
        Calibration {
            system_tokens_estimate: 1_000,
            token_ratio: 2.0,
            ..Calibration::identity()
        }
    }

    #[test]
    fn compares_every_call_but_the_anchors() {
        let points = [
            point(1_000, 3_300, 0, None, true),
            point(2_000, 4_500, 0, None, false),
            // A compaction the replay explains: compared.
            point(500, 2_050, 1, Some(Edit::Compaction), true),
            point(700, 2_400, 1, Some(Edit::Compaction), false),
            // A cut: anchored at 1,500 below the model, then followed.
            point(900, 1_300, 2, Some(Edit::Drop), true),
            point(1_400, 2_300, 2, Some(Edit::Drop), false),
        ];
        let f = compare(&points, &calibration());
        assert_eq!(
            (f.logged_calls, f.compared_calls, f.anchored_calls),
            (6, 5, 1)
        );
        assert_eq!((f.compactions, f.cuts), (1, 1));
        // Replayed: 3000, 5000, 2000, 2400, (anchor), 3800 - 1500 = 2300.
        let errors = [300.0 / 3_300.0, 500.0 / 4_500.0, 50.0 / 2_050.0, 0.0, 0.0];
        let mean = errors.iter().sum::<f64>() / 5.0;
        assert!((f.prompt_tokens_error_mean.unwrap() - mean).abs() < 1e-4);
        assert!((f.prompt_tokens_error_median.unwrap() - 50.0 / 2_050.0).abs() < 1e-4);
        assert_eq!(f.replayed_prompt_tokens_mean, Some(14_700.0 / 5.0));
        assert!((f.compared_share() - 5.0 / 6.0).abs() < 1e-9);
    }

    #[test]
    fn a_compaction_the_replay_misses_is_anchored() {
        let points = [
            point(1_000, 3_000, 0, None, true),
            // The harness re-read files the log does not hold: 30k more.
            point(500, 32_000, 1, Some(Edit::Compaction), true),
            point(600, 32_200, 1, Some(Edit::Compaction), false),
        ];
        let f = compare(&points, &calibration());
        assert_eq!((f.compared_calls, f.anchored_calls), (2, 1));
        assert_eq!(f.prompt_tokens_error_mean, Some(0.0));
        assert_eq!(compare(&[], &calibration()), Fidelity::default());
        assert_eq!(f.out_of_bounds(), ["2 of 3 calls compared"], "{f:?}");
        let cut = compare(&points[..1], &calibration());
        assert!(cut.out_of_bounds().is_empty());
        let far = compare(&[point(1_000, 6_000, 0, None, true)], &calibration());
        assert_eq!(
            far.out_of_bounds(),
            ["-50.0% on the mean", "50.0% median call error"]
        );
        let few = compare(&points[..2], &calibration());
        assert_eq!(few.out_of_bounds(), ["1 of 2 calls compared"]);
        assert!(Fidelity::default().out_of_bounds().is_empty());
    }
}
