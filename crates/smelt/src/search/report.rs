//! What a match reports: the JSON contract of `smelt match`.

use serde::Serialize;

use super::advice::{Floor, Refinement, advise};
use super::{Candidate, SearchOptions, SearchStats, model_spec};
use crate::budget::{Budget, Mode, Score, Tolerance};
use crate::cost::{BudgetKind, Budgets, Ratios, Residuals, cost, cost_against};
use crate::error::Result;
use crate::model::{Model, ModelSpec};
use crate::time::{PredictionBasis, TimeRatio};

/// Compute-equivalent sparsity of both models, each against the Baseline's control.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SparsityPair {
    /// The Baseline's `S`.
    pub baseline: f64,
    /// The looped model's `S`.
    pub looped: f64,
}

/// The two models' budgets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BudgetPair {
    /// The Baseline's.
    pub baseline: Budgets,
    /// The looped model's.
    pub looped: Budgets,
}

/// A runner-up configuration (`--top N`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alternative {
    /// 1-based rank (1 is the optimum).
    pub rank: usize,
    /// The architecture.
    pub model: Model,
    /// Signed residuals.
    pub residuals: Residuals,
    /// Its predicted time's residual (a budget with a time budget only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_residual: Option<f64>,
    /// Weighted |residuals|, largest first.
    pub score: Score,
}

/// The predicted-time budget of a match ([`crate::budget::time`]): what it was predicted
/// on, its weight, and both models' predicted seconds per token.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatchTime {
    /// What the prediction assumes (the card, the calibration, the batch).
    pub basis: PredictionBasis,
    /// The time's weight in the objective (0: reported, not matched).
    pub weight: f64,
    /// The Baseline's predicted seconds per token.
    pub baseline_seconds_per_token: f64,
    /// The looped model's predicted seconds per token.
    pub looped_seconds_per_token: f64,
    /// `looped / Baseline`.
    pub ratio: f64,
    /// `looped / Baseline - 1`.
    pub residual: f64,
    /// A warning about the device (a CPU calibration applied to a card).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The result of matching one budget: `smelt match --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatchReport {
    /// The budget's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `two-sided` or `conservative`.
    pub mode: Mode,
    /// The Baseline's model file.
    pub baseline: ModelSpec,
    /// The matched looped model file (valid input to `smelt cost`).
    pub looped: ModelSpec,
    /// Both models' budgets.
    pub budgets: BudgetPair,
    /// `looped / Baseline - 1` per budget.
    pub residuals: Residuals,
    /// `looped / Baseline` per budget.
    pub ratios: Ratios,
    /// Weighted |residuals|, largest first: the objective's value.
    pub score: Score,
    /// Sparsity of both models.
    pub sparsity: SparsityPair,
    /// The tolerances asked for (only those set).
    pub tolerance: Tolerance,
    /// Whether every residual is within its tolerance: `null` when the budget sets no
    /// `[tolerance]` (nothing was checked).
    pub within_tolerance: Option<bool>,
    /// The budgets whose residual is outside its tolerance.
    pub broken: Vec<BudgetKind>,
    /// Search size.
    pub lattice: SearchStats,
    /// The best configurations in order, the optimum first (only with `--top N`, N > 1).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranked: Vec<Alternative>,
    /// The budget that binds and why (with `--advise`, or when a tolerance is broken).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<Floor>,
    /// Lattice refinements, each re-solved exactly (with the floor).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub advice: Vec<Refinement>,
    /// The measured time ratio of the looped model to the Baseline (`--bench`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeRatio>,
    /// The predicted-time budget (only when the budget has one: `[objective.time]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_time: Option<MatchTime>,
    /// The per-GPU training memory peaks under the Baseline's `[training]` (only with
    /// one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_per_gpu: Option<crate::cost::PeakPair>,
}

fn report(
    budget: &Budget,
    best: &Candidate,
    ranked: &[Candidate],
    stats: SearchStats,
    base: Budgets,
) -> Result<MatchReport> {
    let looped = model_spec(budget, best);
    let s_base = cost(budget.baseline())?.sparsity.s;
    let s_looped = cost_against(&looped, budget.baseline())?.sparsity.s;
    let broken = budget.tolerance().broken(&best.residuals);
    Ok(MatchReport {
        name: budget.name().map(str::to_owned),
        mode: budget.mode(),
        baseline: budget.baseline().clone(),
        budgets: BudgetPair {
            baseline: base,
            looped: best.budgets,
        },
        residuals: best.residuals,
        ratios: best.residuals.map(|r| 1.0 + r),
        score: best.score,
        sparsity: SparsityPair {
            baseline: s_base,
            looped: s_looped,
        },
        tolerance: *budget.tolerance(),
        within_tolerance: budget.tolerance().verdict(&best.residuals),
        broken,
        lattice: stats,
        ranked: if ranked.len() > 1 {
            ranked
                .iter()
                .enumerate()
                .map(|(i, c)| Alternative {
                    rank: i + 1,
                    model: c.model.clone(),
                    residuals: c.residuals,
                    time_residual: c.time.map(|t| t.residual),
                    score: c.score,
                })
                .collect()
        } else {
            Vec::new()
        },
        floor: None,
        advice: Vec::new(),
        time: None,
        predicted_time: match (budget.time(), &best.time) {
            (Some(t), Some(r)) => Some(MatchTime {
                basis: t.basis(),
                weight: t.weight(),
                baseline_seconds_per_token: r.baseline_seconds_per_token,
                looped_seconds_per_token: r.looped_seconds_per_token,
                ratio: r.looped_seconds_per_token / r.baseline_seconds_per_token,
                residual: r.residual,
                warning: t.warning().map(str::to_owned),
            }),
            _ => None,
        },
        peak_per_gpu: crate::cost::peak_pair(budget.baseline(), &looped)?,
        looped,
    })
}

/// Matches `budget`, keeping the `top` best configurations.
pub fn match_budget(budget: &Budget, top: usize) -> Result<MatchReport> {
    match_budget_with(budget, &SearchOptions::top(top))
}

/// [`match_budget`] with options.
pub fn match_budget_with(budget: &Budget, options: &SearchOptions) -> Result<MatchReport> {
    match_budget_in(budget, options, &crate::progress::Silent)
}

/// [`match_budget_with`], stopped with [`crate::Error::Interrupted`] when `progress` asks
/// ([`crate::progress::Progress::cancelled`]).
pub fn match_budget_in(
    budget: &Budget,
    options: &SearchOptions,
    progress: &dyn crate::progress::Progress,
) -> Result<MatchReport> {
    let sol = super::solve_in(budget, options, progress)?;
    let mut r = report(budget, sol.best(), &sol.ranked, sol.stats, sol.baseline)?;
    if options.advise || r.within_tolerance == Some(false) {
        let (floor, advice) = advise(budget, sol.best())?;
        (r.floor, r.advice) = (Some(floor), advice);
    }
    Ok(r)
}
