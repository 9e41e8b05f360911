//! The one list of the families ([`FAMILIES`]) and what is looked up in it. The import, the
//! export and the key lists find a family here; the command line's help, the Python
//! docstring and the guide's table of families are made from (or checked against) this
//! list, so a family is described once. The family modules implement `family.rs`'s traits
//! and know nothing of this list.

use super::family::{ConfigKeys, Family, TOP_K, Wrapper};
use super::{
    Common, deepseek, gemma4, glm_dsa, gpt_oss, granite, llama4, minimax, mixtral, nemotron_h,
    olmoe, phimoe, qwen, qwen_next,
};

/// Every family, in [`Family::ALL`]'s order (a test checks it): the one list the import,
/// the export and the documentation read.
pub(super) static FAMILIES: &[&dyn ConfigKeys] = &[
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
    pub(super) fn config(self) -> &'static dyn ConfigKeys {
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
        keys.extend(self.config().jitter_key());
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

/// The guide's table of families: each `model_type` (with its wrapper) and what smelt reads
/// beyond the common keys, in Markdown, one row per family in [`Family::ALL`]'s order. A
/// test checks that the guide (or the README) shows exactly this between its
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
