//! Hugging Face `config.json` files: import into a [`ModelSpec`], export back.
//!
//! Keys keep their Hugging Face names and unknown keys are ignored (these files are other
//! tools' formats). Each family has its own typed config, read the way its Transformers
//! modeling code reads it (as candle-transformers keeps one config per model):
//!
//! | `model_type` | experts (width) | head width | q/k norm | attention biases | shared expert | dense layers |
//! |---|---|---|---|---|---|---|
//! | `mixtral` | `num_local_experts` (`intermediate_size`) | `head_dim`, else `hidden_size / num_attention_heads` | none | none | none | none |
//! | `qwen2_moe` | `num_experts` (`moe_intermediate_size`) | `head_dim`, else `hidden_size / num_attention_heads` | none | Q, K, V (`qkv_bias`, default true) | one of `shared_expert_intermediate_size`, sigmoid gate | Qwen rule |
//! | `qwen3_moe` | `num_experts` or `num_local_experts` (`moe_intermediate_size`) | `head_dim`, else `hidden_size / num_attention_heads` | per head (`2·head_dim`) | Q, K, V, O if `attention_bias` | none | Qwen rule |
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
//! attention where the family's code applies it (Mixtral whenever `sliding_window` is set;
//! Qwen only with `use_sliding_window = true`), multi-head latent attention (DeepSeek's
//! MLA), and any other `model_type`.
//!
//! [`export`] writes a (matched, looped) spec back in a family's style — exactly the keys
//! that family reads — with the loop in clearly named extra keys that [`import`] reads back.

mod mixtral;
mod olmoe;
mod qwen;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{AttentionBias, Counting, Dense, Loop, Model, ModelSpec, Moe, QkNorm, Workload};
use crate::error::{Error, Result};
use crate::names::{Named, named_enum};

named_enum! {
    /// A Hugging Face model family (`model_type`) smelt reads and writes.
    pub enum Family: "model_type" {
        /// Mixtral (Mistral AI).
        Mixtral = "mixtral",
        /// Qwen1.5-MoE and Qwen2-MoE.
        Qwen2Moe = "qwen2_moe",
        /// Qwen3-MoE.
        Qwen3Moe = "qwen3_moe",
        /// OLMoE (AllenAI).
        Olmoe = "olmoe",
    }
}

impl Family {
    /// The Transformers class an exported config names in `architectures`.
    pub fn architecture(self) -> &'static str {
        match self {
            Family::Mixtral => "MixtralForCausalLM",
            Family::Qwen2Moe => "Qwen2MoeForCausalLM",
            Family::Qwen3Moe => "Qwen3MoeForCausalLM",
            Family::Olmoe => "OlmoeForCausalLM",
        }
    }

    /// Every key smelt reads for this family (and writes on export, with the
    /// `smelt_loop_*` keys when the model loops).
    pub fn keys(self) -> Vec<&'static str> {
        let mut keys = field_names::<Common>();
        keys.extend(match self {
            Family::Mixtral => field_names::<mixtral::Config>(),
            Family::Qwen2Moe => field_names::<qwen::Qwen2Moe>(),
            Family::Qwen3Moe => field_names::<qwen::Qwen3Moe>(),
            Family::Olmoe => field_names::<olmoe::Config>(),
        });
        if matches!(self, Family::Qwen2Moe | Family::Qwen3Moe) {
            keys.extend(field_names::<qwen::Qwen>());
            keys.extend(qwen::WINDOW_KEYS);
        }
        keys.extend(match self {
            Family::Qwen3Moe => qwen::Qwen3Moe::ALIASES,
            _ => &[],
        });
        keys
    }
}

/// The field names a `Deserialize` struct asks for (serde hands them to
/// `deserialize_struct`), so each family's key list is its struct, never a copy of it.
fn field_names<T: DeserializeOwned>() -> Vec<&'static str> {
    use serde::de::{self, Visitor};
    struct Names<'a>(&'a mut &'static [&'static str]);
    impl<'de> de::Deserializer<'de> for Names<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("names only"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Names(&mut fields));
    fields.to_vec()
}

/// Reads a typed config out of a parsed `config.json`; an error names the key.
fn read<T: DeserializeOwned>(value: &Value) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = match e.path().to_string() {
            p if p == "." || p.is_empty() => "config.json".to_owned(),
            p => format!("config.json: {p}"),
        };
        Error::invalid(field, e.into_inner().to_string())
    })
}

fn yes() -> bool {
    true
}

/// The keys every family shares.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct Common {
    model_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    architectures: Option<Vec<String>>,
    hidden_size: u64,
    num_hidden_layers: u64,
    num_attention_heads: u64,
    #[serde(default)]
    num_key_value_heads: Option<u64>,
    #[serde(default)]
    head_dim: Option<u64>,
    num_experts_per_tok: u64,
    vocab_size: u64,
    #[serde(default)]
    tie_word_embeddings: bool,
    /// Not used for costing (the workload's context is); written on export as the context
    /// the model was matched at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_position_embeddings: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    smelt_loop_first_layer: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    smelt_loop_span: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    smelt_loop_repeats: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    smelt_loop_residual_scale: Option<f64>,
}

/// What a family adds to the common keys.
struct Parts {
    experts: u64,
    expert_ffn: u64,
    qk_norm: QkNorm,
    attention_bias: AttentionBias,
    shared: Option<u64>,
    dense: Option<Dense>,
}

impl Common {
    fn of(spec: &ModelSpec, family: Family) -> Self {
        let m = &spec.model;
        let l = m.looping.as_ref();
        Self {
            model_type: family.as_str().to_owned(),
            architectures: Some(vec![family.architecture().to_owned()]),
            hidden_size: m.hidden,
            num_hidden_layers: m.layers,
            num_attention_heads: m.heads,
            num_key_value_heads: Some(m.kv_heads),
            head_dim: Some(m.head_dim),
            num_experts_per_tok: m.moe.top_k,
            vocab_size: m.vocab,
            tie_word_embeddings: m.tie_embeddings,
            max_position_embeddings: Some(spec.workload.context),
            smelt_loop_first_layer: l.map(|l| l.first),
            smelt_loop_span: l.map(|l| l.span),
            smelt_loop_repeats: l.map(|l| l.repeats),
            smelt_loop_residual_scale: l.map(Loop::residual_scale),
        }
    }

    /// `head_dim` when the config gives it, else `hidden_size / num_attention_heads`, as
    /// Transformers' attention modules read it.
    fn head_dim(&self) -> Result<u64> {
        if let Some(d) = self.head_dim {
            return Ok(d);
        }
        let (h, heads) = (self.hidden_size, self.num_attention_heads);
        if heads == 0 || !h.is_multiple_of(heads) {
            return Err(Error::invalid(
                "config.json: num_attention_heads",
                format!("must divide hidden_size ({h}) when head_dim is not given; got {heads}"),
            ));
        }
        Ok(h / heads)
    }

    fn looping(&self) -> Result<Option<Loop>> {
        match (
            self.smelt_loop_first_layer,
            self.smelt_loop_span,
            self.smelt_loop_repeats,
        ) {
            (None, None, None) => Ok(None),
            (Some(first), Some(span), Some(repeats)) => Ok(Some(Loop {
                first,
                span,
                repeats,
                residual_scale: self.smelt_loop_residual_scale,
            })),
            _ => Err(Error::invalid(
                "config.json: smelt_loop_*",
                "give smelt_loop_first_layer, smelt_loop_span and smelt_loop_repeats together",
            )),
        }
    }

    fn model(&self, parts: Parts) -> Result<Model> {
        let (shared_experts, shared_ffn, shared_gate) = match parts.shared {
            Some(w) => (1, w, true),
            None => (0, 0, false),
        };
        Ok(Model {
            layers: self.num_hidden_layers,
            hidden: self.hidden_size,
            heads: self.num_attention_heads,
            kv_heads: self.num_key_value_heads.unwrap_or(self.num_attention_heads),
            head_dim: self.head_dim()?,
            vocab: self.vocab_size,
            tie_embeddings: self.tie_word_embeddings,
            qk_norm: parts.qk_norm,
            attention_bias: parts.attention_bias,
            moe: Moe {
                experts: parts.experts,
                top_k: self.num_experts_per_tok,
                expert_ffn: parts.expert_ffn,
                shared_experts,
                shared_ffn,
                shared_gate,
            },
            dense: parts.dense,
            looping: self.looping()?,
        })
    }
}

/// A refusal: the config uses what the cost model does not describe.
fn refuse(key: &str, why: impl Into<String>) -> Error {
    Error::invalid(
        format!("config.json: {key}"),
        format!("{}; smelt refuses rather than approximates", why.into()),
    )
}

/// What a family's modeling code builds, for the export's refusals.
struct Support {
    /// Its q/k norm.
    qk_norm: QkNorm,
    /// The attention biases it can have.
    biases: &'static [AttentionBias],
    /// Whether it has one gated shared expert (always), or none.
    gated_shared_expert: bool,
    /// Whether it can mix dense layers with MoE layers.
    dense: bool,
}

impl Support {
    const fn new(
        qk_norm: QkNorm,
        biases: &'static [AttentionBias],
        gated_shared_expert: bool,
        dense: bool,
    ) -> Self {
        Self {
            qk_norm,
            biases,
            gated_shared_expert,
            dense,
        }
    }

    /// Refuses a model the family cannot express, naming what differs.
    fn check(&self, m: &Model, family: Family) -> Result<()> {
        let unfit = |why: String| Err(Error::invalid("family", format!("{family}: {why}")));
        if m.qk_norm != self.qk_norm {
            return unfit(format!(
                "has q/k norm {:?}; the model has q/k norm {:?}",
                self.qk_norm, m.qk_norm
            ));
        }
        if !self.biases.contains(&m.attention_bias) {
            return unfit(format!(
                "cannot express attention biases {:?} (it has {:?})",
                m.attention_bias, self.biases
            ));
        }
        let gated = m.moe.shared_experts > 0 && m.moe.shared_gate;
        if self.gated_shared_expert && !gated {
            return unfit(
                "always has one shared expert behind a sigmoid gate; the model needs \
                 shared_experts >= 1 and shared_gate = true"
                    .to_owned(),
            );
        }
        if !self.gated_shared_expert && m.moe.shared_experts > 0 {
            return unfit("has no shared experts".to_owned());
        }
        if !self.dense && m.dense.is_some() {
            return unfit("has no dense layers".to_owned());
        }
        Ok(())
    }
}

/// The model's field names as the family's config keys, so an invalid imported config is
/// reported in the file's own words.
fn in_config_words(e: Error, family: Family) -> Error {
    let Error::InvalidSpec { field, rule } = e else {
        return e;
    };
    let (experts, ffn) = match family {
        Family::Mixtral => ("num_local_experts", "intermediate_size"),
        Family::Olmoe => ("num_experts", "intermediate_size"),
        Family::Qwen2Moe | Family::Qwen3Moe => ("num_experts", "moe_intermediate_size"),
    };
    let words = [
        ("model.moe.shared_ffn", "shared_expert_intermediate_size"),
        ("model.moe.expert_ffn", ffn),
        ("model.moe.experts", experts),
        ("model.moe.top_k", "num_experts_per_tok"),
        ("model.kv_heads", "num_key_value_heads"),
        ("model.heads", "num_attention_heads"),
        ("model.head_dim", "head_dim"),
        ("model.hidden", "hidden_size"),
        ("model.layers", "num_hidden_layers"),
        ("model.vocab", "vocab_size"),
        ("model.dense.ffn", "intermediate_size"),
        ("model.loop.first", "smelt_loop_first_layer"),
        ("model.loop.span", "smelt_loop_span"),
        ("model.loop.repeats", "smelt_loop_repeats"),
        ("model.loop.residual_scale", "smelt_loop_residual_scale"),
        ("model.loop", "smelt_loop_*"),
    ];
    let translate = |s: &str| {
        words.iter().fold(s.to_owned(), |acc, (ours, theirs)| {
            acc.replace(ours, theirs)
        })
    };
    Error::InvalidSpec {
        field: format!("config.json: {}", translate(&field)),
        rule: translate(&rule),
    }
}

/// Imports `config.json` text, costed at `workload`.
pub fn import(text: &str, workload: Workload) -> Result<ModelSpec> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| Error::parse(format!("config.json: {e}")))?;
    import_value(&value, workload)
}

/// Imports a parsed `config.json`, costed at `workload`.
pub fn import_value(value: &Value, workload: Workload) -> Result<ModelSpec> {
    let Some(map) = value.as_object() else {
        return Err(Error::invalid(
            "config.json",
            format!(
                "expected an object with the model's keys (got {})",
                kind_of(value)
            ),
        ));
    };
    let family_name = map.get("model_type").and_then(Value::as_str).unwrap_or("");
    if map.contains_key("kv_lora_rank") || family_name.starts_with("deepseek") {
        return Err(refuse(
            "kv_lora_rank",
            "multi-head latent attention (DeepSeek's MLA) compresses keys and values into a \
             latent; smelt's cost model only describes GQA",
        ));
    }
    let family = match map.get("model_type") {
        None => {
            return Err(Error::invalid(
                "config.json: model_type",
                format!("missing; supported: {}", Family::names()),
            ));
        }
        Some(Value::String(s)) => s.parse::<Family>().map_err(|_| {
            Error::invalid(
                "config.json: model_type",
                format!(
                    "'{s}' is not a family smelt imports; supported: {}",
                    Family::names()
                ),
            )
        })?,
        Some(other) => {
            return Err(Error::invalid(
                "config.json: model_type",
                format!("must be a string (got {})", kind_of(other)),
            ));
        }
    };
    refuse_windows(family, map)?;
    let common: Common = read(value)?;
    // Bound the loop counts before any config value is iterated over.
    super::validate::positive("model.layers", common.num_hidden_layers, super::MAX_COUNT)
        .map_err(|e| in_config_words(e, family))?;
    let parts = match family {
        Family::Mixtral => read::<mixtral::Config>(value)?.parts(&common),
        Family::Qwen2Moe => read::<qwen::Qwen2Moe>(value)?.parts(&common, &read(value)?),
        Family::Qwen3Moe => read::<qwen::Qwen3Moe>(value)?.parts(&common, &read(value)?),
        Family::Olmoe => read::<olmoe::Config>(value)?.parts(&common),
    }?;
    let spec = ModelSpec {
        name: Some(
            common
                .architectures
                .as_ref()
                .and_then(|a| a.first().cloned())
                .unwrap_or_else(|| family.as_str().to_owned()),
        ),
        model: common.model(parts)?,
        workload,
        counting: Counting {
            embeddings: true,
            lm_head: true,
        },
    };
    spec.validate().map_err(|e| match e {
        Error::InvalidSpec { field, rule } if field == "name" => {
            Error::invalid("config.json: architectures[0]", rule)
        }
        e => in_config_words(e, family),
    })?;
    Ok(spec)
}

/// Refuses the sliding windows a family's Transformers code applies: Mixtral's whenever
/// `sliding_window` is set (it has no `use_sliding_window` switch), Qwen's only with
/// `use_sliding_window = true` (its default is false). Checked before anything else is read.
fn refuse_windows(family: Family, map: &Map<String, Value>) -> Result<()> {
    let window = map.get("sliding_window").filter(|v| !v.is_null());
    let switch = map.get("use_sliding_window").and_then(Value::as_bool);
    let on = match family {
        Family::Mixtral => window.is_some(),
        Family::Qwen2Moe | Family::Qwen3Moe => window.is_some() && switch == Some(true),
        Family::Olmoe => false,
    };
    match (on, window) {
        (true, Some(w)) => Err(refuse(
            "sliding_window",
            format!(
                "{family} attends a window of {w} keys here; that bounds the keys a query \
                 attends and the KV cache"
            ),
        )),
        _ => Ok(()),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The family whose conventions a spec follows: `qwen3_moe` with per-head q/k norm,
/// `olmoe` with q/k norm over the whole projection, `qwen2_moe` with a gated shared
/// expert, Q/K/V biases or dense layers, `mixtral` otherwise.
pub fn family_of(spec: &ModelSpec) -> Family {
    let m = &spec.model;
    match m.qk_norm {
        QkNorm::PerHead => Family::Qwen3Moe,
        QkNorm::Full => Family::Olmoe,
        QkNorm::None
            if m.moe.shared_gate || m.attention_bias == AttentionBias::Qkv || m.dense.is_some() =>
        {
            Family::Qwen2Moe
        }
        QkNorm::None => Family::Mixtral,
    }
}

fn object(value: impl Serialize) -> Result<Map<String, Value>> {
    match serde_json::to_value(value).map_err(|e| Error::serialize("config.json", e))? {
        Value::Object(m) => Ok(m),
        _ => Err(Error::serialize("config.json", "a config is not an object")),
    }
}

/// A spec as a `config.json` of `family`: exactly the keys that family reads, with the
/// loop, if any, in the extra keys `smelt_loop_first_layer` (1-based), `smelt_loop_span`,
/// `smelt_loop_repeats` and `smelt_loop_residual_scale`, so a launcher can build it and
/// [`import`] reads it back. `head_dim` is always written: a matched model's
/// `heads * head_dim` need not equal `hidden_size`, and Transformers' current attention
/// modules read `head_dim` from the config (older releases derived it as
/// `hidden_size / num_attention_heads`; build such a model with a release that reads it). A
/// model the family cannot express is refused with the reason.
pub fn export(spec: &ModelSpec, family: Family) -> Result<Value> {
    spec.validate()?;
    let m = &spec.model;
    if m.vocab == 0 {
        return Err(Error::invalid(
            "model.vocab",
            "is 0: the config would say vocab_size = 0 and a launcher could not build the \
             model; give the vocabulary (smelt match --vocab N)",
        ));
    }
    let mut out = object(Common::of(spec, family))?;
    out.extend(match family {
        Family::Mixtral => object(mixtral::Config::of(m)?)?,
        Family::Qwen2Moe => object(qwen::Qwen2Moe::of(m)?)?,
        Family::Qwen3Moe => object(qwen::Qwen3Moe::of(m)?)?,
        Family::Olmoe => object(olmoe::Config::of(m)?)?,
    });
    if matches!(family, Family::Qwen2Moe | Family::Qwen3Moe) {
        out.extend(object(qwen::Qwen::of(m))?);
    }
    Ok(Value::Object(out))
}

/// [`export`], carrying over every other key of the Baseline's own `config.json` (RoPE base,
/// norm epsilon, activation, token ids, dtype, router options, ...) when it is of the same
/// family, so the looped model differs from its Baseline only where the match says. The
/// keys the family reads ([`Family::keys`]) always come from the matched model, except
/// `max_position_embeddings`, which keeps the Baseline's value when that is larger than the
/// context the match was costed at.
pub fn export_like(spec: &ModelSpec, family: Family, baseline: &Value) -> Result<Value> {
    let mut out = export(spec, family)?;
    let same_family = baseline.get("model_type").and_then(Value::as_str) == Some(family.as_str());
    let read = family.keys();
    if let (true, Some(base), Some(map)) = (same_family, baseline.as_object(), out.as_object_mut())
    {
        for (k, v) in base {
            if !read.contains(&k.as_str()) && !map.contains_key(k) {
                map.insert(k.clone(), v.clone());
            }
        }
        // Keep the Baseline's position capacity when it exceeds the matched context.
        let key = "max_position_embeddings";
        if let (Some(b), Some(c)) = (
            base.get(key).and_then(Value::as_u64),
            map.get(key).and_then(Value::as_u64),
        ) && b > c
        {
            map.insert(key.to_owned(), Value::from(b));
        }
    }
    Ok(out)
}

/// Qwen's dense layers of a `layers`-layer model: 0-based layer `i` is MoE when it is not in
/// `mlp_only_layers` and `(i + 1) % decoder_sparse_step == 0`; the others have a dense MLP of
/// width `intermediate_size`. `layers` is bounded (validated) before this runs.
fn qwen_dense_layers(
    layers: u64,
    step: u64,
    only: &[u64],
    intermediate_size: Option<u64>,
) -> Result<Option<Dense>> {
    if step == 0 {
        return Err(Error::invalid(
            "config.json: decoder_sparse_step",
            "must be at least 1 (every how many layers one is MoE)",
        ));
    }
    for (i, &l) in only.iter().enumerate() {
        if l >= layers {
            return Err(Error::invalid(
                format!("config.json: mlp_only_layers[{i}]"),
                format!("must be a 0-based layer below num_hidden_layers ({layers}); got {l}"),
            ));
        }
    }
    let only: std::collections::BTreeSet<u64> = only.iter().copied().collect();
    let dense: Vec<u64> = (0..layers)
        .filter(|i| only.contains(i) || (i + 1) % step != 0)
        .map(|i| i + 1)
        .collect();
    if dense.is_empty() {
        return Ok(None);
    }
    let ffn = intermediate_size.ok_or_else(|| {
        Error::invalid(
            "config.json: intermediate_size",
            "missing; the dense layers (mlp_only_layers, decoder_sparse_step) need it",
        )
    })?;
    Ok(Some(Dense { layers: dense, ffn }))
}
