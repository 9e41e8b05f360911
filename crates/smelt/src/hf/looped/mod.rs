//! A looped model for Transformers: a model directory in the Hub's custom-code convention.
//!
//! A family's `config.json` cannot say that layers repeat: `AutoModelForCausalLM.from_config`
//! on it builds the unlooped model, cheaper than the one smelt matched, and says nothing. So
//! a looped match is written as a directory that builds exactly the model smelt costed:
//!
//! * `config.json`, with `model_type = "smelt_looped"` (a type stock Transformers does not
//!   know, so without `trust_remote_code` it refuses instead of building another model),
//!   `auto_map` naming the two files below, `text_config`: the family's own config for the
//!   *physical* layers (what [`super::export`] writes, without the `smelt_loop_*` keys), and
//!   the loop in `loop_first_layer` (1-based), `loop_span`, `loop_repeats` and
//!   `loop_residual_scale`;
//! * `configuration_smelt_looped.py` and `modeling_smelt_looped.py`: the family's causal-LM
//!   class built as it is (its decoder layers, attention and experts are Transformers' own),
//!   one layer per physical layer, run in the matched order (the layers before the span, the
//!   span `loop_repeats` times, the rest) with each visit in its own cache slot (its keys and
//!   values, or a recurrent layer's conv and recurrent state: Gated DeltaNet's, Mamba-2's)
//!   and the span's residual updates scaled by `loop_residual_scale`: the token mixer's and
//!   the FFN's outputs (attention or Gated DeltaNet; Nemotron-H's one block per layer), or
//!   the post norms' where the family norms an update before adding it (Gemma 4).
//!
//! [`super::import_value`] reads such a `config.json` back with its loop (`smelt cost DIR`).
//! The Python files are templates kept beside this module (`looped/`), tested by pytest
//! against Transformers for every family smelt exports.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The `model_type` of a looped model directory.
pub const MODEL_TYPE: &str = "smelt_looped";

/// The configuration class a looped model directory carries.
pub const CONFIGURATION_PY: &str = include_str!("configuration_smelt_looped.py");

/// The modeling class a looped model directory carries.
pub const MODELING_PY: &str = include_str!("modeling_smelt_looped.py");

/// The loop keys of a family export and their names in a looped model directory.
const LOOP_KEYS: [(&str, &str); 4] = [
    ("smelt_loop_first_layer", "loop_first_layer"),
    ("smelt_loop_span", "loop_span"),
    ("smelt_loop_repeats", "loop_repeats"),
    ("smelt_loop_residual_scale", "loop_residual_scale"),
];

/// `key` (or a path beginning with it) with a family export's loop key (`smelt_loop_span`)
/// spelt as a looped model directory's `config.json` spells it (`loop_span`): the only file
/// smelt writes a loop into, so the one its messages name.
pub(crate) fn file_key(key: &str) -> String {
    LOOP_KEYS
        .iter()
        .find_map(|(inner, outer)| key.strip_prefix(inner).map(|rest| format!("{outer}{rest}")))
        .unwrap_or_else(|| key.to_owned())
}

/// The files of a model directory, by name, in the order they are written.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelDir {
    /// `(file name, contents)`: `config.json` first.
    pub files: Vec<(&'static str, String)>,
}

/// Whether a family export (from [`super::export`] or [`super::export_match`]) loops, so
/// that it must be written as a directory ([`model_dir`]) rather than a bare `config.json`.
pub fn is_looped(family_config: &Value) -> bool {
    family_config.get(LOOP_KEYS[0].0).is_some()
}

/// The directory of a looped family export: its `config.json` and the two Python files. An
/// export without a loop is refused (it is a plain `config.json` of its family).
pub fn model_dir(family_config: &Value) -> Result<ModelDir> {
    let Some(map) = family_config.as_object() else {
        return Err(Error::invalid("config.json", "must be an object"));
    };
    if !is_looped(family_config) {
        return Err(Error::invalid(
            "config.json",
            "has no loop: write it as a plain config.json of its family",
        ));
    }
    let mut text = map.clone();
    let mut top = Map::new();
    for (from, to) in LOOP_KEYS {
        if let Some(v) = text.remove(from) {
            top.insert(to.to_owned(), v);
        }
    }
    top.insert(
        "architectures".to_owned(),
        Value::from(vec!["SmeltLoopedForCausalLM"]),
    );
    let mut auto_map = Map::new();
    auto_map.insert(
        "AutoConfig".to_owned(),
        Value::from("configuration_smelt_looped.SmeltLoopedConfig"),
    );
    auto_map.insert(
        "AutoModelForCausalLM".to_owned(),
        Value::from("modeling_smelt_looped.SmeltLoopedForCausalLM"),
    );
    top.insert("auto_map".to_owned(), Value::Object(auto_map));
    top.insert("model_type".to_owned(), Value::from(MODEL_TYPE));
    // Carried to the top, where Transformers reads them: the tie, and the dtype a model
    // built from the config gets (the Baseline's, not float32).
    for key in ["tie_word_embeddings", "dtype", "torch_dtype"] {
        if let Some(v) = text.get(key) {
            top.insert(key.to_owned(), v.clone());
        }
    }
    top.insert("text_config".to_owned(), Value::Object(text));
    let config = serde_json::to_string_pretty(&Value::Object(top))
        .map_err(|e| Error::serialize("config.json", e))?;
    Ok(ModelDir {
        files: vec![
            ("config.json", format!("{config}\n")),
            ("configuration_smelt_looped.py", CONFIGURATION_PY.to_owned()),
            ("modeling_smelt_looped.py", MODELING_PY.to_owned()),
        ],
    })
}

impl ModelDir {
    /// The files of an export: a looped one's directory ([`model_dir`]), or the plain
    /// `config.json` of an export without a loop.
    pub fn of(family_config: &Value) -> Result<Self> {
        if is_looped(family_config) {
            return model_dir(family_config);
        }
        let config = serde_json::to_string_pretty(family_config)
            .map_err(|e| Error::serialize("config.json", e))?;
        Ok(Self {
            files: vec![("config.json", format!("{config}\n"))],
        })
    }

    /// Whether this is a looped model's directory (more than a `config.json`).
    pub fn is_looped(&self) -> bool {
        self.files.len() > 1
    }

    /// The files as `(path under `under`, contents)`, for [`crate::io::write_tree`].
    pub fn entries(&self, under: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        (self.files.iter())
            .map(|(name, text)| (under.join(name), text.clone().into_bytes()))
            .collect()
    }

    /// Writes the files into `dir` (created if missing; an existing directory keeps its other
    /// files) all or nothing, never over one of `inputs`, and over a file smelt did not
    /// write only as `overwrite` allows ([`crate::io::write_tree`]); returns the paths
    /// written.
    pub fn write(
        &self,
        dir: &Path,
        inputs: &[PathBuf],
        overwrite: crate::io::Overwrite,
    ) -> Result<Vec<PathBuf>> {
        crate::io::write_tree(dir, &self.entries(Path::new("")), inputs, overwrite)
    }
}

/// The family config a `config.json` holds: a looped model directory's `text_config` with
/// its loop (as [`super::import_value`] reads it), any other as it is; so that an export of
/// a looped directory is written in the family it holds.
pub fn family_config(config: &Value) -> Result<Value> {
    match config.as_object() {
        Some(map) if map.get("model_type").and_then(Value::as_str) == Some(MODEL_TYPE) => {
            as_family_config(map)
        }
        _ => Ok(config.clone()),
    }
}

/// A looped model directory's `config.json` as the family config [`super::import_value`]
/// reads: its `text_config` with the loop in the `smelt_loop_*` keys.
pub(super) fn as_family_config(map: &Map<String, Value>) -> Result<Value> {
    let field = |key: &str| format!("config.json: {key}");
    let mut text = match map.get("text_config") {
        Some(Value::Object(t)) => t.clone(),
        Some(_) => return Err(Error::invalid(field("text_config"), "must be an object")),
        None => {
            return Err(Error::invalid(
                field("text_config"),
                "missing: a smelt_looped config holds its family's config there",
            ));
        }
    };
    for (inner, outer) in LOOP_KEYS {
        if text.contains_key(inner) {
            return Err(Error::invalid(
                field(&format!("text_config.{inner}")),
                format!("a smelt_looped config gives its loop as {outer} beside text_config"),
            ));
        }
        match map.get(outer) {
            Some(v) => {
                text.insert(inner.to_owned(), v.clone());
            }
            None if outer == "loop_residual_scale" => {}
            None => return Err(Error::invalid(field(outer), "missing")),
        }
    }
    Ok(Value::Object(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export() -> Value {
        serde_json::json!({
            "model_type": "mixtral",
            "num_hidden_layers": 4,
            "tie_word_embeddings": false,
            "smelt_loop_first_layer": 2,
            "smelt_loop_span": 2,
            "smelt_loop_repeats": 2,
            "smelt_loop_residual_scale": 0.5,
        })
    }

    #[test]
    fn a_looped_export_becomes_a_directory_and_reads_back() {
        let dir = model_dir(&export()).unwrap();
        let names: Vec<_> = dir.files.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "config.json",
                "configuration_smelt_looped.py",
                "modeling_smelt_looped.py"
            ]
        );
        let config: Value = serde_json::from_str(&dir.files[0].1).unwrap();
        assert_eq!(config["model_type"], MODEL_TYPE);
        assert_eq!(config["loop_span"], 2);
        assert_eq!(config["text_config"]["model_type"], "mixtral");
        assert!(config["text_config"].get("smelt_loop_span").is_none());
        let back = as_family_config(config.as_object().unwrap()).unwrap();
        assert_eq!(back, export());
    }

    #[test]
    fn a_directory_is_written_and_an_unlooped_export_is_one_file() {
        let root = std::env::temp_dir().join(format!("smelt-looped-{}", std::process::id()));
        let dir = root.join("looped");
        let written = ModelDir::of(&export())
            .unwrap()
            .write(&dir, &[], Default::default())
            .unwrap();
        assert_eq!(written.len(), 3);
        let back = crate::io::read_to_string(dir.join("modeling_smelt_looped.py")).unwrap();
        assert_eq!(back, MODELING_PY);
        let mut plain = export();
        plain
            .as_object_mut()
            .unwrap()
            .remove("smelt_loop_first_layer");
        let one = ModelDir::of(&plain).unwrap();
        assert!(!one.is_looped());
        let file = root.join("file");
        std::fs::write(&file, "x").unwrap();
        let e = one
            .write(&file, &[], Default::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a directory"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn hybrid_and_gemma4_exports_become_directories() {
        // Their recurrent layers and post norms are the templates' to loop (pytest checks
        // what Transformers builds): nothing in the family's config is refused here.
        for family in [
            "qwen3_next",
            "qwen3_5_moe_text",
            "nemotron_h",
            "gemma4_text",
        ] {
            let mut e = export();
            e["model_type"] = Value::from(family);
            let dir = model_dir(&e).unwrap();
            let config: Value = serde_json::from_str(&dir.files[0].1).unwrap();
            assert_eq!(config["text_config"]["model_type"], family);
            assert_eq!(as_family_config(config.as_object().unwrap()).unwrap(), e);
        }
    }

    #[test]
    fn an_unlooped_export_is_not_a_directory() {
        let mut plain = export();
        for (k, _) in LOOP_KEYS {
            plain.as_object_mut().unwrap().remove(k);
        }
        assert!(!is_looped(&plain));
        let e = model_dir(&plain).unwrap_err().to_string();
        assert!(e.contains("has no loop"), "{e}");
    }

    #[test]
    fn a_looped_config_without_its_parts_is_refused() {
        let config: Value =
            serde_json::from_str(&model_dir(&export()).unwrap().files[0].1).unwrap();
        let mut no_text = config.as_object().unwrap().clone();
        no_text.remove("text_config");
        let e = as_family_config(&no_text).unwrap_err().to_string();
        assert!(e.contains("config.json: text_config: missing"), "{e}");
        let mut no_span = config.as_object().unwrap().clone();
        no_span.remove("loop_span");
        let e = as_family_config(&no_span).unwrap_err().to_string();
        assert!(e.contains("config.json: loop_span: missing"), "{e}");
        let mut both = config.as_object().unwrap().clone();
        both["text_config"]["smelt_loop_span"] = Value::from(2);
        let e = as_family_config(&both).unwrap_err().to_string();
        assert!(e.contains("text_config.smelt_loop_span"), "{e}");
    }
}
