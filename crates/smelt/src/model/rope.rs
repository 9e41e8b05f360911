//! The queries' and keys' treatment before the core: their norms ([`QkNorm`]) and the
//! layers that apply no rotary embedding ([`Nope`]). Neither costs a counted FLOP (norms and
//! RoPE are not counted) nor changes the KV cache; a q/k norm with a scale has parameters.

use serde::{Deserialize, Serialize};

/// Query/key normalisation, as some families use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QkNorm {
    /// No q/k norm.
    #[default]
    None,
    /// One RMSNorm of width `head_dim` for queries and one for keys, shared across heads
    /// (Qwen3 style): `2 * head_dim` parameters per layer.
    PerHead,
    /// RMSNorm over the whole q and k projections (OLMoE style):
    /// `(heads + kv_heads) * head_dim` parameters per layer.
    Full,
    /// An L2 norm without a scale over each head of the queries and keys, after RoPE, on
    /// the layers with RoPE only (Llama-4's `Llama4TextL2Norm`, `use_qk_norm`): no
    /// parameters.
    L2,
}

impl QkNorm {
    pub(super) fn is_none(&self) -> bool {
        *self == QkNorm::None
    }
}

/// The layers that apply no rotary embedding (Llama-4's NoPE layers, `no_rope_layers`
/// zeros), read only by the Transformers activation policies (what a training step saves
/// differs: no RoPE, no L2 q/k norm, a temperature scale on the queries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nope {
    /// The 1-based layers without RoPE, strictly increasing.
    pub layers: Vec<u64>,
    /// Whether their queries are scaled by a temperature of each position (Llama-4's
    /// `attn_temperature_tuning`, after arXiv:2501.19399).
    #[serde(default, skip_serializing_if = "super::is_false")]
    pub temperature: bool,
}
