//! What each family's modeling code can build, for the export's refusals, and the model's
//! field names in a family's own words, for the import's errors.

use serde_json::{Map, Value};

use super::Family;
use crate::error::{Error, Result};
use crate::model::{AttentionBias, ExpertActivation, Mixer, Model, QkNorm, Window, WindowKind};

/// A refusal: the config uses what the cost model does not describe.
pub(super) fn refuse(key: &str, why: impl Into<String>) -> Error {
    Error::invalid(
        format!("config.json: {key}"),
        format!("{}; smelt refuses rather than approximates", why.into()),
    )
}

/// The shared experts a family builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shared {
    /// None.
    No,
    /// Always exactly one, behind a sigmoid gate (Qwen1.5/2-MoE).
    OneGated,
    /// Any number, ungated (DeepSeek, GLM).
    Ungated,
    /// Always exactly one, ungated (Gemma 4's dense MLP beside the experts).
    OneUngated,
}

/// An architectural feature beyond GQA attention and routed SwiGLU experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Feature {
    /// Multi-head latent attention.
    Mla,
    /// Sliding-window layers.
    Sliding,
    /// Chunked-attention layers.
    Chunked,
    /// Attention sinks.
    Sinks,
    /// A router bias.
    RouterBias,
    /// Biases in the routed experts.
    ExpertBias,
    /// gpt-oss's clamped SwiGLU in the routed experts.
    ClampedSwiglu,
    /// Multi-token-prediction modules.
    Mtp,
    /// LayerNorms with a bias.
    NormBias,
    /// A bias on the LM head.
    LmHeadBias,
    /// A sparse attention indexer.
    Indexer,
    /// An output gate on the attention.
    AttentionGate,
    /// Gated DeltaNet layers.
    GatedDeltanet,
    /// Full-attention layers with their own attention shape.
    FullAttention,
    /// A norm on the values.
    VNorm,
    /// Norms on the attention's and the FFN's outputs.
    PostNorms,
    /// Norms around the MoE block's two branches.
    BranchNorms,
    /// The router's learned scales.
    RouterScale,
    /// Gemma's GeGLU (tanh approximation).
    GeluTanh,
    /// Mamba-2 layers.
    Mamba2,
    /// Layers with one block (a mixer or an FFN alone).
    Blocks,
    /// The ungated relu2 MLP.
    Relu2,
}

impl Feature {
    fn words(self) -> &'static str {
        match self {
            Feature::Mla => "multi-head latent attention ([model.mla])",
            Feature::Sliding => "sliding-window layers ([model.window] kind = \"sliding\")",
            Feature::Chunked => "chunked-attention layers ([model.window] kind = \"chunked\")",
            Feature::Sinks => "attention sinks (model.attention_sinks)",
            Feature::RouterBias => "a router bias (model.moe.router_bias)",
            Feature::ExpertBias => "biases in the experts (model.moe.expert_bias)",
            Feature::ClampedSwiglu => {
                "gpt-oss's clamped SwiGLU (model.moe.activation = \"clamped_swiglu\")"
            }
            Feature::Mtp => "MTP modules (model.mtp_layers)",
            Feature::NormBias => "LayerNorms with a bias (model.norm_bias)",
            Feature::LmHeadBias => "a bias on the LM head (model.lm_head_bias)",
            Feature::Indexer => "a sparse attention indexer ([model.indexer])",
            Feature::AttentionGate => "an attention output gate (model.attention_gate)",
            Feature::GatedDeltanet => {
                "Gated DeltaNet layers ([model.recurrent] mixer gated_deltanet)"
            }
            Feature::FullAttention => {
                "full-attention layers of their own shape ([model.full_attention])"
            }
            Feature::VNorm => "a norm on the values (model.v_norm)",
            Feature::PostNorms => "post-attention and post-FFN norms (model.post_norms)",
            Feature::BranchNorms => "norms around the MoE branches (model.moe.branch_norms)",
            Feature::RouterScale => "the router's learned scales (model.moe.router_scale)",
            Feature::GeluTanh => "Gemma's GeGLU (model.moe.activation = \"gelu_tanh\")",
            Feature::Mamba2 => "Mamba-2 layers ([model.recurrent] mixer mamba2)",
            Feature::Blocks => "layers with one block ([model.blocks])",
            Feature::Relu2 => "the ungated relu2 MLP (model.moe.activation = \"relu2\")",
        }
    }

    /// The features `m` uses.
    fn of(m: &Model) -> Vec<Feature> {
        let mut out = Vec::new();
        if m.mla.is_some() {
            out.push(Feature::Mla);
        }
        match m.window.as_ref().map(|w| w.kind) {
            Some(WindowKind::Sliding) => out.push(Feature::Sliding),
            Some(WindowKind::Chunked) => out.push(Feature::Chunked),
            None => {}
        }
        for (on, f) in [
            (m.attention_sinks, Feature::Sinks),
            (m.moe.router_bias, Feature::RouterBias),
            (m.moe.expert_bias, Feature::ExpertBias),
            (
                m.moe.activation == ExpertActivation::ClampedSwiglu,
                Feature::ClampedSwiglu,
            ),
            (m.mtp_layers > 0, Feature::Mtp),
            (m.norm_bias, Feature::NormBias),
            (m.lm_head_bias, Feature::LmHeadBias),
            (m.indexer.is_some(), Feature::Indexer),
            (m.attention_gate, Feature::AttentionGate),
            (
                m.recurrent
                    .as_ref()
                    .is_some_and(|r| matches!(r.mixer, Mixer::GatedDeltanet(_))),
                Feature::GatedDeltanet,
            ),
            (
                m.recurrent
                    .as_ref()
                    .is_some_and(|r| matches!(r.mixer, Mixer::Mamba2(_))),
                Feature::Mamba2,
            ),
            (m.blocks.is_some(), Feature::Blocks),
            (m.moe.activation == ExpertActivation::Relu2, Feature::Relu2),
            (m.full_attention.is_some(), Feature::FullAttention),
            (m.v_norm, Feature::VNorm),
            (m.post_norms, Feature::PostNorms),
            (m.moe.branch_norms, Feature::BranchNorms),
            (m.moe.router_scale, Feature::RouterScale),
            (
                m.moe.activation == ExpertActivation::GeluTanh,
                Feature::GeluTanh,
            ),
        ] {
            if on {
                out.push(f);
            }
        }
        out
    }
}

/// What a family's modeling code builds.
pub(super) struct Support {
    /// The q/k norms it can have.
    pub qk_norm: &'static [QkNorm],
    /// The attention biases it can have.
    pub biases: &'static [AttentionBias],
    /// Its shared experts.
    pub shared: Shared,
    /// Whether it can mix dense layers with MoE layers.
    pub dense: bool,
    /// The features it can build.
    pub features: &'static [Feature],
    /// The features it always has.
    pub required: &'static [Feature],
}

impl Support {
    /// Routed experts and nothing else: no q/k norm, no attention biases, no shared
    /// experts, no dense layers, no other feature. Each family states what it adds.
    pub const ROUTED: Support = Support {
        qk_norm: &[QkNorm::None],
        biases: &[AttentionBias::None],
        shared: Shared::No,
        dense: false,
        features: &[],
        required: &[],
    };

    /// Refuses a model the family cannot express, naming what differs.
    pub fn check(&self, m: &Model, family: Family) -> Result<()> {
        let unfit = |why: String| Err(Error::invalid("family", format!("{family}: {why}")));
        // The model file's values (`"per_head"`, `"qkv"`), as a user wrote them.
        fn shown<T: serde::Serialize>(values: &[T]) -> String {
            let v: Vec<String> = values
                .iter()
                .map(|v| serde_json::to_value(v).map_or_else(|_| "?".into(), |j| j.to_string()))
                .collect();
            v.join(" or ")
        }
        if !self.qk_norm.contains(&m.qk_norm) {
            return unfit(format!(
                "cannot express model.qk_norm = {} (its code builds {})",
                shown(&[m.qk_norm]),
                shown(self.qk_norm)
            ));
        }
        if !self.biases.contains(&m.attention_bias) {
            return unfit(format!(
                "cannot express model.attention_bias = {} (its code builds {})",
                shown(&[m.attention_bias]),
                shown(self.biases)
            ));
        }
        let (n, gated) = (m.moe.shared_experts, m.moe.shared_gate);
        match self.shared {
            Shared::OneGated if n == 0 || !gated => {
                return unfit(
                    "always has one shared expert behind a sigmoid gate; the model needs \
                     shared_experts >= 1 and shared_gate = true"
                        .to_owned(),
                );
            }
            Shared::No if n > 0 => return unfit("has no shared experts".to_owned()),
            Shared::Ungated if gated => {
                return unfit("has no gate on its shared experts".to_owned());
            }
            Shared::OneUngated if n != 1 || gated => {
                return unfit(
                    "always has exactly one ungated shared expert (its dense MLP); the model \
                     needs shared_experts = 1 and shared_gate = false"
                        .to_owned(),
                );
            }
            _ => {}
        }
        if !self.dense && m.dense.is_some() {
            return unfit("has no dense layers".to_owned());
        }
        let used = Feature::of(m);
        if let Some(f) = used.iter().find(|f| !self.features.contains(f)) {
            return unfit(format!("cannot express {}", f.words()));
        }
        if let Some(f) = self.required.iter().find(|f| !used.contains(f)) {
            return unfit(format!("always has {}; the model has none", f.words()));
        }
        Ok(())
    }
}

/// The model's field names as the family's config keys, so an invalid imported config is
/// reported in the file's own words.
pub(super) fn in_config_words(e: Error, family: Family) -> Error {
    let Error::InvalidSpec { field, rule } = e else {
        return e;
    };
    let w = family.config().words();
    let words = [
        ("model.moe.shared_experts", "n_shared_experts"),
        ("model.moe.shared_ffn", w.shared_ffn),
        ("model.moe.expert_ffn", w.expert_ffn),
        ("model.moe.experts", w.experts),
        ("model.moe.top_k", w.top_k),
        (
            "model.full_attention.kv_heads",
            "num_global_key_value_heads",
        ),
        ("model.full_attention.head_dim", "global_head_dim"),
        ("model.mla.q_lora_rank", "q_lora_rank"),
        ("model.mla.kv_lora_rank", "kv_lora_rank"),
        ("model.mla.qk_nope_head_dim", "qk_nope_head_dim"),
        ("model.mla.qk_rope_head_dim", "qk_rope_head_dim"),
        ("model.mla.v_head_dim", "v_head_dim"),
        ("model.window.size", w.window),
        ("model.window.layers", "layer_types"),
        ("model.mtp_layers", "num_nextn_predict_layers"),
        ("model.indexer.heads", "index_n_heads"),
        ("model.indexer.head_dim", "index_head_dim"),
        ("model.indexer.topk", "index_topk"),
        ("model.indexer", "index_*"),
        (
            "model.recurrent.mixer.gated_deltanet.key_heads",
            "linear_num_key_heads",
        ),
        (
            "model.recurrent.mixer.gated_deltanet.value_heads",
            "linear_num_value_heads",
        ),
        (
            "model.recurrent.mixer.gated_deltanet.key_head_dim",
            "linear_key_head_dim",
        ),
        (
            "model.recurrent.mixer.gated_deltanet.value_head_dim",
            "linear_value_head_dim",
        ),
        (
            "model.recurrent.mixer.gated_deltanet.conv_kernel",
            "linear_conv_kernel_dim",
        ),
        ("model.recurrent.mixer.mamba2.heads", "mamba_num_heads"),
        ("model.recurrent.mixer.mamba2.head_dim", "mamba_head_dim"),
        ("model.recurrent.mixer.mamba2.state", "ssm_state_size"),
        ("model.recurrent.mixer.mamba2.groups", "n_groups"),
        ("model.recurrent.mixer.mamba2.conv_kernel", "conv_kernel"),
        ("model.recurrent.mixer.mamba2.chunk", "chunk_size"),
        ("model.recurrent.layers", "layer_types"),
        ("model.blocks.mixer_only", "layers_block_type"),
        ("model.blocks.ffn_only", "layers_block_type"),
        ("model.blocks", "layers_block_type"),
        ("model.kv_heads", "num_key_value_heads"),
        ("model.heads", "num_attention_heads"),
        ("model.head_dim", "head_dim"),
        ("model.hidden", "hidden_size"),
        ("model.layers", "num_hidden_layers"),
        ("model.vocab", "vocab_size"),
        ("model.dense.ffn", w.dense_ffn),
        ("model.loop.first", "loop_first_layer"),
        ("model.loop.span", "loop_span"),
        ("model.loop.repeats", "loop_repeats"),
        ("model.loop.residual_scale", "loop_residual_scale"),
        ("model.loop", "loop_*"),
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

/// The window of a family whose code windows every layer when `sliding_window` is set
/// (Mixtral's mask, PhiMoE's).
pub(super) fn every_layer(size: Option<u64>, layers: u64) -> Option<Window> {
    size.map(|size| Window {
        kind: WindowKind::Sliding,
        size,
        layers: (1..=layers).collect(),
    })
}

/// The `sliding_window` of a model for a family that windows every layer or none: refuses
/// a window on only some layers.
pub(super) fn window_on_every_layer(m: &Model, family: Family) -> Result<Option<u64>> {
    match &m.window {
        None => Ok(None),
        Some(w) if w.kind == WindowKind::Sliding && w.layers.len() as u64 == m.layers => {
            Ok(Some(w.size))
        }
        Some(w) => Err(Error::invalid(
            "family",
            format!(
                "{family}: its sliding_window applies to every layer; the model windows \
                 layers {:?} ({})",
                w.layers, w.kind
            ),
        )),
    }
}

/// Refuses the sliding windows Qwen's Transformers code applies (with `use_sliding_window
/// = true`; its default is false), which smelt's import of it does not read: which layers
/// `max_window_layers` windows has changed between releases. Checked before anything
/// else. (Mixtral's and PhiMoE's every-layer windows and gpt-oss's and Llama-4's per-layer
/// ones are read.)
pub(super) fn refuse_qwen_windows(family: Family, map: &Map<String, Value>) -> Result<()> {
    let window = map.get("sliding_window").filter(|v| !v.is_null());
    let switch = map.get("use_sliding_window").and_then(Value::as_bool);
    match (switch == Some(true), window) {
        (true, Some(w)) => Err(refuse(
            "sliding_window",
            format!(
                "{family} attends a window of {w} keys here on the layers max_window_layers \
                 selects, a rule that has changed between Transformers releases; smelt does \
                 not guess which"
            ),
        )),
        _ => Ok(()),
    }
}

/// Architectures the cost model does not describe, refused with the reason before the
/// family is looked up: attention layers without a KV cache (linear attention, state-space
/// layers), sparse attention indexers, and families not yet read.
pub(super) fn refuse_unmodelled(map: &Map<String, Value>) -> Result<()> {
    let name = map.get("model_type").and_then(Value::as_str).unwrap_or("");
    if let Some(key) = ["index_topk", "index_n_heads", "index_head_dim"]
        .into_iter()
        .find(|k| map.contains_key(*k))
        .filter(|_| name != Family::DeepseekV32.as_str() && name != Family::GlmMoeDsa.as_str())
    {
        return Err(refuse(
            key,
            format!(
                "a sparse attention indexer is read only from deepseek_v32 and glm_moe_dsa \
                 configs, whose code is checked against DeepSeek-V3.2 and GLM-5; '{name}' may \
                 place or size it otherwise"
            ),
        ));
    }
    let why = match name {
        "qwen3_5" | "qwen3_5_text" => {
            "Qwen3.5's dense models have a dense MLP on every layer and no experts; smelt \
             describes MoE models (qwen3_5_moe and qwen3_next, the MoE hybrids, are read)"
        }
        "jamba" | "granitemoehybrid" => {
            "Mamba (state-space) layers are read only from nemotron_h configs, whose code \
             (Mamba-2 beside attention and MoE layers, one block per layer) is checked \
             against Nemotron 3 Nano; this family's Mamba layers and their placement differ"
        }
        "minimax" | "minimax_m1" => {
            "MiniMax-Text-01 and MiniMax-M1 interleave lightning (linear) attention layers, \
             which keep a fixed-size state instead of a KV cache; the cost model does not \
             describe them (MiniMax-M2, model_type minimax_m2, is read)"
        }
        _ => return Ok(()),
    };
    Err(refuse("model_type", format!("'{name}': {why}")))
}

/// An error unless `layer_types` (`types`) names each of the `layers` layers.
pub(super) fn layer_count(types: &[String], layers: u64) -> Result<()> {
    if types.len() as u64 != layers {
        return Err(Error::invalid(
            "config.json: layer_types",
            format!(
                "must name the attention of each of the {layers} layers; got {}",
                types.len()
            ),
        ));
    }
    Ok(())
}

/// `layer_types` entry of a sliding-window layer (gpt-oss, Gemma 4).
pub(super) const SLIDING: &str = "sliding_attention";
/// `layer_types` entry of a full-attention layer.
pub(super) const FULL: &str = "full_attention";

/// The 1-based layers `types` (one per layer of `layers`) names [`SLIDING`], every other
/// entry [`FULL`]: a list of another length, or another entry, is refused for `family`.
pub(super) fn sliding_layers(types: &[String], layers: u64, family: Family) -> Result<Vec<u64>> {
    layer_count(types, layers)?;
    let mut sliding = Vec::new();
    for (i, t) in types.iter().enumerate() {
        match t.as_str() {
            SLIDING => sliding.push(i as u64 + 1),
            FULL => {}
            other => {
                return Err(refuse(
                    &format!("layer_types[{i}]"),
                    format!(
                        "'{}' is not a layer type {family} builds ({SLIDING}, {FULL})",
                        other.escape_debug()
                    ),
                ));
            }
        }
    }
    Ok(sliding)
}
