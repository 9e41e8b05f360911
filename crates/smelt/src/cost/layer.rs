//! One layer's pieces, shared by the parameter, FLOP and KV counts: the attention block (GQA
//! or MLA), the sparse attention indexer and the MoE FFN, and how often each kind of layer
//! runs. [`LayerCost::of`] computes them once per model; every count of the cost model reads
//! them from that one value.

use crate::error::Result;
use crate::model::{AttentionBias, Model, QkNorm};
use crate::units::{add, product};

/// Everything the counts need about one model's layers, computed once.
#[derive(Debug, Clone, Copy)]
pub(super) struct LayerCost {
    /// The attention block of every layer.
    pub attention: AttentionBlock,
    /// The indexer of every layer, if the model has one.
    pub indexer: Option<IndexerBlock>,
    /// The MoE FFN of the MoE layers.
    pub moe: MoeBlock,
    /// How often each kind of layer runs per forward pass.
    pub runs: Executions,
}

impl LayerCost {
    /// The layers of `m`.
    pub fn of(m: &Model) -> Result<Self> {
        Ok(Self {
            attention: attention(m)?,
            indexer: indexer(m)?,
            moe: moe(m)?,
            runs: Executions::of(m)?,
        })
    }
}

/// Layer executions per forward pass, by kind: `total = moe + dense = full + windowed`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Executions {
    /// All of them ([`Model::checked_executions`]).
    pub total: u64,
    /// Those of MoE layers.
    pub moe: u64,
    /// Those of dense-FFN layers (a looped one counts once per visit).
    pub dense: u64,
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
        Ok(Self {
            total,
            moe: total - dense,
            dense,
            full: total - windowed,
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

/// The attention block of `m`'s layers.
fn attention(m: &Model) -> Result<AttentionBlock> {
    let h = m.hidden;
    let sinks = if m.attention_sinks { m.heads } else { 0 };
    let block = match &m.mla {
        None => {
            let q = product(&[m.heads, m.head_dim], WHAT)?;
            let kv = product(&[m.kv_heads, m.head_dim], WHAT)?;
            let qkv = add(q, product(&[2, kv], WHAT)?, WHAT)?;
            let weights = add(product(&[h, qkv], WHAT)?, product(&[q, h], WHAT)?, WHAT)?;
            let biases = match m.attention_bias {
                AttentionBias::None => 0,
                AttentionBias::Qkv => qkv,
                AttentionBias::All => add(qkv, h, WHAT)?,
            };
            let norms = match m.qk_norm {
                QkNorm::None => 0,
                QkNorm::PerHead => product(&[2, m.head_dim], "params.norms")?,
                QkNorm::Full => add(q, kv, "params.norms")?,
            };
            AttentionBlock {
                params: add(weights, biases, WHAT)?,
                norms,
                macs: weights,
                core_width: product(&[2, q], WHAT)?,
                kv: product(&[2, kv], "kv_cache.elements")?,
            }
        }
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
    /// Router weights and bias.
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
    let weights = product(&[3, h, e.expert_ffn], "params.experts")?;
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
    let shared_experts = product(&[3, h, e.shared_ffn, e.shared_experts], "params.shared")?;
    let gate = if e.shared_gate { h } else { 0 };
    Ok(MoeBlock {
        experts: product(&[one, e.experts], "params.experts")?,
        active_experts: product(&[one, e.top_k], "params.experts")?,
        router: add(router_weights, router_bias, "params.router")?,
        shared: add(shared_experts, gate, "params.shared")?,
        router_macs: router_weights,
        expert_macs: product(&[weights, e.top_k], "flops.experts")?,
        shared_macs: add(shared_experts, gate, "flops.shared")?,
    })
}
