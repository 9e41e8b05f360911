//! `smelt match`: the looped configuration that matches one budget.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use smelt::budget::Budget;
use smelt::report;
use smelt::search::{self, MatchReport};

use super::{EXIT_TOLERANCE, emit};

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
    /// Output format: table, the matched model file (toml), the JSON report, or the matched
    /// model as a Hugging Face config.json (hf) with the loop in `smelt_loop_*` keys (and,
    /// when the Baseline is a config.json of the same family, its non-shape keys).
    #[arg(long, value_enum, default_value_t = MatchFormat::Table)]
    format: MatchFormat,
    /// Also write the matched model here: a config.json with --format hf, else a model file.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The Hugging Face family for --format hf: mixtral, qwen2_moe, qwen3_moe or olmoe
    /// (default: the one whose conventions the model follows: q/k norm, attention biases,
    /// gated shared expert, dense layers).
    #[arg(long, value_name = "MODEL_TYPE")]
    hf_family: Option<String>,
    /// List the N best distinct configurations (N >= 1).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    top: u64,
}

/// The matched model file, with the residuals as a comment.
pub fn model_file(m: &MatchReport) -> anyhow::Result<String> {
    let r = &m.residuals;
    Ok(format!(
        "# Matched by smelt to {} ({} mode): FLOPs {}, params {}, KV {}\n{}",
        m.baseline.name.as_deref().unwrap_or("the Baseline"),
        m.mode.as_str(),
        report::percent(r.flops),
        report::percent(r.params),
        report::percent(r.kv),
        m.looped.to_toml_string()?
    ))
}

/// Runs `smelt match`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let budget = Budget::load(&args.budget)
        .with_context(|| format!("budget file '{}'", args.budget.display()))?;
    let start = Instant::now();
    let m = search::match_budget(&budget, args.top as usize)?;
    let elapsed = start.elapsed();
    let hf = || -> anyhow::Result<String> {
        let family = args
            .hf_family
            .clone()
            .unwrap_or_else(|| smelt::spec::hf::family_of(&m.looped).to_owned());
        let config = match Budget::baseline_config(&args.budget)? {
            Some(base) => smelt::spec::hf::export_like(&m.looped, &family, &base)?,
            None => smelt::spec::hf::export(&m.looped, &family)?,
        };
        Ok(serde_json::to_string_pretty(&config)? + "\n")
    };
    let text = match args.format {
        MatchFormat::Table => report::match_table(&m),
        MatchFormat::Json => report::to_json(&m)?,
        MatchFormat::Toml => model_file(&m)?,
        MatchFormat::Hf => hf()?,
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
        let file = if args.format == MatchFormat::Hf {
            hf()?
        } else {
            model_file(&m)?
        };
        std::fs::write(path, file).with_context(|| format!("writing '{}'", path.display()))?;
    }
    Ok(if m.within_tolerance {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TOLERANCE)
    })
}
