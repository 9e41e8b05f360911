//! Import of Hugging Face `config.json` files into a [`ModelSpec`].
//!
//! Keys keep their Hugging Face names and unknown keys are ignored (these files are other
//! tools' formats). Supported families, with exactly what smelt's cost model describes:
//!
//! | `model_type` | experts | expert width | head width | q/k norm |
//! |---|---|---|---|---|
//! | `mixtral` | `num_local_experts` | `intermediate_size` | `hidden_size / num_attention_heads` | none |
//! | `qwen3_moe` | `num_experts` | `moe_intermediate_size` | `head_dim` | per head (`2·head_dim`) |
//! | `olmoe` | `num_experts` | `intermediate_size` | `hidden_size / num_attention_heads` | whole projection |
//!
//! The import counts the embedding and the LM head (`[counting]`, with `vocab_size` and
//! `tie_word_embeddings`), as model cards do. A config that uses something the cost model
//! does not describe is refused with the reason, never approximated: sliding-window
//! attention, multi-head latent attention (DeepSeek's MLA), q/k/v biases and shared experts
//! with a gate (Qwen1.5/2-MoE), dense layers mixed with MoE layers (`decoder_sparse_step`,
//! `mlp_only_layers`), and any other `model_type`.
//!
//! [`export`] writes a (matched, looped) spec back in a family's style, with the loop in
//! clearly named extra keys that [`import`] reads back.

use serde::Deserialize;

use super::{Counting, Model, ModelSpec, Moe, QkNorm, Workload};
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
    /// Biases on the attention projections.
    pub attention_bias: Option<bool>,
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

impl HfConfig {
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
            "mixtral" | "qwen3_moe" | "olmoe" => {}
            "qwen2_moe" => {
                return Err(refuse(
                    "model_type",
                    "qwen2_moe uses q/k/v biases and a shared expert behind a sigmoid gate, \
                     which smelt's cost model does not describe yet",
                ));
            }
            "" => {
                return Err(Error::invalid(
                    "config.json: model_type",
                    "missing; supported: mixtral, qwen3_moe, olmoe",
                ));
            }
            other => {
                return Err(Error::invalid(
                    "config.json: model_type",
                    format!(
                        "'{other}' is not a family smelt imports; supported: mixtral, qwen3_moe, olmoe"
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
        if self.decoder_sparse_step.is_some_and(|s| s != 1)
            || self.mlp_only_layers.as_ref().is_some_and(|l| !l.is_empty())
        {
            return Err(refuse(
                "mlp_only_layers",
                "dense layers mixed with MoE layers are not in smelt's cost model yet",
            ));
        }
        if self.attention_bias == Some(true) {
            return Err(refuse(
                "attention_bias",
                "attention biases are not in smelt's cost model yet",
            ));
        }
        if self.shared_expert_intermediate_size.is_some_and(|w| w > 0) {
            return Err(refuse(
                "shared_expert_intermediate_size",
                "a gated shared expert is not in smelt's cost model yet",
            ));
        }
        let (experts, ffn, head_dim, qk_norm) = match family {
            "mixtral" => (
                need(self.num_local_experts, "num_local_experts", family)?,
                need(self.intermediate_size, "intermediate_size", family)?,
                head_width(self, family)?,
                QkNorm::None,
            ),
            "qwen3_moe" => (
                need(self.num_experts, "num_experts", family)?,
                need(self.moe_intermediate_size, "moe_intermediate_size", family)?,
                match self.head_dim {
                    Some(d) => d,
                    None => head_width(self, family)?,
                },
                QkNorm::PerHead,
            ),
            _ => (
                need(self.num_experts, "num_experts", family)?,
                need(self.intermediate_size, "intermediate_size", family)?,
                head_width(self, family)?,
                QkNorm::Full,
            ),
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
                layers: need(self.num_hidden_layers, "num_hidden_layers", family)?,
                hidden: need(self.hidden_size, "hidden_size", family)?,
                heads,
                kv_heads: self.num_key_value_heads.unwrap_or(heads),
                head_dim,
                vocab: need(self.vocab_size, "vocab_size", family)?,
                tie_embeddings: self.tie_word_embeddings.unwrap_or(false),
                qk_norm,
                moe: Moe {
                    experts,
                    top_k: need(self.num_experts_per_tok, "num_experts_per_tok", family)?,
                    expert_ffn: ffn,
                    shared_experts: 0,
                    shared_ffn: 0,
                },
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
/// `olmoe` with q/k norm over the whole projection, `mixtral` without.
pub fn family_of(spec: &ModelSpec) -> &'static str {
    match spec.model.qk_norm {
        QkNorm::PerHead => "qwen3_moe",
        QkNorm::Full => "olmoe",
        QkNorm::None => "mixtral",
    }
}

/// A spec as a `config.json` in the style of `family` (`mixtral`, `qwen3_moe` or `olmoe`):
/// the keys [`import`] reads, with the loop, if any, in the extra keys
/// `smelt_loop_first_layer` (1-based), `smelt_loop_span`, `smelt_loop_repeats` and
/// `smelt_loop_residual_scale`, so a launcher can build it and `import` reads it back.
pub fn export(spec: &ModelSpec, family: &str) -> Result<serde_json::Value> {
    use serde_json::json;
    spec.validate()?;
    let m = &spec.model;
    let natural = m.hidden.is_multiple_of(m.heads) && m.hidden / m.heads == m.head_dim;
    let mut c = serde_json::Map::new();
    let (arch, qk) = match family {
        "mixtral" => ("MixtralForCausalLM", QkNorm::None),
        "qwen3_moe" => ("Qwen3MoeForCausalLM", QkNorm::PerHead),
        "olmoe" => ("OlmoeForCausalLM", QkNorm::Full),
        other => {
            return Err(Error::invalid(
                "family",
                format!("'{other}' is not one smelt exports; supported: mixtral, qwen3_moe, olmoe"),
            ));
        }
    };
    if m.qk_norm != qk {
        return Err(Error::invalid(
            "family",
            format!(
                "{family} uses q/k norm {qk:?}, the model has {:?}",
                m.qk_norm
            ),
        ));
    }
    if family != "qwen3_moe" && !natural {
        return Err(Error::invalid(
            "family",
            format!(
                "{family} has no head_dim key: it needs head_dim = hidden / heads ({} / {}), got {}",
                m.hidden, m.heads, m.head_dim
            ),
        ));
    }
    if m.moe.shared_experts > 0 {
        return Err(Error::invalid(
            "family",
            format!("{family} has no shared experts"),
        ));
    }
    c.insert("architectures".into(), json!([arch]));
    c.insert("model_type".into(), json!(family));
    c.insert("hidden_size".into(), json!(m.hidden));
    c.insert("num_hidden_layers".into(), json!(m.layers));
    c.insert("num_attention_heads".into(), json!(m.heads));
    c.insert("num_key_value_heads".into(), json!(m.kv_heads));
    c.insert("num_experts_per_tok".into(), json!(m.moe.top_k));
    c.insert("vocab_size".into(), json!(m.vocab));
    c.insert("tie_word_embeddings".into(), json!(m.tie_embeddings));
    match family {
        "mixtral" => {
            c.insert("num_local_experts".into(), json!(m.moe.experts));
            c.insert("intermediate_size".into(), json!(m.moe.expert_ffn));
            c.insert("sliding_window".into(), serde_json::Value::Null);
        }
        "qwen3_moe" => {
            c.insert("num_experts".into(), json!(m.moe.experts));
            c.insert("moe_intermediate_size".into(), json!(m.moe.expert_ffn));
            c.insert("head_dim".into(), json!(m.head_dim));
            c.insert("decoder_sparse_step".into(), json!(1));
            c.insert("mlp_only_layers".into(), json!([]));
            c.insert("use_sliding_window".into(), json!(false));
            c.insert("attention_bias".into(), json!(false));
        }
        _ => {
            c.insert("num_experts".into(), json!(m.moe.experts));
            c.insert("intermediate_size".into(), json!(m.moe.expert_ffn));
            c.insert("attention_bias".into(), json!(false));
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
