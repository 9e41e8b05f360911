//! `smelt grid`: every cell of a grid matched, with summary rows.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::budget::GridSpec;
use smelt::search;

use super::{EXIT_TOLERANCE, RowFormat, emit, render_rows};

/// Match every cell of a grid (scales x sparsities) under one recipe and lattice.
///
/// One row per cell: the F, N and KV ratios (looped / Baseline), the sparsity of both and
/// the shapes; summary rows give the largest |residual| per budget over the sparse cells,
/// the signed mean, and how many cells give the looped model more of each budget.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The grid file (TOML; see the README, "Grid files").
    grid: PathBuf,
    /// Output format (CSV holds the cells only; the others add the summary).
    #[arg(long, value_enum, default_value_t)]
    format: RowFormat,
    /// Also draw the three residuals per cell as an SVG heatmap into this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// Runs `smelt grid`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let grid = GridSpec::load(&args.grid)
        .with_context(|| format!("grid file '{}'", args.grid.display()))?;
    let r = search::match_grid(&grid)?;
    let text = render_rows(&r, args.format)?;
    if let Some(path) = &args.plot {
        let svg = smelt::report::plot::residual_heatmap(&r)?;
        std::fs::write(path, svg).with_context(|| format!("writing '{}'", path.display()))?;
    }
    emit(&text)?;
    Ok(if r.summary.within_tolerance == r.cells.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TOLERANCE)
    })
}
