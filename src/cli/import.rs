//! `smelt import`: a Hugging Face `config.json` as a smelt model file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::ModelSpec;
use smelt::hf;

use super::{WorkloadArgs, emit, write_file};

/// Convert a Hugging Face config.json into a model file (mixtral, qwen2_moe, qwen3_moe, olmoe,
/// deepseek_v2, deepseek_v3, deepseek_v32, kimi_k2, glm4_moe, gpt_oss, minimax_m2,
/// llama4_text or a llama4 wrapper's text decoder, granitemoe, phimoe).
///
/// The embedding and the LM head are counted, as model cards do; MTP modules are kept but
/// not counted. Attention biases and sinks, shared experts, dense layers mixed with MoE
/// layers, multi-head latent attention, sliding-window and chunked layers, LayerNorm and
/// LM-head biases are read as the family's Transformers code reads them; what the cost model
/// cannot describe (indexers outside deepseek_v32, linear-attention and state-space layers,
/// Qwen's max_window_layers windows, other families) is refused with the reason.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config.json.
    config: PathBuf,
    /// Write the model file here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    workload: WorkloadArgs,
}

/// Runs `smelt import`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = smelt::io::read_to_string(&args.config)?;
    let workload = args.workload.apply(&ModelSpec::default_workload())?;
    let spec = hf::import(&text, workload)
        .with_context(|| format!("config '{}'", args.config.display()))?;
    let out = smelt::report::imported_model_file(&args.config.display().to_string(), &spec)?;
    match &args.output {
        Some(path) => write_file(
            path,
            &out,
            "the model file",
            std::slice::from_ref(&args.config),
        )?,
        None => emit(&out)?,
    }
    Ok(ExitCode::SUCCESS)
}
