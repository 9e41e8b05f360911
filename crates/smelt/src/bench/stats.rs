//! What a ratio of measured times is worth: the median over interleaved rounds and a
//! bootstrap interval of that median.
//!
//! Each round times the Baseline's kernels and the looped model's back to back
//! ([`super::measure`]), so a slow spell of the machine hits both; the ratio is taken per
//! round, and the reported ratio is the median of the rounds' ratios. Its interval is the
//! percentile bootstrap of the median (the rounds resampled with replacement
//! [`RESAMPLES`] times from a fixed seed, so the same rounds give the same interval; the
//! 2.5th and 97.5th percentiles). With few rounds the interval is about the range of the
//! rounds' ratios. A ratio whose interval is wider than [`NOISY_WIDTH`] of the median is
//! flagged `noisy`: the tables show it but do not quote it as a finding.

use std::ops::Not;

use serde::Serialize;

use crate::rng::SplitMix64;

/// Bootstrap resamples of an interval.
pub const RESAMPLES: usize = 2000;
/// An interval wider than this share of its median marks the ratio as noisy.
pub const NOISY_WIDTH: f64 = 0.05;

/// A measured ratio: the median over rounds and its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioStats {
    /// The median of the rounds' ratios.
    pub median: f64,
    /// The 95% bootstrap interval of the median, `[low, high]`.
    pub interval: [f64; 2],
    /// Rounds measured.
    pub rounds: usize,
    /// Whether the interval is wider than [`NOISY_WIDTH`] of the median.
    pub noisy: bool,
}

/// The median of `v`: the upper middle one for an even count, as for the kernel shapes'
/// rounds (a value that was measured, not a mean of two); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The statistics of the per-round ratios `ratios`.
pub fn of_ratios(ratios: &[f64]) -> RatioStats {
    let m = median(ratios);
    let n = ratios.len();
    let mut rng = SplitMix64::new(0x5eed);
    let mut medians: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let draw: Vec<f64> = (0..n).map(|_| ratios[rng.below(n)]).collect();
            median(&draw)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let at = |q: f64| medians[((q * (RESAMPLES - 1) as f64).round() as usize).min(RESAMPLES - 1)];
    let interval = match n {
        0 => [f64::NAN; 2],
        _ => [at(0.025), at(0.975)],
    };
    RatioStats {
        median: m,
        interval,
        rounds: n,
        // NaN (no rounds) counts as noisy.
        noisy: (interval[1] - interval[0] <= NOISY_WIDTH * m.abs()).not(),
    }
}

/// The per-round ratios of `second` to `first` (each round's seconds, scaled by
/// `scale`: the ratio of the two batches' tokens, so that the ratio is per token).
pub fn round_ratios(first: &[f64], second: &[f64], scale: f64) -> Vec<f64> {
    first
        .iter()
        .zip(second)
        .map(|(a, b)| b / a * scale)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_intervals() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 3.0);
        let steady = of_ratios(&[1.0, 1.01, 0.99, 1.0, 1.0]);
        assert_eq!(steady.median, 1.0);
        assert!(steady.interval[0] >= 0.99 && steady.interval[1] <= 1.01);
        assert!(!steady.noisy);
        let noisy = of_ratios(&[0.45, 1.42, 1.0]);
        assert!(noisy.noisy);
        assert!(noisy.interval[0] <= 1.0 && noisy.interval[1] >= 1.0);
        // Deterministic: the same rounds, the same interval.
        assert_eq!(
            of_ratios(&[0.9, 1.1, 1.0, 1.2]),
            of_ratios(&[0.9, 1.1, 1.0, 1.2])
        );
        assert_eq!(round_ratios(&[2.0, 4.0], &[3.0, 4.0], 1.0), vec![1.5, 1.0]);
    }
}
