//! `smelt predict --global-batch ...`: the training step of a parallel layout (the step
//! model, `smelt::time::step`).

use smelt::model::{ModelSpec, Training};
use smelt::study::{LayoutSource, StepBasis};
use smelt::time::Card;
use smelt::time::step::report::{StepReport, step_report};
use smelt::time::step::{Dispatcher, Framework, Recompute};

/// The largest parallel degree, GPU count or micro-batch a flag takes (the step model's
/// own bound on each degree and on their product).
const MAX_DEGREE: u64 = 1 << 20;

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
    #[arg(long, value_name = "SEQUENCES", value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
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
    /// The framework whose host cost applies: megatron-core or fsdp2.
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

    /// Whether any layout flag is given (`--tp`, `--ep`, `--pp`, `--vp`, `--first-stage-layers`,
    /// `--last-stage-layers`, `--cp`, `--dp`, `--gpus`, `--zero`, `--micro-batch`).
    pub fn layout_given(&self) -> bool {
        [
            self.tp,
            self.ep,
            self.pp,
            self.vp,
            self.first_stage_layers,
            self.last_stage_layers,
            self.cp,
            self.dp,
            self.gpus,
            self.zero,
            self.micro_batch,
        ]
        .iter()
        .any(Option::is_some)
    }

    /// The layout of the flags (1 where a flag is not given, ZeRO 1).
    pub fn training(&self) -> anyhow::Result<Training> {
        let one = |x: Option<u64>| x.unwrap_or(1);
        let (tp, pp, cp) = (one(self.tp), one(self.pp), one(self.cp));
        // Each degree is at most 2^20 (its parser), so these products fit in 128 bits.
        let model_parallel = u128::from(tp) * u128::from(pp) * u128::from(cp);
        let dp = match (self.dp, self.gpus) {
            (Some(dp), Some(g)) if u128::from(dp) * model_parallel != u128::from(g) => {
                anyhow::bail!(
                    "gpus: must equal tp · pp · cp · dp ({}); got {g}",
                    u128::from(dp) * model_parallel
                )
            }
            (Some(dp), _) => dp,
            (None, Some(g)) if u128::from(g) % model_parallel == 0 => {
                u64::try_from(u128::from(g) / model_parallel)?
            }
            (None, Some(g)) => anyhow::bail!(
                "gpus: must be a multiple of tp · pp · cp ({model_parallel}); got {g}"
            ),
            (None, None) => 1,
        };
        Ok(Training {
            tp,
            ep: one(self.ep),
            pp,
            dp,
            cp,
            vp: one(self.vp),
            first_stage_layers: self.first_stage_layers,
            last_stage_layers: self.last_stage_layers,
            zero: self.zero.unwrap_or(1),
            micro_batch: one(self.micro_batch),
            ..Training::default()
        })
    }

    /// `--framework` (default megatron-core).
    pub fn framework(&self) -> Framework {
        match self.framework.as_deref() {
            Some("fsdp2") => Framework::Fsdp2,
            _ => Framework::MegatronCore,
        }
    }

    /// `--dispatcher` (default alltoall).
    pub fn dispatcher(&self) -> Dispatcher {
        match self.dispatcher.as_deref() {
            Some("deepep") => Dispatcher::DeepEp,
            _ => Dispatcher::AllToAll,
        }
    }

    /// `--recompute` (default none).
    pub fn recompute(&self) -> Recompute {
        match self.recompute.as_deref() {
            Some("selective") => Recompute::Selective,
            Some("full") => Recompute::Full,
            _ => Recompute::None,
        }
    }

    /// What `grid --predict CARD --global-batch N` predicts the cells under: the flags'
    /// layout; without layout flags, the grid file's `[training]` when `file_layout`, else
    /// the defaults.
    pub fn grid_basis(&self, card: Card, file_layout: bool) -> anyhow::Result<StepBasis> {
        let Some(global_batch) = self.global_batch else {
            anyhow::bail!("--global-batch is required for a step prediction");
        };
        let layout = match (self.layout_given(), file_layout) {
            (true, true) => anyhow::bail!(
                "the grid file's [training] sets the layout; give it there or by the layout \
                 flags (--tp, --ep, --pp, --vp, --first-stage-layers, --last-stage-layers, --cp, \
                 --dp, --gpus, --zero, --micro-batch), not both"
            ),
            (true, false) => (Some(self.training()?), LayoutSource::Flags),
            (false, true) => (None, LayoutSource::GridFile),
            (false, false) => (Some(self.training()?), LayoutSource::Defaults),
        };
        Ok(StepBasis::new(
            card,
            layout,
            global_batch,
            self.recompute(),
            self.framework(),
            self.dispatcher(),
        )?)
    }

    /// The step report of `spec` on `card`.
    pub fn report(&self, spec: &ModelSpec, card: Card) -> anyhow::Result<StepReport> {
        let Some(global_batch) = self.global_batch else {
            anyhow::bail!("--global-batch is required for a step prediction");
        };
        let basis = StepBasis::new(
            card,
            (None, LayoutSource::Flags),
            global_batch,
            self.recompute(),
            self.framework(),
            self.dispatcher(),
        )?;
        let req = basis.request(spec, self.training()?);
        let megatron = smelt::launcher_flops::training_flops(
            smelt::launcher_flops::Convention::Megatron,
            spec,
        )
        .map(|f| f.as_f64())
        .map_err(|e| e.to_string());
        Ok(step_report(spec, &req, megatron)?)
    }
}
