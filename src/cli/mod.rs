//! Argument parsing (clap) and dispatch: each subcommand loads its input, calls the
//! library, renders the result through `smelt::report` and writes it. The library never
//! sees clap types.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;

use anyhow::Context;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{CommandFactory, Parser, Subcommand};
use smelt::budget::Budget;
use smelt::names::Named;
use smelt::progress::Terminal;
use smelt::report::{Format, Layout, Report};
use smelt::search::Verdict;

mod bench;
mod cost;
mod export;
mod export_model;
mod fit;
mod gain;
mod grid;
mod import;
mod launcher;
mod matching;
mod merge;
mod mfu;
mod plan;
mod predict;
mod predict_step;
mod sweep;
mod validate_time;
mod workload;

pub use workload::WorkloadArgs;

/// Exit code for an error: bad input, unreadable file, infeasible lattice.
pub const EXIT_ERROR: u8 = 1;
/// Exit code when a result is outside the budget's tolerances (the result is printed).
pub const EXIT_TOLERANCE: u8 = 3;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: a file could not be read, parsed or validated (the message names the field
     and the rule), a count overflowed, no lattice point is feasible, or `grid --bench`
     timed no cell (the grid is still printed; a grid with only some cells timed exits 0
     with a warning naming the others)
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
    Predict(predict::Args),
    Calibrate(predict::CalibrateArgs),
    Import(import::Args),
    Export(export_model::Args),
    Mfu(mfu::Args),
    Merge(merge::Args),
    Plan(plan::Args),
    Collect(plan::CollectArgs),
    ValidateTime(validate_time::Args),
    /// Print a shell completion script. For bash, into bash-completion's folder for the user
    /// (made if missing): `mkdir -p ~/.local/share/bash-completion/completions && smelt
    /// completions bash > ~/.local/share/bash-completion/completions/smelt`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let progress = Terminal::new(cli.quiet);
    match cli.command {
        Command::Cost(args) => cost::run(args),
        Command::Match(args) => matching::run(args, &progress),
        Command::Grid(args) => grid::run(args, &progress),
        Command::Sweep(args) => sweep::run(args, &progress),
        Command::Fit(args) => fit::run(args, &progress),
        Command::Gain(args) => gain::run(args, &progress),
        Command::Bench(args) => bench::run(args, &progress),
        Command::Predict(args) => predict::run(args),
        Command::Calibrate(args) => predict::calibrate(args),
        Command::Import(args) => import::run(args),
        Command::Export(args) => export_model::run(args),
        Command::Mfu(args) => mfu::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Plan(args) => plan::run(args, &progress),
        Command::Collect(args) => plan::collect(args),
        Command::ValidateTime(args) => validate_time::run(args),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "smelt", &mut out);
            emit(&String::from_utf8_lossy(&out))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A value parser for a named library enum: `--help` lists its names.
pub fn named<T>() -> impl TypedValueParser<Value = T>
where
    T: Named + FromStr<Err = smelt::Error> + Clone + Send + Sync,
{
    PossibleValuesParser::new(T::ALL.iter().map(|v| v.as_str())).try_map(|s| s.parse::<T>())
}

/// A card's name (`--card`, `grid --predict`), read by the library's one parser of card
/// names (an id of the table, or a driver's name for a card: `h200` is the SXM card); the
/// error is the library's, listing the ids and short names.
pub fn card(text: &str) -> Result<smelt::time::Card, String> {
    smelt::time::Card::parse(text).map_err(|e| match e {
        smelt::Error::InvalidSpec { rule, .. } => rule,
        other => other.to_string(),
    })
}

/// A `--format` value parser offering only `allowed` (`all_formats` for every one).
pub fn formats(allowed: &'static [Format]) -> impl TypedValueParser<Value = Format> {
    let values = allowed
        .iter()
        .map(|&f| PossibleValue::new(f.as_str()).help(f.help()));
    PossibleValuesParser::new(values).try_map(|s| s.parse::<Format>())
}

/// A `--format` value parser offering every format.
pub fn all_formats() -> impl TypedValueParser<Value = Format> {
    formats(Format::ALL)
}

/// Reads a budget file, naming it in errors; its notes ([`Budget::notes`]) go to standard
/// error.
pub fn load_budget(path: &Path) -> anyhow::Result<Budget> {
    let budget = Budget::load(path).with_context(|| format!("budget file '{}'", path.display()))?;
    budget_notes(&format!("budget file '{}'", path.display()), &budget);
    Ok(budget)
}

/// Writes a budget's notes ([`Budget::notes`]) to standard error, each naming `what`.
pub fn budget_notes(what: &str, budget: &Budget) {
    for n in budget.notes() {
        note(&format!("smelt: note: {what}: {n}"));
    }
}

/// The files a budget was read from: the budget file and [`Budget::inputs`] (its
/// Baseline's, its time budget's calibration).
pub fn budget_inputs(path: &Path, budget: &Budget) -> Vec<PathBuf> {
    std::iter::once(path.to_path_buf())
        .chain(budget.inputs())
        .collect()
}

/// Writes `text` to `path` (never over one of the run's `inputs`) and says so on standard
/// error.
pub fn write_file(path: &Path, text: &str, what: &str, inputs: &[PathBuf]) -> anyhow::Result<()> {
    smelt::io::write_output(path, text.as_bytes(), inputs)
        .with_context(|| format!("writing {what}"))?;
    note(&format!("smelt: wrote {what} to '{}'", path.display()));
    Ok(())
}

/// Exits with a usage error of `smelt SUBCOMMAND` (exit code 2, clap's own wording and
/// usage line): for a rule between flags clap cannot state, checked once the flags are
/// parsed.
pub fn usage_error(subcommand: &str, kind: clap::error::ErrorKind, message: String) -> ! {
    let message = smelt::progress::visible(&message);
    let mut cli = Cli::command();
    cli.build();
    match cli.find_subcommand_mut(subcommand) {
        Some(sub) => sub.error(kind, message).exit(),
        None => cli.error(kind, message).exit(),
    }
}

/// Writes a line to standard error (control characters escaped), ignoring a failure: a
/// full or closed standard error loses the note, never the result (`eprintln!` would
/// panic).
pub fn note(line: &str) {
    let _ = writeln!(
        std::io::stderr().lock(),
        "{}",
        smelt::progress::visible(line)
    );
}

/// The workload flags, `--format` (every format) and `--wide`: what `cost`, `predict` and
/// `mfu` end their flags with.
#[derive(Debug, clap::Args)]
#[group(skip)]
pub struct ReportArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = all_formats())]
    pub format: Format,
    #[command(flatten)]
    pub layout: LayoutArgs,
}

impl ReportArgs {
    /// Writes `report` to standard output in the format and layout asked for.
    pub fn emit<R: Report + ?Sized>(&self, report: &R) -> anyhow::Result<()> {
        emit_report(report, self.format, &self.layout)
    }
}

/// The models `predict` and `bench` run: a model file (after its Baseline, with
/// `--against`), or a budget's Baseline and its match. Each command words the three flags'
/// help for itself ([`Worded::worded`]); one of `MODEL` and `--budget` is required
/// (`ModelInputs::GROUP`).
#[derive(Debug, clap::Args)]
#[group(skip)]
pub struct ModelInputs {
    model: Option<PathBuf>,
    #[arg(long, value_name = "BASELINE", requires = "model")]
    against: Option<PathBuf>,
    #[arg(long, value_name = "BUDGET", conflicts_with_all = ["model", "against"])]
    budget: Option<PathBuf>,
}

impl ModelInputs {
    /// The group requiring a model file or a budget.
    pub fn group() -> clap::ArgGroup {
        clap::ArgGroup::new("input")
            .required(true)
            .args(["model", "budget"])
    }

    /// The models at the workload `w` gives: the budget's Baseline and match, or the
    /// Baseline and the model, or the model.
    pub fn specs(&self, w: &WorkloadArgs) -> anyhow::Result<Vec<smelt::ModelSpec>> {
        Ok(match (&self.budget, &self.against, &self.model) {
            (Some(b), _, _) => {
                let m = smelt::search::match_budget(&w.budget(load_budget(b)?)?, 1)?;
                vec![m.baseline, m.looped]
            }
            (None, Some(b), Some(m)) => vec![w.spec(cost::load(b)?)?, w.spec(cost::load(m)?)?],
            (None, None, Some(m)) => vec![w.spec(cost::load(m)?)?],
            _ => anyhow::bail!("give a model file (optionally with --against) or --budget"),
        })
    }
}

/// A command's help for [`ModelInputs`]' `MODEL`, `--against` and `--budget`, in its words
/// (`#[command(worded([...]))]`).
pub trait Worded {
    /// The command with the three arguments' help set.
    fn worded(self, help: [&'static str; 3]) -> Self;
}

impl Worded for clap::Command {
    fn worded(self, [model, against, budget]: [&'static str; 3]) -> Self {
        self.mut_arg("model", |a| a.help(model))
            .mut_arg("against", |a| a.help(against))
            .mut_arg("budget", |a| a.help(budget))
    }
}

/// The width a table fits when standard output is not a terminal and `COLUMNS` is not set
/// (so that piped output and tests are the same everywhere).
pub const DEFAULT_WIDTH: usize = 120;

/// `--wide`: every column of the human formats.
#[derive(Debug, clap::Args)]
pub struct LayoutArgs {
    /// Every column in the table and Markdown formats, each table as wide as it needs. By
    /// default they show what a first look needs (the cells, the knobs that changed, the
    /// ratios, the verdict) within the terminal's width: $COLUMNS if set, else the
    /// terminal's, else 120 when standard output is not a terminal. CSV, JSON and TOML
    /// always hold everything.
    #[arg(long)]
    wide: bool,
}

impl LayoutArgs {
    /// The layout the flag asks for.
    pub fn layout(&self) -> Layout {
        match self.wide {
            true => Layout::WIDE,
            false => Layout::compact(output_width()),
        }
    }
}

/// The width of standard output: `COLUMNS` when it is a positive number, else the
/// terminal's when standard output is one, else [`DEFAULT_WIDTH`].
fn output_width() -> usize {
    let columns = std::env::var("COLUMNS").ok();
    if let Some(n) = columns.and_then(|c| c.trim().parse::<usize>().ok())
        && n > 0
    {
        return n;
    }
    let stdout = std::io::stdout();
    if std::io::IsTerminal::is_terminal(&stdout)
        && let Some((terminal_size::Width(w), _)) = terminal_size::terminal_size_of(&stdout)
    {
        return usize::from(w);
    }
    DEFAULT_WIDTH
}

/// Renders `report` in `format` laid out as `layout` says and writes it to standard output.
pub fn emit_report<R: Report + ?Sized>(
    report: &R,
    format: Format,
    layout: &LayoutArgs,
) -> anyhow::Result<()> {
    emit(&smelt::report::render_with(
        report,
        format,
        layout.layout(),
    )?)
}

/// Writes `text` to standard output.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// `SUCCESS`, or the tolerance exit code with each broken tolerance said on standard error.
pub fn tolerance_exit(result: &impl Verdict) -> ExitCode {
    let broken = smelt::request::tolerance_lines(result);
    for line in &broken {
        note(&format!("smelt: {line}"));
    }
    match broken.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(EXIT_TOLERANCE),
    }
}
