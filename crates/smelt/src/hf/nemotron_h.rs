//! `nemotron_h` (NVIDIA Nemotron-H, Nemotron 3 Nano): hybrids of Mamba-2 layers, attention
//! and MoE (or MLP) layers, as Transformers' `NemotronH*` classes build them.
//!
//! Every layer (`NemotronHBlock`) is one RMSNorm and one block, named per layer by
//! `layers_block_type` (also read as `layer_types`; the legacy names `"mamba"` and
//! `"attention"` are Transformers' `"linear_attention"` and `"full_attention"`) or, without
//! it, by the characters of `hybrid_override_pattern`: `M` a Mamba-2 mixer, `*` attention,
//! `-` an MLP, `E` a MoE. smelt's layer holds a mixer and an FFN with a norm each, so a
//! Nemotron-H layer is a one-block layer ([`crate::model::Blocks`]): `M` a recurrent
//! mixer-only layer, `*` a mixer-only attention layer, `E` an FFN-only MoE layer, `-` an
//! FFN-only dense layer.
//!
//! * The Mamba-2 mixer ([`crate::model::Mamba2`]): `mamba_num_heads` of `mamba_head_dim`,
//!   `ssm_state_size`, `n_groups`, `conv_kernel`, `chunk_size`, `use_conv_bias`, `use_bias`
//!   (its projections), with the legacy keys `mamba_n_groups`, `mamba_d_conv`,
//!   `mamba_conv_bias`, `mamba_chunk_size` read first, as the config class reads them.
//! * Every MLP is ungated, `down(act(up·x))` (`mlp_hidden_act = "relu2"`): the MoE's
//!   `n_routed_experts` of `moe_intermediate_size`, its one shared expert of
//!   `moe_shared_expert_intermediate_size` (the code builds one whatever
//!   `n_shared_experts` says), and the `-` layers' MLP of `intermediate_size`. The router's
//!   `e_score_correction_bias` is a buffer, not a parameter; grouped routing and
//!   `routed_scaling_factor` cost nothing counted.
//! * The attention has no q/k norm, no biases (the code ignores `attention_bias`) and no
//!   window.
//! * `moe_latent_size` (Nemotron 3 Super's LatentMoE): the routed experts work at that
//!   width, between `fc1_latent_proj` and `fc2_latent_proj` ([`crate::model::Moe::latent`]).
//! * The router (`NemotronHTopkRouter`) is read as the published configs set it:
//!   `n_group = topk_group = 1` and `norm_topk_prob = true` (`NemotronHConfig`'s defaults,
//!   which the export writes by leaving them out); other values are refused, naming the key.
//! * Refused: `mlp_bias` (biases on the shared expert and the MLPs), a tied LM head (the code never ties it), other MLP
//!   activations, and patterns without a MoE layer (smelt describes MoE models). The MTP
//!   weights of the checkpoints are not built by Transformers (ignored on load) and not
//!   read. Absent keys take `NemotronHConfig`'s defaults.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::family::{FamilyConfig, OneStruct, OwnKeys, Words};
use super::support::{Feature, Shared, Support, refuse};
use super::{Common, Family, Parts};
use crate::error::{Error, Result};
use crate::model::{Blocks, Dense, ExpertActivation, Mamba2, Mixer, Model, Recurrent};

const MAMBA: &str = "linear_attention";
const ATTENTION: &str = "full_attention";
const MLP: &str = "mlp";
const MOE: &str = "moe";

/// What Transformers' `NemotronH*` code builds.
const SUPPORT: Support = Support {
    shared: Shared::Ungated,
    dense: true,
    features: &[
        Feature::Mamba2,
        Feature::Blocks,
        Feature::Relu2,
        Feature::LatentExperts,
    ],
    required: &[Feature::Mamba2, Feature::Blocks, Feature::Relu2],
    ..Support::ROUTED
};

const WORDS: Words = Words {
    experts: "n_routed_experts",
    expert_ffn: "moe_intermediate_size",
    shared_ffn: "moe_shared_expert_intermediate_size",
    dense_ffn: "intermediate_size",
    own: &[
        ("model.moe.latent", "moe_latent_size"),
        ("model.recurrent.mixer.mamba2.heads", "mamba_num_heads"),
        ("model.recurrent.mixer.mamba2.head_dim", "mamba_head_dim"),
        ("model.recurrent.mixer.mamba2.state", "ssm_state_size"),
        ("model.recurrent.mixer.mamba2.groups", "n_groups"),
        ("model.recurrent.mixer.mamba2.conv_kernel", "conv_kernel"),
        ("model.recurrent.mixer.mamba2.chunk", "chunk_size"),
        ("model.blocks.mixer_only", "layers_block_type"),
        ("model.blocks.ffn_only", "layers_block_type"),
        ("model.blocks", "layers_block_type"),
    ],
    ..Words::LOCAL
};

fn yes() -> bool {
    true
}

/// One layer's block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Mamba,
    Attention,
    Mlp,
    Moe,
}

impl Block {
    fn name(self) -> &'static str {
        match self {
            Block::Mamba => MAMBA,
            Block::Attention => ATTENTION,
            Block::Mlp => MLP,
            Block::Moe => MOE,
        }
    }
}

/// The keys `nemotron_h` reads beyond the common ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layers_block_type: Option<Vec<String>>,
    #[serde(default, skip_serializing)]
    layer_types: Option<Vec<String>>,
    #[serde(default, skip_serializing)]
    hybrid_override_pattern: Option<String>,
    mamba_num_heads: u64,
    mamba_head_dim: u64,
    ssm_state_size: u64,
    n_groups: u64,
    conv_kernel: u64,
    chunk_size: u64,
    #[serde(default = "yes")]
    use_conv_bias: bool,
    #[serde(default)]
    use_bias: bool,
    #[serde(default, skip_serializing)]
    mamba_n_groups: Option<u64>,
    #[serde(default, skip_serializing)]
    mamba_d_conv: Option<u64>,
    #[serde(default, skip_serializing)]
    mamba_conv_bias: Option<bool>,
    #[serde(default, skip_serializing)]
    mamba_chunk_size: Option<u64>,
    n_routed_experts: u64,
    moe_intermediate_size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    moe_latent_size: Option<u64>,
    moe_shared_expert_intermediate_size: u64,
    intermediate_size: u64,
    #[serde(default = "relu2")]
    mlp_hidden_act: String,
}

fn relu2() -> String {
    "relu2".to_owned()
}

impl Config {
    /// Each layer's block, as the config class derives them.
    fn blocks(&self, layers: u64) -> Result<Vec<Block>> {
        let listed = self
            .layers_block_type
            .as_ref()
            .map(|l| ("layers_block_type", l))
            .or(self.layer_types.as_ref().map(|l| ("layer_types", l)));
        let blocks: Vec<Block> = match (listed, &self.hybrid_override_pattern) {
            (Some((key, list)), _) => list
                .iter()
                .enumerate()
                .map(|(i, t)| match t.as_str() {
                    MAMBA | "mamba" => Ok(Block::Mamba),
                    ATTENTION | "attention" => Ok(Block::Attention),
                    MLP => Ok(Block::Mlp),
                    MOE => Ok(Block::Moe),
                    other => Err(Error::invalid(
                        format!("config.json: {key}[{i}]"),
                        format!(
                            "must be \"{MAMBA}\", \"{ATTENTION}\", \"{MLP}\" or \"{MOE}\"; got \
                             \"{}\"",
                            other.escape_debug()
                        ),
                    )),
                })
                .collect::<Result<_>>()?,
            (None, Some(pattern)) => pattern
                .chars()
                .enumerate()
                .map(|(i, c)| match c {
                    'M' => Ok(Block::Mamba),
                    '*' => Ok(Block::Attention),
                    '-' => Ok(Block::Mlp),
                    'E' => Ok(Block::Moe),
                    other => Err(Error::invalid(
                        "config.json: hybrid_override_pattern",
                        format!(
                            "character {i} must be M (Mamba-2), * (attention), - (MLP) or E \
                             (MoE); got '{}'",
                            other.escape_debug()
                        ),
                    )),
                })
                .collect::<Result<_>>()?,
            // NemotronHConfig's default.
            (None, None) => vec![Block::Mamba, Block::Moe, Block::Attention, Block::Mlp],
        };
        if blocks.len() as u64 != layers {
            return Err(Error::invalid(
                "config.json: num_hidden_layers",
                format!(
                    "must equal the number of layers the layer pattern names ({}); got \
                     {layers} (Transformers builds the pattern's layers)",
                    blocks.len()
                ),
            ));
        }
        if !blocks.contains(&Block::Moe) {
            return Err(refuse(
                "hybrid_override_pattern",
                "the pattern has no MoE (E) layer; smelt describes MoE models",
            ));
        }
        Ok(blocks)
    }
}

impl OwnKeys for Config {
    fn parts(&self, c: &Common) -> Result<Parts> {
        if self.mlp_hidden_act != "relu2" {
            return Err(refuse(
                "mlp_hidden_act",
                format!(
                    "smelt reads Nemotron-H's ungated MLP as relu2 (its configs' activation); \
                     got \"{}\"",
                    self.mlp_hidden_act.escape_debug()
                ),
            ));
        }
        let blocks = self.blocks(c.num_hidden_layers)?;
        let at = |kind: &[Block]| -> Vec<u64> {
            (1..)
                .zip(&blocks)
                .filter(|(_, b)| kind.contains(b))
                .map(|(l, _)| l)
                .collect()
        };
        let dense = at(&[Block::Mlp]);
        Ok(Parts {
            experts: self.n_routed_experts,
            expert_ffn: self.moe_intermediate_size,
            latent: self.moe_latent_size,
            // `NemotronHMLP` reads a width of 0 as `intermediate_size`.
            shared: Some((
                1,
                match self.moe_shared_expert_intermediate_size {
                    0 => self.intermediate_size,
                    f => f,
                },
                false,
            )),
            dense: (!dense.is_empty()).then_some(Dense {
                layers: dense,
                ffn: self.intermediate_size,
            }),
            activation: ExpertActivation::Relu2,
            recurrent: Some(Recurrent {
                layers: at(&[Block::Mamba]),
                mixer: Mixer::Mamba2(Mamba2 {
                    heads: self.mamba_num_heads,
                    head_dim: self.mamba_head_dim,
                    state: self.ssm_state_size,
                    groups: self.mamba_n_groups.unwrap_or(self.n_groups),
                    conv_kernel: self.mamba_d_conv.unwrap_or(self.conv_kernel),
                    chunk: self.mamba_chunk_size.unwrap_or(self.chunk_size),
                    conv_bias: self.mamba_conv_bias.unwrap_or(self.use_conv_bias),
                    proj_bias: self.use_bias,
                }),
            })
            .filter(|r| !r.layers.is_empty()),
            blocks: Some(Blocks {
                mixer_only: at(&[Block::Mamba, Block::Attention]),
                ffn_only: at(&[Block::Mlp, Block::Moe]),
            }),
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Result<Self> {
        let unfit = |why: &str| Err(Error::invalid("family", format!("nemotron_h: {why}")));
        let Some(Recurrent {
            layers: mamba,
            mixer: Mixer::Mamba2(x),
        }) = &m.recurrent
        else {
            return unfit("has Mamba-2 layers ([model.recurrent] mixer mamba2) only");
        };
        let dense = m.dense.as_ref().map_or(&[][..], |d| &d.layers[..]);
        let mut types = Vec::new();
        for l in 1..=m.layers {
            let (mixer, ffn) = (m.mixer_only().contains(&l), m.ffn_only().contains(&l));
            let block = match (mixer, ffn) {
                (true, false) if mamba.contains(&l) => Block::Mamba,
                (true, false) => Block::Attention,
                (false, true) if dense.contains(&l) => Block::Mlp,
                (false, true) => Block::Moe,
                _ => {
                    return unfit(&format!(
                        "every layer holds one block (a mixer or an FFN); layer {l} is in \
                         neither model.blocks.mixer_only nor model.blocks.ffn_only"
                    ));
                }
            };
            types.push(block.name().to_owned());
        }
        if m.moe.shared_experts == 0 {
            return unfit("every MoE layer has one shared expert; the model has none");
        }
        if m.tie_embeddings {
            return unfit("its LM head is never tied to the embedding");
        }
        Ok(Self {
            layers_block_type: Some(types),
            layer_types: None,
            hybrid_override_pattern: None,
            mamba_num_heads: x.heads,
            mamba_head_dim: x.head_dim,
            ssm_state_size: x.state,
            n_groups: x.groups,
            conv_kernel: x.conv_kernel,
            chunk_size: x.chunk,
            use_conv_bias: x.conv_bias,
            use_bias: x.proj_bias,
            mamba_n_groups: None,
            mamba_d_conv: None,
            mamba_conv_bias: None,
            mamba_chunk_size: None,
            n_routed_experts: m.moe.experts,
            moe_intermediate_size: m.moe.expert_ffn,
            moe_latent_size: m.moe.latent,
            // One ungated shared expert of width s * f_s: the same parameters and FLOPs.
            moe_shared_expert_intermediate_size: m.moe.shared_experts * m.moe.shared_ffn,
            // Read only by the MLP (`-`) layers; NemotronHConfig's default otherwise.
            intermediate_size: m.dense.as_ref().map_or(21504, |d| d.ffn),
            mlp_hidden_act: relu2(),
        })
    }
}

/// The `nemotron_h` family.
pub(super) struct NemotronH;

impl FamilyConfig for NemotronH {
    fn family(&self) -> Family {
        Family::NemotronH
    }
    fn architecture(&self) -> &'static str {
        "NemotronHForCausalLM"
    }
    fn about(&self) -> &'static str {
        "NVIDIA Nemotron-H and Nemotron 3 Nano and Super (Mamba-2 layers beside attention and \
         MoE layers; Super's LatentMoE)"
    }
    fn reads(&self) -> &'static str {
        "`layers_block_type` (or `layer_types`, else the `hybrid_override_pattern` string: \
         `M` Mamba-2, `*` attention, `-` MLP, `E` MoE), one block and one norm per layer; the \
         Mamba-2 shapes `mamba_num_heads`, `mamba_head_dim`, `ssm_state_size`, `n_groups`, \
         `conv_kernel`, `chunk_size`, `use_conv_bias`, `use_bias`; ungated relu2 MLPs: \
         `n_routed_experts` of `moe_intermediate_size` (at `moe_latent_size` where set: \
         LatentMoE), one shared expert of `moe_shared_expert_intermediate_size`, \
         `intermediate_size` for `-` layers"
    }
    fn support(&self) -> &Support {
        &SUPPORT
    }
    fn words(&self) -> Words {
        WORDS
    }
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // NemotronHConfig's defaults.
        &[
            ("hidden_size", 4096),
            ("num_attention_heads", 32),
            ("num_key_value_heads", 8),
            ("head_dim", 128),
            ("num_experts_per_tok", 2),
            ("vocab_size", 131072),
            ("mamba_num_heads", 128),
            ("mamba_head_dim", 64),
            ("ssm_state_size", 128),
            ("n_groups", 8),
            ("conv_kernel", 4),
            ("chunk_size", 128),
            ("n_routed_experts", 8),
            ("moe_intermediate_size", 7688),
            ("moe_shared_expert_intermediate_size", 7688),
            ("intermediate_size", 21504),
        ]
    }
    fn derived(&self, config: &Map<String, Value>) -> Vec<(&'static str, Value)> {
        // NemotronHConfig takes the layer count from the layer pattern, not from
        // `num_hidden_layers`: absent, it is the pattern's length (4 for its default pattern).
        if config.contains_key("num_hidden_layers") {
            return Vec::new();
        }
        let listed = ["layers_block_type", "layer_types"]
            .iter()
            .find_map(|k| config.get(*k).and_then(Value::as_array).map(Vec::len));
        let pattern = (config.get("hybrid_override_pattern"))
            .and_then(Value::as_str)
            .map(|p| p.chars().count());
        vec![(
            "num_hidden_layers",
            Value::from(listed.or(pattern).unwrap_or(4)),
        )]
    }

    fn refuse(&self, config: &Map<String, Value>) -> Result<()> {
        let on = |key: &str| config.get(key).is_some_and(|v| v == &Value::Bool(true));
        if on("mlp_bias") {
            return Err(refuse(
                "mlp_bias",
                "biases on Nemotron-H's shared expert and MLPs are not counted",
            ));
        }
        // NemotronHTopkRouter's groups and renormalisation have no key in the model file:
        // smelt reads them as NemotronHConfig's defaults (the published configs'), which the
        // export writes and the Transformers activation policies count.
        let router = [
            ("n_group", Value::from(1)),
            ("topk_group", Value::from(1)),
            ("norm_topk_prob", Value::Bool(true)),
        ];
        for (key, default) in router {
            if let Some(v) = config.get(key).filter(|v| !v.is_null() && **v != default) {
                return Err(refuse(
                    key,
                    format!(
                        "smelt reads Nemotron-H's router as its published configs set it \
                         (n_group = topk_group = 1, norm_topk_prob = true: one group, the \
                         weights renormalised), which its export writes back; got {v}"
                    ),
                ));
            }
        }
        if on("tie_word_embeddings") {
            return Err(refuse(
                "tie_word_embeddings",
                "Transformers' NemotronHForCausalLM never ties its LM head \
                 (_tied_weights_keys is empty), so the model it builds is not the tied one \
                 the config names",
            ));
        }
        Ok(())
    }
}

impl OneStruct for NemotronH {
    type Keys = Config;
}
