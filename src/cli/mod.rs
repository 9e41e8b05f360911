//! Argument parsing (clap) and dispatch: each subcommand loads its input, calls the
//! library, renders the result through `smelt::report` and writes it. The library never
//! sees clap types.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;

use anyhow::{Context, bail};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{CommandFactory, Parser, Subcommand};
use smelt::budget::{BaselineSource, Budget};
use smelt::names::Named;
use smelt::report::{Format, Report};

mod bench;
mod cost;
mod fit;
mod gain;
mod grid;
mod import;
mod matching;
mod progress;
mod sweep;
mod workload;

pub use progress::Reporter;
pub use workload::WorkloadArgs;

/// Exit code for an error: bad input, unreadable file, infeasible lattice.
pub const EXIT_ERROR: u8 = 1;
/// Exit code when a result is outside the budget's tolerances (the result is printed).
pub const EXIT_TOLERANCE: u8 = 3;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: a file could not be read, parsed or validated (the message names the field
     and the rule), a count overflowed, or no lattice point is feasible
  2  usage error: bad command-line arguments or flag values
  3  a match is outside the budget's [tolerance] (the best configuration is still printed;
     standard error says which budget broke which tolerance)";

/// Compute-matched budgets for looped MoE Transformers.
///
/// smelt computes a model's per-token training FLOPs, non-embedding parameters and KV cache
/// from an exact analytic cost model, finds by exact integer search the looped
/// configuration that matches a Baseline on all three, fits the scaling laws matched models
/// are compared with, and times the GEMMs a layer really issues.
#[derive(Debug, Parser)]
#[command(name = "smelt", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// No progress on standard error (results and errors are still written).
    #[arg(short, long, global = true)]
    quiet: bool,
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
    /// Print a shell completion script: `smelt completions bash > /etc/bash_completion.d/smelt`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
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

/// The files a budget was read from: the budget file and its Baseline's.
pub fn budget_inputs(path: &Path, budget: &Budget) -> Vec<PathBuf> {
    let mut out = vec![path.to_path_buf()];
    match budget.source() {
        BaselineSource::File(p) | BaselineSource::HfConfig { path: p, .. } => out.push(p.clone()),
        BaselineSource::Inline => {}
    }
    out
}

/// Writes `text` to `path` atomically, refusing a path that is one of the run's `inputs`,
/// and says on standard error what it wrote.
pub fn write_file(path: &Path, text: &str, what: &str, inputs: &[PathBuf]) -> anyhow::Result<()> {
    let canonical = |p: &Path| -> Option<PathBuf> {
        let dir = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
    };
    let target = canonical(path);
    for input in inputs {
        if target.is_some() && canonical(input) == target {
            bail!(
                "refusing to write {what} to '{}': it is an input of this run",
                path.display()
            );
        }
    }
    smelt::io::write_atomic(path, text.as_bytes())
        .with_context(|| format!("writing '{}'", path.display()))?;
    eprintln!("smelt: wrote {what} to '{}'", path.display());
    Ok(())
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let progress = Reporter::new(cli.quiet);
    match cli.command {
        Command::Cost(args) => cost::run(args),
        Command::Match(args) => matching::run(args, &progress),
        Command::Grid(args) => grid::run(args, &progress),
        Command::Sweep(args) => sweep::run(args, &progress),
        Command::Fit(args) => fit::run(args, &progress),
        Command::Gain(args) => gain::run(args, &progress),
        Command::Bench(args) => bench::run(args, &progress),
        Command::Import(args) => import::run(args),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "smelt", &mut out);
            emit(&String::from_utf8_lossy(&out))?;
            Ok(ExitCode::SUCCESS)
        }
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

/// `SUCCESS`, or the tolerance exit code with each broken tolerance said on standard error.
pub fn tolerance_exit(broken: &[String]) -> ExitCode {
    if broken.is_empty() {
        return ExitCode::SUCCESS;
    }
    for b in broken {
        eprintln!("smelt: tolerance not met: {b}");
    }
    ExitCode::from(EXIT_TOLERANCE)
}

/// The broken tolerances of a match, in words: `kv: |-2.50%| > 1.00%`.
pub fn broken_words(
    broken: &[smelt::BudgetKind],
    residuals: &smelt::Residuals,
    tolerance: &smelt::budget::Tolerance,
) -> Vec<String> {
    broken
        .iter()
        .map(|&k| {
            format!(
                "{}: |{}| > {:.2}%",
                k.as_str(),
                smelt::report::percent(*residuals.get(k)),
                tolerance.get(k).unwrap_or(0.0) * 100.0
            )
        })
        .collect()
}
