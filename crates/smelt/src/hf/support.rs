//! What each family's modeling code can build, for the export's refusals, and the model's
//! field names in a family's own words, for the import's errors.

use serde_json::{Map, Value};

use super::Family;
use crate::error::{Error, Result};
use crate::model::capability::refusal;
use crate::model::{
    AttentionBias, AttentionWindow, Consumer, Ffn, Model, QkNorm, Stack, TokenMixer, Window,
    WindowKind,
};

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

/// An architectural feature beyond GQA attention and routed SwiGLU experts (the model's
/// capability table's, [`crate::model::capability`]).
pub(super) use crate::model::Feature;

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
    /// Whether it can have layers without RoPE (`[model.nope]`).
    pub nope: bool,
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
        nope: false,
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
        let stack = Stack::of(m)?;
        let attention = stack.model_attention();
        let qk_norm = attention.map_or(QkNorm::None, |a| a.qk_norm);
        if !self.qk_norm.contains(&qk_norm) {
            return unfit(format!(
                "cannot express model.qk_norm = {} (its code builds {})",
                shown(&[qk_norm]),
                shown(self.qk_norm)
            ));
        }
        if m.nope.is_some() && !self.nope {
            return unfit(
                "cannot express [model.nope] (layers without RoPE: only llama4_text builds them)"
                    .to_owned(),
            );
        }
        let bias = attention.map_or(AttentionBias::None, |a| a.bias);
        if !self.biases.contains(&bias) {
            return unfit(format!(
                "cannot express model.attention_bias = {} (its code builds {})",
                shown(&[bias]),
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
        let dense = stack
            .layers()
            .any(|l| matches!(l.ffn, Some(Ffn::Dense { .. })));
        if !self.dense && dense {
            return unfit("has no dense layers".to_owned());
        }
        let used = stack.features();
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
        ("model.recurrent.layers", "layer_types"),
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
        (w.own.iter().chain(&words)).fold(s.to_owned(), |acc, (ours, theirs)| {
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
    let stack = Stack::of(m)?;
    let windows: Vec<Option<AttentionWindow>> = stack
        .layers()
        .map(|l| match &l.mixer {
            Some(TokenMixer::Attention(a)) => a.window,
            _ => None,
        })
        .collect();
    let Some(w) = windows.iter().find_map(|w| *w) else {
        return Ok(None);
    };
    if w.kind == WindowKind::Sliding && windows.iter().all(Option::is_some) {
        return Ok(Some(w.size));
    }
    let layers: Vec<u64> = (windows.iter().enumerate())
        .filter(|(_, w)| w.is_some())
        .map(|(i, _)| i as u64 + 1)
        .collect();
    Err(Error::invalid(
        "family",
        format!(
            "{family}: its sliding_window applies to every layer; the model windows \
             layers {layers:?} ({})",
            w.kind
        ),
    ))
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
/// family is looked up ([`crate::model::capability::refusal`]): attention layers without
/// a KV cache (linear attention, state-space layers), sparse attention indexers, and
/// families not yet read.
pub(super) fn refuse_unmodelled(map: &Map<String, Value>) -> Result<()> {
    let name = map.get("model_type").and_then(Value::as_str).unwrap_or("");
    let refused = |key: &str, what: String| {
        Err(refusal(
            Consumer::Counts,
            None,
            &format!("config.json: {key}"),
            &what,
        ))
    };
    if let Some(key) = ["index_topk", "index_n_heads", "index_head_dim"]
        .into_iter()
        .find(|k| map.contains_key(*k))
        .filter(|_| name != Family::DeepseekV32.as_str() && name != Family::GlmMoeDsa.as_str())
    {
        return refused(
            key,
            format!(
                "a sparse attention indexer in a '{name}' config (one is read only from \
                 deepseek_v32 and glm_moe_dsa configs, whose code is checked against \
                 DeepSeek-V3.2 and GLM-5; '{name}' may place or size it otherwise)"
            ),
        );
    }
    let what = match name {
        "qwen3_5" | "qwen3_5_text" => {
            "Qwen3.5's dense models, which have a dense MLP on every layer and no experts \
             (smelt describes MoE models: qwen3_5_moe and qwen3_next, the MoE hybrids, are read)"
        }
        "jamba" | "granitemoehybrid" => {
            "this family's Mamba (state-space) layers and their placement (Mamba layers are \
             read only from nemotron_h configs, whose code, Mamba-2 beside attention and MoE \
             layers, one block per layer, is checked against Nemotron 3 Nano)"
        }
        "minimax" | "minimax_m1" => {
            "the lightning (linear) attention layers MiniMax-Text-01 and MiniMax-M1 \
             interleave, which keep a fixed-size state instead of a KV cache (MiniMax-M2, \
             model_type minimax_m2, is read)"
        }
        _ => return Ok(()),
    };
    refused("model_type", format!("'{name}': {what}"))
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
