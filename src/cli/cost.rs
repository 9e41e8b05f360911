//! `smelt cost`: the three budgets of one model, or of a model against its Baseline.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::ModelSpec;
use smelt::report;

use super::{OutputFormat, emit};

/// Parameters, per-token FLOPs, KV cache and sparsity of a model file.
///
/// Counts follow the conventions of the cost model (README, "Conventions"): 2 FLOPs per
/// multiply-add, training = 3 x forward, a looped layer counted once per execution for FLOPs
/// and KV and once per physical layer for parameters, embeddings and LM head excluded unless
/// [counting] asks for them.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The model file (TOML; see the README for the format), or a Hugging Face config.json
    /// (imported as `smelt import` does, at the default workload).
    model: PathBuf,
    /// A Baseline model file: show both side by side with the residual of each budget, and
    /// measure the model's sparsity against the Baseline's fully-activated control.
    #[arg(long, value_name = "BASELINE")]
    against: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
}

fn load(path: &PathBuf) -> anyhow::Result<ModelSpec> {
    ModelSpec::load(path).with_context(|| format!("model file '{}'", path.display()))
}

/// Runs `smelt cost`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let model = load(&args.model)?;
    let format = args.format;
    let text = match &args.against {
        None => {
            let cost = smelt::cost(&model)?;
            match format {
                OutputFormat::Table => report::cost_table(&cost),
                OutputFormat::Json => report::to_json(&cost)?,
                OutputFormat::Toml => report::to_toml(&cost)?,
            }
        }
        Some(path) => {
            let baseline = load(path)?;
            let cmp = smelt::compare(&baseline, &model)?;
            match format {
                OutputFormat::Table => report::comparison_table(&cmp),
                OutputFormat::Json => report::to_json(&cmp)?,
                OutputFormat::Toml => report::to_toml(&cmp)?,
            }
        }
    };
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
