//! `gpt_oss`: GQA with biases on Q, K, V and O (`attention_bias`, default true) and one
//! learned sink logit per head; layers alternate sliding-window and full attention
//! (`layer_types`, by default sliding on even 0-based layers; `sliding_window` keys, default
//! 128); a router with a bias; routed experts (`num_local_experts` of `intermediate_size`)
//! with biases on gate/up and down, and gpt-oss's clamped SwiGLU (`swiglu_limit`; smelt's
//! `activation = "clamped_swiglu"`, which changes only the activation memory). No shared
//! experts, no dense layers. YaRN RoPE costs nothing counted.

use serde::{Deserialize, Serialize};

use super::family::{FamilyConfig, OneStruct, OwnKeys};
use super::support::{FULL, Feature, SLIDING, Support, sliding_layers};
use super::{Common, Family, Parts, yes};
use crate::error::{Error, Result};
use crate::model::{AttentionBias, ExpertActivation, Model, Router, Window, WindowKind};

/// The `gpt_oss` family.
pub(super) struct GptOss;

impl FamilyConfig for GptOss {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // GptOssConfig: num_key_value_heads = 8, head_dim = 64.
        &[("num_key_value_heads", 8), ("head_dim", 64)]
    }
    fn family(&self) -> Family {
        Family::GptOss
    }
    fn architecture(&self) -> &'static str {
        "GptOssForCausalLM"
    }
    fn about(&self) -> &'static str {
        "gpt-oss (OpenAI; alternating sliding and full attention, sinks, biases)"
    }
    fn reads(&self) -> &'static str {
        "Q/K/V/O biases (`attention_bias`, true when absent), one sink per head, \
         `layer_types` (`sliding_attention` layers windowed by `sliding_window`, by default \
         every even 0-based layer, 128), a router bias (the router stated: \
         `topk_softmax_dtype`), `num_local_experts` of \
         `intermediate_size` with biases and the clamped SwiGLU (`swiglu_limit`: \
         `activation = \"clamped_swiglu\"`)"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn routers(&self) -> &'static [Router] {
        // GptOssTopKRouter: the top-k of the logits (with its bias), a softmax over them,
        // both in the model's dtype.
        &[Router::TopkSoftmaxDtype]
    }
}

impl OneStruct for GptOss {
    type Keys = Config;
}

/// Transformers' default window.
const DEFAULT_WINDOW: u64 = 128;

const SUPPORT: Support = Support {
    biases: &[AttentionBias::None, AttentionBias::All],
    features: &[
        Feature::Sliding,
        Feature::Sinks,
        Feature::RouterBias,
        Feature::ExpertBias,
        Feature::ClampedSwiglu,
    ],
    required: &[
        Feature::Sinks,
        Feature::RouterBias,
        Feature::ExpertBias,
        Feature::ClampedSwiglu,
    ],
    ..Support::ROUTED
};

/// The keys `gpt_oss` adds to the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_local_experts: u64,
    intermediate_size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sliding_window: Option<u64>,
    #[serde(default)]
    layer_types: Option<Vec<String>>,
    #[serde(default = "yes")]
    attention_bias: bool,
    /// gpt-oss's own name for `num_experts_per_tok`, which its configs also carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    experts_per_token: Option<u64>,
}

impl OwnKeys for Config {
    fn parts(&self, c: &Common) -> Result<Parts> {
        if let Some(k) = self.experts_per_token
            && k != c.num_experts_per_tok
        {
            return Err(Error::invalid(
                "config.json: experts_per_token",
                format!(
                    "says {k} experts per token and num_experts_per_tok says {}; give one count",
                    c.num_experts_per_tok
                ),
            ));
        }
        let layers = c.num_hidden_layers;
        let types: Vec<String> = match &self.layer_types {
            Some(t) => t.clone(),
            None => (0..layers)
                .map(|i| if i % 2 == 0 { SLIDING } else { FULL }.to_owned())
                .collect(),
        };
        let windowed = sliding_layers(&types, layers, Family::GptOss)?;
        let window = (!windowed.is_empty()).then(|| Window {
            kind: WindowKind::Sliding,
            size: self.sliding_window.unwrap_or(DEFAULT_WINDOW),
            layers: windowed,
        });
        Ok(Parts {
            experts: self.num_local_experts,
            expert_ffn: self.intermediate_size,
            attention_bias: AttentionBias::all_if(self.attention_bias),
            window,
            sinks: true,
            router_bias: true,
            expert_bias: true,
            activation: ExpertActivation::ClampedSwiglu,
            router: Some(Router::TopkSoftmaxDtype),
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Result<Self> {
        let windowed = |i: u64| m.window.as_ref().is_some_and(|w| w.layers.contains(&i));
        Ok(Self {
            num_local_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            sliding_window: m.window.as_ref().map(|w| w.size),
            layer_types: Some(
                (1..=m.layers)
                    .map(|i| if windowed(i) { SLIDING } else { FULL }.to_owned())
                    .collect(),
            ),
            attention_bias: m.attention_bias == AttentionBias::All,
            experts_per_token: Some(m.moe.top_k),
        })
    }
}
