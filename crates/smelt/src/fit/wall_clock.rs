//! The wall-clock gain beside the compute gain: a target that reaches the reference's loss
//! with `1 − g` of its FLOPs, but spends `r` times the reference's seconds per FLOP, takes
//!
//! ```text
//! T_target / T_reference = (1 − g) · r,   wall-clock gain = 1 − (1 − g) · r
//! ```
//!
//! of its time. `r` is a number given (seconds per training FLOP, target over reference),
//! or read per row from a grid's predicted training steps (`smelt grid --predict CARD
//! --global-batch N --format json`, its `step_time.cells[]`): each cell's step-time ratio
//! over its FLOP ratio (the same tokens per step, so the ratio of seconds per token over
//! that of FLOPs per token). A row `(C, S)` takes the cell whose Baseline is nearest the
//! reference's compute-optimal model there, in the surface's own coordinates: the
//! Euclidean distance of `(ln F, ln(1 − S))`, `F` the Baseline's training FLOPs per token
//! against `F*`, `S` its compute-equivalent sparsity against the row's (the first of
//! equals, in the grid's order); the row names it.

use serde::Serialize;
use serde_json::Value;

use super::bootstrap::GainTable;
use crate::error::{Error, Result};

/// One cell of a grid's predicted training steps, as a gain row reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellTime {
    /// `scale sparsity`, e.g. `200m s95`.
    pub cell: String,
    /// The Baseline's compute-equivalent sparsity.
    pub sparsity: f64,
    /// The Baseline's training FLOPs per token.
    pub flops_per_token: f64,
    /// Looped / Baseline step time (the same global batch).
    pub step_ratio: f64,
    /// Looped / Baseline training FLOPs per token.
    pub flop_ratio: f64,
    /// Whether both models' layouts fit the card's memory (the grid's memory verdicts).
    pub fits: bool,
}

impl CellTime {
    /// Seconds per training FLOP, looped over Baseline.
    pub fn per_flop(&self) -> f64 {
        self.step_ratio / self.flop_ratio
    }
}

/// Where the time ratios come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimeRatios {
    /// One ratio of seconds per training FLOP for every row.
    Given {
        /// The ratio.
        ratio: f64,
    },
    /// A grid's predicted cells.
    Grid {
        /// The file.
        source: String,
        /// The card the grid was predicted on.
        card: String,
        /// The cells with both models predicted.
        cells: Vec<CellTime>,
    },
}

fn positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

impl TimeRatios {
    /// One ratio (seconds per training FLOP, target over reference): positive and finite.
    pub fn given(ratio: f64) -> Result<Self> {
        if !positive(ratio) {
            return Err(Error::invalid(
                "time_ratio",
                format!("must be a positive finite number; got {ratio}"),
            ));
        }
        Ok(Self::Given { ratio })
    }

    /// The cells of a grid's JSON with predicted training steps (`step_time`); `source`
    /// names it in errors.
    pub fn from_grid_json(text: &str, source: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::parse(format!("{source}: not JSON: {e}")))?;
        let Some(st) = v.get("step_time") else {
            return Err(Error::invalid(
                "time_ratio",
                format!(
                    "{source} has no step_time: write it with smelt grid GRID --predict CARD \
                     --global-batch N --format json"
                ),
            ));
        };
        let card = st["basis"]["card"].as_str().unwrap_or_default().to_owned();
        let list = st["cells"].as_array().ok_or_else(|| {
            Error::invalid(
                "time_ratio",
                format!("{source}: step_time.cells is not a list"),
            )
        })?;
        let mut cells = Vec::new();
        for (i, c) in list.iter().enumerate() {
            let field = format!("{source}: step_time.cells[{i}]");
            let num = |k: &str| c[k].as_f64();
            let Some(step_ratio) = num("ratio") else {
                continue; // a cell the step model refused
            };
            let (Some(sparsity), Some(flops_per_token), Some(flop_ratio)) =
                (num("sparsity"), num("flops_per_token"), num("flop_ratio"))
            else {
                return Err(Error::invalid(
                    field,
                    "needs sparsity, flops_per_token and flop_ratio (a grid JSON older than \
                     these fields: rerun smelt grid)",
                ));
            };
            if ![step_ratio, flops_per_token, flop_ratio]
                .into_iter()
                .all(positive)
                || !(0.0..1.0).contains(&sparsity)
            {
                return Err(Error::invalid(
                    field,
                    "ratio, flops_per_token and flop_ratio must be positive finite numbers and \
                     sparsity in [0, 1)",
                ));
            }
            let label = |k: &str| c[k].as_str().unwrap_or("?").to_owned();
            let fits = ["baseline", "looped"]
                .iter()
                .all(|w| c[*w]["step"]["memory"]["verdict"] == "fits");
            cells.push(CellTime {
                cell: format!("{} {}", label("scale"), label("sparsity_label")),
                sparsity,
                flops_per_token,
                step_ratio,
                flop_ratio,
                fits,
            });
        }
        if cells.is_empty() {
            return Err(Error::invalid(
                "time_ratio",
                format!("{source}: no cell of step_time has both models predicted"),
            ));
        }
        Ok(Self::Grid {
            source: source.to_owned(),
            card,
            cells,
        })
    }

    /// The ratio for a row at sparsity `s` whose reference `F*` is `f_star`, and the cell
    /// it comes from (module docs).
    fn for_row(&self, s: f64, f_star: f64) -> (f64, Option<&CellTime>) {
        match self {
            Self::Given { ratio } => (*ratio, None),
            Self::Grid { cells, .. } => {
                // The surface's own coordinates: `ln F` and `ln(1 − S)`.
                let d = |c: &CellTime| {
                    let df = (c.flops_per_token / f_star).ln();
                    let ds = ((1.0 - c.sparsity) / (1.0 - s)).ln();
                    df.hypot(ds)
                };
                let best = cells.iter().min_by(|a, b| d(a).total_cmp(&d(b)));
                match best {
                    Some(c) => (c.per_flop(), Some(c)),
                    None => (f64::NAN, None),
                }
            }
        }
    }
}

/// A gain row with its wall-clock gain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WallClockRow {
    /// Training compute `C`.
    pub compute: f64,
    /// Sparsity.
    pub sparsity: f64,
    /// The compute gain `g` (absent when the reference cannot reach the target's loss).
    pub compute_gain: Option<f64>,
    /// Seconds per training FLOP, target over reference (`r`).
    pub time_per_flop_ratio: f64,
    /// The grid cell `r` comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    /// Its step-time ratio (seconds per token), when from a grid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_ratio: Option<f64>,
    /// Whether the grid's layout fits that cell's models in the card's memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fits: Option<bool>,
    /// `1 − (1 − g) · r`.
    pub wall_clock_gain: Option<f64>,
}

/// The wall-clock gains of a gain table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WallClock {
    /// Where the time ratios come from.
    pub time_ratios: TimeRatios,
    /// One row per row of the gain table.
    pub rows: Vec<WallClockRow>,
}

/// The wall-clock gain of every row of `table` under `ratios` (module docs).
pub fn wall_clock(table: &GainTable, ratios: TimeRatios) -> WallClock {
    let rows = (table.rows.iter())
        .map(|row| {
            let (r, cell) = ratios.for_row(row.sparsity, row.f_star_reference);
            WallClockRow {
                compute: row.compute,
                sparsity: row.sparsity,
                compute_gain: row.gain,
                time_per_flop_ratio: r,
                cell: cell.map(|c| c.cell.clone()),
                step_ratio: cell.map(|c| c.step_ratio),
                fits: cell.map(|c| c.fits),
                wall_clock_gain: row.gain.map(|g| 1.0 - (1.0 - g) * r),
            }
        })
        .collect();
    WallClock {
        time_ratios: ratios,
        rows,
    }
}
