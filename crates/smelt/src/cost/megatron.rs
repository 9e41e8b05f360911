//! Activation memory as Megatron-Core saves it: the policies `megatron` (no
//! recomputation), `megatron-selective` (`recompute_granularity = "selective"` with `[counting]
//! recompute_modules`) and `megatron-full` (`recompute_granularity = "full"`,
//! `recompute_method = "uniform"`, `recompute_num_layers = 1`), tensor by tensor, read from
//! Megatron-LM at commit `d98e8a64ddf34856e74b24714e3bedb2f5a39553` (2026-08-22) and
//! Transformer Engine at commit `d0067d0da6cb01811b8072a7d304f0e00344ce2b` (2026-08-22).
//!
//! **The stack counted** is the one the Megatron-MoE model zoo's recipes configure for
//! Mixtral, Qwen3-MoE and DeepSeek-V3 (github.com/yanring/Megatron-MoE-ModelZoo,
//! model_configs/benchmarking): the GPT model of `get_gpt_layer_with_transformer_engine_spec`
//! (`--transformer-impl transformer_engine`), bf16, `--sequence-parallel`, TE's fused
//! attention (cuDNN, `NVTE_FUSED_ATTN=1`; flash attention saves the same), no dropout
//! (`--attention-dropout 0 --hidden-dropout 0`), fused SwiGLU, `--moe-grouped-gemm`
//! (`TEGroupedMLP`), `--moe-token-dispatcher-type alltoall` with `--moe-permute-fusion`,
//! `--moe-router-dtype fp32 --moe-router-fusion` with an auxiliary load-balancing loss, fused
//! RoPE (the default). What each tensor is saved by is named below; each storage is counted
//! once however many ops save it.
//!
//! **Units.** Bytes per token of a sequence per layer execution, summed over the `tp · cp`
//! GPUs that hold the token (sequence parallelism splits the norm region's tensors by tokens,
//! tensor parallelism the attention's and FFNs' by heads and width, context parallelism the
//! sequence): one GPU holds `tokens / (tp · cp)` of it. At `tp = etp = 1` (the activations
//! budget) this is the bytes per token of one GPU. `b` is `[counting] activation_bytes`
//! (2: bf16; 4: fp32), `s` 4 bytes of fp32 statistics per row of a norm (8 with LayerNorm:
//! mean and `rstd`).
//!
//! | tensor | saved by | bytes |
//! |---|---|---|
//! | **GQA** (`linear_qkv` = `TELayerNormColumnParallelLinear`, the input norm fused) | | |
//! | the layer's input; its norm's `rstd` | `linear_qkv` (`inputmat`, `rsigma`) | `b·H + s` |
//! | the normed input (the sequence-parallel shard, gathered again in backward) | `linear_qkv` (`ln_out`) | `b·H` |
//! | q/k norm inputs (per-head `TENorm`: a contiguous copy) and `rstd` per head | TE `RMSNorm` | `b·(q + kv) + s·(a + g)` |
//! | `q`, `k` after RoPE (new tensors; fused RoPE saves its tables only) | core attention | `b·(q + kv)` |
//! | `v`: the contiguous copy TE makes of the view of the packed QKV output (`get_qkv_layout` finds no layout for a view beside new `q`, `k`) | core attention | `b·kv` |
//! | the attention's output | core attention, `linear_proj` | `b·q` |
//! | softmax statistics, fp32, one per head and query | cuDNN fused attention (`aux_ctx_tensors`) | `4a` |
//! | **MLA** (`input_layernorm` = `TENorm`; `linear_q_down_proj`, `linear_kv_down_proj` = `TELinear`; the up-projections `TELayerNormColumnParallelLinear`, the latent norms fused) | | |
//! | the layer's input; `rstd` | `TENorm` | `b·H + s` |
//! | the normed input | the down-projections | `b·H` |
//! | the query latent; its norm's `rstd`; the normed latent | `linear_q_up_proj` | `b·r_q + s + b·r_q` (none without a query latent: `linear_q_proj` reads the normed input) |
//! | the key/value latent, a view of the down-projection's output, which keeps its RoPE part alive; `rstd`; the normed latent | `linear_kv_up_proj` | `b·(r + d_r) + s + b·r` |
//! | `q`, `k` (`a·(d_n + d_r)` each), `v` (`a·d_v`), contiguous | core attention | `b·a·(2d_n + 2d_r + d_v)` |
//! | output; softmax statistics | core attention, `linear_proj` | `b·a·d_v + 4a` |
//! | **dense FFN** of width `F_d` (`linear_fc1` = `TELayerNormColumnParallelLinear`) | | |
//! | the FFN's input (the residual); `rstd`; the normed input | `linear_fc1` | `b·H + s + b·H` |
//! | `linear_fc1`'s output; the SwiGLU's output | fused SwiGLU (`bias_swiglu_impl` saves its input), `linear_fc2` | `b·3F_d` |
//! | **MoE FFN** (`pre_mlp_layernorm` = `TENorm`) | | |
//! | the FFN's input; `rstd`; the normed input | `TENorm`; router, shared experts' `linear_fc1` | `b·H + s + b·H` |
//! | router: the routing map (bool), the fused top-k's and the auxiliary loss's fp32 intermediates | TE `fused_topk_with_score_function`, `fused_compute_score_for_moe_aux_loss` | `E + 4E + 4E` |
//! | the first permutation's `row_id_map` (int32, `[tokens, 2E + 1]`) | TE `moe_permute_with_probs`, and the last unpermutation | `4·(2E + 1)` |
//! | per routed copy: the dispatched input; its fp32 routing weight; the sort and unsort maps (int32; only with more than one local expert) | `GroupedLinear` fc1; weighted SwiGLU; `moe_sort_chunks_by_index` | `etp·(b·H + 4 + 8)` |
//! | per routed copy: fc1's output, the SwiGLU's output | weighted SwiGLU (`weighted_bias_swiglu_impl`), `GroupedLinear` fc2 | `b·3F` |
//! | shared experts (one MLP of width `n·F_s`): fc1's output, the SwiGLU's output; with a gate its sigmoid and the output it scales | `SharedExpertMLP` | `b·3nF_s (+ b·(H + 1))` |
//!
//! With expert tensor parallelism `etp` each routed copy is all-gathered over the `etp`
//! GPUs that each compute `F / etp` of it, so the `H`-wide part counts `etp` times.
//!
//! **Recomputation** (`megatron-selective`, by module; Megatron's semantics):
//! * `core_attn`: the attention runs in a checkpoint (`tensor_parallel.checkpoint`), which
//!   keeps `q`, `k` and `v` as passed: `v` is then the **view** of the packed QKV output,
//!   whose whole storage (`b·(q + 2kv)`) stays alive instead of `v`'s copy; the softmax
//!   statistics are not kept. (Megatron warns that a fused attention gains nothing from it.)
//!   With MLA, `q`, `k`, `v` are contiguous: only the statistics go.
//! * `mla_up_proj`: the up-projections and RoPE run in an output-discarding checkpoint that
//!   keeps the query latent (`b·r_q`), the key/value latent's storage (`b·(r + d_r)`) and,
//!   with `tp > 1`, the RoPE key gathered over the sequence (`b·d_r` on each of the `tp`
//!   GPUs); the latent norms' saves and `q`, `k`, `v` are dropped.
//! * `layernorm`: the norms that are modules (MLA's input norm, a MoE layer's pre-FFN norm)
//!   keep their input only (`rstd` and the normed output dropped).
//! * `moe_act`: the routed experts' SwiGLU output (`b·F` per copy) is dropped.
//! * `mlp`: a dense FFN keeps its input only (`b·H`).
//! * `moe`: a MoE FFN keeps its norm's saves and the normed input only.
//! * `shared_experts`: the shared experts keep nothing beyond their (normed) input.
//!
//! `megatron-full` keeps each layer execution's input, `b·H`.
//!
//! **Not counted**: per micro-batch constants (RoPE's tables, the attention's RNG state,
//! the load-balancing loss's per-expert counts), the token dispatcher's attributes that
//! outlive a layer (its routing map and probabilities of the last micro-batch, once per
//! layer, not per micro-batch in flight), and the embedding's ids. The LM head and loss
//! are counted apart ([`head`]), for the last pipeline stage.
//!
//! **Refused**, naming the field: biases in the routed experts (Megatron's fused weighted
//! SwiGLU takes no bias, and its unfused path is not counted), q/k norms over the full width
//! (OLMoE; Megatron's `qk_layernorm` is per head), chunked attention, a sparse attention
//! indexer, values that are the keys, `activation_bytes` other than 2 or 4 (fp8 saves
//! quantized copies), and what the activation memory refuses for every policy
//! ([`crate::model::Consumer::Activations`]). Not modelled, so not claimed: the
//! `flex` dispatcher (DeepEP, DeepSeek-V3's recipe) keeps its `row_id_map` over the tokens
//! each GPU receives rather than those it sends (int32 maps only: the other tensors are the
//! same), and the unfused router (Megatron's default without `--moe-router-fusion`) keeps
//! `12k + 4E` bytes instead of `9E`.

use super::memory::ActivationBreakdown;
use crate::error::{Error, Result};
use crate::model::{
    ActivationPolicy, AttentionLayer, AttentionShape, Consumer, Counting, ExpertActivation,
    Feature, Ffn, LayerKind, Moe, QkNorm, RecomputeModule as M, Stack, TokenMixer, WindowKind,
    capability::refusal,
};
use crate::units::ActivationBytes;

const WHAT: &str = "activations (megatron)";

/// The pinned Megatron-LM commit the policy is read from.
pub const MEGATRON_COMMIT: &str = "d98e8a64ddf34856e74b24714e3bedb2f5a39553";
/// The pinned Transformer Engine commit.
pub const TE_COMMIT: &str = "d0067d0da6cb01811b8072a7d304f0e00344ce2b";

/// The layout a count is taken under: tensor parallelism (with sequence parallelism), expert
/// tensor parallelism and expert parallelism (for the local experts' sort maps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Tensor-parallel degree.
    pub tp: u64,
    /// Expert tensor-parallel degree.
    pub etp: u64,
    /// Expert-parallel degree.
    pub ep: u64,
}

impl Split {
    /// One GPU (the activations budget).
    pub const ONE: Split = Split {
        tp: 1,
        etp: 1,
        ep: 1,
    };
}

fn over() -> Error {
    Error::Overflow { what: WHAT }
}

fn mul(a: u128, b: u128) -> Result<u128> {
    a.checked_mul(b).ok_or_else(over)
}

fn add(xs: &[u128]) -> Result<u128> {
    xs.iter()
        .try_fold(0u128, |s, &x| s.checked_add(x))
        .ok_or_else(over)
}

/// What the policy recomputes.
#[derive(Debug, Clone, Copy)]
enum Recompute {
    None,
    Selective(crate::model::RecomputeModules),
    Full,
}

impl Recompute {
    fn of(policy: ActivationPolicy, counting: &Counting) -> Result<Self> {
        Ok(match policy {
            ActivationPolicy::Megatron => Recompute::None,
            ActivationPolicy::MegatronSelective => Recompute::Selective(counting.recompute_modules),
            ActivationPolicy::MegatronFull => Recompute::Full,
            other => {
                return Err(Error::invalid(
                    "counting.activations",
                    format!("{other} is not a Megatron-Core policy"),
                ));
            }
        })
    }

    fn has(self, m: M) -> bool {
        matches!(self, Recompute::Selective(set) if set.has(m))
    }
}

/// Bytes of one layer execution, by component, in the module's units.
#[derive(Debug, Clone, Copy, Default)]
struct Saves {
    layer_input: u128,
    norms: u128,
    attention: u128,
    scores: u128,
    ffn_input: u128,
    router: u128,
    experts: u128,
    shared: u128,
    dense: u128,
}

impl Saves {
    fn total(&self) -> Result<u128> {
        add(&[
            self.layer_input,
            self.norms,
            self.attention,
            self.scores,
            self.ffn_input,
            self.router,
            self.experts,
            self.shared,
            self.dense,
        ])
    }

    /// `self` over `times` executions, plus `acc`.
    fn add_times(self, times: u64, acc: Self) -> Result<Self> {
        let t = u128::from(times);
        let f = |x: u128, y: u128| add(&[mul(x, t)?, y]);
        Ok(Self {
            layer_input: f(self.layer_input, acc.layer_input)?,
            norms: f(self.norms, acc.norms)?,
            attention: f(self.attention, acc.attention)?,
            scores: f(self.scores, acc.scores)?,
            ffn_input: f(self.ffn_input, acc.ffn_input)?,
            router: f(self.router, acc.router)?,
            experts: f(self.experts, acc.experts)?,
            shared: f(self.shared, acc.shared)?,
            dense: f(self.dense, acc.dense)?,
        })
    }
}

/// The count's constants: the policy, bytes, width and layout.
#[derive(Clone, Copy)]
struct Step {
    recompute: Recompute,
    b: u128,
    h: u128,
    /// Bytes of a norm's per-row statistics (4: RMSNorm's `rstd`; 8 with LayerNorm's mean).
    stat: u128,
    split: Split,
}

fn refuse(policy: ActivationPolicy, field: &str, what: &str) -> Error {
    refusal(Consumer::Activations, Some(policy.as_str()), field, what)
}

/// The features the Megatron policies refuse (module docs).
const REFUSED: [Feature; 2] = [Feature::ExpertBias, Feature::Indexer];

impl Step {
    /// One execution of the attention block `a`: `(norms, attention, scores)`.
    fn attention(self, a: &AttentionLayer, policy: ActivationPolicy) -> Result<[u128; 3]> {
        let (b, h, stat) = (self.b, self.h, self.stat);
        let core = self.recompute.has(M::CoreAttn);
        let heads = u128::from(a.shape.heads());
        let scores = if core { 0 } else { mul(4, heads)? };
        match &a.shape {
            AttentionShape::Gqa {
                kv_heads,
                head_dim,
                k_eq_v,
                ..
            } => {
                if *k_eq_v {
                    return Err(refuse(
                        policy,
                        "model.full_attention",
                        "values that are the keys",
                    ));
                }
                let (g, d) = (u128::from(*kv_heads), u128::from(*head_dim));
                let (q, kv) = (mul(heads, d)?, mul(g, d)?);
                let qk_norms = match a.qk_norm {
                    QkNorm::None => 0,
                    QkNorm::PerHead => add(&[mul(b, q + kv)?, mul(stat, heads + g)?])?,
                    QkNorm::L2 => {
                        return Err(refuse(
                            policy,
                            "model.qk_norm",
                            "Llama-4's L2 q/k norm (not in the formula this policy follows)",
                        ));
                    }
                    QkNorm::Full => {
                        return Err(refuse(
                            policy,
                            "model.qk_norm",
                            "q/k norms over the full width (Megatron's qk_layernorm is per head)",
                        ));
                    }
                };
                // v: TE's contiguous copy, or under core_attn the packed QKV the
                // checkpoint's view of v keeps alive.
                let v = if core { q + 2 * kv } else { kv };
                let norms = add(&[b * h, stat, qk_norms])?;
                let attention = mul(b, add(&[h, q, kv, v, q])?)?;
                Ok([norms, attention, scores])
            }
            AttentionShape::Mla { mla, .. } => {
                let (rq, r, dr) = (
                    u128::from(mla.q_lora_rank),
                    u128::from(mla.kv_lora_rank),
                    u128::from(mla.qk_rope_head_dim),
                );
                let qk = mul(heads, u128::from(mla.qk_nope_head_dim) + dr)?;
                let v = mul(heads, u128::from(mla.v_head_dim))?;
                let up = self.recompute.has(M::MlaUpProj);
                // The input norm (a module: recomputed under `layernorm`).
                let (input_norm, normed) = if self.recompute.has(M::Layernorm) {
                    (b * h, 0)
                } else {
                    (b * h + stat, b * h)
                };
                // The latents the up-projections' fused norms read, their statistics and
                // normed copies (dropped under mla_up_proj, which keeps its inputs).
                let q_latent = if rq > 0 { 1 } else { 0 };
                let latents_in = mul(b, add(&[rq, r, dr])?)?;
                let (latent_norms, latent_normed, qkv, gathered) = if up {
                    let gathered = if self.split.tp > 1 {
                        mul(mul(b, dr)?, u128::from(self.split.tp))?
                    } else {
                        0
                    };
                    (0, 0, 0, gathered)
                } else {
                    (
                        stat * (1 + q_latent),
                        mul(b, rq + r)?,
                        mul(b, add(&[qk, qk, v])?)?,
                        0,
                    )
                };
                let norms = add(&[input_norm, latents_in, latent_norms, gathered])?;
                let attention = add(&[normed, latent_normed, qkv, mul(b, v)?])?;
                Ok([norms, attention, scores])
            }
        }
    }

    /// One execution of the MoE FFN `e`: `(norms, ffn input, router, experts, shared)`.
    fn moe(self, e: &Moe) -> Result<[u128; 5]> {
        let (b, h, stat, rc) = (self.b, self.h, self.stat, self.recompute);
        let (ne, k, f) = (
            u128::from(e.experts),
            u128::from(e.top_k),
            u128::from(e.expert_ffn),
        );
        let (norm, normed) = if rc.has(M::Layernorm) {
            (b * h, 0)
        } else {
            (b * h + stat, b * h)
        };
        if rc.has(M::Moe) {
            // The checkpoint keeps its input, the normed input (restored if the norm is
            // recomputed too: the checkpoint holds it).
            return Ok([
                b * h + if rc.has(M::Layernorm) { 0 } else { stat },
                b * h,
                0,
                0,
                0,
            ]);
        }
        let router = add(&[mul(9, ne)?, mul(4, 2 * ne + 1)?])?;
        let local = e.experts / self.split.ep.max(1);
        let maps = if local > 1 { 8 } else { 0 };
        let etp = u128::from(self.split.etp);
        let act_out = if rc.has(M::MoeAct) { 0 } else { f };
        let copy = add(&[mul(etp, add(&[b * h, 4, maps])?)?, mul(b, 2 * f + act_out)?])?;
        let experts = mul(k, copy)?;
        let shared = if rc.has(M::SharedExperts) || e.shared_experts == 0 {
            0
        } else {
            let width = mul(u128::from(e.shared_experts), u128::from(e.shared_ffn))?;
            let gate = if e.shared_gate { mul(b, h + 1)? } else { 0 };
            add(&[mul(mul(3, b)?, width)?, gate])?
        };
        Ok([norm, normed, router, experts, shared])
    }

    /// One execution of a dense FFN of width `width`: `(norms, ffn input, dense)`.
    fn dense(self, width: u64) -> Result<[u128; 3]> {
        let (b, h) = (self.b, self.h);
        if self.recompute.has(M::Mlp) {
            return Ok([b * h, 0, 0]);
        }
        Ok([
            b * h + self.stat,
            b * h,
            mul(mul(3, b)?, u128::from(width))?,
        ])
    }

    /// What one execution of a layer of `kind` saves.
    fn layer(self, kind: &LayerKind, policy: ActivationPolicy) -> Result<Saves> {
        if let Recompute::Full = self.recompute {
            return Ok(Saves {
                layer_input: self.b * self.h,
                ..Saves::default()
            });
        }
        let mut s = Saves::default();
        if let Some(TokenMixer::Attention(a)) = &kind.layer.mixer {
            if a.window.is_some_and(|w| w.kind == WindowKind::Chunked) {
                return Err(refuse(
                    policy,
                    "model.window",
                    "chunked attention (Megatron has no chunked mask)",
                ));
            }
            let [n, at, sc] = self.attention(a, policy)?;
            (s.norms, s.attention, s.scores) = (n, at, sc);
        }
        match &kind.layer.ffn {
            Some(Ffn::Moe(e)) => {
                if !matches!(
                    e.activation,
                    ExpertActivation::Swiglu | ExpertActivation::ClampedSwiglu
                ) {
                    return Err(refuse(
                        policy,
                        "model.moe.activation",
                        "experts other than (clamped) SwiGLU",
                    ));
                }
                let [n, fi, r, ex, sh] = self.moe(e)?;
                s.norms = add(&[s.norms, n])?;
                (s.ffn_input, s.router, s.experts, s.shared) = (fi, r, ex, sh);
            }
            Some(Ffn::Dense { width, activation }) => {
                if !matches!(
                    activation,
                    ExpertActivation::Swiglu | ExpertActivation::ClampedSwiglu
                ) {
                    return Err(refuse(
                        policy,
                        "model.moe.activation",
                        "FFNs other than (clamped) SwiGLU",
                    ));
                }
                let [n, fi, d] = self.dense(*width)?;
                s.norms = add(&[s.norms, n])?;
                (s.ffn_input, s.dense) = (fi, d);
            }
            None => {}
        }
        Ok(s)
    }
}

/// The count's constants for `stack` under `policy`, with the refusals checked.
fn step(
    stack: &Stack,
    counting: &Counting,
    policy: ActivationPolicy,
    split: Split,
) -> Result<Step> {
    Consumer::Activations.check(stack)?;
    let recompute = Recompute::of(policy, counting)?;
    if let Some(f) = REFUSED.into_iter().find(|&f| stack.has(f)) {
        return Err(refuse(policy, f.field(), f.words()));
    }
    let b = u128::from(counting.activation_bytes);
    if b != 2 && b != 4 {
        return Err(refuse(
            policy,
            "counting.activation_bytes",
            "activation bytes other than 2 (bf16) or 4 (fp32): fp8 saves quantized copies",
        ));
    }
    if recompute.has(M::MlaUpProj) && !stack.has(Feature::Mla) {
        return Err(Error::invalid(
            "counting.recompute_modules",
            "mla_up_proj needs multi-head latent attention (Megatron-Core refuses it otherwise)",
        ));
    }
    let layer_norm = stack.kinds().iter().any(|k| k.layer.norms.bias);
    Ok(Step {
        recompute,
        b,
        h: u128::from(stack.hidden()),
        stat: if layer_norm { 8 } else { 4 },
        split,
    })
}

/// What the layers of `kinds` (all of `stack`'s, or one pipeline chunk's) save under the
/// Megatron `policy` and `split`, by component, in the module's units (bytes per token
/// summed over the `tp · cp` GPUs holding it).
pub fn activations(
    stack: &Stack,
    kinds: &[LayerKind],
    counting: &Counting,
    policy: ActivationPolicy,
    split: Split,
) -> Result<ActivationBreakdown> {
    let st = step(stack, counting, policy, split)?;
    let mut acc = Saves::default();
    for kind in kinds {
        acc = st.layer(kind, policy)?.add_times(kind.executions, acc)?;
    }
    let at = |x: u128| -> Result<ActivationBytes> {
        u64::try_from(x)
            .map(ActivationBytes::from_int)
            .map_err(|_| over())
    };
    Ok(ActivationBreakdown {
        layer_inputs: at(acc.layer_input)?,
        norms: at(acc.norms)?,
        attention: at(acc.attention)?,
        scores: at(acc.scores)?,
        indexer: ActivationBytes::ZERO,
        ffn_input: at(acc.ffn_input)?,
        router: at(acc.router)?,
        experts: at(acc.experts)?,
        shared: at(acc.shared)?,
        dense: at(acc.dense)?,
    })
}

/// The transient bytes (module units) of one layer execution of `kinds` at its backward:
/// the largest over the kinds of what recomputation rematerializes (what `megatron` saves
/// less what `policy` saves: the layer being recomputed holds it until its backward ends),
/// plus, for a MoE layer, the dispatch buffers alive beside the saved tensors during its
/// forward: the permuted local copies (`b·H` per routed copy, referenced by `MoELayer`'s
/// `custom_forward` until it returns) and the all-to-all's receive buffer (`etp·b·H` per
/// routed copy, until the sort by local expert replaces it). `(recompute, dispatch)`.
pub fn transients(
    stack: &Stack,
    kinds: &[LayerKind],
    counting: &Counting,
    policy: ActivationPolicy,
    split: Split,
) -> Result<(u128, u128)> {
    let st = step(stack, counting, policy, split)?;
    let none = Step {
        recompute: Recompute::None,
        ..st
    };
    let (mut recompute, mut dispatch) = (0u128, 0u128);
    for kind in kinds {
        let full = none.layer(kind, policy)?.total()?;
        let kept = st.layer(kind, policy)?.total()?;
        recompute = recompute.max(full.saturating_sub(kept));
        if let Some(Ffn::Moe(e)) = &kind.layer.ffn {
            let copies = u128::from(e.top_k);
            let per = mul(mul(copies, st.b * st.h)?, 1 + u128::from(split.etp))?;
            dispatch = dispatch.max(per);
        }
    }
    Ok((recompute, dispatch))
}

/// What the last pipeline stage saves per token beyond its layers (module units): the final
/// norm's input and `rstd`, the LM head's input (the normed sequence-parallel shard, saved
/// by Megatron's `ColumnParallelLinear`), and the vocabulary-parallel cross entropy's
/// saves, on each of the `tp` GPUs over the whole sequence: the fp32 softmax (`4·V/tp`),
/// the target mask (bool) and the masked target (int64) (`_VocabParallelCrossEntropy`,
/// fused or not).
pub fn head(stack: &Stack, vocab: u64, counting: &Counting, split: Split) -> Result<u128> {
    let b = u128::from(counting.activation_bytes);
    let h = u128::from(stack.hidden());
    let stat = if stack.kinds().iter().any(|k| k.layer.norms.bias) {
        8
    } else {
        4
    };
    add(&[
        mul(2, b * h)?,
        stat,
        mul(4, u128::from(vocab))?,
        mul(9, u128::from(split.tp))?,
    ])
}
