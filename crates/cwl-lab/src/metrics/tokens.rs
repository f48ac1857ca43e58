//! Request-size statistics.

/// The p-th percentile (0 < p ≤ 100) by the nearest-rank method; 0 when empty.
pub fn percentile(values: &[u32], p: f64) -> u32 {
    if values.is_empty() {
        return 0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// The arithmetic mean; 0 when empty.
pub fn mean(values: &[u32]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.iter().map(|v| f64::from(*v)).sum::<f64>() / values.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 95.0), 95);
        assert_eq!(percentile(&[7], 95.0), 7);
        assert_eq!(percentile(&[], 95.0), 0);
        assert_eq!(percentile(&[1, 2, 3, 4], 50.0), 2);
        assert_eq!(mean(&[1, 2, 3, 4]), 2.5);
        assert_eq!(mean(&[]), 0.0);
    }
}
