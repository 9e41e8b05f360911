//! The per-GPU peaks of a Baseline and its looped match under the Baseline's `[training]`
//! ([`super::training`]).

use serde::Serialize;

use super::training::training_memory;
use crate::error::{Error, Result};
use crate::model::ModelSpec;
use crate::units::ActivationBytes;

/// The per-GPU peaks of a Baseline and its looped match under the Baseline's
/// `[training]` (what `match`, `grid` and `sweep` report when a layout is given).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeakPair {
    /// The Baseline's peak per GPU, bytes.
    pub baseline: ActivationBytes,
    /// The looped model's, when the layout divides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub looped: Option<ActivationBytes>,
    /// `looped / baseline`, when the layout divides the looped model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Why the layout does not split the looped model (the field and the rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The looped model's [`super::training::TrainingMemory::pipeline_note`]: its peak is not exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The per-GPU peaks of `baseline` and `looped` (costed under the Baseline's counting and
/// workload) under the Baseline's `[training]`; `None` without one. A layout that does not
/// split the looped model is reported (`refused`), not an error.
pub fn peak_pair(baseline: &ModelSpec, looped: &ModelSpec) -> Result<Option<PeakPair>> {
    let Some(t) = &baseline.training else {
        return Ok(None);
    };
    let base = training_memory(baseline, t)?.peak;
    let under = ModelSpec {
        counting: baseline.counting,
        workload: baseline.workload.clone(),
        training: None,
        ..looped.clone()
    };
    Ok(Some(match training_memory(&under, t) {
        Ok(m) => PeakPair {
            baseline: base,
            looped: Some(m.peak),
            ratio: Some(m.peak.as_f64() / base.as_f64()),
            refused: None,
            note: m.pipeline_note,
        },
        Err(e @ Error::InvalidSpec { .. }) => PeakPair {
            baseline: base,
            looped: None,
            ratio: None,
            refused: Some(format!("the looped model: {e}")),
            note: None,
        },
        Err(e) => return Err(e),
    }))
}
