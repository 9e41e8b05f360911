//! What a match, a grid and a sweep report: the JSON contracts of `smelt match`,
//! `smelt grid` and `smelt sweep`.

use serde::Serialize;

use super::{Candidate, SearchStats, model_spec, solve};
use crate::budget::{Budget, GridSpec, Mode, Span, Tolerance};
use crate::cost::{Budgets, Residuals, cost, cost_against};
use crate::error::Result;
use crate::spec::{Model, ModelSpec};

/// `looped / Baseline` per budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ratios {
    /// Training FLOPs per token.
    pub flops: f64,
    /// Parameters.
    pub params: f64,
    /// KV elements per token.
    pub kv: f64,
}

impl From<Residuals> for Ratios {
    fn from(r: Residuals) -> Self {
        Self {
            flops: 1.0 + r.flops,
            params: 1.0 + r.params,
            kv: 1.0 + r.kv,
        }
    }
}

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
    /// Weighted |residuals|, largest first.
    pub score: [f64; 3],
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
    pub score: [f64; 3],
    /// Sparsity of both models.
    pub sparsity: SparsityPair,
    /// The tolerances asked for.
    pub tolerance: Tolerance,
    /// Whether every residual is within its tolerance.
    pub within_tolerance: bool,
    /// The budgets whose residual is outside its tolerance.
    pub broken: Vec<&'static str>,
    /// Search size.
    pub lattice: SearchStats,
    /// The best configurations in order, the optimum first (only with `--top N`, N > 1).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranked: Vec<Alternative>,
}

fn broken(t: &Tolerance, r: &Residuals) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (name, tol, v) in [
        ("flops", t.flops, r.flops),
        ("params", t.params, r.params),
        ("kv", t.kv, r.kv),
    ] {
        if let Some(tol) = tol
            && v.abs() > tol
        {
            out.push(name);
        }
    }
    out
}

fn report(
    budget: &Budget,
    best: &Candidate,
    ranked: &[Candidate],
    stats: SearchStats,
    base: Budgets,
) -> Result<MatchReport> {
    let looped = model_spec(budget, best);
    let s_base = cost(&budget.baseline)?.sparsity.s;
    let s_looped = cost_against(&looped, &budget.baseline)?.sparsity.s;
    let broken = broken(&budget.tolerance, &best.residuals);
    Ok(MatchReport {
        name: budget.name.clone(),
        mode: budget.mode,
        baseline: budget.baseline.clone(),
        looped,
        budgets: BudgetPair {
            baseline: base,
            looped: best.budgets,
        },
        residuals: best.residuals,
        ratios: best.residuals.into(),
        score: best.score,
        sparsity: SparsityPair {
            baseline: s_base,
            looped: s_looped,
        },
        tolerance: budget.tolerance,
        within_tolerance: broken.is_empty(),
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
                    score: c.score,
                })
                .collect()
        } else {
            Vec::new()
        },
    })
}

/// Matches `budget`, keeping the `top` best configurations.
pub fn match_budget(budget: &Budget, top: usize) -> Result<MatchReport> {
    let sol = solve(budget, top)?;
    report(budget, sol.best(), &sol.ranked, sol.stats, sol.baseline)
}

/// One cell of a grid report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridCell {
    /// Scale label.
    pub scale: String,
    /// Sparsity label.
    pub sparsity_label: String,
    /// Whether the Baseline is sparse (`experts > top_k`).
    pub sparse: bool,
    /// The Baseline's model file.
    pub baseline: ModelSpec,
    /// The matched looped model file.
    pub looped: ModelSpec,
    /// `looped / Baseline` per budget.
    pub ratios: Ratios,
    /// `looped / Baseline - 1` per budget.
    pub residuals: Residuals,
    /// Weighted |residuals|, largest first: the objective's value.
    pub score: [f64; 3],
    /// Sparsity of both models.
    pub sparsity: SparsityPair,
    /// Whether the residuals are within the tolerances.
    pub within_tolerance: bool,
    /// Budgets outside their tolerance.
    pub broken: Vec<&'static str>,
    /// Search size.
    pub lattice: SearchStats,
}

/// Per-budget figures over a set of cells.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerBudget<T> {
    /// FLOPs.
    pub flops: T,
    /// Parameters.
    pub params: T,
    /// KV cache.
    pub kv: T,
}

/// Summary rows of a grid.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridSummary {
    /// Number of sparse cells.
    pub sparse_cells: usize,
    /// Largest |residual| over the sparse cells.
    pub max_abs_residual: PerBudget<f64>,
    /// Mean signed residual over the sparse cells.
    pub mean_residual: PerBudget<f64>,
    /// Cells (all of them) in which the looped model gets more of the budget.
    pub looped_gets_more: PerBudget<usize>,
    /// Cells within tolerance.
    pub within_tolerance: usize,
}

/// The result of matching a grid: `smelt grid --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridReport {
    /// The grid's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `two-sided` or `conservative`.
    pub mode: Mode,
    /// One entry per cell, in file order.
    pub cells: Vec<GridCell>,
    /// Summary over the cells.
    pub summary: GridSummary,
}

/// Matches every cell of `grid` (cells are solved in parallel on the available cores).
pub fn match_grid(grid: &GridSpec) -> Result<GridReport> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = grid.cells.len();
    let mut results: Vec<Option<Result<MatchReport>>> = (0..n).map(|_| None).collect();
    std::thread::scope(|scope| {
        for (t, chunk) in results.chunks_mut(n.div_ceil(threads).max(1)).enumerate() {
            let start = t * n.div_ceil(threads).max(1);
            let cells = &grid.cells;
            scope.spawn(move || {
                for (j, slot) in chunk.iter_mut().enumerate() {
                    *slot = Some(match_budget(&cells[start + j].budget, 1));
                }
            });
        }
    });
    let mut cells = Vec::with_capacity(n);
    for (cell, result) in grid.cells.iter().zip(results) {
        let m = result.unwrap_or_else(|| unreachable!("every slot is filled by its thread"))?;
        let base = &cell.budget.baseline.model.moe;
        cells.push(GridCell {
            scale: cell.scale.clone(),
            sparsity_label: cell.sparsity.clone(),
            sparse: base.experts > base.top_k,
            baseline: m.baseline,
            looped: m.looped,
            ratios: m.ratios,
            residuals: m.residuals,
            score: m.score,
            sparsity: m.sparsity,
            within_tolerance: m.within_tolerance,
            broken: m.broken,
            lattice: m.lattice,
        });
    }
    let sparse: Vec<&GridCell> = cells.iter().filter(|c| c.sparse).collect();
    let fold = |f: fn(&Residuals) -> f64| -> (f64, f64) {
        let max = sparse
            .iter()
            .map(|c| f(&c.residuals).abs())
            .fold(0.0, f64::max);
        let mean = if sparse.is_empty() {
            0.0
        } else {
            sparse.iter().map(|c| f(&c.residuals)).sum::<f64>() / sparse.len() as f64
        };
        (max, mean)
    };
    let (fm, fa) = fold(|r| r.flops);
    let (pm, pa) = fold(|r| r.params);
    let (km, ka) = fold(|r| r.kv);
    let more = |f: fn(&Residuals) -> f64| cells.iter().filter(|c| f(&c.residuals) > 0.0).count();
    let summary = GridSummary {
        sparse_cells: sparse.len(),
        max_abs_residual: PerBudget {
            flops: fm,
            params: pm,
            kv: km,
        },
        mean_residual: PerBudget {
            flops: fa,
            params: pa,
            kv: ka,
        },
        looped_gets_more: PerBudget {
            flops: more(|r| r.flops),
            params: more(|r| r.params),
            kv: more(|r| r.kv),
        },
        within_tolerance: cells.iter().filter(|c| c.within_tolerance).count(),
    };
    Ok(GridReport {
        name: grid.name.clone(),
        mode: grid.cells.first().map_or(Mode::TwoSided, |c| c.budget.mode),
        cells,
        summary,
    })
}

/// Which recipe knob a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Knob {
    /// Looped layers (0: no loop).
    Span,
    /// Physical layers of the looped model (the loop stays "half, middle" or as given).
    Depth,
    /// Executions of the looped block.
    Repeats,
}

/// One row of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    /// The knob's value.
    pub value: u64,
    /// Layer executions of the matched model.
    pub layer_executions: u64,
    /// The matched looped model file.
    pub looped: ModelSpec,
    /// `looped / Baseline` per budget.
    pub ratios: Ratios,
    /// `looped / Baseline - 1` per budget.
    pub residuals: Residuals,
    /// Sparsity of both models.
    pub sparsity: SparsityPair,
    /// Whether the residuals are within the tolerances.
    pub within_tolerance: bool,
}

/// The result of a sweep: `smelt sweep --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    /// The budget's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The knob varied.
    pub knob: Knob,
    /// The Baseline every candidate is matched to.
    pub baseline: ModelSpec,
    /// One row per value, in the order given.
    pub rows: Vec<SweepRow>,
}

/// Re-matches `budget` for every `value` of `knob`.
pub fn sweep(budget: &Budget, knob: Knob, values: &[u64]) -> Result<SweepReport> {
    let mut rows = Vec::with_capacity(values.len());
    for &v in values {
        let mut b = budget.clone();
        match knob {
            Knob::Span => b.recipe.span = Span::Layers(v),
            Knob::Depth => {
                b.recipe.layers = Some(v);
                b.lattice.layers = v;
            }
            Knob::Repeats => b.recipe.repeats = v,
        }
        let m = match_budget(&b, 1).map_err(|e| {
            crate::Error::invalid(format!("sweep {} = {v}", knob_name(knob)), e.to_string())
        })?;
        rows.push(SweepRow {
            value: v,
            layer_executions: m.looped.model.executions(),
            looped: m.looped,
            ratios: m.ratios,
            residuals: m.residuals,
            sparsity: m.sparsity,
            within_tolerance: m.within_tolerance,
        });
    }
    Ok(SweepReport {
        name: budget.name.clone(),
        knob,
        baseline: budget.baseline.clone(),
        rows,
    })
}

/// `"span"`, `"depth"` or `"repeats"`.
pub fn knob_name(k: Knob) -> &'static str {
    match k {
        Knob::Span => "span",
        Knob::Depth => "depth",
        Knob::Repeats => "repeats",
    }
}
