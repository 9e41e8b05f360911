//! The cost of the stack's layers, shared by the parameter, FLOP and KV counts: for each
//! kind of layer of the [`Stack`] (module docs of [`crate::model::Stack`]), its attention
//! block (GQA or MLA, with its window and indexer), its recurrent mixer, its FFN (the MoE
//! or a dense FFN) and its norms, with how many physical layers it has and how often they
//! run. [`StackCost::of`] computes them once per model; every count of the cost model reads
//! them from that one value.

use crate::error::{Error, Result};
use crate::model::{
    AttentionBias, AttentionLayer, AttentionShape, AttentionWindow, DELTA_RULE_CHUNK, Ffn,
    GatedDeltaNet, Layer, LayerKind, Mamba2, Mixer, Moe, QkNorm, Stack, TokenMixer,
};
use crate::units::{add, product};

/// Everything the counts need about one model's layers, computed once.
#[derive(Debug, Clone)]
pub(super) struct StackCost {
    /// One entry per kind of layer ([`Stack::kinds`]).
    pub kinds: Vec<KindCost>,
    /// The block of each MTP module (run `modules` times), if the model has any.
    pub mtp: Option<KindCost>,
    /// Parameters of one hidden-width norm: `H`, `2·H` with a bias.
    pub norm: u64,
}

impl StackCost {
    /// The cost of `stack`'s layers.
    pub fn of(stack: &Stack) -> Result<Self> {
        let h = stack.hidden();
        Ok(Self {
            kinds: (stack.kinds().iter())
                .map(|k| KindCost::of(h, k))
                .collect::<Result<_>>()?,
            mtp: stack
                .mtp()
                .map(|m| {
                    KindCost::of(
                        h,
                        &LayerKind {
                            layer: m.layer.clone(),
                            physical: m.modules,
                            executions: m.modules,
                        },
                    )
                })
                .transpose()?,
            norm: stack.norm_params(),
        })
    }

    /// The recurrent mixer's block (one kind per model), if any.
    pub fn recurrent(&self) -> Option<RecurrentBlock> {
        self.kinds.iter().find_map(|k| k.recurrent)
    }

    /// Executions of the recurrent layers.
    pub fn recurrent_executions(&self) -> u64 {
        (self.kinds.iter())
            .filter(|k| k.recurrent.is_some())
            .fold(0u64, |n, k| n.saturating_add(k.executions))
    }
}

/// The cost of one kind of layer.
#[derive(Debug, Clone)]
pub(super) struct KindCost {
    /// Its physical layers.
    pub physical: u64,
    /// Their executions per forward pass.
    pub executions: u64,
    /// Its attention block, if its mixer is attention.
    pub attention: Option<AttentionCost>,
    /// Its recurrent mixer, if it has one.
    pub recurrent: Option<RecurrentBlock>,
    /// Its FFN, if it has one.
    pub ffn: Option<FfnCost>,
    /// The norm weights of one layer: its hidden-width norms, the MoE's branch norms and
    /// the attention block's own (q/k norms, MLA's latent norms).
    pub norms: u64,
}

impl KindCost {
    /// The cost of the layers of `kind`, on a residual stream of width `h`.
    pub fn of(h: u64, kind: &LayerKind) -> Result<Self> {
        let Layer { mixer, ffn, norms } = &kind.layer;
        let norm = if norms.bias {
            product(&[2, h], "params.norms")?
        } else {
            h
        };
        let attention = match mixer {
            Some(TokenMixer::Attention(a)) => Some(AttentionCost {
                block: attention(h, a)?,
                indexer: indexer(h, a)?,
                window: a.window,
            }),
            _ => None,
        };
        let recurrent = match mixer {
            Some(TokenMixer::Recurrent(Mixer::GatedDeltanet(g))) => Some(
                gated_deltanet(h, g)
                    .map_err(|e| RecurrentKind::GatedDeltanet.params_overflow(e))?,
            ),
            Some(TokenMixer::Recurrent(Mixer::Mamba2(x))) => {
                Some(mamba2(h, x).map_err(|e| RecurrentKind::Mamba2.params_overflow(e))?)
            }
            _ => None,
        };
        let (ffn, branch) = match ffn {
            Some(Ffn::Moe(m)) => (Some(FfnCost::Moe(moe(h, m)?)), m.branch_norms),
            Some(Ffn::Dense { width, activation }) => (
                Some(FfnCost::Dense {
                    weights: product(&[activation.matrices(), h, *width], "params.dense")?,
                }),
                false,
            ),
            None => (None, false),
        };
        let branch_norms = if branch { 3 } else { 0 };
        let norms = [
            product(&[branch_norms, norm], "params.norms")?,
            attention.as_ref().map_or(0, |a| a.block.norms),
        ]
        .into_iter()
        .try_fold(product(&[norms.count, norm], "params.norms")?, |s, x| {
            add(s, x, "params.norms")
        })?;
        Ok(Self {
            physical: kind.physical,
            executions: kind.executions,
            attention,
            recurrent,
            ffn,
            norms,
        })
    }
}

/// A layer's attention: its block, its indexer and its window.
#[derive(Debug, Clone, Copy)]
pub(super) struct AttentionCost {
    /// The block.
    pub block: AttentionBlock,
    /// Its sparse attention indexer, if any.
    pub indexer: Option<IndexerBlock>,
    /// Its window, if any.
    pub window: Option<AttentionWindow>,
}

/// A layer's FFN.
#[derive(Debug, Clone, Copy)]
pub(super) enum FfnCost {
    /// The MoE.
    Moe(MoeBlock),
    /// A dense FFN: its weights, which are also its multiply-adds per token.
    Dense {
        /// `matrices·H·width`.
        weights: u64,
    },
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

/// A GQA block of `heads` query heads and `kv_heads` key/value heads of width `head_dim`,
/// without a value projection when `k_eq_v`, as `a` has it (gate, biases, q/k norms).
fn gqa(
    h: u64,
    a: &AttentionLayer,
    [heads, kv_heads, head_dim]: [u64; 3],
    k_eq_v: bool,
) -> Result<AttentionBlock> {
    let q = product(&[heads, head_dim], WHAT)?;
    let kv = product(&[kv_heads, head_dim], WHAT)?;
    // Without a value projection (k_eq_v), the values are the keys' projection.
    let v = if k_eq_v { 0 } else { kv };
    let qkv = add(add(q, kv, WHAT)?, v, WHAT)?;
    // The output gate doubles the query projection's columns.
    let gate = if a.gate { q } else { 0 };
    let q_proj = add(qkv, gate, WHAT)?;
    let weights = add(product(&[h, q_proj], WHAT)?, product(&[q, h], WHAT)?, WHAT)?;
    let biases = match a.bias {
        AttentionBias::None => 0,
        AttentionBias::Qkv => qkv,
        AttentionBias::All => add(qkv, h, WHAT)?,
    };
    let norms = match a.qk_norm {
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

/// The attention block `a` on a residual stream of width `h`: GQA of its shape (with
/// `k_eq_v`, no value projection) or MLA.
fn attention(h: u64, a: &AttentionLayer) -> Result<AttentionBlock> {
    let sinks = if a.sinks { a.shape.heads() } else { 0 };
    let block = match &a.shape {
        AttentionShape::Gqa {
            heads,
            kv_heads,
            head_dim,
            k_eq_v,
        } => gqa(h, a, [*heads, *kv_heads, *head_dim], *k_eq_v)?,
        AttentionShape::Mla { heads, mla: a } => {
            let heads = *heads;
            let qk = add(a.qk_nope_head_dim, a.qk_rope_head_dim, WHAT)?;
            let q_out = product(&[heads, qk], WHAT)?;
            let v_out = product(&[heads, a.v_head_dim], WHAT)?;
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
                    heads,
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
    let indexed = a.indexer.as_ref().map_or(0, |ix| ix.head_dim);
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

/// The indexer of the attention `a` on a residual stream of width `h`, if it has one
/// (validated: with a query latent).
fn indexer(h: u64, a: &AttentionLayer) -> Result<Option<IndexerBlock>> {
    const WHAT: &str = "params.indexer";
    let (Some(ix), AttentionShape::Mla { mla: a, .. }) = (&a.indexer, &a.shape) else {
        return Ok(None);
    };
    let q = product(&[a.q_lora_rank, ix.heads, ix.head_dim], WHAT)?;
    let k = product(&[h, ix.head_dim], WHAT)?;
    let w = product(&[h, ix.heads], WHAT)?;
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

/// The MoE FFN `e` on a residual stream of width `h`.
fn moe(h: u64, e: &Moe) -> Result<MoeBlock> {
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
    /// Which mixer it is (for the refusal of a count too large for 64 bits).
    pub kind: RecurrentKind,
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

/// A recurrent mixer's kind, for the refusal of a count of it too large for 64 bits: which
/// budget overflows, of what, and which of the mixer's fields to reduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecurrentKind {
    /// Gated DeltaNet.
    GatedDeltanet,
    /// Mamba-2.
    Mamba2,
}

/// The budget a count belongs to, in a refusal's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Budget {
    /// Parameters.
    Params,
    /// FLOPs per token.
    Flops,
    /// The KV cache (with the recurrent state).
    Kv,
}

impl RecurrentKind {
    /// The model file's table of the mixer.
    fn table(self) -> &'static str {
        match self {
            RecurrentKind::GatedDeltanet => "model.recurrent.mixer.gated_deltanet",
            RecurrentKind::Mamba2 => "model.recurrent.mixer.mamba2",
        }
    }

    /// The mixer in words.
    fn words(self) -> &'static str {
        match self {
            RecurrentKind::GatedDeltanet => "Gated DeltaNet",
            RecurrentKind::Mamba2 => "Mamba-2",
        }
    }

    /// The mixer's fields a count of `budget` grows with, largest effect first.
    fn knobs(self, budget: Budget) -> &'static str {
        match (self, budget) {
            (RecurrentKind::Mamba2, Budget::Params) => "heads, head_dim, state or groups",
            (RecurrentKind::Mamba2, _) => "state, head_dim or heads",
            (RecurrentKind::GatedDeltanet, Budget::Params) => {
                "value_heads, key_heads, value_head_dim or key_head_dim"
            }
            (RecurrentKind::GatedDeltanet, _) => "value_heads, value_head_dim or key_head_dim",
        }
    }

    /// `e`, an overflow of the `budget` of `what` (the quantity, e.g. `flops.recurrent`, with
    /// what it counts), as a refusal naming the budget and the fields to reduce (`also`: a
    /// field outside the mixer's table that the count also grows with); any other error
    /// unchanged.
    pub fn overflow(self, e: Error, budget: Budget, what: &str, also: Option<&str>) -> Error {
        if !matches!(e, Error::Overflow { .. }) {
            return e;
        }
        let knobs = self.knobs(budget);
        let budget = match budget {
            Budget::Params => "the parameter budget",
            Budget::Flops => "the FLOP budget",
            Budget::Kv => "the KV budget",
        };
        let table = self.table();
        let also = also.map_or(String::new(), |a| format!(", or {a}"));
        Error::invalid(
            table,
            format!(
                "{budget} of {what} of the {} layers overflows 64 bits (the model is too large \
                 to count exactly): reduce {table}'s {knobs}{also}",
                self.words(),
            ),
        )
    }

    /// [`Self::overflow`] of the mixer's parameters.
    fn params_overflow(self, e: Error) -> Error {
        self.overflow(
            e,
            Budget::Params,
            "params.recurrent (the weights)",
            Some("model.hidden"),
        )
    }
}

impl RecurrentBlock {
    /// Multiply-adds of the convolution and the scan over one sequence of `t` tokens.
    pub fn sequence_macs(&self, t: u64) -> Result<u64> {
        self.sequence_macs_unchecked(t).map_err(|e| {
            self.kind.overflow(
                e,
                Budget::Flops,
                &format!("flops.recurrent (the convolution and scan over one {t}-token sequence)"),
                Some("workload.context"),
            )
        })
    }

    /// [`Self::sequence_macs`], an overflow not yet named.
    fn sequence_macs_unchecked(&self, t: u64) -> Result<u64> {
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
        kind: RecurrentKind::GatedDeltanet,
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
        kind: RecurrentKind::Mamba2,
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
