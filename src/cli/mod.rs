//! Argument parsing (clap) and dispatch. The library never sees clap types.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod bench;
mod cost;
mod fit;
mod gain;
mod grid;
mod import;
mod matching;
mod sweep;

/// Exit code for an error: bad input, unreadable file, infeasible lattice.
pub const EXIT_ERROR: u8 = 1;
/// Exit code when a result is outside the budget's tolerances (the result is printed).
pub const EXIT_TOLERANCE: u8 = 3;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: a file could not be read, parsed or validated (the message names the field
     and the rule), a count overflowed, or no lattice point is feasible
  2  usage error: bad command-line arguments
  3  a match is outside the budget's [tolerance] (the best configuration is still printed)";

/// Compute-matched budgets for looped MoE Transformers.
///
/// smelt computes a model's per-token training FLOPs, non-embedding parameters and KV cache
/// from an exact analytic cost model, finds by exact integer search the looped
/// configuration that matches a Baseline on all three, fits the scaling laws matched models
/// are compared with, and times the GEMMs a layer really issues.
#[derive(Debug, Parser)]
#[command(name = "smelt", version, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Cost(cost::Args),
    Match(matching::Args),
    Grid(grid::Args),
    Sweep(sweep::Args),
    Fit(fit::Args),
    Gain(gain::Args),
    Bench(bench::Args),
    Import(import::Args),
}

/// Output format of a single-result command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OutputFormat {
    /// A readable table.
    #[default]
    Table,
    /// JSON, the stable contract for scripts (documented in the README).
    Json,
    /// TOML.
    Toml,
}

/// Output format of a row-shaped report (grid, sweep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum RowFormat {
    /// A readable table with summary rows.
    #[default]
    Table,
    /// CSV, one row per item, full precision.
    Csv,
    /// JSON, the stable contract (documented in the README).
    Json,
    /// A Markdown table with summary rows.
    Markdown,
}

/// Which start grid a fit uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Starts {
    /// The replication's grid.
    Standard,
    /// 32 starts.
    Small,
}

impl Starts {
    /// The grid for `form`.
    pub fn grid(self, form: smelt::fit::Form) -> smelt::fit::StartGrid {
        match self {
            Starts::Standard => smelt::fit::StartGrid::standard(form),
            Starts::Small => smelt::fit::StartGrid::small(form),
        }
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Cost(args) => cost::run(args),
        Command::Match(args) => matching::run(args),
        Command::Grid(args) => grid::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Fit(args) => fit::run(args),
        Command::Gain(args) => gain::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Import(args) => import::run(args),
    }
}

/// Renders a row-shaped report in `format`.
pub fn render_rows<T: smelt::report::Tabular + serde::Serialize>(
    report: &T,
    format: RowFormat,
) -> anyhow::Result<String> {
    use smelt::report;
    Ok(match format {
        RowFormat::Table => report::table(report),
        RowFormat::Csv => report::csv(report),
        RowFormat::Json => report::to_json(report)?,
        RowFormat::Markdown => report::markdown(report),
    })
}

/// Writes `text` to standard output.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
