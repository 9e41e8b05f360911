//! `minimax_m2` (MiniMax-M2), as Transformers' `MiniMaxM2` code builds it: GQA with
//! `head_dim`, an RMSNorm over the whole q and k projections (`heads·head_dim` and
//! `kv_heads·head_dim` wide), no biases, full attention on every layer, routed experts
//! (`num_local_experts` of `intermediate_size`) with a sigmoid router and its
//! `e_score_correction_bias` (stored in the checkpoint, counted as a router bias), no shared
//! experts, no dense layers. The partial RoPE (`rotary_dim`, the whole head when absent) costs
//! nothing counted; it is the model's `rope_dim`, which the Transformers activation
//! policies read (MiniMax's RoPE concatenates the unrotated rest back).
//! MiniMax's own keys that Transformers' code does not read (`use_qk_norm`, `qk_norm_type`,
//! `use_routing_bias`, `shared_intermediate_size`, `attn_type_list`) must agree with what it
//! builds, or the config is refused. The hub config's MTP keys (`use_mtp`,
//! `num_mtp_modules`, `mtp_transformer_layers`) describe modules Transformers' code does not
//! build and whose structure is not published with it: not read, not counted.

use serde::{Deserialize, Serialize};

use super::family::{FamilyConfig, OneStruct, OwnKeys};
use super::support::{Feature, Support, refuse};
use super::{Common, Family, Parts};
use crate::error::{Error, Result};
use crate::model::{Model, QkNorm, Router};

/// The `minimax_m2` family.
pub(super) struct MinimaxM2;

impl FamilyConfig for MinimaxM2 {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // MiniMaxM2Config: num_key_value_heads = 8, head_dim = 128.
        &[("num_key_value_heads", 8), ("head_dim", 128)]
    }
    fn family(&self) -> Family {
        Family::MinimaxM2
    }
    fn architecture(&self) -> &'static str {
        "MiniMaxM2ForCausalLM"
    }
    fn about(&self) -> &'static str {
        "MiniMax-M2 (q/k norm over the whole projections, a router bias)"
    }
    fn reads(&self) -> &'static str {
        "`num_local_experts` of `intermediate_size`; q/k norm over the whole q and k \
         projections; a router bias (`e_score_correction_bias`); MiniMax's own keys \
         (`use_qk_norm`, `qk_norm_type`, `use_routing_bias`, `shared_intermediate_size`, \
         `attn_type_list`) checked against that; the partial RoPE's `rotary_dim` (`rope_dim`; a \
         `partial_rotary_factor`, which Transformers reads first, must agree); \
         its MTP keys not read (Transformers builds no MTP module); the router \
         (`sigmoid_renormalised_fp32`); the MoE's input noise (`router_jitter_noise`, `jitter`)"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn routers(&self) -> &'static [Router] {
        // MiniMaxM2TopKRouter: a float32 sigmoid, the top-k after the bias, renormalised,
        // kept in float32.
        &[Router::SigmoidRenormalisedFp32]
    }
    fn jitter_key(&self) -> Option<&'static str> {
        Some("router_jitter_noise")
    }
    fn refuse(&self, config: &serde_json::Map<String, serde_json::Value>) -> Result<()> {
        use serde_json::Value;
        // Transformers reads the RoPE share from `rope_parameters`, then the top-level
        // `partial_rotary_factor`, and only then derives it from `rotary_dim`.
        let factor = (config.get("rope_parameters"))
            .and_then(|r| r.get(PARTIAL))
            .and_then(Value::as_f64)
            .map(|f| ("rope_parameters.partial_rotary_factor", f))
            .or_else(|| (config.get(PARTIAL).and_then(Value::as_f64)).map(|f| (PARTIAL, f)));
        let Some((key, f)) = factor else {
            return Ok(());
        };
        let head_dim = config
            .get("head_dim")
            .and_then(Value::as_u64)
            .unwrap_or(128);
        let rotary = (config.get("rotary_dim").and_then(Value::as_u64)).unwrap_or(head_dim);
        let rotated = (head_dim as f64 * f) as u64;
        if rotated == rotary {
            return Ok(());
        }
        Err(Error::invalid(
            format!("config.json: {key}"),
            format!(
                "is {f}, which rotates {rotated} of each head's {head_dim} dimensions, but \
                 rotary_dim says {rotary}: Transformers reads {key} first, smelt reads \
                 rotary_dim; make them agree"
            ),
        ))
    }
}

/// The key of the share of each head RoPE rotates, which Transformers reads before
/// MiniMax's `rotary_dim`.
const PARTIAL: &str = "partial_rotary_factor";

impl OneStruct for MinimaxM2 {
    type Keys = Config;
}

const SUPPORT: Support = Support {
    qk_norm: &[QkNorm::Full],
    features: &[Feature::RouterBias, Feature::Jitter],
    required: &[Feature::RouterBias],
    ..Support::ROUTED
};

/// Softmax attention in MiniMax's `attn_type_list` (0 is lightning attention).
const SOFTMAX: u64 = 1;
/// MiniMax's name for the q/k norm over the whole projections.
const PER_LAYER: &str = "per_layer";

/// The keys `minimax_m2` adds to the common ones. Transformers' code reads only the first
/// two; the others are MiniMax's own (its inference code and vLLM's read them), checked
/// against what Transformers builds and written on export so both readers agree.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_local_experts: u64,
    intermediate_size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    use_qk_norm: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    qk_norm_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    use_routing_bias: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shared_intermediate_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attn_type_list: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rotary_dim: Option<u64>,
}

impl OwnKeys for Config {
    fn parts(&self, c: &Common) -> Result<Parts> {
        let unlike = |key: &str, what: &str| {
            Err(refuse(
                key,
                format!(
                    "{what}; Transformers' minimax_m2 code builds the model without it, so the \
                     config describes two different models"
                ),
            ))
        };
        if self.use_qk_norm == Some(false) {
            return unlike("use_qk_norm", "is false (no q/k norm)");
        }
        if let Some(t) = self.qk_norm_type.as_deref().filter(|&t| t != PER_LAYER) {
            return unlike(
                "qk_norm_type",
                &format!("is '{t}', not a norm over the whole projections ('{PER_LAYER}')"),
            );
        }
        if self.use_routing_bias == Some(false) {
            return unlike("use_routing_bias", "is false (no router bias)");
        }
        if let Some(w) = self.shared_intermediate_size.filter(|&w| w > 0) {
            return unlike(
                "shared_intermediate_size",
                &format!("asks for a shared expert of {w}"),
            );
        }
        if let Some(t) = self
            .attn_type_list
            .as_ref()
            .filter(|t| t.len() as u64 != c.num_hidden_layers)
        {
            return Err(Error::invalid(
                "config.json: attn_type_list",
                format!(
                    "must have one entry per layer, num_hidden_layers ({}); got {}",
                    c.num_hidden_layers,
                    t.len()
                ),
            ));
        }
        if let Some(i) = self
            .attn_type_list
            .as_ref()
            .and_then(|t| t.iter().position(|&a| a != SOFTMAX))
        {
            return unlike(
                &format!("attn_type_list[{i}]"),
                "names a lightning (linear) attention layer",
            );
        }
        let head_dim = c.head_dim()?;
        let rope_dim = self.rotary_dim.unwrap_or(head_dim);
        if rope_dim == 0 || !rope_dim.is_multiple_of(2) || rope_dim > head_dim {
            return Err(Error::invalid(
                "config.json: rotary_dim",
                format!("must be even, positive and at most head_dim ({head_dim}); got {rope_dim}"),
            ));
        }
        Ok(Parts {
            experts: self.num_local_experts,
            expert_ffn: self.intermediate_size,
            rope_dim: Some(rope_dim),
            qk_norm: QkNorm::Full,
            router_bias: true,
            router: Some(Router::SigmoidRenormalisedFp32),
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Result<Self> {
        Ok(Self {
            num_local_experts: m.moe.experts,
            intermediate_size: m.moe.expert_ffn,
            use_qk_norm: Some(true),
            qk_norm_type: Some(PER_LAYER.to_owned()),
            use_routing_bias: Some(true),
            shared_intermediate_size: Some(0),
            attn_type_list: Some(vec![SOFTMAX; m.layers as usize]),
            rotary_dim: Some(m.rope_dim.unwrap_or(m.head_dim)),
        })
    }
}
