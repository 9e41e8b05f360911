//! The training step of a parallel run, per GPU: a model's GEMMs (from the kernel plan),
//! its fused (or unfused) attention, its routed experts as grouped GEMMs at their rows per
//! expert, its memory-bound kernels, the collectives of its layout (TP with sequence
//! parallelism, EP all-to-all on NVLink inside the domain and the network across, PP p2p and
//! the 1F1B bubble, CP, the data-parallel gradient reduce-scatter and parameter all-gather),
//! the optimizer step, gradient accumulation, recomputation, and the host's launch time.
//!
//! # The model
//!
//! A step runs `m = global_batch / (micro_batch · dp)` micro-batches. One micro-batch on one
//! GPU (a stage of `L / pp` layers, `T = micro_batch · context / cp` tokens, `1/tp` of every
//! GEMM and attention head) takes on the GPU:
//!
//! * GEMMs (projections, router, shared and dense FFNs, indexer, LM head): their FLOPs at
//!   the card's best-shape share of the peak, plus [`super::kernels::KernelConstants::launch_seconds`]
//!   per launch;
//! * routed experts: their FLOPs at the best-shape share times `r / (r + r½)`, `r` the rows
//!   per expert (`T/tp · top_k · ep / experts`, balanced routing, as every published MoE
//!   row forces), `r½` the grouped-GEMM fit's;
//! * attention: fused, each pass's FLOPs (cuDNN's convention) at the fitted curve of the
//!   card (a card without measurements uses its generation's: H100 and H800 the H100's
//!   forward and the H200's backward, B300 the B200's, GB300 the GB200's); unfused (a model
//!   with attention sinks under Megatron-Core, which needs cuDNN ≥ 9.18 for them fused),
//!   the GEMMs of the whole square at the GEMM share plus 24 bytes per score through memory;
//! * memory-bound kernels (norms, residual adds, activations, RoPE, router softmax,
//!   permute/unpermute, cross-entropy): their bytes (below) at the fitted share of HBM;
//! * TP: 8 all-gathers/reduce-scatters of `T · hidden` bf16 per layer (forward and
//!   backward); EP: 4 all-to-alls of `T/tp · top_k · hidden` bf16 per MoE layer; PP: one
//!   activation sent and one gradient received per micro-batch; all exposed;
//! * recompute: `selective` (norms and activations) adds their forward bytes, `full` a
//!   forward of everything.
//!
//! The host issues the same micro-batch in `c · L/pp` seconds (`c`, seconds per layer
//! execution per micro-batch, fitted per framework on the published runs:
//! [`HOST_SECONDS`]); a micro-batch takes the larger of the two (host and GPU overlap). The
//! step is `m` micro-batches, plus the 1F1B bubble `(pp − 1) / vp` micro-batches, plus the
//! optimizer step (30 bytes per parameter of the GPU's shard at the HBM share), plus the
//! data-parallel reduce-scatter and all-gather that do not overlap the first forward and
//! last backward micro-batch.
//!
//! A looped model's layer executions each count (every visit runs its kernels, its
//! collectives and its all-to-alls; its weights, gradients and optimizer state count
//! once), and its loop sits on one pipeline stage, whose extra executions make the stages
//! uneven: [`looped`].

pub mod kernel_check;
pub mod looped;
pub mod published;
pub mod report;

use serde::Serialize;

use super::card::Card;
use super::kernels::{AttentionCurve, AttentionKernel, AttentionPass, Dtype, SHIPPED};
use super::system::SystemSpec;
use crate::error::{Error, Result};
use crate::model::{ModelSpec, Training};
use crate::plan::{self, Component, Routing};

/// The training framework, whose host cost per layer differs ([`HOST_SECONDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// Megatron-Core (Megatron-LM, Megatron-Bridge, NeMo).
    MegatronCore,
    /// PyTorch FSDP2 with Transformers modules (NeMo AutoModel).
    Fsdp2,
}

/// Host seconds per layer execution per micro-batch (forward and backward), per framework:
/// fitted on the published runs ([`published::fit_host`]), 1 ms steps.
pub const HOST_SECONDS: [(Framework, f64); 2] =
    [(Framework::MegatronCore, 10e-3), (Framework::Fsdp2, 28e-3)];

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
    /// The GPU's total.
    pub gpu: f64,
    /// The host's time to issue it.
    pub host: f64,
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
    /// Whether the host (not the GPU) bounds a micro-batch.
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
/// without overflow, and `ep` dividing `tp · dp · cp` (Megatron-Core with expert tensor
/// parallelism 1 draws the expert-parallel group from the tensor-, data- and
/// context-parallel ranks; the training-memory check, stricter, asks `ep` to divide
/// `dp · cp` and says so in its verdict).
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

/// [`predict_step`] with `host_per_layer` seconds of host time per layer execution per
/// micro-batch.
pub fn predict_step_host(
    spec: &ModelSpec,
    req: &StepRequest,
    host_per_layer: f64,
) -> Result<StepPrediction> {
    let m = &spec.model;
    let t = &req.training;
    let (share, fwd, bwd, micro_batches) = checked(spec, req)?;
    let card = req.card;
    let spec_c = card.spec();
    let mbs = t.micro_batch;
    let seq = spec.workload.context;
    let docs = vec![seq; mbs as usize];
    let p = plan::plan(m, &docs, spec.workload.attention, Routing::Balanced)?;
    let (tp, cp, pp, ep) = (t.tp as f64, t.cp as f64, t.pp as f64, t.ep as f64);
    let split = tp * cp * pp;
    let peak = spec_c.peak_flops_per_second;
    let hbm = spec_c.memory_bytes_per_second * SHIPPED.memory_share;
    let launch = SHIPPED.launch_seconds;
    // Layer executions (the physical layers without a loop; a loop's visits each count).
    let (h, v, layers) = (m.hidden as f64, m.vocab as f64, m.executions() as f64);
    let stage_layers = layers / pp;
    let tokens = (mbs * seq) as f64 / cp;
    // GEMMs other than the experts', and the LM head (on the last stage).
    let other: u128 = [
        Component::Projections,
        Component::Router,
        Component::Shared,
        Component::Dense,
        Component::Indexer,
    ]
    .iter()
    .map(|&c| p.component_flops(c))
    .sum();
    let lm_head = 6.0 * h * v * tokens / tp;
    let gemm = (other as f64 / split + lm_head) / (share * peak) + 18.0 * stage_layers * launch;
    // Routed experts.
    let experts_flops = p.component_flops(Component::Experts) as f64 / split;
    let (e, k) = (m.moe.experts as f64, m.moe.top_k as f64);
    let rows = if e > 0.0 {
        tokens / tp * k * ep / e
    } else {
        0.0
    };
    let experts = if experts_flops > 0.0 {
        let eff = share * SHIPPED.grouped.share(rows) / SHIPPED.grouped.max_share;
        experts_flops / (eff * peak) + 9.0 * stage_layers * launch
    } else {
        0.0
    };
    let attention = attention_seconds(spec, req, fwd, bwd, share * peak, hbm);
    let memory_bound = memory_bound_seconds(m, tokens / tp, stage_layers, hbm);
    let recompute = recompute_seconds(req.recompute, gemm, experts, attention, memory_bound);
    let sys = &req.system;
    let (tp_comm, ep_comm, pp_comm) = collectives(m, t, sys, tokens, stage_layers);
    let gpu = gemm + experts + attention + memory_bound + recompute + tp_comm + ep_comm + pp_comm;
    let host = host_per_layer * stage_layers;
    let mean = MicroBatch {
        gemm,
        experts,
        attention,
        memory_bound,
        recompute,
        tp_comm,
        ep_comm,
        pp_comm,
        gpu,
        host,
    };
    // The LM head's GEMMs and the cross-entropy, which do not scale with a stage's layer
    // executions.
    let fixed = (
        lm_head / (share * peak),
        20.0 * v * tokens / hbm,
        req.recompute,
    );
    let looped::Staged {
        micro_batch,
        micro,
        bubble,
        pipeline,
    } = looped::stages_of(m, t, mean, fixed, micro_batches)?;
    let (optimizer, dp_comm) = optimizer_and_dp(m, t, sys, hbm, micro);
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
        host_bound: micro_batch.host > micro_batch.gpu,
        bubble,
        optimizer,
        dp_comm,
        step_seconds,
        tokens_per_second_per_gpu,
        pipeline,
    })
}

/// Seconds of recomputed forward work in a micro-batch of these GEMM, grouped-GEMM,
/// attention and memory-bound seconds (module docs).
fn recompute_seconds(
    recompute: Recompute,
    gemm: f64,
    experts: f64,
    attention: f64,
    memory_bound: f64,
) -> f64 {
    match recompute {
        Recompute::None => 0.0,
        Recompute::Selective => 0.25 * memory_bound,
        Recompute::Full => (gemm + experts + attention) / 3.0 + 0.4 * memory_bound,
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
    let (m, t) = (&spec.model, &req.training);
    let (tp, cp, pp) = (t.tp as f64, t.cp as f64, t.pp as f64);
    // Layer executions (a loop's visits each count).
    let (mbs, seq, layers) = (t.micro_batch, spec.workload.context, m.executions() as f64);
    let (share, peak) = (1.0, gemm_flops_per_second);
    let (heads, d) = (m.heads as f64, m.head_dim as f64);
    let windowed = m.window.as_ref().map_or(0, |w| m.executions_of(&w.layers)) as f64;
    let size = m.window.as_ref().map(|w| w.size as f64);
    let s = seq as f64;
    let seff = |w: Option<f64>| match w {
        Some(w) if w < s => (w * (w + 1.0) / 2.0 + (s - w) * w) / s,
        _ => (s + 1.0) / 2.0,
    };
    let mut attention = 0.0;
    for (count, se) in [(layers - windowed, seff(None)), (windowed, seff(size))] {
        if count <= 0.0 {
            continue;
        }
        let per_layer = match req.attention {
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
                3.0 * 4.0 * scores * d / (share * peak) + 24.0 * scores / hbm
            }
        };
        attention += per_layer * count / pp;
    }
    attention
}

/// Seconds of one micro-batch's TP, EP and PP communication on one GPU (module docs).
fn collectives(
    m: &crate::model::Model,
    t: &Training,
    sys: &SystemSpec,
    tokens: f64,
    stage_layers: f64,
) -> (f64, f64, f64) {
    let (tp, pp, ep) = (t.tp as f64, t.pp as f64, t.ep as f64);
    let (h, e, k) = (m.hidden as f64, m.moe.experts as f64, m.moe.top_k as f64);
    let nvlink = sys.nvlink_bytes_per_second_each_way();
    let tp_comm = if t.tp > 1 {
        8.0 * stage_layers * tokens * h * 2.0 * (tp - 1.0)
            / tp
            / sys.group_bytes_per_second(t.tp, 1)
    } else {
        0.0
    };
    let ep_comm = if t.ep > 1 && e > 0.0 {
        let bytes = tokens / tp * k * h * 2.0 * (ep - 1.0) / ep;
        // The EP group taken to span `ep · tp · cp` GPUs (its ranks `tp · cp` apart): chosen
        // on the published Megatron-Core runs (tp 2, ep 8 on 8-GPU nodes runs at the
        // network's all-to-all speed there), not from Megatron-Core's rank order.
        let span = t.ep * t.tp * t.cp;
        // Each execution of an MoE layer dispatches and combines its tokens.
        let moe_layers = looped::moe_executions(m) as f64 / pp;
        let each = if span <= sys.gpus_per_nvlink_domain {
            bytes / nvlink
        } else {
            let inside = (sys.gpus_per_nvlink_domain / (t.tp * t.cp)).max(1) as f64;
            let cross = bytes * (1.0 - inside / ep);
            (cross / sys.network_bytes_per_second).max((bytes - cross) / nvlink)
        };
        4.0 * moe_layers * each
    } else {
        0.0
    };
    let pp_comm = if t.pp > 1 {
        2.0 * tokens * h * 2.0 / tp / sys.network_bytes_per_second
    } else {
        0.0
    };
    (tp_comm, ep_comm, pp_comm)
}

/// The optimizer step and the exposed data-parallel communication of one step, seconds.
fn optimizer_and_dp(
    m: &crate::model::Model,
    t: &Training,
    sys: &SystemSpec,
    hbm: f64,
    micro: f64,
) -> (f64, f64) {
    let (tp, pp, ep) = (t.tp as f64, t.pp as f64, t.ep as f64);
    let (h, v, layers) = (m.hidden as f64, m.vocab as f64, m.layers as f64);
    let (e, fe) = (m.moe.experts as f64, m.moe.expert_ffn as f64);
    let (heads, d) = (m.heads as f64, m.head_dim as f64);
    let qk_cols = (m.heads + m.kv_heads) as f64 * d;
    // Parameters of this GPU's stage: attention and embeddings, then experts.
    let attn_params = layers * (h * qk_cols + heads * d * h + h * (m.kv_heads as f64) * d);
    let dense_params = attn_params
        + (m.moe_layers() as f64)
            * (h * e + 3.0 * h * (m.moe.shared_experts * m.moe.shared_ffn) as f64)
        + m.dense
            .as_ref()
            .map_or(0.0, |dn| dn.layers.len() as f64 * 3.0 * h * dn.ffn as f64)
        + 2.0 * v * h;
    let expert_params = m.moe_layers() as f64 * e * 3.0 * h * fe;
    let dense_gpu = dense_params / (tp * pp);
    let expert_gpu = if e > 0.0 {
        expert_params / (ep * pp)
    } else {
        0.0
    };
    let dp_dense = (t.dp * t.cp) as f64;
    let dp_expert = (dp_dense * tp / ep).max(1.0);
    let optimizer = 30.0 * (dense_gpu / dp_dense + expert_gpu / dp_expert) / hbm;
    let ring = |n: f64| if n > 1.0 { (n - 1.0) / n } else { 0.0 };
    let dp_bytes = 2.0 * (dense_gpu * ring(dp_dense) + expert_gpu * ring(dp_expert));
    let dp_comm_total = 2.0 * dp_bytes / sys.network_bytes_per_second;
    let dp_comm = (dp_comm_total - micro).max(0.0);
    (optimizer, dp_comm)
}

/// The checks of a request, and what they find: the card's GEMM share, its attention
/// curves and the micro-batches per step.
fn checked(
    spec: &ModelSpec,
    req: &StepRequest,
) -> Result<(f64, &'static AttentionCurve, &'static AttentionCurve, u64)> {
    let (m, t) = (&spec.model, &req.training);
    validate_layout(t)?;
    if m.recurrent.is_some() || m.blocks.is_some() {
        return Err(refuse(
            "model",
            "hybrid layers (linear attention or Mamba) have no kernels in the plan; the step \
             model refuses them",
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

/// Seconds of one micro-batch's memory-bound kernels on one GPU, `tokens` its tokens.
fn memory_bound_seconds(m: &crate::model::Model, tokens: f64, stage_layers: f64, hbm: f64) -> f64 {
    let (h, v, d) = (m.hidden as f64, m.vocab as f64, m.head_dim as f64);
    let (e, k, fe) = (
        m.moe.experts as f64,
        m.moe.top_k as f64,
        m.moe.expert_ffn as f64,
    );
    let tp = 1.0;
    // Memory-bound kernels, bytes per token per layer (bf16): norms 20h, residual adds 12h,
    // activations 16 per FFN column (routed and shared), RoPE 8 per q/k column,
    // permute/unpermute 8h(1 + top_k), router 12 per expert; cross-entropy 20 per logit.
    let ffn_cols = k * fe + (m.moe.shared_experts * m.moe.shared_ffn) as f64;
    let qk_cols = (m.heads + m.kv_heads) as f64 * d;
    let moe_bytes = if e > 0.0 {
        8.0 * h * (1.0 + k) + 12.0 * e
    } else {
        0.0
    };
    let layer_bytes = 32.0 * h + 16.0 * ffn_cols + 8.0 * qk_cols + moe_bytes;
    (layer_bytes * stage_layers + 20.0 * v) * tokens / tp / hbm
}
