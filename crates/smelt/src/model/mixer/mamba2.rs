//! Mamba-2: its shape, its rules and its cost.

use serde::{Deserialize, Serialize};

use super::{MixerWords, RecurrentBlock};
use crate::error::Result;
use crate::model::is_false;
use crate::model::validate::{ensure, positive};
use crate::model::{MAX_CONTEXT, MAX_COUNT, MAX_WIDTH};
use crate::units::{add, product};

/// Mamba-2 in a refusal's words.
pub(super) const WORDS: MixerWords = MixerWords {
    table: "model.recurrent.mixer.mamba2",
    words: "Mamba-2",
    params_knobs: "heads, head_dim, state or groups",
    knobs: "state, head_dim or heads",
};

/// A Mamba-2 token mixer (Transformers' `NemotronHMamba2Mixer`): `in_proj` of the layer's
/// normed input to the gate `z` (`I = heads·head_dim`), the convolution's input `x, B, C`
/// (`I + 2·groups·state` channels) and one `dt` per head; a depthwise causal convolution of
/// `conv_kernel` taps over `x, B, C`; the chunked SSD scan (chunks of `chunk` tokens, `B` and
/// `C` shared by the `heads / groups` heads of a group); an RMSNorm of width `I` gated by
/// `silu(z)` (normalised per group); and `out_proj`. `A_log`, `D` and `dt_bias` hold one
/// value per head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mamba2 {
    /// SSM heads (`mamba_num_heads`).
    pub heads: u64,
    /// Width of a head (`mamba_head_dim`).
    pub head_dim: u64,
    /// State size per head and channel (`ssm_state_size`).
    pub state: u64,
    /// Groups sharing `B` and `C` (`n_groups`); divides `heads`.
    pub groups: u64,
    /// Taps of the causal convolution (`conv_kernel`).
    pub conv_kernel: u64,
    /// Chunk length of the SSD scan (`chunk_size`); the sequence is padded to a multiple of it.
    pub chunk: u64,
    /// A bias on the convolution (`use_conv_bias`): one per channel, no counted FLOPs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub conv_bias: bool,
    /// Biases on `in_proj` and `out_proj` (`use_bias`), no counted FLOPs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub proj_bias: bool,
}

impl Mamba2 {
    /// Checks the shapes (errors name `model.recurrent.mixer.mamba2.<field>`).
    pub fn validate(&self) -> Result<()> {
        let m = self;
        const AT: &str = "model.recurrent.mixer.mamba2";
        positive(&format!("{AT}.heads"), m.heads, MAX_COUNT)?;
        positive(&format!("{AT}.head_dim"), m.head_dim, MAX_WIDTH)?;
        positive(&format!("{AT}.state"), m.state, MAX_WIDTH)?;
        positive(&format!("{AT}.groups"), m.groups, MAX_COUNT)?;
        positive(&format!("{AT}.conv_kernel"), m.conv_kernel, MAX_COUNT)?;
        positive(&format!("{AT}.chunk"), m.chunk, MAX_CONTEXT)?;
        ensure(
            m.heads.is_multiple_of(m.groups),
            &format!("{AT}.groups"),
            || {
                format!(
                    "must divide {AT}.heads ({}): each group's B and C serve heads / groups heads; \
                 got {}",
                    m.heads, m.groups
                )
            },
        )
    }

    /// Its cost on a residual stream of width `H`, with `n_h` heads of width `d`, inner
    /// width `I = n_h·d`, state `N`, `g` groups, a `w`-tap convolution over `c = I + 2·g·N`
    /// channels and chunks of `C` (the config's `chunk_size`), as
    /// `NemotronHMamba2Mixer.torch_forward` runs it on a sequence padded to `P = C·⌈T/C⌉` in
    /// `Z = P/C + 1` state slots (a zero initial state, then one per chunk):
    /// * projections: `H·(2I + 2·g·N + n_h)` (`in_proj`: z, x, B, C, dt) `+ I·H` (`out_proj`);
    /// * convolution: `(T + w − 1)·c·w`, as for Gated DeltaNet;
    /// * the SSD scan, per head (`B`, `C` repeated to the heads): per chunk `C·Bᵀ` (`C²·N`),
    ///   the masked scores times `x` (`C²·d`), the chunk's state `Σ B·x` (`C·N·d`) and its
    ///   read-out `C·state` (`C·N·d`): `P·n_h·(C·N + C·d + 2·N·d)`; and the chunk-to-chunk
    ///   recurrence computed as a `Z x Z` decay matrix applied to the `Z` states
    ///   (`Z²·n_h·N·d`).
    ///
    /// Not counted: the elementwise products by `dt`, the decays `L` and `exp(A_cumsum)`, the
    /// `D` skip, the softplus of `dt`, cumulative sums, exponentials, masks, the gated RMSNorm
    /// and the activations, as elsewhere.
    pub(crate) fn block(&self, h: u64) -> Result<RecurrentBlock> {
        let x = self;
        const WHAT: &str = "params.recurrent";
        let inner = product(&[x.heads, x.head_dim], WHAT)?;
        let bc = product(&[2, x.groups, x.state], WHAT)?;
        let channels = add(inner, bc, WHAT)?;
        // in_proj: z (inner), x·B·C (channels), dt (heads).
        let in_width = add(add(inner, channels, WHAT)?, x.heads, WHAT)?;
        let macs = add(
            product(&[h, in_width], WHAT)?,
            product(&[inner, h], WHAT)?,
            WHAT,
        )?;
        let conv_macs = product(&[channels, x.conv_kernel], WHAT)?;
        let conv_bias = if x.conv_bias { channels } else { 0 };
        let proj_bias = if x.proj_bias {
            add(in_width, h, WHAT)?
        } else {
            0
        };
        // A_log, D and dt_bias per head; the gated RMSNorm's weight of the inner width.
        let params = [
            conv_macs,
            conv_bias,
            proj_bias,
            product(&[3, x.heads], WHAT)?,
            inner,
        ]
        .into_iter()
        .try_fold(macs, |s, y| add(s, y, WHAT))?;
        let (c, n, d) = (x.chunk, x.state, x.head_dim);
        let per_head = [product(&[c, d], WHAT)?, product(&[2, n, d], WHAT)?]
            .into_iter()
            .try_fold(product(&[c, n], WHAT)?, |s, y| add(s, y, WHAT))?;
        Ok(RecurrentBlock {
            kind: WORDS,
            params,
            macs,
            conv_macs,
            conv_kernel: x.conv_kernel,
            core_macs: product(&[x.heads, per_head], WHAT)?,
            chunk: c,
            slot_macs: product(&[x.heads, n, d], WHAT)?,
            conv_state: conv_macs,
            delta_state: product(&[x.heads, d, n], "kv_cache.state")?,
        })
    }

    /// Inner width `I = heads·head_dim` (of `x`, `z` and the output).
    pub fn inner(&self) -> u64 {
        self.heads.saturating_mul(self.head_dim)
    }

    /// Convolution channels `I + 2·groups·state` (`x`, `B`, `C`).
    pub fn conv_channels(&self) -> u64 {
        self.inner()
            .saturating_add(self.groups.saturating_mul(self.state).saturating_mul(2))
    }
}
