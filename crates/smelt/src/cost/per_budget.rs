//! The three budgets as one type: a value per budget, with `map`, `zip` and `iter`, so
//! that residuals, ratios, weights, tolerances and summaries are never spelled out three
//! times by hand.

use serde::{Deserialize, Serialize};

/// One of the three budgets a fair comparison matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    /// Training FLOPs per token.
    Flops,
    /// Parameters.
    Params,
    /// KV-cache elements per token.
    Kv,
}

impl BudgetKind {
    /// The three, in report order.
    pub const ALL: [BudgetKind; 3] = [BudgetKind::Flops, BudgetKind::Params, BudgetKind::Kv];

    /// `"flops"`, `"params"` or `"kv"` (the JSON keys).
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::Flops => "flops",
            BudgetKind::Params => "params",
            BudgetKind::Kv => "kv",
        }
    }
}

/// A value per budget. Serialised as `{"flops": .., "params": .., "kv": ..}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PerBudget<T> {
    /// Training FLOPs per token.
    pub flops: T,
    /// Parameters.
    pub params: T,
    /// KV-cache elements per token.
    pub kv: T,
}

impl<T> PerBudget<T> {
    /// The same value for every budget.
    pub fn splat(value: T) -> Self
    where
        T: Clone,
    {
        Self {
            flops: value.clone(),
            params: value.clone(),
            kv: value,
        }
    }

    /// `f(kind)` for every budget.
    pub fn from_fn(mut f: impl FnMut(BudgetKind) -> T) -> Self {
        Self {
            flops: f(BudgetKind::Flops),
            params: f(BudgetKind::Params),
            kv: f(BudgetKind::Kv),
        }
    }

    /// The value of one budget.
    pub fn get(&self, kind: BudgetKind) -> &T {
        match kind {
            BudgetKind::Flops => &self.flops,
            BudgetKind::Params => &self.params,
            BudgetKind::Kv => &self.kv,
        }
    }

    /// `f` applied to every value.
    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> PerBudget<U> {
        PerBudget {
            flops: f(self.flops),
            params: f(self.params),
            kv: f(self.kv),
        }
    }

    /// Pairs of values, budget by budget.
    pub fn zip<U>(self, other: PerBudget<U>) -> PerBudget<(T, U)> {
        PerBudget {
            flops: (self.flops, other.flops),
            params: (self.params, other.params),
            kv: (self.kv, other.kv),
        }
    }

    /// `(kind, value)` in report order.
    pub fn iter(&self) -> impl Iterator<Item = (BudgetKind, &T)> {
        BudgetKind::ALL.into_iter().map(move |k| (k, self.get(k)))
    }

    /// `[flops, params, kv]`.
    pub fn into_array(self) -> [T; 3] {
        [self.flops, self.params, self.kv]
    }
}

/// Signed relative residuals `model / baseline - 1` of the three budgets.
pub type Residuals = PerBudget<f64>;

/// `model / baseline` of the three budgets.
pub type Ratios = PerBudget<f64>;

impl PerBudget<f64> {
    /// `value / reference - 1`, budget by budget.
    pub fn relative(value: PerBudget<f64>, reference: PerBudget<f64>) -> Self {
        value.zip(reference).map(|(v, r)| v / r - 1.0)
    }

    /// The largest absolute value.
    pub fn max_abs(&self) -> f64 {
        self.iter().fold(0.0, |m, (_, r)| m.max(r.abs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_zip_iter() {
        let a = PerBudget::from_fn(|k| k as usize);
        assert_eq!(a.into_array(), [0, 1, 2]);
        let b = a.zip(PerBudget::splat(10)).map(|(x, y)| x + y);
        assert_eq!(b.into_array(), [10, 11, 12]);
        let kinds: Vec<&str> = b.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(kinds, ["flops", "params", "kv"]);
        let r = PerBudget {
            flops: -0.03,
            params: 0.01,
            kv: 0.02,
        };
        assert_eq!(r.max_abs(), 0.03);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"flops":-0.03,"params":0.01,"kv":0.02}"#
        );
    }
}
