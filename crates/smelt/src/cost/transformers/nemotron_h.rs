//! What Nemotron-H's Transformers classes (`transformers/models/nemotron_h/modeling_nemotron_h.py`,
//! Transformers 5.24) save, under both policies, in float32 and bfloat16, run by PyTorch on
//! CPU without `mamba_ssm` and `causal_conv1d`: `NemotronHMamba2Mixer.forward` then takes
//! its torch path (`causal_conv1d_fn`'s `F.conv1d`, `mamba2_chunk_scan`'s chunked SSD scan),
//! and a training step without a cache argument still makes one (`use_cache`), which skips
//! the fused kernel `mamba2_split_conv1d_scan_combined` and saves nothing more.
//!
//! Every decoder layer (`NemotronHBlock`) is one `NemotronHRMSNorm` and one block: a Mamba-2
//! mixer, attention, an MLP or a MoE (`layers_block_type`), added to the residual. Mamba-2
//! layers, one-block layers and the ungated relu2 MLP are Nemotron-H's alone: the policies
//! count a model with any of them as these classes (with LatentMoE's latent experts where
//! set), and refuse one with some but not all of the first three. Per layer execution, per
//! token, with `b`, `H`, `a`, `d`, `q = a·d`, `g`, `kv`, `kv'`, `E`, `k`, `F`, `T̄` and `T` as
//! in [`super`]; for Mamba-2 `n` heads of width `p` (`I = n·p`), state `N`, `G` groups, a
//! convolution of `K` taps over `c = I + 2·G·N` channels, `P = I + c + n` (`in_proj`'s
//! width), chunks of `L` tokens, `T_p = L·⌈T/L⌉` (the padded sequence) and `C = T_p / L`
//! chunks; `W` the experts' width (`H`, or LatentMoE's latent width); `F_s` the shared
//! expert's width and `F_d` the MLP's:
//!
//! | tensor | saved by | bytes |
//! |---|---|---|
//! | `NemotronHRMSNorm` (`weight · (x · rsqrt(mean x² + ε))`, all in float32) | its float32 input (a copy in bf16), `rsqrt` per row, `x · rsqrt` in float32 (the weight's product), in bf16 the weight's float32 copy per sequence | `8H + 4`, `4H` per sequence in bf16 |
//! | the block's normed input (the norm's output cast to the dtype) | `in_proj`; `q_proj`, `k_proj`, `v_proj`; `up_proj`; the router, `fc1_latent_proj` and the shared expert | `b·H` |
//! | Mamba-2: `in_proj`'s output (`z`, `x B C`, `dt`), whole | the convolution (its input is a view of it) and, in float32, the gate's SiLU | `b·P` |
//! | Mamba-2: the convolution's output, `T + K − 1` long | SiLU | `b·c`, `b·c·(K − 1)` per sequence |
//! | Mamba-2: `dt + dt_bias`, its softplus | softplus, `clamp` | `2b·n` |
//! | Mamba-2: `dt` in float32 and `x` in float32 | the products by `dt` (`x · dt`, `A · dt`): in float32 the clamp's output and the SiLU's whole output (`x` a view of it), in bf16 two float32 copies of `dt` and one of `x` | float32 `4n + 4c`, bf16 `8n + 4I` |
//! | Mamba-2: `A = −exp(A_log)` | `exp`'s output, the product `A · dt` | `8n` per sequence |
//! | Mamba-2's scan (`mamba2_chunk_scan`, float32): the `D` skip's padded `x`, the einsums' copies of `x` (twice), the output's `C·states` product, the scan's output (`T_p` long, which the gated norm's product keeps) | `D · x`, `bmm`, `Y_off`, the gated norm | `20·I·T_p` per sequence |
//! | the scan's `B` and `C`, repeated to the heads and chunked | the einsums' copies (`C·Bᵀ`: both; `C·states`: `C`; the chunk states: `B · decay`), `B · decay` | `20·n·N·T_p` per sequence |
//! | the scan's `L = exp(segsum)`, `C·Bᵀ` and their masked product | `L · C·Bᵀ`, `bmm` | `12·n·L·T_p` per sequence |
//! | the decays `exp(A_cumsum[-1] − A_cumsum)` and `exp(A_cumsum)` | the products by them | `8·n·T_p` per sequence |
//! | the chunk-to-chunk decay `exp(segsum)` over `C + 1` slots; the states (`C + 1` slots, then `C`) | `bmm` | `4n·(C + 1)² + 4·I·N·(2C + 1)` per sequence |
//! | `segment_sum`'s two boolean masks, per call (`L × L`, `(C + 1) × (C + 1)`) | `masked_fill` | `2L² + 2(C + 1)²` per sequence |
//! | the gated RMSNorm (`NemotronHRMSNormGated`, float32): SiLU's float32 gate (a copy in bf16), its output, the gated product, `rsqrt` per group, the normed product; `out_proj`'s input in the dtype | SiLU, the product, `pow`, `rsqrt`, the weight's product, `out_proj` | `12I + 4G + b·I`, bf16 `+ 4I` |
//! | attention (no RoPE, no q/k norm): `q`, `k`, `v`, the core's output; eager probabilities, SDPA's log-sum-exp | as in [`super`] | `b·(H + 2q + 2kv')` with the normed input; `a·T̄·4` (bf16 `a·T̄·6`) or `4a` |
//! | router (`NemotronHTopkRouter`, as DeepSeek-V3's with one group and the top group chosen: `n_group = topk_group = 1`, `norm_topk_prob`) | the float32 sigmoid over `E`, the group's two best (int64), the best group (int64), the bool mask, the top-k indices (int64), the top-k weights and their sum (float32); in bf16 the float32 copies of its input and (per sequence) its weight | `5E + 12k + 28`; bf16 `+ 4H`, `4·E·H` per sequence |
//! | eager experts (`NemotronHExperts`), per routed copy | token and slot indices (one int64 storage), the gathered input, ReLU's output (`relu2` squares it: `pow` keeps the same), its square, the float32 routing weight, the down projection's output, the float32 weighted output `index_add_` keeps | `20 + b·(2W + 2F) + 4W` |
//! | `grouped_mm` experts (`@use_experts_implementation(has_gate=False)`), per routed copy | three int64 index vectors, the sorted input, ReLU's output, its square, the float32 routing weight, the down projection's output | `28 + b·(2W + 2F)`, and `4E` (int32 group offsets) per sequence |
//! | LatentMoE: `fc2_latent_proj`'s input | the experts' sum in the dtype (`fc1_latent_proj` reads the normed input) | `b·W` |
//! | the shared expert; an MLP layer | `up_proj`'s ReLU and its square (`down_proj`'s input) | `2b·F_s`; `2b·F_d` |
//!
//! Sums, the residual, `routed_scaling_factor` and the looped export's scales (a product by
//! a number) save nothing. The scan's saved bytes follow from its einsums' operands being
//! copies (`reshape` of permuted views): so they are with more than one head, one chunk and
//! one state channel, as every published Nemotron-H is and as the tests check. The router
//! is counted as `NemotronHConfig`'s defaults (`n_group = topk_group = 1`,
//! `norm_topk_prob = true`), which the published configs set, smelt's export writes and its
//! import requires (the model file has no key for them).
//! Refused: a stated router (`[model.moe] router`: Nemotron-H's classes route with their
//! own), router or expert biases, a gated shared expert or other than one, q/k norms, a
//! partial RoPE, windows, MLA, an attention gate, post norms, norms with a bias.

use super::{Part, Step, add, all_of, mul, refuse};
use crate::error::Result;
use crate::model::{
    ActivationPolicy, AttentionLayer, AttentionShape, Feature, Ffn, Layer, Mamba2, Mixer, Moe,
    QkNorm, Stack, TokenMixer,
};

/// Nemotron-H's own features: each present means the model is costed as its classes.
const OWN: [Feature; 3] = [Feature::Mamba2, Feature::Blocks, Feature::Relu2];

/// What Nemotron-H's classes do not build, as features of a stack.
const FOREIGN: [Feature; 12] = [
    Feature::Mla,
    Feature::Sliding,
    Feature::Chunked,
    Feature::Sinks,
    Feature::RouterBias,
    Feature::ExpertBias,
    Feature::ClampedSwiglu,
    Feature::NormBias,
    Feature::Indexer,
    Feature::GatedDeltanet,
    Feature::AttentionGate,
    Feature::PostNorms,
];

/// Whether `stack` runs Nemotron-H's classes; refuses a model with some of their features
/// but not all, or with one they do not build.
pub(super) fn classes(stack: &Stack, policy: ActivationPolicy) -> Result<bool> {
    let present = OWN.map(|f| stack.has(f));
    if !present.contains(&true) {
        return Ok(false);
    }
    all_of(
        policy,
        &OWN,
        &present,
        "other Nemotron-H pieces (Mamba-2 layers, one-block layers, the relu2 MLP",
    )?;
    if let Some(f) = FOREIGN.into_iter().find(|&f| stack.has(f)) {
        return Err(refuse(
            policy,
            f.field(),
            &format!("{} in Nemotron-H's classes", f.words()),
        ));
    }
    Ok(true)
}

/// The router's groups as Nemotron-H's configs set them (`n_group`, `topk_group`).
const GROUPS: u128 = 1;
const TOPK_GROUPS: u128 = 1;

impl Step {
    /// One execution of Nemotron-H's decoder layer `layer`: the parts as
    /// [`super::activations`] sums them (module docs).
    pub(super) fn nemotron_layer(self, layer: &Layer) -> Result<[Part; 8]> {
        let (b, h) = (self.b, self.h);
        // The block's RMSNorm: float32 input, rsqrt, x · rsqrt in float32; in bf16 the
        // weight's float32 copy per sequence.
        let norm = Part {
            whole: add(mul(8, h)?, 4)?,
            rows: 0,
            seq: if b == 2 { mul(4, h)? } else { 0 },
        };
        let zero = Part::default();
        let mut parts = [norm, zero, zero, zero, zero, zero, zero, zero];
        match (&layer.mixer, &layer.ffn) {
            (Some(TokenMixer::Recurrent(Mixer::Mamba2(m))), None) => {
                parts[1] = self.mamba2(m)?;
            }
            (Some(TokenMixer::Attention(a)), None) => {
                self.nemotron_attention(a)?;
                let ([_, at, sc], _) = self.attention(a)?;
                parts[1] = at;
                parts[2] = sc;
            }
            (None, Some(Ffn::Dense { width, .. })) => {
                parts[3] = Part::whole(mul(b, h)?);
                parts[7] = Part::whole(mul(mul(2, b)?, u128::from(*width))?);
            }
            (None, Some(Ffn::Moe(e))) => {
                parts[3] = Part::whole(mul(b, h)?);
                let [router, experts, shared] = self.nemotron_moe(e)?;
                parts[4] = router;
                parts[5] = experts;
                parts[6] = shared;
            }
            _ => {
                return Err(refuse(
                    self.policy,
                    "model.blocks",
                    "layers other than one Mamba-2 mixer, one attention, one MLP or one MoE in \
                     Nemotron-H's classes",
                ));
            }
        }
        Ok(parts)
    }

    /// Refuses an attention block Nemotron-H's classes do not build.
    fn nemotron_attention(self, a: &AttentionLayer) -> Result<()> {
        let other = if !matches!(a.shape, AttentionShape::Gqa { k_eq_v: false, .. }) {
            Some(("model.mla", "attention other than grouped-query"))
        } else if a.qk_norm != QkNorm::None {
            Some(("model.qk_norm", "q/k norms"))
        } else if a.rope_dim.is_some() {
            Some(("model.rope_dim", "a partial RoPE"))
        } else if a.v_norm {
            Some(("model.v_norm", "a norm on the values"))
        } else {
            None
        };
        match other {
            Some((field, what)) => Err(refuse(
                self.policy,
                field,
                &format!("{what} in Nemotron-H's classes"),
            )),
            None => Ok(()),
        }
    }

    /// One execution of the Mamba-2 mixer `m`, its normed input included (module docs).
    fn mamba2(self, m: &Mamba2) -> Result<Part> {
        let (b, h) = (self.b, self.h);
        let [n, p, st, g, k, l] = [
            m.heads,
            m.head_dim,
            m.state,
            m.groups,
            m.conv_kernel,
            m.chunk,
        ]
        .map(u128::from);
        let i = mul(n, p)?;
        let c = add(i, mul(mul(2, g)?, st)?)?;
        let width = add(add(i, c)?, n)?;
        let t = u128::from(self.context);
        let chunks = t.div_ceil(l);
        let tp = mul(chunks, l)?;
        let slots = add(chunks, 1)?;
        // Per token: the normed input, in_proj's output, the convolution's output, dt + bias
        // and its softplus; dt and x in float32; the gated norm and out_proj's input.
        let float = if b == 4 {
            add(mul(4, c)?, mul(4, n)?)?
        } else {
            add(mul(8, n)?, mul(8, i)?)?
        };
        let whole = [
            mul(b, add(add(h, width)?, add(c, mul(2, n)?)?)?)?,
            float,
            mul(12, i)?,
            mul(4, g)?,
            mul(b, i)?,
        ]
        .into_iter()
        .try_fold(0, add)?;
        // Per sequence: A, the convolution's K − 1 extra outputs, segment_sum's masks and
        // the scan's float32 tensors over the padded sequence (module docs).
        let seq = [
            mul(8, n)?,
            mul(mul(b, c)?, k - 1)?,
            mul(2, add(mul(l, l)?, mul(slots, slots)?)?)?,
            mul(mul(12, n)?, mul(tp, l)?)?,
            mul(mul(20, n)?, mul(st, tp)?)?,
            mul(mul(20, i)?, tp)?,
            mul(mul(8, n)?, tp)?,
            mul(mul(4, n)?, mul(slots, slots)?)?,
            mul(mul(4, i)?, mul(st, add(mul(2, chunks)?, 1)?)?)?,
        ]
        .into_iter()
        .try_fold(0, add)?;
        Ok(Part {
            whole,
            rows: 0,
            seq,
        })
    }

    /// Nemotron-H's MoE block `e`: `(router, experts, shared expert)` (module docs).
    fn nemotron_moe(self, e: &Moe) -> Result<[Part; 3]> {
        let (policy, b, h) = (self.policy, self.b, self.h);
        let other = if e.router.is_some() {
            Some((
                "model.moe.router",
                "a stated router in Nemotron-H's classes",
            ))
        } else if e.shared_experts != 1 || e.shared_gate {
            Some((
                "model.moe.shared_experts",
                "Nemotron-H's classes with other than one ungated shared expert",
            ))
        } else if e.branch_norms || e.router_scale {
            Some((
                "model.moe.router_scale",
                "Gemma 4's router scales or branch norms in Nemotron-H's classes",
            ))
        } else if e.jitter.is_some() {
            Some((
                "model.moe.jitter",
                "the MoE's input noise in Nemotron-H's classes, which draw none",
            ))
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
        // The float32 sigmoid, the groups' two best and the best groups (int64), the bool
        // mask, the top-k indices (int64), the top-k weights and their sum.
        let mut router = [
            mul(5, ne)?,
            mul(12, k)?,
            mul(16, GROUPS)?,
            mul(8, TOPK_GROUPS)?,
            4,
        ]
        .into_iter()
        .try_fold(0, add)?;
        // In bf16, the float32 copies of the router's input and (per sequence) its weight.
        let mut router_seq = 0;
        if b == 2 {
            router = add(router, mul(4, h)?)?;
            router_seq = mul(4, mul(ne, h)?)?;
        }
        let w = e.latent.map_or(h, u128::from);
        let widths = mul(b, add(mul(2, w)?, mul(2, f)?)?)?;
        let (copy, seq) = if self.eager {
            (add(add(20, widths)?, mul(4, w)?)?, 0)
        } else {
            (add(28, widths)?, mul(4, ne)?)
        };
        let latent = if e.latent.is_some() { mul(b, w)? } else { 0 };
        let experts = Part {
            whole: add(mul(k, copy)?, latent)?,
            rows: 0,
            seq,
        };
        let shared = mul(mul(2, b)?, u128::from(e.shared_ffn))?;
        Ok([
            Part {
                whole: router,
                rows: 0,
                seq: router_seq,
            },
            experts,
            Part::whole(shared),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(b: u128, context: u64) -> Step {
        Step {
            policy: ActivationPolicy::TransformersEager,
            eager: true,
            b,
            h: 64,
            layer_norm: false,
            gpt_oss: false,
            llama4: false,
            context,
        }
    }

    fn mixer(head_dim: u64, state: u64) -> Mamba2 {
        Mamba2 {
            heads: 4,
            head_dim,
            state,
            groups: 2,
            conv_kernel: 4,
            chunk: 8,
            conv_bias: true,
            proj_bias: false,
        }
    }

    /// One Mamba-2 mixer execution on `H = 64`, as PyTorch saves it (the storages measured
    /// with python/tests/test_saved_tensors.py's hook on a `M*` model, less its norm and
    /// its attention layer).
    #[test]
    fn the_mamba2_mixer_is_what_pytorch_saves() {
        // float32, T = 48 (6 chunks of 8, no padding); n = 4, p = 8, N = 8, G = 2: I = 32,
        // c = 64, P = 100. Per token: 4·(64 + 100 + 64 + 8) = 944, x and dt in float32
        // 4·64 + 4·4 = 272, the gated norm 12·32 + 4·2 + 4·32 = 520: 1736. Per sequence:
        // A 32, the convolution's tail 4·64·3 = 768, masks 2·64 + 2·49 = 226, L and the
        // scores 12·4·48·8 = 18432, B and C 20·4·8·48 = 30720, x 20·32·48 = 30720, decays
        // 8·4·48 = 1536, the chunk decay 4·4·49 = 784, states 4·32·8·13 = 13312: 96530.
        let part = step(4, 48).mamba2(&mixer(8, 8)).unwrap();
        assert_eq!((part.whole, part.seq), (1736, 96_530));
        assert_eq!(part.whole * 48 + part.seq, 179_858);
        // bfloat16, T = 44 (padded to 48); p = 6, N = 10: I = 24, c = 64, P = 92.
        let part = step(2, 44).mamba2(&mixer(6, 10)).unwrap();
        assert_eq!(part.whole * 44 + part.seq, 140_370);
    }

    /// The router with one group, eager experts at the hidden width, in float32: per token
    /// 5·4 + 12·2 + 28 = 72 for the router and 2·(20 + 4·(128 + 64) + 256) = 2088 for two
    /// routed copies; the shared expert 2·4·48.
    #[test]
    fn the_moe_block_is_what_pytorch_saves() {
        let moe = Moe {
            experts: 4,
            top_k: 2,
            expert_ffn: 32,
            shared_experts: 1,
            shared_ffn: 48,
            latent: None,
            shared_gate: false,
            router_bias: false,
            expert_bias: false,
            activation: crate::model::ExpertActivation::Relu2,
            router_scale: false,
            branch_norms: false,
            router: None,
            router_groups: None,
            jitter: None,
        };
        let [router, experts, shared] = step(4, 48).nemotron_moe(&moe).unwrap();
        assert_eq!((router.whole, experts.whole, shared.whole), (72, 2088, 384));
    }
}
