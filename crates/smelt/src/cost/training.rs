//! Training memory: the static state (weights, gradients, master weights, optimizer
//! moments) of a mixed-precision recipe, and what each GPU holds under a layout of tensor
//! (TP), expert (EP), pipeline (PP) and data (DP) parallelism with ZeRO stage 0–3, at its
//! peak with the activations of the micro-batches in flight. Given by `[training]`
//! ([`Training`]); exact integers (the activations an exact fraction, as in [`super::memory`]).
//!
//! # Static memory
//!
//! Every trained parameter holds `weight_bytes + grad_bytes + master_bytes +
//! optimizer_bytes` bytes: `2 + 2 + 4 + 8 = 16` by default (bf16 weights and gradients, fp32
//! master weights, Adam's two fp32 moments), the `2Ψ + 2Ψ + 12Ψ` of Rajbhandari et al.,
//! "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
//! arXiv:1910.02054, §3.1; Megatron-LM accumulates gradients in fp32 (`grad_bytes = 4`,
//! 18 bytes). The parameters are the cost model's, **embedding and LM head included**
//! whatever `[counting]` says (they are trained; `vocab · H` each, once when tied, 0 when
//! the model file gives no `vocab`), MTP modules refused (`[counting] mtp` with
//! `[training]` is an error). Activations are not static: see below.
//!
//! # Per GPU
//!
//! `tp · pp · dp` GPUs; expert parallelism is carved out of data parallelism (`ep` divides
//! `dp`), as in Megatron-Core and DeepSpeed-MoE. A layout that does not divide the model is
//! refused, naming the field (`tp` must divide the heads, key/value heads, every FFN width
//! and the vocabulary; `ep` the routed experts; `pp` the layers).
//!
//! * **TP** (Megatron, Shoeybi et al. arXiv:1909.08053): the Q, K, V projections are split by
//!   heads (column-parallel, with their biases and sinks; OLMoE's full-width q/k norms
//!   with them), O by its input (row-parallel; its bias replicated); MLA's up-projections
//!   and O are split by heads, its down-projections (`H → r_q`, `H → r + d_r`) and latent
//!   norms replicated. Every SwiGLU — routed experts (expert tensor parallelism equal to
//!   `tp`, Megatron-Core's default), shared experts, dense FFNs — is split along its width
//!   (gate and up by column with their biases, down by row, its bias replicated). The
//!   embedding and LM head are split by vocabulary. Replicated on every TP rank: the layer
//!   norms, per-head q/k norms, the router (and its bias), the shared-expert gate, the
//!   indexer. TP runs with sequence parallelism (Korthikanti et al., arXiv:2205.05198,
//!   §4.2.2): every saved activation is split evenly, `1/tp` per GPU.
//! * **EP** splits the routed experts only: each GPU holds `experts / ep` of every MoE
//!   layer. With balanced routing every GPU processes as many expert tokens as it routes, so
//!   the activations per GPU do not change.
//! * **PP**: the physical layers are split evenly, `L / pp` consecutive layers per stage;
//!   the first stage also holds the embedding, the last the final norm and the LM head (a
//!   tied head is a copy there when `pp > 1`, as in Megatron-LM). A looped layer stays on
//!   the stage that holds it: every execution of it runs there and saves its activations
//!   there (a loop across a stage boundary passes its activations back and forth). The
//!   schedule is 1F1B (Narayanan et al., arXiv:2104.04473, §2.2): stage `s` (1-based) keeps
//!   the activations of `pp − s + 1` micro-batches, the first stage `pp`.
//! * **DP with ZeRO**: stage 1 shards the master weights and optimizer moments across the
//!   data-parallel group, stage 2 also the gradients, stage 3 also the weights. The
//!   non-expert parameters of a stage are sharded across `dp`, the expert parameters across
//!   the expert data-parallel group of `dp / ep` GPUs (the GPUs holding the same experts).
//!   Each flat buffer is padded to a multiple of its group: a GPU holds
//!   `ceil(n / group)` of its `n` elements.
//!
//! **Peak per GPU** of a stage = its static bytes + its layer executions' activations per
//! token (the budget's policy, `[counting] activations`) × `context · micro_batch` / `tp` ×
//! micro-batches in flight; the report gives every stage and the largest. Not counted:
//! framework and allocator overheads, communication buffers, the transient memory of a
//! recomputation, the embedding's output and the logits (the activation module's scope).

use serde::Serialize;

use super::Keys;
use super::memory::activations_over;
use crate::error::{Error, Result};
use crate::model::{
    ActivationPolicy, AttentionBias, AttentionLayer, AttentionShape, Consumer, Counting, Ffn,
    Layer, LayerKind, ModelSpec, QkNorm, Stack, TokenMixer, Training,
};
use crate::units::{ActivationBytes, Bytes, Params, product};

const WHAT: &str = "training memory";

/// What one GPU of one pipeline stage holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageMemory {
    /// The stage, 1-based.
    pub stage: u64,
    /// Its physical layers, 1-based, first and last.
    pub layers: [u64; 2],
    /// Executions of its layers per forward pass.
    pub executions: u64,
    /// Parameters one GPU holds before ZeRO: non-expert ones (sharded by ZeRO across `dp`).
    pub params: Params,
    /// Routed-expert parameters one GPU holds before ZeRO (sharded across `dp / ep`).
    pub expert_params: Params,
    /// Weight bytes per GPU.
    pub weights: Bytes,
    /// Gradient bytes per GPU.
    pub grads: Bytes,
    /// Master-weight and optimizer-moment bytes per GPU.
    pub optimizer: Bytes,
    /// `weights + grads + optimizer`.
    pub static_bytes: Bytes,
    /// Activation bytes per GPU of one micro-batch.
    pub activations_per_micro_batch: ActivationBytes,
    /// Micro-batches whose activations the stage keeps at once (1F1B: `pp − stage + 1`).
    pub in_flight: u64,
    /// `activations_per_micro_batch · in_flight`.
    pub activations: ActivationBytes,
    /// `static_bytes + activations`.
    pub peak: ActivationBytes,
}

/// The training memory of a model under a recipe and layout (module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainingMemory {
    /// The recipe and layout.
    pub training: Training,
    /// GPUs of the layout, `tp · cp · pp · dp`.
    pub gpus: u64,
    /// Bytes of state per parameter.
    pub bytes_per_param: u64,
    /// Every trained parameter, embedding and LM head included (once when tied).
    pub params: Params,
    /// The embedding's share of `params` (`vocab · hidden`; 0 without a vocabulary).
    pub embedding: Params,
    /// The static bytes of one model replica, unsharded: `params · bytes_per_param`.
    pub static_bytes: Bytes,
    /// The activation policy of the peak.
    pub policy: ActivationPolicy,
    /// One entry per pipeline stage.
    pub stages: Vec<StageMemory>,
    /// The stage (1-based) of the largest peak (the first, on a tie).
    pub peak_stage: u64,
    /// The largest peak per GPU.
    pub peak: ActivationBytes,
    /// Set when a loop crosses a pipeline-stage boundary: each micro-batch then passes those
    /// stages more than once, a schedule the 1F1B count of micro-batches in flight (`pp −
    /// s + 1` on stage `s`) does not describe, so the activations per GPU are not exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline_note: Option<String>,
}

/// [`TrainingMemory::pipeline_note`] for `stack`'s loop on stages of `per_stage` layers.
fn pipeline_note(stack: &Stack, pp: u64, per_stage: u64) -> Option<String> {
    let l = stack.looping().filter(|l| l.repeats > 1 && l.span > 0)?;
    let (first, span) = (l.first as u64 + 1, l.span as u64);
    let last = first + span - 1;
    let (from, to) = ((first - 1) / per_stage + 1, (last - 1) / per_stage + 1);
    (pp > 1 && from != to).then(|| {
        format!(
            "the loop (layers {first}-{last}, x{}) crosses pipeline stages {from}-{to}: each \
             micro-batch passes them {} times, which the 1F1B count of micro-batches in \
             flight (pp - s + 1 on stage s) does not describe; the activations per GPU of \
             those stages are not exact",
            l.repeats, l.repeats
        )
    })
}

/// The checked sum of `xs`.
fn sum(xs: &[u64]) -> Result<u64> {
    xs.iter()
        .try_fold(0u64, |s, &x| s.checked_add(x))
        .ok_or(Error::Overflow { what: WHAT })
}

/// Parameters of the attention block `a` (with its sinks and indexer) on one GPU of `t`
/// tensor-parallel ranks, on a residual stream of width `h`.
fn attention_shard(h: u64, a: &AttentionLayer, t: u64) -> Result<u64> {
    let heads = a.shape.heads();
    let sinks = if a.sinks { heads / t } else { 0 };
    let attention = match &a.shape {
        AttentionShape::Gqa {
            kv_heads, head_dim, ..
        } => {
            let (q, kv) = (
                product(&[heads, *head_dim], WHAT)?,
                kv_heads.saturating_mul(*head_dim),
            );
            let qkv = sum(&[q, kv, kv])?;
            let bias = match a.bias {
                AttentionBias::None => 0,
                AttentionBias::Qkv => qkv / t,
                AttentionBias::All => qkv / t + h,
            };
            let norms = match a.qk_norm {
                QkNorm::None => 0,
                QkNorm::PerHead => 2 * head_dim,
                QkNorm::Full => (q + kv) / t,
            };
            sum(&[product(&[h, sum(&[qkv, q])?], WHAT)? / t, bias, norms])?
        }
        AttentionShape::Mla { mla: a, .. } => {
            let qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
            let q = if a.q_lora_rank > 0 {
                sum(&[
                    product(&[h, a.q_lora_rank], WHAT)?,
                    product(&[a.q_lora_rank, heads, qk], WHAT)? / t,
                ])?
            } else {
                product(&[h, heads, qk], WHAT)? / t
            };
            sum(&[
                q,
                product(&[h, a.kv_lora_rank + a.qk_rope_head_dim], WHAT)?,
                product(
                    &[a.kv_lora_rank, heads, a.qk_nope_head_dim + a.v_head_dim],
                    WHAT,
                )? / t,
                product(&[heads, a.v_head_dim, h], WHAT)? / t,
                a.q_lora_rank + a.kv_lora_rank,
            ])?
        }
    };
    let indexer = match &a.indexer {
        Some(ix) => {
            let r_q = match &a.shape {
                AttentionShape::Mla { mla, .. } => mla.q_lora_rank,
                AttentionShape::Gqa { .. } => 0,
            };
            sum(&[
                product(&[r_q, ix.heads, ix.head_dim], WHAT)?,
                product(&[h, ix.head_dim], WHAT)?,
                product(&[h, ix.heads], WHAT)?,
                2 * ix.head_dim,
            ])?
        }
        None => 0,
    };
    sum(&[attention, sinks, indexer])
}

/// Parameters of one physical layer `layer` on one GPU, on a residual stream of width `h`
/// with norms of `norm` parameters: `(non-expert, expert)`.
fn layer_shard(h: u64, layer: &Layer, norm: u64, t: u64, ep: u64) -> Result<(u64, u64)> {
    let attention = match &layer.mixer {
        Some(TokenMixer::Attention(a)) => attention_shard(h, a, t)?,
        _ => 0,
    };
    let common = sum(&[attention, product(&[layer.norms.count, norm], WHAT)?])?;
    let e = match &layer.ffn {
        Some(Ffn::Moe(e)) => e,
        Some(Ffn::Dense { width, activation }) => {
            let ffn = product(&[activation.matrices(), h, *width], WHAT)? / t;
            return Ok((sum(&[common, ffn])?, 0));
        }
        None => return Ok((common, 0)),
    };
    let matrices = e.activation.matrices();
    let router = sum(&[
        product(&[h, e.experts], WHAT)?,
        if e.router_bias { e.experts } else { 0 },
    ])?;
    let shared = sum(&[
        product(&[matrices, h, e.shared_ffn, e.shared_experts], WHAT)? / t,
        if e.shared_gate { h } else { 0 },
    ])?;
    let one = sum(&[
        product(&[matrices, h, e.expert_ffn], WHAT)? / t,
        if e.expert_bias {
            2 * e.expert_ffn / t + h
        } else {
            0
        },
    ])?;
    Ok((
        sum(&[common, router, shared])?,
        product(&[one, e.experts / ep], WHAT)?,
    ))
}

/// `ceil(n / group)` when `sharded`, else `n`.
fn share(n: u64, group: u64, sharded: bool) -> u64 {
    if sharded { n.div_ceil(group) } else { n }
}

/// `a / n`, exactly.
fn divide(a: ActivationBytes, n: u64) -> Result<ActivationBytes> {
    let den = a
        .denom()
        .checked_mul(u128::from(n))
        .ok_or(Error::Overflow { what: WHAT })?;
    ActivationBytes::ratio(a.numer(), den)
}

/// The training memory of `spec` under `training` (module docs).
pub fn training_memory(spec: &ModelSpec, training: &Training) -> Result<TrainingMemory> {
    let m = &spec.model;
    training.validate_for(m)?;
    let stack = Stack::of(m)?;
    Consumer::TrainingMemory.check_features(&stack.features_under(&spec.counting))?;
    let all = Counting {
        embeddings: true,
        lm_head: true,
        mtp: false,
        ..spec.counting
    };
    let (breakdown, _) = super::params(m, &all)?;
    let params = breakdown.total()?;
    let keys = Keys::of(&spec.workload, m)?;
    let t = *training;
    if t.vp > 1 {
        return Err(Error::invalid(
            "training.vp",
            format!(
                "the training memory does not model the interleaved schedule's micro-batches in flight yet; got vp = {} (use vp = 1)",
                t.vp
            ),
        ));
    }
    if !spec.workload.context.is_multiple_of(t.cp) {
        return Err(Error::invalid(
            "training.cp",
            format!(
                "must divide workload.context ({}); got {}",
                spec.workload.context, t.cp
            ),
        ));
    }
    let (tp, pp) = (t.tp, t.pp);
    let per_stage = m.layers / pp;
    let norm = stack.norm_params();
    let vocab_shard = product(&[m.vocab, m.hidden], WHAT)? / tp;
    let mut stages = Vec::new();
    for s in 1..=pp {
        let (first, last) = ((s - 1) * per_stage + 1, s * per_stage);
        let (mut own, mut expert) = (0u64, 0u64);
        for layer in stack
            .layers()
            .skip(first as usize - 1)
            .take(per_stage as usize)
        {
            let (d, e) = layer_shard(m.hidden, layer, norm, tp, t.ep)?;
            own = own.checked_add(d).ok_or(Error::Overflow { what: WHAT })?;
            expert = expert
                .checked_add(e)
                .ok_or(Error::Overflow { what: WHAT })?;
        }
        if s == 1 {
            own += vocab_shard;
        }
        if s == pp {
            own += norm;
            // A tied head is a copy on the last stage when it is not the first; its bias
            // is its own.
            if !m.tie_embeddings || pp > 1 {
                own += vocab_shard;
            }
            if m.lm_head_bias {
                own += m.vocab / tp;
            }
        }
        let kinds = stack.kinds_within(first, last);
        stages.push(stage(
            spec,
            &keys,
            &t,
            s,
            [first, last],
            &kinds,
            [own, expert],
        )?);
    }
    let (peak_stage, peak) = stages
        .iter()
        .fold((1, ActivationBytes::ZERO), |(bs, bp), st| {
            if st.peak > bp {
                (st.stage, st.peak)
            } else {
                (bs, bp)
            }
        });
    Ok(TrainingMemory {
        training: t,
        gpus: t.gpus(),
        bytes_per_param: t.bytes_per_param(),
        params,
        embedding: breakdown.embeddings,
        static_bytes: Bytes(product(&[params.0, t.bytes_per_param()], WHAT)?),
        policy: spec.counting.activations,
        stages,
        peak_stage,
        peak,
        pipeline_note: pipeline_note(&stack, pp, per_stage),
    })
}

/// One stage's memory per GPU, from the kinds of its layers and its parameters per GPU
/// before ZeRO (non-expert, expert).
fn stage(
    spec: &ModelSpec,
    keys: &Keys,
    t: &Training,
    s: u64,
    layers: [u64; 2],
    kinds: &[LayerKind],
    [own, expert]: [u64; 2],
) -> Result<StageMemory> {
    let (dp, edp) = (t.dp_cp(), t.dp_cp() / t.ep);
    let held = |zero: u64, bytes: u64| {
        let n = share(own, dp, t.zero >= zero) + share(expert, edp, t.zero >= zero);
        product(&[n, bytes], WHAT).map(Bytes)
    };
    let weights = held(3, t.weight_bytes)?;
    let grads = held(2, t.grad_bytes)?;
    let optimizer = held(1, t.master_bytes + t.optimizer_bytes)?;
    let static_bytes = Bytes::sum(&[weights, grads, optimizer])?;
    let per_token = activations_over(
        spec.model.hidden,
        kinds,
        keys,
        &spec.counting,
        spec.counting.activations,
    )?
    .total()?;
    let tokens = product(&[spec.workload.context, t.micro_batch], WHAT)?;
    let per_micro_batch = divide(
        per_token.checked_mul(tokens)?,
        product(&[t.tp, t.cp], WHAT)?,
    )?;
    let in_flight = t.pp - s + 1;
    let activations = per_micro_batch.checked_mul(in_flight)?;
    Ok(StageMemory {
        stage: s,
        layers,
        executions: kinds.iter().map(|k| k.executions).sum(),
        params: Params(own),
        expert_params: Params(expert),
        weights,
        grads,
        optimizer,
        static_bytes,
        activations_per_micro_batch: per_micro_batch,
        in_flight,
        activations,
        peak: activations.checked_add(ActivationBytes::from_int(static_bytes.0))?,
    })
}

/// The per-GPU peaks of a Baseline and its looped match under the Baseline's
/// `[training]` (what `match`, `grid` and `sweep` report when a layout is given).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeakPair {
    /// The Baseline's peak per GPU, bytes.
    pub baseline: ActivationBytes,
    /// The looped model's, when the layout divides it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub looped: Option<ActivationBytes>,
    /// `looped / baseline`, when the layout divides the looped model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Why the layout does not split the looped model (the field and the rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The looped model's [`TrainingMemory::pipeline_note`]: its peak is not exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The per-GPU peaks of `baseline` and `looped` (costed under the Baseline's counting and
/// workload) under the Baseline's `[training]`; `None` without one. A layout that does not
/// split the looped model is reported (`refused`), not an error.
pub fn peak_pair(baseline: &ModelSpec, looped: &ModelSpec) -> Result<Option<PeakPair>> {
    let Some(t) = &baseline.training else {
        return Ok(None);
    };
    let base = training_memory(baseline, t)?.peak;
    let under = ModelSpec {
        counting: baseline.counting,
        workload: baseline.workload.clone(),
        training: None,
        ..looped.clone()
    };
    Ok(Some(match training_memory(&under, t) {
        Ok(m) => PeakPair {
            baseline: base,
            looped: Some(m.peak),
            ratio: Some(m.peak.as_f64() / base.as_f64()),
            refused: None,
            note: m.pipeline_note,
        },
        Err(e @ Error::InvalidSpec { .. }) => PeakPair {
            baseline: base,
            looped: None,
            ratio: None,
            refused: Some(format!("the looped model: {e}")),
            note: None,
        },
        Err(e) => return Err(e),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
[model]
layers = 4
hidden = 64
heads = 4
kv_heads = 2
head_dim = 16
vocab = 96
[model.moe]
experts = 8
top_k = 2
expert_ffn = 32
shared_experts = 1
shared_ffn = 32
shared_gate = true
[model.dense]
layers = [1]
ffn = 128
[model.loop]
first = 2
span = 2
repeats = 2
[workload]
context = 64
mean_doc_len = 16
"#;

    /// With no parallelism one GPU holds every parameter, 16 bytes each, and the activations
    /// of one sequence.
    #[test]
    fn one_gpu_holds_everything() {
        let spec = ModelSpec::from_toml_str(SPEC).unwrap();
        let mem = training_memory(&spec, &Training::default()).unwrap();
        let all = Counting {
            embeddings: true,
            lm_head: true,
            ..spec.counting
        };
        let (p, _) = super::super::params(&spec.model, &all).unwrap();
        assert_eq!(mem.params, p.total().unwrap());
        let st = &mem.stages[0];
        assert_eq!(st.params.0 + st.expert_params.0, mem.params.0);
        assert_eq!(st.static_bytes.0, 16 * mem.params.0);
        let act = super::super::cost(&spec).unwrap().budgets().activations;
        assert_eq!(st.activations, act.checked_mul(64).unwrap());
        assert_eq!(mem.peak, st.peak);
    }

    /// Context parallelism splits every micro-batch's activations across `cp` GPUs and
    /// widens the optimizer's data-parallel group to `dp · cp`; an interleaved schedule is
    /// refused until its micro-batches in flight are modelled.
    #[test]
    fn context_parallelism_splits_activations_and_shards_over_dp_cp() {
        let spec = ModelSpec::from_toml_str(SPEC).unwrap();
        let zero1 = |dp, cp| Training {
            dp,
            cp,
            zero: 1,
            ..Training::default()
        };
        let one = training_memory(&spec, &zero1(2, 1)).unwrap();
        let two = training_memory(&spec, &zero1(1, 2)).unwrap();
        assert_eq!(two.gpus, 2);
        let (a, b) = (&one.stages[0], &two.stages[0]);
        assert_eq!(a.optimizer, b.optimizer);
        assert_eq!(
            a.activations_per_micro_batch,
            b.activations_per_micro_batch.checked_mul(2).unwrap()
        );
        let vp = Training {
            pp: 2,
            vp: 2,
            ..Training::default()
        };
        let err = training_memory(&spec, &vp).unwrap_err().to_string();
        assert!(err.contains("training.vp"), "{err}");
    }

    /// Layouts that do not divide are refused, naming the field.
    #[test]
    fn refuses_layouts_that_do_not_divide() {
        let spec = ModelSpec::from_toml_str(SPEC).unwrap();
        for (t, field) in [
            (
                Training {
                    tp: 8,
                    ..Training::default()
                },
                "model.heads",
            ),
            (
                Training {
                    tp: 4,
                    ..Training::default()
                },
                "model.kv_heads",
            ),
            (
                Training {
                    ep: 3,
                    dp: 3,
                    ..Training::default()
                },
                "model.moe.experts",
            ),
            (
                Training {
                    pp: 3,
                    ..Training::default()
                },
                "model.layers",
            ),
            (
                Training {
                    ep: 2,
                    ..Training::default()
                },
                "training.dp",
            ),
        ] {
            let err = training_memory(&spec, &t).unwrap_err().to_string();
            assert!(err.contains(field), "{t:?}: {err}");
        }
    }
}
