//! Argument parsing (clap) and dispatch: each subcommand loads its input, calls the
//! library, renders the result through `smelt::report` and writes it. The library never
//! sees clap types.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::str::FromStr;

use anyhow::Context;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand};
use smelt::budget::Budget;
use smelt::names::Named;
use smelt::report::{Format, Report};

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

/// A value parser for a named library enum: `--help` lists its names.
pub fn named<T>() -> impl TypedValueParser<Value = T>
where
    T: Named + FromStr<Err = smelt::Error> + Clone + Send + Sync,
{
    PossibleValuesParser::new(T::ALL.iter().map(|v| v.as_str())).try_map(|s| s.parse::<T>())
}

/// A `--format` value parser offering only `allowed`.
pub fn formats(allowed: &'static [Format]) -> impl TypedValueParser<Value = Format> {
    let help = |f: Format| match f {
        Format::Table => "human tables",
        Format::Json => "JSON, the stable contract (README, \"JSON output\")",
        Format::Csv => "the data table as CSV, full precision, no summary rows",
        Format::Markdown => "Markdown tables, for notes",
        Format::Toml => "the JSON contract's structure as TOML",
    };
    let values = allowed
        .iter()
        .map(move |&f| PossibleValue::new(f.as_str()).help(help(f)));
    PossibleValuesParser::new(values).try_map(|s| s.parse::<Format>())
}

/// A `--format` value parser offering every format.
pub fn all_formats() -> impl TypedValueParser<Value = Format> {
    formats(Format::ALL)
}

/// Reads a budget file, naming it in errors.
pub fn load_budget(path: &Path) -> anyhow::Result<Budget> {
    Budget::load(path).with_context(|| format!("budget file '{}'", path.display()))
}

/// Writes `text` to `path` atomically, naming it in errors.
pub fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    smelt::io::write_atomic(path, text.as_bytes())
        .with_context(|| format!("writing '{}'", path.display()))
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

/// Renders `report` in `format` and writes it to standard output.
pub fn emit_report<R: Report + ?Sized>(report: &R, format: Format) -> anyhow::Result<()> {
    emit(&smelt::report::render(report, format)?)
}

/// Writes `text` to standard output.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// `SUCCESS`, or the tolerance exit code when `met` is false.
pub fn tolerance_exit(met: bool) -> ExitCode {
    if met {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TOLERANCE)
    }
}
