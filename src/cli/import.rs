//! `smelt import`: a Hugging Face `config.json` as a smelt model file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::spec::hf;
use smelt::{Attention, ModelSpec};

use super::emit;

/// Convert a Hugging Face config.json (mixtral, qwen2_moe, qwen3_moe, olmoe) into a model file.
///
/// The embedding and the LM head are counted, as model cards do. Architectures the cost
/// model cannot describe (sliding windows, DeepSeek's MLA, attention biases, gated shared
/// experts, dense layers mixed with MoE layers) are refused with the reason.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config.json.
    config: PathBuf,
    /// Write the model file here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Packed sequence length of the workload.
    #[arg(long, default_value_t = 4096)]
    context: u64,
    /// Mean document length of the workload.
    #[arg(long, default_value_t = 991)]
    mean_doc_len: u64,
    /// Count dense attention (every key of the document) instead of causal.
    #[arg(long)]
    dense: bool,
}

/// Runs `smelt import`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("reading '{}'", args.config.display()))?;
    let mut workload = ModelSpec::default_workload();
    workload.context = args.context;
    workload.mean_doc_len = Some(args.mean_doc_len);
    if args.dense {
        workload.attention = Attention::Dense;
    }
    let spec = hf::import(&text, workload)
        .with_context(|| format!("config '{}'", args.config.display()))?;
    let out = format!(
        "# Imported by smelt from {} (embedding and LM head counted).\n{}",
        args.config.display(),
        spec.to_toml_string()?
    );
    match &args.output {
        Some(path) => {
            std::fs::write(path, out).with_context(|| format!("writing '{}'", path.display()))?
        }
        None => emit(&out)?,
    }
    Ok(ExitCode::SUCCESS)
}
