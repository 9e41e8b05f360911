//! `olmoe`: routed experts, RMSNorm over the whole q and k projections, optional biases on
//! Q, K, V and O.

use serde::{Deserialize, Serialize};

use super::{Common, Family, Parts, Support};
use crate::error::Result;
use crate::spec::{AttentionBias, Model, QkNorm};

const SUPPORT: Support = Support::new(
    QkNorm::Full,
    &[AttentionBias::None, AttentionBias::All],
    false,
    false,
);

/// The keys `olmoe` adds to the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_experts: u64,
    intermediate_size: u64,
    #[serde(default)]
    attention_bias: bool,
}

impl Config {
    pub(super) fn parts(&self, _: &Common) -> Result<Parts> {
        Ok(Parts {
            experts: self.num_experts,
            expert_ffn: self.intermediate_size,
            qk_norm: SUPPORT.qk_norm,
            attention_bias: AttentionBias::all_if(self.attention_bias),
            shared: None,
            dense: None,
        })
    }

    pub(super) fn of(m: &Model) -> Result<Self> {
        SUPPORT.check(m, Family::Olmoe)?;
        Ok(Self {
            num_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            attention_bias: m.attention_bias == AttentionBias::All,
        })
    }
}
