//! Activation memory as a Transformers training step saves it: the policies
//! `transformers-eager` (eager attention, eager experts) and `transformers-sdpa`
//! (Transformers' defaults: SDPA attention, `grouped_mm` experts), exact, tensor by tensor,
//! for Transformers 5.24 and PyTorch 2.15 (CPU kernels), in float32
//! (`[counting] activation_bytes = 4`) and in bfloat16 weights (`2`).
//!
//! Every count is the bytes of the storages autograd keeps for the backward pass (each
//! storage once, however many ops save it), per token and per **layer execution**, summed
//! over the executions, plus the rotary embedding's `cos` and `sin` once per forward. What
//! lies outside the decoder layers (the embedding, the final norm, the LM head and loss) is
//! not counted, as in [`super::memory`]. `b` is the bytes of the model's dtype; a norm,
//! a softmax and the router compute in float32 (4 bytes) whatever the dtype. Per execution,
//! with hidden size `H`, `a` query heads of width `d` (`q = a·d`), `g` key/value heads
//! (`kv = g·d`), `E` experts of width `F`, `k` routed, the token-weighted mean document
//! length `T̄` and the sequence length `T`:
//!
//! | tensor | saved by | bytes |
//! |---|---|---|
//! | each layer norm (RMSNorm: `weight · (x · rsqrt(mean x² + ε))` in float32) | its float32 input (a copy in bf16), `rsqrt` per row, `x · rsqrt` cast to the dtype | `4H + 4 + b·H`, twice |
//! | each layer norm with a bias (`norm_bias`, PhiMoE's `nn.LayerNorm`) | its input, mean and `rstd` per row, in the dtype | `b·H + 2b`, twice |
//! | q/k norms per head (Qwen3-MoE) | as a layer norm, per head | `4q + 4a + b·q` and `4kv + 4g + b·kv` |
//! | q/k norms over the full width (OLMoE, MiniMax-M2) | as a layer norm | `4q + 4 + b·q` and `4kv + 4 + b·kv` |
//! | the attention's normed input | `q_proj`, `k_proj`, `v_proj` | `b·H` |
//! | `q`, `k` after RoPE; `v` | the core | `b·(q + 2·kv')`: `kv' = kv` under SDPA (`enable_gqa`, heads at most 256 wide) and with one KV head (`repeat_kv` is a view); `kv' = q` otherwise (`repeat_kv` copies) |
//! | the core's output | `o_proj` | `b·q` |
//! | eager probabilities | softmax (float32) and, in bf16, the matmul with `v` (a bf16 copy) | `a·T̄·4` in float32, `a·T̄·(4 + 2)` in bf16 |
//! | SDPA's log-sum-exp | the fused kernel | `4a` |
//! | SDPA's mask in a sliding-window layer whose window is no longer than `T` (with it, `kv' = q` as under eager attention; `transformers/window.rs`) | the kernel, as an additive mask in the dtype | `b·T²` per sequence |
//! | the FFN's normed input | router, experts, shared expert | `b·H` |
//! | router | softmax over `E` (float32; MiniMax-M2: a sigmoid), top-k indices (int64), with renormalisation the top-k values and their sum (float32) | `4E + 8k (+ 4k + 4)` |
//! | router `topk_softmax` (Granite-MoE) | top-k indices (int64), the softmax over the top-k logits (float32) | `8k + 4k` |
//! | the MoE's input noise (`[model.moe] jitter`): Mixtral's and MiniMax-M2's MoE block draws it once, PhiMoE's block and then its router once each | the in-place product, each noise tensor in the dtype | `b·H` per draw |
//! | router `sparsemixer` (PhiMoE, `k = 2`) | per round of two: the logits' bool mask, the sampled expert and the softmax's maximum (int64), the softmax and the chosen weight (dtype) | `2·(E + 16 + b·(E + 1))` |
//! | eager experts, per routed copy | token and slot indices (one int64 storage), the gathered input, `gate_up` (`2F`), SiLU's output, the gated product, the routing weight, the down projection's output, the weighted output `index_add_`'s backward keeps | `16 + b·(3H + 4F) + w` |
//! | `grouped_mm` experts, per routed copy | three int64 index vectors, the sorted input, `gate_up`, SiLU's output, the product, the routing weight, the down projection's output | `24 + b·(2H + 4F) + w` |
//! | `grouped_mm` experts, per sequence | the int32 group offsets | `4E` |
//! | shared expert (Qwen1.5/2-MoE) | SwiGLU (`4F_s`), its sigmoid gate and output | `b·(4F_s + 1 + H)` |
//! | dense FFN (width `F_d`) | SwiGLU | `b·4F_d` |
//! | router `softmax_fp32` / `softmax_grouped_fp32` / `sigmoid_grouped_fp32` / `sigmoid_grouped_renormalised_fp32` (DeepSeek's), `G` groups, `G_k` chosen | the float32 softmax or sigmoid, top-k indices (int64); grouped: each group's best (V2: 8 bytes) or two best (V3: 16 bytes) int64 indices, the best groups' indices, the bool mask of the other groups' experts; renormalised: the top-k values and their sum | `4E + 8k (+ 8G or 16G, + 8G_k + E) (+ 4k + 4)` |
//! | DeepSeek's router in bf16 | the float32 copies of its input and (per sequence) of its weight | `4H`, `4·E·H` per sequence |
//! | MLA: the attention's normed input | `q_a_proj` (or `q_proj`), `kv_a_proj_with_mqa` | `b·H` |
//! | MLA: `q_a_layernorm` (with `q_lora_rank` `r_q`) and its output | as a layer norm; `q_b_proj` | `4r_q + 4 + b·r_q`, `b·r_q` |
//! | MLA: `kv_a_layernorm` over the latent (`kv_lora_rank` `r_kv`) and its output | its float32 input: in float32 the latent is a view of `kv_a_proj_with_mqa`'s output, which stays whole (`k_pe` too), in bf16 a float32 copy of the latent; `rsqrt`, `x · rsqrt`; `kv_b_proj` | `4(r_kv + d_r) + 4 + 4r_kv` in float32, `4r_kv + 4 + 2r_kv` in bf16; `b·r_kv` |
//! | MLA, eager: `q`, `k` (`d_n + d_r` per head), `v` | the core: `v` is a view of `kv_b_proj`'s output, which stays whole (`k_nope` too) | `b·a·(2(d_n + d_r) + d_n + d_v)` |
//! | MLA, SDPA with `d_n + d_r = d_v` and the indexer's mask (PyTorch's flash kernel; `transformers/mla.rs`) | `q`, `k` and `v` (all of `kv_b_proj`'s output) in the dtype, the kernel's head-major output and `o_proj`'s contiguous copy; the float32 log-sum-exp; the mask, additive, in the dtype | `b·a·(2(d_n + d_r) + d_n + 3d_v)`, `4a`; `b·T²` per sequence |
//! | MLA, SDPA (`d_n + d_r ≠ d_v`: PyTorch's math kernel) | `q` and `k` scaled in float32; `v` as it is in float32 (all of `kv_b_proj`'s output), a float32 copy of it in bf16 | `4a·2(d_n + d_r) + 4a·(d_n + d_v)` in float32, `4a·2(d_n + d_r) + 4a·d_v` in bf16 |
//! | MLA: the core's output (but under the flash kernel, above) | `o_proj` | `b·a·d_v` |
//! | MLA's sparse attention indexer (DeepSeek-V3.2's, GLM-5's: `[model.indexer]`): its projections, `k_norm`, RoPE, the `T × T` index scores per head and their top-k | nothing: it runs under `torch.no_grad()`; its top-k indices become a boolean mask merged into the attention mask, which eager attention and SDPA's math kernel add to the scores without saving it (the flash kernel's mask, above) | 0 |
//! | MLA: probabilities (but under the flash kernel) | softmax (float32); eager attention in bf16 also keeps a bf16 copy (the math kernel does not) | `a·T̄·4`, eager bf16 `a·T̄·6` |
//! | RoPE's `cos` and `sin`, once per forward | the first layer with RoPE's rotary products | `2·r·b`, `r` the rotated width (`rope_dim`, MLA's `d_r`, else `d`); DeepSeek-V2's complex64 table `4·d_r`, Llama-4's `4d` |
//! | Llama-4's L2 q/k norm on a RoPE layer (`qk_norm = "l2"`, no weight) | its float32 input, `rsqrt` per head; its output is the core's `q`, `k` | `4q + 4a + 4kv + 4g` |
//! | Llama-4's NoPE layer with the temperature (`[model.nope] temperature`) | the float32 scale of each position the queries are multiplied by | `4` |
//! | Llama-4's eager probabilities | the softmax in the dtype (no float32 copy) | `a·T̄·b` |
//! | SDPA's mask in a Llama-4 chunked layer whose chunk is no longer than `T` | as a sliding window's | `b·T²` per sequence |
//! | router `sigmoid_topk_scatter` (Llama-4) | top-k indices (int64), the float32 sigmoid over every expert | `8k + 4E` |
//! | Llama-4's experts, every expert on every token, per token and expert (both stacks) | the routing weight, the repeated and the weighted input, `gate_up`, SiLU's output, the product | `E·b·(1 + 2H + 4F)` |
//! | SDPA after a RoPE that concatenates (`rope_dim`: MiniMax-M2, GLM-4.5), more than one head | `o_proj`'s contiguous copy of the core's head-major output (in place, the output is token-major and read as it is) | `b·q` |
//! | Gemma 4's decoder layer (`Gemma4TextDecoderLayer`: float32 norms that keep `x · pow` and, in bf16, a float32 copy of their input and weight; the value norm, post norms, the MoE branches' norms, the router's scales, the GeGLU, full-attention layers of their own shape with `k_eq_v`), under both policies | tensor by tensor in `transformers/gemma4.rs` | as there |
//! | Nemotron-H's decoder layer (`NemotronHBlock`: one float32 norm that keeps `x · rsqrt` in float32, and one block: the Mamba-2 mixer's torch path with its chunked scan over the sequence padded to `chunk_size`, attention without RoPE, the relu2 MLP, or the MoE with its router, relu2 experts, shared expert and LatentMoE's projections), under both policies | tensor by tensor in `transformers/nemotron_h.rs` | as there |
//! | Qwen3-Next's and Qwen3.5's decoder layers (`Qwen3NextDecoderLayer`, `Qwen3_5MoeDecoderLayer`: zero-centred float32 norms that keep `x · rsqrt` in float32 and `1 + weight`; gated attention with per-head zero-centred q/k norms and a partial RoPE; the Gated DeltaNet layer: the causal convolution, the gating, the l2 norms, `torch_chunk_gated_delta_rule` on the sequence padded to a multiple of 64, the gated RMSNorm), under both policies | tensor by tensor in `transformers/gated_deltanet.rs` | as there |
//!
//! The routing weight `w` is 4 bytes where the router keeps it in float32 (Mixtral's,
//! `router = "softmax_renormalised_fp32"`; MiniMax-M2's, `"sigmoid_renormalised_fp32"`;
//! DeepSeek's), `b` where it casts it to the model's dtype. MiniMax-M2's and DeepSeek-V3's
//! (and GLM-4.5's) router bias (`e_score_correction_bias`) only shifts the choice, gpt-oss's
//! is added to the logits: nothing saved.
//!
//! gpt-oss's classes (attention sinks, expert biases, the clamped SwiGLU, its router) save
//! more, under `transformers-eager` only: `transformers/gpt_oss.rs` lists what. Llama-4's
//! (chunked attention, NoPE layers, the L2 q/k norm, its router and experts) under both
//! policies: `transformers/llama4.rs`.
//!
//! Qwen3-Next's and Qwen3.5's classes (`qwen3_next`, `qwen3_5_moe_text`: Gated DeltaNet
//! layers beside gated attention) are counted layer by layer in
//! `transformers/gated_deltanet.rs`: a model with the attention output gate or Gated
//! DeltaNet layers is counted as those classes (the capability table's notes), the MoE and
//! the dense layers with the rows above; an attention layer without the gate beside Gated
//! DeltaNet layers is refused, as is, in float32, a Gated DeltaNet with as many value heads
//! as query/key heads (the two classes then save different bytes).
//!
//! Gemma 4's classes (`gemma4_text`) are counted layer by layer in `transformers/gemma4.rs`:
//! its pieces (full-attention layers of their own shape, the value norm, the post norms,
//! the branch norms, the router's scales, the GeGLU) are counted by these policies only
//! (the capability table's notes), and a model with some of them but not all is refused.
//! So are Nemotron-H's (`nemotron_h`, `transformers/nemotron_h.rs`): Mamba-2 layers,
//! one-block layers and the relu2 MLP, with or without LatentMoE's latent experts.
//!
//! Multi-head latent attention (DeepSeek-V3's `DeepseekV3Attention`, Kimi-K2's,
//! DeepSeek-V2's `DeepseekV2Attention`, and with the sparse attention indexer
//! DeepSeek-V3.2's `DeepseekV32Attention` and GLM-5's `GlmMoeDsaAttention`) has `a` heads,
//! query/key heads of `d_n + d_r` (`qk_nope_head_dim`, `qk_rope_head_dim`), value heads of
//! `d_v`; its RoPE (interleaved or not) saves only `cos` and `sin`, DeepSeek-V2's
//! (`model.mla.complex_rope`) one complex64 table, `4·d_r` bytes per token in any dtype.
//! DeepSeek-V3's router weight (DeepSeek-V3.2's and GLM-5's too) is a float32 parameter
//! that `model.to(torch.bfloat16)` casts (how the proof builds the bf16 model): its float32
//! copy is counted. A model loaded with `from_pretrained(..., dtype=torch.bfloat16)` keeps
//! it in float32 (`_keep_in_fp32_modules_strict`) and saves `4·E·H` bytes less per MoE
//! layer execution and sequence.
//!
//! The indexer's top-k mask makes Transformers build the attention mask always
//! (`allow_is_causal_skip = False`) and hand it to SDPA. With `d_n + d_r ≠ d_v` (DeepSeek's
//! published shapes) MLA's SDPA runs PyTorch's math kernel either way, which adds the mask
//! to the scores and saves nothing more than without it: per layer execution these
//! classes save exactly what DeepSeek-V3's do from the same config, at any `T` and
//! whatever `index_topk`. With `d_n + d_r = d_v` (GLM-5's) it runs the flash kernel, which
//! keeps the mask (`transformers/mla.rs`).
//!
//! Only what was checked against PyTorch is counted (python/tests/test_saved_tensors.py):
//! grouped-query attention with no, per-head or full-width q/k norms and RoPE in place or
//! partial (`rope_dim`), sliding windows (`transformers/window.rs`), DeepSeek's multi-head
//! latent attention with or without the sparse attention indexer (which saves nothing: it
//! runs without gradient; DeepSeek-V3.2's classes build it on every layer, and GLM-5's
//! import reads only layers whose indexer is `"full"`, refusing a `"shared"` one, which
//! reuses another layer's top-k), RMSNorm or LayerNorm with a bias, SwiGLU experts behind a
//! stated router (`[model.moe] router`, which the import states for OLMoE, Qwen1.5/2-MoE,
//! Qwen3-MoE, Granite-MoE, gpt-oss, Llama-4, Mixtral, MiniMax-M2 and PhiMoE (the last
//! three with or without their input noise, `[model.moe] jitter`), and for DeepSeek-V2,
//! DeepSeek-V3, DeepSeek-V3.2, Kimi-K2, GLM-4.5 and GLM-5 where the config's `topk_method`, `scoring_func`,
//! `norm_topk_prob`, `n_group` and `topk_group` are what Transformers' class builds),
//! gated or ungated shared experts, dense FFNs, gpt-oss under `transformers-eager`,
//! Llama-4 under both, Gemma 4's classes (sliding and full layers, with or without
//! `k_eq_v`), Nemotron-H's (Mamba-2, attention, MLP and MoE blocks, with or without
//! LatentMoE), and Qwen3-Next's and Qwen3.5's (Gated DeltaNet layers and gated attention).
//! Anything else is refused, naming the field: a router not stated
//! (DeepSeek's where the config says other than its class does), input noise beside a
//! router whose class draws none, MLA under SDPA with `d_v = d_n + d_r`
//! without the indexer (PyTorch's flash kernel without a mask, not checked), a partial
//! RoPE in a windowed layer under SDPA, Llama-4's pieces beside what its classes do not
//! build (`transformers/llama4.rs`), gpt-oss under `transformers-sdpa` (Transformers
//! builds no SDPA attention for it) or any of its features apart from the others, a
//! router bias but MiniMax-M2's, the DeepSeek routers' and gpt-oss's, layers without
//! attention (but Nemotron-H's Mamba-2, MLP and MoE blocks), float16 (`activation_bytes` other than 2 or 4); a SparseMixer router with
//! other than two experts, and a group-limited router whose `[model.moe.router_groups]`
//! do not fit the experts, are refused by the model's own validation. Autocast (float32
//! weights, bf16 compute) is not modelled: it also saves the bf16 copy of every weight a
//! matmul reads.

mod gated_deltanet;
mod gemma4;
mod gpt_oss;
mod llama4;
mod mla;
mod nemotron_h;
mod window;

use super::Keys;
use crate::error::{Error, Result};
use crate::model::{
    ActivationPolicy, AttentionLayer, AttentionShape, Consumer, Counting, ExpertActivation,
    Feature, Ffn, Moe, QkNorm, Router, Stack, TokenMixer, capability::refusal,
};
use crate::units::ActivationBytes;

use super::memory::ActivationBreakdown;

const WHAT: &str = "activations";

/// Bytes per token of one component: a whole part, `rows` bytes times `T̄` and `seq`
/// bytes per sequence.
#[derive(Debug, Clone, Copy, Default)]
struct Part {
    whole: u128,
    rows: u128,
    seq: u128,
}

fn over() -> Error {
    Error::Overflow { what: WHAT }
}

fn mul(a: u128, b: u128) -> Result<u128> {
    a.checked_mul(b).ok_or_else(over)
}

fn add(a: u128, b: u128) -> Result<u128> {
    a.checked_add(b).ok_or_else(over)
}

impl Part {
    fn whole(n: u128) -> Self {
        Self {
            whole: n,
            ..Self::default()
        }
    }

    /// `self` over `times` executions, plus `acc`.
    fn add_times(self, times: u64, acc: Self) -> Result<Self> {
        let t = u128::from(times);
        Ok(Self {
            whole: add(acc.whole, mul(self.whole, t)?)?,
            rows: add(acc.rows, mul(self.rows, t)?)?,
            seq: add(acc.seq, mul(self.seq, t)?)?,
        })
    }

    fn bytes(self, keys: &Keys, context: u64) -> Result<ActivationBytes> {
        let rows = ActivationBytes::ratio(mul(self.rows, keys.rows.pairs)?, keys.rows.queries)?;
        let seq = ActivationBytes::ratio(self.seq, u128::from(context.max(1)))?;
        let whole = u64::try_from(self.whole).map_err(|_| over())?;
        ActivationBytes::from_int(whole)
            .checked_add(rows)?
            .checked_add(seq)
    }
}

/// The refusal of what the Transformers policies do not count.
fn refuse(policy: ActivationPolicy, field: &str, what: &str) -> Error {
    refusal(Consumer::Activations, Some(policy.as_str()), field, what)
}

/// Refuses a model with some of a family's `own` features (`present`: which it has) but not
/// all, naming the first missing one: its classes build them together, and `pieces` lists
/// them (an open parenthesis the refusal closes).
fn all_of(policy: ActivationPolicy, own: &[Feature], present: &[bool], pieces: &str) -> Result<()> {
    match present.iter().position(|&p| !p) {
        Some(i) => Err(refuse(
            policy,
            own[i].field(),
            &format!(
                "a model without {} but with {pieces}: no Transformers class builds them \
                 apart)",
                own[i].words()
            ),
        )),
        None => Ok(()),
    }
}

/// The features the Transformers policies refuse (module docs).
const REFUSED: [Feature; 1] = [Feature::Blocks];

/// The stack being counted: its policy, dtype bytes and hidden size.
#[derive(Clone, Copy)]
struct Step {
    policy: ActivationPolicy,
    eager: bool,
    b: u128,
    h: u128,
    layer_norm: bool,
    /// gpt-oss's classes ([`gpt_oss`]).
    gpt_oss: bool,
    /// Llama-4's classes ([`llama4`]).
    llama4: bool,
    /// The sequence length `T` (the workload's context).
    context: u64,
}

impl Step {
    /// A float32 norm of width `w` over `rows` rows per token: its float32 input, `rsqrt`
    /// per row, `x · rsqrt` in the dtype.
    fn norm(self, w: u128, rows: u128) -> Result<u128> {
        add(add(mul(4, w)?, mul(4, rows)?)?, self.normed(w)?)
    }

    /// One execution of the attention block `a`: `(norms, attention, scores)` and the bytes
    /// per token of RoPE's `cos` and `sin` (none in a NoPE layer).
    fn attention(self, a: &AttentionLayer) -> Result<([Part; 3], Option<u128>)> {
        let (b, h) = (self.b, self.h);
        let (heads, kv_heads, d, k_eq_v) = match &a.shape {
            AttentionShape::Mla { heads, mla } => {
                let (parts, rope) = self.latent(*heads, mla, a.indexer.is_some())?;
                return Ok((parts, Some(rope)));
            }
            AttentionShape::Gqa {
                heads,
                kv_heads,
                head_dim,
                k_eq_v,
            } => (*heads, *kv_heads, *head_dim, *k_eq_v),
        };
        if k_eq_v {
            return Err(refuse(
                self.policy,
                "model.full_attention",
                "values that are the keys",
            ));
        }
        // RoPE's cos and sin are as wide as the dimensions it rotates.
        let width = self.rope_width(a.rope_dim, d);
        let (heads, kv_heads, d) = (u128::from(heads), u128::from(kv_heads), u128::from(d));
        let (q, kv) = (mul(heads, d)?, mul(kv_heads, d)?);
        let qk = match a.qk_norm {
            QkNorm::None => 0,
            QkNorm::PerHead => add(self.norm(q, heads)?, self.norm(kv, kv_heads)?)?,
            QkNorm::Full => add(self.norm(q, 1)?, self.norm(kv, 1)?)?,
            QkNorm::L2 => add(self.l2_norm(q, heads)?, self.l2_norm(kv, kv_heads)?)?,
        };
        // A LayerNorm with a bias (PhiMoE) keeps its input and its mean and `rstd` per row,
        // in the dtype.
        let norm = if self.layer_norm {
            add(mul(b, h)?, mul(2, b)?)?
        } else {
            self.norm(h, 1)?
        };
        let norms = add(mul(2, norm)?, qk)?;
        // Eager attention's repeat_kv copies keys and values to every head, unless there is
        // one KV head (a view) or as many as query heads (no repeat).
        // So does SDPA with a window's mask ([`window`]), and with heads wider than 256
        // (Transformers' `use_gqa_in_sdpa` hands SDPA grouped keys only up to 256).
        let masked = self.sdpa_mask(a)?;
        let grouped = !(self.eager || masked || d > 256);
        let kv_core = if !grouped && kv_heads != 1 && kv_heads != heads {
            q
        } else {
            kv
        };
        // A RoPE that concatenates (`rope_dim`) leaves the queries head-major: SDPA's output
        // is too, and `o_proj` reads a contiguous copy of it (in place, SDPA's output is
        // token-major and `o_proj` reads it as it is; so it is with one head, where both
        // orders are one).
        let copy = if !self.eager && a.rope_dim.is_some() && heads > 1 {
            q
        } else {
            0
        };
        let attention = add(
            mul(b, add(add(h, mul(2, q)?)?, add(mul(2, kv_core)?, copy)?)?)?,
            Self::temperature(a),
        )?;
        let scores = if self.gpt_oss {
            self.sink_scores(heads)?
        } else if self.eager {
            Part {
                rows: mul(heads, self.eager_score())?,
                ..Part::default()
            }
        } else {
            let t = u128::from(self.context);
            Part {
                whole: mul(4, heads)?,
                rows: 0,
                seq: if masked { mul(b, mul(t, t)?)? } else { 0 },
            }
        };
        let rope = self.rope_table(a, width)?;
        Ok(([Part::whole(norms), Part::whole(attention), scores], rope))
    }

    /// What the router of `e` saves: per token and per sequence, and the bytes of one
    /// routing weight (module docs).
    fn router(self, r: Router, e: &Moe) -> Result<(u128, u128, u128)> {
        let (ne, k) = (u128::from(e.experts), u128::from(e.top_k));
        // The top-k's int64 indices.
        let indices = mul(8, k)?;
        let (token, weight) = match r {
            // A float32 softmax over every expert; renormalised, the top-k values and their
            // sum in float32.
            Router::Softmax => (add(mul(4, ne)?, indices)?, self.b),
            // A float32 softmax (sigmoid) over every expert, the top-k values (a gather)
            // divided in place by their float32 sum.
            Router::SoftmaxRenormalised
            | Router::SoftmaxRenormalisedFp32
            | Router::SigmoidRenormalisedFp32 => {
                let renormalised = add(add(mul(4, ne)?, indices)?, add(mul(4, k)?, 4)?)?;
                let weight = if r == Router::SoftmaxRenormalised {
                    self.b
                } else {
                    4
                };
                (renormalised, weight)
            }
            // A float32 softmax over the top-k logits.
            Router::TopkSoftmax => (add(indices, mul(4, k)?)?, self.b),
            // A softmax over the top-k logits in the dtype.
            Router::TopkSoftmaxDtype => (add(indices, mul(self.b, k)?)?, self.b),
            // Llama-4's: a float32 sigmoid over every expert (the top-k logits scattered
            // among `-inf`), its weights cast to the dtype ([`llama4`]).
            Router::SigmoidTopkScatter => (add(mul(4, ne)?, indices)?, self.b),
            // Per round: the logits' bool mask, the sampled expert and the softmax's
            // maximum (int64), the softmax and the chosen weight in the dtype.
            Router::Sparsemixer => {
                let round = add(add(ne, 16)?, mul(self.b, add(ne, 1)?)?)?;
                (mul(2, round)?, self.b)
            }
            // DeepSeek's: the float32 softmax or sigmoid over every expert and the top-k
            // indices; grouped, the int64 indices of each group's best (V2) or two best
            // (V3) experts and of the best groups, the bool mask of the other groups'
            // experts; renormalised, the top-k values and their sum.
            Router::SoftmaxFp32
            | Router::SoftmaxGroupedFp32
            | Router::SigmoidGroupedFp32
            | Router::SigmoidGroupedRenormalisedFp32 => {
                let mut token = add(mul(4, ne)?, indices)?;
                if let Some(g) = e.router_groups {
                    let best = if r == Router::SoftmaxGroupedFp32 {
                        8
                    } else {
                        16
                    };
                    let groups = mul(best, u128::from(g.groups))?;
                    let chosen = mul(8, u128::from(g.topk_groups))?;
                    token = add(add(token, groups)?, add(chosen, ne)?)?;
                }
                if r.renormalises() {
                    token = add(token, add(mul(4, k)?, 4)?)?;
                }
                (token, 4)
            }
        };
        // Float32 logits from float32 copies of the input and the weight: in bf16 both
        // copies are kept (the weight's once per sequence).
        if r.fp32_logits() && self.b == 2 {
            let weight_copy = mul(4, mul(ne, self.h)?)?;
            return Ok((add(token, mul(4, self.h)?)?, weight_copy, weight));
        }
        Ok((token, 0, weight))
    }

    /// The noise tensors a step draws on the MoE's input (`[model.moe] jitter`), bytes per
    /// token: each `b·H`, which the in-place product keeps for its backward (module docs).
    fn noise(self, r: Router, e: &Moe) -> Result<u128> {
        if e.jitter.is_none() {
            return Ok(0);
        }
        let draws = match r {
            // MixtralSparseMoeBlock, MiniMaxM2SparseMoeBlock: once, in the block.
            Router::SoftmaxRenormalisedFp32 | Router::SigmoidRenormalisedFp32 => 1,
            // PhimoeSparseMoeBlock, then PhimoeTopKRouter again.
            Router::Sparsemixer => 2,
            _ => {
                return Err(refuse(
                    self.policy,
                    "model.moe.jitter",
                    "the MoE's input noise beside a router whose Transformers class draws \
                     none (Mixtral's, MiniMax-M2's and PhiMoE's classes draw it)",
                ));
            }
        };
        mul(draws, mul(self.b, self.h)?)
    }

    /// One execution of a layer with attention `a` and FFN `ffn`: the parts as
    /// [`activations`] sums them, and the bytes per token of RoPE's `cos` and `sin`.
    fn layer(self, a: &AttentionLayer, ffn: Option<&Ffn>) -> Result<([Part; 8], Option<u128>)> {
        let ([n, at, sc], r) = self.attention(a)?;
        let ffn_input = Part::whole(mul(self.b, self.h)?);
        let [ro, ex, sh, de] = match ffn {
            Some(ffn) => self.ffn(ffn)?,
            None => [Part::default(); 4],
        };
        Ok(([n, at, sc, ffn_input, ro, ex, sh, de], r))
    }

    /// One execution of the FFN `ffn`: `(router, experts, shared, dense)`.
    fn ffn(self, ffn: &Ffn) -> Result<[Part; 4]> {
        let (b, h, policy) = (self.b, self.h, self.policy);
        let zero = Part::default();
        let e = match ffn {
            Ffn::Moe(e) => e,
            Ffn::Dense { width, activation } => {
                if *activation != ExpertActivation::Swiglu {
                    return Err(refuse(
                        policy,
                        "model.moe.activation",
                        "FFNs other than SwiGLU",
                    ));
                }
                let dense = Part::whole(mul(b, mul(4, u128::from(*width))?)?);
                return Ok([zero, zero, zero, dense]);
            }
        };
        // gpt-oss's clamped SwiGLU keeps `gate_up` and five widths (module docs).
        let gated = match e.activation {
            ExpertActivation::Swiglu => 4,
            ExpertActivation::ClampedSwiglu if self.gpt_oss => 7,
            _ => 0,
        };
        if gated == 0 {
            return Err(refuse(
                policy,
                "model.moe.activation",
                "experts other than SwiGLU",
            ));
        }
        let Some(r) = e.router else {
            return Err(refuse(
                policy,
                "model.moe.router",
                "a router that is not stated (set [model.moe] router; the import states it \
                 for OLMoE, the Qwen MoE families, Granite-MoE, gpt-oss, Mixtral, MiniMax-M2 \
                 and PhiMoE, and for DeepSeek-V2, DeepSeek-V3, DeepSeek-V3.2, Kimi-K2, GLM-4.5 and GLM-5 where \
                 their configs say what Transformers' classes do)",
            ));
        };
        let (ne, k, f) = (
            u128::from(e.experts),
            u128::from(e.top_k),
            u128::from(e.expert_ffn),
        );
        // The router bias of a sigmoid router only shifts the choice, gpt-oss's is added to
        // the logits (no saved tensor); any other is not modelled.
        let kept = matches!(
            r,
            Router::SigmoidRenormalisedFp32
                | Router::SigmoidGroupedFp32
                | Router::SigmoidGroupedRenormalisedFp32
                | Router::TopkSoftmaxDtype
        );
        if e.router_bias && !kept {
            let f = Feature::RouterBias;
            return Err(refuse(policy, f.field(), f.words()));
        }
        let (router, router_seq, weight) = self.router(r, e)?;
        let router = add(router, self.noise(r, e)?)?;
        let (index, widths) = if self.eager { (16, 3) } else { (24, 2) };
        let copy = add(
            add(index, mul(b, add(mul(widths, h)?, mul(gated, f)?)?)?)?,
            weight,
        )?;
        let experts = if r == Router::SigmoidTopkScatter {
            self.every_expert(e)?
        } else {
            Part {
                whole: mul(k, copy)?,
                rows: 0,
                seq: if self.eager { 0 } else { mul(4, ne)? },
            }
        };
        let (n, fs) = (u128::from(e.shared_experts), u128::from(e.shared_ffn));
        let mut shared = mul(mul(4, n)?, fs)?;
        if e.shared_gate {
            shared = add(shared, add(1, mul(n, h)?)?)?;
        }
        Ok([
            Part {
                whole: router,
                rows: 0,
                seq: router_seq,
            },
            experts,
            Part::whole(mul(b, shared)?),
            zero,
        ])
    }
}

/// What `stack` saves per token under the Transformers `policy`, by component, on a
/// workload of `context`-token sequences (module docs).
pub(super) fn activations(
    stack: &Stack,
    keys: &Keys,
    context: u64,
    counting: &Counting,
    policy: ActivationPolicy,
) -> Result<ActivationBreakdown> {
    Consumer::Activations.check_policy(stack, policy)?;
    let eager = match policy {
        ActivationPolicy::TransformersEager => true,
        ActivationPolicy::TransformersSdpa => false,
        other => {
            return Err(Error::invalid(
                "counting.activations",
                format!("{other} is not a Transformers policy"),
            ));
        }
    };
    let nemotron_h = nemotron_h::classes(stack, policy)?;
    if let Some(f) = REFUSED.into_iter().find(|&f| !nemotron_h && stack.has(f)) {
        return Err(refuse(policy, f.field(), f.words()));
    }
    let gpt_oss = gpt_oss::classes(stack, policy)?;
    let llama4 = llama4::classes(stack, policy)?;
    let gemma4 = gemma4::classes(stack, policy)?;
    let hybrid = gated_deltanet::classes(stack);
    let b = u128::from(counting.activation_bytes);
    if b != 2 && b != 4 {
        return Err(refuse(
            policy,
            "counting.activation_bytes",
            "activation bytes other than 4 (float32) or 2 (bfloat16 weights)",
        ));
    }
    let step = Step {
        policy,
        eager,
        b,
        h: u128::from(stack.hidden()),
        layer_norm: stack.has(Feature::NormBias),
        gpt_oss,
        llama4,
        context,
    };
    // norms, attention, scores, FFN input, router, experts, shared, dense.
    let mut parts = [Part::default(); 8];
    // RoPE's cos and sin: computed once per forward, saved by the first layer (Gemma 4's:
    // once per layer type, sliding and full, [`gemma4`]).
    let mut rope = [None; 2];
    for kind in stack.kinds() {
        if nemotron_h || hybrid {
            let (layer, r) = if nemotron_h {
                (step.nemotron_layer(&kind.layer)?, None)
            } else {
                step.gdn_layer(&kind.layer)?
            };
            if let Some(r) = r {
                rope[0].get_or_insert(r);
            }
            for (acc, p) in parts.iter_mut().zip(layer) {
                *acc = p.add_times(kind.executions, *acc)?;
            }
            continue;
        }
        let Some(TokenMixer::Attention(a)) = &kind.layer.mixer else {
            return Err(refuse(policy, "model.ffn_only", "layers without attention"));
        };
        let (layer, r) = if gemma4 {
            step.gemma4_layer(&kind.layer)?
        } else {
            step.layer(a, kind.layer.ffn.as_ref())?
        };
        if let Some(r) = r {
            rope[usize::from(gemma4 && a.window.is_some())].get_or_insert(r);
        }
        for (acc, p) in parts.iter_mut().zip(layer) {
            *acc = p.add_times(kind.executions, *acc)?;
        }
    }
    for r in rope.into_iter().flatten() {
        parts[1].whole = add(parts[1].whole, r)?;
    }
    let at = |p: Part| p.bytes(keys, context);
    Ok(ActivationBreakdown {
        layer_inputs: ActivationBytes::ZERO,
        norms: at(parts[0])?,
        attention: at(parts[1])?,
        scores: at(parts[2])?,
        indexer: ActivationBytes::ZERO,
        ffn_input: at(parts[3])?,
        router: at(parts[4])?,
        experts: at(parts[5])?,
        shared: at(parts[6])?,
        dense: at(parts[7])?,
    })
}
