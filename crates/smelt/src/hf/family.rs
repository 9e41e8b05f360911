//! What a family module provides ([`FamilyConfig`]) and the one list of the families
//! ([`FAMILIES`]). The import, the export and the key lists look a family up here; the
//! command line's help, the Python docstring and the README's table of families are made
//! from (or checked against) this list, so a family is described once.
//!
//! Adding a family: a [`Family`] variant and its line in [`FAMILIES`] (here, in the same
//! order), and a module implementing [`FamilyConfig`]; `SMELT_BLESS=1 cargo test --release
//! --test tests hf_registry` then rewrites the README's table, and the tests name every
//! other list that lacks it (the Python docstring) and every family without a published
//! config in tests/data/hf/.

use serde::Serialize;
use serde_json::{Map, Value};

use super::support::Support;
use super::{
    Common, Parts, deepseek, gemma4, glm_dsa, gpt_oss, granite, llama4, minimax, mixtral,
    nemotron_h, olmoe, phimoe, qwen, qwen_next,
};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::names::named_enum;

named_enum! {
    /// A Hugging Face model family (`model_type`) smelt reads and writes; what it reads and
    /// writes is its entry in the family list ([`families_markdown`] says what).
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

/// One Hugging Face family (`model_type`): its names, how its config reads into a model and
/// a model writes back as its config, what its modeling code can build, and its documentation.
pub(super) trait FamilyConfig: Sync {
    /// The family this describes.
    fn family(&self) -> Family;

    /// The Transformers class an exported config names in `architectures`.
    fn architecture(&self) -> &'static str;

    /// One line for people: the models it holds (the command line's help).
    fn about(&self) -> &'static str;

    /// What smelt reads beyond the common keys, in Markdown (the README's table).
    fn reads(&self) -> &'static str;

    /// What its modeling code builds: the export refuses any other model.
    fn support(&self) -> &Support;

    /// The keys it reads beyond the common ones (each its config structs' fields).
    fn keys(&self) -> Vec<&'static str>;

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

    /// Refusals checked before any key is read (a use of a key smelt does not describe).
    fn refuse(&self, _config: &Map<String, Value>) -> Result<()> {
        Ok(())
    }

    /// Its keys of a parsed `config.json` with the common keys `common`, as model parts.
    fn parts(&self, config: &Value, common: &Common) -> Result<Parts>;

    /// Its keys of model `m` (already checked against [`FamilyConfig::support`]).
    fn write(&self, m: &Model) -> Result<Map<String, Value>>;
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
    };

    /// DeepSeek's MoE words (DeepSeek, Kimi-K2, GLM-4.5).
    pub const ROUTED: Words = Words {
        experts: "n_routed_experts",
        expert_ffn: "moe_intermediate_size",
        ..Words::LOCAL
    };
}

/// Every family, in [`Family::ALL`]'s order (a test checks it): the one list the import,
/// the export and the documentation read.
pub(super) static FAMILIES: &[&dyn FamilyConfig] = &[
    &mixtral::Mixtral,
    &qwen::Qwen2MoeFamily,
    &qwen::Qwen3MoeFamily,
    &olmoe::Olmoe,
    &deepseek::V2,
    &deepseek::V3,
    &deepseek::V32,
    &deepseek::KIMI_K2,
    &deepseek::Glm4Moe,
    &glm_dsa::GlmMoeDsa,
    &gpt_oss::GptOss,
    &minimax::MinimaxM2,
    &llama4::Llama4Text,
    &granite::GraniteMoe,
    &phimoe::Phimoe,
    &qwen_next::Qwen3Next,
    &qwen_next::Qwen3_5MoeText,
    &gemma4::Gemma4Text,
    &nemotron_h::NemotronH,
];

// Every family has its line: `Family::config` indexes this list.
const _: () = assert!(FAMILIES.len() == Family::ALL.len());

impl Family {
    /// The family's entry in [`FAMILIES`].
    pub(super) fn config(self) -> &'static dyn FamilyConfig {
        FAMILIES[self as usize]
    }

    /// The Transformers class an exported config names in `architectures`.
    pub fn architecture(self) -> &'static str {
        self.config().architecture()
    }

    /// The `model_type` an exported config names: the family's own, but `deepseek_v3` for
    /// Kimi-K2, which Transformers knows only as DeepSeek-V3's classes (its checkpoints
    /// reach them through their own remote code).
    pub fn exported_model_type(self) -> &'static str {
        match self {
            Family::KimiK2 => Family::DeepseekV3.as_str(),
            f => f.as_str(),
        }
    }

    /// One line for people: the models the family holds.
    pub fn about(self) -> &'static str {
        self.config().about()
    }

    /// The `model_type` of a multimodal wrapper smelt reads as this family (its
    /// `text_config`): `llama4` for `llama4_text`.
    pub fn wrapper(self) -> Option<&'static str> {
        self.config().wrapper().map(|w| w.model_type)
    }

    /// Every key smelt reads for this family (and writes on export, with the
    /// `smelt_loop_*` keys when the model loops).
    pub fn keys(self) -> Vec<&'static str> {
        let top_k = self.config().words().top_k;
        let mut keys: Vec<&'static str> = super::field_names::<Common>()
            .into_iter()
            .map(|k| if k == TOP_K { top_k } else { k })
            .collect();
        keys.extend(self.config().keys());
        keys
    }

    /// The family that a `config.json`'s `model_type` names, directly or as a wrapper.
    pub(super) fn of_model_type(model_type: &str) -> Option<(Family, Option<Wrapper>)> {
        FAMILIES.iter().find_map(|f| match f.wrapper() {
            Some(w) if w.model_type == model_type => Some((f.family(), Some(w))),
            _ if f.family().as_str() == model_type => Some((f.family(), None)),
            _ => None,
        })
    }
}

/// Every family's `model_type`, comma-separated, a wrapper after its family: "mixtral, ...,
/// llama4_text (and a llama4 wrapper's text decoder), ...". The command line's help says
/// this, and a test checks that the Python docstring does.
pub fn families_list() -> String {
    let names: Vec<String> = FAMILIES
        .iter()
        .map(|f| match f.wrapper() {
            Some(w) => format!(
                "{} (and a {} wrapper's text decoder)",
                f.family(),
                w.model_type
            ),
            None => f.family().to_string(),
        })
        .collect();
    names.join(", ")
}

/// The README's table of families: each `model_type` (with its wrapper) and what smelt reads
/// beyond the common keys, in Markdown, one row per family in [`Family::ALL`]'s order. A
/// test checks that the README (or the guide) shows exactly this between its
/// `<!-- families:begin -->` and `<!-- families:end -->` markers.
pub fn families_markdown() -> String {
    let mut out =
        String::from("| `model_type` | what smelt reads beyond the common keys |\n|---|---|\n");
    for f in FAMILIES {
        let name = match f.wrapper() {
            Some(w) => format!(
                "`{}`, and a `{}` wrapper's `text_config`",
                f.family(),
                w.model_type
            ),
            None => format!("`{}`", f.family()),
        };
        out.push_str(&format!("| {name} | {} |\n", f.reads()));
    }
    out
}

/// A config struct as a JSON object.
pub(super) fn object(value: impl Serialize) -> Result<Map<String, Value>> {
    match serde_json::to_value(value).map_err(|e| Error::serialize("config.json", e))? {
        Value::Object(m) => Ok(m),
        _ => Err(Error::serialize("config.json", "a config is not an object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_follows_the_enum() {
        for (i, f) in Family::ALL.iter().enumerate() {
            assert_eq!(FAMILIES[i].family(), *f, "FAMILIES[{i}]");
            assert_eq!(f.config().family(), *f);
        }
    }

    #[test]
    fn every_family_is_documented() {
        for f in FAMILIES {
            let name = f.family();
            assert!(!f.about().is_empty(), "{name}: about");
            assert!(!f.reads().is_empty(), "{name}: reads");
            assert!(!f.reads().contains('|'), "{name}: reads breaks the table");
            assert!(f.architecture().ends_with("ForCausalLM"), "{name}");
        }
    }
}
