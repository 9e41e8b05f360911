//! `olmoe`: routed experts, RMSNorm over the whole q and k projections, optional biases on
//! Q, K, V and O.

use serde::{Deserialize, Serialize};

use super::family::{FamilyConfig, OneStruct, OwnKeys, Words};
use super::support::Support;
use super::{Common, Family, Parts};
use crate::error::Result;
use crate::model::{AttentionBias, Model, QkNorm, Router};

/// The `olmoe` family.
pub(super) struct Olmoe;

impl FamilyConfig for Olmoe {
    fn family(&self) -> Family {
        Family::Olmoe
    }
    fn architecture(&self) -> &'static str {
        "OlmoeForCausalLM"
    }
    fn about(&self) -> &'static str {
        "OLMoE (AllenAI)"
    }
    fn reads(&self) -> &'static str {
        "`num_experts` of `intermediate_size`; q/k norm over the whole projection, \
         `attention_bias` (Q, K, V, O)"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn routers(&self) -> &'static [Router] {
        super::qwen::NORM_TOPK_PROB
    }
    fn words(&self) -> Words {
        Words {
            experts: "num_experts",
            ..Words::LOCAL
        }
    }
}

impl OneStruct for Olmoe {
    type Keys = Config;
}

const SUPPORT: Support = Support {
    qk_norm: &[QkNorm::Full],
    biases: &[AttentionBias::None, AttentionBias::All],
    ..Support::ROUTED
};

/// The keys `olmoe` adds to the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_experts: u64,
    intermediate_size: u64,
    #[serde(default)]
    attention_bias: bool,
    /// Whether the router divides the top-k probabilities by their sum (false when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    norm_topk_prob: Option<bool>,
}

impl OwnKeys for Config {
    fn parts(&self, c: &Common) -> Result<Parts> {
        let q = c.num_attention_heads.saturating_mul(c.head_dim()?);
        if q != c.hidden_size {
            return Err(crate::Error::invalid(
                "config.json: head_dim",
                format!(
                    "olmoe sizes its q norm from hidden_size ({}), so num_attention_heads x \
                     head_dim must equal it (got {q}); Transformers cannot build this config",
                    c.hidden_size
                ),
            ));
        }
        Ok(Parts {
            experts: self.num_experts,
            expert_ffn: self.intermediate_size,
            qk_norm: QkNorm::Full,
            attention_bias: AttentionBias::all_if(self.attention_bias),
            router: Some(crate::model::Router::of_norm_topk_prob(self.norm_topk_prob)),
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Result<Self> {
        let q = m.heads * m.head_dim;
        if q != m.hidden {
            return Err(crate::Error::invalid(
                "family",
                format!(
                    "olmoe: its q norm is sized from hidden_size and older Transformers derive \
                     head_dim = hidden_size / num_attention_heads, so it needs heads x head_dim \
                     = hidden_size (here {} x {} = {q}, hidden {}); search only such shapes \
                     with heads = {{ tied = true }} in the budget's [lattice]",
                    m.heads, m.head_dim, m.hidden
                ),
            ));
        }
        Ok(Self {
            num_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            attention_bias: m.attention_bias == AttentionBias::All,
            norm_topk_prob: m.moe.router.map(crate::model::Router::renormalises),
        })
    }
}
