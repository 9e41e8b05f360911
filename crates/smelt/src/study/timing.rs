//! The time ratios of a grid's cells: predicted on a roofline (`--predict`) or measured by the
//! benchmark (`--bench`), all the cells or one shard's ([`Shard`](crate::study::Shard)).

use serde_json::Value;

use super::grid::{GridCell, GridReport, PredictSummary, predicted_stats, time_summary_of};
use super::shard::{Shard, ShardInfo};
use crate::bench::{BenchOptions, time_ratio};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::time::{PredictOptions, PredictionBasis, Roofline, TimeRatio, predicted_ratio};

/// Predicts the time ratio of every cell of `report` on `roof` ([`crate::time`]),
/// adding each cell's and their largest and mean to the summary.
pub fn predict_cells(
    report: &mut GridReport,
    roof: &Roofline,
    opts: &PredictOptions,
) -> Result<()> {
    roof.device.validate()?;
    if let Some(c) = &roof.calibration {
        c.validate()?;
    }
    let ratios = crate::par::map(&report.cells, |c| {
        predicted_ratio(&c.baseline, &c.looped, roof, opts)
    });
    let mut all = Vec::with_capacity(ratios.len());
    for (cell, r) in report.cells.iter_mut().zip(ratios) {
        let r = r?;
        all.push(r.ratio);
        cell.predicted = Some(r);
    }
    let (max_ratio, mean_ratio) = predicted_stats(&all);
    report.summary.predicted = Some(PredictSummary {
        basis: PredictionBasis::of(roof, opts),
        max_ratio,
        mean_ratio,
    });
    Ok(())
}

/// Benchmarks the Baseline and the match of every cell of `report` on `opts`' backend
/// (one cell after the other: they share the machine), adding each cell's measured time
/// ratio and their largest and mean to the summary. `opts.max_seconds` bounds the whole
/// grid: each cell gets what the cells before it left. A cell whose benchmark fails (or
/// that the budget leaves no time for) is reported with the reason in `time_failed`, and
/// the other cells are timed all the same; only an interruption stops the grid.
pub fn time_cells(
    report: &mut GridReport,
    opts: &BenchOptions,
    progress: &dyn Progress,
) -> Result<()> {
    time_shard(report, opts, None, progress)
}

/// [`time_cells`] for the cells of `shard` only (all of them for `None`), the report marked
/// as that shard ([`Shard`](crate::study::Shard)).
pub fn time_shard(
    report: &mut GridReport,
    opts: &BenchOptions,
    shard: Option<Shard>,
    progress: &dyn Progress,
) -> Result<()> {
    let start = std::time::Instant::now();
    let n = report.cells.len();
    if let Some(s) = shard.filter(|s| s.of > n as u64) {
        return Err(Error::invalid(
            "shard",
            format!(
                "{}/{}: the grid has {n} cells, so N must be at most {n} (a shard past the \
                 cells would time nothing, and smelt merge needs every shard)",
                s.index, s.of
            ),
        ));
    }
    for (i, cell) in report.cells.iter_mut().enumerate() {
        crate::progress::check(progress)?;
        if shard.is_some_and(|s| !s.has(i)) {
            continue;
        }
        let left = opts.max_seconds - start.elapsed().as_secs_f64();
        if left <= 0.0 {
            cell.time_failed = Some(format!(
                "not timed: the grid's time budget (--max-seconds {}) ran out",
                opts.max_seconds
            ));
            continue;
        }
        progress.note(&format!(
            "benchmarking cell {}/{n} ({} {})",
            i + 1,
            cell.scale,
            cell.sparsity_label
        ));
        let cell_opts = BenchOptions {
            max_seconds: left,
            ..*opts
        };
        match time_ratio(&cell.baseline, &cell.looped, &cell_opts, progress) {
            Ok(t) => cell.time = Some(t),
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => {
                progress.note(&format!(
                    "cell {} {} not timed: {e}",
                    cell.scale, cell.sparsity_label
                ));
                cell.time_failed = Some(e.to_string());
            }
        }
    }
    let times: Vec<(Option<TimeRatio>, bool)> = (report.cells.iter())
        .map(|c| (c.time.clone(), c.time_failed.is_some()))
        .collect();
    report.summary.time_ratio = time_summary_of(&times, opts.backend);
    if let Some(s) = shard {
        mark(report, s, opts)?;
    }
    Ok(())
}

/// FNV-1a, 64 bits, as hex: a digest to tell grids apart (not a security measure).
fn fnv(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The digest of `cells` (labels, models, search sizes) and the benchmark's `opts`.
pub fn digest(cells: &[GridCell], opts: &BenchOptions) -> Result<String> {
    let what: Vec<Value> = cells
        .iter()
        .map(|c| serde_json::json!([c.scale, c.sparsity_label, c.baseline, c.looped, c.lattice]))
        .collect();
    let text = serde_json::to_string(&(what, opts))
        .map_err(|e| Error::serialize("the shard digest", e))?;
    Ok(fnv(&text))
}

/// Marks `report` as shard `shard` of a run with `opts`.
pub fn mark(report: &mut GridReport, shard: Shard, opts: &BenchOptions) -> Result<()> {
    report.shard = Some(ShardInfo {
        index: shard.index,
        of: shard.of,
        digest: digest(&report.cells, opts)?,
    });
    Ok(())
}
