//! `phimoe` (Phi-3.5-MoE), as Transformers' `Phimoe` code builds it: Llama's attention
//! (`head_dim`, else `hidden_size / num_attention_heads`; biases on Q, K, V and O if
//! `attention_bias`), LayerNorms with a bias instead of RMSNorms (the two per layer and the
//! final one), an LM head with a bias if `lm_head_bias`, routed experts (`num_local_experts`
//! of `intermediate_size`) behind a router without bias, no shared experts, no dense layers,
//! and Mixtral's mask: a sliding window of `sliding_window` keys on every layer when it is
//! set (Phi-3.5-MoE's 131072 bounds nothing at a shorter context). `num_experts_per_tok`
//! must be 2: the SparseMixer router picks two experts whatever it says. The SparseMixer routing,
//! the jitter noise and the LongRoPE scaling cost nothing counted. The router is stated
//! (`sparsemixer`, for the Transformers activation policies); `input_jitter_noise` is the
//! MoE's input noise (`[model.moe] jitter`), which a training step draws twice per MoE
//! layer (in the MoE block and again in the router) and saves.

use serde::{Deserialize, Serialize};

use serde_json::{Map, Value};

use super::family::{ConfigKeys, FamilyConfig, OwnKeys, object};
use super::support::{Feature, Support, every_layer, window_on_every_layer};
use super::{Common, Family, Parts, field_names, read};
use crate::error::{Error, Result};
use crate::model::{AttentionBias, Model, Router};

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
         on every layer when set (Mixtral's mask); the router (`sparsemixer`); the MoE's input \
         noise (`input_jitter_noise`, `jitter`)"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn jitter_key(&self) -> Option<&'static str> {
        Some("input_jitter_noise")
    }
    fn routers(&self) -> &'static [Router] {
        // PhimoeTopKRouter's SparseMixer.
        &[Router::Sparsemixer]
    }
}

/// The experts per token Transformers' `sparsemixer` picks, whatever `num_experts_per_tok`
/// says (the function takes `top_k` and does not use it).
const SPARSEMIXER_TOP_K: u64 = 2;

impl ConfigKeys for Phimoe {
    fn keys(&self) -> Vec<&'static str> {
        field_names::<Config>()
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        if common.num_experts_per_tok != SPARSEMIXER_TOP_K {
            return Err(Error::invalid(
                "num_experts_per_tok",
                format!(
                    "must be {SPARSEMIXER_TOP_K} for phimoe: Transformers' SparseMixer router \
                     picks two experts per token whatever the config says, so a model built \
                     from this config would not be the one counted; got {}",
                    common.num_experts_per_tok
                ),
            ));
        }
        let mut parts = read::<Config>(config)?.parts(common)?;
        parts.router = Some(Router::Sparsemixer);
        Ok(parts)
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        if m.moe.top_k != SPARSEMIXER_TOP_K {
            return Err(Error::invalid(
                "model.moe.top_k",
                format!(
                    "must be {SPARSEMIXER_TOP_K} for a phimoe export: Transformers' SparseMixer \
                     router picks two experts per token whatever the config says; got {}",
                    m.moe.top_k
                ),
            ));
        }
        object(Config::of(m)?)
    }
}

const SUPPORT: Support = Support {
    biases: &[AttentionBias::None, AttentionBias::All],
    features: &[
        Feature::Sliding,
        Feature::NormBias,
        Feature::LmHeadBias,
        Feature::Jitter,
    ],
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
