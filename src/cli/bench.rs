//! `smelt bench`: the GEMMs of one layer execution, executed and timed.

use std::path::PathBuf;
use std::process::ExitCode;

use smelt::ModelSpec;
use smelt::bench::{self, Backend, BenchOptions, Routing};
use smelt::report::Format;

use super::cost::load;
use super::{Reporter, emit_report, formats, load_budget, named};

/// Execute the GEMMs of one training step of one layer and time them per component.
///
/// Checks that the executed arithmetic equals the cost model's count exactly, and shows
/// what FLOPs hide: with --against (or --budget) the measured time ratio of the two models
/// next to their FLOP ratio. The CPU backend runs f32 on one thread; the CUDA backend
/// (build with --features cuda) runs bf16 cuBLAS.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["model", "budget"])))]
pub struct Args {
    /// The model file to benchmark.
    model: Option<PathBuf>,
    /// A Baseline model file to benchmark first, for the time and FLOP ratios.
    #[arg(long, value_name = "BASELINE", requires = "model")]
    against: Option<PathBuf>,
    /// A budget file: match it, then benchmark its Baseline and the matched looped model.
    #[arg(long, value_name = "BUDGET", conflicts_with_all = ["model", "against"])]
    budget: Option<PathBuf>,
    /// Where the kernels run: cpu (f32, one thread) or cuda (bf16 cuBLAS on GPU 0).
    #[arg(long, default_value = "cpu", value_parser = named::<Backend>())]
    backend: Backend,
    /// Tokens per batch, rounded to whole documents of the workload (default: 1024 on the
    /// CPU, 16384 on CUDA; at most 1,048,576).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=bench::MAX_TOKENS))]
    tokens: Option<u64>,
    /// Token-to-expert assignment: `balanced`, or `skew=S` for shares proportional to
    /// 1/(rank+1)^S.
    #[arg(long, default_value = "balanced")]
    routing: Routing,
    /// Timed runs per kernel shape (the median is kept; 1 to 100).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    repeats: u64,
    /// Output format.
    #[arg(long, default_value = "table",
          value_parser = formats(&[Format::Table, Format::Json, Format::Markdown, Format::Toml]))]
    format: Format,
}

/// Runs `smelt bench`.
pub fn run(args: Args, progress: &Reporter) -> anyhow::Result<ExitCode> {
    let opts = BenchOptions {
        backend: args.backend,
        tokens: args.tokens.unwrap_or(args.backend.default_tokens()),
        routing: args.routing,
        repeats: args.repeats as usize,
    };
    let specs: Vec<ModelSpec> = match (&args.model, &args.against, &args.budget) {
        (Some(m), None, None) => vec![load(m)?],
        (Some(m), Some(b), None) => vec![load(b)?, load(m)?],
        (None, None, Some(b)) => {
            let m = smelt::search::match_budget(&load_budget(b)?, 1)?;
            vec![m.baseline, m.looped]
        }
        _ => anyhow::bail!("give a model file (optionally with --against) or --budget"),
    };
    let refs: Vec<&ModelSpec> = specs.iter().collect();
    emit_report(&bench::bench_with(&refs, &opts, progress)?, args.format)?;
    Ok(ExitCode::SUCCESS)
}
