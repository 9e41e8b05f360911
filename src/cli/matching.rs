//! `smelt match`: the looped configuration that matches one budget.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use smelt::budget::Budget;
use smelt::report::{self, Format};
use smelt::search::{self, MatchReport};
use smelt::spec::hf::{self, Family};

use super::{emit, load_budget, named, tolerance_exit, write_file};

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
    /// when the Baseline is a config.json of the same family, its non-shape keys).
    #[arg(long, value_enum, default_value_t = MatchFormat::Table)]
    format: MatchFormat,
    /// Also write the matched model here: a config.json with --format hf, else a model file.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The Hugging Face family for --format hf (default: the one whose conventions the model
    /// follows: q/k norm, attention biases, gated shared expert, dense layers).
    #[arg(long, value_name = "MODEL_TYPE", value_parser = named::<Family>())]
    hf_family: Option<Family>,
    /// List the N best distinct configurations (N >= 1).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    top: u64,
}

/// The matched model as a config.json of the asked (or the model's own) family.
fn hf_config(budget: &Budget, m: &MatchReport, family: Option<Family>) -> anyhow::Result<String> {
    let family = family.unwrap_or_else(|| hf::family_of(&m.looped));
    let config = match budget.baseline_config() {
        Some(base) => hf::export_like(&m.looped, family, base)?,
        None => hf::export(&m.looped, family)?,
    };
    Ok(report::to_json(&config)?)
}

/// Runs `smelt match`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let budget = load_budget(&args.budget)?;
    let start = Instant::now();
    let m = search::match_budget(&budget, args.top as usize)?;
    let elapsed = start.elapsed();
    let model_file = || -> anyhow::Result<String> {
        Ok(match args.format {
            MatchFormat::Hf => hf_config(&budget, &m, args.hf_family)?,
            _ => report::model_file(&m)?,
        })
    };
    let text = match args.format {
        MatchFormat::Table => report::render(&m, Format::Table)?,
        MatchFormat::Json => report::render(&m, Format::Json)?,
        MatchFormat::Markdown => report::render(&m, Format::Markdown)?,
        MatchFormat::Toml | MatchFormat::Hf => model_file()?,
    };
    emit(&text)?;
    if args.format == MatchFormat::Table {
        eprintln!(
            "solved in {:.1} ms ({:.0} candidates costed per second)",
            elapsed.as_secs_f64() * 1e3,
            m.lattice.evaluated as f64 / elapsed.as_secs_f64().max(1e-9)
        );
    }
    if let Some(path) = &args.output {
        write_file(path, &model_file()?)?;
    }
    Ok(tolerance_exit(m.within_tolerance))
}
