//! `qwen3_next` (Qwen3-Next) and `qwen3_5_moe_text` (Qwen3.5's MoE text decoder, also read
//! from a `qwen3_5_moe` wrapper's `text_config`): hybrids of Gated DeltaNet layers and gated
//! attention, as Transformers' `Qwen3Next*` and `Qwen3_5Moe*` classes build them.
//!
//! * `layer_types` names each layer `"linear_attention"` (a Gated DeltaNet mixer,
//!   [`crate::model::GatedDeltaNet`], of `linear_num_key_heads`, `linear_num_value_heads`,
//!   `linear_key_head_dim`, `linear_value_head_dim`, `linear_conv_kernel_dim`) or
//!   `"full_attention"`; without it, every `full_attention_interval`-th layer (4 when
//!   absent) is full attention, as the config classes derive it. Their defaults (16, 32,
//!   128, 128, 4) apply to absent keys.
//! * The attention layers have a per-head q/k norm and an output gate (`q_proj` twice as
//!   wide: [`crate::model::Model::attention_gate`]); `attention_bias` biases Q, K, V and O.
//! * Every MoE block has one shared expert of `shared_expert_intermediate_size` behind a
//!   sigmoid gate; `qwen3_next` places dense layers by Qwen's rule (`decoder_sparse_step`,
//!   `mlp_only_layers`), `qwen3_5_moe_text` has none.
//! * The attention layers' RoPE rotates `partial_rotary_factor` of each head (0.25 when
//!   absent, the config classes' default; `rope_parameters.partial_rotary_factor` where
//!   given, which Transformers reads first) and concatenates the rest back: the model's
//!   `rope_dim`, which only the Transformers activation policies count.
//! * The router (`Qwen3NextTopKRouter`, `Qwen3_5MoeTopKRouter`) is a float32 softmax over
//!   every expert whose top-k weights are cast to the model's dtype: divided by their sum
//!   where `norm_topk_prob` is true (Qwen3-Next's key, true when absent) and always in
//!   Qwen3.5's (`[model.moe] router`).
//! * The MTP weights of the checkpoints are not built by Transformers (ignored on load) and
//!   not read.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::deepseek::{partial_rope, rotary_factor};
use super::family::{ConfigKeys, FamilyConfig, Words, Wrapper, object};
use super::qwen::{NORM_TOPK_PROB, QwenDense, gated_shared_expert, shared_expert_width};
use super::support::{Feature, Shared, Support, refuse};
use super::{Common, Family, Parts, field_names, read};
use crate::error::{Error, Result};
use crate::model::{AttentionBias, GatedDeltaNet, Mixer, Model, QkNorm, Recurrent, Router};

const LINEAR: &str = "linear_attention";
const FULL: &str = "full_attention";

/// What both families' modeling code builds.
const SUPPORT: Support = Support {
    qk_norm: &[QkNorm::PerHead],
    biases: &[AttentionBias::None, AttentionBias::All],
    shared: Shared::OneGated,
    dense: true,
    features: &[Feature::AttentionGate, Feature::GatedDeltanet],
    required: &[Feature::AttentionGate],
    nope: false,
};

const SUPPORT_3_5: Support = Support {
    dense: false,
    ..SUPPORT
};

const WORDS: Words = Words {
    experts: "num_experts",
    expert_ffn: "moe_intermediate_size",
    shared_ffn: "shared_expert_intermediate_size",
    own: &[
        (
            "model.recurrent.mixer.gated_deltanet.key_heads",
            "linear_num_key_heads",
        ),
        (
            "model.recurrent.mixer.gated_deltanet.value_heads",
            "linear_num_value_heads",
        ),
        (
            "model.recurrent.mixer.gated_deltanet.key_head_dim",
            "linear_key_head_dim",
        ),
        (
            "model.recurrent.mixer.gated_deltanet.value_head_dim",
            "linear_value_head_dim",
        ),
        (
            "model.recurrent.mixer.gated_deltanet.conv_kernel",
            "linear_conv_kernel_dim",
        ),
    ],
    ..Words::LOCAL
};

fn sixteen() -> u64 {
    16
}
fn thirty_two() -> u64 {
    32
}
fn one_twenty_eight() -> u64 {
    128
}
fn four() -> u64 {
    4
}

/// The keys both families read.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct Hybrid {
    num_experts: u64,
    moe_intermediate_size: u64,
    shared_expert_intermediate_size: u64,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default = "sixteen")]
    linear_num_key_heads: u64,
    #[serde(default = "thirty_two")]
    linear_num_value_heads: u64,
    #[serde(default = "one_twenty_eight")]
    linear_key_head_dim: u64,
    #[serde(default = "one_twenty_eight")]
    linear_value_head_dim: u64,
    #[serde(default = "four")]
    linear_conv_kernel_dim: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layer_types: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    full_attention_interval: Option<u64>,
    /// The share of each attention head RoPE rotates (module docs): the model's `rope_dim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partial_rotary_factor: Option<f64>,
}

/// Qwen3-Next's router key: whether the top-k weights are divided by their sum (true when
/// absent, as `Qwen3NextConfig` defaults it).
#[derive(Debug, Clone, Deserialize, Serialize)]
struct NextRouter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    norm_topk_prob: Option<bool>,
}

impl Hybrid {
    /// The 1-based recurrent layers of a `layers`-layer model.
    fn linear_layers(&self, layers: u64) -> Result<Vec<u64>> {
        match (&self.layer_types, self.full_attention_interval) {
            (Some(types), _) => {
                if types.len() as u64 != layers {
                    return Err(Error::invalid(
                        "config.json: layer_types",
                        format!(
                            "must name every layer: {} entries for num_hidden_layers = {layers}",
                            types.len()
                        ),
                    ));
                }
                let mut out = Vec::new();
                for (i, t) in types.iter().enumerate() {
                    match t.as_str() {
                        LINEAR => out.push(i as u64 + 1),
                        FULL => {}
                        other => {
                            return Err(Error::invalid(
                                format!("config.json: layer_types[{i}]"),
                                format!(
                                    "must be \"{LINEAR}\" or \"{FULL}\"; got \"{}\"",
                                    other.escape_debug()
                                ),
                            ));
                        }
                    }
                }
                Ok(out)
            }
            (None, interval) => {
                let n = interval.unwrap_or(4);
                if n == 0 {
                    return Err(Error::invalid(
                        "config.json: full_attention_interval",
                        "must be at least 1 (every how many layers one is full attention)",
                    ));
                }
                Ok((1..=layers).filter(|l| l % n != 0).collect())
            }
        }
    }

    /// The model's parts from the config `config` (read as `self`) with the router `router`.
    fn parts(&self, family: Family, c: &Common, config: &Value, router: Router) -> Result<Parts> {
        let layers = self.linear_layers(c.num_hidden_layers)?;
        let factor = rotary_factor(config, self.partial_rotary_factor).unwrap_or(0.25);
        Ok(Parts {
            rope_dim: Some(partial_rope(c.head_dim()?, factor)?),
            router: Some(router),
            experts: self.num_experts,
            expert_ffn: self.moe_intermediate_size,
            qk_norm: QkNorm::PerHead,
            attention_bias: AttentionBias::all_if(self.attention_bias),
            shared: gated_shared_expert(family, self.shared_expert_intermediate_size)?,
            attention_gate: true,
            recurrent: (!layers.is_empty()).then_some(Recurrent {
                layers,
                mixer: Mixer::GatedDeltanet(GatedDeltaNet {
                    key_heads: self.linear_num_key_heads,
                    value_heads: self.linear_num_value_heads,
                    key_head_dim: self.linear_key_head_dim,
                    value_head_dim: self.linear_value_head_dim,
                    conv_kernel: self.linear_conv_kernel_dim,
                }),
            }),
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Self {
        // Checked against the family's support first: another mixer is refused there.
        let g = m.recurrent.as_ref().and_then(|r| match &r.mixer {
            Mixer::GatedDeltanet(g) => Some(*g),
            _ => None,
        });
        let linear = m.recurrent.as_ref().map_or(&[][..], |r| &r.layers[..]);
        let g = g.unwrap_or(GatedDeltaNet {
            key_heads: 16,
            value_heads: 32,
            key_head_dim: 128,
            value_head_dim: 128,
            conv_kernel: 4,
        });
        Self {
            num_experts: m.moe.experts,
            moe_intermediate_size: m.moe.expert_ffn,
            shared_expert_intermediate_size: shared_expert_width(m),
            attention_bias: m.attention_bias == AttentionBias::All,
            linear_num_key_heads: g.key_heads,
            linear_num_value_heads: g.value_heads,
            linear_key_head_dim: g.key_head_dim,
            linear_value_head_dim: g.value_head_dim,
            linear_conv_kernel_dim: g.conv_kernel,
            layer_types: Some(
                (1..=m.layers)
                    .map(|l| if linear.contains(&l) { LINEAR } else { FULL }.to_owned())
                    .collect(),
            ),
            full_attention_interval: None,
            partial_rotary_factor: Some(
                m.rope_dim.unwrap_or(m.head_dim) as f64 / m.head_dim.max(1) as f64,
            ),
        }
    }
}

/// The `qwen3_next` family.
pub(super) struct Qwen3Next;

impl FamilyConfig for Qwen3Next {
    fn family(&self) -> Family {
        Family::Qwen3Next
    }
    fn architecture(&self) -> &'static str {
        "Qwen3NextForCausalLM"
    }
    fn about(&self) -> &'static str {
        "Qwen3-Next (Gated DeltaNet layers beside gated attention)"
    }
    fn reads(&self) -> &'static str {
        "`layer_types` (else every `full_attention_interval`-th layer, 4, is full attention) \
         and the Gated DeltaNet shapes `linear_num_key_heads`, `linear_num_value_heads`, \
         `linear_key_head_dim`, `linear_value_head_dim`, `linear_conv_kernel_dim`; gated \
         attention with a per-head q/k norm, `attention_bias` (Q, K, V, O); `num_experts` of \
         `moe_intermediate_size`, one shared expert of `shared_expert_intermediate_size` \
         behind a sigmoid gate, dense layers by Qwen's rule; the router's `norm_topk_prob` \
         (true when absent) and the RoPE's `partial_rotary_factor` (`rope_dim`, 0.25 when \
         absent)"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn routers(&self) -> &'static [Router] {
        NORM_TOPK_PROB
    }
    fn words(&self) -> Words {
        WORDS
    }
}

impl ConfigKeys for Qwen3Next {
    fn keys(&self) -> Vec<&'static str> {
        let mut keys = field_names::<Hybrid>();
        keys.extend(field_names::<QwenDense>());
        keys.extend(field_names::<NextRouter>());
        keys
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        let hybrid: Hybrid = read(config)?;
        let dense: QwenDense = read(config)?;
        let next: NextRouter = read(config)?;
        let router = Router::of_norm_topk_prob(next.norm_topk_prob.or(Some(true)));
        Ok(Parts {
            dense: dense.dense(common.num_hidden_layers)?,
            ..hybrid.parts(self.family(), common, config, router)?
        })
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        let mut out = object(Hybrid::of(m))?;
        out.extend(object(QwenDense::of(m))?);
        out.extend(object(NextRouter {
            norm_topk_prob: m.moe.router.map(Router::renormalises),
        })?);
        Ok(out)
    }
}

/// The `qwen3_5_moe_text` family (and a `qwen3_5_moe` wrapper's `text_config`).
pub(super) struct Qwen3_5MoeText;

impl FamilyConfig for Qwen3_5MoeText {
    fn family(&self) -> Family {
        Family::Qwen3_5MoeText
    }
    fn architecture(&self) -> &'static str {
        "Qwen3_5MoeForCausalLM"
    }
    fn about(&self) -> &'static str {
        "Qwen3.5's MoE text decoder (Gated DeltaNet layers beside gated attention)"
    }
    fn reads(&self) -> &'static str {
        "`qwen3_next`'s keys without dense layers (every layer is MoE) and without \
         `norm_topk_prob` (its router always renormalises)"
    }
    fn support(&self) -> &Support {
        &SUPPORT_3_5
    }
    fn routers(&self) -> &'static [Router] {
        &[Router::SoftmaxRenormalised]
    }
    fn words(&self) -> Words {
        WORDS
    }
    fn wrapper(&self) -> Option<Wrapper> {
        Some(Wrapper {
            model_type: "qwen3_5_moe",
            architecture: "Qwen3_5MoeForConditionalGeneration",
        })
    }
    fn refuse(&self, config: &Map<String, Value>) -> Result<()> {
        for key in ["mlp_only_layers", "decoder_sparse_step"] {
            if config.get(key).is_some_and(|v| {
                !(v.is_null() || v == &Value::from(1) || v.as_array().is_some_and(Vec::is_empty))
            }) {
                return Err(refuse(
                    key,
                    "Transformers' qwen3_5_moe code builds a MoE block on every layer and \
                     does not read it",
                ));
            }
        }
        Ok(())
    }
}

impl ConfigKeys for Qwen3_5MoeText {
    fn keys(&self) -> Vec<&'static str> {
        field_names::<Hybrid>()
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        let router = Router::SoftmaxRenormalised;
        read::<Hybrid>(config)?.parts(self.family(), common, config, router)
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        object(Hybrid::of(m))
    }
}
