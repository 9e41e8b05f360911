//! `phimoe` (Phi-3.5-MoE), as Transformers' `Phimoe` code builds it: Llama's attention
//! (`head_dim`, else `hidden_size / num_attention_heads`; biases on Q, K, V and O if
//! `attention_bias`), LayerNorms with a bias instead of RMSNorms (the two per layer and the
//! final one), an LM head with a bias if `lm_head_bias`, routed experts (`num_local_experts`
//! of `intermediate_size`) behind a router without bias, no shared experts, no dense layers,
//! and Mixtral's mask: a sliding window of `sliding_window` keys on every layer when it is
//! set (Phi-3.5-MoE's 131072 bounds nothing at a shorter context). The SparseMixer routing,
//! the jitter noise and the LongRoPE scaling cost nothing counted.

use serde::{Deserialize, Serialize};

use super::support::{Feature, Support, every_layer, window_on_every_layer};
use super::{Common, Family, Parts};
use crate::error::Result;
use crate::model::{AttentionBias, Model};

const SUPPORT: Support = Support {
    biases: &[AttentionBias::None, AttentionBias::All],
    features: &[Feature::Sliding, Feature::NormBias, Feature::LmHeadBias],
    required: &[Feature::NormBias],
    ..Support::ROUTED
};

/// The keys `phimoe` adds to the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_local_experts: u64,
    intermediate_size: u64,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    lm_head_bias: bool,
    #[serde(default)]
    sliding_window: Option<u64>,
}

impl Config {
    pub(super) fn parts(&self, c: &Common) -> Result<Parts> {
        Ok(Parts {
            experts: self.num_local_experts,
            expert_ffn: self.intermediate_size,
            attention_bias: AttentionBias::all_if(self.attention_bias),
            window: every_layer(self.sliding_window, c.num_hidden_layers),
            norm_bias: true,
            lm_head_bias: self.lm_head_bias,
            ..Parts::default()
        })
    }

    pub(super) fn of(m: &Model) -> Result<Self> {
        SUPPORT.check(m, Family::Phimoe)?;
        Ok(Self {
            num_local_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            attention_bias: m.attention_bias == AttentionBias::All,
            lm_head_bias: m.lm_head_bias,
            sliding_window: window_on_every_layer(m, Family::Phimoe)?,
        })
    }
}
