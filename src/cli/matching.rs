//! `smelt match`: the looped configuration that matches one budget.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::ValueEnum;
use clap::builder::{EnumValueParser, PossibleValue, TypedValueParser};
use clap::error::ErrorKind;

use smelt::export::ExportFormat;
use smelt::hf::looped::ModelDir;
use smelt::hf::{self, Family};
use smelt::progress::{Progress, Terminal};
use smelt::report::{self, Format, Layout};
use smelt::search::{self, SearchOptions};

use super::bench::BenchFlag;
use super::launcher::render_match;
use super::{
    LayoutArgs, WorkloadArgs, budget_inputs, emit, load_budget, note, tolerance_exit, write_file,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MatchFormat {
    /// Tables: budgets, residuals, shapes, runners-up.
    Table,
    /// The JSON report (the contract in docs/guide.md, "JSON output").
    Json,
    /// The tables as Markdown.
    Markdown,
    /// With --conventions, the launcher table as CSV.
    Csv,
    /// The matched model file (valid input to `smelt cost`).
    Model,
    /// The matched model for Transformers: a looped one as a model directory (-o DIR).
    Hf,
}

/// Why `--format toml` is refused here: it wrote the matched model file once, and `toml`
/// now means a report in TOML everywhere else.
const TOML_REFUSED: &str = "`smelt match --format toml` is refused: it used to write the \
    matched model file, which is now `--format model` (and `-o FILE` writes it); the report \
    itself is `--format json`";

/// The `--format` parser: [`MatchFormat`]'s values, and `toml` refused with the reason (a
/// usage error, so that a script written for the old meaning stops rather than reading
/// another file).
#[derive(Debug, Clone)]
struct MatchFormatParser;

impl TypedValueParser for MatchFormatParser {
    type Value = MatchFormat;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<MatchFormat, clap::Error> {
        if value == "toml" {
            let err = clap::Error::raw(ErrorKind::InvalidValue, format!("{TOML_REFUSED}\n"));
            return Err(err.with_cmd(cmd));
        }
        EnumValueParser::<MatchFormat>::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let values: Vec<PossibleValue> = MatchFormat::value_variants()
            .iter()
            .filter_map(ValueEnum::to_possible_value)
            .collect();
        Some(Box::new(values.into_iter()))
    }
}

/// Find the looped configuration whose FLOPs, parameters and KV cache match a Baseline's.
///
/// Searches the budget's lattice exactly (the result is the optimum of the lattice under
/// the objective) and prints the residual of each budget, the shape changes and the search
/// size. `--format model` prints the matched model file, valid input to `smelt cost`
/// (`--format toml`, which printed it before, is refused with a pointer here).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The budget file (TOML; docs/guide.md, "Budget files").
    budget: PathBuf,
    /// Output format: tables, the JSON report, Markdown, the matched model file (model), or
    /// the matched model for Hugging Face Transformers (hf): a looped match is a model
    /// directory written with -o DIR (config.json of model_type smelt_looped, with the
    /// family's config and the loop, and the code that builds it looped; load it with
    /// trust_remote_code=True), a match without a loop its family's config.json (with, when
    /// the Baseline is a config.json of the same family, its other keys). `toml` is refused:
    /// it meant the model file here and a report elsewhere; the model file is `model`.
    #[arg(long, default_value = "table", value_parser = MatchFormatParser)]
    format: MatchFormat,
    /// Write the result here instead of standard output, in any format: the report (table,
    /// json, markdown, csv), the model file (model), or for --format hf the model directory
    /// of a looped match (created if missing) or the config.json of an unlooped one (a
    /// file, or into an existing folder).
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,
    /// The Hugging Face family for --format hf (default: the Baseline's, when it is a
    /// config.json smelt reads; else the one whose conventions the model follows: MLA,
    /// windows, sinks, q/k norm, attention biases, shared experts, dense layers). Refused
    /// without --format hf.
    #[arg(long, value_name = "MODEL_TYPE", value_parser = super::import::families())]
    hf_family: Option<Family>,
    /// The vocabulary to write in the config.json (--format hf) when the Baseline has none.
    /// Refused without --format hf.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    vocab: Option<u64>,
    /// With --format hf -o DIR: replace files in DIR that smelt did not write (or that
    /// changed since it did), such as a model directory's own config.json; never an input.
    /// Refused without --format hf.
    #[arg(long, requires = "output")]
    overwrite: bool,
    /// List the N best distinct configurations.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=search::MAX_TOP as u64))]
    top: u64,
    /// Search a lattice larger than the documented limit (docs/guide.md, "Budget files").
    #[arg(long)]
    force: bool,
    /// Say which budget binds and why, and re-solve single-knob refinements of the lattice
    /// (done anyway when a tolerance is broken).
    #[arg(long)]
    advise: bool,
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    bench: BenchFlag,
    #[command(flatten)]
    layout: LayoutArgs,
    #[command(flatten)]
    conventions: super::launcher::ConventionsFlag,
}

/// Runs `smelt match`.
pub fn run(args: Args, progress: &Terminal) -> anyhow::Result<ExitCode> {
    refuse_hf_flags(&args);
    let budget = args.workload.budget(load_budget(&args.budget)?)?;
    let mut inputs = budget_inputs(&args.budget, &budget);
    inputs.extend(args.workload.inputs());
    // An output over an input is refused before the search, not after it (a folder for a
    // Hugging Face export).
    if let Some(path) = &args.output {
        let writes = |f: &Path| smelt::export::may_write(ExportFormat::Hf, f);
        let folder = args.format == MatchFormat::Hf && path.extension().is_none_or(|e| e != "json");
        let folder: Option<&dyn Fn(&Path) -> bool> = folder.then_some(&writes);
        smelt::io::refuse_inputs(path, &inputs, folder).context("-o")?;
    }
    let (top, force, advise) = (args.top as usize, args.force, args.advise);
    let start = Instant::now();
    let mut m = search::match_budget_with(&budget, &SearchOptions { top, force, advise })?;
    let seconds = start.elapsed().as_secs_f64();
    if let Some(opts) = args.bench.options() {
        m.time = Some(smelt::bench::time_ratio(
            &m.baseline,
            &m.looped,
            &opts,
            progress,
        )?);
    }
    let (layout, conventions) = (args.layout.layout(), &args.conventions);
    let text = match args.format {
        MatchFormat::Table => Some(render_match(&m, Format::Table, layout, conventions)?),
        MatchFormat::Json => Some(render_match(&m, Format::Json, Layout::WIDE, conventions)?),
        MatchFormat::Markdown => Some(render_match(&m, Format::Markdown, layout, conventions)?),
        MatchFormat::Csv => Some(render_match(&m, Format::Csv, layout, conventions).context(
            "--format csv (a match is CSV only with --conventions; it also writes --format \
                 model and --format hf)",
        )?),
        MatchFormat::Model => Some(report::model_file(&m)?),
        MatchFormat::Hf => {
            let config = hf::export_match(
                budget.baseline_config(),
                &m.looped,
                args.hf_family,
                args.vocab,
            )?;
            let overwrite = super::export::overwrite(args.overwrite);
            write_hf(&config, args.output.as_deref(), &inputs, overwrite)?
        }
    };
    match (text, &args.output) {
        (Some(text), Some(path)) => write_file(path, &text, what(args.format), &inputs)?,
        (Some(text), None) => emit(&text)?,
        (None, _) => {}
    }
    let rate = m.lattice.evaluated as f64 / seconds.max(1e-9);
    let ms = seconds * 1e3;
    progress.note(&format!(
        "solved in {ms:.1} ms ({rate:.0} candidates costed per second)"
    ));
    Ok(tolerance_exit(&m))
}

/// What `-o` writes in `format` (other than `hf`, which says for itself), for the note on
/// standard error.
fn what(format: MatchFormat) -> &'static str {
    match format {
        MatchFormat::Model => "the matched model file",
        MatchFormat::Json => "the JSON report",
        MatchFormat::Csv => "the launcher table (CSV)",
        MatchFormat::Markdown => "the report (Markdown)",
        MatchFormat::Table | MatchFormat::Hf => "the report",
    }
}

/// Refuses `--hf-family`, `--vocab` and `--overwrite` without `--format hf` (a usage error,
/// as `grid` and `sweep` refuse them without `--export`): they would be ignored.
fn refuse_hf_flags(args: &Args) {
    if args.format == MatchFormat::Hf {
        return;
    }
    let given = [
        (args.hf_family.is_some(), "--hf-family <MODEL_TYPE>"),
        (args.vocab.is_some(), "--vocab <N>"),
        (args.overwrite, "--overwrite"),
    ];
    if let Some((_, flag)) = given.iter().find(|(given, _)| *given) {
        super::usage_error(
            "match",
            ErrorKind::MissingRequiredArgument,
            format!(
                "the following required arguments were not provided:\n  --format hf\n\n\
                 {flag} only applies to the Hugging Face export (--format hf); without it the \
                 flag would be ignored"
            ),
        );
    }
}

/// The Hugging Face export: a looped match as a model directory written to `-o DIR`, never
/// as a bare config.json (which Transformers would build unlooped); a match without a loop
/// as its family's config.json, printed, written to `-o FILE`, or into `-o DIR` when that is
/// a folder. Returns the text to print, if any.
fn write_hf(
    config: &serde_json::Value,
    output: Option<&Path>,
    inputs: &[PathBuf],
    overwrite: smelt::io::Overwrite,
) -> anyhow::Result<Option<String>> {
    let files = ModelDir::of(config)?;
    let looped_needs_dir = "a looped match is written for Transformers as a model directory \
        (config.json with the family's config and the loop, and the code that builds it \
        looped), never as a bare config.json, which would build the unlooped model";
    match output {
        None if files.is_looped() => {
            bail!("--format hf: {looped_needs_dir}: give -o DIR")
        }
        None => Ok(Some(report::to_json(config)?)),
        Some(path) if files.is_looped() => {
            if path.extension().is_some_and(|e| e == "json") {
                bail!(
                    "-o {}: {looped_needs_dir}: give a directory, e.g. -o {}",
                    path.display(),
                    path.with_extension("").display()
                );
            }
            files
                .write(path, inputs, overwrite)
                .with_context(|| format!("writing the looped model to '{}'", path.display()))?;
            let names: Vec<&str> = files.files.iter().map(|(n, _)| *n).collect();
            note(&format!(
                "smelt: wrote the looped model for Transformers to '{}' ({}); build it with \
                 trust_remote_code=True",
                path.display(),
                names.join(", ")
            ));
            Ok(None)
        }
        Some(path) if path.is_dir() => {
            files
                .write(path, inputs, overwrite)
                .with_context(|| format!("writing the config.json into '{}'", path.display()))?;
            note(&format!(
                "smelt: wrote the matched model's config.json into '{}'",
                path.display()
            ));
            Ok(None)
        }
        Some(path) => {
            let what = "the matched model's config.json";
            write_file(path, &report::to_json(config)?, what, inputs)?;
            Ok(None)
        }
    }
}
