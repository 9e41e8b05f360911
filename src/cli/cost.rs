//! `smelt cost`: the three budgets of one model, or of a model against its Baseline.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use smelt::{ActivationPolicy, ModelSpec, RecomputeModules};

use super::ReportArgs;

/// Parameters, per-token FLOPs, KV cache and sparsity of a model file.
///
/// Counts follow the conventions of the cost model (docs/conventions.md, "Conventions"): 2 FLOPs per
/// multiply-add, training = 3 x forward, a looped layer counted once per execution for FLOPs
/// and KV and once per physical layer for parameters, embeddings and LM head excluded unless
/// [counting] asks for them. With --against, the model is costed under the Baseline's
/// counting and workload (standard error says what that replaced).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The model file (TOML; docs/guide.md, "Model files"), or a Hugging Face config.json
    /// (imported as `smelt import` does).
    model: PathBuf,
    /// A Baseline model file: show both side by side with the residual of each budget, and
    /// measure the model's sparsity against the Baseline's fully-activated control.
    #[arg(long, value_name = "BASELINE")]
    against: Option<PathBuf>,
    #[command(flatten)]
    report: ReportArgs,
    /// Per-token training FLOPs under launchers' formulas (megatron, torchtitan, 6n,
    /// 6n-attn) beside the exact count, each with its ratio to it and what it ignores; with
    /// --against, the comparison followed by each convention's model / Baseline ratio.
    #[arg(long)]
    conventions: bool,
    #[command(flatten)]
    activations: ActivationArgs,
    #[command(flatten)]
    training: TrainingArgs,
    /// A card of the table (h100-sxm, h800, h200-sxm, b200, ...): says whether each GPU's
    /// peak of the training layout ([training] or the flags; one GPU without either) fits
    /// its memory, by how much, and which knob (recompute, micro-batch, pp, ep, ZeRO stage)
    /// would make it fit, each re-evaluated.
    #[arg(long, value_parser = super::card, conflicts_with_all = ["against", "conventions"])]
    card: Option<smelt::time::Card>,
}

/// The training recipe and layout ([training]; any of these flags adds the table, with
/// the file's or the defaults for the others): static memory and memory per GPU.
#[derive(Debug, clap::Args)]
struct TrainingArgs {
    /// Tensor-parallel degree (Megatron, with sequence parallelism) [training] tp.
    #[arg(long, value_name = "N")]
    tp: Option<u64>,
    /// Expert-parallel degree: routed experts split across N GPUs (etp · ep must divide
    /// tp · dp · cp).
    #[arg(long, value_name = "N")]
    ep: Option<u64>,
    /// Expert tensor-parallel degree (Megatron's --expert-tensor-parallel-size; 1 by default).
    #[arg(long, value_name = "N")]
    etp: Option<u64>,
    /// Pipeline stages (1F1B: the first stage keeps N micro-batches).
    #[arg(long, value_name = "N")]
    pp: Option<u64>,
    /// Virtual pipeline stages per GPU (the interleaved schedule when above 1).
    #[arg(long, value_name = "N")]
    vp: Option<u64>,
    /// Layers of the first pipeline stage (Megatron's --decoder-first-pipeline-num-layers);
    /// the stages between split the rest evenly.
    #[arg(long, value_name = "LAYERS")]
    first_stage_layers: Option<u64>,
    /// Layers of the last pipeline stage (Megatron's --decoder-last-pipeline-num-layers).
    #[arg(long, value_name = "LAYERS")]
    last_stage_layers: Option<u64>,
    /// Data-parallel degree.
    #[arg(long, value_name = "N")]
    dp: Option<u64>,
    /// Context-parallel degree (the sequence split across N GPUs).
    #[arg(long, value_name = "N")]
    cp: Option<u64>,
    /// ZeRO stage: 0, 1 (optimizer states sharded across dp), 2 (+ gradients), 3 (+ weights).
    #[arg(long, value_name = "STAGE")]
    zero: Option<u64>,
    /// Sequences of the workload's context per micro-batch.
    #[arg(long, value_name = "N")]
    micro_batch: Option<u64>,
    /// Bytes per weight (2: bf16).
    #[arg(long, value_name = "BYTES")]
    weight_bytes: Option<u64>,
    /// Bytes per gradient (2: bf16; 4: fp32 accumulation).
    #[arg(long, value_name = "BYTES")]
    grad_bytes: Option<u64>,
    /// Bytes per master weight (4: fp32; 0: none).
    #[arg(long, value_name = "BYTES")]
    master_bytes: Option<u64>,
    /// Optimizer bytes per parameter (8: Adam's two fp32 moments).
    #[arg(long, value_name = "BYTES")]
    optimizer_bytes: Option<u64>,
}

impl TrainingArgs {
    /// `spec` with the flags given replacing its `[training]`'s (the table added when a
    /// flag is given, or when `always`), validated.
    fn apply(&self, mut spec: ModelSpec, always: bool) -> anyhow::Result<ModelSpec> {
        let flags = [
            self.tp,
            self.ep,
            self.etp,
            self.pp,
            self.vp,
            self.first_stage_layers,
            self.last_stage_layers,
            self.dp,
            self.cp,
            self.zero,
            self.micro_batch,
            self.weight_bytes,
            self.grad_bytes,
            self.master_bytes,
            self.optimizer_bytes,
        ];
        if flags.iter().all(Option::is_none) && !always {
            return Ok(spec);
        }
        let mut t = spec.training.unwrap_or_default();
        for (slot, flag) in [
            (&mut t.tp, self.tp),
            (&mut t.ep, self.ep),
            (&mut t.pp, self.pp),
            (&mut t.vp, self.vp),
            (&mut t.dp, self.dp),
            (&mut t.cp, self.cp),
            (&mut t.zero, self.zero),
            (&mut t.micro_batch, self.micro_batch),
            (&mut t.weight_bytes, self.weight_bytes),
            (&mut t.grad_bytes, self.grad_bytes),
            (&mut t.master_bytes, self.master_bytes),
            (&mut t.optimizer_bytes, self.optimizer_bytes),
        ] {
            if let Some(v) = flag {
                *slot = v;
            }
        }
        for (slot, flag) in [
            (&mut t.etp, self.etp),
            (&mut t.first_stage_layers, self.first_stage_layers),
            (&mut t.last_stage_layers, self.last_stage_layers),
        ] {
            if flag.is_some() {
                *slot = flag;
            }
        }
        spec.training = Some(t);
        spec.validate().context(
            "the training layout (--tp, --ep, --etp, --pp, --vp, --dp, --cp, --zero, ...)",
        )?;
        Ok(spec)
    }
}

/// What the activations budget counts (the table shows every policy).
#[derive(Debug, clap::Args)]
struct ActivationArgs {
    /// The execution policy of the activations budget ([counting] activations): megatron
    /// (the default: Megatron-Core with Transformer Engine, no recomputation),
    /// megatron-selective (with --recompute-modules), megatron-full, transformers-eager,
    /// transformers-sdpa, or the unfused counts unfused-eager, unfused-flash,
    /// unfused-selective, unfused-full (eager, flash, selective and full read as these).
    #[arg(long = "activations", value_name = "POLICY")]
    policy: Option<ActivationPolicy>,
    /// Megatron-Core's recompute modules for megatron-selective ([counting]
    /// recompute_modules), comma-separated: core_attn (the default), moe_act, layernorm,
    /// mla_up_proj, mlp, moe, shared_experts.
    #[arg(long, value_name = "MODULES", value_parser = recompute_modules)]
    recompute_modules: Option<RecomputeModules>,
    /// Bytes per saved activation element ([counting] activation_bytes): 1, 2, 4 or 8
    /// (fp8, bf16 or fp16, fp32, fp64); 2 by default.
    #[arg(long, value_name = "BYTES")]
    activation_bytes: Option<u64>,
}

fn recompute_modules(text: &str) -> Result<RecomputeModules, String> {
    RecomputeModules::parse_list(text).map_err(|e| e.to_string())
}

impl ActivationArgs {
    /// `spec` with the flags given replacing its `[counting]`'s, validated.
    fn apply(&self, mut spec: ModelSpec) -> anyhow::Result<ModelSpec> {
        if let Some(p) = self.policy {
            spec.counting.activations = p;
        }
        if let Some(m) = self.recompute_modules {
            spec.counting.recompute_modules = m;
        }
        if let Some(b) = self.activation_bytes {
            spec.counting.activation_bytes = b;
        }
        spec.validate()
            .context("--activations, --recompute-modules or --activation-bytes")?;
        Ok(spec)
    }
}

/// Reads a model file or config.json, naming it in errors.
pub fn load(path: &Path) -> anyhow::Result<ModelSpec> {
    ModelSpec::load(path).with_context(|| format!("model file '{}'", path.display()))
}

/// Runs `smelt cost`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let model = args.training.apply(
        args.activations
            .apply(args.report.workload.spec(load(&args.model)?)?)?,
        args.card.is_some(),
    )?;
    match &args.against {
        None if args.conventions => args
            .report
            .emit(&smelt::launcher_flops::launcher_flops(&model)?)?,
        None => {
            let mut cost = smelt::cost(&model)?;
            if let (Some(card), Some(t)) = (args.card, &model.training) {
                let Some(bytes) = card.spec().memory_capacity_bytes else {
                    anyhow::bail!("card: the card table has no memory size for {card}");
                };
                cost.fit = Some(smelt::cost::fit::fit(&model, t, card.as_str(), bytes)?);
            }
            args.report.emit(&cost)?
        }
        Some(path) => {
            let baseline = args.training.apply(
                args.activations
                    .apply(args.report.workload.spec(load(path)?)?)?,
                false,
            )?;
            let cmp = smelt::compare(&baseline, &model)?;
            for note in &cmp.harmonised {
                super::note(&format!("smelt: note: {note}"));
            }
            match args.conventions {
                true => {
                    let name = cmp.baseline.name.as_deref().unwrap_or("baseline");
                    let p = smelt::launcher_flops::pair(name, &baseline, &model)?;
                    let with = smelt::report::WithConventions::single(&cmp, p);
                    args.report.emit(&with)?
                }
                false => args.report.emit(&cmp)?,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
