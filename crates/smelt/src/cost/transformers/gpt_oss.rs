//! What gpt-oss's Transformers classes (`transformers/models/gpt_oss/modeling_gpt_oss.py`)
//! save besides what the other families' do, under `transformers-eager` only: Transformers
//! 5.24 builds no SDPA attention for them (`GptOssPreTrainedModel._supports_sdpa = False`,
//! so `attn_implementation = "sdpa"` raises), and `transformers-sdpa` refuses them.
//!
//! Attention sinks, expert biases and the clamped SwiGLU are gpt-oss's alone (no other class
//! builds any of them, and smelt exports a model with any of them only as `gpt_oss`): the
//! policy counts a model with them as those classes, and refuses one with some but not all.
//! Per layer execution, per token, with `b`, `H`, `a`, `d`, `k`, `F` and `T̄` as in
//! [`super`]:
//!
//! | tensor | saved by | bytes |
//! |---|---|---|
//! | each layer norm (`GptOssRMSNorm`: `(weight · (x · rsqrt(mean x² + ε))).to(dtype)`) | its float32 input, `rsqrt` per row, `x · rsqrt` in float32 (the weight multiplies before the cast) | `4H + 4 + 4H`, twice |
//! | RoPE's `cos` and `sin`, once per forward | the first layer's rotary products (`_apply_rotary_emb` rotates halves: `cos` and `sin` are `d/2` wide) | `2·(d/2)·b` |
//! | the sink logit's max over each row | `max(dim=-1)`'s int64 indices | `8a` |
//! | eager probabilities, the sink's column included | the softmax, in the model's dtype (`dtype=combined_logits.dtype`): no float32 copy | `a·(T̄ + 1)·b` |
//! | router `topk_softmax_dtype` | top-k indices (int64), the softmax over the top-k logits (dtype) | `8k + b·k` |
//! | clamped SwiGLU (`_apply_gate` on the strided views of `gate_up`), per routed copy | `gate_up` (`2F`, both clamps' input), the clamped gate, its scaled sigmoid, the gated product, `up + 1`, the gate's output (`down_proj`'s input) | `b·(2F + 5F)`, in place of SwiGLU's `b·4F` |
//!
//! Sliding-window layers save nothing more under eager attention ([`super::window`]): the
//! probabilities are `T × (T + 1)` whatever the window. The expert biases (`gate_up_proj_bias`,
//! `down_proj_bias`) and the router's are added: nothing saved. The per-copy expert terms
//! (indices, gathered input, routing weight, output, weighted output) are the other eager
//! experts' ([`super`]).

use super::{Part, Step, add, all_of, mul, refuse};
use crate::error::Result;
use crate::model::{ActivationPolicy, Feature, Stack};

/// gpt-oss's features: each present means the model is costed as its classes.
const OWN: [Feature; 3] = [Feature::Sinks, Feature::ExpertBias, Feature::ClampedSwiglu];

/// Whether `stack` runs gpt-oss's classes under `policy`; refuses gpt-oss under
/// `transformers-sdpa` and a model with some of gpt-oss's features but not all.
pub(super) fn classes(stack: &Stack, policy: ActivationPolicy) -> Result<bool> {
    let present = OWN.map(|f| stack.has(f));
    if !present.contains(&true) {
        return Ok(false);
    }
    if policy != ActivationPolicy::TransformersEager {
        let f = OWN[present.iter().position(|&p| p).unwrap_or(0)];
        return Err(refuse(
            policy,
            f.field(),
            &format!(
                "{} (gpt-oss's classes, which Transformers 5.24 builds with no SDPA \
                 attention: use transformers-eager)",
                f.words()
            ),
        ));
    }
    all_of(
        policy,
        &OWN,
        &present,
        "the other gpt-oss features (attention sinks, expert biases, the clamped SwiGLU",
    )?;
    Ok(true)
}

impl Step {
    /// The last term of a float32 norm of width `w`: `x · rsqrt` cast to the dtype, or kept
    /// in float32 where gpt-oss's norm multiplies by its weight before the cast.
    pub(super) fn normed(self, w: u128) -> Result<u128> {
        mul(if self.gpt_oss { 4 } else { self.b }, w)
    }

    /// The width of RoPE's `cos` and `sin` for heads of width `d` rotating `rope_dim`:
    /// half the head for gpt-oss's rotation of halves.
    pub(super) fn rope_width(self, rope_dim: Option<u64>, d: u64) -> u64 {
        if self.gpt_oss {
            d / 2
        } else {
            rope_dim.unwrap_or(d)
        }
    }

    /// gpt-oss's eager scores over `heads` heads: the sink's max indices and the
    /// probabilities with the sink's column, in the dtype.
    pub(super) fn sink_scores(self, heads: u128) -> Result<Part> {
        let row = mul(heads, self.b)?;
        Ok(Part {
            whole: add(mul(8, heads)?, row)?,
            rows: row,
            seq: 0,
        })
    }
}
