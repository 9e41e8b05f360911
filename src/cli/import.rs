//! `smelt import`: a Hugging Face `config.json` as a smelt model file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use smelt::ModelSpec;
use smelt::hf::{self, Family};

use super::{WorkloadArgs, emit, write_file};

/// Convert a Hugging Face config.json into a model file. The help names the families from
/// the library's list of them ([`about`], [`long_about`]).
#[derive(Debug, clap::Args)]
#[command(about = about(), long_about = long_about())]
pub struct Args {
    /// The config.json, or a model directory holding one (its config.json is read).
    config: PathBuf,
    /// Write the model file here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    workload: WorkloadArgs,
}

/// The one-line help: what the command does and the families it reads.
fn about() -> String {
    format!(
        "Convert a Hugging Face config.json into a model file ({})",
        hf::families_list()
    )
}

/// The help of `smelt import --help`: each family with what it holds, then what is counted
/// and what is refused.
fn long_about() -> String {
    let width = Family::ALL
        .iter()
        .map(|f| f.as_str().len())
        .max()
        .unwrap_or(0);
    let families: String = Family::ALL
        .iter()
        .map(|f| format!("\n  {:width$}  {}", f.as_str(), f.about()))
        .collect();
    format!(
        "Convert a Hugging Face config.json into a model file.\n\n\
         Families (model_type):{families}\n\n\
         The embedding and the LM head are counted, as model cards do; MTP modules are kept \
         but not counted. Attention biases and sinks, shared experts, dense layers mixed with \
         MoE layers, multi-head latent attention, sliding-window and chunked layers, Gemma 4's \
         full-attention layers of their own shape, Gated DeltaNet (qwen3_next, qwen3_5_moe) \
         and Mamba-2 (nemotron_h) layers, LayerNorm and LM-head biases are read as the \
         family's Transformers code reads them; what the cost model cannot describe \
         (indexers outside deepseek_v32 and glm_moe_dsa, other linear-attention and \
         state-space layers, Qwen's max_window_layers windows, Gemma 4's per-layer input \
         embeddings and KV sharing, other families) is refused with the reason."
    )
}

/// A value parser for a Hugging Face family: `--help` lists each with what it holds.
pub fn families() -> impl TypedValueParser<Value = Family> {
    let values = Family::ALL
        .iter()
        .map(|&f| PossibleValue::new(f.as_str()).help(f.about()));
    PossibleValuesParser::new(values).try_map(|s| s.parse::<Family>())
}

/// Runs `smelt import`.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    // A model directory is read as `smelt export` reads one: its config.json.
    if args.config.is_dir() {
        args.config = args.config.join("config.json");
    }
    if let Some(path) = &args.output {
        smelt::io::refuse_inputs(path, std::slice::from_ref(&args.config), None).context("-o")?;
    }
    let text = smelt::io::read_to_string(&args.config)?;
    let workload = args.workload.apply(&ModelSpec::default_workload())?;
    let spec = hf::import(&text, workload)
        .with_context(|| format!("config '{}'", args.config.display()))?;
    let out = smelt::report::imported_model_file(&args.config.display().to_string(), &spec)?;
    let mut inputs = vec![args.config.clone()];
    inputs.extend(args.workload.inputs());
    match &args.output {
        Some(path) => write_file(path, &out, "the model file", &inputs)?,
        None => emit(&out)?,
    }
    Ok(ExitCode::SUCCESS)
}
