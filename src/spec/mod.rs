//! Model files: the architecture, the workload it is costed at, and what is counted.
//!
//! A model file is TOML with unknown keys denied, so a typo fails loudly:
//!
//! ```toml
//! name = "base-200m-s95"            # optional
//! [model]
//! layers = 12
//! hidden = 1280
//! heads = 16
//! kv_heads = 2
//! head_dim = 80
//! [model.moe]
//! experts = 192
//! top_k = 8
//! expert_ffn = 432
//! # shared_experts = 1, shared_ffn = 5632, shared_gate = true   # optional
//! # [model.dense]                    # optional: layers with a dense FFN instead
//! # layers = [1]                     # 1-based
//! # ffn = 5632
//! [model.loop]                       # optional: absent means not looped
//! first = 4                          # 1-based first looped layer
//! span = 6
//! repeats = 2
//! [workload]
//! context = 4096
//! mean_doc_len = 991                 # or doc_lengths = [[length, count], ...]
//! attention = "causal"               # or "dense"
//! kv_dtype_bytes = 2
//! ```
//!
//! [`ModelSpec::from_toml_str`] parses and validates; [`ModelSpec::validate`] checks a spec
//! built in code. Validation names the field and the rule it breaks, and bounds every size
//! (see the `MAX_*` constants) so that no count can silently wrap.

pub mod hf;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest accepted width (`hidden`, `head_dim`, `expert_ffn`, `shared_ffn`).
pub const MAX_WIDTH: u64 = 1 << 20;
/// Largest accepted count of layers, heads, shared experts or `top_k`.
pub const MAX_COUNT: u64 = 1 << 16;
/// Largest accepted number of routed experts per layer.
pub const MAX_EXPERTS: u64 = 1 << 20;
/// Largest accepted loop repeat count.
pub const MAX_REPEATS: u64 = 1 << 10;
/// Largest accepted vocabulary.
pub const MAX_VOCAB: u64 = 1 << 24;
/// Largest accepted context (and so document) length in tokens.
pub const MAX_CONTEXT: u64 = 1 << 24;
/// Largest accepted number of tokens described by a document-length histogram.
pub const MAX_HISTOGRAM_TOKENS: u64 = 1 << 50;

/// A model file: architecture, workload and counting options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Optional display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The architecture.
    pub model: Model,
    /// What the attention cost and KV cache are evaluated at.
    pub workload: Workload,
    /// What is counted beyond the non-embedding defaults.
    #[serde(default, skip_serializing_if = "Counting::is_default")]
    pub counting: Counting,
}

/// A decoder-only, pre-norm MoE Transformer: every layer is GQA attention followed by the
/// MoE FFN, or a dense SwiGLU FFN in the layers `dense` lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Physical layers `L`.
    pub layers: u64,
    /// Hidden size `H` (the residual stream width).
    pub hidden: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads; must divide `heads` (GQA).
    pub kv_heads: u64,
    /// Width of one head. The query width `heads * head_dim` need not equal `hidden`.
    pub head_dim: u64,
    /// Vocabulary size; only used when `[counting]` counts embeddings or the LM head.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vocab: u64,
    /// Whether the LM head shares the embedding matrix (counted once when both are counted).
    #[serde(default, skip_serializing_if = "is_false")]
    pub tie_embeddings: bool,
    /// RMSNorm on queries and keys: parameters only (norms cost no counted FLOPs).
    #[serde(default, skip_serializing_if = "QkNorm::is_none")]
    pub qk_norm: QkNorm,
    /// Biases on the attention projections: parameters only (bias adds cost no counted
    /// FLOPs).
    #[serde(default, skip_serializing_if = "AttentionBias::is_none")]
    pub attention_bias: AttentionBias,
    /// The Mixture-of-Experts FFN of every layer not listed in `dense`.
    pub moe: Moe,
    /// Layers whose FFN is one dense SwiGLU instead of the MoE (none when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense: Option<Dense>,
    /// The looped block, if any.
    #[serde(rename = "loop", default, skip_serializing_if = "Option::is_none")]
    pub looping: Option<Loop>,
}

/// The MoE FFN: routed SwiGLU experts, `top_k` active, plus optional shared experts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Moe {
    /// Routed experts per layer.
    pub experts: u64,
    /// Routed experts each token uses.
    pub top_k: u64,
    /// SwiGLU width of one routed expert (3 matrices of `hidden x expert_ffn`).
    pub expert_ffn: u64,
    /// Always-active shared experts per layer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_experts: u64,
    /// SwiGLU width of one shared expert.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_ffn: u64,
    /// A sigmoid gate on the shared experts' output (Qwen1.5/2-MoE): one `hidden x 1`
    /// linear per layer, `hidden` parameters and `2 * hidden` FLOPs per token.
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared_gate: bool,
}

/// Layers whose FFN is a dense SwiGLU of width `ffn` (3 matrices of `hidden x ffn`), with no
/// router, routed or shared experts: Qwen's `mlp_only_layers` and `decoder_sparse_step`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dense {
    /// 1-based indices of the dense layers, strictly increasing.
    pub layers: Vec<u64>,
    /// SwiGLU width of the dense FFN.
    pub ffn: u64,
}

/// A contiguous block of `span` layers starting at 1-based layer `first`, executed
/// `repeats` times back-to-back with shared weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Loop {
    /// 1-based index of the first looped layer.
    pub first: u64,
    /// Number of looped layers.
    pub span: u64,
    /// Executions of the block (1 = not looped).
    pub repeats: u64,
    /// Scale of each sub-layer residual update inside the block. No cost effect; part of
    /// the configuration a launcher builds. Default `1 / repeats` (SMELT's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual_scale: Option<f64>,
}

impl Loop {
    /// The residual scale in force: the explicit one, or `1 / repeats`.
    pub fn residual_scale(&self) -> f64 {
        self.residual_scale
            .unwrap_or_else(|| 1.0 / self.repeats.max(1) as f64)
    }

    /// Extra layer executions the loop adds: `(repeats - 1) * span`.
    pub fn extra_executions(&self) -> u64 {
        self.repeats.saturating_sub(1).saturating_mul(self.span)
    }
}

/// Query/key normalisation, as some families use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QkNorm {
    /// No q/k norm.
    #[default]
    None,
    /// One RMSNorm of width `head_dim` for queries and one for keys, shared across heads
    /// (Qwen3 style): `2 * head_dim` parameters per layer.
    PerHead,
    /// RMSNorm over the whole q and k projections (OLMoE style):
    /// `(heads + kv_heads) * head_dim` parameters per layer.
    Full,
}

impl QkNorm {
    fn is_none(&self) -> bool {
        *self == QkNorm::None
    }
}

/// Biases on the attention projections, as some families use them. A bias add costs no
/// counted FLOPs; its parameters are counted with the attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionBias {
    /// No biases.
    #[default]
    None,
    /// Biases on the Q, K and V projections, not O (Qwen1.5/2):
    /// `(heads + 2 * kv_heads) * head_dim` parameters per layer.
    Qkv,
    /// Biases on Q, K, V and O (`attention_bias = true` in Qwen3-MoE and OLMoE):
    /// `(heads + 2 * kv_heads) * head_dim + hidden` parameters per layer.
    All,
}

impl AttentionBias {
    fn is_none(&self) -> bool {
        *self == AttentionBias::None
    }
}

/// How many keys a query attends inside its document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    /// Causal: the `t`-th token of a document attends `t` keys (mean `(T+1)/2`).
    #[default]
    Causal,
    /// Dense: every token attends all `T` keys of its document (what most FLOP counters,
    /// e.g. PyTorch's `FlopCounterMode`, count for a masked attention).
    Dense,
}

impl Attention {
    /// `"causal"` or `"dense"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Attention::Causal => "causal",
            Attention::Dense => "dense",
        }
    }
}

/// The sequences a model is costed on: packed `context`-token sequences of documents, with
/// a document (segment) mask, so attention stays inside each document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Packed sequence length in tokens; no document may be longer.
    pub context: u64,
    /// Mean document length in tokens (the paper's shortcut). Exactly one of this and
    /// `doc_lengths` must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_doc_len: Option<u64>,
    /// A document-length histogram, `[[length, count], ...]`: costed exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_lengths: Option<Vec<[u64; 2]>>,
    /// Causal or dense attention inside a document.
    #[serde(default)]
    pub attention: Attention,
    /// Bytes per KV-cache element (2 for bf16).
    #[serde(default = "default_kv_bytes")]
    pub kv_dtype_bytes: u64,
}

/// What is counted in addition to the non-embedding defaults. Both default to `false`:
/// the brief's `N` and `F` exclude embeddings and the LM head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counting {
    /// Count the input embedding (`vocab * hidden` parameters; a lookup costs no FLOPs).
    #[serde(default)]
    pub embeddings: bool,
    /// Count the LM head (`vocab * hidden` parameters, `2 * hidden * vocab` forward FLOPs
    /// per token, once per token, not per layer execution).
    #[serde(default)]
    pub lm_head: bool,
}

impl Counting {
    fn is_default(&self) -> bool {
        *self == Counting::default()
    }
}

fn default_kv_bytes() -> u64 {
    2
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn positive(field: &str, value: u64, max: u64) -> Result<()> {
    if value == 0 {
        return Err(Error::invalid(field, "must be at least 1"));
    }
    at_most(field, value, max)
}

fn at_most(field: &str, value: u64, max: u64) -> Result<()> {
    if value > max {
        return Err(Error::invalid(
            field,
            format!("must be at most {max} (got {value}): absurdly large"),
        ));
    }
    Ok(())
}

impl Model {
    /// Layer executions per forward pass: `layers + (repeats - 1) * span`.
    pub fn executions(&self) -> u64 {
        self.layers
            .saturating_add(self.looping.as_ref().map_or(0, |l| l.extra_executions()))
    }

    /// Physical layers with a dense FFN.
    pub fn dense_layers(&self) -> u64 {
        self.dense.as_ref().map_or(0, |d| d.layers.len() as u64)
    }

    /// Executions of dense layers per forward pass (a looped dense layer counts each visit).
    pub fn dense_executions(&self) -> u64 {
        let Some(d) = &self.dense else { return 0 };
        let looped = self.looping.as_ref().map_or(0, |l| {
            let inside = d
                .layers
                .iter()
                .filter(|&&i| i >= l.first && i < l.first.saturating_add(l.span))
                .count() as u64;
            inside.saturating_mul(l.repeats.saturating_sub(1))
        });
        (d.layers.len() as u64).saturating_add(looped)
    }

    /// Query width `heads * head_dim`.
    pub fn q_width(&self) -> u64 {
        self.heads.saturating_mul(self.head_dim)
    }

    /// Key (= value) width `kv_heads * head_dim`.
    pub fn kv_width(&self) -> u64 {
        self.kv_heads.saturating_mul(self.head_dim)
    }

    /// The order in which physical layers (0-based) execute in one forward pass.
    pub fn execution_order(&self) -> Vec<u64> {
        let mut order = Vec::new();
        match &self.looping {
            None => order.extend(0..self.layers),
            Some(l) => {
                let start = l.first - 1;
                let end = start + l.span;
                order.extend(0..start);
                for _ in 0..l.repeats {
                    order.extend(start..end);
                }
                order.extend(end..self.layers);
            }
        }
        order
    }

    /// Checks every rule on the architecture; the error names the field and the rule.
    pub fn validate(&self) -> Result<()> {
        positive("model.layers", self.layers, MAX_COUNT)?;
        positive("model.hidden", self.hidden, MAX_WIDTH)?;
        positive("model.heads", self.heads, MAX_COUNT)?;
        positive("model.kv_heads", self.kv_heads, MAX_COUNT)?;
        positive("model.head_dim", self.head_dim, MAX_WIDTH)?;
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(Error::invalid(
                "model.kv_heads",
                format!(
                    "must divide model.heads ({}); got {}",
                    self.heads, self.kv_heads
                ),
            ));
        }
        at_most("model.vocab", self.vocab, MAX_VOCAB)?;
        let moe = &self.moe;
        positive("model.moe.experts", moe.experts, MAX_EXPERTS)?;
        positive("model.moe.top_k", moe.top_k, MAX_COUNT)?;
        positive("model.moe.expert_ffn", moe.expert_ffn, MAX_WIDTH)?;
        if moe.top_k > moe.experts {
            return Err(Error::invalid(
                "model.moe.top_k",
                format!(
                    "must not exceed model.moe.experts ({}); got {}",
                    moe.experts, moe.top_k
                ),
            ));
        }
        at_most("model.moe.shared_experts", moe.shared_experts, MAX_COUNT)?;
        at_most("model.moe.shared_ffn", moe.shared_ffn, MAX_WIDTH)?;
        if (moe.shared_experts == 0) != (moe.shared_ffn == 0) {
            return Err(Error::invalid(
                "model.moe.shared_ffn",
                format!(
                    "must be positive exactly when model.moe.shared_experts is (shared_experts = {}, shared_ffn = {})",
                    moe.shared_experts, moe.shared_ffn
                ),
            ));
        }
        if moe.shared_gate && moe.shared_experts == 0 {
            return Err(Error::invalid(
                "model.moe.shared_gate",
                "gates the shared experts, so model.moe.shared_experts must be at least 1",
            ));
        }
        if let Some(d) = &self.dense {
            positive("model.dense.ffn", d.ffn, MAX_WIDTH)?;
            if d.layers.is_empty() {
                return Err(Error::invalid(
                    "model.dense.layers",
                    "must list at least one 1-based layer (omit [model.dense] for none)",
                ));
            }
            for (i, &layer) in d.layers.iter().enumerate() {
                if layer == 0 || layer > self.layers {
                    return Err(Error::invalid(
                        format!("model.dense.layers[{i}]"),
                        format!(
                            "must be a 1-based layer between 1 and model.layers ({}); got {layer}",
                            self.layers
                        ),
                    ));
                }
                if i > 0 && layer <= d.layers[i - 1] {
                    return Err(Error::invalid(
                        format!("model.dense.layers[{i}]"),
                        format!(
                            "must be strictly increasing; {layer} follows {}",
                            d.layers[i - 1]
                        ),
                    ));
                }
            }
        }
        if let Some(l) = &self.looping {
            positive("model.loop.first", l.first, MAX_COUNT)?;
            positive("model.loop.span", l.span, MAX_COUNT)?;
            positive("model.loop.repeats", l.repeats, MAX_REPEATS)?;
            let last = l.first + l.span - 1;
            if last > self.layers {
                return Err(Error::invalid(
                    "model.loop",
                    format!(
                        "the loop (layers {}..={last}) reaches past the last layer ({})",
                        l.first, self.layers
                    ),
                ));
            }
            if let Some(s) = l.residual_scale
                && !(s.is_finite() && s > 0.0)
            {
                return Err(Error::invalid(
                    "model.loop.residual_scale",
                    format!("must be a positive finite number (got {s})"),
                ));
            }
        }
        Ok(())
    }
}

impl Workload {
    /// Checks every rule on the workload; the error names the field and the rule.
    pub fn validate(&self) -> Result<()> {
        positive("workload.context", self.context, MAX_CONTEXT)?;
        if !(1..=16).contains(&self.kv_dtype_bytes) {
            return Err(Error::invalid(
                "workload.kv_dtype_bytes",
                format!("must be between 1 and 16 (got {})", self.kv_dtype_bytes),
            ));
        }
        match (&self.mean_doc_len, &self.doc_lengths) {
            (Some(_), Some(_)) => Err(Error::invalid(
                "workload",
                "give either mean_doc_len or doc_lengths, not both",
            )),
            (None, None) => Err(Error::invalid(
                "workload",
                "give mean_doc_len (tokens) or doc_lengths ([[length, count], ...])",
            )),
            (Some(t), None) => {
                if *t == 0 {
                    return Err(Error::invalid(
                        "workload.mean_doc_len",
                        "must be at least 1",
                    ));
                }
                if *t > self.context {
                    return Err(Error::invalid(
                        "workload.mean_doc_len",
                        format!(
                            "must not exceed workload.context ({}); got {t}",
                            self.context
                        ),
                    ));
                }
                Ok(())
            }
            (None, Some(hist)) => {
                if hist.is_empty() {
                    return Err(Error::invalid(
                        "workload.doc_lengths",
                        "must list at least one [length, count] pair",
                    ));
                }
                let mut tokens: u64 = 0;
                for (i, &[len, count]) in hist.iter().enumerate() {
                    let field = format!("workload.doc_lengths[{i}]");
                    if len == 0 {
                        return Err(Error::invalid(field, "length must be at least 1"));
                    }
                    if len > self.context {
                        return Err(Error::invalid(
                            field,
                            format!("length {len} exceeds workload.context ({})", self.context),
                        ));
                    }
                    if count == 0 {
                        return Err(Error::invalid(field, "count must be at least 1"));
                    }
                    tokens = len
                        .checked_mul(count)
                        .and_then(|t| tokens.checked_add(t))
                        .filter(|&t| t <= MAX_HISTOGRAM_TOKENS)
                        .ok_or_else(|| {
                            Error::invalid(
                                "workload.doc_lengths",
                                format!(
                                    "describes more than {MAX_HISTOGRAM_TOKENS} tokens: absurdly large"
                                ),
                            )
                        })?;
                }
                Ok(())
            }
        }
    }
}

impl ModelSpec {
    /// Checks every rule on the spec.
    pub fn validate(&self) -> Result<()> {
        self.model.validate()?;
        self.workload.validate()?;
        if (self.counting.embeddings || self.counting.lm_head) && self.model.vocab == 0 {
            return Err(Error::invalid(
                "model.vocab",
                "must be positive when [counting] counts embeddings or the LM head",
            ));
        }
        Ok(())
    }

    /// Parses and validates a model file's text.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let spec: ModelSpec = toml::from_str(text).map_err(|e| Error::Parse {
            message: e.to_string(),
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// Parses and validates a model spec given as JSON (the model file's structure).
    pub fn from_json_str(text: &str) -> Result<Self> {
        let spec: ModelSpec = serde_json::from_str(text).map_err(|e| Error::Parse {
            message: format!("JSON: {e}"),
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// The workload an imported `config.json` is costed at unless told otherwise: 4096-token
    /// packed sequences, causal attention at a mean document length of 991 tokens, bf16 KV.
    pub fn default_workload() -> Workload {
        Workload {
            context: 4096,
            mean_doc_len: Some(991),
            doc_lengths: None,
            attention: Attention::Causal,
            kv_dtype_bytes: 2,
        }
    }

    /// Reads, parses and validates a model file; a `.json` file is imported as a Hugging
    /// Face `config.json` ([`hf`]) at [`ModelSpec::default_workload`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
            path: path.display().to_string(),
            error,
        })?;
        if path.extension().is_some_and(|e| e == "json") {
            return hf::import(&text, Self::default_workload());
        }
        Self::from_toml_str(&text)
    }

    /// The spec as a model file (TOML), which [`ModelSpec::from_toml_str`] reads back.
    pub fn to_toml_string(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::Parse {
            message: format!("serialising the model file: {e}"),
        })
    }

    /// The fully-activated control of brief §3: same shapes, not looped, `experts = top_k`.
    pub fn control(&self) -> ModelSpec {
        let mut c = self.clone();
        c.name = Some(format!(
            "control of {}",
            self.name.as_deref().unwrap_or("model")
        ));
        c.model.looping = None;
        c.model.moe.experts = c.model.moe.top_k;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const BASE_200M: &str = r#"
name = "base-200m-s95"
[model]
layers = 12
hidden = 1280
heads = 16
kv_heads = 2
head_dim = 80
[model.moe]
experts = 192
top_k = 8
expert_ffn = 432
[workload]
context = 4096
mean_doc_len = 991
"#;

    #[test]
    fn parses_and_round_trips() {
        let spec = ModelSpec::from_toml_str(BASE_200M).unwrap();
        assert_eq!(spec.workload.attention, Attention::Causal);
        assert_eq!(spec.workload.kv_dtype_bytes, 2);
        let text = spec.to_toml_string().unwrap();
        assert_eq!(ModelSpec::from_toml_str(&text).unwrap(), spec);
    }

    #[test]
    fn execution_order_repeats_the_block() {
        let mut spec = ModelSpec::from_toml_str(BASE_200M).unwrap();
        spec.model.layers = 5;
        spec.model.looping = Some(Loop {
            first: 2,
            span: 2,
            repeats: 3,
            residual_scale: None,
        });
        assert_eq!(
            spec.model.execution_order(),
            vec![0, 1, 2, 1, 2, 1, 2, 3, 4]
        );
        assert_eq!(spec.model.executions(), 9);
    }
}
