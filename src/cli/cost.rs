//! `smelt cost`: the three budgets of one model, or of a model against its Baseline.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use smelt::report::Format;
use smelt::{ActivationPolicy, ModelSpec};

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
    /// Per-token training FLOPs under launchers' formulas (megatron, torchtitan, 6n,
    /// 6n-attn) beside the exact count, each with its ratio to it and what it ignores; with
    /// --against, the comparison followed by each convention's model / Baseline ratio.
    #[arg(long)]
    conventions: bool,
    #[command(flatten)]
    activations: ActivationArgs,
}

/// What the activations budget counts (the table shows every policy).
#[derive(Debug, clap::Args)]
struct ActivationArgs {
    /// The execution policy of the activations budget ([counting] activations): eager,
    /// flash (the default), selective or full.
    #[arg(long = "activations", value_name = "POLICY")]
    policy: Option<ActivationPolicy>,
    /// Bytes per saved activation element ([counting] activation_bytes; 2 by default).
    #[arg(long, value_name = "BYTES")]
    activation_bytes: Option<u64>,
}

impl ActivationArgs {
    /// `spec` with the flags given replacing its `[counting]`'s, validated.
    fn apply(&self, mut spec: ModelSpec) -> anyhow::Result<ModelSpec> {
        if let Some(p) = self.policy {
            spec.counting.activations = p;
        }
        if let Some(b) = self.activation_bytes {
            spec.counting.activation_bytes = b;
        }
        spec.validate().context("--activation-bytes")?;
        Ok(spec)
    }
}

/// Reads a model file or config.json, naming it in errors.
pub fn load(path: &Path) -> anyhow::Result<ModelSpec> {
    ModelSpec::load(path).with_context(|| format!("model file '{}'", path.display()))
}

/// Runs `smelt cost`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let model = args
        .activations
        .apply(args.workload.spec(load(&args.model)?)?)?;
    match &args.against {
        None if args.conventions => emit_report(
            &smelt::conventions::launcher_flops(&model)?,
            args.format,
            &args.layout,
        )?,
        None => emit_report(&smelt::cost(&model)?, args.format, &args.layout)?,
        Some(path) => {
            let baseline = args.activations.apply(args.workload.spec(load(path)?)?)?;
            let cmp = smelt::compare(&baseline, &model)?;
            for note in &cmp.harmonised {
                super::note(&format!("smelt: note: {note}"));
            }
            match args.conventions {
                true => {
                    let name = cmp.baseline.name.as_deref().unwrap_or("baseline");
                    let p = smelt::conventions::pair(name, &baseline, &model)?;
                    let with = smelt::report::WithConventions::single(&cmp, p);
                    emit_report(&with, args.format, &args.layout)?
                }
                false => emit_report(&cmp, args.format, &args.layout)?,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
