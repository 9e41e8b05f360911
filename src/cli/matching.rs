//! `smelt match`: the looped configuration that matches one budget.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::ValueEnum;
use clap::builder::{EnumValueParser, PossibleValue, TypedValueParser};
use clap::error::ErrorKind;

use smelt::hf::{self, Family};
use smelt::progress::{Progress, Terminal};
use smelt::report::{self, Format};
use smelt::search::{self, SearchOptions};

use super::bench::BenchFlag;
use super::{
    LayoutArgs, WorkloadArgs, budget_inputs, emit, load_budget, named, tolerance_exit, write_file,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MatchFormat {
    /// Tables: budgets, residuals, shapes, runners-up.
    Table,
    /// The JSON report (the contract in the README).
    Json,
    /// The tables as Markdown.
    Markdown,
    /// The matched model file (valid input to `smelt cost`).
    Model,
    /// The matched model as a Hugging Face config.json.
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
    /// The budget file (TOML; see the README, "Budget files").
    budget: PathBuf,
    /// Output format: tables, the JSON report, Markdown, the matched model file (model), or
    /// the matched model as a Hugging Face config.json (hf) with the loop in `smelt_loop_*`
    /// keys (and, when the Baseline is a config.json of the same family, its other keys).
    /// `toml` is refused: it meant the model file here and a report elsewhere; the model
    /// file is `model`.
    #[arg(long, default_value = "table", value_parser = MatchFormatParser)]
    format: MatchFormat,
    /// Write the matched model here instead of standard output (a config.json with --format
    /// hf, else a model file); the tables or JSON, if asked for, still go to standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The Hugging Face family for --format hf (default: the Baseline's, when it is a
    /// config.json smelt reads; else the one whose conventions the model follows: MLA,
    /// windows, sinks, q/k norm, attention biases, shared experts, dense layers).
    #[arg(long, value_name = "MODEL_TYPE", value_parser = named::<Family>())]
    hf_family: Option<Family>,
    /// The vocabulary to write in the config.json (--format hf) when the Baseline has none.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    vocab: Option<u64>,
    /// List the N best distinct configurations.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=search::MAX_TOP as u64))]
    top: u64,
    /// Search a lattice larger than the documented limit (README, "Budget files").
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
}

/// Runs `smelt match`.
pub fn run(args: Args, progress: &Terminal) -> anyhow::Result<ExitCode> {
    let budget = args.workload.budget(load_budget(&args.budget)?)?;
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
    let (hf, family, vocab) = (args.format == MatchFormat::Hf, args.hf_family, args.vocab);
    let model_file = || -> anyhow::Result<String> {
        Ok(match hf {
            true => report::to_json(&hf::export_match(
                budget.baseline_config(),
                &m.looped,
                family,
                vocab,
            )?)?,
            false => report::model_file(&m)?,
        })
    };
    let layout = args.layout.layout();
    let text = match (args.format, &args.output) {
        (MatchFormat::Table, _) => Some(report::render_with(&m, Format::Table, layout)?),
        (MatchFormat::Json, _) => Some(report::render(&m, Format::Json)?),
        (MatchFormat::Markdown, _) => Some(report::render_with(&m, Format::Markdown, layout)?),
        (MatchFormat::Model | MatchFormat::Hf, None) => Some(model_file()?),
        (MatchFormat::Model | MatchFormat::Hf, Some(_)) => None,
    };
    if let Some(path) = &args.output {
        let what = match hf {
            true => "the matched model's config.json",
            false => "the matched model file",
        };
        let inputs = budget_inputs(&args.budget, &budget);
        write_file(path, &model_file()?, what, &inputs)?;
    }
    if let Some(text) = text {
        emit(&text)?;
    }
    let rate = m.lattice.evaluated as f64 / seconds.max(1e-9);
    let ms = seconds * 1e3;
    progress.note(&format!(
        "solved in {ms:.1} ms ({rate:.0} candidates costed per second)"
    ));
    Ok(tolerance_exit(&m))
}
