//! `mixtral`: routed experts only, no q/k norm, no biases; a sliding window when
//! `sliding_window` is set (Transformers' Mixtral has no `use_sliding_window` switch).

use serde::{Deserialize, Serialize};

use super::support::{Shared, Support};
use super::{Common, Family, Parts};
use crate::error::Result;
use crate::spec::{AttentionBias, Model, QkNorm};

const SUPPORT: Support = Support {
    qk_norm: &[QkNorm::None],
    biases: &[AttentionBias::None],
    shared: Shared::No,
    dense: false,
    features: &[],
    required: &[],
};

/// The keys `mixtral` adds to the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_local_experts: u64,
    intermediate_size: u64,
    /// Refused when set, before this is read ([`super::refuse_windows`]).
    #[serde(default)]
    sliding_window: Option<u64>,
}

impl Config {
    pub(super) fn parts(&self, _: &Common) -> Result<Parts> {
        Ok(Parts {
            experts: self.num_local_experts,
            expert_ffn: self.intermediate_size,
            ..Parts::default()
        })
    }

    pub(super) fn of(m: &Model) -> Result<Self> {
        SUPPORT.check(m, Family::Mixtral)?;
        Ok(Self {
            num_local_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            sliding_window: None,
        })
    }
}
