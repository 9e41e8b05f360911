//! What a family module provides: the family's names ([`Family`]), its description and what
//! its modeling code builds ([`FamilyConfig`], every method but the four names a default),
//! and how its own keys read into a model and write back ([`ConfigKeys`]; for a family whose
//! own keys are one config struct, [`OneStruct`] names the struct and the rest follows). The
//! one list of the families is in `registry.rs`, which imports the family modules; this
//! file imports none of them.
//!
//! Adding a family: a [`Family`] variant here, a module implementing [`FamilyConfig`] and
//! [`OneStruct`] (or [`ConfigKeys`]), and its line in `registry.rs`'s list (in the same
//! order); `SMELT_BLESS=1 cargo test --release --test tests hf_registry` then rewrites the
//! guide's table, and the tests name every other list that lacks it (the Python docstring)
//! and every family without a published config in tests/data/hf/.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::support::Support;
use super::{Common, Parts, field_names, read};
use crate::error::{Error, Result};
use crate::model::{Model, Router};
use crate::names::named_enum;

named_enum! {
    /// A Hugging Face model family (`model_type`) smelt reads and writes; what it reads and
    /// writes is its entry in the family list ([`super::families_markdown`] says what).
    pub enum Family: "model_type" {
        /// Mixtral (Mistral AI).
        Mixtral = "mixtral",
        /// Qwen1.5-MoE and Qwen2-MoE.
        Qwen2Moe = "qwen2_moe",
        /// Qwen3-MoE.
        Qwen3Moe = "qwen3_moe",
        /// OLMoE (AllenAI).
        Olmoe = "olmoe",
        /// DeepSeek-V2 (MLA, DeepSeek MoE).
        DeepseekV2 = "deepseek_v2",
        /// DeepSeek-V3 (MLA, DeepSeek MoE with a router bias, MTP).
        DeepseekV3 = "deepseek_v3",
        /// DeepSeek-V3.2 (DeepSeek-V3 with a sparse attention indexer on every layer).
        DeepseekV32 = "deepseek_v32",
        /// Kimi-K2 (Moonshot AI; DeepSeek-V3's code).
        KimiK2 = "kimi_k2",
        /// GLM-4.5 (Z.ai; GQA with DeepSeek-style MoE).
        Glm4Moe = "glm4_moe",
        /// GLM-5 (Z.ai; DeepSeek-V3.2's MLA, sparse attention indexer and MoE).
        GlmMoeDsa = "glm_moe_dsa",
        /// gpt-oss (OpenAI; alternating sliding and full attention, sinks, biases).
        GptOss = "gpt_oss",
        /// MiniMax-M2 (q/k norm over the whole projections, a router bias).
        MinimaxM2 = "minimax_m2",
        /// Llama-4's text decoder (chunked attention, a shared expert, dense layers).
        Llama4Text = "llama4_text",
        /// Granite 3.0 MoE (IBM).
        GraniteMoe = "granitemoe",
        /// Phi-3.5-MoE (Microsoft; LayerNorms and an LM head with biases).
        Phimoe = "phimoe",
        /// Qwen3-Next (Gated DeltaNet layers beside gated attention).
        Qwen3Next = "qwen3_next",
        /// Qwen3.5's MoE text decoder (Gated DeltaNet layers beside gated attention).
        Qwen3_5MoeText = "qwen3_5_moe_text",
        /// Gemma 4's MoE text decoder (Google; sliding and full layers of their own shapes,
        /// a dense MLP beside the experts).
        Gemma4Text = "gemma4_text",
        /// NVIDIA Nemotron-H and Nemotron 3 Nano (Mamba-2 layers beside attention and MoE
        /// layers, one block per layer).
        NemotronH = "nemotron_h",
    }
}

/// One Hugging Face family (`model_type`): its names, its documentation, what its modeling
/// code can build and how its config is read. A family module gives its four names and what
/// differs from the defaults.
pub(super) trait FamilyConfig: Sync {
    /// The family this describes.
    fn family(&self) -> Family;

    /// The Transformers class an exported config names in `architectures`.
    fn architecture(&self) -> &'static str;

    /// One line for people: the models it holds (the command line's help).
    fn about(&self) -> &'static str;

    /// What smelt reads beyond the common keys, in Markdown (the guide's table).
    fn reads(&self) -> &'static str;

    /// What its modeling code builds: the export refuses any other model. By default
    /// routed experts of the common shape ([`Support::ROUTED`]).
    fn support(&self) -> &Support {
        &Support::ROUTED
    }

    /// The routers (`[model.moe] router`) its Transformers class builds, as its import
    /// states them: the export refuses a model stating any other. Empty (the default) for
    /// a family whose router is none of smelt's (group-limited choice, ...) or whose import
    /// does not state it.
    fn routers(&self) -> &'static [Router] {
        &[]
    }

    /// Its config keys for the model's fields, so import errors use the file's words.
    fn words(&self) -> Words {
        Words::LOCAL
    }

    /// The `model_type` of a multimodal wrapper whose `text_config` is this family's config.
    fn wrapper(&self) -> Option<Wrapper> {
        None
    }

    /// Transformers' config-class defaults (`transformers/models/<family>/configuration_*.py`)
    /// for the keys a `config.json` may leave out where smelt would otherwise read the
    /// absence as another model than Transformers builds (DeepSeek-V3 without
    /// `first_k_dense_replace` has 3 dense layers, Mixtral without `num_key_value_heads` 8
    /// key/value heads). Inserted when the key is absent; an explicit `null` keeps the
    /// meaning the family gives it. Keys whose class default is `None` (derived from
    /// another key) are not listed: smelt derives them the same way.
    fn defaults(&self) -> &'static [(&'static str, u64)] {
        &[]
    }

    /// Absent keys its config class derives from others (Nemotron-H's layer count from its
    /// layer pattern), filled before the defaults.
    fn derived(&self, _config: &Map<String, Value>) -> Vec<(&'static str, Value)> {
        Vec::new()
    }

    /// Whether an absent `tie_word_embeddings` means tied (its config class's default;
    /// false unless the family says so).
    fn tied_by_default(&self) -> bool {
        false
    }

    /// The key of the training-time noise its class multiplies the MoE's input by
    /// (Mixtral's and MiniMax-M2's `router_jitter_noise`, PhiMoE's `input_jitter_noise`), if
    /// it has one: read into `[model.moe] jitter` (absent or 0: none) and always written
    /// from it.
    fn jitter_key(&self) -> Option<&'static str> {
        None
    }

    /// Refusals checked before any key is read (a use of a key smelt does not describe).
    fn refuse(&self, _config: &Map<String, Value>) -> Result<()> {
        Ok(())
    }
}

/// How a family's own keys (beyond the common ones) read into model parts and write back.
/// A family whose keys are one config struct gets it from [`OneStruct`]; the others (several
/// structs, or keys that depend on the family's variant) implement it.
pub(super) trait ConfigKeys: FamilyConfig {
    /// The keys it reads beyond the common ones (each its config structs' fields).
    fn keys(&self) -> Vec<&'static str>;

    /// Its keys of a parsed `config.json` with the common keys `common`, as model parts.
    fn parts(&self, config: &Value, common: &Common) -> Result<Parts>;

    /// Its keys of model `m` (already checked against [`FamilyConfig::support`]).
    fn write(&self, m: &Model) -> Result<Map<String, Value>>;
}

/// A family whose own keys are one config struct ([`OwnKeys`]): its key list is the struct's
/// fields, its import reads the struct, its export writes it.
pub(super) trait OneStruct: FamilyConfig {
    /// The struct of its own keys.
    type Keys: OwnKeys;
}

/// A family's config struct: what its keys mean as model parts, and the keys of a model.
pub(super) trait OwnKeys: Serialize + DeserializeOwned {
    /// The struct's keys, with the common keys `common`, as model parts.
    fn parts(&self, common: &Common) -> Result<Parts>;

    /// The struct's keys for model `m` (already checked against the family's support).
    fn of(m: &Model) -> Result<Self>;
}

impl<F: OneStruct> ConfigKeys for F {
    fn keys(&self) -> Vec<&'static str> {
        field_names::<F::Keys>()
    }

    fn parts(&self, config: &Value, common: &Common) -> Result<Parts> {
        read::<F::Keys>(config)?.parts(common)
    }

    fn write(&self, m: &Model) -> Result<Map<String, Value>> {
        object(F::Keys::of(m)?)
    }
}

/// A multimodal wrapper whose `text_config` is a family's config.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wrapper {
    /// The wrapper's `model_type`.
    pub model_type: &'static str,
    /// Its architecture when the config names none.
    pub architecture: &'static str,
}

/// A family's config keys for the model fields whose key differs between families.
#[derive(Debug, Clone, Copy)]
pub(super) struct Words {
    /// The routed experts' count (`model.moe.experts`).
    pub experts: &'static str,
    /// A routed expert's width (`model.moe.expert_ffn`).
    pub expert_ffn: &'static str,
    /// A shared expert's width (`model.moe.shared_ffn`).
    pub shared_ffn: &'static str,
    /// A dense layer's width (`model.dense.ffn`).
    pub dense_ffn: &'static str,
    /// The window's size (`model.window.size`).
    pub window: &'static str,
    /// The routed experts a token uses (`model.moe.top_k`): read and written in place of
    /// the common `num_experts_per_tok` when it differs (Gemma 4's `top_k_experts`).
    pub top_k: &'static str,
    /// The family's own fields and their keys (a mixer's shape, a layer pattern), read
    /// before the common ones: `(model field, config key)`, the longer field first.
    pub own: &'static [(&'static str, &'static str)],
}

/// The common key of the routed experts a token uses.
pub(super) const TOP_K: &str = "num_experts_per_tok";

impl Words {
    /// Mixtral's words, which most families keep.
    pub const LOCAL: Words = Words {
        experts: "num_local_experts",
        expert_ffn: "intermediate_size",
        shared_ffn: "moe_intermediate_size",
        dense_ffn: "intermediate_size",
        window: "sliding_window",
        top_k: TOP_K,
        own: &[],
    };

    /// DeepSeek's MoE words (DeepSeek, Kimi-K2, GLM-4.5).
    pub const ROUTED: Words = Words {
        experts: "n_routed_experts",
        expert_ffn: "moe_intermediate_size",
        ..Words::LOCAL
    };
}

/// A config struct as a JSON object.
pub(super) fn object(value: impl Serialize) -> Result<Map<String, Value>> {
    match serde_json::to_value(value).map_err(|e| Error::serialize("config.json", e))? {
        Value::Object(m) => Ok(m),
        _ => Err(Error::serialize("config.json", "a config is not an object")),
    }
}
