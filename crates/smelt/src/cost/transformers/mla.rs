//! Multi-head latent attention (`DeepseekV3Attention`, DeepSeek-V3's and Kimi-K2's,
//! DeepSeek-V2's `DeepseekV2Attention`, which differs in its RoPE table, and DeepSeek-V3.2's
//! and GLM-5's, beside their sparse attention indexer) as a Transformers training step
//! saves it ([`super`]'s module docs list each tensor).
//!
//! Under SDPA, with query/key heads as wide as value heads (`d_n + d_r = d_v`, GLM-5's
//! published shape), PyTorch's CPU SDPA runs its flash kernel where it runs the math one
//! otherwise. With the indexer, Transformers always hands it a mask (`allow_is_causal_skip
//! = False`), and per layer execution the kernel keeps (checked against PyTorch):
//!
//! | tensor | bytes |
//! |---|---|
//! | `q` and `k` (`d_n + d_r` per head), in the dtype | `2·b·a·(d_n + d_r)` |
//! | `v`, a view of `kv_b_proj`'s output, which stays whole (`k_nope` too) | `b·a·(d_n + d_v)` |
//! | its output, head-major (the query is a concatenation), and `o_proj`'s contiguous copy of it | `2·b·a·d_v` |
//! | the log-sum-exp, float32 | `4a` |
//! | the mask, additive, in the dtype | `b·T²` per sequence |
//!
//! Without an indexer (no mask) that kernel was not checked: refused.

use super::{Part, Step, add, mul, refuse};
use crate::error::Result;
use crate::model::Mla;

impl Step {
    /// One execution of multi-head latent attention `m` with `heads` heads: `(norms,
    /// attention, scores)` and the bytes per token of RoPE's table, saved once per forward:
    /// `cos` and `sin` as wide as `qk_rope_head_dim` in the dtype, or DeepSeek-V2's one
    /// complex64 table (`d_r / 2` values of 8 bytes) in any dtype.
    /// With `indexed`, the layer has the sparse attention indexer, whose mask SDPA gets.
    pub(super) fn latent(self, heads: u64, m: &Mla, indexed: bool) -> Result<([Part; 3], u128)> {
        let (b, h) = (self.b, self.h);
        if self.layer_norm {
            return Err(refuse(
                self.policy,
                "model.norm_bias",
                "LayerNorms with a bias beside multi-head latent attention",
            ));
        }
        let a = u128::from(heads);
        let (rq, rkv) = (u128::from(m.q_lora_rank), u128::from(m.kv_lora_rank));
        let (dn, dr, dv) = (
            u128::from(m.qk_nope_head_dim),
            u128::from(m.qk_rope_head_dim),
            u128::from(m.v_head_dim),
        );
        let dqk = add(dn, dr)?;
        // With equal query/key and value widths PyTorch's CPU SDPA runs its flash kernel
        // (module docs), checked with the indexer's mask only.
        let flash = !self.eager && dqk == dv;
        if flash && !indexed {
            return Err(refuse(
                self.policy,
                "model.mla.v_head_dim",
                "multi-head latent attention with v_head_dim equal to qk_nope_head_dim + \
                 qk_rope_head_dim under SDPA without a sparse attention indexer (PyTorch's \
                 flash kernel without a mask)",
            ));
        }
        // The query latent's RMSNorm (`q_a_layernorm`, with `q_lora_rank`); the key/value
        // latent's (`kv_a_layernorm`), whose input is a view of `kv_a_proj_with_mqa`'s
        // output: in float32 that whole output (`k_pe` too) is its saved input, in bf16 a
        // float32 copy of the latent alone.
        let q_norm = if rq > 0 { self.norm(rq, 1)? } else { 0 };
        let latent_input = if b == 4 { add(rkv, dr)? } else { rkv };
        let kv_norm = add(add(mul(4, latent_input)?, 4)?, mul(b, rkv)?)?;
        let norms = add(add(mul(2, self.norm(h, 1)?)?, q_norm)?, kv_norm)?;
        // The projections' inputs: the normed hidden state (`q_a_proj` or `q_proj`, and
        // `kv_a_proj_with_mqa`), the normed latents (`q_b_proj`, `kv_b_proj`).
        let inputs = mul(b, add(add(h, rq)?, rkv)?)?;
        // The core's q and k (`d_n + d_r` per head) and v: eager attention keeps them in the
        // dtype, v a view of `kv_b_proj`'s output, which stays whole (`k_nope` too). PyTorch's
        // SDPA math kernel (query/key and value widths differ) keeps q and k scaled in
        // float32, v as it is in float32, a float32 copy of it in bf16; the flash kernel
        // keeps them as eager attention does.
        let (qk, v) = match (self.eager || flash, b) {
            (true, _) => (b, mul(b, mul(a, add(dn, dv)?)?)?),
            (false, 4) => (4, mul(4, mul(a, add(dn, dv)?)?)?),
            (false, _) => (4, mul(4, mul(a, dv)?)?),
        };
        // The core's output (`o_proj`'s input); the flash kernel keeps its head-major output
        // too, of which `o_proj` reads a contiguous copy.
        let outputs = if flash { 2 } else { 1 };
        let core = add(
            add(mul(mul(2, qk)?, mul(a, dqk)?)?, v)?,
            mul(mul(outputs, b)?, mul(a, dv)?)?,
        )?;
        let scores = if flash {
            // The float32 log-sum-exp; the mask, `T × T` in the dtype, per sequence.
            let t = u128::from(self.context);
            Part {
                whole: mul(4, a)?,
                rows: 0,
                seq: mul(b, mul(t, t)?)?,
            }
        } else {
            // The float32 probabilities; eager attention in bf16 also keeps their bf16 copy.
            let per_score = if self.eager && b == 2 { 6 } else { 4 };
            Part {
                rows: mul(a, per_score)?,
                ..Part::default()
            }
        };
        let attention = Part::whole(add(inputs, core)?);
        let rope = if m.complex_rope {
            mul(4, dr)?
        } else {
            mul(mul(2, dr)?, b)?
        };
        Ok(([Part::whole(norms), attention, scores], rope))
    }
}
