//! `smelt validate-time`: the step model and the kernel constants against the published GPU
//! rows shipped with smelt.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::report::Format;
use smelt::time::Card;

use super::{LayoutArgs, all_formats, card, emit_report};

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
    /// Instead: compare a bench report's measured GEMM shapes (`smelt bench --format json`,
    /// e.g. `--backend cuda` on a GPU) with the step model's kernel predictions on the card
    /// it ran on (or --card).
    #[arg(long, value_name = "BENCH.json")]
    bench: Option<PathBuf>,
    /// With --bench: the card to predict (default: the bench's device, when the card table
    /// knows it).
    #[arg(long, value_parser = card, requires = "bench")]
    card: Option<Card>,
}

/// Runs `smelt validate-time`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.bench {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading bench report '{}'", path.display()))?;
        let source = path.display().to_string();
        let check = smelt::time::step::kernel_check::check_bench(&text, &source, args.card)
            .with_context(|| format!("bench report '{source}'"))?;
        emit_report(&check, args.format, &args.layout)?;
        return Ok(ExitCode::SUCCESS);
    }
    let v = smelt::time::step::published::validate()?;
    emit_report(&v, args.format, &args.layout)?;
    Ok(ExitCode::SUCCESS)
}
