//! `smelt fit`: a scaling-law surface per architecture.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::fit::{self, FitOptions, Fits, Scale, Starts};
use smelt::report::Format;

use super::{Reporter, all_formats, emit_report, named};

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
    /// 13,500 for the surface) or `small` (32 starts, for a quick look).
    #[arg(long, default_value = "standard", value_parser = named::<Starts>())]
    starts: Starts,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
    /// Huber threshold on log-loss residuals.
    #[arg(long, default_value_t = 1e-3)]
    delta: f64,
    /// Average the per-point losses instead of summing them (for comparison: the same
    /// stopping rules then end the optimisation earlier).
    #[arg(long)]
    mean: bool,
}

/// Runs `smelt fit`.
pub fn run(args: Args, progress: &Reporter) -> anyhow::Result<ExitCode> {
    let groups = fit::data::load(&args.endpoints, args.group.as_deref())
        .with_context(|| format!("endpoints '{}'", args.endpoints.display()))?;
    let mut fits = Vec::new();
    for (name, points) in &groups {
        let form = fit::form_of(points);
        let mut opts = FitOptions::standard(form);
        opts.delta = args.delta;
        opts.starts = args.starts.grid(form);
        if args.mean {
            opts.scale = Scale::Mean;
        }
        fits.push(fit::fit_with(name, points, &opts, progress)?);
    }
    emit_report(&Fits { fits }, args.format)?;
    Ok(ExitCode::SUCCESS)
}
