//! What the solver minimises and what it must meet: residual weights, the mode, the
//! tolerances a result is checked against, and the score the candidates are ranked by.
//!
//! [`Weights`] and [`Tolerance`] are checked when made ([`Weights::new`],
//! [`Tolerance::new`]), so a value in hand is valid; each refusal names the field
//! (`objective.weights.<budget>`, `tolerance.<budget>`) and the rule. All three are a value
//! per budget ([`PerBudget`]) and read through to it, so a budget added to [`BudgetKind`]
//! is weighed, checked and scored with no change here.

use std::cmp::Ordering;
use std::fmt;
use std::ops::{Deref, Index};

use serde::{Serialize, Serializer};

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

/// Weights of the residuals in the objective: every one a positive finite number, checked
/// by [`Weights::new`]. Reads as the [`PerBudget`] of the weights; by default each
/// budget's [`BudgetKind::default_weight`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights(PerBudget<f64>);

impl Weights {
    /// Checks that every weight is a positive finite number (the error names
    /// `objective.weights.<budget>`); a budget whose default weight is 0 (one that is
    /// reported, not matched, unless a budget file weighs it: the activations) may also be
    /// given 0.
    pub fn new(weights: PerBudget<f64>) -> Result<Self> {
        for (kind, &v) in weights.iter() {
            let reported_only = v == 0.0 && kind.default_weight() == 0.0;
            if !(v.is_finite() && (v > 0.0 || reported_only)) {
                return Err(Error::invalid(
                    format!("objective.weights.{}", kind.as_str()),
                    format!("must be a positive finite number (got {v})"),
                ));
            }
        }
        Ok(Self(weights))
    }

    /// The largest weight.
    pub fn max(&self) -> f64 {
        self.0.iter().fold(0.0, |m, (_, &w)| m.max(w))
    }
}

impl Default for Weights {
    fn default() -> Self {
        Self(PerBudget::from_fn(BudgetKind::default_weight))
    }
}

impl Deref for Weights {
    type Target = PerBudget<f64>;

    fn deref(&self) -> &PerBudget<f64> {
        &self.0
    }
}

/// Largest acceptable |residual| per budget (`None`: no limit): every limit given a
/// non-negative finite number, checked by [`Tolerance::new`]. Reads as the [`PerBudget`] of
/// the limits; none by default. Serialised with only the limits that are set (`{}` when
/// none is).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tolerance(PerBudget<Option<f64>>);

impl Tolerance {
    /// Checks that every limit given is a non-negative finite number (the error names
    /// `tolerance.<budget>`).
    pub fn new(limits: PerBudget<Option<f64>>) -> Result<Self> {
        for (kind, v) in limits.iter() {
            if let Some(v) = *v
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(Error::invalid(
                    format!("tolerance.{}", kind.as_str()),
                    format!("must be a non-negative finite number (got {v})"),
                ));
            }
        }
        Ok(Self(limits))
    }

    /// The budgets whose residual in `r` is outside its limit, in report order.
    pub fn broken(&self, r: &Residuals) -> Vec<BudgetKind> {
        self.0
            .zip(*r)
            .iter()
            .filter(|(_, (tol, v))| tol.is_some_and(|tol| v.abs() > tol))
            .map(|(k, _)| k)
            .collect()
    }

    /// Whether any limit is set: without one, a result is checked against none, so it is
    /// neither within nor outside tolerance.
    pub fn is_set(&self) -> bool {
        self.0.iter().any(|(_, v)| v.is_some())
    }

    /// Whether `r` is within every limit: `None` when no limit is set (nothing was checked,
    /// so nothing passed).
    pub fn verdict(&self, r: &Residuals) -> Option<bool> {
        self.is_set().then(|| self.broken(r).is_empty())
    }
}

impl Deref for Tolerance {
    type Target = PerBudget<Option<f64>>;

    fn deref(&self) -> &PerBudget<Option<f64>> {
        &self.0
    }
}

impl Serialize for Tolerance {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let set: Vec<_> = self.iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect();
        let mut map = s.serialize_map(Some(set.len()))?;
        for (k, v) in set {
            map.serialize_entry(k.as_str(), &v)?;
        }
        map.end()
    }
}

/// The objective's value: the weighted `|r|` of each budget (and of the predicted time,
/// when the budget has one: [`Score::with_time`]), largest first. Scores are ordered
/// lexicographically, exactly on the floats ([`f64::total_cmp`], component by component):
/// a total order, the one the solver minimises. Serialised as the array of its components;
/// indexing gives a component (`score[0]` is the largest).
#[derive(Clone, Copy, PartialEq)]
pub struct Score {
    /// The components, largest first, in the first `len`; 0 after.
    c: [f64; BudgetKind::COUNT + 1],
    len: usize,
}

impl Score {
    /// The score of residuals `r` under weights `w`.
    pub fn of(r: &Residuals, w: &Weights) -> Self {
        let mut c = [0.0; BudgetKind::COUNT + 1];
        let s = r.zip(**w).map(|(r, w)| w * r.abs()).into_array();
        c[..BudgetKind::COUNT].copy_from_slice(&s);
        c[..BudgetKind::COUNT].sort_by(|a, b| b.total_cmp(a));
        Self {
            c,
            len: BudgetKind::COUNT,
        }
    }

    /// This score with the predicted time's weighted `|r_T|` (`weighted`, non-negative)
    /// among its components. Every component of the result is at least the same component
    /// of this score with `weighted = 0` (the `i`-th largest of a list only grows when a 0
    /// in it is raised), so that score is a lower bound of this one in the order.
    pub fn with_time(mut self, weighted: f64) -> Self {
        debug_assert_eq!(self.len, BudgetKind::COUNT, "one time component");
        self.c[self.len] = weighted;
        self.len += 1;
        self.c[..self.len].sort_by(|a, b| b.total_cmp(a));
        self
    }

    /// The largest weighted `|r|` (the first component).
    pub fn worst(&self) -> f64 {
        self.c[0]
    }

    /// The components, largest first.
    pub fn components(&self) -> &[f64] {
        &self.c[..self.len]
    }

    /// The lexicographic order of the module docs, exact on the floats.
    pub fn rank(&self, other: &Self) -> Ordering {
        self.components()
            .iter()
            .zip(other.components())
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl Serialize for Score {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.components().serialize(s)
    }
}

impl Index<usize> for Score {
    type Output = f64;

    fn index(&self, i: usize) -> &f64 {
        &self.components()[i]
    }
}

impl fmt::Debug for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.components().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FLOPs, parameters and KV as given, any other budget `rest`.
    fn per<T: Copy>(rest: T, flops: T, params: T, kv: T) -> PerBudget<T> {
        let mut p = PerBudget::splat(rest);
        (p.flops, p.params, p.kv) = (flops, params, kv);
        p
    }

    fn field(e: Error) -> String {
        match e {
            Error::InvalidSpec { field, .. } => field,
            other => panic!("not an invalid-field error: {other}"),
        }
    }

    #[test]
    fn weights_refuse_what_is_not_positive_and_finite_naming_the_budget() {
        assert!(Weights::new(per(1.0, 1.0, 0.5, 2.0)).is_ok());
        for kind in BudgetKind::ALL {
            // A budget reported, not matched, by default (the activations) may be weighed 0.
            let zero = PerBudget::from_fn(|k| if k == kind { 0.0 } else { 1.0 });
            assert_eq!(Weights::new(zero).is_ok(), kind.default_weight() == 0.0);
            for bad in [-1.0, f64::NAN, f64::INFINITY] {
                let w = PerBudget::from_fn(|k| if k == kind { bad } else { 1.0 });
                let e = Weights::new(w).unwrap_err();
                assert!(e.to_string().contains("positive finite"), "{e}");
                assert_eq!(field(e), format!("objective.weights.{}", kind.as_str()));
            }
        }
        for kind in [BudgetKind::Flops, BudgetKind::Params, BudgetKind::Kv] {
            assert_eq!(Weights::default()[kind], 1.0, "{kind:?}");
        }
        assert_eq!(Weights::default()[BudgetKind::Activations], 0.0);
        assert_eq!(Weights::new(per(1.0, 1.0, 3.0, 2.0)).unwrap().max(), 3.0);
    }

    #[test]
    fn tolerances_refuse_what_is_not_non_negative_and_finite_naming_the_budget() {
        assert!(Tolerance::new(PerBudget::splat(None)).is_ok());
        assert!(Tolerance::new(per(None, Some(0.0), None, Some(0.1))).is_ok());
        for kind in BudgetKind::ALL {
            for bad in [-0.1, f64::NAN, f64::INFINITY] {
                let t = PerBudget::from_fn(|k| (k == kind).then_some(bad));
                let e = Tolerance::new(t).unwrap_err();
                assert!(e.to_string().contains("non-negative finite"), "{e}");
                assert_eq!(field(e), format!("tolerance.{}", kind.as_str()));
            }
        }
    }

    #[test]
    fn tolerance_breaks_and_serialises_only_what_is_set() {
        let t = Tolerance::new(per(None, Some(0.01), None, Some(0.05))).unwrap();
        assert_eq!(
            t.broken(&per(0.5, -0.02, 0.5, 0.05)),
            vec![BudgetKind::Flops],
            "params has no limit; kv is at its limit"
        );
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"flops":0.01,"kv":0.05}"#
        );
        assert_eq!(serde_json::to_string(&Tolerance::default()).unwrap(), "{}");
    }

    #[test]
    fn score_is_sorted_weighted_and_ranked_lexicographically() {
        let w = Weights::new(per(1.0, 1.0, 2.0, 0.5)).unwrap();
        let s = Score::of(&per(0.0, -0.1, 0.02, 0.3), &w);
        assert_eq!(&s.components()[..3], &[0.15, 0.1, 0.04]);
        assert!(s.components()[3..].iter().all(|&c| c == 0.0));
        assert_eq!(s.worst(), s[0]);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.starts_with("[0.15,0.1,0.04"), "{json}");
        let t = Score::of(&per(0.0, -0.1, 0.03, 0.3), &w);
        assert_eq!(s.rank(&t), Ordering::Less);
        assert_eq!(t.rank(&s), Ordering::Greater);
        assert_eq!(s.rank(&s), Ordering::Equal);
    }

    #[test]
    fn a_time_component_is_sorted_in_and_only_raises_the_score() {
        let w = Weights::new(per(1.0, 1.0, 2.0, 0.5)).unwrap();
        let s = Score::of(&per(0.0, -0.1, 0.02, 0.3), &w);
        let t = s.with_time(0.12);
        assert_eq!(&t.components()[..4], &[0.15, 0.12, 0.1, 0.04]);
        assert_eq!(t.components().len(), BudgetKind::COUNT + 1);
        let zero = s.with_time(0.0);
        assert_eq!(zero.rank(&t), Ordering::Less);
        assert!(
            zero.components()
                .iter()
                .zip(t.components())
                .all(|(a, b)| a <= b)
        );
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.starts_with("[0.15,0.12,0.1,0.04"), "{json}");
        assert_eq!(serde_json::to_string(&s).unwrap().matches(',').count(), 3);
    }
}
