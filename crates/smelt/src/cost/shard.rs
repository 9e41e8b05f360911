//! Parameters per GPU of one layer under tensor, expert tensor and expert parallelism
//! ([`super::training`]'s static memory).

use crate::error::{Error, Result};
use crate::model::{AttentionBias, AttentionLayer, AttentionShape, Ffn, Layer, QkNorm, TokenMixer};
use crate::units::product;

const WHAT: &str = "training memory";

/// The checked sum of `xs`.
pub(super) fn sum(xs: &[u64]) -> Result<u64> {
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
                QkNorm::None | QkNorm::L2 => 0,
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
/// with norms of `norm` parameters, `t` tensor-parallel, `etp` expert tensor-parallel and
/// `ep` expert-parallel ranks: `(non-expert, expert)`.
pub(super) fn layer_shard(
    h: u64,
    layer: &Layer,
    norm: u64,
    [t, etp, ep]: [u64; 3],
) -> Result<(u64, u64)> {
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
        product(&[matrices, h, e.expert_ffn], WHAT)? / etp,
        if e.expert_bias {
            2 * e.expert_ffn / etp + h
        } else {
            0
        },
    ])?;
    Ok((
        sum(&[common, router, shared])?,
        product(&[one, e.experts / ep], WHAT)?,
    ))
}
