//! What a grid reports, and its cells matched: the JSON contract of `smelt grid`.

use serde::Serialize;

use super::shard::ShardInfo;
use crate::budget::{GridSpec, Mode};
use crate::cost::{BudgetKind, PerBudget, Ratios, Residuals};
use crate::error::Result;
use crate::model::ModelSpec;
use crate::progress::{Progress, Silent};
use crate::search::{
    MatchReport, SearchOptions, SearchStats, SparsityPair, Verdict, match_budget_in,
};
use crate::time::{Backend, PredictedRatio, PredictionBasis, TimeRatio};

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
    pub score: crate::budget::Score,
    /// Sparsity of both models.
    pub sparsity: SparsityPair,
    /// Whether the residuals are within the tolerances: `null` when the cell's budget sets
    /// no `[tolerance]`.
    pub within_tolerance: Option<bool>,
    /// Budgets outside their tolerance.
    pub broken: Vec<BudgetKind>,
    /// Search size.
    pub lattice: SearchStats,
    /// The measured time ratio of the looped model to the Baseline (`--bench`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeRatio>,
    /// Why the cell was not timed (`--bench`): its benchmark failed, or the grid's time
    /// budget ran out first. The other cells are timed all the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_failed: Option<String>,
    /// The per-GPU training memory peaks under the Baseline's `[training]` (only with
    /// one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_per_gpu: Option<crate::cost::PeakPair>,
    /// The predicted time ratio of the looped model to the Baseline (`--predict`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<PredictedRatio>,
}

/// The predicted time ratios over the cells (`--predict`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictSummary {
    /// What the predictions assume.
    pub basis: PredictionBasis,
    /// The largest predicted looped / Baseline time ratio.
    pub max_ratio: f64,
    /// The mean predicted looped / Baseline time ratio.
    pub mean_ratio: f64,
}

/// The measured time ratios over the cells (`--bench`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeSummary {
    /// Where the cells were measured.
    pub backend: Backend,
    /// The device, in words.
    pub device: String,
    /// The largest looped / Baseline time ratio over the quoted cells (timed, and not
    /// noisy); `None` when no cell is.
    pub max_ratio: Option<f64>,
    /// The mean looped / Baseline time ratio over the quoted cells.
    pub mean_ratio: Option<f64>,
    /// Cells whose ratio is noisy ([`crate::bench::stats`]): shown, not quoted.
    pub noisy_cells: usize,
    /// Cells not timed (their `time_failed` says why).
    pub failed_cells: usize,
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
    /// Cells within tolerance: `null` when no cell's budget sets a `[tolerance]`.
    pub within_tolerance: Option<usize>,
    /// The measured time ratios (`--bench`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ratio: Option<TimeSummary>,
    /// The predicted time ratios (`--predict`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<PredictSummary>,
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
    /// The share of the cells this run timed (`--shard K/N`), for `smelt merge`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
}

impl GridSummary {
    fn of(cells: &[GridCell]) -> Self {
        let sparse: Vec<&Residuals> = cells
            .iter()
            .filter(|c| c.sparse)
            .map(|c| &c.residuals)
            .collect();
        let max_abs_residual =
            PerBudget::from_fn(|k| sparse.iter().map(|r| r.get(k).abs()).fold(0.0, f64::max));
        let mean_residual = PerBudget::from_fn(|k| {
            if sparse.is_empty() {
                0.0
            } else {
                sparse.iter().map(|r| *r.get(k)).sum::<f64>() / sparse.len() as f64
            }
        });
        let looped_gets_more =
            PerBudget::from_fn(|k| cells.iter().filter(|c| *c.residuals.get(k) > 0.0).count());
        Self {
            sparse_cells: sparse.len(),
            max_abs_residual,
            mean_residual,
            looped_gets_more,
            within_tolerance: (cells.iter().any(|c| c.within_tolerance.is_some())).then(|| {
                cells
                    .iter()
                    .filter(|c| c.within_tolerance == Some(true))
                    .count()
            }),
            time_ratio: None,
            predicted: None,
        }
    }
}

/// The largest and the mean of the cells' predicted ratios (a summary's `predicted`).
pub(crate) fn predicted_stats(ratios: &[f64]) -> (f64, f64) {
    (
        ratios.iter().copied().fold(f64::NAN, f64::max),
        mean(ratios),
    )
}

/// The mean of `values` (finite, non-negative), finite whenever they are: the plain sum over
/// the count, or, where that sum overflows, each value over the largest summed first (every
/// term at most 1).
pub(crate) fn mean(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let sum = values.iter().sum::<f64>();
    if sum.is_finite() {
        return sum / n;
    }
    let max = values.iter().copied().fold(0.0, f64::max);
    max * (values.iter().map(|v| v / max).sum::<f64>() / n)
}

/// The summary of the cells' time ratios (`(time, failed)` per cell): the largest and mean
/// over the quoted cells (timed, not noisy); `None` when no cell was timed or failed.
pub(crate) fn time_summary_of(
    times: &[(Option<TimeRatio>, bool)],
    backend: Backend,
) -> Option<TimeSummary> {
    let timed: Vec<&TimeRatio> = times.iter().filter_map(|(t, _)| t.as_ref()).collect();
    let failed_cells = times.iter().filter(|(_, failed)| *failed).count();
    if timed.is_empty() && failed_cells == 0 {
        return None;
    }
    let quoted: Vec<f64> = timed.iter().filter(|t| !t.noisy).map(|t| t.ratio).collect();
    let device = timed.first().map(|t| t.device.clone()).unwrap_or_default();
    Some(TimeSummary {
        backend,
        device,
        max_ratio: quoted.iter().copied().reduce(f64::max),
        mean_ratio: (!quoted.is_empty()).then(|| mean(&quoted)),
        noisy_cells: timed.len() - quoted.len(),
        failed_cells,
    })
}

/// Matches every cell of `grid`, in parallel (the output does not depend on the number of
/// threads).
pub fn match_grid(grid: &GridSpec) -> Result<GridReport> {
    match_grid_with(grid, &SearchOptions::default(), &Silent)
}

/// [`match_grid`] with search options (each cell keeps the best configuration), reporting
/// each cell matched to `progress`.
pub fn match_grid_with(
    grid: &GridSpec,
    options: &SearchOptions,
    progress: &dyn Progress,
) -> Result<GridReport> {
    let options = SearchOptions { top: 1, ..*options };
    progress.begin("matching grid cells", grid.cells.len() as u64);
    let results = crate::par::map(&grid.cells, |cell| {
        crate::progress::check(progress)?;
        let m = match_budget_in(&cell.budget, &options, progress);
        progress.advance(1);
        m
    });
    progress.end();
    let mut cells = Vec::with_capacity(grid.cells.len());
    for (cell, result) in grid.cells.iter().zip(results) {
        let m: MatchReport = result?;
        let base = &cell.budget.baseline().model.moe;
        cells.push(GridCell {
            time_failed: None,
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
            time: None,
            peak_per_gpu: m.peak_per_gpu,
            predicted: None,
        });
    }
    let summary = GridSummary::of(&cells);
    Ok(GridReport {
        name: grid.name.clone(),
        mode: grid
            .cells
            .first()
            .map_or(Mode::TwoSided, |c| c.budget.mode()),
        cells,
        summary,
        shard: None,
    })
}

impl Verdict for GridReport {
    /// Per cell outside its tolerances, the budgets it breaks: `cell 200m s95 (kv)`.
    fn broken_tolerances(&self) -> Vec<String> {
        let cells = (self.cells.iter()).filter(|c| c.within_tolerance == Some(false));
        cells
            .map(|c| {
                let kinds: Vec<&str> = c.broken.iter().map(|k| k.as_str()).collect();
                let (scale, sparsity) = (&c.scale, &c.sparsity_label);
                format!("cell {scale} {sparsity} ({})", kinds.join(", "))
            })
            .collect()
    }
}
