//! The budgets as one type: a value per budget, with `from_fn`, `map`, `zip` and `iter`,
//! so that residuals, ratios, weights, tolerances, scores and summaries are never spelled
//! out budget by budget.
//!
//! This file is where the set of budgets is defined: a budget added here (a
//! [`BudgetKind`] variant, its place in [`BudgetKind::ALL`], its key, its field in
//! [`PerBudget`] and in the few methods below that name every field, its value in
//! [`Budgets::to_f64`] and [`Budgets::fractions`]) is weighed, given a tolerance, scored,
//! kept and serialised by everything that goes through [`PerBudget`] (the objective, the
//! search, its reports) with no change there. Three other files name each budget, and
//! their `match` on [`BudgetKind`] fails to compile until a new one is added: the budget
//! file's `[objective.weights]` (`budget/file.rs`), the reports' words (`report/label.rs`)
//! and the binding floor's explanation (`search/advice.rs`).
//!
//! The predicted step time ([`crate::budget::time`]) is not a budget: it exists only on a
//! named card, and it is a float from the time model, not an exact count of the cost model;
//! it enters the objective as one more component of the score
//! ([`crate::budget::Score::with_time`]). With the budgets it makes the objective's terms
//! ([`Term`]), which the reports iterate over.

use serde::{Deserialize, Serialize};

use super::{Budgets, Keys};
use crate::error::Error;
use crate::model::{Consumer, Model, Stack};

/// One of the budgets a fair comparison matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    /// Training FLOPs per token.
    Flops,
    /// Parameters.
    Params,
    /// KV-cache elements per token.
    Kv,
    /// Bytes of activations a training step saves per token ([`super::memory`]).
    Activations,
}

impl BudgetKind {
    /// How many budgets there are.
    pub const COUNT: usize = 4;

    /// Every budget, in report order.
    pub const ALL: [BudgetKind; Self::COUNT] = [
        BudgetKind::Flops,
        BudgetKind::Params,
        BudgetKind::Kv,
        BudgetKind::Activations,
    ];

    /// Its weight in the objective when a budget file gives none (1: every budget is
    /// matched alike).
    pub fn default_weight(self) -> f64 {
        match self {
            BudgetKind::Flops | BudgetKind::Params | BudgetKind::Kv => 1.0,
            // Reported, not matched, unless a budget file weighs it.
            BudgetKind::Activations => 0.0,
        }
    }

    /// How its value is known: every budget is an exact count (an integer, or the training
    /// FLOPs' exact fraction); the predicted time, outside this set, is a float.
    pub fn exactness(self) -> Exactness {
        Exactness::Exact
    }

    /// Who counts it: `None` for a budget every model has, else the consumer whose
    /// capabilities decide whether a model's stack has it (the activations: recurrent
    /// layers, one-block layers and Gemma 4's pieces are not modelled).
    fn counted_by(self) -> Option<Consumer> {
        match self {
            BudgetKind::Flops | BudgetKind::Params | BudgetKind::Kv => None,
            BudgetKind::Activations => Some(Consumer::Activations),
        }
    }

    /// Why `stack` does not count this budget (the consumer's refusal), if it does not:
    /// then both models' values are 0, their ratio meaningless, and weighing it is refused.
    pub fn uncounted_in(self, stack: &Stack) -> Option<Error> {
        self.counted_by().and_then(|c| c.check(stack).err())
    }

    /// Whether `model` counts this budget ([`BudgetKind::uncounted_in`]; a model whose stack
    /// does not resolve counts nothing beyond the budgets every model has).
    pub fn counted_for(self, model: &Model) -> bool {
        match Stack::of(model) {
            Ok(stack) => self.uncounted_in(&stack).is_none(),
            Err(_) => self.counted_by().is_none(),
        }
    }

    /// What the objective does with this budget for `model` under `weight`.
    pub fn status(self, model: &Model, weight: f64) -> TermStatus {
        match (self.counted_for(model), weight > 0.0) {
            (false, _) => TermStatus::NotCounted,
            (true, true) => TermStatus::Matched,
            (true, false) => TermStatus::Reported,
        }
    }

    /// `"flops"`, `"params"` or `"kv"` (the JSON keys).
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::Flops => "flops",
            BudgetKind::Params => "params",
            BudgetKind::Kv => "kv",
            BudgetKind::Activations => "activations",
        }
    }
}

/// A term of the objective: one of the budgets, or the predicted step time. The budgets
/// are exact counts every model has (or that its stack does not count); the time exists
/// only where a card is named (`[objective.time]`, `grid --predict`) and is a float from
/// the time model. Reports iterate over the terms of a result ([`Term::of`]) and ask each
/// for its status, words and residual, so that no term has a special case of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Term {
    /// A budget ([`BudgetKind`]).
    Budget(BudgetKind),
    /// The predicted step time per token, on a named card.
    Time,
}

impl Term {
    /// The terms of a result: every budget in report order, then the time when the result
    /// carries a prediction (`timed`).
    pub fn of(timed: bool) -> impl Iterator<Item = Term> {
        (BudgetKind::ALL.into_iter().map(Term::Budget)).chain(timed.then_some(Term::Time))
    }

    /// How its value is known.
    pub fn exactness(self) -> Exactness {
        match self {
            Term::Budget(k) => k.exactness(),
            Term::Time => Exactness::Float,
        }
    }

    /// Its key: a budget's JSON key, or `"time"` (`[objective.weights]`).
    pub fn as_str(self) -> &'static str {
        match self {
            Term::Budget(k) => k.as_str(),
            Term::Time => "time",
        }
    }

    /// Whether `model` has this term: a budget its stack counts ([`BudgetKind::counted_for`]),
    /// or the time, which every model a prediction was made for has.
    pub fn counted_for(self, model: &Model) -> bool {
        match self {
            Term::Budget(k) => k.counted_for(model),
            Term::Time => true,
        }
    }

    /// This term's residual in a row that has the budgets' `residuals` (if costed) and the
    /// predicted time's `time` residual (if predicted).
    pub fn residual(self, residuals: Option<&Residuals>, time: Option<f64>) -> Option<f64> {
        match self {
            Term::Budget(k) => residuals.map(|r| r[k]),
            Term::Time => time,
        }
    }
}

/// How a term of the objective is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exactness {
    /// An exact count: an integer, or an exact fraction (the training FLOPs per token).
    Exact,
    /// A float (the predicted step time, from a roofline).
    Float,
}

/// What the objective does with a term for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TermStatus {
    /// Weighed (weight above 0): its residual enters the score.
    Matched,
    /// Counted and reported, weight 0.
    Reported,
    /// Not counted for this model (both values 0; reports show `n/a` or leave it out).
    NotCounted,
}

impl PerBudget<TermStatus> {
    /// Each budget's status for `model` under `weights`.
    pub fn statuses(model: &Model, weights: &PerBudget<f64>) -> Self {
        PerBudget::from_fn(|k| k.status(model, weights[k]))
    }
}

/// A value per budget. Serialised as `{"flops": .., "params": .., "kv": ..}`; read from the
/// same keys, no other (with `Option` values, a key left out is `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerBudget<T> {
    /// Training FLOPs per token.
    pub flops: T,
    /// Parameters.
    pub params: T,
    /// KV-cache elements per token.
    pub kv: T,
    /// Activation bytes per token.
    pub activations: T,
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
            kv: value.clone(),
            activations: value,
        }
    }

    /// `f(kind)` for every budget.
    #[inline]
    pub fn from_fn(mut f: impl FnMut(BudgetKind) -> T) -> Self {
        Self {
            flops: f(BudgetKind::Flops),
            params: f(BudgetKind::Params),
            kv: f(BudgetKind::Kv),
            activations: f(BudgetKind::Activations),
        }
    }

    /// `f(kind)` for every budget, or the first error, in report order.
    pub fn try_from_fn<E>(mut f: impl FnMut(BudgetKind) -> Result<T, E>) -> Result<Self, E> {
        Ok(Self {
            flops: f(BudgetKind::Flops)?,
            params: f(BudgetKind::Params)?,
            kv: f(BudgetKind::Kv)?,
            activations: f(BudgetKind::Activations)?,
        })
    }

    /// The value of one budget.
    #[inline]
    pub fn get(&self, kind: BudgetKind) -> &T {
        match kind {
            BudgetKind::Flops => &self.flops,
            BudgetKind::Params => &self.params,
            BudgetKind::Kv => &self.kv,
            BudgetKind::Activations => &self.activations,
        }
    }

    /// `f` applied to every value.
    #[inline]
    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> PerBudget<U> {
        PerBudget {
            flops: f(self.flops),
            params: f(self.params),
            kv: f(self.kv),
            activations: f(self.activations),
        }
    }

    /// Pairs of values, budget by budget.
    #[inline]
    pub fn zip<U>(self, other: PerBudget<U>) -> PerBudget<(T, U)> {
        PerBudget {
            flops: (self.flops, other.flops),
            params: (self.params, other.params),
            kv: (self.kv, other.kv),
            activations: (self.activations, other.activations),
        }
    }

    /// `(kind, value)` in report order.
    pub fn iter(&self) -> impl Iterator<Item = (BudgetKind, &T)> {
        BudgetKind::ALL.into_iter().map(move |k| (k, self.get(k)))
    }

    /// The values in report order (`[flops, params, kv]`).
    pub fn into_array(self) -> [T; BudgetKind::COUNT] {
        [self.flops, self.params, self.kv, self.activations]
    }

    /// Whether `f` holds for every budget's value.
    pub fn all(&self, mut f: impl FnMut(&T) -> bool) -> bool {
        self.iter().all(|(_, v)| f(v))
    }
}

impl<T> std::ops::Index<BudgetKind> for PerBudget<T> {
    type Output = T;

    fn index(&self, kind: BudgetKind) -> &T {
        self.get(kind)
    }
}

/// The conversions every budget provides, listed here with the budgets themselves.
impl Budgets {
    /// The budgets as floats, for ratios.
    pub fn to_f64(&self) -> PerBudget<f64> {
        PerBudget::from_fn(|kind| match kind {
            BudgetKind::Flops => self.flops.as_f64(),
            BudgetKind::Params => self.params.as_f64(),
            BudgetKind::Kv => self.kv.as_f64(),
            BudgetKind::Activations => self.activations.as_f64(),
        })
    }

    /// Each budget as an exact fraction `(numerator, denominator)`: the training FLOPs as
    /// their rational, the counts over 1.
    pub fn fractions(&self) -> PerBudget<(u128, u128)> {
        PerBudget::from_fn(|kind| match kind {
            BudgetKind::Flops => (self.flops.numer(), self.flops.denom()),
            BudgetKind::Params => (u128::from(self.params.0), 1),
            BudgetKind::Kv => (u128::from(self.kv.0), 1),
            BudgetKind::Activations => (self.activations.numer(), self.activations.denom()),
        })
    }
}

impl PerBudget<u128> {
    /// A common denominator of each budget's [`Budgets::fractions`] over every model
    /// costed with `keys`: the query count ([`Keys::denominator`]) for the training FLOPs,
    /// 1 for the counts.
    pub fn common_denominators(keys: &Keys) -> Self {
        PerBudget::from_fn(|kind| match kind {
            BudgetKind::Flops | BudgetKind::Activations => keys.denominator(),
            BudgetKind::Params | BudgetKind::Kv => 1,
        })
    }
}

/// Signed relative residuals `model / baseline - 1` of the budgets.
pub type Residuals = PerBudget<f64>;

/// `model / baseline` of the budgets.
pub type Ratios = PerBudget<f64>;

impl PerBudget<f64> {
    /// `value / reference - 1`, budget by budget; 0 where both are 0 (a budget neither
    /// model has, as the activations of models whose activations are not counted).
    pub fn relative(value: PerBudget<f64>, reference: PerBudget<f64>) -> Self {
        value.zip(reference).map(|(v, r)| {
            if v == 0.0 && r == 0.0 {
                0.0
            } else {
                v / r - 1.0
            }
        })
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
        assert_eq!(a.into_array(), [0, 1, 2, 3]);
        let b = a.zip(PerBudget::splat(10)).map(|(x, y)| x + y);
        assert_eq!(b.into_array(), [10, 11, 12, 13]);
        let kinds: Vec<&str> = b.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(kinds, ["flops", "params", "kv", "activations"]);
        let r = PerBudget {
            flops: -0.03,
            params: 0.01,
            kv: 0.02,
            activations: 0.0,
        };
        assert_eq!(r.max_abs(), 0.03);
        assert_eq!(r[BudgetKind::Params], 0.01);
        assert!(r.all(|v| v.abs() < 0.05) && !r.all(|&v| v > 0.0));
        let ok: Result<PerBudget<usize>, String> = PerBudget::try_from_fn(|k| Ok(k as usize));
        assert_eq!(ok.map(PerBudget::into_array), Ok([0, 1, 2, 3]));
        let first_error: Result<PerBudget<usize>, BudgetKind> = PerBudget::try_from_fn(|k| {
            if k == BudgetKind::Flops {
                Ok(0)
            } else {
                Err(k)
            }
        });
        assert_eq!(first_error, Err(BudgetKind::Params));
        assert_eq!(BudgetKind::ALL.len(), BudgetKind::COUNT);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"flops":-0.03,"params":0.01,"kv":0.02,"activations":0.0}"#
        );
    }
}
