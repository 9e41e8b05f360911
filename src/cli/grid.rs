//! `smelt grid`: every cell of a grid matched, with summary rows.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
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
    /// --predict, a fourth panel: each cell's predicted time ratio less 1, on its own scale).
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
          value_parser = |s: &str| smelt::search::shard::Shard::parse(s))]
    shard: Option<smelt::search::shard::Shard>,
    #[command(flatten)]
    predict: super::predict::PredictFlag,
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
    let mut r = smelt::search::match_grid_with(&grid, &options, progress)?;
    if let Some((roof, opts)) = args.predict.roofline()? {
        smelt::search::predict_cells(&mut r, &roof, &opts)?;
    }
    if let Some(opts) = args.bench.options() {
        smelt::search::time_shard(&mut r, &opts, args.shard, progress)?;
    }
    let layout = args.layout.layout();
    let text = super::launcher::render_grid(&r, args.format, layout, &args.conventions)?;
    let mut inputs: Vec<_> = (grid.cells.iter())
        .flat_map(|c| budget_inputs(&args.grid, &c.budget))
        .collect();
    inputs.extend(args.workload.inputs());
    if let Some(path) = &args.plot {
        let svg = smelt::report::plot::residual_heatmap(&r)?;
        write_file(path, &svg, "the residual heatmap", &inputs)?;
    }
    let items = smelt::export::items_of_grid(&r, Some(&grid));
    args.export.write(&items, &inputs)?;
    emit(&text)?;
    Ok(tolerance_exit(&r))
}
