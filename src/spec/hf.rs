//! Import of Hugging Face `config.json` files into a [`ModelSpec`].
//!
//! Keys keep their Hugging Face names and unknown keys are ignored (these files are other
//! tools' formats). Supported families, read as their Transformers modeling code reads them:
//!
//! | `model_type` | experts (width) | head width | q/k norm | attention biases | shared expert | dense layers |
//! |---|---|---|---|---|---|---|
//! | `mixtral` | `num_local_experts` (`intermediate_size`) | `head_dim`, else `hidden_size / num_attention_heads` | none | none | none | none |
//! | `qwen2_moe` | `num_experts` (`moe_intermediate_size`) | `head_dim`, else `hidden_size / num_attention_heads` | none | Q, K, V (`qkv_bias`, default true) | one of `shared_expert_intermediate_size`, sigmoid gate | Qwen rule |
//! | `qwen3_moe` | `num_experts` (`moe_intermediate_size`) | `head_dim` | per head (`2·head_dim`) | Q, K, V, O if `attention_bias` | none | Qwen rule |
//! | `olmoe` | `num_experts` (`intermediate_size`) | `head_dim`, else `hidden_size / num_attention_heads` | whole projection | Q, K, V, O if `attention_bias` | none | none |
//!
//! The Qwen rule: 0-based layer `i` is MoE when `i` is not in `mlp_only_layers` and
//! `(i + 1) % decoder_sparse_step == 0`; every other layer has a dense SwiGLU of width
//! `intermediate_size` ([`crate::spec::Dense`]). Keys a family's modeling code does not read
//! (e.g. `decoder_sparse_step` in a Mixtral config) are ignored, as Transformers ignores them.
//!
//! The import counts the embedding and the LM head (`[counting]`, with `vocab_size` and
//! `tie_word_embeddings`), as model cards do. A config that uses something the cost model
//! does not describe is refused with the reason, never approximated: sliding-window
//! attention, multi-head latent attention (DeepSeek's MLA), and any other `model_type`.
//!
//! [`export`] writes a (matched, looped) spec back in a family's style, with the loop in
//! clearly named extra keys that [`import`] reads back.

use serde::Deserialize;

use super::{AttentionBias, Counting, Dense, Model, ModelSpec, Moe, QkNorm, Workload};
use crate::error::{Error, Result};

/// The keys of a `config.json` that smelt reads (any others are ignored).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HfConfig {
    /// Family.
    pub model_type: Option<String>,
    /// Class names, e.g. `MixtralForCausalLM`.
    pub architectures: Option<Vec<String>>,
    /// Hidden size.
    pub hidden_size: Option<u64>,
    /// Layers.
    pub num_hidden_layers: Option<u64>,
    /// Query heads.
    pub num_attention_heads: Option<u64>,
    /// Key/value heads.
    pub num_key_value_heads: Option<u64>,
    /// Head width (Qwen3).
    pub head_dim: Option<u64>,
    /// FFN width (the experts' in Mixtral and OLMoE).
    pub intermediate_size: Option<u64>,
    /// Expert width (Qwen).
    pub moe_intermediate_size: Option<u64>,
    /// Experts (Mixtral).
    pub num_local_experts: Option<u64>,
    /// Experts (Qwen, OLMoE).
    pub num_experts: Option<u64>,
    /// Active experts per token.
    pub num_experts_per_tok: Option<u64>,
    /// Vocabulary.
    pub vocab_size: Option<u64>,
    /// Whether the LM head shares the embedding.
    pub tie_word_embeddings: Option<bool>,
    /// Sliding-window size (null when unused).
    pub sliding_window: Option<serde_json::Value>,
    /// Whether the sliding window is used (Qwen).
    pub use_sliding_window: Option<bool>,
    /// Every how many layers a layer is MoE (Qwen).
    pub decoder_sparse_step: Option<u64>,
    /// Layers with a dense MLP instead of MoE (Qwen).
    pub mlp_only_layers: Option<Vec<u64>>,
    /// Biases on the Q, K, V and O projections (Qwen3-MoE, OLMoE).
    pub attention_bias: Option<bool>,
    /// Biases on the Q, K and V projections (Qwen1.5/2-MoE; true when absent).
    pub qkv_bias: Option<bool>,
    /// Shared-expert width (Qwen1.5/2-MoE).
    pub shared_expert_intermediate_size: Option<u64>,
    /// Multi-head latent attention rank (DeepSeek).
    pub kv_lora_rank: Option<u64>,
    /// smelt's loop: 1-based first looped layer (written by [`export`]).
    pub smelt_loop_first_layer: Option<u64>,
    /// smelt's loop: looped layers.
    pub smelt_loop_span: Option<u64>,
    /// smelt's loop: executions of the block.
    pub smelt_loop_repeats: Option<u64>,
    /// smelt's loop: scale of each residual update inside the block.
    pub smelt_loop_residual_scale: Option<f64>,
}

fn need(v: Option<u64>, key: &str, family: &str) -> Result<u64> {
    v.ok_or_else(|| {
        Error::invalid(
            format!("config.json: {key}"),
            format!("missing; model_type {family} needs it"),
        )
    })
}

fn refuse(field: &str, why: impl Into<String>) -> Error {
    Error::invalid(
        format!("config.json: {field}"),
        format!("{}; smelt refuses rather than approximates", why.into()),
    )
}

fn head_width(c: &HfConfig, family: &str) -> Result<u64> {
    let (h, heads) = (
        need(c.hidden_size, "hidden_size", family)?,
        need(c.num_attention_heads, "num_attention_heads", family)?,
    );
    if heads == 0 || h % heads != 0 {
        return Err(Error::invalid(
            "config.json: num_attention_heads",
            format!("must divide hidden_size ({h}) when head_dim is not given; got {heads}"),
        ));
    }
    Ok(h / heads)
}

/// Every key [`import`] reads (and `layer_types`, a per-layer list): in an exported config
/// these come from the matched model, never from the Baseline's config ([`export_like`]).
pub const SHAPE_KEYS: [&str; 28] = [
    "model_type",
    "architectures",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "moe_intermediate_size",
    "num_local_experts",
    "num_experts",
    "num_experts_per_tok",
    "vocab_size",
    "tie_word_embeddings",
    "sliding_window",
    "use_sliding_window",
    "decoder_sparse_step",
    "mlp_only_layers",
    "attention_bias",
    "qkv_bias",
    "shared_expert_intermediate_size",
    "kv_lora_rank",
    "layer_types",
    "_name_or_path",
    "smelt_loop_first_layer",
    "smelt_loop_span",
    "smelt_loop_repeats",
    "smelt_loop_residual_scale",
];

/// The `model_type`s [`import`] reads.
pub const FAMILIES: [&str; 4] = ["mixtral", "qwen2_moe", "qwen3_moe", "olmoe"];

impl HfConfig {
    /// `head_dim` when the config gives it, else `hidden_size / num_attention_heads`, as
    /// Transformers' attention modules read it.
    fn head_dim_or_derived(&self, family: &str) -> Result<u64> {
        match self.head_dim {
            Some(d) => Ok(d),
            None => head_width(self, family),
        }
    }

    /// Qwen's dense layers: 0-based layer `i` is MoE when it is not in `mlp_only_layers` and
    /// `(i + 1) % decoder_sparse_step == 0`; the others have a dense MLP of width
    /// `intermediate_size`.
    fn qwen_dense_layers(&self, layers: u64, family: &str) -> Result<Option<Dense>> {
        let step = self.decoder_sparse_step.unwrap_or(1);
        if step == 0 {
            return Err(Error::invalid(
                "config.json: decoder_sparse_step",
                "must be at least 1 (every how many layers one is MoE)",
            ));
        }
        let only = self.mlp_only_layers.as_deref().unwrap_or_default();
        for (i, &l) in only.iter().enumerate() {
            if l >= layers {
                return Err(Error::invalid(
                    format!("config.json: mlp_only_layers[{i}]"),
                    format!("must be a 0-based layer below num_hidden_layers ({layers}); got {l}"),
                ));
            }
        }
        let dense: Vec<u64> = (0..layers)
            .filter(|i| only.contains(i) || (i + 1) % step != 0)
            .map(|i| i + 1)
            .collect();
        if dense.is_empty() {
            return Ok(None);
        }
        Ok(Some(Dense {
            layers: dense,
            ffn: need(self.intermediate_size, "intermediate_size", family)?,
        }))
    }

    /// Parses `config.json` text.
    pub fn from_json_str(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| Error::Parse {
            message: format!("config.json: {e}"),
        })
    }

    /// The model spec of this config, costed at `workload`.
    pub fn to_spec(&self, workload: Workload) -> Result<ModelSpec> {
        let family = self.model_type.as_deref().unwrap_or("");
        if self.kv_lora_rank.is_some() || family.starts_with("deepseek") {
            return Err(refuse(
                "kv_lora_rank",
                "multi-head latent attention (DeepSeek's MLA) compresses keys and values into a \
                 latent; smelt's cost model only describes GQA",
            ));
        }
        match family {
            "mixtral" | "qwen2_moe" | "qwen3_moe" | "olmoe" => {}
            "" => {
                return Err(Error::invalid(
                    "config.json: model_type",
                    format!("missing; supported: {}", FAMILIES.join(", ")),
                ));
            }
            other => {
                return Err(Error::invalid(
                    "config.json: model_type",
                    format!(
                        "'{other}' is not a family smelt imports; supported: {}",
                        FAMILIES.join(", ")
                    ),
                ));
            }
        }
        let window_on = match (&self.sliding_window, self.use_sliding_window) {
            (_, Some(false)) => false,
            (None | Some(serde_json::Value::Null), _) => false,
            (Some(_), _) => true,
        };
        if window_on {
            return Err(refuse(
                "sliding_window",
                "sliding-window attention bounds the keys a query attends and the KV cache",
            ));
        }
        let (experts, ffn, head_dim, qk_norm) = match family {
            "mixtral" => (
                need(self.num_local_experts, "num_local_experts", family)?,
                need(self.intermediate_size, "intermediate_size", family)?,
                self.head_dim_or_derived(family)?,
                QkNorm::None,
            ),
            "qwen2_moe" | "qwen3_moe" => (
                need(self.num_experts, "num_experts", family)?,
                need(self.moe_intermediate_size, "moe_intermediate_size", family)?,
                self.head_dim_or_derived(family)?,
                if family == "qwen3_moe" {
                    QkNorm::PerHead
                } else {
                    QkNorm::None
                },
            ),
            _ => (
                need(self.num_experts, "num_experts", family)?,
                need(self.intermediate_size, "intermediate_size", family)?,
                self.head_dim_or_derived(family)?,
                QkNorm::Full,
            ),
        };
        if experts == 0 {
            return Err(Error::invalid(
                format!(
                    "config.json: {}",
                    if family == "mixtral" {
                        "num_local_experts"
                    } else {
                        "num_experts"
                    }
                ),
                "must be at least 1: a model without experts is dense, not MoE",
            ));
        }
        let attention_bias = match family {
            "qwen2_moe" => {
                if self.qkv_bias.unwrap_or(true) {
                    AttentionBias::Qkv
                } else {
                    AttentionBias::None
                }
            }
            "qwen3_moe" | "olmoe" if self.attention_bias == Some(true) => AttentionBias::All,
            _ => AttentionBias::None,
        };
        let (shared_experts, shared_ffn, shared_gate) = if family == "qwen2_moe" {
            let w = need(
                self.shared_expert_intermediate_size,
                "shared_expert_intermediate_size",
                family,
            )?;
            if w == 0 {
                return Err(Error::invalid(
                    "config.json: shared_expert_intermediate_size",
                    "must be at least 1: qwen2_moe always has a gated shared expert",
                ));
            }
            (1, w, true)
        } else {
            (0, 0, false)
        };
        let layers = need(self.num_hidden_layers, "num_hidden_layers", family)?;
        let dense = if family.starts_with("qwen") {
            self.qwen_dense_layers(layers, family)?
        } else {
            None
        };
        let heads = need(self.num_attention_heads, "num_attention_heads", family)?;
        let looping = match (
            self.smelt_loop_first_layer,
            self.smelt_loop_span,
            self.smelt_loop_repeats,
        ) {
            (None, None, None) => None,
            (Some(first), Some(span), Some(repeats)) => Some(super::Loop {
                first,
                span,
                repeats,
                residual_scale: self.smelt_loop_residual_scale,
            }),
            _ => {
                return Err(Error::invalid(
                    "config.json: smelt_loop_*",
                    "give smelt_loop_first_layer, smelt_loop_span and smelt_loop_repeats together",
                ));
            }
        };
        let spec = ModelSpec {
            name: Some(
                self.architectures
                    .as_ref()
                    .and_then(|a| a.first().cloned())
                    .unwrap_or_else(|| family.to_owned()),
            ),
            model: Model {
                layers,
                hidden: need(self.hidden_size, "hidden_size", family)?,
                heads,
                kv_heads: self.num_key_value_heads.unwrap_or(heads),
                head_dim,
                vocab: need(self.vocab_size, "vocab_size", family)?,
                tie_embeddings: self.tie_word_embeddings.unwrap_or(false),
                qk_norm,
                attention_bias,
                moe: Moe {
                    experts,
                    top_k: need(self.num_experts_per_tok, "num_experts_per_tok", family)?,
                    expert_ffn: ffn,
                    shared_experts,
                    shared_ffn,
                    shared_gate,
                },
                dense,
                looping,
            },
            workload,
            counting: Counting {
                embeddings: true,
                lm_head: true,
            },
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// Imports `config.json` text, costed at `workload`.
pub fn import(text: &str, workload: Workload) -> Result<ModelSpec> {
    HfConfig::from_json_str(text)?.to_spec(workload)
}

/// The `model_type` whose conventions a spec follows: `qwen3_moe` with per-head q/k norm,
/// `olmoe` with q/k norm over the whole projection, `qwen2_moe` with a gated shared
/// expert, Q/K/V biases or dense layers, `mixtral` otherwise.
pub fn family_of(spec: &ModelSpec) -> &'static str {
    let m = &spec.model;
    match m.qk_norm {
        QkNorm::PerHead => "qwen3_moe",
        QkNorm::Full => "olmoe",
        QkNorm::None
            if m.moe.shared_gate || m.attention_bias == AttentionBias::Qkv || m.dense.is_some() =>
        {
            "qwen2_moe"
        }
        QkNorm::None => "mixtral",
    }
}

fn unfit(family: &str, why: impl Into<String>) -> Error {
    Error::invalid("family", format!("{family}: {}", why.into()))
}

/// A spec as a `config.json` in the style of `family` (one of [`FAMILIES`]): the keys
/// [`import`] reads, with the loop, if any, in the extra keys `smelt_loop_first_layer`
/// (1-based), `smelt_loop_span`, `smelt_loop_repeats` and `smelt_loop_residual_scale`, so a
/// launcher can build it and `import` reads it back. `head_dim` is always written: a
/// matched model's `heads * head_dim` need not equal `hidden_size`, and Transformers'
/// current attention modules read `head_dim` from the config (older releases derived it as
/// `hidden_size / num_attention_heads`; build such a model with a release that reads it). A
/// model the family cannot express is refused with the reason.
pub fn export(spec: &ModelSpec, family: &str) -> Result<serde_json::Value> {
    use serde_json::json;
    spec.validate()?;
    let m = &spec.model;
    let mut c = serde_json::Map::new();
    let (arch, qk) = match family {
        "mixtral" => ("MixtralForCausalLM", QkNorm::None),
        "qwen2_moe" => ("Qwen2MoeForCausalLM", QkNorm::None),
        "qwen3_moe" => ("Qwen3MoeForCausalLM", QkNorm::PerHead),
        "olmoe" => ("OlmoeForCausalLM", QkNorm::Full),
        other => {
            return Err(Error::invalid(
                "family",
                format!(
                    "'{other}' is not one smelt exports; supported: {}",
                    FAMILIES.join(", ")
                ),
            ));
        }
    };
    if m.qk_norm != qk {
        return Err(unfit(
            family,
            format!("uses q/k norm {qk:?}, the model has {:?}", m.qk_norm),
        ));
    }
    let bias_ok = matches!(
        (family, m.attention_bias),
        (_, AttentionBias::None)
            | ("qwen2_moe", AttentionBias::Qkv)
            | ("qwen3_moe" | "olmoe", AttentionBias::All)
    );
    if !bias_ok {
        return Err(unfit(
            family,
            format!("cannot express attention biases {:?}", m.attention_bias),
        ));
    }
    let moe = &m.moe;
    if family == "qwen2_moe" {
        if moe.shared_experts == 0 || !moe.shared_gate {
            return Err(unfit(
                family,
                "always has one shared expert behind a sigmoid gate; the model needs \
                 shared_experts >= 1 and shared_gate = true",
            ));
        }
    } else if moe.shared_experts > 0 {
        return Err(unfit(family, "has no shared experts"));
    }
    if m.dense.is_some() && !family.starts_with("qwen") {
        return Err(unfit(family, "has no dense layers"));
    }
    c.insert("architectures".into(), json!([arch]));
    c.insert("model_type".into(), json!(family));
    c.insert("hidden_size".into(), json!(m.hidden));
    c.insert("num_hidden_layers".into(), json!(m.layers));
    c.insert("num_attention_heads".into(), json!(m.heads));
    c.insert("num_key_value_heads".into(), json!(m.kv_heads));
    c.insert("head_dim".into(), json!(m.head_dim));
    c.insert("num_experts_per_tok".into(), json!(moe.top_k));
    c.insert("vocab_size".into(), json!(m.vocab));
    c.insert("tie_word_embeddings".into(), json!(m.tie_embeddings));
    match family {
        "mixtral" => {
            c.insert("num_local_experts".into(), json!(moe.experts));
            c.insert("intermediate_size".into(), json!(moe.expert_ffn));
            c.insert("sliding_window".into(), serde_json::Value::Null);
        }
        "olmoe" => {
            c.insert("num_experts".into(), json!(moe.experts));
            c.insert("intermediate_size".into(), json!(moe.expert_ffn));
            c.insert(
                "attention_bias".into(),
                json!(m.attention_bias == AttentionBias::All),
            );
        }
        _ => {
            c.insert("num_experts".into(), json!(moe.experts));
            c.insert("moe_intermediate_size".into(), json!(moe.expert_ffn));
            c.insert("decoder_sparse_step".into(), json!(1));
            let only: Vec<u64> = m
                .dense
                .as_ref()
                .map(|d| d.layers.iter().map(|l| l - 1).collect())
                .unwrap_or_default();
            c.insert("mlp_only_layers".into(), json!(only));
            if let Some(d) = &m.dense {
                c.insert("intermediate_size".into(), json!(d.ffn));
            }
            c.insert("use_sliding_window".into(), json!(false));
            if family == "qwen2_moe" {
                // One gated shared expert of width s * f_s is, to the multiply-add, s
                // shared experts of width f_s behind one gate.
                c.insert(
                    "shared_expert_intermediate_size".into(),
                    json!(moe.shared_experts * moe.shared_ffn),
                );
                c.insert(
                    "qkv_bias".into(),
                    json!(m.attention_bias == AttentionBias::Qkv),
                );
            } else {
                c.insert(
                    "attention_bias".into(),
                    json!(m.attention_bias == AttentionBias::All),
                );
            }
        }
    }
    if let Some(l) = &m.looping {
        c.insert("smelt_loop_first_layer".into(), json!(l.first));
        c.insert("smelt_loop_span".into(), json!(l.span));
        c.insert("smelt_loop_repeats".into(), json!(l.repeats));
        c.insert(
            "smelt_loop_residual_scale".into(),
            json!(l.residual_scale()),
        );
    }
    Ok(serde_json::Value::Object(c))
}

/// [`export`], carrying over every other key of the Baseline's own `config.json` (RoPE base,
/// norm epsilon, activation, token ids, dtype, router options, ...) when it is of the same
/// family, so the looped model differs from its Baseline only where the match says. The keys
/// in [`SHAPE_KEYS`] always come from the matched model.
pub fn export_like(
    spec: &ModelSpec,
    family: &str,
    baseline: &serde_json::Value,
) -> Result<serde_json::Value> {
    let mut out = export(spec, family)?;
    let same_family = baseline.get("model_type").and_then(|t| t.as_str()) == Some(family);
    if let (true, Some(base), Some(map)) = (same_family, baseline.as_object(), out.as_object_mut())
    {
        for (k, v) in base {
            if !SHAPE_KEYS.contains(&k.as_str()) && !map.contains_key(k) {
                map.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(out)
}
