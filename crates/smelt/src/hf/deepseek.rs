//! DeepSeek-style MoE (`deepseek_v2`, `deepseek_v3`, `kimi_k2`, `glm4_moe`): routed experts
//! of `moe_intermediate_size`, `n_shared_experts` ungated shared experts of the same width,
//! the first `first_k_dense_replace` layers dense (`intermediate_size`), DeepSeek-V3's and
//! GLM's router bias (`e_score_correction_bias`, stored in the checkpoint), and MTP modules
//! (`num_nextn_predict_layers`). DeepSeek and Kimi-K2 attend with multi-head latent attention
//! ([`Latent`]), DeepSeek-V3.2 with a sparse attention indexer beside it ([`Index`]: a
//! LayerNorm-ed key of `index_head_dim`, `index_n_heads` scoring heads from the query latent,
//! the core on the `index_topk` best keys); GLM-4.5 with GQA ([`Glm`]).
//!
//! Layer `i` (0-based) is MoE when `i >= first_k_dense_replace` and `i % moe_layer_freq ==
//! 0` (DeepSeek's own modeling code; Transformers' reads only the first condition, the same
//! rule for `moe_layer_freq = 1`, every published config). Grouped routing (`n_group`,
//! `topk_group`), `routed_scaling_factor`, `scoring_func` and `norm_topk_prob` change which
//! experts a token uses and how their outputs are weighted, not what is computed: no FLOPs
//! or parameters. They are read for the router the import states (`[model.moe] router` and
//! `[model.moe.router_groups]`, [`RouterKeys`]), which only the Transformers activation
//! policies read, and written back on export where the model states it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::family::{ConfigKeys, FamilyConfig, Words, object};
use super::support::{Feature, Shared, Support, layer_count, refuse};
use super::{Common, Family, Parts, field_names, read};
use crate::error::{Error, Result};
use crate::model::{AttentionBias, Dense, Indexer, Mla, Model, QkNorm, Router, RouterGroups};

fn one() -> u64 {
    1
}

/// How a family's router gets its bias (`e_score_correction_bias`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Routing {
    /// Always (GLM-4.5); no `topk_method` is read or written.
    Biased,
    /// With `topk_method = "noaux_tc"`; `default` is the method of a config that gives none.
    Method {
        /// The family's default `topk_method`.
        default: &'static str,
    },
}

/// The method that routes with a bias.
const NOAUX_TC: &str = "noaux_tc";
/// DeepSeek-V2's default method, without a bias.
const GREEDY: &str = "greedy";
/// DeepSeek-V2's method choosing among groups of experts, without a bias.
const GROUP_LIMITED: &str = "group_limited_greedy";

/// A DeepSeek family with multi-head latent attention (DeepSeek-V2, V3, V3.2, Kimi-K2).
pub(super) struct DeepSeek {
    family: Family,
    architecture: &'static str,
    about: &'static str,
    reads: &'static str,
    support: Support,
    routing: Routing,
    /// Whether it reads the sparse attention indexer ([`Index`]).
    indexer: bool,
    /// [`FamilyConfig::defaults`]: its Transformers config class's.
    defaults: &'static [(&'static str, u64)],
}

/// `deepseek_v2`.
pub(super) const V2: DeepSeek = DeepSeek {
    family: Family::DeepseekV2,
    architecture: "DeepseekV2ForCausalLM",
    about: "DeepSeek-V2 (MLA, DeepSeek MoE)",
    reads: "multi-head latent attention (`q_lora_rank`, null for a plain query projection; \
            `kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`); \
            `n_routed_experts` of `moe_intermediate_size`; `n_shared_experts` ungated shared \
            experts of the same width; layer `i` is MoE when `i >= first_k_dense_replace` and \
            `i % moe_layer_freq == 0`, the others dense of `intermediate_size`; a router bias \
            with `topk_method = \"noaux_tc\"`; `num_nextn_predict_layers` MTP modules",
    support: Latent::V2,
    routing: Routing::Method { default: GREEDY },
    indexer: false,
    // DeepseekV2Config: n_shared_experts = 2, q_lora_rank = 1536 (first_k_dense_replace = 0
    // and moe_layer_freq = 1 are smelt's reading of their absence too).
    defaults: &[("n_shared_experts", 2), ("q_lora_rank", 1536)],
};

/// `deepseek_v3`.
pub(super) const V3: DeepSeek = DeepSeek {
    family: Family::DeepseekV3,
    architecture: "DeepseekV3ForCausalLM",
    about: "DeepSeek-V3 (MLA, DeepSeek MoE with a router bias, MTP)",
    reads: "`deepseek_v2`'s keys, with a router bias unless `topk_method` names another \
            method (`noaux_tc` is the default)",
    support: Latent::V3,
    routing: Routing::Method { default: NOAUX_TC },
    indexer: false,
    // DeepseekV3Config (and DeepseekV32Config): first_k_dense_replace = 3,
    // n_shared_experts = 1, q_lora_rank = 1536.
    defaults: &[
        ("first_k_dense_replace", 3),
        ("n_shared_experts", 1),
        ("q_lora_rank", 1536),
    ],
};

/// `deepseek_v32`.
pub(super) const V32: DeepSeek = DeepSeek {
    family: Family::DeepseekV32,
    architecture: "DeepseekV32ForCausalLM",
    about: "DeepSeek-V3.2 (DeepSeek-V3 with a sparse attention indexer on every layer)",
    reads: "`deepseek_v3`'s keys and the sparse attention indexer: `index_n_heads`, \
            `index_head_dim`, `index_topk`; an `mlp_layer_types` list must agree with the \
            dense layers DeepSeek's rule gives, a `layer_types` list say \
            `indexed_attention` for every layer",
    support: Latent::V32,
    indexer: true,
    ..V3
};

/// `kimi_k2`.
pub(super) const KIMI_K2: DeepSeek = DeepSeek {
    family: Family::KimiK2,
    about: "Kimi-K2 (Moonshot AI; DeepSeek-V3's code)",
    reads: "`deepseek_v3`'s keys (DeepSeek-V3's modeling code builds it)",
    // Not a Transformers family: its own remote code builds it, whose defaults smelt has
    // not read, so a missing key is read as before (Kimi-K2's published config gives them).
    defaults: &[],
    ..V3
};

impl FamilyConfig for DeepSeek {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        self.defaults
    }
    fn family(&self) -> Family {
        self.family
    }
    fn architecture(&self) -> &'static str {
        self.architecture
    }
    fn about(&self) -> &'static str {
        self.about
    }
    fn reads(&self) -> &'static str {
        self.reads
    }
    fn support(&self) -> &Support {
        &self.support
    }
    fn words(&self) -> Words {
        Words::ROUTED
    }
    fn routers(&self) -> &'static [Router] {
        match self.family {
            Family::DeepseekV3 | Family::DeepseekV32 | Family::KimiK2 => &[
                Router::SigmoidGroupedFp32,
                Router::SigmoidGroupedRenormalisedFp32,
            ],
            Family::DeepseekV2 => &[Router::SoftmaxFp32, Router::SoftmaxGroupedFp32],
            _ => &[],
        }
    }
}

impl ConfigKeys for DeepSeek {
    fn keys(&self) -> Vec<&'static str> {
        let mut keys = field_names::<Moe>();
        keys.extend(field_names::<Latent>());
        if self.indexer {
            keys.extend(field_names::<Index>());
            keys.extend(field_names::<MlpTypes>());
        }
        keys
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        let indexer = match self.indexer {
            true => Some(read::<Index>(config)?.indexer()),
            false => None,
        };
        let parts = Latent::parts(self.routing, common, &read(config)?, &read(config)?)?;
        if self.indexer {
            read::<MlpTypes>(config)?.check(common.num_hidden_layers, parts.dense.as_ref())?;
        }
        let (router, router_groups) = RouterKeys::read(config)
            .stated(self.family, &parts, common.num_experts_per_tok)
            .unzip();
        // DeepseekV2Attention rotates with a complex64 table.
        let mla = (parts.mla.clone()).map(|m| Mla {
            complex_rope: self.family == Family::DeepseekV2,
            ..m
        });
        Ok(Parts {
            indexer,
            mla,
            router,
            router_groups: router_groups.flatten(),
            ..parts
        })
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        let mut out = object(Latent::of(m, self.family)?)?;
        out.extend(object(Moe::of(m, self.family, self.routing)?)?);
        out.extend(RouterKeys::of(m));
        if let Some(ix) = &m.indexer {
            out.extend(object(Index::of(ix))?);
        }
        Ok(out)
    }
}

/// The `glm4_moe` family (GLM-4.5): GQA attention, DeepSeek's MoE.
pub(super) struct Glm4Moe;

impl FamilyConfig for Glm4Moe {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // Glm4MoeConfig: num_key_value_heads = 8, first_k_dense_replace = 1, n_shared_experts = 1.
        &[
            ("num_key_value_heads", 8),
            ("first_k_dense_replace", 1),
            ("n_shared_experts", 1),
        ]
    }
    fn family(&self) -> Family {
        Family::Glm4Moe
    }
    fn architecture(&self) -> &'static str {
        "Glm4MoeForCausalLM"
    }
    fn about(&self) -> &'static str {
        "GLM-4.5 (Z.ai; GQA with DeepSeek-style MoE)"
    }
    fn reads(&self) -> &'static str {
        "GQA with Q/K/V biases (`attention_bias`) and per-head q/k norm (`use_qk_norm`); \
         the partial RoPE's `partial_rotary_factor` (`rope_dim`, 0.5 when absent; \
         `rope_parameters`' own first); \
         `deepseek_v2`'s MoE keys, always with a router bias"
    }
    fn support(&self) -> &Support {
        &Glm::SUPPORT
    }
    fn words(&self) -> Words {
        Words::ROUTED
    }
    fn routers(&self) -> &'static [Router] {
        // Glm4MoeTopkRouter: DeepSeek-V3's.
        &[
            Router::SigmoidGroupedFp32,
            Router::SigmoidGroupedRenormalisedFp32,
        ]
    }
}

impl ConfigKeys for Glm4Moe {
    fn keys(&self) -> Vec<&'static str> {
        let mut keys = field_names::<Moe>();
        keys.extend(field_names::<Glm>());
        keys
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        let mut glm = read::<Glm>(config)?;
        glm.partial_rotary_factor = rotary_factor(config, glm.partial_rotary_factor);
        let parts = glm.parts(common, &read(config)?)?;
        let (router, router_groups) = RouterKeys::read(config)
            .stated(Family::Glm4Moe, &parts, common.num_experts_per_tok)
            .unzip();
        Ok(Parts {
            router,
            router_groups: router_groups.flatten(),
            ..parts
        })
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        let mut out = object(Glm::of(m))?;
        out.extend(object(Moe::of(m, Family::Glm4Moe, Routing::Biased)?)?);
        out.extend(RouterKeys::of(m));
        Ok(out)
    }
}

/// The DeepSeek MoE keys.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Moe {
    n_routed_experts: u64,
    moe_intermediate_size: u64,
    #[serde(default)]
    n_shared_experts: Option<u64>,
    #[serde(default)]
    first_k_dense_replace: u64,
    #[serde(default = "one")]
    pub(super) moe_layer_freq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) intermediate_size: Option<u64>,
    #[serde(default)]
    num_nextn_predict_layers: u64,
    /// `noaux_tc` routes with `e_score_correction_bias` (DeepSeek-V3's default); V2's
    /// `greedy` and `group_limited_greedy` have no bias.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topk_method: Option<String>,
}

impl Moe {
    /// The MoE parts of a config routed as `routing` with `layers` layers.
    pub(super) fn parts(&self, routing: Routing, layers: u64) -> Result<Parts> {
        if self.moe_layer_freq == 0 {
            return Err(Error::invalid(
                "config.json: moe_layer_freq",
                "must be at least 1 (every how many layers one is MoE)",
            ));
        }
        if self.first_k_dense_replace > layers {
            return Err(Error::invalid(
                "config.json: first_k_dense_replace",
                format!(
                    "must be at most num_hidden_layers ({layers}): it counts the dense layers \
                     before the first MoE one; got {}",
                    self.first_k_dense_replace
                ),
            ));
        }
        let dense: Vec<u64> = (0..layers)
            .filter(|&i| i < self.first_k_dense_replace || i % self.moe_layer_freq != 0)
            .map(|i| i + 1)
            .collect();
        if layers > 0 && dense.len() as u64 == layers {
            return Err(Error::invalid(
                "config.json: first_k_dense_replace",
                format!(
                    "leaves no MoE layer of the {layers} (with moe_layer_freq {}): a MoE \
                     config needs at least one",
                    self.moe_layer_freq
                ),
            ));
        }
        let dense = if dense.is_empty() {
            None
        } else {
            let ffn = self.intermediate_size.ok_or_else(|| {
                Error::invalid(
                    "config.json: intermediate_size",
                    "missing; the dense layers (first_k_dense_replace, moe_layer_freq) need it",
                )
            })?;
            Some(Dense { layers: dense, ffn })
        };
        let router_bias = match routing {
            Routing::Biased => true,
            Routing::Method { default } => {
                self.topk_method.as_deref().unwrap_or(default) == NOAUX_TC
            }
        };
        let shared = self
            .n_shared_experts
            .filter(|&n| n > 0)
            .map(|n| (n, self.moe_intermediate_size, false));
        Ok(Parts {
            experts: self.n_routed_experts,
            expert_ffn: self.moe_intermediate_size,
            shared,
            dense,
            router_bias,
            mtp_layers: self.num_nextn_predict_layers,
            ..Parts::default()
        })
    }

    /// The keys of `m` in `family`'s words: the dense layers must be the first ones, and
    /// the shared experts a whole number of routed experts' width.
    pub(super) fn of(m: &Model, family: Family, routing: Routing) -> Result<Self> {
        let unfit = |why: String| Error::invalid("family", format!("{family}: {why}"));
        let first_k = match &m.dense {
            None => 0,
            Some(d) => {
                let k = d.layers.len() as u64;
                if d.layers != (1..=k).collect::<Vec<_>>() {
                    return Err(unfit(format!(
                        "its dense layers are the first first_k_dense_replace ones; the model's \
                         are {:?}",
                        d.layers
                    )));
                }
                k
            }
        };
        let f = m.moe.expert_ffn;
        let width = m.moe.shared_experts * m.moe.shared_ffn;
        if !width.is_multiple_of(f) {
            return Err(unfit(format!(
                "its shared experts are n_shared_experts x moe_intermediate_size ({f}) wide; \
                 the model's are {width}"
            )));
        }
        let topk_method = match routing {
            Routing::Biased => None,
            Routing::Method { .. } if m.moe.router_bias => Some(NOAUX_TC.to_owned()),
            Routing::Method { .. } => Some(GREEDY.to_owned()),
        };
        Ok(Self {
            n_routed_experts: m.moe.experts,
            moe_intermediate_size: f,
            n_shared_experts: Some(width / f),
            first_k_dense_replace: first_k,
            moe_layer_freq: 1,
            intermediate_size: m.dense.as_ref().map(|d| d.ffn),
            num_nextn_predict_layers: m.mtp_layers,
            topk_method,
        })
    }
}

/// DeepSeek's multi-head latent attention keys.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Latent {
    /// `null` (DeepSeek-V2-Lite): a plain query projection.
    #[serde(default)]
    q_lora_rank: Option<u64>,
    kv_lora_rank: u64,
    qk_nope_head_dim: u64,
    qk_rope_head_dim: u64,
    v_head_dim: u64,
    #[serde(default)]
    attention_bias: bool,
}

impl Latent {
    const V2: Support = Support {
        shared: Shared::Ungated,
        dense: true,
        features: &[Feature::Mla],
        required: &[Feature::Mla],
        ..Support::ROUTED
    };
    const V3: Support = Support {
        features: &[Feature::Mla, Feature::RouterBias, Feature::Mtp],
        required: &[Feature::Mla, Feature::RouterBias],
        ..Self::V2
    };
    pub(super) const V32: Support = Support {
        features: &[
            Feature::Mla,
            Feature::RouterBias,
            Feature::Mtp,
            Feature::Indexer,
        ],
        required: &[Feature::Mla, Feature::RouterBias, Feature::Indexer],
        ..Self::V2
    };

    pub(super) fn parts(routing: Routing, c: &Common, latent: &Self, moe: &Moe) -> Result<Parts> {
        if latent.attention_bias {
            return Err(refuse(
                "attention_bias",
                "biases on DeepSeek's latent projections are not in the cost model",
            ));
        }
        Ok(Parts {
            mla: Some(Mla {
                q_lora_rank: latent.q_lora_rank.unwrap_or(0),
                kv_lora_rank: latent.kv_lora_rank,
                qk_nope_head_dim: latent.qk_nope_head_dim,
                qk_rope_head_dim: latent.qk_rope_head_dim,
                v_head_dim: latent.v_head_dim,
                complex_rope: false,
            }),
            ..moe.parts(routing, c.num_hidden_layers)?
        })
    }

    pub(super) fn of(m: &Model, family: Family) -> Result<Self> {
        let a = m
            .mla
            .as_ref()
            .ok_or_else(|| Error::invalid("family", format!("{family}: always has [model.mla]")))?;
        Ok(Self {
            q_lora_rank: (a.q_lora_rank > 0).then_some(a.q_lora_rank),
            kv_lora_rank: a.kv_lora_rank,
            qk_nope_head_dim: a.qk_nope_head_dim,
            qk_rope_head_dim: a.qk_rope_head_dim,
            v_head_dim: a.v_head_dim,
            attention_bias: false,
        })
    }
}

/// GLM-4.5's attention keys (GQA; the MoE is DeepSeek's).
#[derive(Debug, Clone, Deserialize, Serialize)]
struct Glm {
    /// Biases on Q, K and V (not O).
    #[serde(default)]
    attention_bias: bool,
    /// A per-head RMSNorm on queries and keys.
    #[serde(default)]
    use_qk_norm: bool,
    /// The share of each head RoPE rotates, the rest concatenated back (0.5 when absent,
    /// `Glm4MoeConfig`'s default; `rope_parameters.partial_rotary_factor` where given,
    /// which Transformers reads first): the model's `rope_dim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partial_rotary_factor: Option<f64>,
}

/// The dimensions of each `head_dim`-wide head a RoPE of `partial_rotary_factor` `factor`
/// rotates (the model's `rope_dim`); refuses a factor that does not rotate an even,
/// positive number of them, at most all.
pub(super) fn partial_rope(head_dim: u64, factor: f64) -> Result<u64> {
    let rope = head_dim as f64 * factor;
    let rope_dim = rope as u64;
    if rope_dim as f64 != rope
        || rope_dim == 0
        || !rope_dim.is_multiple_of(2)
        || rope_dim > head_dim
    {
        return Err(Error::invalid(
            "config.json: partial_rotary_factor",
            format!(
                "must rotate an even, positive number of each head's {head_dim} dimensions \
                 (at most all); got {factor}"
            ),
        ));
    }
    Ok(rope_dim)
}

/// The `partial_rotary_factor` of `config`: `rope_parameters`' where given (Transformers'
/// RoPE reads it there first; the top-level key fills it only when absent), else `top`.
pub(super) fn rotary_factor(config: &Value, top: Option<f64>) -> Option<f64> {
    (config.get("rope_parameters"))
        .and_then(|r| r.get("partial_rotary_factor"))
        .and_then(Value::as_f64)
        .or(top)
}

impl Glm {
    const SUPPORT: Support = Support {
        qk_norm: &[QkNorm::None, QkNorm::PerHead],
        biases: &[AttentionBias::None, AttentionBias::Qkv],
        shared: Shared::Ungated,
        dense: true,
        features: &[Feature::RouterBias, Feature::Mtp],
        required: &[Feature::RouterBias],
        nope: false,
    };

    fn parts(&self, c: &Common, moe: &Moe) -> Result<Parts> {
        let rope_dim = partial_rope(c.head_dim()?, self.partial_rotary_factor.unwrap_or(0.5))?;
        Ok(Parts {
            rope_dim: Some(rope_dim),
            qk_norm: if self.use_qk_norm {
                QkNorm::PerHead
            } else {
                QkNorm::None
            },
            attention_bias: if self.attention_bias {
                AttentionBias::Qkv
            } else {
                AttentionBias::None
            },
            ..moe.parts(Routing::Biased, c.num_hidden_layers)?
        })
    }

    fn of(m: &Model) -> Self {
        let rotated = m.rope_dim.unwrap_or(m.head_dim);
        Self {
            attention_bias: m.attention_bias == AttentionBias::Qkv,
            use_qk_norm: m.qk_norm == QkNorm::PerHead,
            partial_rotary_factor: Some(rotated as f64 / m.head_dim.max(1) as f64),
        }
    }
}

/// DeepSeek-V3.2's sparse attention indexer keys.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct Index {
    index_n_heads: u64,
    index_head_dim: u64,
    index_topk: u64,
}

impl Index {
    pub(super) fn indexer(&self) -> Indexer {
        Indexer {
            heads: self.index_n_heads,
            head_dim: self.index_head_dim,
            topk: self.index_topk,
        }
    }

    pub(super) fn of(ix: &Indexer) -> Self {
        Self {
            index_n_heads: ix.heads,
            index_head_dim: ix.head_dim,
            index_topk: ix.topk,
        }
    }
}

/// The per-layer FFN list Transformers' `DeepseekV32Config` also reads (`"dense"` or
/// `"sparse"` per layer, overriding `first_k_dense_replace`): smelt reads DeepSeek's rule,
/// so a list that says otherwise is refused (GLM-5's `glm_moe_dsa` reads the list).
///
/// `DeepseekV32Config` also takes a `layer_types` list, defaulting to `"indexed_attention"`
/// for every layer, which its modelling code never reads: every layer is built with the
/// indexer and full attention. Any other entry (a `"sliding_attention"`, say) would be
/// ignored by Transformers, so it is refused rather than read as a window.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct MlpTypes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mlp_layer_types: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layer_types: Option<Vec<String>>,
}

impl MlpTypes {
    fn check(&self, layers: u64, dense: Option<&Dense>) -> Result<()> {
        if let Some(types) = &self.layer_types {
            if let Some(i) = types.iter().position(|t| t != "indexed_attention") {
                return Err(refuse(
                    &format!("layer_types[{i}]"),
                    format!(
                        "'{}': Transformers' DeepSeek-V3.2 builds every layer as indexed \
                         attention and does not read layer_types, so it would not build this",
                        types[i]
                    ),
                ));
            }
            layer_count(types, layers)?;
        }
        let Some(types) = &self.mlp_layer_types else {
            return Ok(());
        };
        let listed: Vec<u64> = (1..)
            .zip(types)
            .filter(|(_, t)| t.as_str() != "sparse")
            .map(|(i, _)| i)
            .collect();
        let ours = dense.map(|d| d.layers.clone()).unwrap_or_default();
        if types.len() as u64 == layers && listed == ours {
            return Ok(());
        }
        Err(refuse(
            "mlp_layer_types",
            format!(
                "names {} entries with non-sparse layers {listed:?} (1-based), but \
                 first_k_dense_replace and moe_layer_freq, DeepSeek's rule that smelt reads, \
                 make {ours:?} of {layers} layers dense; Transformers would build the list's",
                types.len()
            ),
        ))
    }
}

/// The router keys of DeepSeek's configs, read from the config as it is (not among the
/// family's keys, so that an export of a model without a stated router carries the
/// Baseline's): `n_group`, `topk_group`, `norm_topk_prob` and `scoring_func`.
#[derive(Debug, Default)]
pub(super) struct RouterKeys {
    n_group: Option<u64>,
    topk_group: Option<u64>,
    norm_topk_prob: Option<bool>,
    scoring_func: Option<String>,
    topk_method: Option<String>,
}

impl RouterKeys {
    pub(super) fn read(config: &Value) -> Self {
        let int = |k: &str| config.get(k).and_then(Value::as_u64);
        Self {
            n_group: int("n_group"),
            topk_group: int("topk_group"),
            norm_topk_prob: config.get("norm_topk_prob").and_then(Value::as_bool),
            scoring_func: (config.get("scoring_func").and_then(Value::as_str)).map(str::to_owned),
            topk_method: (config.get("topk_method").and_then(Value::as_str)).map(str::to_owned),
        }
    }

    /// The router `family`'s Transformers class builds from these keys, where it is one
    /// of smelt's and fits the experts (`n_group` dividing them, two per group, the top-k
    /// among the `topk_group` best groups); `None`, not stated, otherwise. DeepSeek-V3's
    /// `DeepseekV3TopkRouter` always scores with a sigmoid and adds its bias (whatever
    /// `scoring_func` and `topk_method` say): stated where the config says so too
    /// (`noaux_tc`, `sigmoid`), with `DeepseekV3Config`'s defaults (`n_group = 8`,
    /// `topk_group = 4`, `norm_topk_prob = true`); Kimi-K2's own code's defaults are not
    /// read, so its keys must be given.
    pub(super) fn stated(
        &self,
        family: Family,
        parts: &Parts,
        top_k: u64,
    ) -> Option<(Router, Option<RouterGroups>)> {
        let defaults = match family {
            // DeepseekV32Config's are DeepseekV3Config's, DeepseekV32TopkRouter is
            // DeepseekV3TopkRouter.
            Family::DeepseekV3 | Family::DeepseekV32 => (Some(8), Some(4), Some(true)),
            Family::KimiK2 => (None, None, None),
            // Glm4MoeConfig's and GlmMoeDsaConfig's defaults; Glm4MoeTopkRouter and
            // GlmMoeDsaTopkRouter are DeepSeek-V3's.
            Family::Glm4Moe | Family::GlmMoeDsa => (Some(1), Some(1), Some(true)),
            Family::DeepseekV2 => return self.softmax(parts, top_k),
            _ => return None,
        };
        let sigmoid = self.scoring_func.as_deref().is_none_or(|f| f == "sigmoid");
        if !parts.router_bias || !sigmoid {
            return None;
        }
        let groups = RouterGroups {
            groups: self.n_group.or(defaults.0)?,
            topk_groups: self.topk_group.or(defaults.1)?,
        };
        let router = match self.norm_topk_prob.or(defaults.2)? {
            true => Router::SigmoidGroupedRenormalisedFp32,
            false => Router::SigmoidGroupedFp32,
        };
        let fits = groups.fit(router, parts.experts, top_k);
        fits.then_some((router, Some(groups)))
    }

    /// DeepSeek-V2's router (`DeepseekV2TopkRouter`, a float32 softmax that it never
    /// renormalises): `greedy` or `group_limited_greedy` (`n_group` and `topk_group` given,
    /// no defaults), stated where the config says no more (`norm_topk_prob` false,
    /// `scoring_func` softmax; `noaux_tc`, which it does not build, leaves it unstated).
    fn softmax(&self, parts: &Parts, top_k: u64) -> Option<(Router, Option<RouterGroups>)> {
        let softmax = self.scoring_func.as_deref().is_none_or(|f| f == "softmax");
        if parts.router_bias || !softmax || self.norm_topk_prob == Some(true) {
            return None;
        }
        match self.topk_method.as_deref().unwrap_or(GREEDY) {
            GREEDY => Some((Router::SoftmaxFp32, None)),
            GROUP_LIMITED => {
                let groups = RouterGroups {
                    groups: self.n_group?,
                    topk_groups: self.topk_group?,
                };
                let router = Router::SoftmaxGroupedFp32;
                groups
                    .fit(router, parts.experts, top_k)
                    .then_some((router, Some(groups)))
            }
            _ => None,
        }
    }

    /// The keys of `m`'s stated router (none without one).
    pub(super) fn of(m: &Model) -> Map<String, Value> {
        let mut out = Map::new();
        let Some(r) = m.moe.router else {
            return out;
        };
        out.insert("norm_topk_prob".to_owned(), Value::from(r.renormalises()));
        if let Some(g) = m.moe.router_groups {
            out.insert("n_group".to_owned(), Value::from(g.groups));
            out.insert("topk_group".to_owned(), Value::from(g.topk_groups));
        }
        if r == Router::SoftmaxGroupedFp32 {
            out.insert("topk_method".to_owned(), Value::from(GROUP_LIMITED));
        }
        out
    }
}
