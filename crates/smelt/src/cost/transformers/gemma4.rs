//! What Gemma 4's Transformers classes (`Gemma4TextDecoderLayer` and its parts,
//! `transformers/models/gemma4/modeling_gemma4.py`, Transformers 5.24) save, under both
//! policies, in float32 and bfloat16. Their pieces — the value norm, the post norms, the
//! norms around the MoE block's branches, the router's scales, the GeGLU (`gelu_tanh`) and
//! full-attention layers of their own shape, with values that are the keys (`k_eq_v`) —
//! are Gemma 4's alone: the policies count a model with them as these classes, and refuse
//! one with some but not all of the first five.
//!
//! `Gemma4RMSNorm` computes `x · pow(mean x² + ε, -0.5)` in float32 and, with a scale,
//! multiplies by the float32 weight before casting back: it keeps a float32 copy of its
//! input (in float32, the input itself), `mean x² + ε` and its power per row, and, with a
//! scale, `x · pow` in float32 and, in bfloat16, a float32 copy of its weight per call
//! (per sequence). A norm whose float32 input is a storage another norm already keeps
//! saves no copy of it in float32 ("shared" below). Per layer execution, per token, with
//! `b`, `H`, `a`, `d`, `q = a·d`, `g`, `kv = g·d`, `k`, `E`, `F`, `T̄` and `T` as in
//! [`super`], `F_s` the dense MLP's width (`shared_ffn`), `s(w, r)` a scaled norm of width
//! `w` over `r` rows (`4w + 8r + 4w`, without its input's `4w` when shared in float32) and
//! `u(w, r)` a norm without a scale (`4w + 8r`, likewise):
//!
//! | tensor | saved by | bytes |
//! |---|---|---|
//! | `input_layernorm`, `post_attention_layernorm`, `pre_feedforward_layernorm`, `post_feedforward_layernorm_1`, `post_feedforward_layernorm_2`, `post_feedforward_layernorm` | as a scaled norm | `s(H, 1)`, six times |
//! | `pre_feedforward_layernorm_2` on the residual (shared with `pre_feedforward_layernorm`) | as a scaled norm | `s(H, 1)` |
//! | the router's norm (no scale) on the residual (shared) | as a norm | `u(H, 1)` |
//! | `q_norm`, `k_norm` per head | as scaled norms | `s(q, a) + s(kv, g)` |
//! | `v_norm` per head (no scale; shared with `k_norm`'s input with `k_eq_v`) | as a norm | `u(kv, g)` |
//! | each scaled norm's weight in bfloat16 | its float32 copy, per sequence | `4·(7H + 2d)` per sequence |
//! | the attention's normed input; `q`, `k`, `v` (`kv'` as in [`super`]); the core's output | `q_proj` and `k_proj`; the core; `o_proj` | `b·(H + q + 2kv' + q)` |
//! | eager probabilities; SDPA's log-sum-exp and a sliding layer's mask | as in [`super`] and [`super::window`] | as there |
//! | RoPE's `cos` and `sin`, once per forward per layer type (sliding, full) | the first layer of the type | `2·b·d`, `d` that layer's head width |
//! | the dense MLP (GeGLU: `gelu_pytorch_tanh` keeps only its input) and its input | `gate_proj`, the GeLU, `up_proj`, the product, `down_proj` | `b·H + 4b·F_s` |
//! | router | its normed input and the scaled one (dtype), the float32 softmax over `E`, top-k indices (int64), their sum, the top-k values, the renormalised weights (float32) and the gathered `per_expert_scale` (dtype) | `2b·H + 4E + 8k + 4 + 8k + b·k` |
//! | experts, per routed copy | as the SwiGLU experts of [`super`] (the GeLU keeps what SiLU keeps), the routing weight in float32 | eager `16 + b·(3H + 4F) + 4`, `grouped_mm` `24 + b·(2H + 4F) + 4` (and `4E` per sequence) |
//!
//! Sums, the layer's `layer_scalar` and the attention's scaling (1) save nothing; the
//! final logits' soft-capping is outside the layers. Refused: a router stated
//! (`[model.moe] router`: Gemma 4's classes route with their own), a router or expert bias,
//! a gated shared expert or other than one, latent experts, q/k norms other than per head,
//! a partial RoPE (`rope_dim`), MLA, and a Gemma 4 model under `activation_bytes` other
//! than 2 or 4 (as every family).

use super::{Part, Step, add, all_of, mul, refuse};
use crate::error::Result;
use crate::model::{
    ActivationPolicy, AttentionLayer, AttentionShape, Feature, Ffn, Layer, Moe, QkNorm, Stack,
    TokenMixer,
};

/// Gemma 4's own features: each present means the model is costed as its classes.
const OWN: [Feature; 5] = [
    Feature::VNorm,
    Feature::PostNorms,
    Feature::BranchNorms,
    Feature::RouterScale,
    Feature::GeluTanh,
];

/// Whether `stack` runs Gemma 4's classes; refuses a model with some of their features but
/// not all (full-attention layers of their own shape count as one of them).
pub(super) fn classes(stack: &Stack, policy: ActivationPolicy) -> Result<bool> {
    let present = OWN.map(|f| stack.has(f));
    if !present.contains(&true) && !stack.has(Feature::FullAttention) {
        return Ok(false);
    }
    all_of(
        policy,
        &OWN,
        &present,
        "other Gemma 4 pieces (the value norm, post norms, branch norms, the router's \
         scales, the GeGLU, full-attention layers of their own shape",
    )?;
    Ok(true)
}

impl Step {
    /// A Gemma 4 norm of width `w` over `rows` rows, with or without a scale: its float32
    /// input (none when `shared` in float32), `mean x² + ε` and its power, and with a
    /// scale `x · pow` in float32.
    fn gemma_norm(self, w: u128, rows: u128, scaled: bool, shared: bool) -> Result<u128> {
        let input = if shared && self.b == 4 { 0 } else { mul(4, w)? };
        let normed = if scaled { mul(4, w)? } else { 0 };
        add(add(input, mul(8, rows)?)?, normed)
    }

    /// One execution of Gemma 4's decoder layer `layer`: the parts as
    /// [`super::activations`] sums them, and the bytes per token of its RoPE's `cos` and
    /// `sin` (module docs).
    pub(super) fn gemma4_layer(self, layer: &Layer) -> Result<([Part; 8], Option<u128>)> {
        let (policy, b, h) = (self.policy, self.b, self.h);
        let Some(TokenMixer::Attention(a)) = &layer.mixer else {
            return Err(refuse(policy, "model.ffn_only", "layers without attention"));
        };
        let (heads, kv_heads, d, k_eq_v) = self.gemma_shape(a)?;
        let (q, kv) = (mul(heads, d)?, mul(kv_heads, d)?);
        let scaled = self.gemma_norm(h, 1, true, false)?;
        let norms = [
            mul(6, scaled)?,
            self.gemma_norm(h, 1, true, true)?,
            self.gemma_norm(h, 1, false, true)?,
            self.gemma_norm(q, heads, true, false)?,
            self.gemma_norm(kv, kv_heads, true, false)?,
            self.gemma_norm(kv, kv_heads, false, k_eq_v)?,
        ]
        .into_iter()
        .try_fold(0, add)?;
        // In bfloat16 each scaled norm keeps a float32 copy of its weight per call.
        let mut seq = if b == 2 {
            mul(4, add(mul(7, h)?, mul(2, d)?)?)?
        } else {
            0
        };
        let masked = self.sdpa_mask(a)?;
        let grouped = !(self.eager || masked || d > 256);
        let kv_core = if !grouped && kv_heads != 1 && kv_heads != heads {
            q
        } else {
            kv
        };
        let attention = mul(b, add(add(h, mul(2, q)?)?, mul(2, kv_core)?)?)?;
        let scores = if self.eager {
            Part {
                rows: mul(heads, if b == 2 { 6 } else { 4 })?,
                ..Part::default()
            }
        } else {
            let t = u128::from(self.context);
            if masked {
                seq = add(seq, mul(b, mul(t, t)?)?)?;
            }
            Part::whole(mul(4, heads)?)
        };
        let Some(Ffn::Moe(e)) = &layer.ffn else {
            return Err(refuse(
                policy,
                "model.dense",
                "dense layers in Gemma 4's classes (its MoE layers have the dense MLP beside \
                 the experts)",
            ));
        };
        let [router, experts, dense] = self.gemma_moe(e)?;
        let rope = mul(mul(2, b)?, d)?;
        let parts = [
            Part {
                whole: norms,
                rows: 0,
                seq,
            },
            Part::whole(attention),
            scores,
            Part::whole(mul(b, h)?),
            router,
            experts,
            dense,
            Part::default(),
        ];
        Ok((parts, Some(rope)))
    }

    /// `(heads, kv_heads, d, k_eq_v)` of Gemma 4's attention `a`; refuses what its
    /// classes do not build.
    fn gemma_shape(self, a: &AttentionLayer) -> Result<(u128, u128, u128, bool)> {
        let AttentionShape::Gqa {
            heads,
            kv_heads,
            head_dim,
            k_eq_v,
        } = a.shape
        else {
            let f = Feature::Mla;
            return Err(refuse(self.policy, f.field(), f.words()));
        };
        if a.qk_norm != QkNorm::PerHead {
            return Err(refuse(
                self.policy,
                "model.qk_norm",
                "Gemma 4's classes with q/k norms other than per head",
            ));
        }
        if a.rope_dim.is_some() {
            return Err(refuse(
                self.policy,
                "model.rope_dim",
                "a partial RoPE in Gemma 4's classes",
            ));
        }
        let [heads, kv_heads, d] = [heads, kv_heads, head_dim].map(u128::from);
        Ok((heads, kv_heads, d, k_eq_v))
    }

    /// Gemma 4's MoE block `e`: `(router, experts, dense MLP)` (module docs).
    fn gemma_moe(self, e: &Moe) -> Result<[Part; 3]> {
        let (policy, b, h) = (self.policy, self.b, self.h);
        let other = if e.router.is_some() {
            Some(("model.moe.router", "a stated router in Gemma 4's classes"))
        } else if e.router_bias || e.expert_bias {
            Some((
                "model.moe.router_bias",
                "biases in Gemma 4's router or experts",
            ))
        } else if e.shared_experts != 1 || e.shared_gate {
            Some((
                "model.moe.shared_experts",
                "Gemma 4's classes with other than one ungated dense MLP beside the experts",
            ))
        } else if e.jitter.is_some() {
            Some((
                "model.moe.jitter",
                "the MoE's input noise in Gemma 4's classes, which draw none",
            ))
        } else if e.latent.is_some() {
            let f = Feature::LatentExperts;
            Some((f.field(), f.words()))
        } else {
            None
        };
        if let Some((field, what)) = other {
            return Err(refuse(policy, field, what));
        }
        let (ne, k, f) = (
            u128::from(e.experts),
            u128::from(e.top_k),
            u128::from(e.expert_ffn),
        );
        let router = [mul(2, mul(b, h)?)?, mul(4, ne)?, mul(16, k)?, 4, mul(b, k)?]
            .into_iter()
            .try_fold(0, add)?;
        let (index, widths) = if self.eager { (16, 3) } else { (24, 2) };
        let copy = add(add(index, mul(b, add(mul(widths, h)?, mul(4, f)?)?)?)?, 4)?;
        let experts = Part {
            whole: mul(k, copy)?,
            rows: 0,
            seq: if self.eager { 0 } else { mul(4, ne)? },
        };
        let dense = mul(b, mul(4, u128::from(e.shared_ffn))?)?;
        Ok([Part::whole(router), experts, Part::whole(dense)])
    }
}
