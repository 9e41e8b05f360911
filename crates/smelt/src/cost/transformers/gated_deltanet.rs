//! What the Gated DeltaNet hybrids' Transformers classes save (`qwen3_next`:
//! `transformers/models/qwen3_next/modeling_qwen3_next.py`; `qwen3_5_moe_text`:
//! `transformers/models/qwen3_5_moe/modeling_qwen3_5_moe.py`; Transformers 5.24, PyTorch
//! 2.15, CPU, without `flash-linear-attention` and `causal-conv1d`, so the torch fallbacks
//! `causal_conv1d_fn` and `torch_chunk_gated_delta_rule` run), under both policies, in
//! float32 and bfloat16. The attention output gate is these classes' alone: a model with it
//! is counted as them (zero-centred norms included), and every attention layer beside a
//! Gated DeltaNet layer must have it.
//!
//! Per layer execution, with `b`, `H`, `a`, `d`, `q = a·d`, `g`, `kv = g·d`, `kv'`, `T̄` and
//! `T` as in [`super`]; the Gated DeltaNet's `n_k` query/key heads of `d_k`, `n_v` value
//! heads of `d_v`, `K = n_k·d_k`, `V = n_v·d_v`, the convolution's `c = 2K + V` channels and
//! `w` taps ([`crate::model::GatedDeltaNet`]); chunks of `C = 64`
//! ([`crate::model::DELTA_RULE_CHUNK`]), the sequence padded to `P = C·⌈T/C⌉`, `N = P/C`
//! chunks. Per token unless marked "per sequence":
//!
//! | tensor | saved by | bytes |
//! |---|---|---|
//! | each layer norm (`Qwen3NextRMSNorm`, `Qwen3_5MoeRMSNorm`: `x·rsqrt(mean x² + ε)·(1 + weight)` in float32) | its float32 input, `rsqrt` per row, `x·rsqrt` in float32; `1 + weight`, per sequence | `8H + 4`, `4H` per sequence, twice |
//! | the mixer's and the FFN's normed input | their projections | `b·H` each |
//! | *attention layer* (`Qwen3NextAttention`, `Qwen3_5MoeAttention`) | | |
//! | `q_norm` per head (zero-centred) | its float32 input (in float32 the whole `q_proj` output, gate included: `8q`; in bf16 a copy, `4q`), `rsqrt`, `x·rsqrt`; `1 + weight` per sequence | `8q` or `4q`, `+ 4a + 4q`; `4d` per sequence |
//! | `k_norm` per head | as `q_norm`, on `k_proj`'s output | `8kv + 4g`; `4d` per sequence |
//! | `q`, `k` after the partial RoPE, `v` | the core | `b·(q + 2kv')` |
//! | the core's output, `sigmoid(gate)`, their product | the gate's product; `o_proj` | `3b·q` |
//! | SDPA with more than one head | the core's output made contiguous (the RoPE concatenates, [`super`]) | `b·q` |
//! | eager probabilities; SDPA's log-sum-exp | as in [`super`] | as there |
//! | RoPE's `cos` and `sin` once per forward (`partial_rotary_factor`: `rope_dim` wide) | the first attention layer | `2b·rope_dim` |
//! | *Gated DeltaNet layer* (`Qwen3NextGatedDeltaNet`, `Qwen3_5MoeGatedDeltaNet`) | | |
//! | `causal_conv1d_fn`: `F.conv1d` over `q, k, v`, then SiLU | the convolution's input; SiLU's input, `T + w − 1` outputs per channel | `b·c`; `b·c` and `b·c·(w − 1)` per sequence |
//! | `beta = sigmoid(b)` | its output | `b·n_v` |
//! | `g = −exp(A_log)·softplus(a + dt_bias)` (float32) | softplus's input and output; `exp` and its negation, per sequence | `8n_v`; `8n_v` per sequence |
//! | `l2norm` of `q` and `k` (float32, in `torch_chunk_gated_delta_rule`) | their float32 input (queries and keys repeated to the value heads: `repeat_interleave`'s copies, or in bf16 the float32 casts), `rsqrt` per head | `8n_v·d_k + 8n_v` |
//! | the chunk rule's padded tensors (float32) | `beta`, `v`, `k`, `k·beta`, the scaled `q`; `exp` of the pairwise decays, `k_beta·kᵀ`, `q·kᵀ`, the UT system, the intra-chunk attention (`C` per position each); the three `exp`s of the cumulative decay; the two triangular solves' outputs (`d_v`, `d_k`); `v_new`; the decayed keys | `4n_v·P·(4 + 3d_v + 5d_k + 5C)` per sequence |
//! | the scan over chunks | each chunk's state before its update (`d_k·d_v` per value head), the chunk decays; the decayed queries, which the first chunk's read of a state of zeros does not keep | `4n_v·N·(d_k·d_v + 1)`, `+ 4n_v·P·d_k` where `N ≥ 2`, per sequence |
//! | the strictly upper mask | `masked_fill` | `C²` (bool) per sequence |
//! | the gated norm (`Qwen3NextRMSNormGated`, `Qwen3_5MoeRMSNormGated`): its float32 input | `pow` | `4V` |
//! | its `rsqrt`, `x·rsqrt` in the dtype, `weight·x`, SiLU's float32 input (the gate `z`) and output | | `4n_v + 2b·V + 8V` |
//! | `out_proj`'s input | `out_proj` | `b·V` |
//!
//! The MoE (the router `softmax_renormalised` or `softmax`, the experts, the shared expert
//! behind its sigmoid gate) and the dense layers' SwiGLU are [`super`]'s rows. In bfloat16
//! everything in `torch_chunk_gated_delta_rule`, the gating and the norms runs in float32
//! as listed; the convolution, `beta` and the projections' inputs are in the dtype. The
//! Gated DeltaNet layer is the same torch code under both policies; `transformers-sdpa`
//! changes only the attention layers (SDPA's log-sum-exp and the contiguous copy) and the
//! experts (`grouped_mm`).
//!
//! Refused: in float32, `n_k = n_v` (`value_heads = key_heads`), where the classes differ:
//! Qwen3-Next's fused `in_proj_qkvz` leaves the gate `z` a view of its whole output, which
//! the gated norm's SiLU keeps (`4·(2K + 2V)`), Qwen3.5's `in_proj_z` does not, and the
//! model file does not say which runs (there, too, `q` and `k` are views of SiLU's output,
//! one storage of `4c`, and with one value head the gated norm's input is a view of the
//! padded output, `4P·d_v` per sequence); attention other than GQA with a per-head q/k norm,
//! windows, NoPE layers, values from the keys; an attention layer without the gate beside
//! Gated DeltaNet layers; a MoE without one gated shared expert; other recurrent mixers.

use super::{Part, Step, add, mul, refuse};
use crate::error::Result;
use crate::model::{
    AttentionLayer, AttentionShape, DELTA_RULE_CHUNK, Feature, Ffn, GatedDeltaNet, Layer, Mixer,
    QkNorm, Stack, TokenMixer,
};

/// Whether `stack` runs the Gated DeltaNet hybrids' classes: it has their attention gate or
/// their Gated DeltaNet layers (each layer is checked in [`Step::gdn_layer`]).
pub(super) fn classes(stack: &Stack) -> bool {
    stack.has(Feature::AttentionGate) || stack.has(Feature::GatedDeltanet)
}

/// The sum of `parts`, checked.
fn sum(parts: &[u128]) -> Result<u128> {
    parts.iter().try_fold(0, |s, &x| add(s, x))
}

impl Step {
    /// One execution of a layer of the hybrids' classes: the parts as
    /// [`super::activations`] sums them, and the bytes per token of RoPE's `cos` and `sin`.
    pub(super) fn gdn_layer(self, layer: &Layer) -> Result<([Part; 8], Option<u128>)> {
        let h = self.h;
        // Two zero-centred norms: float32 input, rsqrt, x·rsqrt; `1 + weight` per sequence.
        let norm = add(mul(8, h)?, 4)?;
        let norms = Part {
            whole: mul(2, norm)?,
            rows: 0,
            seq: mul(8, h)?,
        };
        let (mixer, scores, rope) = match &layer.mixer {
            Some(TokenMixer::Attention(a)) => self.gated_attention(a)?,
            Some(TokenMixer::Recurrent(Mixer::GatedDeltanet(g))) => {
                let (mixer, chunks) = self.delta_net(g)?;
                (mixer, chunks, None)
            }
            Some(TokenMixer::Recurrent(_)) => {
                let f = Feature::Mamba2;
                return Err(refuse(self.policy, f.field(), f.words()));
            }
            None => {
                let f = Feature::Blocks;
                return Err(refuse(self.policy, f.field(), f.words()));
            }
        };
        let ffn = layer.ffn.as_ref();
        if let Some(Ffn::Moe(e)) = ffn
            && (e.shared_experts != 1 || !e.shared_gate)
        {
            return Err(refuse(
                self.policy,
                "model.moe.shared_experts",
                "Qwen3-Next's and Qwen3.5's classes with other than one gated shared expert",
            ));
        }
        let ffn_input = Part::whole(mul(self.b, h)?);
        let [ro, ex, sh, de] = match ffn {
            Some(ffn) => self.ffn(ffn)?,
            None => [Part::default(); 4],
        };
        Ok(([norms, mixer, scores, ffn_input, ro, ex, sh, de], rope))
    }

    /// One execution of the gated attention `a` (module docs): `(q/k norms and the block,
    /// scores, RoPE's table)`.
    fn gated_attention(self, a: &AttentionLayer) -> Result<(Part, Part, Option<u128>)> {
        let (policy, b) = (self.policy, self.b);
        let AttentionShape::Gqa {
            heads,
            kv_heads,
            head_dim,
            k_eq_v: false,
        } = a.shape
        else {
            return Err(refuse(
                policy,
                "model.mla",
                "attention other than GQA in Qwen3-Next's and Qwen3.5's classes",
            ));
        };
        let other = if !a.gate {
            Some(("model.attention_gate", "attention without the output gate"))
        } else if a.qk_norm != QkNorm::PerHead {
            Some(("model.qk_norm", "q/k norms other than per head"))
        } else if a.window.is_some() {
            Some(("model.window", "windowed attention"))
        } else if a.nope.is_some() {
            Some(("model.nope", "NoPE layers"))
        } else {
            None
        };
        if let Some((field, what)) = other {
            let what = format!("{what} in Qwen3-Next's and Qwen3.5's classes");
            return Err(refuse(policy, field, &what));
        }
        let [heads, kv_heads, d] = [heads, kv_heads, head_dim].map(u128::from);
        let (q, kv) = (mul(heads, d)?, mul(kv_heads, d)?);
        // q_norm's float32 input: in float32 the whole q_proj output (queries and gate).
        let q_input = if b == 4 { mul(8, q)? } else { mul(4, q)? };
        let qk = sum(&[
            q_input,
            mul(4, heads)?,
            mul(4, q)?,
            mul(8, kv)?,
            mul(4, kv_heads)?,
        ])?;
        let grouped = !(self.eager || d > 256);
        let kv_core = if !grouped && kv_heads != 1 && kv_heads != heads {
            q
        } else {
            kv
        };
        let copy = if !self.eager && heads > 1 { q } else { 0 };
        let block = mul(b, sum(&[self.h, mul(4, q)?, mul(2, kv_core)?, copy])?)?;
        let mixer = Part {
            whole: add(qk, block)?,
            rows: 0,
            seq: mul(8, d)?,
        };
        let scores = if self.eager {
            Part {
                rows: mul(heads, self.eager_score())?,
                ..Part::default()
            }
        } else {
            Part::whole(mul(4, heads)?)
        };
        let width = a.rope_dim.unwrap_or(head_dim);
        let rope = mul(mul(2, u128::from(width))?, b)?;
        Ok((mixer, scores, Some(rope)))
    }

    /// One execution of the Gated DeltaNet `g` (module docs): `(per token and per sequence
    /// outside the chunks, the chunk rule's padded tensors per sequence)`.
    fn delta_net(self, g: &GatedDeltaNet) -> Result<(Part, Part)> {
        let (b, h) = (self.b, self.h);
        let [nk, nv, dk, dv, w] = [
            g.key_heads,
            g.value_heads,
            g.key_head_dim,
            g.value_head_dim,
            g.conv_kernel,
        ]
        .map(u128::from);
        let (k, v) = (mul(nk, dk)?, mul(nv, dv)?);
        let c = add(mul(2, k)?, v)?;
        let float32 = b == 4;
        if float32 && nk == nv {
            return Err(refuse(
                self.policy,
                "model.recurrent.mixer.gated_deltanet.value_heads",
                "value_heads = key_heads in float32 (Qwen3-Next's fused in_proj_qkvz leaves \
                 the gate a view of its whole output, which the gated norm's SiLU keeps; \
                 Qwen3.5's split projections do not, and the model file does not say which \
                 class runs)",
            ));
        }
        let t = u128::from(self.context);
        let chunk = u128::from(DELTA_RULE_CHUNK);
        let n = t.div_ceil(chunk).max(1);
        let p = mul(n, chunk)?;
        let whole = sum(&[
            mul(b, add(h, mul(2, c)?)?)?,
            mul(b, nv)?,
            mul(16, nv)?,
            mul(mul(8, nv)?, dk)?,
            mul(4, v)?,
            mul(4, nv)?,
            mul(mul(3, b)?, v)?,
            mul(8, v)?,
        ])?;
        let seq = add(mul(mul(b, c)?, w.saturating_sub(1))?, mul(8, nv)?)?;
        let position = sum(&[4, mul(3, dv)?, mul(5, dk)?, mul(5, chunk)?])?;
        let decayed_q = if n >= 2 { mul(p, dk)? } else { 0 };
        let states = mul(n, add(mul(dk, dv)?, 1)?)?;
        let chunks = sum(&[
            mul(mul(4, nv)?, sum(&[mul(p, position)?, decayed_q, states])?)?,
            mul(chunk, chunk)?,
        ])?;
        Ok((
            Part {
                whole,
                rows: 0,
                seq,
            },
            Part {
                seq: chunks,
                ..Part::default()
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ActivationPolicy;

    /// The tiny Qwen3-Next's Gated DeltaNet layer (`H = 64`, 2 query/key heads of 16, 4
    /// value heads of 8, 4 taps) at `T = 48` in float32, counted by hand from the module
    /// docs' rows: PyTorch saves 799408 bytes in the whole layer, the two norms
    /// 2·(48·516 + 256), the FFN's normed input 48·256, the MoE 48·3672 and the mixer
    /// 560816 (python/tests/test_saved_tensors.py's stock row).
    #[test]
    fn a_tiny_gated_deltanet_layer_by_hand() {
        let g = GatedDeltaNet {
            key_heads: 2,
            value_heads: 4,
            key_head_dim: 16,
            value_head_dim: 8,
            conv_kernel: 4,
        };
        let step = Step {
            policy: ActivationPolicy::TransformersEager,
            eager: true,
            b: 4,
            h: 64,
            layer_norm: false,
            gpt_oss: false,
            llama4: false,
            context: 48,
        };
        let (mixer, chunks) = step.delta_net(&g).unwrap();
        // Per token: the projections' input 256, the convolution's input and SiLU's 2·384,
        // beta 16, softplus's input and output 32, the l2 norms' rsqrt 32 and inputs 2·256,
        // the gated norm's input 128, rsqrt 16, x·rsqrt and weight·x 2·128, SiLU's input
        // and output 2·128, out_proj's input 128.
        let per_token = 256 + 768 + 16 + 32 + 32 + 512 + 128 + 16 + 256 + 128 + 128 + 128;
        assert_eq!(mixer.whole, per_token);
        // Per sequence: the convolution's tail 384·3 and exp(A_log), −exp 32.
        assert_eq!(mixer.seq, 384 * 3 + 32);
        // One chunk of 64: 16·64·(4 + 24 + 80 + 320) + 16·(128 + 1) + 64² (the mask).
        assert_eq!(chunks.seq, 16 * 64 * 428 + 16 * 129 + 4096);
        assert_eq!(48 * mixer.whole + mixer.seq + chunks.seq, 560_816);
    }
}
