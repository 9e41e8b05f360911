//! `smelt grid`: every cell of a grid matched, with summary rows.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::bench::Backend;
use smelt::budget::GridSpec;
use smelt::progress::Terminal;
use smelt::report::Format;
use smelt::search::SearchOptions;

use super::bench::BenchFlag;
use super::export::ExportArgs;
use super::{
    LayoutArgs, WorkloadArgs, all_formats, budget_inputs, emit, tolerance_exit, write_file,
};

/// Match every cell of a grid (scales x sparsities) under one recipe and lattice.
///
/// One row per cell: the F, N and KV ratios (looped / Baseline), the sparsity of both and
/// the shapes; summary rows give the largest |residual| per budget over the sparse cells,
/// the signed mean, and how many cells give the looped model more of each budget.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The grid file (TOML; docs/guide.md, "Grid files").
    grid: PathBuf,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
    #[command(flatten)]
    layout: LayoutArgs,
    /// Also draw the three residuals per cell as an SVG heatmap into this file (with
    /// --predict and no --global-batch, a fourth panel: each cell's predicted time ratio
    /// less 1, on its own scale).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Search lattices larger than the documented limit (docs/guide.md, "Budget files").
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    bench: BenchFlag,
    /// With --bench: time only the cells whose position (from 0) is K-1 modulo N, and mark
    /// the JSON as shard K of N for `smelt merge` (one shard per GPU or per task of a job
    /// array, each with its own CUDA_VISIBLE_DEVICES).
    #[arg(long, value_name = "K/N", requires = "bench",
          value_parser = |s: &str| smelt::study::Shard::parse(s))]
    shard: Option<smelt::study::Shard>,
    #[command(flatten)]
    predict: super::predict::PredictFlag,
    /// With --predict: each cell's training step under a parallel layout (the step model of
    /// `smelt predict --global-batch`) instead of the layer stack's roofline: the layout
    /// from these flags or the grid file's [training].
    #[command(flatten)]
    step: super::predict_step::StepFlags,
    #[command(flatten)]
    export: ExportArgs,
    #[command(flatten)]
    conventions: super::launcher::ConventionsFlag,
}

/// Runs `smelt grid`.
pub fn run(args: Args, progress: &Terminal) -> anyhow::Result<ExitCode> {
    let mut grid = GridSpec::load(&args.grid)
        .with_context(|| format!("grid file '{}'", args.grid.display()))?;
    for cell in &mut grid.cells {
        let what = format!(
            "grid file '{}', cell {}-{}",
            args.grid.display(),
            cell.scale,
            cell.sparsity
        );
        super::budget_notes(&what, &cell.budget);
        cell.budget = args.workload.budget(cell.budget.clone())?;
    }
    let options = SearchOptions {
        force: args.force,
        ..SearchOptions::default()
    };
    let mut inputs: Vec<_> = (grid.cells.iter())
        .flat_map(|c| budget_inputs(&args.grid, &c.budget))
        .collect();
    inputs.extend(args.workload.inputs());
    inputs.extend(args.predict.inputs());
    // An output over an input is refused before the cells are solved, not after.
    if let Some(path) = &args.plot {
        smelt::io::refuse_inputs(path, &inputs, None).context("--plot")?;
    }
    args.export.refuse_inputs(&inputs)?;
    let basis = step_basis(&args, &grid)?;
    let mut r = smelt::study::match_grid_with(&grid, &options, progress)?;
    let steps = match &basis {
        Some(b) => Some(smelt::study::predict_steps(&r, b)?),
        None => {
            if let Some((roof, opts)) = args.predict.roofline()? {
                smelt::study::predict_cells(&mut r, &roof, &opts)?;
            }
            None
        }
    };
    if let Some(opts) = args.bench.options() {
        smelt::study::time_shard(&mut r, &opts, args.shard, progress)?;
    }
    let layout = args.layout.layout();
    let text =
        super::launcher::render_grid(&r, args.format, layout, &args.conventions, steps.as_ref())?;
    if let Some(path) = &args.plot {
        let svg = smelt::report::plot::residual_heatmap(&r)?;
        write_file(path, &svg, "the residual heatmap", &inputs)?;
    }
    let items = smelt::export::items_of_grid(&r, Some(&grid));
    args.export.write(&items, &inputs)?;
    emit(&text)?;
    if let Some(backend) = args.bench.backend() {
        untimed_cells(&r, backend)?;
    }
    Ok(tolerance_exit(&r))
}

/// The basis of the step predictions (`--predict CARD --global-batch N`), if asked for;
/// an error for a flag that does nothing with it, or a step flag without `--predict`.
fn step_basis(args: &Args, grid: &GridSpec) -> anyhow::Result<Option<smelt::study::StepBasis>> {
    if !args.step.asked() {
        return Ok(None);
    }
    let Some(card) = args.predict.card() else {
        anyhow::bail!(
            "--global-batch predicts each cell's training step on the card of --predict CARD: \
             give --predict"
        );
    };
    if args.predict.calibrated() {
        anyhow::bail!(
            "--calibration is the layer-stack roofline's; the step model (--global-batch) uses \
             the card's fitted kernel constants"
        );
    }
    if args.conventions.asked() && args.format == Format::Csv {
        anyhow::bail!(
            "--format csv writes one table: with --global-batch, the step-time table, so \
             --conventions would print nothing; drop one of them"
        );
    }
    let file_layout = grid
        .cells
        .iter()
        .any(|c| c.budget.baseline().training.is_some());
    Ok(Some(args.step.grid_basis(card, file_layout)?))
}

/// After `--bench`: an error when no cell this run was to time was timed (a job whose
/// benchmark cannot run, on a node without its GPU libraries say, must not succeed with no
/// timings; the report above still says why per cell), and a warning naming the cells not
/// timed when only some were (their time ratios are left out of the summary).
fn untimed_cells(r: &smelt::study::GridReport, backend: Backend) -> anyhow::Result<()> {
    let cells: Vec<(String, bool, Option<&str>)> = (r.cells.iter())
        .map(|c| {
            let name = format!("{} {}", c.scale, c.sparsity_label);
            (name, c.time.is_some(), c.time_failed.as_deref())
        })
        .collect();
    if let Some(warning) = untimed(&cells, backend)? {
        super::note(&warning);
    }
    Ok(())
}

/// [`untimed_cells`] on `(cell, timed, why not)` per cell: the error, or the warning.
fn untimed(
    cells: &[(String, bool, Option<&str>)],
    backend: Backend,
) -> anyhow::Result<Option<String>> {
    let tried: Vec<_> = cells.iter().filter(|c| c.1 || c.2.is_some()).collect();
    let failed: Vec<_> = tried.iter().filter(|c| !c.1).collect();
    let Some((first, _, why)) = failed.first() else {
        return Ok(None);
    };
    if failed.len() == tried.len() {
        anyhow::bail!(
            "--bench {}: no cell was timed ({} of {}); cell {first}: {}",
            backend.as_str(),
            failed.len(),
            tried.len(),
            why.unwrap_or("not timed")
        );
    }
    let names: Vec<&str> = failed.iter().map(|c| c.0.as_str()).collect();
    Ok(Some(format!(
        "smelt: warning: --bench {}: {} of {} cells not timed ({}): the time summary covers \
         the {} timed; each cell's time_failed says why",
        backend.as_str(),
        failed.len(),
        tried.len(),
        names.join(", "),
        tried.len() - failed.len()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No cell timed is an error naming the first reason; some not timed, a warning naming
    /// them; cells another shard times (neither timed nor failed here) are not counted.
    #[test]
    fn untimed_cells_fail_the_run_or_are_named() {
        let cell =
            |name: &str, timed: bool, why: Option<&'static str>| (name.to_owned(), timed, why);
        let none = [
            cell("a", false, Some("no CUDA")),
            cell("b", false, Some("no CUDA")),
        ];
        let e = untimed(&none, Backend::Cuda).unwrap_err().to_string();
        assert_eq!(
            e,
            "--bench cuda: no cell was timed (2 of 2); cell a: no CUDA"
        );
        let some = [
            cell("a", true, None),
            cell("b", false, Some("ran out")),
            cell("c", false, None),
        ];
        let w = untimed(&some, Backend::Cpu).unwrap().unwrap();
        assert!(
            w.contains("1 of 2 cells not timed (b)") && w.contains("covers the 1 timed"),
            "{w}"
        );
        let all = [cell("a", true, None), cell("b", false, None)];
        assert_eq!(untimed(&all, Backend::Cpu).unwrap(), None);
    }
}
