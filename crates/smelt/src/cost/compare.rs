//! A model against its Baseline: both costs and the signed residual of each budget.

use serde::Serialize;

use super::{Cost, Residuals, cost, cost_against};
use crate::error::Result;
use crate::spec::ModelSpec;

/// A model and its Baseline, side by side (`smelt cost MODEL --against BASELINE`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The Baseline's cost (sparsity against its own control).
    pub baseline: Cost,
    /// The model's cost (sparsity against the Baseline's control).
    pub model: Cost,
    /// `model / baseline - 1` per budget.
    pub residuals: Residuals,
}

/// Costs `model` against `baseline`.
pub fn compare(baseline: &ModelSpec, model: &ModelSpec) -> Result<Comparison> {
    let base = cost(baseline)?;
    let looped = cost_against(model, baseline)?;
    let residuals = looped.budgets().residuals_against(&base.budgets());
    Ok(Comparison {
        baseline: base,
        model: looped,
        residuals,
    })
}
