//! The recurrent token mixers ([`Mixer`]: Gated DeltaNet, Mamba-2) a model's recurrent
//! layers run in place of attention, with their shapes and the knobs a lattice searches.

use serde::{Deserialize, Serialize};

use super::is_false;

/// Layers whose token mixer is recurrent: the listed layers run `mixer` in place of the
/// attention block (their FFN, norms and loop visits are the model's as for any layer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recurrent {
    /// 1-based indices of the recurrent layers, strictly increasing; the others are
    /// attention layers (at least one must remain).
    pub layers: Vec<u64>,
    /// The recurrent token mixer of those layers, one kind per model.
    pub mixer: Mixer,
}

/// A recurrent token mixer kind, each with its own shapes (a table named by the kind, as
/// `[model.recurrent.mixer.gated_deltanet]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Mixer {
    /// Gated DeltaNet (Yang et al., arXiv:2412.06464) as Qwen3-Next and Qwen3.5 run it.
    GatedDeltanet(GatedDeltaNet),
    /// Mamba-2 (Dao and Gu, arXiv:2405.21060) as Nemotron-H runs it.
    Mamba2(Mamba2),
}

impl Mixer {
    /// What the recurrence's own state is called for the kind named `kind`
    /// ([`Mixer::as_str`]): `delta` (Gated DeltaNet's delta-rule matrix), `ssm` (Mamba-2's).
    pub fn state_word_of(kind: &str) -> &'static str {
        match kind {
            "mamba2" => "ssm",
            _ => "delta",
        }
    }

    /// The kind's name, as the model file spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Mixer::GatedDeltanet(_) => "gated_deltanet",
            Mixer::Mamba2(_) => "mamba2",
        }
    }

    /// The shape a lattice searches, in words: Gated DeltaNet's `keys 16x128, values
    /// 32x128` (heads x head width), Mamba-2's `heads 64x64, state 128` (heads x head
    /// width, state per head and channel).
    pub fn shape_text(&self) -> String {
        match self {
            Mixer::GatedDeltanet(g) => format!(
                "keys {}x{}, values {}x{}",
                g.key_heads, g.key_head_dim, g.value_heads, g.value_head_dim
            ),
            Mixer::Mamba2(m) => format!("heads {}x{}, state {}", m.heads, m.head_dim, m.state),
        }
    }

    /// [`Mixer::shape_text`] for a narrow column: `k16x128 v32x128`, `64x64 s128`.
    pub fn shape_compact(&self) -> String {
        match self {
            Mixer::GatedDeltanet(g) => format!(
                "k{}x{} v{}x{}",
                g.key_heads, g.key_head_dim, g.value_heads, g.value_head_dim
            ),
            Mixer::Mamba2(m) => format!("{}x{} s{}", m.heads, m.head_dim, m.state),
        }
    }
}

/// Chunk length of the chunked gated delta rule: the default of Transformers'
/// `torch_chunk_gated_delta_rule` (`chunk_size = 64`, a function argument, not a config
/// key); the sequence is padded to a multiple of it.
pub const DELTA_RULE_CHUNK: u64 = 64;

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
    /// Query (= key) width `key_heads·key_head_dim`.
    pub fn key_width(&self) -> u64 {
        self.key_heads.saturating_mul(self.key_head_dim)
    }

    /// Value (= gate) width `value_heads·value_head_dim`.
    pub fn value_width(&self) -> u64 {
        self.value_heads.saturating_mul(self.value_head_dim)
    }
}

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
    /// Chunk length of the SSD scan (`chunk_size`); the sequence is padded to a multiple of
    /// it.
    pub chunk: u64,
    /// A bias on the convolution (`use_conv_bias`): one per channel, no counted FLOPs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub conv_bias: bool,
    /// Biases on `in_proj` and `out_proj` (`use_bias`), no counted FLOPs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub proj_bias: bool,
}

impl Mamba2 {
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

impl Mixer {
    /// The mixer's searched knobs in the search's tie-break order: Gated DeltaNet's
    /// `key_heads`, `value_heads`, `key_head_dim`, `value_head_dim`; Mamba-2's `heads`,
    /// `head_dim`, `state` (then 0).
    pub fn knobs(&self) -> [u64; 4] {
        match self {
            Mixer::GatedDeltanet(g) => {
                [g.key_heads, g.value_heads, g.key_head_dim, g.value_head_dim]
            }
            Mixer::Mamba2(s) => [s.heads, s.head_dim, s.state, 0],
        }
    }
}
