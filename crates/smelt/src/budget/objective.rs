//! What the solver minimises and what it must meet: residual weights, the mode, and the
//! tolerances a result is checked against.

use serde::Serializer;

use crate::cost::{BudgetKind, PerBudget, Residuals};
use crate::error::{Error, Result};
use crate::names::named_enum;

named_enum! {
    /// Whether the looped model may get more of a budget than the Baseline.
    #[derive(Default)]
    pub enum Mode: "mode" {
        /// Residuals of either sign; minimise their size.
        #[default]
        TwoSided = "two-sided",
        /// No budget may exceed the Baseline's: every residual `<= 0`.
        Conservative = "conservative",
    }
}

/// Weights of the three residuals in the objective (positive, finite).
pub type Weights = PerBudget<f64>;

/// Largest acceptable |residual| per budget (`None`: no limit).
pub type Tolerance = PerBudget<Option<f64>>;

/// Checks that every weight is a positive finite number.
pub fn validate_weights(w: &Weights) -> Result<()> {
    for (kind, &v) in w.iter() {
        if !(v.is_finite() && v > 0.0) {
            return Err(Error::invalid(
                format!("objective.weights.{}", kind.as_str()),
                format!("must be a positive finite number (got {v})"),
            ));
        }
    }
    Ok(())
}

/// Checks that every tolerance given is a non-negative finite number.
pub fn validate_tolerance(t: &Tolerance) -> Result<()> {
    for (kind, v) in t.iter() {
        if let Some(v) = *v
            && !(v.is_finite() && v >= 0.0)
        {
            return Err(Error::invalid(
                format!("tolerance.{}", kind.as_str()),
                format!("must be a non-negative finite number (got {v})"),
            ));
        }
    }
    Ok(())
}

/// The budgets whose residual is outside its tolerance, in report order.
pub fn broken(t: &Tolerance, r: &Residuals) -> Vec<BudgetKind> {
    t.zip(*r)
        .iter()
        .filter(|(_, (tol, v))| tol.is_some_and(|tol| v.abs() > tol))
        .map(|(k, _)| k)
        .collect()
}

/// Serialises a [`Tolerance`] with only the limits that are set (`{}` when none is).
pub fn serialize_tolerance<S: Serializer>(t: &Tolerance, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let set: Vec<_> = t.iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect();
    let mut map = s.serialize_map(Some(set.len()))?;
    for (k, v) in set {
        map.serialize_entry(k.as_str(), &v)?;
    }
    map.end()
}

/// The weighted `|r|` of each budget, largest first: the objective's value.
pub fn score(r: &Residuals, w: &Weights) -> [f64; 3] {
    let mut s = r.zip(*w).map(|(r, w)| w * r.abs()).into_array();
    s.sort_by(|a, b| b.total_cmp(a));
    s
}
