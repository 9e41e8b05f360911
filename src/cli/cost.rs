//! `smelt cost`: the three budgets of one model, or of a model against its Baseline.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use smelt::ModelSpec;
use smelt::report::Format;

use super::{LayoutArgs, WorkloadArgs, all_formats, emit_report};

/// Parameters, per-token FLOPs, KV cache and sparsity of a model file.
///
/// Counts follow the conventions of the cost model (README, "Conventions"): 2 FLOPs per
/// multiply-add, training = 3 x forward, a looped layer counted once per execution for FLOPs
/// and KV and once per physical layer for parameters, embeddings and LM head excluded unless
/// [counting] asks for them. With --against, the model is costed under the Baseline's
/// counting and workload (standard error says what that replaced).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The model file (TOML; see the README for the format), or a Hugging Face config.json
    /// (imported as `smelt import` does).
    model: PathBuf,
    /// A Baseline model file: show both side by side with the residual of each budget, and
    /// measure the model's sparsity against the Baseline's fully-activated control.
    #[arg(long, value_name = "BASELINE")]
    against: Option<PathBuf>,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
    #[command(flatten)]
    layout: LayoutArgs,
}

/// Reads a model file or config.json, naming it in errors.
pub fn load(path: &Path) -> anyhow::Result<ModelSpec> {
    ModelSpec::load(path).with_context(|| format!("model file '{}'", path.display()))
}

/// Runs `smelt cost`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let model = args.workload.spec(load(&args.model)?)?;
    match &args.against {
        None => emit_report(&smelt::cost(&model)?, args.format, &args.layout)?,
        Some(path) => {
            let cmp = smelt::compare(&args.workload.spec(load(path)?)?, &model)?;
            for note in &cmp.harmonised {
                super::note(&format!("smelt: note: {note}"));
            }
            emit_report(&cmp, args.format, &args.layout)?
        }
    }
    Ok(ExitCode::SUCCESS)
}
