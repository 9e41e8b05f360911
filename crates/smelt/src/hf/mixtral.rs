//! `mixtral`: routed experts only, no q/k norm, no biases; a sliding window of
//! `sliding_window` keys on every layer when it is set (Transformers' Mixtral has no
//! `use_sliding_window` switch: its mask is windowed whenever the key is not null).

use serde::{Deserialize, Serialize};

use super::support::{Feature, Support, every_layer, window_on_every_layer};
use super::{Common, Family, Parts};
use crate::error::Result;
use crate::model::Model;

const SUPPORT: Support = Support {
    features: &[Feature::Sliding],
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

impl Config {
    pub(super) fn parts(&self, c: &Common) -> Result<Parts> {
        Ok(Parts {
            experts: self.num_local_experts,
            expert_ffn: self.intermediate_size,
            window: every_layer(self.sliding_window, c.num_hidden_layers),
            ..Parts::default()
        })
    }

    pub(super) fn of(m: &Model) -> Result<Self> {
        SUPPORT.check(m, Family::Mixtral)?;
        Ok(Self {
            num_local_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            sliding_window: window_on_every_layer(m, Family::Mixtral)?,
        })
    }
}
