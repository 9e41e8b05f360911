//! `glm_moe_dsa` (GLM-5): DeepSeek-V3.2's architecture as Transformers' `GlmMoeDsa` classes
//! build it — multi-head latent attention with the sparse attention indexer (`wq_b`, `wk`, a
//! LayerNorm `k_norm`, `weights_proj`) and DeepSeek's MoE with a router bias
//! (`e_score_correction_bias`, always built) — read with the GLM config's own rules:
//!
//! * the dense layers are those `mlp_layer_types` marks `"dense"`, else the first
//!   `first_k_dense_replace` (Transformers' default 3 when the key is absent); the code does
//!   not read `moe_layer_freq`, so a value other than 1 is refused (DeepSeek's own rule
//!   would place the MoE layers otherwise);
//! * `n_shared_experts` defaults to 1, `q_lora_rank` to 2048 and `intermediate_size` to
//!   12288, as in Transformers' config class;
//! * each layer's indexer mode (`indexer_types`, else `index_topk_pattern`, else
//!   `index_topk_freq` and `index_skip_topk_offset`) must be `"full"`: a `"shared"` layer
//!   reuses the previous layer's top-k and has no indexer of its own, which smelt's indexer
//!   (on every layer) does not describe, so it is refused;
//! * `layer_types` may only say `"indexed_attention"` (every layer is DSA);
//! * the router (`[model.moe] router`, which only the Transformers activation policies
//!   read) is DeepSeek-V3's (`GlmMoeDsaTopkRouter`), stated as for GLM-4.5 from
//!   `n_group`, `topk_group` and `norm_topk_prob` (1, 1 and true when absent).
//!
//! The indexer's interleaved RoPE, `routed_scaling_factor`, grouped routing and the scoring
//! function cost nothing counted.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::deepseek::{Index, Latent, Moe, RouterKeys, Routing};
use super::family::{ConfigKeys, FamilyConfig, Words, object};
use super::support::{Support, layer_count, refuse};
use super::{Common, Family, Parts, field_names, read};
use crate::error::{Error, Result};
use crate::model::{Dense, Model, Router};

/// The `glm_moe_dsa` family.
pub(super) struct GlmMoeDsa;

/// Transformers' `GlmMoeDsaConfig` defaults for the keys whose absence smelt's DeepSeek
/// readers would take otherwise (no dense layers, no shared expert, a plain query
/// projection, no dense width); keys without a default in those readers are required.
const DEFAULTS: &[(&str, u64)] = &[
    ("first_k_dense_replace", 3),
    ("n_shared_experts", 1),
    ("q_lora_rank", 2048),
    ("intermediate_size", 12288),
];

const FULL: &str = "full";
const SHARED: &str = "shared";
const INDEXED: &str = "indexed_attention";

impl FamilyConfig for GlmMoeDsa {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        DEFAULTS
    }
    fn family(&self) -> Family {
        Family::GlmMoeDsa
    }
    fn architecture(&self) -> &'static str {
        "GlmMoeDsaForCausalLM"
    }
    fn about(&self) -> &'static str {
        "GLM-5 (Z.ai; DeepSeek-V3.2's MLA, sparse attention indexer and MoE)"
    }
    fn reads(&self) -> &'static str {
        "`deepseek_v32`'s keys (a router bias always); the dense layers from `mlp_layer_types` \
         when given, else the first `first_k_dense_replace` (3 when absent); \
         `n_shared_experts`, `q_lora_rank` and `intermediate_size` (1, 2048 and 12288 when \
         absent); every layer's indexer mode (`indexer_types`, \
         `index_topk_pattern`, `index_topk_freq`, `index_skip_topk_offset`) must be `full`"
    }
    fn support(&self) -> &Support {
        &Latent::V32
    }
    fn words(&self) -> Words {
        Words::ROUTED
    }
    fn routers(&self) -> &'static [Router] {
        // GlmMoeDsaTopkRouter: DeepSeek-V3's.
        &[
            Router::SigmoidGroupedFp32,
            Router::SigmoidGroupedRenormalisedFp32,
        ]
    }
}

impl ConfigKeys for GlmMoeDsa {
    fn keys(&self) -> Vec<&'static str> {
        let mut keys = field_names::<Moe>();
        keys.extend(field_names::<Latent>());
        keys.extend(field_names::<Index>());
        keys.extend(field_names::<Dsa>());
        keys
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        let mut config = config.clone();
        if let Some(map) = config.as_object_mut()
            && map.get("mlp_layer_types").is_some_and(|v| !v.is_null())
        {
            // Transformers reads the dense layers from the list alone.
            map.insert("first_k_dense_replace".to_owned(), Value::from(0));
        }
        let dsa: Dsa = read(&config)?;
        let moe: Moe = read(&config)?;
        if moe.moe_layer_freq != 1 {
            return Err(refuse(
                "moe_layer_freq",
                format!(
                    "is {}; Transformers' glm_moe_dsa code does not read it (its MoE layers \
                     are those mlp_layer_types or first_k_dense_replace leave), so smelt does \
                     not guess which layers it meant",
                    moe.moe_layer_freq
                ),
            ));
        }
        let layers = common.num_hidden_layers;
        dsa.check_indexers(layers)?;
        dsa.check_layer_types(layers)?;
        let mut parts = Latent::parts(Routing::Biased, common, &read(&config)?, &moe)?;
        if let Some(dense) = dsa.dense_layers(layers)? {
            parts.dense = dense
                .map(|layers| {
                    let ffn = moe.intermediate_size.ok_or_else(|| {
                        Error::invalid(
                            "config.json: intermediate_size",
                            "missing; the dense layers mlp_layer_types names need it",
                        )
                    })?;
                    Ok::<_, Error>(Dense { layers, ffn })
                })
                .transpose()?;
        }
        let (router, router_groups) = RouterKeys::read(&config)
            .stated(Family::GlmMoeDsa, &parts, common.num_experts_per_tok)
            .unzip();
        Ok(Parts {
            indexer: Some(read::<Index>(&config)?.indexer()),
            router,
            router_groups: router_groups.flatten(),
            ..parts
        })
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        let mut out = object(Latent::of(m, Family::GlmMoeDsa)?)?;
        out.extend(object(Moe::of(m, Family::GlmMoeDsa, Routing::Biased)?)?);
        out.extend(RouterKeys::of(m));
        if let Some(ix) = &m.indexer {
            out.extend(object(Index::of(ix))?);
        }
        Ok(out)
    }
}

/// The per-layer keys GLM-5's config adds to DeepSeek-V3.2's. None is written on export: the
/// dense layers are the first ones (`first_k_dense_replace`) and every indexer is full.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct Dsa {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mlp_layer_types: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    indexer_types: Option<Vec<String>>,
    /// A string of `F` (full) and `S` (shared), or a list of modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    index_topk_pattern: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    index_topk_freq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    index_skip_topk_offset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layer_types: Option<Vec<String>>,
}

impl Dsa {
    /// Each layer's indexer mode as Transformers' config derives it, with the key it came
    /// from.
    fn indexer_modes(&self, layers: u64) -> Result<(Vec<String>, &'static str)> {
        if let Some(t) = &self.indexer_types {
            return Ok((t.clone(), "indexer_types"));
        }
        let key = "index_topk_pattern";
        match &self.index_topk_pattern {
            Some(Value::String(s)) => {
                let modes = s.chars().map(|c| match c {
                    'F' => Ok(FULL.to_owned()),
                    'S' => Ok(SHARED.to_owned()),
                    other => Err(Error::invalid(
                        format!("config.json: {key}"),
                        format!("'{other}' is not F (full) or S (shared)"),
                    )),
                });
                return Ok((modes.collect::<Result<_>>()?, key));
            }
            Some(Value::Array(a)) => {
                let modes = a.iter().map(|v| v.as_str().map(str::to_owned));
                let modes = modes.collect::<Option<Vec<_>>>().ok_or_else(|| {
                    Error::invalid(format!("config.json: {key}"), "must list strings")
                })?;
                return Ok((modes, key));
            }
            Some(_) => {
                return Err(Error::invalid(
                    format!("config.json: {key}"),
                    "must be a string of F and S or a list of modes",
                ));
            }
            None => {}
        }
        let freq = self.index_topk_freq.unwrap_or(1).max(1);
        let offset = self.index_skip_topk_offset.unwrap_or(2);
        let modes = (0..layers)
            .map(|i| match (i + 1).saturating_sub(offset) % freq {
                0 => FULL.to_owned(),
                _ => SHARED.to_owned(),
            })
            .collect();
        Ok((modes, "index_topk_freq"))
    }

    /// Refuses a layer without its own indexer, or a list of another length.
    fn check_indexers(&self, layers: u64) -> Result<()> {
        let (modes, key) = self.indexer_modes(layers)?;
        if modes.len() as u64 != layers {
            return Err(Error::invalid(
                format!("config.json: {key}"),
                format!(
                    "must give the indexer mode of each of the {layers} layers; got {}",
                    modes.len()
                ),
            ));
        }
        match modes.iter().position(|m| m != FULL) {
            None => Ok(()),
            Some(i) => Err(refuse(
                key,
                format!(
                    "layer {i} (0-based) is '{}': a layer that reuses the previous layer's \
                     top-k has no indexer of its own, and smelt's indexer is on every layer \
                     (only '{FULL}' layers are read)",
                    modes[i]
                ),
            )),
        }
    }

    fn check_layer_types(&self, layers: u64) -> Result<()> {
        let Some(types) = &self.layer_types else {
            return Ok(());
        };
        layer_count(types, layers)?;
        match types.iter().position(|t| t != INDEXED) {
            None => Ok(()),
            Some(i) => Err(refuse(
                &format!("layer_types[{i}]"),
                format!(
                    "'{}' is not a layer type glm_moe_dsa builds ({INDEXED})",
                    types[i]
                ),
            )),
        }
    }

    /// The 1-based dense layers `mlp_layer_types` names (`Some(None)` for none), or `None`
    /// when it is absent.
    fn dense_layers(&self, layers: u64) -> Result<Option<Option<Vec<u64>>>> {
        let Some(types) = &self.mlp_layer_types else {
            return Ok(None);
        };
        let key = "config.json: mlp_layer_types";
        if types.len() as u64 != layers {
            return Err(Error::invalid(
                key,
                format!(
                    "must name the FFN of each of the {layers} layers; got {}",
                    types.len()
                ),
            ));
        }
        let mut dense = Vec::new();
        for (i, t) in types.iter().enumerate() {
            match t.as_str() {
                "dense" => dense.push(i as u64 + 1),
                "sparse" => {}
                other => {
                    return Err(Error::invalid(
                        format!("{key}[{i}]"),
                        format!("'{other}' is not 'dense' or 'sparse'"),
                    ));
                }
            }
        }
        if dense.len() as u64 == layers {
            return Err(Error::invalid(
                key,
                "leaves no MoE ('sparse') layer: a MoE config needs at least one",
            ));
        }
        Ok(Some((!dense.is_empty()).then_some(dense)))
    }
}
