//! The predicted-time budget: the looped model's training step time per token on a named
//! card, predicted by the roofline over the kernel plan ([`crate::time`]),
//! against the Baseline's, as a term of the objective.
//!
//! ```toml
//! [objective.weights]
//! time = 1.0                  # 0 (the default): reported, not matched
//!
//! [objective.time]            # the device the time is predicted on
//! card = "h200-sxm"           # an id of the card table, or a driver's name ("h200")
//! # peak = 900.0              # instead of a card: dense peak, TFLOP/s
//! # bandwidth = 4.8           # memory bandwidth, TB/s (replaces the card's)
//! # launch_us = 4.0           # seconds per kernel launch, µs
//! # calibration = "cal.json"  # smelt calibrate's file, relative to the budget file
//! # attention = "fused"       # or "unfused"
//! # experts = "grouped"       # or "per-expert"
//! # tokens = 16384            # the batch, rounded to whole documents
//! # routing = "balanced"      # or "skew=S"
//! ```
//!
//! The keys mean what `smelt predict`'s flags of the same names mean. The residual is
//! `r_T = s_looped / s_Baseline - 1` of the predicted seconds per token, weighted and
//! scored like every other budget's. Unlike the others it is a float, not an exact count,
//! and not affine in the expert count (module docs of [`crate::search`] say how the search
//! stays exact); it has no tolerance, and it is predicted, not measured: an uncalibrated
//! roofline gives every kernel the card's datasheet peak and bandwidth.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::model::ModelSpec;
use crate::plan::MAX_TOKENS;
use crate::time::{Given, PredictOptions, PredictSpec, PredictionBasis, Roofline, predict_model};

/// The time budget of a match: its weight and the roofline it is predicted on.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeBudget {
    weight: f64,
    roofline: Roofline,
    options: PredictOptions,
    warning: Option<String>,
    calibration_file: Option<PathBuf>,
}

impl TimeBudget {
    /// The time budget of weight `weight` (a non-negative finite number; 0: reported, not
    /// matched) predicted on `roofline` with `options`.
    pub fn new(weight: f64, roofline: Roofline, options: PredictOptions) -> Result<Self> {
        if !(weight.is_finite() && weight >= 0.0) {
            return Err(Error::invalid(
                "objective.weights.time",
                format!("must be a non-negative finite number (got {weight})"),
            ));
        }
        roofline.device.validate()?;
        if let Some(c) = &roofline.calibration {
            c.validate()?;
        }
        if !(1..=MAX_TOKENS).contains(&options.tokens) {
            return Err(Error::invalid(
                "objective.time.tokens",
                format!(
                    "must be between 1 and {} (got {})",
                    MAX_TOKENS, options.tokens
                ),
            ));
        }
        Ok(Self {
            weight,
            roofline,
            options,
            warning: None,
            calibration_file: None,
        })
    }

    /// The same budget, carrying a warning about its device for the reports.
    pub fn with_warning(mut self, warning: Option<String>) -> Self {
        self.warning = warning;
        self
    }

    /// Its weight in the objective.
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// Whether it is matched (weighed above 0), not only reported.
    pub fn weighed(&self) -> bool {
        self.weight > 0.0
    }

    /// The roofline the time is predicted on.
    pub fn roofline(&self) -> &Roofline {
        &self.roofline
    }

    /// The batch and routing of the prediction.
    pub fn options(&self) -> &PredictOptions {
        &self.options
    }

    /// The calibration file it was read with (`calibration = "..."`), if any: an input of
    /// the run, never written over.
    pub fn calibration_file(&self) -> Option<&Path> {
        self.calibration_file.as_deref()
    }

    /// A warning about the device (a CPU calibration applied to a card), if any.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// What the prediction assumes, for a report.
    pub fn basis(&self) -> PredictionBasis {
        PredictionBasis::of(&self.roofline, &self.options)
    }

    /// The predicted seconds per token of `spec`'s training step
    /// ([`predict_model`]'s `seconds_per_token`).
    pub fn seconds_per_token(&self, spec: &ModelSpec) -> Result<f64> {
        Ok(predict_model(spec, &self.roofline, &self.options)?.seconds_per_token)
    }
}

/// `[objective.time]` as written (module docs): a prediction's device and options, read as
/// `smelt predict`'s flags and Python's `predict` read them.
pub(crate) type TimeFile = PredictSpec;

/// `[objective.time]`'s error `e` under its own name (`peak` → `objective.time.peak`).
fn under_time(e: Error) -> Error {
    match e {
        Error::InvalidSpec { field, rule } if !field.starts_with("objective.") => {
            Error::invalid(format!("objective.time.{field}"), rule)
        }
        other => other,
    }
}

/// The time budget of weight `weight` that `spec` asks for, with relative paths taken from
/// `dir`.
pub(crate) fn resolve(spec: &TimeFile, weight: f64, dir: &Path) -> Result<TimeBudget> {
    let p = spec.resolve(dir, Given::TimeKeys).map_err(under_time)?;
    Ok(TimeBudget {
        calibration_file: p.calibration_file,
        ..TimeBudget::new(weight, p.roofline, p.options)
            .map_err(under_time)?
            .with_warning(p.warning)
    })
}
