//! `mixtral`: routed experts only, no q/k norm, no biases; a sliding window when
//! `sliding_window` is set (Transformers' Mixtral has no `use_sliding_window` switch).

use serde::{Deserialize, Serialize};

use super::{Common, Family, Parts, Support, refuse};
use crate::error::Result;
use crate::spec::{AttentionBias, Model, QkNorm};

const SUPPORT: Support = Support::new(QkNorm::None, &[AttentionBias::None], false, false);

/// The keys `mixtral` adds to the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_local_experts: u64,
    intermediate_size: u64,
    #[serde(default)]
    sliding_window: Option<u64>,
}

impl Config {
    pub(super) fn parts(&self, _: &Common) -> Result<Parts> {
        if let Some(w) = self.sliding_window {
            return Err(refuse(
                "sliding_window",
                format!(
                    "Mixtral attends a window of {w} keys whenever sliding_window is set \
                     (it has no use_sliding_window switch); that bounds the keys a query \
                     attends and the KV cache"
                ),
            ));
        }
        Ok(Parts {
            experts: self.num_local_experts,
            expert_ffn: self.intermediate_size,
            qk_norm: SUPPORT.qk_norm,
            attention_bias: AttentionBias::None,
            shared: None,
            dense: None,
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
