//! Gated DeltaNet: its shape, its rules and its cost.

use serde::{Deserialize, Serialize};

use super::{MixerWords, RecurrentBlock};
use crate::error::Result;
use crate::model::validate::{ensure, positive};
use crate::model::{MAX_COUNT, MAX_WIDTH};
use crate::units::{add, product};

/// Chunk length of the chunked gated delta rule: the default of Transformers'
/// `torch_chunk_gated_delta_rule` (`chunk_size = 64`, a function argument, not a config
/// key); the sequence is padded to a multiple of it.
pub const DELTA_RULE_CHUNK: u64 = 64;

/// Gated DeltaNet in a refusal's words.
pub(super) const WORDS: MixerWords = MixerWords {
    table: "model.recurrent.mixer.gated_deltanet",
    words: "Gated DeltaNet",
    params_knobs: "value_heads, key_heads, value_head_dim or key_head_dim",
    knobs: "value_heads, value_head_dim or key_head_dim",
};

/// A Gated DeltaNet token mixer (Transformers' `Qwen3NextGatedDeltaNet`): projections of
/// the layer's normed input to queries and keys (`key_heads` of width `key_head_dim`),
/// values and an output gate `z` (`value_heads` of width `value_head_dim`), and per value
/// head a write strength `b` and a decay input `a`; a depthwise causal convolution of
/// `conv_kernel` taps over `q, k, v`; the chunked gated delta rule; an RMSNorm of width
/// `value_head_dim` gated by `silu(z)`; and the output projection. `A_log` and `dt_bias`
/// hold one value per value head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatedDeltaNet {
    /// Query/key heads (`linear_num_key_heads`).
    pub key_heads: u64,
    /// Value heads (`linear_num_value_heads`), a multiple of `key_heads`.
    pub value_heads: u64,
    /// Width of a query/key head (`linear_key_head_dim`).
    pub key_head_dim: u64,
    /// Width of a value head (`linear_value_head_dim`).
    pub value_head_dim: u64,
    /// Taps of the causal convolution (`linear_conv_kernel_dim`).
    pub conv_kernel: u64,
}

impl GatedDeltaNet {
    /// Checks the shapes (errors name `model.recurrent.mixer.gated_deltanet.<field>`).
    pub fn validate(&self) -> Result<()> {
        let g = self;
        const AT: &str = "model.recurrent.mixer.gated_deltanet";
        positive(&format!("{AT}.key_heads"), g.key_heads, MAX_COUNT)?;
        positive(&format!("{AT}.value_heads"), g.value_heads, MAX_COUNT)?;
        positive(&format!("{AT}.key_head_dim"), g.key_head_dim, MAX_WIDTH)?;
        positive(&format!("{AT}.value_head_dim"), g.value_head_dim, MAX_WIDTH)?;
        positive(&format!("{AT}.conv_kernel"), g.conv_kernel, MAX_COUNT)?;
        ensure(
            g.value_heads.is_multiple_of(g.key_heads),
            &format!("{AT}.value_heads"),
            || {
                format!(
                    "must be a multiple of key_heads ({}): each query/key head serves \
                     value_heads / key_heads value heads; got {}",
                    g.key_heads, g.value_heads
                )
            },
        )
    }

    /// Its cost on a residual stream of width `H`, with `n_k` query/key heads of width
    /// `d_k`, `n_v` value heads of width `d_v`, key width `K = n_k·d_k`, value width
    /// `V = n_v·d_v`, a `w`-tap convolution over `c = 2K + V` channels and chunks of `C = 64`,
    /// as `torch_chunk_gated_delta_rule` runs it on a sequence padded to `P = C·⌈T/C⌉`:
    /// * projections: `H·(2K + 2V + 2·n_v)` (q, k, v, z, b, a) `+ V·H` (out) per token;
    /// * convolution: `(T + w − 1)·c·w` per sequence (`Conv1d` with `padding = w − 1`
    ///   computes `T + w − 1` outputs per channel, the last `w − 1` dropped);
    /// * delta rule, per value head and chunk (queries and keys repeated to the value heads):
    ///   `k_β·kᵀ` and `q·kᵀ` (`2·C²·d_k`), then in the scan `k_cumdecay·S` and `q·S`
    ///   (`2·C·d_k·d_v`), `attn·v_new` (`C²·d_v`) and `kᵀ·v_new` (`C·d_k·d_v`): per sequence
    ///   `P·n_v·(2·C·d_k + C·d_v + 3·d_k·d_v)`.
    ///
    /// Not counted: the two unit-triangular solves per chunk (`solve_triangular`, about
    /// `C²·(d_k + d_v)/2`), the cumulative sums, exponentials, masks, the l2 norms of q and k,
    /// the scaling, `β`, the decays, the gated RMSNorm and the activations, as elsewhere.
    pub(crate) fn block(&self, h: u64) -> Result<RecurrentBlock> {
        let g = self;
        const WHAT: &str = "params.recurrent";
        let (k, v) = (
            product(&[g.key_heads, g.key_head_dim], WHAT)?,
            product(&[g.value_heads, g.value_head_dim], WHAT)?,
        );
        let channels = add(product(&[2, k], WHAT)?, v, WHAT)?;
        let in_width = [product(&[2, v], WHAT)?, product(&[2, g.value_heads], WHAT)?]
            .into_iter()
            .try_fold(product(&[2, k], WHAT)?, |s, x| add(s, x, WHAT))?;
        let macs = add(
            product(&[h, in_width], WHAT)?,
            product(&[v, h], WHAT)?,
            WHAT,
        )?;
        let conv_macs = product(&[channels, g.conv_kernel], WHAT)?;
        let c = DELTA_RULE_CHUNK;
        let (dk, dv) = (g.key_head_dim, g.value_head_dim);
        let per_head = [product(&[c, dv], WHAT)?, product(&[3, dk, dv], WHAT)?]
            .into_iter()
            .try_fold(product(&[2, c, dk], WHAT)?, |s, x| add(s, x, WHAT))?;
        // The gated RMSNorm's weight is one vector of `d_v`, shared by the value heads.
        let params = [conv_macs, product(&[2, g.value_heads], WHAT)?, dv]
            .into_iter()
            .try_fold(macs, |s, x| add(s, x, WHAT))?;
        Ok(RecurrentBlock {
            kind: WORDS,
            params,
            macs,
            conv_macs,
            conv_kernel: g.conv_kernel,
            core_macs: product(&[g.value_heads, per_head], WHAT)?,
            chunk: c,
            slot_macs: 0,
            conv_state: conv_macs,
            delta_state: product(&[g.value_heads, dk, dv], "kv_cache.state")?,
        })
    }

    /// Query (= key) width `key_heads·key_head_dim`.
    pub fn key_width(&self) -> u64 {
        self.key_heads.saturating_mul(self.key_head_dim)
    }

    /// Value (= gate) width `value_heads·value_head_dim`.
    pub fn value_width(&self) -> u64 {
        self.value_heads.saturating_mul(self.value_head_dim)
    }
}
