//! `smelt fit`: a scaling-law surface per architecture.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;
use smelt::fit::{self, Fit, FitOptions, Scale};
use smelt::report;

use super::{OutputFormat, Starts, emit};

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
    #[arg(long, value_enum, default_value_t = Starts::Standard)]
    starts: Starts,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Huber threshold on log-loss residuals.
    #[arg(long, default_value_t = 1e-3)]
    delta: f64,
    /// Average the per-point losses instead of summing them (for comparison: the same
    /// stopping rules then end the optimisation earlier).
    #[arg(long)]
    mean: bool,
}

/// The fits of a file: `smelt fit --format json`.
#[derive(Debug, Serialize)]
pub struct Fits {
    /// One fit per group, sorted by group.
    pub fits: Vec<Fit>,
}

/// One table row per fit.
pub fn fits_table(fits: &[Fit]) -> String {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::UTF8_FULL_CONDENSED)
        .force_no_tty();
    t.set_header(vec![
        "group",
        "form",
        "E",
        "A",
        "a",
        "b",
        "K",
        "c",
        "gamma",
        "RMSE (nats)",
        "points",
        "cells",
        "converged",
    ]);
    for f in fits {
        t.add_row(vec![
            if f.group.is_empty() {
                "-".to_owned()
            } else {
                f.group.clone()
            },
            format!("{:?}", f.form).to_lowercase(),
            format!("{:.4}", f.surface.E),
            format!("{:.4e}", f.surface.A),
            format!("{:.4}", f.surface.a),
            format!("{:.4}", f.surface.b),
            format!("{:.4e}", f.surface.K),
            format!("{:.4}", f.surface.c),
            format!("{:.4}", f.gamma),
            format!("{:.5}", f.rmse),
            f.points.to_string(),
            f.cells.to_string(),
            format!(
                "{}, {} iterations, max |gradient| {:.1e}, {}/{} starts at best",
                f.convergence.termination,
                f.convergence.iterations,
                f.convergence.grad_max,
                f.convergence.starts_at_best,
                f.convergence.starts
            ),
        ]);
    }
    format!("{t}\n")
}

/// Runs `smelt fit`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let groups = fit::data::load(&args.endpoints, args.group.as_deref())
        .with_context(|| format!("endpoints '{}'", args.endpoints.display()))?;
    let mut fits = Vec::new();
    for (name, points) in &groups {
        let mut opts = FitOptions::standard(fit::form_of(points));
        opts.delta = args.delta;
        opts.starts = args.starts.grid(fit::form_of(points));
        if args.mean {
            opts.scale = Scale::Mean;
        }
        fits.push(fit::fit(name, points, &opts)?);
    }
    let out = Fits { fits };
    let text = match args.format {
        OutputFormat::Table => fits_table(&out.fits),
        OutputFormat::Json => report::to_json(&out)?,
        OutputFormat::Toml => report::to_toml(&out)?,
    };
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
