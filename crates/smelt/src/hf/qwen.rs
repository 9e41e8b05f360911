//! `qwen2_moe` and `qwen3_moe`: routed experts, dense layers by Qwen's rule, a sliding window
//! only when `use_sliding_window` is true (Transformers' default is false). Qwen1.5/2-MoE adds
//! one shared expert behind a sigmoid gate and Q/K/V biases; Qwen3-MoE a per-head q/k norm and
//! optional biases on Q, K, V and O.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::family::{ConfigKeys, FamilyConfig, Words, object};
use super::support::{Shared, Support, refuse_qwen_windows};
use super::{Common, Family, Parts, field_names, read, yes};
use crate::error::{Error, Result};
use crate::model::{AttentionBias, Dense, Model, QkNorm, Router};

/// The routers of the families with `norm_topk_prob` (their `...TopKRouter`: a float32
/// softmax over every expert, the top-k divided by their sum when the key is true, cast to
/// the model's dtype).
pub(super) const NORM_TOPK_PROB: &[Router] = &[Router::Softmax, Router::SoftmaxRenormalised];

/// What both Qwen MoE families add to a family's words.
const WORDS: Words = Words {
    experts: "num_experts",
    expert_ffn: "moe_intermediate_size",
    ..Words::LOCAL
};

/// The keys both Qwen MoE families read besides their own.
fn qwen_keys() -> Vec<&'static str> {
    let mut keys = field_names::<Qwen>();
    keys.extend(field_names::<QwenDense>());
    keys.extend(WINDOW_KEYS);
    keys
}

/// The `qwen2_moe` family (Qwen1.5-MoE, Qwen2-MoE).
pub(super) struct Qwen2MoeFamily;

impl FamilyConfig for Qwen2MoeFamily {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // Qwen2MoeConfig: num_key_value_heads = 16.
        &[("num_key_value_heads", 16)]
    }
    fn family(&self) -> Family {
        Family::Qwen2Moe
    }
    fn architecture(&self) -> &'static str {
        "Qwen2MoeForCausalLM"
    }
    fn about(&self) -> &'static str {
        "Qwen1.5-MoE and Qwen2-MoE"
    }
    fn reads(&self) -> &'static str {
        "`num_experts` of `moe_intermediate_size`; Q/K/V biases (`qkv_bias`, true when \
         absent), one shared expert of `shared_expert_intermediate_size` behind a sigmoid gate, \
         dense layers by Qwen's rule"
    }
    fn support(&self) -> &Support {
        &Qwen2Moe::SUPPORT
    }
    fn routers(&self) -> &'static [Router] {
        NORM_TOPK_PROB
    }
    fn words(&self) -> Words {
        Words {
            shared_ffn: "shared_expert_intermediate_size",
            ..WORDS
        }
    }
    fn refuse(&self, config: &Map<String, Value>) -> Result<()> {
        refuse_qwen_windows(self.family(), config)
    }
}

impl ConfigKeys for Qwen2MoeFamily {
    fn keys(&self) -> Vec<&'static str> {
        let mut keys = field_names::<Qwen2Moe>();
        keys.extend(qwen_keys());
        keys
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        read::<Qwen2Moe>(config)?.parts(common, &read(config)?, &read(config)?)
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        let mut out = object(Qwen2Moe::of(m))?;
        out.extend(object(Qwen::of(m))?);
        out.extend(object(QwenDense::of(m))?);
        Ok(out)
    }
}

/// The `qwen3_moe` family.
pub(super) struct Qwen3MoeFamily;

impl FamilyConfig for Qwen3MoeFamily {
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        // Qwen3MoeConfig: num_key_value_heads = 4.
        &[("num_key_value_heads", 4)]
    }
    fn family(&self) -> Family {
        Family::Qwen3Moe
    }
    fn architecture(&self) -> &'static str {
        "Qwen3MoeForCausalLM"
    }
    fn about(&self) -> &'static str {
        "Qwen3-MoE"
    }
    fn reads(&self) -> &'static str {
        "`num_experts` (or, in newer releases, `num_local_experts`) of \
         `moe_intermediate_size`; per-head q/k norm, `attention_bias` (Q, K, V, O), dense \
         layers by Qwen's rule"
    }
    fn support(&self) -> &Support {
        &Qwen3Moe::SUPPORT
    }
    fn routers(&self) -> &'static [Router] {
        NORM_TOPK_PROB
    }
    fn words(&self) -> Words {
        WORDS
    }
    fn refuse(&self, config: &Map<String, Value>) -> Result<()> {
        refuse_qwen_windows(self.family(), config)
    }
}

impl ConfigKeys for Qwen3MoeFamily {
    fn keys(&self) -> Vec<&'static str> {
        let mut keys = field_names::<Qwen3Moe>();
        keys.extend(qwen_keys());
        keys.extend(Qwen3Moe::ALIASES);
        keys
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        read::<Qwen3Moe>(config)?.parts(common, &read(config)?, &read(config)?)
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        let mut out = object(Qwen3Moe::of(m))?;
        out.extend(object(Qwen::of(m))?);
        out.extend(object(QwenDense::of(m))?);
        Ok(out)
    }
}

fn one() -> u64 {
    1
}

/// Keys Qwen reads that no struct here holds: the window, whose use is refused.
const WINDOW_KEYS: &[&str] = &["sliding_window"];

/// The keys both Qwen MoE families read besides the expert count and the dense layers.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct Qwen {
    moe_intermediate_size: u64,
    /// With `sliding_window`, refused before this is read ([`refuse_qwen_windows`]).
    #[serde(default)]
    use_sliding_window: bool,
    /// Whether the router divides the top-k probabilities by their sum (false when absent,
    /// as Transformers' configs default it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    norm_topk_prob: Option<bool>,
}

impl Qwen {
    fn parts(
        &self,
        c: &Common,
        dense: &QwenDense,
        experts: u64,
        qk: QkNorm,
        bias: AttentionBias,
    ) -> Result<Parts> {
        Ok(Parts {
            experts,
            expert_ffn: self.moe_intermediate_size,
            qk_norm: qk,
            attention_bias: bias,
            dense: dense.dense(c.num_hidden_layers)?,
            router: Some(crate::model::Router::of_norm_topk_prob(self.norm_topk_prob)),
            ..Parts::default()
        })
    }

    fn of(m: &Model) -> Self {
        Self {
            moe_intermediate_size: m.moe.expert_ffn,
            use_sliding_window: false,
            norm_topk_prob: m.moe.router.map(crate::model::Router::renormalises),
        }
    }
}

/// Qwen's dense-layer keys (`qwen2_moe`, `qwen3_moe` and `qwen3_next` read them).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub(super) struct QwenDense {
    #[serde(default = "one")]
    decoder_sparse_step: u64,
    #[serde(default)]
    mlp_only_layers: Vec<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    intermediate_size: Option<u64>,
}

impl QwenDense {
    /// The dense layers of a `layers`-layer model ([`qwen_dense_layers`]).
    pub(super) fn dense(&self, layers: u64) -> Result<Option<Dense>> {
        qwen_dense_layers(
            layers,
            self.decoder_sparse_step,
            &self.mlp_only_layers,
            self.intermediate_size,
        )
    }

    /// The keys that place `m`'s dense layers: every layer a step, the dense ones
    /// `mlp_only_layers` (0-based).
    pub(super) fn of(m: &Model) -> Self {
        Self {
            decoder_sparse_step: 1,
            mlp_only_layers: m
                .dense
                .as_ref()
                .map(|d| d.layers.iter().map(|l| l - 1).collect())
                .unwrap_or_default(),
            intermediate_size: m.dense.as_ref().map(|d| d.ffn),
        }
    }
}

/// The keys only `qwen2_moe` reads.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct Qwen2Moe {
    num_experts: u64,
    shared_expert_intermediate_size: u64,
    #[serde(default = "yes")]
    qkv_bias: bool,
}

impl Qwen2Moe {
    const SUPPORT: Support = Support {
        biases: &[AttentionBias::None, AttentionBias::Qkv],
        shared: Shared::OneGated,
        dense: true,
        ..Support::ROUTED
    };

    fn parts(&self, c: &Common, qwen: &Qwen, dense: &QwenDense) -> Result<Parts> {
        let bias = if self.qkv_bias {
            AttentionBias::Qkv
        } else {
            AttentionBias::None
        };
        Ok(Parts {
            shared: gated_shared_expert(Family::Qwen2Moe, self.shared_expert_intermediate_size)?,
            ..qwen.parts(c, dense, self.num_experts, QkNorm::None, bias)?
        })
    }

    fn of(m: &Model) -> Self {
        Self {
            num_experts: m.moe.experts,
            shared_expert_intermediate_size: shared_expert_width(m),
            qkv_bias: m.attention_bias == AttentionBias::Qkv,
        }
    }
}

/// The keys only `qwen3_moe` reads.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct Qwen3Moe {
    /// Newer Transformers releases call it `num_local_experts`.
    #[serde(alias = "num_local_experts")]
    num_experts: u64,
    #[serde(default)]
    attention_bias: bool,
}

impl Qwen3Moe {
    /// Keys read under another name.
    const ALIASES: &'static [&'static str] = &["num_local_experts"];

    const SUPPORT: Support = Support {
        qk_norm: &[QkNorm::PerHead],
        biases: &[AttentionBias::None, AttentionBias::All],
        dense: true,
        ..Support::ROUTED
    };

    fn parts(&self, c: &Common, qwen: &Qwen, dense: &QwenDense) -> Result<Parts> {
        let bias = AttentionBias::all_if(self.attention_bias);
        qwen.parts(c, dense, self.num_experts, QkNorm::PerHead, bias)
    }

    fn of(m: &Model) -> Self {
        Self {
            num_experts: m.moe.experts,
            attention_bias: m.attention_bias == AttentionBias::All,
        }
    }
}

/// The shared expert of a family that always builds one behind a sigmoid gate
/// (`qwen2_moe`, `qwen3_next`, `qwen3_5_moe_text`) of `shared_expert_intermediate_size`
/// `width`: the parts' `shared`, refused at 0.
pub(super) fn gated_shared_expert(family: Family, width: u64) -> Result<Option<(u64, u64, bool)>> {
    if width == 0 {
        return Err(Error::invalid(
            "config.json: shared_expert_intermediate_size",
            format!("must be at least 1: {family} always has a gated shared expert"),
        ));
    }
    Ok(Some((1, width, true)))
}

/// The `shared_expert_intermediate_size` a model is written with: one gated shared expert
/// of width `s·f_s` is, to the multiply-add, `s` shared experts of width `f_s` behind one
/// gate.
pub(super) fn shared_expert_width(m: &Model) -> u64 {
    m.moe.shared_experts * m.moe.shared_ffn
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
