//! What Llama-4's Transformers classes (`transformers/models/llama4/modeling_llama4.py`:
//! `Llama4TextAttention`, `Llama4TextMoe`) save besides what the other families' do,
//! under both policies. Transformers 5.24 builds their experts one way only
//! (`Llama4TextExperts`, two batched matmuls over every expert; `experts_implementation`
//! set to anything raises, and unset it is that): `transformers-sdpa` is SDPA attention with
//! those experts.
//!
//! Chunked attention, NoPE layers, the L2 q/k norm and the `sigmoid_topk_scatter` router are
//! Llama-4's alone (no other class builds any of them, and smelt exports a model with any of
//! them only as `llama4_text`): the policies count a model with any of them as those
//! classes, and refuse one that pairs them with what the classes do not build (another
//! router, sliding windows, a partial RoPE, other q/k norms, a gated shared expert, norm
//! biases, gpt-oss's pieces). Per layer execution, per token, with `b`, `H`, `a`, `g`, `d`, `q`, `kv`, `E`,
//! `k`, `F`, `T̄` and `T` as in [`super`]:
//!
//! | tensor | saved by | bytes |
//! |---|---|---|
//! | RoPE's table, once per forward (`apply_rotary_emb` multiplies complex numbers in float32) | the first RoPE layer's complex product | `4d` (`d/2` complex64 values) in any dtype |
//! | the L2 q/k norm on a RoPE layer (`use_qk_norm`: `x · rsqrt(mean x² + ε)` per head, no weight) | its float32 input (in bf16 a float32 copy of the rotated q and k), `rsqrt` per head; its output, cast to the dtype, is the core's `q` and `k` | `4q + 4a + 4kv + 4g` |
//! | a NoPE layer's temperature (`attn_temperature_tuning`) | the product of the queries and the float32 scale of each position | `4` |
//! | eager probabilities | the softmax, in the model's dtype (Llama-4's `eager_attention_forward` does not upcast): no float32 copy | `a·T̄·b` |
//! | SDPA in a chunked layer whose chunk is no longer than `T` | as a sliding window's ([`super::window`]): the mask, and the keys and values copied to every head | `b·T²` per sequence |
//! | router `sigmoid_topk_scatter` | the top-k indices (int64; `scatter_` saves the same), the float32 sigmoid over every expert (the others' logits `-inf`) | `8k + 4E` |
//! | the experts, per token and expert (every expert runs every token) | the routing weights in expert-major order (a copy, in the dtype), the repeated input, the weighted input, `gate_up` (`2F`), SiLU's output, the gated product | `E·b·(1 + 2H + 4F)`; in float32 with one expert or one token `E·b·(2H + 4F)` (the expert-major weights are then a view of the sigmoid's) |
//!
//! The shared expert (ungated SwiGLU, `b·4F`), the dense layers' SwiGLU, the layer norms, the
//! projections' inputs, `q`, `k`, `v` and the core's output are the other families' rows
//! ([`super`]); a chunked layer under eager attention saves nothing more (its mask is added
//! to the scores). The temperature is one storage of `T` floats per layer execution, which
//! a batch's sequences share (its `expand` over the batch is a view).

use super::{Part, Step, add, mul, refuse};
use crate::error::Result;
use crate::model::{
    ActivationPolicy, AttentionLayer, Feature, Moe, QkNorm, Router, Stack, TokenMixer,
};

/// What Llama-4's classes do not build, as features of a stack.
const FOREIGN: [Feature; 6] = [
    Feature::Sliding,
    Feature::Sinks,
    Feature::ExpertBias,
    Feature::ClampedSwiglu,
    Feature::NormBias,
    Feature::Mla,
];

/// Whether `stack` runs Llama-4's classes under `policy`: any of Llama-4's own pieces
/// (module docs); refuses them beside what those classes do not build.
pub(super) fn classes(stack: &Stack, policy: ActivationPolicy) -> Result<bool> {
    let attention = stack.kinds().iter().filter_map(|k| match &k.layer.mixer {
        Some(TokenMixer::Attention(a)) => Some(a),
        _ => None,
    });
    let (mut nope, mut l2, mut other_norm, mut partial) = (false, false, false, false);
    for a in attention {
        nope |= a.nope.is_some();
        l2 |= a.qk_norm == QkNorm::L2;
        other_norm |= matches!(a.qk_norm, QkNorm::PerHead | QkNorm::Full);
        partial |= a.rope_dim.is_some();
    }
    let moe = stack.moe();
    let router = moe.router == Some(Router::SigmoidTopkScatter);
    if !(router || nope || l2 || stack.has(Feature::Chunked)) {
        return Ok(false);
    }
    let why = |what: &str| {
        format!(
            "{what} with Llama-4's pieces (chunked attention, NoPE layers, the L2 q/k norm, the \
             sigmoid_topk_scatter router): only Llama-4's classes build those, and they do not \
             build this"
        )
    };
    if !router {
        let what = "a router other than sigmoid_topk_scatter (Llama4TextMoe's)";
        return Err(refuse(policy, "model.moe.router", &why(what)));
    }
    if let Some(f) = FOREIGN.into_iter().find(|&f| stack.has(f)) {
        return Err(refuse(policy, f.field(), &why(f.words())));
    }
    let refusal = [
        (other_norm, "model.qk_norm", "a q/k norm with a weight"),
        (partial, "model.rope_dim", "a partial RoPE"),
        (
            moe.shared_gate,
            "model.moe.shared_gate",
            "a gated shared expert",
        ),
    ];
    if let Some((_, field, what)) = refusal.into_iter().find(|r| r.0) {
        return Err(refuse(policy, field, &why(what)));
    }
    Ok(true)
}

impl Step {
    /// Llama-4's L2 norm of width `w` over `rows` heads: its float32 input and `rsqrt` per
    /// head (its output is the core's).
    pub(super) fn l2_norm(self, w: u128, rows: u128) -> Result<u128> {
        add(mul(4, w)?, mul(4, rows)?)
    }

    /// The bytes of one eager score: the float32 probabilities (in bf16 also their bf16
    /// copy), or Llama-4's in the dtype.
    pub(super) fn eager_score(self) -> u128 {
        match (self.llama4, self.b) {
            (true, b) => b,
            (false, 2) => 6,
            (false, _) => 4,
        }
    }

    /// RoPE's table per token, saved once per forward by a layer with RoPE as `width` wide
    /// (`None` for a NoPE layer): `cos` and `sin` in the dtype, or Llama-4's complex64 one.
    pub(super) fn rope_table(self, a: &AttentionLayer, width: u64) -> Result<Option<u128>> {
        if a.nope.is_some() {
            return Ok(None);
        }
        let width = u128::from(width);
        if self.llama4 {
            return mul(4, width).map(Some);
        }
        mul(mul(2, width)?, self.b).map(Some)
    }

    /// A NoPE layer's temperature: `T` float32 scales per sequence.
    pub(super) fn temperature(a: &AttentionLayer) -> u128 {
        if a.nope.is_some_and(|t| t.scaled) {
            4
        } else {
            0
        }
    }

    /// Llama-4's experts `e`, every one on every token.
    pub(super) fn every_expert(self, e: &Moe) -> Result<Part> {
        let (ne, f) = (u128::from(e.experts), u128::from(e.expert_ffn));
        // The weights' expert-major copy: in float32 with one expert or one token, a view
        // of the sigmoid's output (already counted); in bf16 it is the cast's output.
        let view = self.b == 4 && (e.experts == 1 || self.context == 1);
        let weight = if view { 0 } else { 1 };
        let per_expert = add(add(weight, mul(2, self.h)?)?, mul(4, f)?)?;
        Ok(Part::whole(mul(mul(ne, self.b)?, per_expert)?))
    }
}
