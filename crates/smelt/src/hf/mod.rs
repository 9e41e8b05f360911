//! Hugging Face `config.json` files: import into a [`ModelSpec`], export back.
//!
//! Keys keep their Hugging Face names and unknown keys are ignored (these files are other
//! tools' formats). Each family has its own typed config, read the way its Transformers
//! modeling code reads it (as candle-transformers keeps one config per model), in its own
//! module implementing the traits of `family.rs`; `registry.rs` holds the one list of families
//! the import, the export and the documentation read; [`families_markdown`] says what each
//! family reads (the guide's table). Every family takes `head_dim` from the config when it
//! is there, else `hidden_size / num_attention_heads`, as Transformers' attention modules
//! do; multi-head latent attention's query/key width is `qk_nope_head_dim +
//! qk_rope_head_dim`.
//!
//! The Qwen rule: 0-based layer `i` is MoE when `i` is not in `mlp_only_layers` and
//! `(i + 1) % decoder_sparse_step == 0`; every other layer has a dense SwiGLU of width
//! `intermediate_size` ([`crate::model::Dense`]). Keys a family's modeling code does not read
//! (e.g. `decoder_sparse_step` in a Mixtral config) are ignored, as Transformers ignores them.
//!
//! The import counts the embedding and the LM head (`[counting]`, with `vocab_size` and
//! `tie_word_embeddings`), as model cards do. A config that uses something the cost model
//! does not describe is refused with the reason, never approximated: a sliding window Qwen's
//! code applies (with `use_sliding_window = true`) to the layers `max_window_layers` selects,
//! sparse attention indexers outside `deepseek_v32` and `glm_moe_dsa`, linear attention
//! outside `qwen3_next` and `qwen3_5_moe` (whose Gated DeltaNet layers are read), state-space
//! hybrids outside `nemotron_h` (whose Mamba-2 layers are read), and any other `model_type`
//! (see `support.rs`). Mixtral's and PhiMoE's
//! `sliding_window` windows every layer; gpt-oss's and Llama-4's windows are read per layer
//! from `layer_types`; MTP modules are kept (`mtp_layers`) but counted only with
//! `[counting] mtp`. A `llama4`, `qwen3_5_moe` or `gemma4` wrapper is read as its
//! `text_config` (the vision and audio encoders are not counted). Gemma 4's full-attention
//! layers have their own attention shape ([`crate::model::FullAttention`]); its
//! refusals (dense models, per-layer input embeddings, KV sharing) are in `gemma4.rs`.
//!
//! [`export`] writes a (matched, looped) spec back in a family's style — exactly the keys
//! that family reads — with the loop in clearly named extra keys that [`import`] reads back.
//! Transformers cannot build a loop from those keys: a looped export is written for it as a
//! model directory ([`looped`]), which [`import`] also reads back.

mod deepseek;
mod family;
mod gemma4;
mod glm_dsa;
mod gpt_oss;
mod granite;
mod llama4;
mod load;
pub mod looped;
mod minimax;
mod mixtral;
mod nemotron_h;
mod olmoe;
mod phimoe;
mod qwen;
mod qwen_next;
mod registry;
mod support;
mod write;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::{
    AttentionBias, Blocks, Counting, Dense, ExpertActivation, FullAttention, Indexer, Loop, Mla,
    Model, ModelSpec, Moe, Nope, QkNorm, Recurrent, Window, Workload,
};
use crate::names::Named;
pub use family::Family;
use family::Wrapper;
pub use registry::{families_list, families_markdown};
use support::{in_config_words, refuse_unmodelled};
pub use write::{export, export_like, export_match, family_of, family_of_config};

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

/// Reads a typed config out of a parsed `config.json`; an error names the key (a loop key
/// as a looped model directory's `config.json` spells it, [`looped::file_key`]).
fn read<T: DeserializeOwned>(value: &Value) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = match e.path().to_string() {
            p if p == "." || p.is_empty() => "config.json".to_owned(),
            p => format!("config.json: {}", looped::file_key(&p)),
        };
        Error::invalid(field, e.into_inner().to_string())
    })
}

/// A reading error `e` of a `family` config with the family named when a key is missing
/// (serde's "missing field `kv_lora_rank`" says neither which file kind needs it nor why):
/// the one place every family's reader passes through.
fn in_family(e: Error, family: Family) -> Error {
    match e {
        Error::InvalidSpec { field, rule } if rule.starts_with("missing field `") => {
            let key = rule["missing field ".len()..].trim_matches('`');
            let field = match field.as_str() {
                "config.json" => format!("config.json: {key}"),
                _ => format!("{field}.{key}"),
            };
            Error::invalid(
                field,
                format!(
                    "missing: a {family} config gives it, and smelt reads it to cost the model"
                ),
            )
        }
        other => other,
    }
}

/// The routed experts' count under another name in Transformers' config class of `family`
/// (5.24's `attribute_map`, and GLM-5's `num_experts`, listed in the order the class sets
/// them, each after the field itself): the class builds the last one given. Two names with
/// different counts are refused, naming both and the count Transformers would build; else
/// the names given are removed from `map` and their count put under the family's own key.
fn expert_count_alias(map: &mut Map<String, Value>, family: Family) -> Result<()> {
    let aliases: &[&str] = match family {
        Family::DeepseekV2 | Family::Mixtral | Family::GptOss | Family::MinimaxM2 => {
            &["num_experts"]
        }
        Family::DeepseekV3
        | Family::DeepseekV32
        | Family::Glm4Moe
        | Family::NemotronH
        | Family::Olmoe
        | Family::Qwen3Moe => &["num_local_experts"],
        Family::GlmMoeDsa => &["num_experts", "num_local_experts"],
        _ => &[],
    };
    let key = family.config().words().experts;
    let value = |k: &str| map.get(k).filter(|v| !v.is_null());
    let given: Vec<(&str, &Value)> = std::iter::once(key)
        .chain(aliases.iter().copied())
        .filter_map(|k| value(k).map(|v| (k, v)))
        .collect();
    let (Some(&(first, a)), Some(&(_, built))) = (given.first(), given.last()) else {
        return Ok(());
    };
    if let Some(&(second, b)) = given.iter().find(|(_, v)| *v != a) {
        return Err(Error::invalid(
            format!("config.json: {first}"),
            format!(
                "is {a}, but {second} is {b}: both give the routed experts' count, and \
                 Transformers' {family} config class builds {built} experts (the name it sets \
                 last); give one"
            ),
        ));
    }
    let count = built.clone();
    for alias in aliases {
        map.remove(*alias);
    }
    map.insert(key.to_owned(), count);
    Ok(())
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Default)]
struct Parts {
    experts: u64,
    expert_ffn: u64,
    latent: Option<u64>,
    qk_norm: QkNorm,
    attention_bias: AttentionBias,
    /// `(count, width, gated)`.
    shared: Option<(u64, u64, bool)>,
    dense: Option<Dense>,
    mla: Option<Mla>,
    window: Option<Window>,
    nope: Option<Nope>,
    indexer: Option<Indexer>,
    sinks: bool,
    router_bias: bool,
    expert_bias: bool,
    activation: ExpertActivation,
    mtp_layers: u64,
    norm_bias: bool,
    lm_head_bias: bool,
    attention_gate: bool,
    recurrent: Option<Recurrent>,
    full_attention: Option<FullAttention>,
    v_norm: bool,
    post_norms: bool,
    router_scale: bool,
    branch_norms: bool,
    blocks: Option<Blocks>,
    router: Option<crate::model::Router>,
    router_groups: Option<crate::model::RouterGroups>,
    jitter: Option<crate::model::Jitter>,
    rope_dim: Option<u64>,
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
            // MLA families derive their own head widths (DeepSeek's config sets head_dim
            // to the RoPE width internally): writing one would be read differently.
            head_dim: m.mla.is_none().then_some(m.head_dim),
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
                "config.json: loop_*",
                "give loop_first_layer, loop_span and loop_repeats together",
            )),
        }
    }

    fn model(&self, parts: Parts) -> Result<Model> {
        let (shared_experts, shared_ffn, shared_gate) = parts.shared.unwrap_or((0, 0, false));
        // MLA: every head has its own keys and values, of the query/key width.
        let (kv_heads, head_dim) = match &parts.mla {
            Some(_)
                if self
                    .num_key_value_heads
                    .is_some_and(|k| k != self.num_attention_heads) =>
            {
                return Err(Error::invalid(
                    "config.json: num_key_value_heads",
                    format!(
                        "with multi-head latent attention (kv_lora_rank) every head has its own \
                         keys and values, so it must equal num_attention_heads ({}) or be \
                         absent; got {}",
                        self.num_attention_heads,
                        self.num_key_value_heads.unwrap_or_default()
                    ),
                ));
            }
            Some(a) => (
                self.num_attention_heads,
                a.qk_nope_head_dim.saturating_add(a.qk_rope_head_dim),
            ),
            None => (
                self.num_key_value_heads.unwrap_or(self.num_attention_heads),
                self.head_dim()?,
            ),
        };
        Ok(Model {
            layers: self.num_hidden_layers,
            hidden: self.hidden_size,
            heads: self.num_attention_heads,
            kv_heads,
            head_dim,
            vocab: self.vocab_size,
            tie_embeddings: self.tie_word_embeddings,
            qk_norm: parts.qk_norm,
            attention_bias: parts.attention_bias,
            attention_sinks: parts.sinks,
            mla: parts.mla,
            window: parts.window,
            nope: parts.nope,
            indexer: parts.indexer,
            attention_gate: parts.attention_gate,
            recurrent: parts.recurrent,
            full_attention: parts.full_attention,
            v_norm: parts.v_norm,
            post_norms: parts.post_norms,
            blocks: parts.blocks,
            moe: Moe {
                experts: parts.experts,
                top_k: self.num_experts_per_tok,
                expert_ffn: parts.expert_ffn,
                latent: parts.latent,
                shared_experts,
                shared_ffn,
                shared_gate,
                router_bias: parts.router_bias,
                expert_bias: parts.expert_bias,
                activation: parts.activation,
                router_scale: parts.router_scale,
                branch_norms: parts.branch_norms,
                router: parts.router,
                router_groups: parts.router_groups,
                jitter: parts.jitter,
            },
            dense: parts.dense,
            looping: self.looping()?,
            mtp_layers: parts.mtp_layers,
            norm_bias: parts.norm_bias,
            lm_head_bias: parts.lm_head_bias,
            rope_dim: parts.rope_dim,
        })
    }
}

/// Imports `config.json` text, costed at `workload`.
pub fn import(text: &str, workload: Workload) -> Result<ModelSpec> {
    // A UTF-8 byte-order mark (which some editors write) is not part of the JSON: it is
    // skipped, as TOML and CSV readers skip it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
    if let Some((family, Some(wrapper))) = map
        .get("model_type")
        .and_then(Value::as_str)
        .and_then(Family::of_model_type)
    {
        return import_wrapped(map, family, wrapper, workload);
    }
    if map.get("model_type").and_then(Value::as_str) == Some(looped::MODEL_TYPE) {
        let family = looped::as_family_config(map)?;
        if family.get("model_type").and_then(Value::as_str) == Some(looped::MODEL_TYPE) {
            return Err(Error::invalid(
                "config.json: text_config.model_type",
                "a smelt_looped config holds its family's config, not another smelt_looped one",
            ));
        }
        return import_value(&family, workload);
    }
    refuse_unmodelled(map)?;
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
    family.config().refuse(map)?;
    let filled = filled(map, family)?;
    let value = &Value::Object(filled);
    let common: Common = read(value).map_err(|e| in_family(e, family))?;
    // Bound the loop counts before any config value is iterated over.
    crate::model::validate::positive(
        "model.layers",
        common.num_hidden_layers,
        crate::model::MAX_COUNT,
    )
    .map_err(|e| in_config_words(e, family))?;
    let mut parts = (family.config().parts(value, &common)).map_err(|e| in_family(e, family))?;
    if let Some(key) = family.config().jitter_key() {
        parts.jitter = jitter(value, key).map_err(|e| in_family(e, family))?;
    }
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
            ..Counting::default()
        },
        training: None,
    };
    spec.validate().map_err(|e| match e {
        Error::InvalidSpec { field, rule } if field == "name" => {
            Error::invalid("config.json: architectures[0]", rule)
        }
        e => in_config_words(e, family),
    })?;
    Ok(spec)
}

/// The MoE's input noise of a config whose family has one under `key`
/// ([`family::FamilyConfig::jitter_key`]): absent, null or 0 is none; else a number strictly
/// between 0 and 1.
fn jitter(config: &Value, key: &str) -> Result<Option<crate::model::Jitter>> {
    let field = || format!("config.json: {key}");
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(0.0) => Ok(None),
            Some(j) if j > 0.0 && j < 1.0 => Ok(Some(crate::model::Jitter(j))),
            Some(j) => Err(Error::invalid(
                field(),
                format!("must be 0 (no noise) or a number strictly between 0 and 1; got {j}"),
            )),
            None => Err(Error::invalid(
                field(),
                format!("must be a number (got {})", kind_of(v)),
            )),
        },
    }
}

/// `map` with the family's class defaults for absent keys, and its experts per token under
/// the common key when the family names them otherwise (Gemma 4's `top_k_experts`).
fn filled(map: &Map<String, Value>, family: Family) -> Result<Map<String, Value>> {
    let mut filled = map.clone();
    expert_count_alias(&mut filled, family)?;
    for (key, value) in family.config().derived(map) {
        filled.entry(key).or_insert(value);
    }
    for (key, default) in family.config().defaults() {
        filled.entry(*key).or_insert_with(|| Value::from(*default));
    }
    if family.config().tied_by_default() {
        filled
            .entry("tie_word_embeddings")
            .or_insert(Value::Bool(true));
    }
    // A family that names the experts per token otherwise (Gemma 4's `top_k_experts`)
    // reads that key, and only that key, as the common one.
    let top_k = family.config().words().top_k;
    if top_k != family::TOP_K {
        match filled.get(top_k).filter(|v| !v.is_null()).cloned() {
            Some(v) => filled.insert(family::TOP_K.to_owned(), v),
            None => {
                return Err(Error::invalid(
                    format!("config.json: {top_k}"),
                    "missing: the routed experts each token uses",
                ));
            }
        };
    }
    Ok(filled)
}

/// A multimodal wrapper (`llama4`): its `text_config` as a model of `family`, named after the
/// wrapper's architecture with " text decoder", since the vision encoder and projector are
/// not counted.
fn import_wrapped(
    map: &Map<String, Value>,
    family: Family,
    wrapper: Wrapper,
    workload: Workload,
) -> Result<ModelSpec> {
    let Some(Value::Object(text)) = map.get("text_config") else {
        return Err(Error::invalid(
            "config.json: text_config",
            format!(
                "a {} config holds its text decoder in text_config (an object); it is \
                 missing or not an object",
                wrapper.model_type
            ),
        ));
    };
    let mut text = text.clone();
    text.insert("model_type".to_owned(), Value::from(family.as_str()));
    let arch = map
        .get("architectures")
        .and_then(|a| a.get(0))
        .and_then(Value::as_str)
        .unwrap_or(wrapper.architecture);
    text.insert(
        "architectures".to_owned(),
        Value::from(vec![format!("{arch} text decoder")]),
    );
    import_value(&Value::Object(text), workload).map_err(|e| match e {
        Error::InvalidSpec { field, rule } => Error::InvalidSpec {
            field: in_text_config(&field),
            rule,
        },
        e => e,
    })
}

/// A field of a wrapper's `text_config` named from the top of the file: `config.json: k`
/// is `config.json: text_config.k`, and the whole `config.json` (a key missing from it,
/// say) is `config.json: text_config`.
fn in_text_config(field: &str) -> String {
    match field.strip_prefix("config.json") {
        Some("") => "config.json: text_config".to_owned(),
        Some(rest) => match rest.strip_prefix(": ") {
            Some(key) => format!("config.json: text_config.{key}"),
            None => field.to_owned(),
        },
        None => field.to_owned(),
    }
}

fn kind_of(v: &Value) -> &'static str {
    crate::strict_toml::kind_of(v, "an object")
}
