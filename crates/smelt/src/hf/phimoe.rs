//! `phimoe` (Phi-3.5-MoE), as Transformers' `Phimoe` code builds it: Llama's attention
//! (`head_dim`, else `hidden_size / num_attention_heads`; biases on Q, K, V and O if
//! `attention_bias`), LayerNorms with a bias instead of RMSNorms (the two per layer and the
//! final one), an LM head with a bias if `lm_head_bias`, routed experts (`num_local_experts`
//! of `intermediate_size`) behind a router without bias, no shared experts, no dense layers,
//! and Mixtral's mask: a sliding window of `sliding_window` keys on every layer when it is
//! set (Phi-3.5-MoE's 131072 bounds nothing at a shorter context). The SparseMixer routing,
//! the jitter noise and the LongRoPE scaling cost nothing counted.

use serde::{Deserialize, Serialize};

use super::family::{FamilyConfig, OneStruct, OwnKeys};
use super::support::{Feature, Support, every_layer, window_on_every_layer};
use super::{Common, Family, Parts};
use crate::error::Result;
use crate::model::{AttentionBias, Model};

/// The `phimoe` family.
pub(super) struct Phimoe;

impl FamilyConfig for Phimoe {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // PhimoeConfig: num_key_value_heads = 8.
        &[("num_key_value_heads", 8)]
    }
    fn family(&self) -> Family {
        Family::Phimoe
    }
    fn architecture(&self) -> &'static str {
        "PhimoeForCausalLM"
    }
    fn about(&self) -> &'static str {
        "Phi-3.5-MoE (Microsoft; LayerNorms and an LM head with biases)"
    }
    fn reads(&self) -> &'static str {
        "`num_local_experts` of `intermediate_size`, Q/K/V/O biases (`attention_bias`), \
         LayerNorms with biases (always), an LM-head bias (`lm_head_bias`), `sliding_window` \
         on every layer when set (Mixtral's mask)"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
}

impl OneStruct for Phimoe {
    type Keys = Config;
}

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

impl OwnKeys for Config {
    fn parts(&self, c: &Common) -> Result<Parts> {
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

    fn of(m: &Model) -> Result<Self> {
        Ok(Self {
            num_local_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            attention_bias: m.attention_bias == AttentionBias::All,
            lm_head_bias: m.lm_head_bias,
            sliding_window: window_on_every_layer(m, Family::Phimoe)?,
        })
    }
}
