//! `smelt grid`: every cell of a grid matched, with summary rows.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::budget::GridSpec;
use smelt::report::Format;

use super::{all_formats, emit, tolerance_exit, write_file};

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
    /// Also draw the three residuals per cell as an SVG heatmap into this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// Runs `smelt grid`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let grid = GridSpec::load(&args.grid)
        .with_context(|| format!("grid file '{}'", args.grid.display()))?;
    let r = smelt::search::match_grid(&grid)?;
    let text = smelt::report::render(&r, args.format)?;
    if let Some(path) = &args.plot {
        write_file(path, &smelt::report::plot::residual_heatmap(&r)?)?;
    }
    emit(&text)?;
    Ok(tolerance_exit(r.summary.within_tolerance == r.cells.len()))
}
