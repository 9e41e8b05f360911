//! `llama4_text` (Llama-4 Scout and Maverick; also the `text_config` of a `llama4`
//! wrapper), as Transformers' `Llama4Text` code builds it. Attention: GQA with `head_dim`,
//! biases on Q, K, V and O if `attention_bias`; its q/k norm (`use_qk_norm`, by default on)
//! is an L2 norm without weights on the layers with RoPE (`qk_norm = "l2"`: no parameters,
//! no counted FLOPs). The layers without RoPE (`no_rope_layers` zeros, by default every
//! `no_rope_layer_interval`-th) are `[model.nope]`, their queries scaled by a temperature
//! where `attn_temperature_tuning` is truthy (published configs say `4`; Transformers 5.24
//! builds only a bool, which the export writes). Layers attend per `layer_types`
//! (`chunked_attention` or `full_attention`; by default chunked on the RoPE layers of
//! `no_rope_layers`, itself by default every layer but each `no_rope_layer_interval`-th)
//! with chunks of `attention_chunk_size` tokens. Layer `i` (0-based) is MoE when it is in
//! `moe_layers`, by default every `interleave_moe_layer_step`-th layer starting with layer
//! `step - 1`; the others have a dense SwiGLU of `intermediate_size_mlp`. Every MoE layer has
//! `num_local_experts` routed experts of `intermediate_size` behind a router without bias,
//! and one ungated shared expert of the same width; the router is `sigmoid_topk_scatter`
//! (`Llama4Router`). None of RoPE, the temperature and the router costs a counted FLOP; what
//! a training step saves of them is the Transformers activation policies'.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::family::{FamilyConfig, OneStruct, OwnKeys, Words, Wrapper};
use super::support::{Feature, Shared, Support, refuse};
use super::{Common, Family, Parts};
use crate::error::{Error, Result};
use crate::model::{AttentionBias, Dense, Model, Nope, QkNorm, Router, Window, WindowKind};

/// The `llama4_text` family, also read as the `text_config` of a `llama4` wrapper.
pub(super) struct Llama4Text;

impl FamilyConfig for Llama4Text {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // Llama4TextConfig: num_key_value_heads = 8, head_dim = 128.
        &[("num_key_value_heads", 8), ("head_dim", 128)]
    }
    fn family(&self) -> Family {
        Family::Llama4Text
    }
    fn architecture(&self) -> &'static str {
        "Llama4ForCausalLM"
    }
    fn about(&self) -> &'static str {
        "Llama-4's text decoder (chunked attention, a shared expert, dense layers); a llama4 \
         config is read as its text_config"
    }
    fn reads(&self) -> &'static str {
        "`num_local_experts` of `intermediate_size` plus one ungated shared expert of the same \
         width; MoE layers from `moe_layers`, else every `interleave_moe_layer_step`-th, the \
         others dense of `intermediate_size_mlp`; `layer_types` (`chunked_attention` layers \
         chunked by `attention_chunk_size`; by default the RoPE layers of `no_rope_layers`); \
         Q/K/V/O biases (`attention_bias`); the L2 q/k norm (`use_qk_norm`) and the NoPE \
         layers (`no_rope_layers`, `attn_temperature_tuning`). A wrapper's vision \
         encoder and projector are not counted: the model is named \"... text decoder\""
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn words(&self) -> Words {
        Words {
            shared_ffn: "intermediate_size",
            dense_ffn: "intermediate_size_mlp",
            window: "attention_chunk_size",
            ..Words::LOCAL
        }
    }
    fn routers(&self) -> &'static [Router] {
        // Llama4Router: a sigmoid over the top-k logits scattered among -inf.
        &[Router::SigmoidTopkScatter]
    }
    fn wrapper(&self) -> Option<Wrapper> {
        Some(Wrapper {
            model_type: "llama4",
            architecture: "Llama4ForConditionalGeneration",
        })
    }
}

impl OneStruct for Llama4Text {
    type Keys = Config;
}

const CHUNKED: &str = "chunked_attention";
const FULL: &str = "full_attention";

const SUPPORT: Support = Support {
    qk_norm: &[QkNorm::None, QkNorm::L2],
    nope: true,
    biases: &[AttentionBias::None, AttentionBias::All],
    shared: Shared::Ungated,
    dense: true,
    features: &[Feature::Chunked],
    ..Support::ROUTED
};

fn one() -> u64 {
    1
}

fn four() -> u64 {
    4
}

fn chunk() -> Option<u64> {
    Some(8192)
}

fn mlp() -> u64 {
    16384
}

fn yes() -> bool {
    true
}

/// `attn_temperature_tuning`: a bool, or a number as the published configs write it
/// (truthy unless 0).
fn truthy<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Bool(b) => Ok(b),
        serde_json::Value::Number(n) => Ok(n.as_f64() != Some(0.0)),
        other => Err(serde::de::Error::custom(format!(
            "attn_temperature_tuning must be a bool or a number; got {other}"
        ))),
    }
}

/// The keys `llama4_text` adds to the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    num_local_experts: u64,
    intermediate_size: u64,
    #[serde(default = "mlp")]
    intermediate_size_mlp: u64,
    /// 0-based MoE layers; overrides `interleave_moe_layer_step`.
    #[serde(default)]
    moe_layers: Option<Vec<u64>>,
    #[serde(default = "one")]
    interleave_moe_layer_step: u64,
    /// Per layer, 1 for a RoPE layer and 0 for a NoPE one.
    #[serde(default)]
    no_rope_layers: Option<Vec<u64>>,
    #[serde(default = "four", skip_serializing)]
    no_rope_layer_interval: u64,
    /// `null`: no chunking.
    #[serde(default = "chunk")]
    attention_chunk_size: Option<u64>,
    #[serde(default)]
    layer_types: Option<Vec<String>>,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default = "yes")]
    use_qk_norm: bool,
    #[serde(default = "yes", deserialize_with = "truthy")]
    attn_temperature_tuning: bool,
}

impl Config {
    /// Whether each layer has RoPE: `no_rope_layers` (1 for RoPE; Transformers reads an
    /// empty list as absent), else all but every `no_rope_layer_interval`-th.
    fn rope_layers(&self, layers: u64) -> Result<Vec<bool>> {
        let rope: Vec<bool> = match &self.no_rope_layers {
            Some(list) if !list.is_empty() => list.iter().map(|&r| r != 0).collect(),
            _ => {
                if self.no_rope_layer_interval == 0 {
                    return Err(Error::invalid(
                        "config.json: no_rope_layer_interval",
                        "must be at least 1 (every how many layers one is NoPE)",
                    ));
                }
                (0..layers)
                    .map(|i| (i + 1) % self.no_rope_layer_interval != 0)
                    .collect()
            }
        };
        // Transformers indexes it per layer: a shorter list fails to build, a longer one is
        // read up to the layer count.
        Self::per_layer("no_rope_layers", rope, layers)
    }

    fn per_layer<T>(key: &str, list: Vec<T>, layers: u64) -> Result<Vec<T>> {
        if (list.len() as u64) < layers {
            return Err(Error::invalid(
                format!("config.json: {key}"),
                format!("must give each of the {layers} layers; got {}", list.len()),
            ));
        }
        Ok(list.into_iter().take(layers as usize).collect())
    }

    /// Each layer's attention: `layer_types`, else chunked on the RoPE layers where there
    /// is a chunk size (Transformers' default).
    fn layer_types(&self, rope: &[bool]) -> Result<Vec<String>> {
        match &self.layer_types {
            Some(t) => Self::per_layer("layer_types", t.clone(), rope.len() as u64),
            None => Ok(rope
                .iter()
                .map(|&r| {
                    let chunked = r && self.attention_chunk_size.is_some();
                    if chunked { CHUNKED } else { FULL }.to_owned()
                })
                .collect()),
        }
    }
}

impl OwnKeys for Config {
    fn parts(&self, c: &Common) -> Result<Parts> {
        let layers = c.num_hidden_layers;
        // A set: the list is the config's, of any length.
        let moe: BTreeSet<u64> = match &self.moe_layers {
            Some(list) => {
                if let Some(&i) = list.iter().find(|&&i| i >= layers) {
                    return Err(Error::invalid(
                        "config.json: moe_layers",
                        format!("names layer {i}; the layers are 0 to {}", layers - 1),
                    ));
                }
                list.iter().copied().collect()
            }
            None => {
                let step = self.interleave_moe_layer_step;
                if step == 0 {
                    return Err(Error::invalid(
                        "config.json: interleave_moe_layer_step",
                        "must be at least 1 (every how many layers one is MoE)",
                    ));
                }
                (step - 1..layers).step_by(step as usize).collect()
            }
        };
        let dense: Vec<u64> = (0..layers)
            .filter(|i| !moe.contains(i))
            .map(|i| i + 1)
            .collect();
        let rope = self.rope_layers(layers)?;
        let types = self.layer_types(&rope)?;
        let nope: Vec<u64> = (1..=layers).filter(|&i| !rope[i as usize - 1]).collect();
        let mut chunked = Vec::new();
        for (i, t) in types.iter().enumerate() {
            match t.as_str() {
                CHUNKED => chunked.push(i as u64 + 1),
                FULL => {}
                other => {
                    return Err(refuse(
                        &format!("layer_types[{i}]"),
                        format!(
                            "'{other}' is not a layer type llama4_text builds ({CHUNKED}, {FULL})"
                        ),
                    ));
                }
            }
        }
        let window = match (chunked.is_empty(), self.attention_chunk_size) {
            (true, _) => None,
            (false, Some(size)) => Some(Window {
                kind: WindowKind::Chunked,
                size,
                layers: chunked,
            }),
            (false, None) => {
                return Err(Error::invalid(
                    "config.json: attention_chunk_size",
                    "is null, but layer_types has chunked_attention layers; give the chunk size",
                ));
            }
        };
        Ok(Parts {
            experts: self.num_local_experts,
            expert_ffn: self.intermediate_size,
            attention_bias: AttentionBias::all_if(self.attention_bias),
            shared: Some((1, self.intermediate_size, false)),
            dense: (!dense.is_empty()).then_some(Dense {
                layers: dense,
                ffn: self.intermediate_size_mlp,
            }),
            window,
            nope: (!nope.is_empty()).then_some(Nope {
                layers: nope,
                temperature: self.attn_temperature_tuning,
            }),
            // Only on the RoPE layers (the stack drops it on the others).
            qk_norm: if self.use_qk_norm {
                QkNorm::L2
            } else {
                QkNorm::None
            },
            router: Some(Router::SigmoidTopkScatter),
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Result<Self> {
        let f = m.moe.expert_ffn;
        if (m.moe.shared_experts, m.moe.shared_ffn) != (1, f) {
            return Err(Error::invalid(
                "family",
                format!(
                    "llama4_text: every MoE layer has exactly one shared expert as wide as a \
                     routed one (intermediate_size = {f}); the model has {} of width {}",
                    m.moe.shared_experts, m.moe.shared_ffn
                ),
            ));
        }
        let set =
            |l: Option<&Vec<u64>>| l.map_or_else(BTreeSet::new, |l| l.iter().copied().collect());
        let (windowed, dense_layers, nope_layers) = (
            set(m.window.as_ref().map(|w| &w.layers)),
            set(m.dense.as_ref().map(|d| &d.layers)),
            set(m.nope.as_ref().map(|n| &n.layers)),
        );
        let chunked = |i: u64| windowed.contains(&i);
        let dense = |i: u64| dense_layers.contains(&i);
        let types: Vec<&str> = (1..=m.layers)
            .map(|i| if chunked(i) { CHUNKED } else { FULL })
            .collect();
        Ok(Self {
            num_local_experts: m.moe.experts,
            intermediate_size: f,
            intermediate_size_mlp: m.dense.as_ref().map_or_else(mlp, |d| d.ffn),
            moe_layers: Some(
                (1..=m.layers)
                    .filter(|&i| !dense(i))
                    .map(|i| i - 1)
                    .collect(),
            ),
            interleave_moe_layer_step: 1,
            no_rope_layers: Some(
                (1..=m.layers)
                    .map(|i| u64::from(!nope_layers.contains(&i)))
                    .collect(),
            ),
            no_rope_layer_interval: four(),
            attention_chunk_size: m.window.as_ref().map(|w| w.size),
            layer_types: Some(types.into_iter().map(str::to_owned).collect()),
            attention_bias: m.attention_bias == AttentionBias::All,
            use_qk_norm: m.qk_norm == QkNorm::L2,
            attn_temperature_tuning: m.nope.as_ref().is_some_and(|n| n.temperature),
        })
    }
}
