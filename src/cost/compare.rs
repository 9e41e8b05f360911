//! A model against its Baseline: both costs and the signed residual of each budget.

use serde::Serialize;

use super::{Budgets, Cost, cost, cost_against};
use crate::error::Result;
use crate::spec::ModelSpec;
use crate::units::relative;

/// Signed relative residuals `model / baseline - 1` of the three budgets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Residuals {
    /// Training FLOPs per token.
    pub flops: f64,
    /// Parameters.
    pub params: f64,
    /// KV-cache elements per token.
    pub kv: f64,
}

impl Residuals {
    /// The residuals of `model` against `baseline`.
    pub fn between(model: &Budgets, baseline: &Budgets) -> Self {
        Self {
            flops: relative(model.flops.as_f64(), baseline.flops.as_f64()),
            params: relative(model.params.as_f64(), baseline.params.as_f64()),
            kv: relative(model.kv.as_f64(), baseline.kv.as_f64()),
        }
    }

    /// The residuals as `[flops, params, kv]`.
    pub fn as_array(&self) -> [f64; 3] {
        [self.flops, self.params, self.kv]
    }

    /// The largest absolute residual.
    pub fn max_abs(&self) -> f64 {
        self.as_array().iter().fold(0.0, |m, r| m.max(r.abs()))
    }
}

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
    let residuals = Residuals::between(&looped.budgets(), &base.budgets());
    Ok(Comparison {
        baseline: base,
        model: looped,
        residuals,
    })
}
