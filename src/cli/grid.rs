//! `smelt grid`: every cell of a grid matched, with summary rows.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::budget::GridSpec;
use smelt::progress::Terminal;
use smelt::report::Format;
use smelt::search::SearchOptions;

use super::bench::BenchFlag;
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
    /// The grid file (TOML; see the README, "Grid files").
    grid: PathBuf,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
    #[command(flatten)]
    layout: LayoutArgs,
    /// Also draw the three residuals per cell as an SVG heatmap into this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Search lattices larger than the documented limit (README, "Budget files").
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    bench: BenchFlag,
}

/// Runs `smelt grid`.
pub fn run(args: Args, progress: &Terminal) -> anyhow::Result<ExitCode> {
    let mut grid = GridSpec::load(&args.grid)
        .with_context(|| format!("grid file '{}'", args.grid.display()))?;
    for cell in &mut grid.cells {
        cell.budget = args.workload.budget(cell.budget.clone())?;
    }
    let options = SearchOptions {
        force: args.force,
        ..SearchOptions::default()
    };
    let mut r = smelt::search::match_grid_with(&grid, &options, progress)?;
    if let Some(opts) = args.bench.options() {
        smelt::search::time_cells(&mut r, &opts, progress)?;
    }
    let text = smelt::report::render_with(&r, args.format, args.layout.layout())?;
    if let Some(path) = &args.plot {
        let cells = grid.cells.iter();
        let mut inputs: Vec<_> = cells
            .flat_map(|c| budget_inputs(&args.grid, &c.budget))
            .collect();
        inputs.extend(args.workload.inputs());
        let svg = smelt::report::plot::residual_heatmap(&r)?;
        write_file(path, &svg, "the residual heatmap", &inputs)?;
    }
    emit(&text)?;
    Ok(tolerance_exit(&r))
}
