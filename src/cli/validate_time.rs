//! `smelt validate-time`: the step model and the kernel constants against the published GPU
//! rows shipped with smelt.

use std::process::ExitCode;

use smelt::report::Format;

use super::{LayoutArgs, all_formats, emit_report};

/// Predict every published GPU training run (and kernel row) shipped with smelt and print
/// predicted vs published tokens/s/GPU, the error per row and the same errors for two
/// trivial predictors (a constant MFU per card; a FLOP-proportional time).
///
/// The rows are copies of public measurements (crates/smelt/data/published/, each row with
/// its source URL). The host constants of the step model, the kernel constants and the
/// trivial predictors are all fitted on these same rows: the errors are in-sample.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
    #[command(flatten)]
    layout: LayoutArgs,
}

/// Runs `smelt validate-time`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let v = smelt::time::step::published::validate()?;
    emit_report(&v, args.format, &args.layout)?;
    Ok(ExitCode::SUCCESS)
}
