//! Reading a model from a path: a Hugging Face `config.json` or a smelt model file. It lives
//! here, not in [`crate::model`], so that the model types know nothing of Hugging Face.

use std::path::Path;

use crate::error::Result;
use crate::model::ModelSpec;

impl ModelSpec {
    /// Reads, parses and validates a model file; a `.json` file is imported as a Hugging
    /// Face `config.json` ([`crate::hf`]) at [`ModelSpec::default_workload`], and so is a
    /// model directory's `config.json` (a looped export, [`crate::hf::looped`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if path.is_dir() {
            let text = crate::io::read_to_string(path.join("config.json"))?;
            return super::import(&text, Self::default_workload());
        }
        let text = crate::io::read_to_string(path)?;
        if path.extension().is_some_and(|e| e == "json") {
            return super::import(&text, Self::default_workload());
        }
        Self::from_toml_str(&text)
    }
}
