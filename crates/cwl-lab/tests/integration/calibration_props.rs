//! Properties of the calibration fit: it cannot run away. The client's
//! part never exceeds the smallest logged prompt, too few calls fall back
//! to the client's known size, and one outlier moves neither the ratio
//! nor the overhead.

use cwl_lab::calibrate::{Calibration, Edit, MIN_OVERHEAD_SAMPLES, Point, Segment};
use proptest::prelude::*;

fn points(calls: &[(u64, u64, u32)]) -> Vec<Point> {
    calls
        .iter()
        .enumerate()
        .map(|(i, &(local, logged, index))| Point {
            local,
            logged,
            segment: Segment {
                index,
                opened_by: (index > 0).then_some(Edit::Compaction),
            },
            first: i == 0 || calls[i - 1].2 != index,
        })
        .collect()
}

/// Calls of one clean log: `overhead + ratio × local`, the history
/// growing by `steps`.
fn clean(overhead: u64, ratio: f64, steps: &[u64]) -> Vec<(u64, u64, u32)> {
    let mut local = 500;
    steps
        .iter()
        .map(|step| {
            local += step;
            (local, overhead + (ratio * local as f64).round() as u64, 0)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_overhead_never_exceeds_the_smallest_logged_prompt(
        calls in prop::collection::vec((0u64..400_000, 1u64..400_000, 0u32..3), 1..40),
        known in 0u64..200_000,
    ) {
        let mut calls = calls;
        calls.sort_by_key(|c| c.2);
        let c = Calibration::fit(&points(&calls), known);
        let smallest = calls.iter().map(|c| c.1).min().unwrap();
        prop_assert!(c.system_tokens_estimate <= smallest, "{c:?}");
        prop_assert!(c.token_ratio.is_finite() && c.token_ratio > 0.0, "{c:?}");
        let clean = calls.iter().filter(|c| c.2 == 0).count();
        prop_assert_eq!(c.fallback, clean < MIN_OVERHEAD_SAMPLES);
        if c.fallback {
            prop_assert_eq!(c.system_tokens_estimate, known.min(smallest));
        }
    }

    #[test]
    fn one_outlier_moves_neither_ratio_nor_overhead(
        overhead in 0u64..30_000,
        ratio in 0.8f64..1.6,
        steps in prop::collection::vec(300u64..6_000, 8..60),
        outlier_at in any::<prop::sample::Index>(),
        outlier in 1u64..1_000_000,
    ) {
        let mut calls = clean(overhead, ratio, &steps);
        let at = outlier_at.index(calls.len());
        calls[at].1 = outlier;
        let c = Calibration::fit(&points(&calls), 0);
        prop_assert!((c.token_ratio - ratio).abs() < 0.01, "{c:?} against {ratio}");
        let mean = calls.iter().map(|c| c.0).sum::<u64>() as f64 / calls.len() as f64;
        let slack = 0.01 * mean + 4.0;
        let expected = overhead.min(calls.iter().map(|c| c.1).min().unwrap());
        prop_assert!(
            (c.system_tokens_estimate as f64 - expected as f64).abs() <= slack,
            "{c:?} against {overhead} (slack {slack})"
        );
    }

    #[test]
    fn compactions_keep_the_ratio_and_leave_the_overhead_to_the_clean_calls(
        overhead in 1_000u64..30_000,
        ratio in 0.8f64..1.6,
        steps in prop::collection::vec(300u64..6_000, 10..40),
        extra in 0u64..50_000,
    ) {
        // After a compaction the harness holds `extra` unlogged tokens
        // (files it re-read): the ratio still holds there, the overhead
        // comes from the calls before it.
        let half = steps.len() / 2;
        let mut calls = clean(overhead, ratio, &steps[..half]);
        calls.extend(
            clean(overhead + extra, ratio, &steps[half..])
                .into_iter()
                .map(|(local, logged, _)| (local, logged, 1)),
        );
        let c = Calibration::fit(&points(&calls), 0);
        prop_assert!((c.token_ratio - ratio).abs() < 0.01, "{c:?}");
        if half >= MIN_OVERHEAD_SAMPLES {
            prop_assert!(c.system_tokens_estimate.abs_diff(overhead) <= 2, "{c:?}");
        }
    }
}
