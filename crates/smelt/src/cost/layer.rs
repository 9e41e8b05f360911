//! The cost of the stack's layers, shared by the parameter, FLOP and KV counts: for each
//! kind of layer of the [`Stack`] (module docs of [`crate::model::Stack`]), its attention
//! block (GQA or MLA, with its window and indexer), its recurrent mixer, its FFN (the MoE
//! or a dense FFN) and its norms, with how many physical layers it has and how often they
//! run. [`StackCost::of`] computes them once per model; every count of the cost model reads
//! them from that one value.

use crate::error::Result;
use crate::model::{
    AttentionBias, AttentionLayer, AttentionShape, AttentionWindow, Ffn, Layer, LayerKind, Moe,
    QkNorm, RecurrentBlock, Stack, TokenMixer,
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
            Some(TokenMixer::Recurrent(m)) => Some(m.block(h)?),
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
        QkNorm::None | QkNorm::L2 => 0,
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
    /// LatentMoE's projections down to the experts' width and back: their weights, which
    /// are also their multiply-adds per token (0 without).
    pub latent: u64,
}

/// The MoE FFN `e` on a residual stream of width `h`.
fn moe(h: u64, e: &Moe) -> Result<MoeBlock> {
    let matrices = e.activation.matrices();
    // The routed experts read and write the latent width where there is one.
    let width = e.expert_width(h);
    let weights = product(&[matrices, width, e.expert_ffn], "params.experts")?;
    let bias = if e.expert_bias {
        add(
            product(&[2, e.expert_ffn], "params.experts")?,
            width,
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
        latent: match e.latent {
            Some(l) => product(&[2, h, l], "params.latent_projections")?,
            None => 0,
        },
    })
}
