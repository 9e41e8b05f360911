//! `granitemoe` (IBM Granite 3.0 MoE, PowerMoE): routed SwiGLU experts (`num_local_experts`
//! of `intermediate_size`, stored as one `input_linear` of twice the width and one
//! `output_linear`), a router without bias, Llama's attention (`head_dim`, else
//! `hidden_size / num_attention_heads`; biases on Q, K, V and O if `attention_bias`). No q/k
//! norm, no shared experts, no dense layers, no window. The `embedding_multiplier`,
//! `residual_multiplier`, `attention_multiplier` and `logits_scaling` scale activations:
//! elementwise, no counted cost.

use serde::{Deserialize, Serialize};

use super::family::{FamilyConfig, OneStruct, OwnKeys};
use super::support::Support;
use super::{Common, Family, Parts};
use crate::error::Result;
use crate::model::{AttentionBias, Model, Router};

/// The `granitemoe` family.
pub(super) struct GraniteMoe;

impl FamilyConfig for GraniteMoe {
    fn family(&self) -> Family {
        Family::GraniteMoe
    }
    fn architecture(&self) -> &'static str {
        "GraniteMoeForCausalLM"
    }
    fn about(&self) -> &'static str {
        "Granite 3.0 MoE (IBM)"
    }
    fn reads(&self) -> &'static str {
        "`num_local_experts` of `intermediate_size`, Q/K/V/O biases (`attention_bias`); the \
         embedding, residual, attention and logit multipliers cost nothing counted"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn routers(&self) -> &'static [Router] {
        // GraniteMoeTopKRouter: the top-k of the float32 logits, a softmax over them, cast
        // to the model's dtype.
        &[Router::TopkSoftmax]
    }
}

impl OneStruct for GraniteMoe {
    type Keys = Config;
}

const SUPPORT: Support = Support {
    biases: &[AttentionBias::None, AttentionBias::All],
    ..Support::ROUTED
};

/// The keys `granitemoe` adds to the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_local_experts: u64,
    intermediate_size: u64,
    #[serde(default)]
    attention_bias: bool,
}

impl OwnKeys for Config {
    fn parts(&self, _: &Common) -> Result<Parts> {
        Ok(Parts {
            experts: self.num_local_experts,
            expert_ffn: self.intermediate_size,
            attention_bias: AttentionBias::all_if(self.attention_bias),
            router: Some(Router::TopkSoftmax),
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Result<Self> {
        Ok(Self {
            num_local_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            attention_bias: m.attention_bias == AttentionBias::All,
        })
    }
}
