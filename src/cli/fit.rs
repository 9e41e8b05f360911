//! `smelt fit`: a scaling-law surface per architecture.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::fit::{self, FitOptions, Scale, Search, Starts};
use smelt::progress::Terminal;
use smelt::report::Format;

use super::{LayoutArgs, all_formats, emit_report, named};

/// Fit L(F,S,D) = E + A(1-S)^b / F^a + K / D^c to endpoints, one fit per group.
///
/// Huber loss (delta 1e-3) on log-loss residuals summed over endpoints, L-BFGS from a grid of
/// starts (Chinchilla's Approach 3). With S = 0 everywhere, b is fixed at 0 and F may be
/// read as parameters N: Chinchilla's form.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Endpoints CSV with columns F, S, D, loss (and optionally cell and a group column).
    endpoints: PathBuf,
    /// Fit one surface per distinct value of this column (e.g. the architecture).
    #[arg(long, value_name = "COLUMN")]
    group: Option<String>,
    /// Start grid: `standard` (the replication's, 4,500 starts for Chinchilla's form and
    /// 13,500 for the surface) or `small` (32 starts for the surface, 16 for Chinchilla's form,
    /// for a quick look).
    #[arg(long, default_value = "standard", value_parser = named::<Starts>())]
    starts: Starts,
    /// How the grid is searched: `screened` (every start scored, L-BFGS from the best-scored
    /// in rounds of 64 until a round finds nothing lower) or `exhaustive` (L-BFGS from every
    /// start; slow).
    #[arg(long, default_value = "screened", value_parser = named::<Search>())]
    search: Search,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
    #[command(flatten)]
    layout: LayoutArgs,
    /// Huber threshold on log-loss residuals.
    #[arg(long, default_value_t = 1e-3)]
    delta: f64,
    /// Average the per-point losses instead of summing them (for comparison: the same
    /// stopping rules then end the optimisation earlier).
    #[arg(long)]
    mean: bool,
}

/// Runs `smelt fit`.
pub fn run(args: Args, progress: &Terminal) -> anyhow::Result<ExitCode> {
    let groups = fit::data::load(&args.endpoints, args.group.as_deref())
        .with_context(|| format!("endpoints '{}'", args.endpoints.display()))?;
    let opts = |form| FitOptions {
        delta: args.delta,
        starts: args.starts.grid(form),
        search: args.search,
        scale: if args.mean { Scale::Mean } else { Scale::Sum },
        ..FitOptions::standard(form)
    };
    let fits = fit::fit_groups(&groups, opts, progress)?;
    emit_report(&fits, args.format, &args.layout)?;
    Ok(ExitCode::SUCCESS)
}
