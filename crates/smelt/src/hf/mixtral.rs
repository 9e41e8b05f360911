//! `mixtral`: routed experts only, no q/k norm, no biases; a sliding window of
//! `sliding_window` keys on every layer when it is set (Transformers' Mixtral has no
//! `use_sliding_window` switch: its mask is windowed whenever the key is not null). The
//! router is stated only where `router_jitter_noise` is 0 or absent: the noise a training
//! step multiplies the router's input by is saved, and smelt's model does not describe it.

use serde::{Deserialize, Serialize};

use super::family::{FamilyConfig, OneStruct, OwnKeys};
use super::support::{Feature, Support, every_layer, window_on_every_layer};
use super::{Common, Family, Parts};
use crate::error::Result;
use crate::model::{Model, Router};

/// The `mixtral` family.
pub(super) struct Mixtral;

impl FamilyConfig for Mixtral {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // MixtralConfig: num_key_value_heads = 8.
        &[("num_key_value_heads", 8)]
    }
    fn family(&self) -> Family {
        Family::Mixtral
    }
    fn architecture(&self) -> &'static str {
        "MixtralForCausalLM"
    }
    fn about(&self) -> &'static str {
        "Mixtral (Mistral AI)"
    }
    fn reads(&self) -> &'static str {
        "`num_local_experts`, `intermediate_size` (expert width); `sliding_window`, when set, \
         windows every layer; the router (`softmax_renormalised_fp32`); the MoE's input noise \
         (`router_jitter_noise`, `jitter`)"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn routers(&self) -> &'static [Router] {
        // MixtralTopKRouter: a float32 softmax, the top-k renormalised, kept in float32.
        &[Router::SoftmaxRenormalisedFp32]
    }
    fn jitter_key(&self) -> Option<&'static str> {
        Some("router_jitter_noise")
    }
}

impl OneStruct for Mixtral {
    type Keys = Config;
}

const SUPPORT: Support = Support {
    features: &[Feature::Sliding, Feature::Jitter],
    ..Support::ROUTED
};

/// The keys `mixtral` adds to the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_local_experts: u64,
    intermediate_size: u64,
    #[serde(default)]
    sliding_window: Option<u64>,
}

impl OwnKeys for Config {
    fn parts(&self, c: &Common) -> Result<Parts> {
        Ok(Parts {
            experts: self.num_local_experts,
            expert_ffn: self.intermediate_size,
            window: every_layer(self.sliding_window, c.num_hidden_layers),
            // Mixtral's router always divides the top-k probabilities by their sum, and
            // keeps them in float32.
            router: Some(crate::model::Router::SoftmaxRenormalisedFp32),
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Result<Self> {
        Ok(Self {
            num_local_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            sliding_window: window_on_every_layer(m, Family::Mixtral)?,
        })
    }
}
