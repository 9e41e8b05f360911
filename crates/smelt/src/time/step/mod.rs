//! The training step of a parallel run, per GPU: a model's GEMMs (their FLOPs from the
//! cost model, [`crate::cost::forward_flops`]), its fused (or unfused) attention, its routed
//! experts as grouped GEMMs at their rows per expert, the recurrent mixers of hybrid models
//! ([`mixers`]), its memory-bound kernels, the collectives of its layout ([`comm`]: TP with
//! sequence parallelism, EP all-to-all on NVLink inside the domain and the network across,
//! PP p2p and the 1F1B bubble, CP, the data-parallel gradient reduce-scatter and parameter
//! all-gather, once per step or per micro-batch under ZeRO 3), the optimizer step, gradient
//! accumulation, recomputation, and the host's launch time.
//!
//! # The model
//!
//! A step runs `m = global_batch / (micro_batch · dp)` micro-batches. One micro-batch on one
//! GPU (a stage of `L / pp` layers, or of the split `first_stage_layers` /
//! `last_stage_layers` give; `T = micro_batch · context / cp` tokens, `1/tp` of every GEMM
//! and attention head) takes on the GPU:
//!
//! * GEMMs (projections, the recurrent mixers' projections, router, shared and dense FFNs,
//!   indexer, LM head): their training FLOPs (3 x the cost model's forward count) at the
//!   card's best-shape share of the peak, plus
//!   [`super::kernels::KernelConstants::launch_seconds`] per launch;
//! * routed experts: their FLOPs at the best-shape share times `r / (r + r½)`, `r` the rows
//!   per expert (`T/tp · top_k · ep / experts`, balanced routing, as every published MoE
//!   row forces), `r½` the grouped-GEMM fit's;
//! * attention, on the layers with an attention block: fused, each pass's FLOPs (cuDNN's
//!   convention) at the fitted curve of the card (a card without measurements uses its
//!   generation's: H100 and H800 the H100's forward and the H200's backward, B300 the
//!   B200's, GB300 the GB200's); unfused (a model with attention sinks under Megatron-Core,
//!   which needs cuDNN ≥ 9.18 for them fused), the GEMMs of the whole square at the GEMM
//!   share plus 24 bytes per score through memory;
//! * recurrent mixers (Mamba-2, Gated DeltaNet): their chunked scan as a roofline of its
//!   FLOPs and its state traffic, and their convolution and gated norm through memory
//!   ([`mixers`]);
//! * memory-bound kernels (norms, residual adds, activations, RoPE, router softmax, the
//!   MoE input's noise, permute/unpermute, cross-entropy): their bytes ([`memory_bound_seconds`]'s) at the
//!   fitted share of HBM;
//! * TP, EP and PP communication, all exposed ([`comm`]);
//! * recompute: `selective` (norms and activations) adds their forward bytes, `full` a
//!   forward of everything;
//! * MTP modules (`model.mtp_layers`), under Megatron-Core, on the stage with the LM head
//!   (where Megatron-Core builds them): each one more layer execution of full attention
//!   and the last layer's FFN (its GEMMs from the cost model's count of the module,
//!   [`crate::cost::mtp_forward_flops`], its attention as a full-attention layer's, its
//!   memory-bound kernels and TP collectives those of a mean layer of the stage, its
//!   all-to-alls those of a mean MoE layer when its FFN is the MoE, and the host's time for
//!   a layer), then the LM head and the cross-entropy
//!   again. FSDP2 runs Transformers' modules, which build none: there they are not timed
//!   ([`StepPrediction::mtp_modules_not_run`]).
//!
//! The host issues the same micro-batch in `c · B / 2` seconds, `B` the stage's blocks (a
//! token mixer or an FFN: two per layer, one per one-block layer; [`blocks`]) and `c`,
//! seconds per layer execution per micro-batch, fitted per framework on the published runs
//! ([`HOST_SECONDS`]). Under ZeRO 3 each micro-batch also all-gathers and reduce-scatters
//! the parameters ([`comm`]). FSDP2 also copies, on the compute stream, each parameter of
//! the GPU's layers out of the all-gather buffer and each gradient into the reduce-scatter
//! buffer ([`comm::fsdp2_copies`]): GPU work. A micro-batch takes the longest of the three
//! (they overlap).
//! The step is `m` micro-batches, plus the 1F1B bubble `(pp − 1) / vp` micro-batches, plus
//! the optimizer step (30 bytes per parameter of the GPU's shard at the HBM share), plus
//! the distributed optimizer's reduce-scatter and all-gather beyond one micro-batch (the
//! rest overlaps the first forward and the last backward).
//!
//! A looped model's layer executions each count (every visit runs its kernels, its
//! collectives and its all-to-alls, and the host issues it; its weights, gradients and
//! optimizer state count once), and its loop sits on one pipeline stage, whose extra
//! executions make the stages uneven: [`looped`].

pub mod comm;
pub mod kernel_check;
pub mod looped;
pub mod mixers;
pub mod published;
pub mod report;
#[cfg(test)]
mod tests;

pub use comm::Dispatcher;

use serde::Serialize;

use super::card::Card;
use super::kernels::{AttentionCurve, AttentionKernel, AttentionPass, Dtype, SHIPPED};
use super::system::SystemSpec;
use crate::cost::{self, FlopBreakdown};
use crate::error::{Error, Result};
use crate::model::{Counting, ModelSpec, Training};

/// The training framework: its host cost per layer ([`HOST_SECONDS`]) and what it runs
/// differ (FSDP2 copies parameters and gradients, [`MicroBatch::fsdp_copies`], and runs no
/// MTP module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// Megatron-Core (Megatron-LM, Megatron-Bridge, NeMo).
    MegatronCore,
    /// PyTorch FSDP2 with Transformers modules (NeMo AutoModel).
    Fsdp2,
}

/// Host seconds per layer execution per micro-batch (forward and backward; a layer is a
/// token mixer and an FFN, a one-block layer counts half: [`blocks`] / 2), per framework:
/// fitted on the published runs ([`published::fit_host`]), 1 ms steps.
pub const HOST_SECONDS: [(Framework, f64); 2] =
    [(Framework::MegatronCore, 13e-3), (Framework::Fsdp2, 28e-3)];

/// Activation recomputation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recompute {
    /// None.
    None,
    /// Norms and activations recomputed.
    Selective,
    /// Every layer's forward recomputed.
    Full,
}

/// How the attention core runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionImpl {
    /// A fused kernel (cuDNN, FlashAttention).
    Fused,
    /// Scores through memory.
    Unfused,
}

/// What a step is predicted for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepRequest {
    /// The card.
    pub card: Card,
    /// Its system.
    pub system: SystemSpec,
    /// The layout (tp, ep, pp, dp, cp, vp, micro_batch).
    pub training: Training,
    /// Sequences per optimizer step.
    pub global_batch: u64,
    /// Recomputation.
    pub recompute: Recompute,
    /// Framework.
    pub framework: Framework,
    /// Attention kernel.
    pub attention: AttentionImpl,
    /// How the routed experts' tokens are exchanged.
    pub dispatcher: Dispatcher,
}

/// Seconds of one micro-batch on one GPU, by what takes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct MicroBatch {
    /// GEMMs other than the routed experts' (LM head included).
    pub gemm: f64,
    /// Routed experts' grouped GEMMs.
    pub experts: f64,
    /// Attention core.
    pub attention: f64,
    /// Recurrent mixers' scans and memory-bound kernels (hybrid models; their projections
    /// are in `gemm`).
    pub recurrent: f64,
    /// Memory-bound kernels.
    pub memory_bound: f64,
    /// Recomputed forward work.
    pub recompute: f64,
    /// TP collectives.
    pub tp_comm: f64,
    /// EP all-to-alls.
    pub ep_comm: f64,
    /// PP p2p.
    pub pp_comm: f64,
    /// ZeRO 3's parameter all-gathers and gradient reduce-scatters, overlapped with the
    /// micro-batch's work.
    pub fsdp_comm: f64,
    /// FSDP2's copies on the compute stream: each gathered parameter out of the all-gather
    /// buffer (`foreach_all_gather_copy_out`, in the forward and again in the backward
    /// under ZeRO 3), and each gradient into the reduce-scatter buffer in the reduce dtype
    /// (`foreach_reduce_scatter_copy_in`); 0 under Megatron-Core, whose parameters and
    /// gradients live in the buffers the collectives use.
    pub fsdp_copies: f64,
    /// The GPU's total (without `fsdp_comm`).
    pub gpu: f64,
    /// The host's time to issue it.
    pub host: f64,
}

impl MicroBatch {
    /// The micro-batch with `gpu` the sum of its GPU parts (`fsdp_comm` overlaps them).
    pub(super) fn summed(self) -> Self {
        let gpu = [
            self.gemm,
            self.experts,
            self.attention,
            self.recurrent,
            self.memory_bound,
            self.recompute,
            self.fsdp_copies,
            self.tp_comm,
            self.ep_comm,
            self.pp_comm,
        ]
        .iter()
        .sum();
        Self { gpu, ..self }
    }
}

/// A predicted step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepPrediction {
    /// The request.
    pub request: StepRequest,
    /// GPUs of the layout.
    pub gpus: u64,
    /// Micro-batches per step per pipeline.
    pub micro_batches: u64,
    /// Rows per expert per grouped GEMM (0 without routed experts).
    pub rows_per_expert: f64,
    /// One micro-batch.
    pub micro_batch: MicroBatch,
    /// Whether the host (not the GPU or ZeRO 3's traffic) bounds a micro-batch.
    pub host_bound: bool,
    /// Pipeline bubble, seconds.
    pub bubble: f64,
    /// Optimizer step, seconds.
    pub optimizer: f64,
    /// Exposed data-parallel communication, seconds.
    pub dp_comm: f64,
    /// Seconds per step.
    pub step_seconds: f64,
    /// Tokens per second per GPU.
    pub tokens_per_second_per_gpu: f64,
    /// The model's MTP modules timed, on the stage with the LM head (Megatron-Core runs
    /// them there).
    pub mtp_modules: u64,
    /// The model's MTP modules the framework does not run (FSDP2 with Transformers'
    /// modules, which build none).
    pub mtp_modules_not_run: u64,
    /// Layers per stage of the mean stage timed when `pp · vp` does not divide an unlooped
    /// model's layers and the layout gives no uneven split: a split no launcher builds as
    /// such (Megatron-Core needs `--decoder-first/last-pipeline-num-layers` or its
    /// account-for-embedding/loss flags), so the step is that of the mean stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_stage_layers: Option<f64>,
    /// A looped model's placement on the pipeline and its stages' times ([`looped`]);
    /// `micro_batch` is then its slowest stage's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<looped::Pipeline>,
}

/// The attention curve the step model uses for `card` and `pass` (module docs).
pub fn attention_curve(card: Card, pass: AttentionPass) -> Option<&'static AttentionCurve> {
    let source = match (card, pass) {
        (Card::H100Sxm | Card::H800, AttentionPass::Forward) => Card::H100Sxm,
        (Card::H100Sxm | Card::H800, _) => Card::H200Sxm,
        (Card::B300, _) => Card::B200,
        (Card::Gb300, _) => Card::Gb200,
        (c, _) => c,
    };
    SHIPPED
        .attention
        .iter()
        .find(|a| a.card == source && a.kernel == AttentionKernel::Cudnn && a.pass == pass)
}

/// The card's best-shape bf16 GEMM share (its generation's where it has no row: H200 and
/// H800 the H100's, GB300 the GB200's).
pub fn gemm_share(card: Card) -> Option<f64> {
    let source = match card {
        Card::H200Sxm | Card::H800 => Card::H100Sxm,
        Card::Gb300 => Card::Gb200,
        c => c,
    };
    SHIPPED
        .gemm
        .iter()
        .find(|g| g.card == source && g.dtype == Dtype::Bf16)
        .map(|g| g.share)
}

fn refuse(field: &str, why: impl Into<String>) -> Error {
    Error::invalid(field, why)
}

/// Largest accepted parallel degree or micro-batch.
const MAX_DEGREE: u64 = 1 << 20;

/// The layout's rules for the step model: every degree from 1 to 2^20, the GPUs' product
/// without overflow, expert tensor parallelism 1 (the only one it times), virtual stages
/// only with pipeline stages, and `ep`
/// dividing `tp · dp · cp` (Megatron-Core with expert tensor parallelism 1 draws the
/// expert-parallel group from the tensor-, data- and context-parallel ranks of a pipeline
/// stage; the training-memory check asks the same of `etp · ep`).
pub fn validate_layout(t: &Training) -> Result<()> {
    for (name, v) in [
        ("training.tp", t.tp),
        ("training.ep", t.ep),
        ("training.pp", t.pp),
        ("training.dp", t.dp),
        ("training.cp", t.cp),
        ("training.vp", t.vp),
        ("training.micro_batch", t.micro_batch),
    ] {
        if !(1..=MAX_DEGREE).contains(&v) {
            return Err(refuse(name, format!("must be 1 to {MAX_DEGREE}; got {v}")));
        }
    }
    let gpus = [t.tp, t.pp, t.dp, t.cp]
        .iter()
        .try_fold(1u64, |a, &b| a.checked_mul(b))
        .filter(|&g| g <= MAX_DEGREE)
        .ok_or_else(|| {
            refuse(
                "training",
                format!("tp · pp · dp · cp must be at most {MAX_DEGREE}"),
            )
        })?;
    if t.etp() != 1 {
        return Err(refuse(
            "training.etp",
            format!(
                "the step model times expert tensor parallelism 1 only (the routed experts \
                 split by ep alone); got {}: set etp = 1 or leave it out",
                t.etp()
            ),
        ));
    }
    if t.vp > 1 && t.pp == 1 {
        return Err(refuse(
            "training.vp",
            format!(
                "virtual pipeline stages need pipeline parallelism (pp > 1); got vp = {} with \
                 pp = 1",
                t.vp
            ),
        ));
    }
    let pool = gpus / t.pp;
    if !pool.is_multiple_of(t.ep) {
        return Err(refuse(
            "training.ep",
            format!("must divide tp · dp · cp ({pool}); got {}", t.ep),
        ));
    }
    Ok(())
}

/// The shipped host seconds per layer execution per micro-batch of `framework`.
pub fn host_seconds(framework: Framework) -> f64 {
    HOST_SECONDS
        .iter()
        .find(|(f, _)| *f == framework)
        .map_or(0.0, |(_, c)| *c)
}

/// Predicts one training step of `spec` (its `workload.context` is the sequence length).
pub fn predict_step(spec: &ModelSpec, req: &StepRequest) -> Result<StepPrediction> {
    predict_step_host(spec, req, host_seconds(req.framework))
}

/// The model's forward FLOPs per token by component, and its parameters `(dense, routed
/// experts)` with the embedding and the LM head, from the cost model.
fn counts(spec: &ModelSpec) -> Result<(FlopBreakdown, f64, f64)> {
    let m = &spec.model;
    let counting = Counting {
        embeddings: true,
        lm_head: true,
        ..Counting::default()
    };
    let flops = cost::forward_flops(m, &spec.workload, &Counting::default())?;
    let (params, _) = cost::params(m, &counting)?;
    let total = params.total()?.as_f64();
    let experts = params.experts.as_f64();
    Ok((flops, total - experts, experts))
}

/// Blocks (token mixers and FFNs) of the model's layers: two per layer, one per one-block
/// layer.
pub fn blocks(m: &crate::model::Model) -> u64 {
    (2 * m.layers).saturating_sub((m.mixer_only().len() + m.ffn_only().len()) as u64)
}

/// [`predict_step`] with `host_per_layer` seconds of host time per layer execution per
/// micro-batch.
pub fn predict_step_host(
    spec: &ModelSpec,
    req: &StepRequest,
    host_per_layer: f64,
) -> Result<StepPrediction> {
    let t = &req.training;
    let (share, fwd, bwd, micro_batches) = checked(spec, req)?;
    let (flops, dense_params, expert_params) = counts(spec)?;
    // The layers as they execute (a loop's visits each a layer): what every count per layer
    // below counts. Parameters and FLOPs are the model's own (above).
    let unrolled = looped::unrolled(spec);
    let m = &unrolled.model;
    let card = req.card;
    let spec_c = card.spec();
    let mbs = t.micro_batch;
    let seq = spec.workload.context;
    let (tp, cp, pp, ep) = (t.tp as f64, t.cp as f64, t.pp as f64, t.ep as f64);
    let split = tp * cp * pp;
    let peak = spec_c.peak_flops_per_second;
    let hbm = spec_c.memory_bytes_per_second * SHIPPED.memory_share;
    let launch = SHIPPED.launch_seconds;
    let (h, v, layers) = (m.hidden as f64, m.vocab as f64, m.layers as f64);
    let stage_layers = layers / pp;
    let stage_blocks = blocks(m) as f64 / pp;
    let tokens = (mbs * seq) as f64 / cp;
    // Training FLOPs of this GPU's share of the micro-batch's `mbs · seq` tokens.
    let gpu_flops = |forward_per_token: f64| 3.0 * forward_per_token * (mbs * seq) as f64 / split;
    // GEMMs other than the experts' (the recurrent mixers' projections included), and the
    // LM head (on the last stage).
    let other = gemm_flops(&flops);
    let lm_head = 6.0 * h * v * tokens / tp;
    // What only dense-FFN layers and only MoE layers run, for a stage that holds more or
    // fewer of them than the mean stage.
    let kind_gemms = looped::KindGemms {
        dense: gpu_flops(flops.dense.as_f64()) / (share * peak),
        moe: gpu_flops(
            flops.router.as_f64() + flops.shared.as_f64() + flops.latent_projections.as_f64(),
        ) / (share * peak),
    };
    let gemm = (gpu_flops(other) + lm_head) / (share * peak) + 18.0 * stage_layers * launch;
    // Routed experts.
    let experts_flops = gpu_flops(flops.experts.as_f64());
    let (e, k) = (m.moe.experts as f64, m.moe.top_k as f64);
    let rows = if e > 0.0 {
        tokens / tp * k * ep / e
    } else {
        0.0
    };
    let expert_eff = share * SHIPPED.grouped.share(rows) / SHIPPED.grouped.max_share;
    let experts = if experts_flops > 0.0 {
        experts_flops / (expert_eff * peak) + 9.0 * stage_layers * launch
    } else {
        0.0
    };
    let attention = attention_seconds(&unrolled, req, fwd, bwd, share * peak, hbm);
    let recurrent = mixers::seconds(
        m,
        gpu_flops(flops.recurrent_core.as_f64()),
        tokens / tp,
        m.recurrent_layers() as f64 / pp,
        share * peak,
        hbm,
    );
    let memory_bound = memory_bound_seconds(m, tokens / tp, pp, hbm);
    let sys = &req.system;
    let moe_layers = m.moe_layers() as f64 / pp;
    let (tp_comm, ep_comm, pp_comm) =
        comm::collectives(m, t, sys, req.dispatcher, tokens, stage_blocks, moe_layers);
    let host = host_per_layer * stage_blocks / 2.0;
    let (optimizer, fsdp, dp_step) = comm::data_parallel(t, sys, hbm, dense_params, expert_params);
    // Under ZeRO 3 each execution of a layer gathers again (a loop's visits each copy);
    // below it a stage's parameters are copied once per step.
    let copies_per_layer = match t.zero >= 3 {
        true => m.layers as f64 / spec.model.layers as f64,
        false => 1.0,
    };
    let fsdp_copies = match req.framework {
        Framework::Fsdp2 => {
            let params = (dense_params, expert_params);
            comm::fsdp2_copies(t, hbm, params, micro_batches) * copies_per_layer
        }
        Framework::MegatronCore => 0.0,
    };
    // What the stage with the LM head runs and no other: the LM head's GEMMs, the
    // cross-entropy, and under Megatron-Core the MTP modules (each one more layer execution
    // of full attention and the last layer's FFN, its projection, and the head and cross-entropy again).
    // Vocabulary-parallel: each of the TP group's GPUs holds `V / tp` logits per token.
    let cross_entropy = 20.0 * v * tokens / tp / hbm;
    let mtp_modules = match req.framework {
        Framework::MegatronCore => spec.model.mtp_layers,
        Framework::Fsdp2 => 0,
    };
    let mut head = MicroBatch {
        gemm: lm_head / (share * peak),
        memory_bound: cross_entropy,
        ..MicroBatch::default()
    };
    if mtp_modules > 0 {
        let n = mtp_modules as f64;
        let f = cost::mtp_forward_flops(&spec.model, &spec.workload)?;
        let per = |total: f64, count: f64| if count > 0.0 { total / count } else { 0.0 };
        // The modules run whole on one stage: this GPU's share is `1 / (tp · cp)` of them.
        let module_flops = |forward_per_token: f64| gpu_flops(forward_per_token) * pp;
        head.gemm +=
            (module_flops(gemm_flops(&f)) + n * lm_head) / (share * peak) + 18.0 * n * launch;
        head.experts = if f.experts.as_f64() > 0.0 {
            module_flops(f.experts.as_f64()) / (expert_eff * peak) + 9.0 * n * launch
        } else {
            0.0
        };
        head.attention =
            n * attention_layer_seconds(&unrolled, req, fwd, bwd, share * peak, hbm, None);
        head.memory_bound +=
            n * (2.0 * per(memory_bound - cross_entropy, stage_blocks) + cross_entropy);
        head.tp_comm = 2.0 * n * per(tp_comm, stage_blocks);
        head.ep_comm = match f.experts.as_f64() > 0.0 {
            true => n * per(ep_comm, moe_layers),
            false => 0.0,
        };
        head.host = host_per_layer * n;
    }
    let mean = MicroBatch {
        gemm: gemm + (head.gemm - lm_head / (share * peak)),
        experts: experts + head.experts,
        attention: attention + head.attention,
        recurrent,
        memory_bound: memory_bound + (head.memory_bound - cross_entropy),
        recompute: 0.0,
        tp_comm: tp_comm + head.tp_comm,
        ep_comm: ep_comm + head.ep_comm,
        pp_comm,
        fsdp_comm: fsdp,
        fsdp_copies,
        gpu: 0.0,
        host: host + head.host,
    };
    let mean = MicroBatch {
        recompute: recompute_seconds(
            req.recompute,
            [mean.gemm, mean.experts, mean.attention, recurrent],
            mean.memory_bound,
        ),
        ..mean
    }
    .summed();
    let looped::Staged {
        micro_batch,
        micro,
        bubble,
        pipeline,
    } = looped::stages_of(
        &spec.model,
        t,
        mean,
        (&head, req.recompute),
        kind_gemms,
        micro_batches,
    )?;
    let dp_comm = (dp_step - micro).max(0.0);
    let steps = micro_batches as f64;
    let step_seconds = steps * micro + bubble + optimizer + dp_comm;
    let gpus = t.gpus();
    let tokens_per_second_per_gpu =
        req.global_batch as f64 * seq as f64 / step_seconds / gpus as f64;
    Ok(StepPrediction {
        request: *req,
        gpus,
        micro_batches,
        rows_per_expert: rows,
        micro_batch,
        host_bound: micro_batch.host > micro_batch.gpu && micro_batch.host >= fsdp,
        bubble,
        optimizer,
        dp_comm,
        step_seconds,
        tokens_per_second_per_gpu,
        mtp_modules,
        mtp_modules_not_run: spec.model.mtp_layers - mtp_modules,
        mean_stage_layers: (pipeline.is_none()
            && t.pp > 1
            && !spec.model.layers.is_multiple_of(t.pp.saturating_mul(t.vp)))
        .then(|| spec.model.layers as f64 / t.pp as f64),
        pipeline,
    })
}

/// Forward FLOPs per token that run as GEMMs other than the routed experts' (projections,
/// recurrent mixers' projections, router, shared and dense FFNs, indexer, LatentMoE's
/// projections), without the LM head.
fn gemm_flops(f: &FlopBreakdown) -> f64 {
    [
        f.projections,
        f.router,
        f.shared,
        f.dense,
        f.indexer,
        f.recurrent_projections,
        f.latent_projections,
    ]
    .iter()
    .map(|x| x.as_f64())
    .sum()
}

/// Seconds of recomputed forward work in a micro-batch of these GEMM, grouped-GEMM,
/// attention and recurrent-mixer seconds and memory-bound seconds (module docs).
fn recompute_seconds(recompute: Recompute, compute: [f64; 4], memory_bound: f64) -> f64 {
    let [gemm, experts, attention, recurrent] = compute;
    match recompute {
        Recompute::None => 0.0,
        Recompute::Selective => 0.25 * memory_bound,
        Recompute::Full => (gemm + experts + attention + recurrent) / 3.0 + 0.4 * memory_bound,
    }
}

/// Seconds of one micro-batch's attention on one GPU (module docs).
fn attention_seconds(
    spec: &ModelSpec,
    req: &StepRequest,
    fwd: &AttentionCurve,
    bwd: &AttentionCurve,
    gemm_flops_per_second: f64,
    hbm: f64,
) -> f64 {
    let m = &spec.model;
    // Attention runs on the layers with an attention block (not recurrent, not FFN-only).
    let layers = m.attention_layers() as f64;
    let windowed = m.windowed_layers() as f64;
    let size = m.window.as_ref().map(|w| w.size as f64);
    let mut attention = 0.0;
    for (count, window) in [(layers - windowed, None), (windowed, size)] {
        if count <= 0.0 {
            continue;
        }
        let per_layer =
            attention_layer_seconds(spec, req, fwd, bwd, gemm_flops_per_second, hbm, window);
        attention += per_layer * count / req.training.pp as f64;
    }
    attention
}

/// Seconds of one layer's attention core in one micro-batch on one GPU, attending over the
/// whole causal prefix (`window` `None`) or a sliding window of that many keys.
fn attention_layer_seconds(
    spec: &ModelSpec,
    req: &StepRequest,
    fwd: &AttentionCurve,
    bwd: &AttentionCurve,
    gemm_flops_per_second: f64,
    hbm: f64,
    window: Option<f64>,
) -> f64 {
    let (m, t) = (&spec.model, &req.training);
    let (tp, cp) = (t.tp as f64, t.cp as f64);
    let (mbs, seq) = (t.micro_batch, spec.workload.context);
    let (heads, d) = (m.heads as f64, m.head_dim as f64);
    let s = seq as f64;
    let se = match window {
        Some(w) if w < s => (w * (w + 1.0) / 2.0 + (s - w) * w) / s,
        _ => (s + 1.0) / 2.0,
    };
    match req.attention {
        AttentionImpl::Fused => {
            let nnz = mbs as f64 * s * se / cp;
            let (ff, fb) = (
                2.0 * nnz * 2.0 * d * heads / tp,
                2.0 * nnz * 5.0 * d * heads / tp,
            );
            ff / (fwd.tflops_at(se, d) * 1e12) + fb / (bwd.tflops_at(se, d) * 1e12)
        }
        AttentionImpl::Unfused => {
            let scores = mbs as f64 * s * s * heads / tp / cp;
            3.0 * 4.0 * scores * d / gemm_flops_per_second + 24.0 * scores / hbm
        }
    }
}

/// The checks of a request, and what they find: the card's GEMM share, its attention
/// curves and the micro-batches per step.
fn checked(
    spec: &ModelSpec,
    req: &StepRequest,
) -> Result<(f64, &'static AttentionCurve, &'static AttentionCurve, u64)> {
    let (m, t) = (&spec.model, &req.training);
    validate_layout(t)?;
    if t.pp > m.layers {
        return Err(refuse(
            "training.pp",
            format!(
                "must be at most the model's {} layers (each stage holds at least one); got {}",
                m.layers, t.pp
            ),
        ));
    }
    if m.moe_layers() > 0 && !m.moe.experts.is_multiple_of(t.ep) {
        return Err(refuse(
            "training.ep",
            format!(
                "must divide the model's routed experts ({}): each expert-parallel rank holds \
                 experts / ep of them; got {}",
                m.moe.experts, t.ep
            ),
        ));
    }
    if m.full_attention.is_some() {
        return Err(refuse(
            "model.full_attention",
            "full-attention layers of their own shape are not timed by the step model",
        ));
    }
    if !m.heads.is_multiple_of(t.tp)
        || !m.kv_heads.is_multiple_of(t.tp) && !t.tp.is_multiple_of(m.kv_heads.max(1))
    {
        return Err(refuse(
            "training.tp",
            format!("must divide the model's heads ({}); got {}", m.heads, t.tp),
        ));
    }
    let card = req.card;
    let share = gemm_share(card).ok_or_else(|| {
        refuse(
            "card",
            format!("{card} has no published best-shape GEMM row"),
        )
    })?;
    let (fwd, bwd) = match (
        attention_curve(card, AttentionPass::Forward),
        attention_curve(card, AttentionPass::Backward),
    ) {
        (Some(f), Some(b)) => (f, b),
        _ => {
            return Err(refuse(
                "card",
                format!("{card} has no published fused attention rows"),
            ));
        }
    };
    let mbs = t.micro_batch;
    let per_step = mbs * t.dp;
    if req.global_batch == 0 || !req.global_batch.is_multiple_of(per_step) {
        return Err(refuse(
            "global_batch",
            format!(
                "must be a positive multiple of micro_batch · dp ({per_step}); got {}",
                req.global_batch
            ),
        ));
    }
    let micro_batches = req.global_batch / per_step;
    if t.pp > 1 && micro_batches < t.pp {
        return Err(refuse(
            "global_batch",
            format!(
                "gives {micro_batches} micro-batches, fewer than the {} pipeline stages",
                t.pp
            ),
        ));
    }
    Ok((share, fwd, bwd, micro_batches))
}

/// Seconds of one micro-batch's memory-bound kernels on one GPU, `tokens` its tokens per
/// layer, over `pp` stages.
pub fn memory_bound_seconds(m: &crate::model::Model, tokens: f64, pp: f64, hbm: f64) -> f64 {
    let (h, v, d) = (m.hidden as f64, m.vocab as f64, m.head_dim as f64);
    let (e, k, fe) = (
        m.moe.experts as f64,
        m.moe.top_k as f64,
        m.moe.expert_ffn as f64,
    );
    // Memory-bound kernels, bytes per token (bf16): per block (token mixer or FFN) its norm
    // 10h and residual add 6h; per attention block RoPE 8 per q/k column; per MoE block
    // activations 16 per FFN column (routed and shared), permute/unpermute 8h + 8w·top_k
    // (`w` the experts' width: LatentMoE's latent, else h), the router 12 per expert, and
    // with input noise (`jitter`) its draw and product 14h (one draw, as Megatron-Core's
    // router makes it); per dense FFN 16 per column; cross-entropy 20 per logit.
    let w = m.moe.expert_width(m.hidden) as f64;
    let ffn_cols = k * fe + (m.moe.shared_experts * m.moe.shared_ffn) as f64;
    let qk_cols = (m.heads + m.kv_heads) as f64 * d;
    let moe_bytes = if e > 0.0 {
        let noise = if m.moe.jitter.is_some() {
            14.0 * h
        } else {
            0.0
        };
        16.0 * ffn_cols + 8.0 * (h + w * k) + 12.0 * e + noise
    } else {
        0.0
    };
    let dense_ffn = m.dense.as_ref().map_or(0.0, |dn| dn.ffn as f64);
    let bytes = 16.0 * h * blocks(m) as f64
        + 8.0 * qk_cols * m.attention_layers() as f64
        + moe_bytes * m.moe_layers() as f64
        + 16.0 * dense_ffn * m.dense_layers() as f64;
    (bytes / pp + 20.0 * v) * tokens / hbm
}
