//! `smelt match`: the looped configuration that matches one budget.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::bail;
use smelt::budget::Budget;
use smelt::report::{self, Format};
use smelt::search::{self, MatchReport, SearchOptions};
use smelt::spec::hf::{self, Family};

use super::bench::BenchFlag;

use super::{
    Reporter, WorkloadArgs, broken_words, budget_inputs, emit, load_budget, named, tolerance_exit,
    write_file,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MatchFormat {
    /// Tables: budgets, residuals, shapes, runners-up.
    Table,
    /// The JSON report (the contract in the README).
    Json,
    /// The matched model file (valid input to `smelt cost`).
    Toml,
    /// The matched model as a Hugging Face config.json.
    Hf,
    /// The tables as Markdown.
    Markdown,
}

/// Find the looped configuration whose FLOPs, parameters and KV cache match a Baseline's.
///
/// Searches the budget's lattice exactly (the result is the optimum of the lattice under
/// the objective) and prints the residual of each budget, the shape changes and the search
/// size. `--format toml` prints the matched model file, valid input to `smelt cost`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The budget file (TOML; see the README, "Budget files").
    budget: PathBuf,
    /// Output format: tables, the JSON report, the matched model file (toml), or the matched
    /// model as a Hugging Face config.json (hf) with the loop in `smelt_loop_*` keys (and,
    /// when the Baseline is a config.json of the same family, its other keys).
    #[arg(long, value_enum, default_value_t = MatchFormat::Table)]
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
}

/// The matched model as a config.json of the asked (or the model's own) family.
fn hf_config(budget: &Budget, m: &MatchReport, args: &Args) -> anyhow::Result<String> {
    let family = args
        .hf_family
        .or_else(|| budget.baseline_config().and_then(hf::family_of_config))
        .unwrap_or_else(|| hf::family_of(&m.looped));
    let mut looped = m.looped.clone();
    match (looped.model.vocab, args.vocab) {
        (0, Some(v)) => looped.model.vocab = v,
        (0, None) => bail!(
            "the Baseline has no vocabulary, so the config.json would say vocab_size = 0; \
             give it with --vocab N"
        ),
        (have, Some(v)) if have != v => bail!("--vocab {v}: the Baseline's vocabulary is {have}"),
        _ => {}
    }
    let config = match budget.baseline_config() {
        Some(base) => hf::export_like(&looped, family, base)?,
        None => hf::export(&looped, family)?,
    };
    Ok(report::to_json(&config)?)
}

/// Runs `smelt match`.
pub fn run(args: Args, progress: &Reporter) -> anyhow::Result<ExitCode> {
    let mut budget = load_budget(&args.budget)?;
    if args.workload.is_set() {
        budget = budget.with_workload(args.workload.apply(&budget.baseline().workload)?)?;
    }
    let options = SearchOptions {
        top: args.top as usize,
        force: args.force,
        advise: args.advise,
    };
    let start = Instant::now();
    let mut m = search::match_budget_with(&budget, &options)?;
    let elapsed = start.elapsed();
    if let Some(opts) = args.bench.options() {
        m.time = Some(smelt::bench::time_ratio(
            &m.baseline,
            &m.looped,
            &opts,
            progress,
        )?);
    }
    let model_file = || -> anyhow::Result<String> {
        Ok(match args.format {
            MatchFormat::Hf => hf_config(&budget, &m, &args)?,
            _ => report::model_file(&m)?,
        })
    };
    let text = match (args.format, &args.output) {
        (MatchFormat::Table, _) => Some(report::render(&m, Format::Table)?),
        (MatchFormat::Json, _) => Some(report::render(&m, Format::Json)?),
        (MatchFormat::Markdown, _) => Some(report::render(&m, Format::Markdown)?),
        (MatchFormat::Toml | MatchFormat::Hf, None) => Some(model_file()?),
        (MatchFormat::Toml | MatchFormat::Hf, Some(_)) => None,
    };
    if let Some(path) = &args.output {
        let what = match args.format {
            MatchFormat::Hf => "the matched model's config.json",
            _ => "the matched model file",
        };
        write_file(
            path,
            &model_file()?,
            what,
            &budget_inputs(&args.budget, &budget),
        )?;
    }
    if let Some(text) = text {
        emit(&text)?;
    }
    use smelt::progress::Progress;
    progress.note(&format!(
        "solved in {:.1} ms ({:.0} candidates costed per second)",
        elapsed.as_secs_f64() * 1e3,
        m.lattice.evaluated as f64 / elapsed.as_secs_f64().max(1e-9)
    ));
    Ok(tolerance_exit(&broken_words(
        &m.broken,
        &m.residuals,
        &m.tolerance,
    )))
}
