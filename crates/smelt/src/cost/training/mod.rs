//! Training memory: the static state (weights, gradients, master weights, optimizer
//! moments) of a mixed-precision recipe, and what each GPU holds under a layout of tensor
//! (TP), expert (EP, ETP), pipeline (PP, with virtual stages VP), context (CP) and data (DP)
//! parallelism with ZeRO stage 0–3, at its peak with the activations of the micro-batches
//! in flight. Given by `[training]` ([`Training`]); exact integers (the activations an exact
//! fraction, as in [`super::memory`]).
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
//! `tp · cp · pp · dp` GPUs. A layout that does not divide the model is refused, naming the
//! field (`tp` must divide the heads, key/value heads, the shared and dense FFN widths and
//! the vocabulary; `etp` the expert width; `ep` the routed experts; `etp · ep` the GPUs of
//! a stage, `tp · cp · dp`; the pipeline the layers, [`Training::stage_chunks`]).
//!
//! * **TP** (Megatron, Shoeybi et al. arXiv:1909.08053): the Q, K, V projections are split by
//!   heads (column-parallel, with their biases and sinks; OLMoE's full-width q/k norms
//!   with them), O by its input (row-parallel; its bias replicated); MLA's up-projections
//!   and O are split by heads, its down-projections (`H → r_q`, `H → r + d_r`) and latent
//!   norms replicated. The shared experts and dense FFNs are split along their width (gate
//!   and up by column with their biases, down by row, its bias replicated). The embedding
//!   and LM head are split by vocabulary. Replicated on every TP rank: the layer norms,
//!   per-head q/k norms, the router (and its bias), the shared-expert gate, the indexer. TP
//!   runs with sequence parallelism (Korthikanti et al., arXiv:2205.05198, §4.2.2).
//! * **ETP, EP**: each routed expert is split along its width across `etp` GPUs (Megatron's
//!   `expert_tensor_parallel_size`, 1 unless given), the routed experts across `ep`: each
//!   GPU holds `experts / ep` experts of every MoE layer, `1/etp` of each.
//! * **PP**: a stage holds its layers ([`Training::stage_chunks`]: even, or Megatron's uneven
//!   first and last stages, in `vp` interleaved chunks); the first stage also holds the
//!   embedding, the last the final norm and the LM head (a tied head is a copy there when
//!   `pp > 1`, as in Megatron-LM). A looped layer stays on the stage that holds it: every
//!   execution of it runs there and saves its activations there.
//! * **DP with ZeRO**: stage 1 shards the master weights and optimizer moments across the
//!   data-parallel group, stage 2 also the gradients, stage 3 also the weights. The
//!   non-expert parameters of a stage are sharded across `dp · cp`, the expert parameters
//!   across the expert data-parallel group of `tp · cp · dp / (etp · ep)` GPUs (Megatron's
//!   `expert_data_parallel_size`). Each flat buffer is padded to a multiple of its group: a
//!   GPU holds `ceil(n / group)` of its `n` elements.
//!
//! # Activations in flight
//!
//! A micro-batch is `micro_batch` sequences of `context` tokens; a GPU holds
//! `1 / (tp · cp)` of each saved tensor ([`super::megatron`]'s units; the unfused counts are
//! split so too). The schedule's micro-batches in flight, read from Megatron-Core's
//! `get_pp_rank_microbatches` (megatron/core/pipeline_parallel/schedules.py):
//! * **1F1B** (`vp = 1`): stage `s` (1-based) runs `pp − s` warm-up forwards, then one more
//!   before its first backward: it keeps `pp − s + 1` micro-batches (Narayanan et al.,
//!   arXiv:2104.04473, §2.2), the first stage `pp`.
//! * **Interleaved** (`vp > 1`): stage `s` runs `W = 2·(pp − s) + (vp − 1)·pp` warm-up
//!   forwards of model chunks, then one more: it keeps `W + 1` chunk forwards, the `k`-th
//!   (0-based) of chunk `⌊k / pp⌋ mod vp` (Megatron's schedule table, micro-batches in groups
//!   of `microbatch_group_size_per_vp_stage = pp`). With equal chunks that is
//!   `pp + (pp − 1)/vp` micro-batches on the first stage, Narayanan et al.'s
//!   `(1 + (pp − 1)/(pp · vp))` times 1F1B's. Counted as the first `W + 1` forwards; exact
//!   when the chunks of a stage save alike (a note says when they do not).
//!   Both assume at least `W + 1` micro-batches per step.
//!
//! # Peak per GPU
//!
//! The peak of a stage is the larger of two moments: the backward pass, `static +
//! activations in flight + transients`, and the optimizer step, `static + optimizer step
//! temporaries` (the activations are freed by then). Under the Megatron-Core policies
//! ([`super::megatron`]), which state them from source:
//! * the last stage's activations include the LM head's and the loss's
//!   ([`super::megatron`]'s `head`: the fp32 softmax over the vocabulary dominates);
//! * transients, of one micro-batch: what recomputation rematerializes for the layer being
//!   recomputed, and a MoE layer's dispatch buffers (the permuted copies and the all-to-all's
//!   receive buffer);
//! * the optimizer step: Megatron's optimizer copies each gradient of the shard it updates
//!   to fp32 (`shard_model_grad.float()` in `_copy_model_grads_to_main_grads`), a new
//!   tensor when the gradient buffer is not already fp32: `4` bytes per parameter of the
//!   optimizer shard when `grad_bytes < 4`, else 0; Adam's update itself is in place.
//!
//! The unfused policies and the Transformers policies count the decoder layers' activations
//! only (no head, no transients). The Transformers policies describe a step of the
//! Transformers model classes, which split nothing but the batch: they are counted with
//! data parallelism (and ZeRO) only, and refused under `tp`, `cp`, `pp`, `ep` or `etp`
//! above 1. Not counted: framework and allocator overheads, communication buffers (NCCL,
//! the gradient reduce-scatter's), CUDA graphs.

use serde::Serialize;

use super::Keys;
use super::megatron::{self, Split};
use super::memory::activations_over;
use super::shard::{layer_shard, sum};
use crate::error::{Error, Result};
use crate::model::{ActivationPolicy, Consumer, Counting, LayerKind, ModelSpec, Stack, Training};
use crate::units::{ActivationBytes, Bytes, Params, product};

const WHAT: &str = "training memory";

/// What one GPU of one pipeline stage holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageMemory {
    /// The stage, 1-based.
    pub stage: u64,
    /// Its physical layers, 1-based: the first of its first chunk and the last of its last.
    pub layers: [u64; 2],
    /// Its model chunks' layers, 1-based, when the schedule is interleaved (`vp > 1`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<[u64; 2]>,
    /// Executions of its layers per forward pass.
    pub executions: u64,
    /// Parameters one GPU holds before ZeRO: non-expert ones (sharded by ZeRO across
    /// `dp · cp`).
    pub params: Params,
    /// Routed-expert parameters one GPU holds before ZeRO (sharded across the expert
    /// data-parallel group).
    pub expert_params: Params,
    /// Weight bytes per GPU.
    pub weights: Bytes,
    /// Gradient bytes per GPU.
    pub grads: Bytes,
    /// Master-weight and optimizer-moment bytes per GPU.
    pub optimizer: Bytes,
    /// `weights + grads + optimizer`.
    pub static_bytes: Bytes,
    /// Activation bytes per GPU of one micro-batch through the whole stage (every chunk),
    /// the LM head's and the loss's included on the last stage under a Megatron policy.
    pub activations_per_micro_batch: ActivationBytes,
    /// Of which the LM head's and the loss's (last stage, Megatron policies).
    #[serde(skip_serializing_if = "is_zero")]
    pub head: ActivationBytes,
    /// Micro-batches whose activations the stage keeps at once (1F1B: `pp − stage + 1`);
    /// with `vp > 1`, model-chunk forwards (`2·(pp − stage) + (vp − 1)·pp + 1`).
    pub in_flight: u64,
    /// The activations in flight.
    pub activations: ActivationBytes,
    /// Transient bytes of one micro-batch at the backward pass: what recomputation
    /// rematerializes for one layer (Megatron policies).
    pub recompute_transient: ActivationBytes,
    /// Transient bytes of one micro-batch's MoE dispatch (Megatron policies).
    pub dispatch_transient: ActivationBytes,
    /// Temporary bytes of the optimizer step (Megatron policies: the fp32 copy of the
    /// shard's gradients when they are kept in fewer bytes).
    pub optimizer_step: Bytes,
    /// `max(static + activations + transients, static + optimizer_step)`.
    pub peak: ActivationBytes,
}

fn is_zero(a: &ActivationBytes) -> bool {
    *a == ActivationBytes::ZERO
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
    /// Set when the activations per GPU are not exact: a loop crossing a model chunk's
    /// boundary (each micro-batch then passes those stages more than once, a schedule the
    /// count of micro-batches in flight does not describe), or interleaved chunks of one
    /// stage that save differently.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline_note: Option<String>,
}

/// The chunk (stage, chunk index) holding layer `layer` (1-based), if any.
fn chunk_of(chunks: &[Vec<[u64; 2]>], layer: u64) -> Option<(usize, usize)> {
    chunks.iter().enumerate().find_map(|(s, cs)| {
        cs.iter()
            .position(|c| (c[0]..=c[1]).contains(&layer))
            .map(|c| (s, c))
    })
}

/// [`TrainingMemory::pipeline_note`] for `stack`'s loop on `chunks`.
fn loop_note(stack: &Stack, chunks: &[Vec<[u64; 2]>]) -> Option<String> {
    let l = stack.looping().filter(|l| l.repeats > 1 && l.span > 0)?;
    let (first, span) = (l.first as u64 + 1, l.span as u64);
    let last = first + span - 1;
    let (a, b) = (chunk_of(chunks, first)?, chunk_of(chunks, last)?);
    (a != b).then(|| {
        format!(
            "the loop (layers {first}-{last}, x{}) crosses pipeline stages {}-{}: each \
             micro-batch passes them {} times, which the schedule's count of micro-batches in \
             flight does not describe; the activations per GPU of those stages are not exact",
            l.repeats,
            a.0 + 1,
            b.0 + 1,
            l.repeats
        )
    })
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

/// The refusal of a Transformers policy under a layout that splits more than the batch.
fn refuse_transformers(t: &Training, policy: ActivationPolicy) -> Result<()> {
    for (field, v) in [
        ("training.tp", t.tp),
        ("training.cp", t.cp),
        ("training.pp", t.pp),
        ("training.ep", t.ep),
        ("training.etp", t.etp()),
    ] {
        if v > 1 {
            return Err(Error::invalid(
                field,
                format!(
                    "{policy} counts a step of the Transformers model classes, which split \
                     nothing but the batch: its training memory takes data parallelism (and \
                     ZeRO) only; got {} = {v} (use a megatron policy for a Megatron layout)",
                    field.trim_start_matches("training.")
                ),
            ));
        }
    }
    Ok(())
}

/// What a pipeline's activations are counted under: the spec, its keys and layout.
struct Counter<'a> {
    spec: &'a ModelSpec,
    stack: &'a Stack,
    keys: &'a Keys,
    t: Training,
    split: Split,
}

impl Counter<'_> {
    fn policy(&self) -> ActivationPolicy {
        self.spec.counting.activations
    }

    fn counting(&self) -> &Counting {
        &self.spec.counting
    }

    /// Tokens of a micro-batch.
    fn tokens(&self) -> Result<u64> {
        product(&[self.spec.workload.context, self.t.micro_batch], WHAT)
    }

    /// Bytes per GPU of one micro-batch from `per_token` in [`super::megatron`]'s units.
    fn per_gpu(&self, per_token: ActivationBytes) -> Result<ActivationBytes> {
        divide(
            per_token.checked_mul(self.tokens()?)?,
            product(&[self.t.tp, self.t.cp], WHAT)?,
        )
    }

    fn int(x: u128) -> Result<ActivationBytes> {
        u64::try_from(x)
            .map(ActivationBytes::from_int)
            .map_err(|_| Error::Overflow { what: WHAT })
    }

    /// One micro-batch's activations per GPU through the layers of `kinds`.
    fn chunk(&self, kinds: &[LayerKind]) -> Result<ActivationBytes> {
        let policy = self.policy();
        let per_token = if policy.is_megatron() {
            megatron::activations(self.stack, kinds, self.counting(), policy, self.split)?
                .total()?
        } else if policy.is_transformers() {
            // The whole model on one GPU (the layout was checked).
            let context = self.spec.workload.context;
            super::memory::policy_activations(
                self.stack,
                self.keys,
                context,
                self.counting(),
                policy,
            )?
            .total()?
        } else {
            activations_over(
                self.stack.hidden(),
                kinds,
                self.keys,
                self.counting(),
                policy,
            )?
            .total()?
        };
        self.per_gpu(per_token)
    }

    /// The LM head's and the loss's activations per GPU of one micro-batch (Megatron
    /// policies), else 0.
    fn head(&self) -> Result<ActivationBytes> {
        if !self.policy().is_megatron() {
            return Ok(ActivationBytes::ZERO);
        }
        let per_token = megatron::head(
            self.stack,
            self.spec.model.vocab,
            self.counting(),
            self.split,
        )?;
        self.per_gpu(Self::int(per_token)?)
    }

    /// `(recompute, dispatch)` transients per GPU of one micro-batch (Megatron policies).
    fn transients(&self, kinds: &[LayerKind]) -> Result<[ActivationBytes; 2]> {
        if !self.policy().is_megatron() {
            return Ok([ActivationBytes::ZERO; 2]);
        }
        let (r, d) = megatron::transients(
            self.stack,
            kinds,
            self.counting(),
            self.policy(),
            self.split,
        )?;
        Ok([self.per_gpu(Self::int(r)?)?, self.per_gpu(Self::int(d)?)?])
    }
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
    let policy = spec.counting.activations;
    if policy.is_transformers() {
        refuse_transformers(&t, policy)?;
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
    let chunks = t.stage_chunks(m.layers)?;
    let counter = Counter {
        spec,
        stack: &stack,
        keys: &keys,
        t,
        split: Split {
            tp: t.tp,
            etp: t.etp(),
            ep: t.ep,
        },
    };
    let mut stages = Vec::new();
    let mut uneven_chunks = None;
    for (i, cs) in chunks.iter().enumerate() {
        let s = i as u64 + 1;
        let [own, expert] = stage_params(spec, &stack, &t, s, cs)?;
        let st = stage(&counter, s, cs, [own, expert])?;
        if uneven_chunks.is_none() && st.1 {
            uneven_chunks = Some(s);
        }
        stages.push(st.0);
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
    let note = loop_note(&stack, &chunks).or_else(|| {
        uneven_chunks.map(|s| {
            format!(
                "stage {s}'s model chunks save different activations: its chunk forwards in \
                 flight are counted as the interleaved schedule's first ones, not the largest \
                 set it holds later"
            )
        })
    });
    Ok(TrainingMemory {
        training: t,
        gpus: t.gpus(),
        bytes_per_param: t.bytes_per_param(),
        params,
        embedding: breakdown.embeddings,
        static_bytes: Bytes(product(&[params.0, t.bytes_per_param()], WHAT)?),
        policy,
        stages,
        peak_stage,
        peak,
        pipeline_note: note,
    })
}

/// The parameters one GPU of stage `s` (its layers in `chunks`) holds before ZeRO:
/// `[non-expert, expert]`, the embedding on the first stage, the final norm and the LM head
/// on the last.
fn stage_params(
    spec: &ModelSpec,
    stack: &Stack,
    t: &Training,
    s: u64,
    chunks: &[[u64; 2]],
) -> Result<[u64; 2]> {
    let m = &spec.model;
    let norm = stack.norm_params();
    let vocab_shard = product(&[m.vocab, m.hidden], WHAT)? / t.tp;
    let (mut own, mut expert) = (0u64, 0u64);
    for c in chunks {
        for layer in stack
            .layers()
            .skip(c[0] as usize - 1)
            .take((c[1] + 1 - c[0]) as usize)
        {
            let (d, e) = layer_shard(m.hidden, layer, norm, [t.tp, t.etp(), t.ep])?;
            own = sum(&[own, d])?;
            expert = sum(&[expert, e])?;
        }
    }
    if s == 1 {
        own = sum(&[own, vocab_shard])?;
    }
    if s == t.pp {
        own = sum(&[own, norm])?;
        // A tied head is a copy on the last stage when it is not the first; its bias is its
        // own.
        if !m.tie_embeddings || t.pp > 1 {
            own = sum(&[own, vocab_shard])?;
        }
        if m.lm_head_bias {
            own = sum(&[own, m.vocab / t.tp])?;
        }
    }
    Ok([own, expert])
}

/// One stage's memory per GPU, from its chunks and its parameters per GPU before ZeRO
/// (non-expert, expert); with whether its interleaved chunks save differently.
fn stage(
    c: &Counter,
    s: u64,
    chunks: &[[u64; 2]],
    [own, expert]: [u64; 2],
) -> Result<(StageMemory, bool)> {
    let t = &c.t;
    let (dp, edp) = (t.dp_cp(), t.edp());
    let held = |zero: u64, bytes: u64| {
        let n = sum(&[
            share(own, dp, t.zero >= zero),
            share(expert, edp, t.zero >= zero),
        ])?;
        product(&[n, bytes], WHAT).map(Bytes)
    };
    let weights = held(3, t.weight_bytes)?;
    let grads = held(2, t.grad_bytes)?;
    let optimizer = held(1, t.master_bytes + t.optimizer_bytes)?;
    let static_bytes = Bytes::sum(&[weights, grads, optimizer])?;
    let last = s == t.pp;
    let head = if last {
        c.head()?
    } else {
        ActivationBytes::ZERO
    };
    // Each chunk's activations of one micro-batch (the head on the last chunk of the last
    // stage), and the transients over every kind of the stage.
    let mut per_chunk = Vec::with_capacity(chunks.len());
    let mut all_kinds = Vec::new();
    let mut executions = 0u64;
    for ch in chunks {
        let kinds = c.stack.kinds_within(ch[0], ch[1]);
        executions = sum(&[executions, kinds.iter().map(|k| k.executions).sum()])?;
        per_chunk.push(c.chunk(&kinds)?);
        all_kinds.extend(kinds);
    }
    let differ = t.vp > 1 && per_chunk.windows(2).any(|w| w[0] != w[1]);
    if let Some(last) = per_chunk.last_mut() {
        *last = last.checked_add(head)?;
    }
    let per_micro_batch = ActivationBytes::sum(&per_chunk)?;
    let vp = t.vp;
    let (in_flight, activations) = if vp == 1 {
        let n = t.pp - s + 1;
        (n, per_micro_batch.checked_mul(n)?)
    } else {
        // Interleaved: W + 1 chunk forwards, the k-th of chunk (k / pp) mod vp.
        let w = 2 * (t.pp - s) + (vp - 1) * t.pp;
        let mut acc = ActivationBytes::ZERO;
        for k in 0..=w {
            acc = acc.checked_add(per_chunk[((k / t.pp) % vp) as usize])?;
        }
        (w + 1, acc)
    };
    let [recompute, dispatch] = c.transients(&all_kinds)?;
    let optimizer_step = if c.policy().is_megatron() && t.grad_bytes < 4 {
        let n = sum(&[share(own, dp, t.zero >= 1), share(expert, edp, t.zero >= 1)])?;
        Bytes(product(&[n, 4], WHAT)?)
    } else {
        Bytes(0)
    };
    let static_a = ActivationBytes::from_int(static_bytes.0);
    let backward = static_a
        .checked_add(activations)?
        .checked_add(recompute)?
        .checked_add(dispatch)?;
    let step = static_a.checked_add(ActivationBytes::from_int(optimizer_step.0))?;
    let memory = StageMemory {
        stage: s,
        layers: [
            chunks.first().map_or(0, |c| c[0]),
            chunks.last().map_or(0, |c| c[1]),
        ],
        chunks: if vp > 1 { chunks.to_vec() } else { Vec::new() },
        executions,
        params: Params(own),
        expert_params: Params(expert),
        weights,
        grads,
        optimizer,
        static_bytes,
        activations_per_micro_batch: per_micro_batch,
        head,
        in_flight,
        activations,
        recompute_transient: recompute,
        dispatch_transient: dispatch,
        optimizer_step,
        peak: backward.max(step),
    };
    Ok((memory, differ))
}

#[cfg(test)]
mod tests;
