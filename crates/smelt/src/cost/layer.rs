//! One layer's pieces, shared by the parameter, FLOP and KV counts: the attention block (GQA
//! or MLA), the sparse attention indexer and the MoE FFN, and how often each kind of layer
//! runs. [`LayerCost::of`] computes them once per model; every count of the cost model reads
//! them from that one value.

use crate::error::Result;
use crate::model::{AttentionBias, DELTA_RULE_CHUNK, GatedDeltaNet, Mamba2, Mixer, Model, QkNorm};
use crate::units::{add, product};

/// Everything the counts need about one model's layers, computed once.
#[derive(Debug, Clone, Copy)]
pub(super) struct LayerCost {
    /// The attention block of every windowed layer, and of every full-attention layer
    /// unless the model gives those their own shape.
    pub attention: AttentionBlock,
    /// The attention block of the full-attention layers (`attention` unless
    /// `[model.full_attention]` gives their shape).
    pub full_attention: AttentionBlock,
    /// The indexer of every layer, if the model has one.
    pub indexer: Option<IndexerBlock>,
    /// The MoE FFN of the MoE layers.
    pub moe: MoeBlock,
    /// The recurrent token mixer of the recurrent layers, if the model has any.
    pub recurrent: Option<RecurrentBlock>,
    /// How often each kind of layer runs per forward pass.
    pub runs: Executions,
}

impl LayerCost {
    /// The layers of `m`.
    pub fn of(m: &Model) -> Result<Self> {
        let (attention, full_attention) = attention_blocks(m)?;
        Ok(Self {
            attention,
            full_attention,
            indexer: indexer(m)?,
            moe: moe(m)?,
            recurrent: recurrent(m)?,
            runs: Executions::of(m)?,
        })
    }
}

/// Layer executions per forward pass, by kind: `total = moe + dense + mixer-only =
/// attention + recurrent + FFN-only`, `attention = full + windowed` (the windowed layers
/// have the model's attention shape, the full ones `[model.full_attention]`'s when it gives
/// one).
#[derive(Debug, Clone, Copy)]
pub(super) struct Executions {
    /// All of them ([`Model::checked_executions`]).
    pub total: u64,
    /// Those of MoE layers.
    pub moe: u64,
    /// Those of dense-FFN layers (a looped one counts once per visit).
    pub dense: u64,
    /// Those of layers with a recurrent token mixer.
    pub recurrent: u64,
    /// Those of layers with full attention.
    pub full: u64,
    /// Those of windowed layers.
    pub windowed: u64,
}

impl Executions {
    /// The executions of `m`'s layers.
    fn of(m: &Model) -> Result<Self> {
        let total = m.checked_executions()?;
        let dense = m.dense_executions();
        let windowed = m.window.as_ref().map_or(0, |w| m.executions_of(&w.layers));
        let recurrent = m.recurrent_executions();
        // Validated: recurrent, FFN-only and windowed layers are disjoint, and so are dense
        // and mixer-only ones.
        let attention = total - recurrent - m.executions_of(m.ffn_only());
        Ok(Self {
            total,
            moe: total - dense - m.executions_of(m.mixer_only()),
            dense,
            recurrent,
            full: attention - windowed,
            windowed,
        })
    }
}

/// The attention block of one layer.
#[derive(Debug, Clone, Copy)]
pub(super) struct AttentionBlock {
    /// Projection weights, their biases and the sinks.
    pub params: u64,
    /// The block's own RMSNorm weights (q/k norms, MLA's latent norms; not the layer norms).
    pub norms: u64,
    /// Multiply-adds per token of the projections.
    pub macs: u64,
    /// Query/key width plus value width over all heads: the attention core's width.
    pub core_width: u64,
    /// KV-cache elements per token of one execution (with an indexer's key).
    pub kv: u64,
}

const WHAT: &str = "params.attention";

/// The attention blocks of `m`'s layers: `(windowed, full)`, one block when the
/// full-attention layers have no shape of their own (`[model.full_attention]`).
fn attention_blocks(m: &Model) -> Result<(AttentionBlock, AttentionBlock)> {
    let block = attention(m, m.kv_heads, m.head_dim, false)?;
    let full = match &m.full_attention {
        Some(fa) => attention(m, fa.kv_heads, fa.head_dim, fa.k_eq_v)?,
        None => block,
    };
    Ok((block, full))
}

/// A GQA block of `kv_heads` key/value heads of width `head_dim` (queries: `m.heads` of
/// that width), without a value projection when `k_eq_v`: `m`'s layers, or its
/// full-attention layers' shape.
fn gqa(m: &Model, kv_heads: u64, head_dim: u64, k_eq_v: bool) -> Result<AttentionBlock> {
    let h = m.hidden;
    let q = product(&[m.heads, head_dim], WHAT)?;
    let kv = product(&[kv_heads, head_dim], WHAT)?;
    // Without a value projection (k_eq_v), the values are the keys' projection.
    let v = if k_eq_v { 0 } else { kv };
    let qkv = add(add(q, kv, WHAT)?, v, WHAT)?;
    // The output gate doubles the query projection's columns.
    let gate = if m.attention_gate { q } else { 0 };
    let q_proj = add(qkv, gate, WHAT)?;
    let weights = add(product(&[h, q_proj], WHAT)?, product(&[q, h], WHAT)?, WHAT)?;
    let biases = match m.attention_bias {
        AttentionBias::None => 0,
        AttentionBias::Qkv => qkv,
        AttentionBias::All => add(qkv, h, WHAT)?,
    };
    let norms = match m.qk_norm {
        QkNorm::None => 0,
        QkNorm::PerHead => product(&[2, head_dim], "params.norms")?,
        QkNorm::Full => add(q, kv, "params.norms")?,
    };
    Ok(AttentionBlock {
        params: add(weights, biases, WHAT)?,
        norms,
        macs: weights,
        core_width: product(&[2, q], WHAT)?,
        // Keys and values are cached apart even with k_eq_v: they differ after their norms.
        kv: product(&[2, kv], "kv_cache.elements")?,
    })
}

/// The attention block of `m`'s layers, GQA of `kv_heads` heads of width `head_dim` (with
/// `k_eq_v`, no value projection) or MLA.
fn attention(m: &Model, kv_heads: u64, head_dim: u64, k_eq_v: bool) -> Result<AttentionBlock> {
    let h = m.hidden;
    let sinks = if m.attention_sinks { m.heads } else { 0 };
    let block = match &m.mla {
        None => gqa(m, kv_heads, head_dim, k_eq_v)?,
        Some(a) => {
            let qk = add(a.qk_nope_head_dim, a.qk_rope_head_dim, WHAT)?;
            let q_out = product(&[m.heads, qk], WHAT)?;
            let v_out = product(&[m.heads, a.v_head_dim], WHAT)?;
            let q = if a.q_lora_rank > 0 {
                add(
                    product(&[h, a.q_lora_rank], WHAT)?,
                    product(&[a.q_lora_rank, q_out], WHAT)?,
                    WHAT,
                )?
            } else {
                product(&[h, q_out], WHAT)?
            };
            let latent = add(a.kv_lora_rank, a.qk_rope_head_dim, WHAT)?;
            let kv_a = product(&[h, latent], WHAT)?;
            let kv_b = product(
                &[
                    a.kv_lora_rank,
                    m.heads,
                    add(a.qk_nope_head_dim, a.v_head_dim, WHAT)?,
                ],
                WHAT,
            )?;
            let o = product(&[v_out, h], WHAT)?;
            let weights = [kv_a, kv_b, o]
                .into_iter()
                .try_fold(q, |acc, x| add(acc, x, WHAT))?;
            AttentionBlock {
                params: weights,
                norms: add(a.q_lora_rank, a.kv_lora_rank, "params.norms")?,
                macs: weights,
                core_width: add(q_out, v_out, WHAT)?,
                kv: latent,
            }
        }
    };
    // The indexer's key is cached beside the latent.
    let indexed = m.indexer.as_ref().map_or(0, |ix| ix.head_dim);
    Ok(AttentionBlock {
        params: add(block.params, sinks, WHAT)?,
        kv: add(block.kv, indexed, "kv_cache.elements")?,
        ..block
    })
}

/// The sparse attention indexer of one layer.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct IndexerBlock {
    /// Its weights and its key's LayerNorm.
    pub params: u64,
    /// Multiply-adds per token of its projections.
    pub macs: u64,
    /// Multiply-adds per query-key pair it scores: `heads·(head_dim + 1)`.
    pub score_width: u64,
}

/// The indexer of `m`'s layers, if it has one (validated: with a query latent).
fn indexer(m: &Model) -> Result<Option<IndexerBlock>> {
    const WHAT: &str = "params.indexer";
    let (Some(ix), Some(a)) = (&m.indexer, &m.mla) else {
        return Ok(None);
    };
    let q = product(&[a.q_lora_rank, ix.heads, ix.head_dim], WHAT)?;
    let k = product(&[m.hidden, ix.head_dim], WHAT)?;
    let w = product(&[m.hidden, ix.heads], WHAT)?;
    let macs = add(add(q, k, WHAT)?, w, WHAT)?;
    Ok(Some(IndexerBlock {
        params: add(macs, product(&[2, ix.head_dim], WHAT)?, WHAT)?,
        macs,
        score_width: product(&[ix.heads, add(ix.head_dim, 1, WHAT)?], WHAT)?,
    }))
}

/// The MoE FFN of one layer.
#[derive(Debug, Clone, Copy)]
pub(super) struct MoeBlock {
    /// Routed experts' weights and biases: all of them, and the `top_k` a token uses.
    pub experts: u64,
    pub active_experts: u64,
    /// Router weights, bias and scales.
    pub router: u64,
    /// Shared experts and their gate.
    pub shared: u64,
    /// Multiply-adds per token: router, the `top_k` routed experts, shared experts and gate.
    pub router_macs: u64,
    pub expert_macs: u64,
    pub shared_macs: u64,
}

/// The MoE FFN of `m`'s MoE layers.
fn moe(m: &Model) -> Result<MoeBlock> {
    let (h, e) = (m.hidden, &m.moe);
    let matrices = e.activation.matrices();
    let weights = product(&[matrices, h, e.expert_ffn], "params.experts")?;
    let bias = if e.expert_bias {
        add(
            product(&[2, e.expert_ffn], "params.experts")?,
            h,
            "params.experts",
        )?
    } else {
        0
    };
    let one = add(weights, bias, "params.experts")?;
    let router_weights = product(&[h, e.experts], "params.router")?;
    let router_bias = if e.router_bias { e.experts } else { 0 };
    // The router's per-dimension and per-expert scales.
    let router_scale = if e.router_scale {
        add(h, e.experts, "params.router")?
    } else {
        0
    };
    let shared_experts = product(
        &[matrices, h, e.shared_ffn, e.shared_experts],
        "params.shared",
    )?;
    let gate = if e.shared_gate { h } else { 0 };
    Ok(MoeBlock {
        experts: product(&[one, e.experts], "params.experts")?,
        active_experts: product(&[one, e.top_k], "params.experts")?,
        router: add(
            add(router_weights, router_bias, "params.router")?,
            router_scale,
            "params.router",
        )?,
        shared: add(shared_experts, gate, "params.shared")?,
        router_macs: router_weights,
        expert_macs: product(&[weights, e.top_k], "flops.experts")?,
        shared_macs: add(shared_experts, gate, "flops.shared")?,
    })
}

/// The recurrent token mixer of one layer, for one sequence of `T` tokens.
///
/// Gated DeltaNet, with `n_k` query/key heads of width `d_k`, `n_v` value heads of width
/// `d_v`, key width `K = n_k·d_k`, value width `V = n_v·d_v`, a `w`-tap convolution over
/// `c = 2K + V` channels and chunks of `C = 64`, as `torch_chunk_gated_delta_rule` runs it
/// on a sequence padded to `P = C·⌈T/C⌉`:
/// * projections: `H·(2K + 2V + 2·n_v)` (q, k, v, z, b, a) `+ V·H` (out) per token;
/// * convolution: `(T + w − 1)·c·w` per sequence (`Conv1d` with `padding = w − 1` computes
///   `T + w − 1` outputs per channel, the last `w − 1` dropped);
/// * delta rule, per value head and chunk (queries and keys repeated to the value heads):
///   `k_β·kᵀ` and `q·kᵀ` (`2·C²·d_k`), then in the scan `k_cumdecay·S` and `q·S`
///   (`2·C·d_k·d_v`), `attn·v_new` (`C²·d_v`) and `kᵀ·v_new` (`C·d_k·d_v`): per sequence
///   `P·n_v·(2·C·d_k + C·d_v + 3·d_k·d_v)`.
///
/// Not counted: the two unit-triangular solves per chunk (`solve_triangular`, about
/// `C²·(d_k + d_v)/2`), the cumulative sums, exponentials, masks, the l2 norms of q and k,
/// the scaling, `β`, the decays, the gated RMSNorm and the activations, as elsewhere.
///
/// Mamba-2, with `n_h` heads of width `d`, inner width `I = n_h·d`, state `N`, `g` groups, a
/// `w`-tap convolution over `c = I + 2·g·N` channels and chunks of `C` (the config's
/// `chunk_size`), as `NemotronHMamba2Mixer.torch_forward` runs it on a sequence padded to
/// `P = C·⌈T/C⌉` in `Z = P/C + 1` state slots (a zero initial state, then one per chunk):
/// * projections: `H·(2I + 2·g·N + n_h)` (`in_proj`: z, x, B, C, dt) `+ I·H` (`out_proj`);
/// * convolution: `(T + w − 1)·c·w`, as for Gated DeltaNet;
/// * the SSD scan, per head (`B`, `C` repeated to the heads): per chunk `C·Bᵀ` (`C²·N`), the
///   masked scores times `x` (`C²·d`), the chunk's state `Σ B·x` (`C·N·d`) and its read-out
///   `C·state` (`C·N·d`): `P·n_h·(C·N + C·d + 2·N·d)`; and the chunk-to-chunk recurrence
///   computed as a `Z x Z` decay matrix applied to the `Z` states (`Z²·n_h·N·d`).
///
/// Not counted: the elementwise products by `dt`, the decays `L` and `exp(A_cumsum)`, the
/// `D` skip, the softplus of `dt`, cumulative sums, exponentials, masks, the gated RMSNorm
/// and the activations, as elsewhere.
#[derive(Debug, Clone, Copy)]
pub(super) struct RecurrentBlock {
    /// Every weight: projections, convolution, `A_log`, `dt_bias`, the gated norm.
    pub params: u64,
    /// Multiply-adds per token of the projections.
    pub macs: u64,
    /// Convolution channels times taps (`c·w`): multiply-adds per convolution output.
    pub conv_macs: u64,
    /// Taps of the convolution.
    pub conv_kernel: u64,
    /// Multiply-adds of the delta rule per padded token: `n_v·(2·C·d_k + C·d_v + 3·d_k·d_v)`.
    pub core_macs: u64,
    /// Chunk length `C`.
    pub chunk: u64,
    /// Multiply-adds per pair of state slots of the chunk-to-chunk recurrence (Mamba-2's
    /// `n_h·N·d`; 0 for Gated DeltaNet, whose scan is counted per chunk).
    pub slot_macs: u64,
    /// The state one sequence holds per layer execution, elements: the convolution's last
    /// `w` inputs per channel (`c·w`, as Transformers' cache holds it) and the recurrence's
    /// (the delta rule's `n_v·d_k·d_v`, Mamba-2's SSM state `n_h·d·N`).
    pub conv_state: u64,
    pub delta_state: u64,
}

impl RecurrentBlock {
    /// Multiply-adds of the convolution and the scan over one sequence of `t` tokens.
    pub fn sequence_macs(&self, t: u64) -> Result<u64> {
        const WHAT: &str = "flops.recurrent";
        let outputs = add(t, self.conv_kernel - 1, WHAT)?;
        let chunks = t.div_ceil(self.chunk);
        let padded = product(&[chunks, self.chunk], WHAT)?;
        let slots = add(chunks, 1, WHAT)?;
        [
            product(&[padded, self.core_macs], WHAT)?,
            product(&[slots, slots, self.slot_macs], WHAT)?,
        ]
        .into_iter()
        .try_fold(product(&[outputs, self.conv_macs], WHAT)?, |s, x| {
            add(s, x, WHAT)
        })
    }
}

/// The recurrent mixer of `m`'s recurrent layers, if it has any.
fn recurrent(m: &Model) -> Result<Option<RecurrentBlock>> {
    let Some(r) = &m.recurrent else {
        return Ok(None);
    };
    match &r.mixer {
        Mixer::GatedDeltanet(g) => gated_deltanet(m.hidden, g).map(Some),
        Mixer::Mamba2(x) => mamba2(m.hidden, x).map(Some),
    }
}

/// A Gated DeltaNet mixer on a residual stream of width `h`.
fn gated_deltanet(h: u64, g: &GatedDeltaNet) -> Result<RecurrentBlock> {
    const WHAT: &str = "params.recurrent";
    let (k, v) = (
        product(&[g.key_heads, g.key_head_dim], WHAT)?,
        product(&[g.value_heads, g.value_head_dim], WHAT)?,
    );
    let channels = add(product(&[2, k], WHAT)?, v, WHAT)?;
    let in_width = [product(&[2, v], WHAT)?, product(&[2, g.value_heads], WHAT)?]
        .into_iter()
        .try_fold(product(&[2, k], WHAT)?, |s, x| add(s, x, WHAT))?;
    let macs = add(
        product(&[h, in_width], WHAT)?,
        product(&[v, h], WHAT)?,
        WHAT,
    )?;
    let conv_macs = product(&[channels, g.conv_kernel], WHAT)?;
    let c = DELTA_RULE_CHUNK;
    let (dk, dv) = (g.key_head_dim, g.value_head_dim);
    let per_head = [product(&[c, dv], WHAT)?, product(&[3, dk, dv], WHAT)?]
        .into_iter()
        .try_fold(product(&[2, c, dk], WHAT)?, |s, x| add(s, x, WHAT))?;
    // The gated RMSNorm's weight is one vector of `d_v`, shared by the value heads.
    let params = [conv_macs, product(&[2, g.value_heads], WHAT)?, dv]
        .into_iter()
        .try_fold(macs, |s, x| add(s, x, WHAT))?;
    Ok(RecurrentBlock {
        params,
        macs,
        conv_macs,
        conv_kernel: g.conv_kernel,
        core_macs: product(&[g.value_heads, per_head], WHAT)?,
        chunk: c,
        slot_macs: 0,
        conv_state: conv_macs,
        delta_state: product(&[g.value_heads, dk, dv], "kv_cache.state")?,
    })
}

/// A Mamba-2 mixer on a residual stream of width `h`.
fn mamba2(h: u64, x: &Mamba2) -> Result<RecurrentBlock> {
    const WHAT: &str = "params.recurrent";
    let inner = product(&[x.heads, x.head_dim], WHAT)?;
    let bc = product(&[2, x.groups, x.state], WHAT)?;
    let channels = add(inner, bc, WHAT)?;
    // in_proj: z (inner), x·B·C (channels), dt (heads).
    let in_width = add(add(inner, channels, WHAT)?, x.heads, WHAT)?;
    let macs = add(
        product(&[h, in_width], WHAT)?,
        product(&[inner, h], WHAT)?,
        WHAT,
    )?;
    let conv_macs = product(&[channels, x.conv_kernel], WHAT)?;
    let conv_bias = if x.conv_bias { channels } else { 0 };
    let proj_bias = if x.proj_bias {
        add(in_width, h, WHAT)?
    } else {
        0
    };
    // A_log, D and dt_bias per head; the gated RMSNorm's weight of the inner width.
    let params = [
        conv_macs,
        conv_bias,
        proj_bias,
        product(&[3, x.heads], WHAT)?,
        inner,
    ]
    .into_iter()
    .try_fold(macs, |s, y| add(s, y, WHAT))?;
    let (c, n, d) = (x.chunk, x.state, x.head_dim);
    let per_head = [product(&[c, d], WHAT)?, product(&[2, n, d], WHAT)?]
        .into_iter()
        .try_fold(product(&[c, n], WHAT)?, |s, y| add(s, y, WHAT))?;
    Ok(RecurrentBlock {
        params,
        macs,
        conv_macs,
        conv_kernel: x.conv_kernel,
        core_macs: product(&[x.heads, per_head], WHAT)?,
        chunk: c,
        slot_macs: product(&[x.heads, n, d], WHAT)?,
        conv_state: conv_macs,
        delta_state: product(&[x.heads, d, n], "kv_cache.state")?,
    })
}
