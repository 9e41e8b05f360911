//! Ratios of a looped model's step time to its Baseline's, as the match and grid reports
//! carry them: measured by the benchmark ([`TimeRatio`], `--bench`) or predicted on a
//! roofline ([`PredictedRatio`], `--predict`).

use serde::{Deserialize, Serialize};

use super::device::Backend;
use super::predict::{PredictOptions, predict_model};
use super::roofline::Roofline;
use crate::error::Result;
use crate::model::ModelSpec;

/// The measured time of a looped model against its Baseline, as a grid cell or a match
/// reports it (`--bench`); read back when shards of a grid are merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeRatio {
    /// Looped / Baseline seconds per token: the median of the rounds' ratios.
    pub ratio: f64,
    /// The ratio's 95% bootstrap interval over the rounds ([`crate::bench::stats`]).
    pub interval: [f64; 2],
    /// Rounds measured (Baseline and looped timed back to back in each).
    pub rounds: usize,
    /// Whether the interval is wider than [`crate::bench::stats::NOISY_WIDTH`] of the ratio: not
    /// a figure to quote.
    pub noisy: bool,
    /// Where it was measured.
    pub backend: Backend,
    /// The device, in words.
    pub device: String,
    /// Tokens in the benchmarked batch (whole documents of the workload).
    pub tokens: u64,
    /// The Baseline's seconds per token.
    pub baseline_seconds_per_token: f64,
    /// The looped model's seconds per token.
    pub looped_seconds_per_token: f64,
}

/// The predicted time of a looped model against its Baseline (a grid cell's `predicted`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PredictedRatio {
    /// Looped / Baseline predicted seconds per token.
    pub ratio: f64,
    /// The Baseline's predicted seconds per token.
    pub baseline_seconds_per_token: f64,
    /// The looped model's predicted seconds per token.
    pub looped_seconds_per_token: f64,
}

/// The predicted time ratio of `looped` to `baseline`.
pub fn predicted_ratio(
    baseline: &ModelSpec,
    looped: &ModelSpec,
    roof: &Roofline,
    opts: &PredictOptions,
) -> Result<PredictedRatio> {
    let (b, l) = (
        predict_model(baseline, roof, opts)?,
        predict_model(looped, roof, opts)?,
    );
    Ok(PredictedRatio {
        ratio: l.seconds_per_token / b.seconds_per_token,
        baseline_seconds_per_token: b.seconds_per_token,
        looped_seconds_per_token: l.seconds_per_token,
    })
}
