//! `smelt predict --global-batch ...`: the training step of a parallel layout (the step
//! model, `smelt::time::step`).

use smelt::model::ModelSpec;
use smelt::request::{Layout, MAX_DEGREE, MAX_GLOBAL_BATCH};
use smelt::study::{LayoutSource, StepBasis};
use smelt::time::Card;
use smelt::time::step::report::StepReport;

/// A parallel degree, GPU count or micro-batch: 1 to [`MAX_DEGREE`].
fn degree() -> clap::builder::RangedU64ValueParser {
    clap::value_parser!(u64).range(1..=MAX_DEGREE)
}

/// A parallel layout for `smelt predict` (with --global-batch, the step model runs).
#[derive(Debug, Clone, clap::Args)]
pub struct StepFlags {
    /// Sequences per optimizer step: predicts one training step of the layout below
    /// (per GPU: kernels, collectives, pipeline bubble, optimizer, host), with
    /// tokens/s/GPU and a memory verdict.
    #[arg(long, value_name = "SEQUENCES", value_parser = clap::value_parser!(u64).range(1..=MAX_GLOBAL_BATCH))]
    global_batch: Option<u64>,
    /// Tensor parallelism (with sequence parallelism).
    #[arg(long, value_parser = degree(), requires = "global_batch")]
    tp: Option<u64>,
    /// Expert parallelism (divides tp · dp · cp, as Megatron-Core with expert tensor
    /// parallelism 1 draws it).
    #[arg(long, value_parser = degree(), requires = "global_batch")]
    ep: Option<u64>,
    /// Pipeline stages (1F1B).
    #[arg(long, value_parser = degree(), requires = "global_batch")]
    pp: Option<u64>,
    /// Virtual pipeline stages per GPU (interleaved 1F1B).
    #[arg(long, value_parser = degree(), requires = "global_batch")]
    vp: Option<u64>,
    /// Layers of the first pipeline stage (Megatron's --decoder-first-pipeline-num-layers);
    /// the stages between split the rest evenly. Not for a looped model (its loop sits on
    /// one stage, and the step model places it).
    #[arg(long, value_name = "LAYERS", value_parser = degree(), requires = "global_batch")]
    first_stage_layers: Option<u64>,
    /// Layers of the last pipeline stage (Megatron's --decoder-last-pipeline-num-layers).
    #[arg(long, value_name = "LAYERS", value_parser = degree(), requires = "global_batch")]
    last_stage_layers: Option<u64>,
    /// Context parallelism.
    #[arg(long, value_parser = degree(), requires = "global_batch")]
    cp: Option<u64>,
    /// Data parallelism (default: --gpus / (tp · pp · cp)).
    #[arg(long, value_parser = degree(), requires = "global_batch")]
    dp: Option<u64>,
    /// GPUs in all (must equal tp · pp · cp · dp when both are given).
    #[arg(long, value_parser = degree(), requires = "global_batch")]
    gpus: Option<u64>,
    /// ZeRO stage 0-3 (the memory verdict's sharding of optimizer states, gradients, weights).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=3), requires = "global_batch")]
    zero: Option<u64>,
    /// Sequences per micro-batch.
    #[arg(long, value_parser = degree(), requires = "global_batch")]
    micro_batch: Option<u64>,
    /// Activation recomputation: none, selective (norms and activations) or full.
    #[arg(long, value_parser = ["none", "selective", "full"], requires = "global_batch")]
    recompute: Option<String>,
    /// The framework: megatron-core, or fsdp2 (PyTorch FSDP2 with Transformers modules: its
    /// own host cost, its parameter and gradient copies, no MTP modules).
    #[arg(long, value_parser = ["megatron-core", "fsdp2"], requires = "global_batch")]
    framework: Option<String>,
    /// How the routed experts' tokens cross nodes: alltoall (every copy) or deepep (one copy
    /// per node, forwarded inside it).
    #[arg(long, value_parser = ["alltoall", "deepep"], requires = "global_batch")]
    dispatcher: Option<String>,
}

impl StepFlags {
    /// Whether a step is asked for.
    pub fn asked(&self) -> bool {
        self.global_batch.is_some()
    }

    /// The flags as the library's layout (the same type Python's `predict_step` gives).
    fn layout(&self) -> Layout {
        Layout {
            tp: self.tp,
            ep: self.ep,
            pp: self.pp,
            vp: self.vp,
            first_stage_layers: self.first_stage_layers,
            last_stage_layers: self.last_stage_layers,
            cp: self.cp,
            dp: self.dp,
            gpus: self.gpus,
            zero: self.zero,
            micro_batch: self.micro_batch,
            recompute: self.recompute.clone(),
            framework: self.framework.clone(),
            dispatcher: self.dispatcher.clone(),
        }
    }

    /// What `grid --predict CARD --global-batch N` predicts the cells under: the flags'
    /// layout; without layout flags (`--tp`, `--ep`, `--pp`, `--vp`,
    /// `--first-stage-layers`, `--last-stage-layers`, `--cp`, `--dp`, `--gpus`, `--zero`,
    /// `--micro-batch`), the grid file's `[training]` when `file_layout`, else the defaults.
    pub fn grid_basis(&self, card: Card, file_layout: bool) -> anyhow::Result<StepBasis> {
        let Some(global_batch) = self.global_batch else {
            anyhow::bail!("--global-batch is required for a step prediction");
        };
        let layout = self.layout();
        let training = match (layout.degrees_given(), file_layout) {
            (true, true) => anyhow::bail!(
                "the grid file's [training] sets the layout; give it there or by the layout \
                 flags (--tp, --ep, --pp, --vp, --first-stage-layers, --last-stage-layers, --cp, \
                 --dp, --gpus, --zero, --micro-batch), not both"
            ),
            (true, false) => (Some(layout.training()?), LayoutSource::Flags),
            (false, true) => (None, LayoutSource::GridFile),
            (false, false) => (Some(layout.training()?), LayoutSource::Defaults),
        };
        Ok(layout.basis(card, training, global_batch)?)
    }

    /// The step report of `spec` on `card`.
    pub fn report(&self, spec: &ModelSpec, card: Card) -> anyhow::Result<StepReport> {
        let Some(global_batch) = self.global_batch else {
            anyhow::bail!("--global-batch is required for a step prediction");
        };
        Ok(self.layout().report(spec, card, global_batch)?)
    }
}
