//! `gemma4_text` (Gemma 4's text decoder, also read from a `gemma4` wrapper's
//! `text_config`), as Transformers' `Gemma4TextModel` builds it (`modeling_gemma4.py`,
//! `configuration_gemma4.py`, Transformers 5.24):
//!
//! * `layer_types` names each layer `"sliding_attention"` (a window of `sliding_window`
//!   keys, 512 when absent) or `"full_attention"`; without it every sixth layer and the
//!   last are full, as `Gemma4TextConfig` derives it. Transformers forces the last layer to full attention:
//!   a config whose last layer is not is refused rather than read otherwise than it says.
//! * The sliding layers have `num_key_value_heads` heads of `head_dim`; the full layers
//!   heads of `global_head_dim` (512 when absent), and with `attention_k_eq_v` no value
//!   projection and `num_global_key_value_heads` key/value heads (else
//!   `num_key_value_heads`): [`crate::model::FullAttention`]. Every attention layer has a
//!   per-head RMSNorm on queries and keys and one without a scale on values
//!   ([`crate::model::Model::v_norm`]); `attention_bias` biases Q, K, V (where there is a
//!   V projection) and O.
//! * Every layer norms its attention's and its FFN's output (`post_attention_layernorm`,
//!   `post_feedforward_layernorm`: [`crate::model::Model::post_norms`]).
//! * With `enable_moe_block`, the FFN of every layer is a dense GeGLU MLP of
//!   `intermediate_size` (read as one ungated shared expert, which it is: it runs on every
//!   token beside the experts, its output added to theirs) and `num_experts` routed experts
//!   of `moe_intermediate_size`, `top_k_experts` per token; three more norms around the two
//!   branches ([`crate::model::Moe::branch_norms`]) and a router with learned scales
//!   ([`crate::model::Moe::router_scale`]). The activation is `hidden_activation`
//!   (`gelu_pytorch_tanh`: [`crate::model::ExpertActivation::GeluTanh`]).
//! * The embedding is tied to the LM head unless `tie_word_embeddings` is false.
//!
//! Refused, with the reason: dense models (`enable_moe_block` false), per-layer input
//! embeddings (`hidden_size_per_layer_input`, 256 when absent), KV sharing between layers
//! (`num_kv_shared_layers`; `use_double_wide_mlp` acts only on those layers and is not
//! read), bidirectional attention over all tokens (`use_bidirectional_attention = "all"`),
//! another activation, and `per_layer_config` (smelt reads the shapes from the keys
//! above). Its RoPE, the logit soft-capping and the embedding scale cost nothing counted.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::family::{ConfigKeys, FamilyConfig, Words, Wrapper, object};
use super::support::{FULL, Feature, SLIDING, Shared, Support, refuse, sliding_layers};
use super::{Common, Family, Parts, field_names, read};
use crate::error::{Error, Result};
use crate::model::{
    AttentionBias, ExpertActivation, FullAttention, Model, QkNorm, Window, WindowKind,
};

/// The activation Gemma 4 uses, and the only one smelt reads.
const GELU_TANH: &str = "gelu_pytorch_tanh";

const SUPPORT: Support = Support {
    qk_norm: &[QkNorm::PerHead],
    biases: &[AttentionBias::None, AttentionBias::All],
    shared: Shared::OneUngated,
    dense: false,
    features: &[
        Feature::Sliding,
        Feature::FullAttention,
        Feature::VNorm,
        Feature::PostNorms,
        Feature::BranchNorms,
        Feature::RouterScale,
        Feature::GeluTanh,
    ],
    required: &[
        Feature::VNorm,
        Feature::PostNorms,
        Feature::BranchNorms,
        Feature::RouterScale,
        Feature::GeluTanh,
    ],
    nope: false,
};

const WORDS: Words = Words {
    experts: "num_experts",
    expert_ffn: "moe_intermediate_size",
    shared_ffn: "intermediate_size",
    top_k: "top_k_experts",
    own: &[
        (
            "model.full_attention.kv_heads",
            "num_global_key_value_heads",
        ),
        ("model.full_attention.head_dim", "global_head_dim"),
    ],
    ..Words::LOCAL
};

fn five_twelve() -> u64 {
    512
}
fn nine_two_one_six() -> u64 {
    9216
}
fn two_five_six() -> u64 {
    256
}
fn gelu_tanh() -> String {
    GELU_TANH.to_owned()
}

/// The keys `gemma4_text` adds to the common ones, with `Gemma4TextConfig`'s defaults.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    num_experts: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    moe_intermediate_size: Option<u64>,
    #[serde(default = "nine_two_one_six")]
    intermediate_size: u64,
    #[serde(default)]
    enable_moe_block: bool,
    #[serde(default)]
    attention_k_eq_v: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    num_global_key_value_heads: Option<u64>,
    #[serde(default = "five_twelve")]
    global_head_dim: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sliding_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layer_types: Option<Vec<String>>,
    #[serde(default = "two_five_six")]
    hidden_size_per_layer_input: u64,
    #[serde(default)]
    num_kv_shared_layers: u64,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    use_bidirectional_attention: Option<String>,
    #[serde(default = "gelu_tanh")]
    hidden_activation: String,
}

impl Config {
    /// The 1-based sliding layers of a `layers`-layer model, `layer_types` or the config
    /// class's pattern (every sixth layer full).
    fn sliding_layers(&self, layers: u64) -> Result<Vec<u64>> {
        let types: Vec<String> = match &self.layer_types {
            Some(t) => t.clone(),
            // The config class's pattern, its last layer forced to full attention.
            None => (1..=layers)
                .map(|l| {
                    if l % 6 == 0 || l == layers {
                        FULL
                    } else {
                        SLIDING
                    }
                    .to_owned()
                })
                .collect(),
        };
        let sliding = sliding_layers(&types, layers, Family::Gemma4Text)?;
        if self.layer_types.is_some() && sliding.last() == Some(&layers) {
            return Err(refuse(
                &format!("layer_types[{}]", layers - 1),
                format!(
                    "the last layer is \"{SLIDING}\", and Transformers' Gemma4TextConfig \
                     forces the last layer to \"{FULL}\" (with a warning): the file says \
                     another model than Transformers builds"
                ),
            ));
        }
        Ok(sliding)
    }

    fn parts(&self, c: &Common) -> Result<Parts> {
        let (Some(experts), Some(expert_ffn)) = (self.num_experts, self.moe_intermediate_size)
        else {
            let key = match self.num_experts {
                None => "num_experts",
                Some(_) => "moe_intermediate_size",
            };
            return Err(Error::invalid(
                format!("config.json: {key}"),
                "missing: a Gemma 4 MoE config (enable_moe_block = true) gives num_experts \
                 and moe_intermediate_size",
            ));
        };
        let sliding = self.sliding_layers(c.num_hidden_layers)?;
        let window = (!sliding.is_empty()).then(|| Window {
            kind: WindowKind::Sliding,
            size: self.sliding_window.unwrap_or(512),
            layers: sliding,
        });
        let kv_heads = c.num_key_value_heads.unwrap_or(c.num_attention_heads);
        // Gemma4TextConfig overrides the full layers' key/value heads only with
        // attention_k_eq_v.
        let full_kv_heads = match (self.attention_k_eq_v, self.num_global_key_value_heads) {
            (true, Some(n)) => n,
            _ => kv_heads,
        };
        let full = FullAttention {
            kv_heads: full_kv_heads,
            head_dim: self.global_head_dim,
            k_eq_v: self.attention_k_eq_v,
        };
        // The same shape as the sliding layers' is no shape of their own.
        let same = full.kv_heads == kv_heads && full.head_dim == c.head_dim()? && !full.k_eq_v;
        Ok(Parts {
            experts,
            expert_ffn,
            qk_norm: QkNorm::PerHead,
            attention_bias: AttentionBias::all_if(self.attention_bias),
            shared: Some((1, self.intermediate_size, false)),
            window,
            activation: ExpertActivation::GeluTanh,
            full_attention: (!same).then_some(full),
            v_norm: true,
            post_norms: true,
            router_scale: true,
            branch_norms: true,
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Self {
        let windowed = |i: u64| m.window.as_ref().is_some_and(|w| w.layers.contains(&i));
        let fa = m.full_attention.as_ref();
        let k_eq_v = fa.is_some_and(|f| f.k_eq_v);
        Self {
            num_experts: Some(m.moe.experts),
            moe_intermediate_size: Some(m.moe.expert_ffn),
            intermediate_size: m.moe.shared_ffn,
            enable_moe_block: true,
            attention_k_eq_v: k_eq_v,
            // Read only with attention_k_eq_v (the full layers keep num_key_value_heads
            // otherwise; the export refuses a model that says otherwise).
            num_global_key_value_heads: fa.filter(|f| f.k_eq_v).map(|f| f.kv_heads),
            global_head_dim: fa.map_or(m.head_dim, |f| f.head_dim),
            sliding_window: m.window.as_ref().map(|w| w.size),
            layer_types: Some(
                (1..=m.layers)
                    .map(|i| if windowed(i) { SLIDING } else { FULL }.to_owned())
                    .collect(),
            ),
            hidden_size_per_layer_input: 0,
            num_kv_shared_layers: 0,
            attention_bias: m.attention_bias == AttentionBias::All,
            use_bidirectional_attention: None,
            hidden_activation: GELU_TANH.to_owned(),
        }
    }
}

/// What Transformers' Gemma 4 builds that smelt's model file cannot say otherwise, refused
/// on export with the reason (beyond [`Support`]).
pub(super) fn buildable(m: &Model) -> Result<()> {
    if m.window
        .as_ref()
        .is_some_and(|w| w.layers.contains(&m.layers))
    {
        return Err(Error::invalid(
            "model.window.layers",
            format!(
                "windows the last layer ({}), which Transformers' Gemma4TextConfig forces to \
                 full attention: the exported config would build another model",
                m.layers
            ),
        ));
    }
    if let Some(fa) = &m.full_attention
        && !fa.k_eq_v
        && fa.kv_heads != m.kv_heads
    {
        return Err(Error::invalid(
            "model.full_attention.kv_heads",
            format!(
                "is {} and model.kv_heads is {}: Gemma 4's full-attention layers have their \
                 own key/value heads (num_global_key_value_heads) only with k_eq_v \
                 (attention_k_eq_v)",
                fa.kv_heads, m.kv_heads
            ),
        ));
    }
    Ok(())
}

/// The `gemma4_text` family (and a `gemma4` wrapper's `text_config`).
pub(super) struct Gemma4Text;

impl FamilyConfig for Gemma4Text {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // Gemma4TextConfig's defaults for the common keys.
        &[
            ("vocab_size", 262_144),
            ("hidden_size", 2304),
            ("num_hidden_layers", 30),
            ("num_attention_heads", 8),
            ("num_key_value_heads", 4),
            ("head_dim", 256),
        ]
    }
    fn tied_by_default(&self) -> bool {
        true
    }
    fn family(&self) -> Family {
        Family::Gemma4Text
    }
    fn architecture(&self) -> &'static str {
        "Gemma4ForCausalLM"
    }
    fn about(&self) -> &'static str {
        "Gemma 4's MoE text decoder (sliding and full layers of their own shapes, a dense MLP \
         beside the experts)"
    }
    fn reads(&self) -> &'static str {
        "`layer_types` (`sliding_attention` layers windowed by `sliding_window`, else every \
         sixth layer full), the full layers' `global_head_dim` and, with `attention_k_eq_v` \
         (no value projection), `num_global_key_value_heads`; per-head q/k norms, a value \
         norm, post norms, `attention_bias` (Q, K, V, O); `enable_moe_block`: `num_experts` \
         of `moe_intermediate_size`, `top_k_experts`, the dense MLP of `intermediate_size` \
         as one ungated shared expert, branch norms and router scales; \
         `hidden_size_per_layer_input` and `num_kv_shared_layers` must be 0"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn words(&self) -> Words {
        WORDS
    }
    fn wrapper(&self) -> Option<Wrapper> {
        Some(Wrapper {
            model_type: "gemma4",
            architecture: "Gemma4ForConditionalGeneration",
        })
    }
    fn refuse(&self, config: &Map<String, Value>) -> Result<()> {
        if config.get("per_layer_config").is_some_and(|v| !v.is_null()) {
            return Err(refuse(
                "per_layer_config",
                "smelt reads Gemma 4's per-layer shapes from global_head_dim, \
                 num_global_key_value_heads and attention_k_eq_v, not from a per_layer_config",
            ));
        }
        Ok(())
    }
}

impl ConfigKeys for Gemma4Text {
    fn keys(&self) -> Vec<&'static str> {
        field_names::<Config>()
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        let c: Config = read(config)?;
        if config.get("sliding_window").is_some_and(Value::is_null) {
            // Read as absent, it would be the class's 512; Transformers refuses a null.
            return Err(Error::invalid(
                "config.json: sliding_window",
                "is null: Gemma4TextConfig requires an integer window (512 when the key is \
                 absent), and Transformers refuses to build the config",
            ));
        }
        if !c.enable_moe_block {
            return Err(refuse(
                "enable_moe_block",
                "is false (or absent): Gemma 4's dense models have a dense MLP on every layer \
                 and no experts; smelt describes MoE models",
            ));
        }
        if c.hidden_size_per_layer_input != 0 {
            return Err(refuse(
                "hidden_size_per_layer_input",
                format!(
                    "is {} (256 when absent): Gemma 4's per-layer input embeddings add an \
                     embedding table, a projection and a gated residual branch per layer, \
                     which the cost model does not describe",
                    c.hidden_size_per_layer_input
                ),
            ));
        }
        if c.num_kv_shared_layers != 0 {
            return Err(refuse(
                "num_kv_shared_layers",
                format!(
                    "is {}: layers that reuse another layer's keys and values have no K/V \
                     projections nor cache of their own, which the cost model does not \
                     describe",
                    c.num_kv_shared_layers
                ),
            ));
        }
        if c.use_bidirectional_attention.as_deref() == Some("all") {
            return Err(refuse(
                "use_bidirectional_attention",
                "is \"all\": every token attends every other one (and Transformers halves the \
                 window); the cost model describes causal decoders",
            ));
        }
        if c.hidden_activation != GELU_TANH {
            return Err(refuse(
                "hidden_activation",
                format!(
                    "is '{}': smelt reads Gemma 4's {GELU_TANH} (model.moe.activation = \
                     \"gelu_tanh\") only",
                    c.hidden_activation.escape_debug()
                ),
            ));
        }
        c.parts(common)
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        buildable(m)?;
        object(Config::of(m))
    }
}
