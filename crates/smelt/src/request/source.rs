//! What a request reads: a model, a budget or grid, a JSON document, given by path or
//! inline, and the workload changes.

use std::path::{Path, PathBuf};

use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::budget::file::is_hf_config;
use crate::budget::{Budget, GridSpec};
use crate::error::{Error, Result};
use crate::model::{ModelSpec, Workload, WorkloadChanges};

/// A model: a path, a model file's structure, or a Hugging Face `config.json` (module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ModelSource {
    /// A model file, a `config.json`, or a model directory smelt exported.
    Path(PathBuf),
    /// A model file's structure (`{"model": {...}, "workload": {...}}`).
    Model(Value),
    /// A Hugging Face `config.json`, imported at [`ModelSpec::default_workload`].
    Hf(Value),
}

impl<'de> Deserialize<'de> for ModelSource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(p) => Ok(Self::Path(path(p)?)),
            v if is_hf_config(&v) => Ok(Self::Hf(v)),
            v @ Value::Object(_) => Ok(Self::Model(v)),
            other => Err(D::Error::custom(format!(
                "expected a path or a model (a dict), got {}",
                kind(&other)
            ))),
        }
    }
}

/// A path given as a string, refused when it is plainly a file's text instead.
fn path<E: serde::de::Error>(p: String) -> std::result::Result<PathBuf, E> {
    if p.trim().is_empty() {
        return Err(E::custom(
            "is an empty path: give a file's path, or its structure as a dict",
        ));
    }
    let t = p.trim_start();
    let text = p.contains('\n') || t.starts_with('[') || t.starts_with('{');
    match text && !Path::new(&p).exists() {
        true => Err(E::custom(
            "got the text of a file where a path is expected: pass a path to the file, or its \
             structure as a dict (e.g. tomllib.loads(text) or json.loads(text))",
        )),
        false => Ok(PathBuf::from(p)),
    }
}

/// What a JSON value is, in words.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a dict",
    }
}

impl ModelSource {
    /// The model, validated, at its workload with `changes` applied.
    pub fn load(&self, changes: &WorkloadChanges) -> Result<ModelSpec> {
        let mut spec = match self {
            Self::Path(p) => ModelSpec::load(p)?,
            Self::Model(v) => ModelSpec::from_json_str(&v.to_string())?,
            Self::Hf(v) => crate::hf::import(&v.to_string(), ModelSpec::default_workload())?,
        };
        if !changes.is_empty() {
            spec.workload = changes.apply(&spec.workload)?;
        }
        Ok(spec)
    }

    /// The file it reads, if any (which no output may replace).
    pub fn input(&self) -> Option<PathBuf> {
        match self {
            Self::Path(p) if p.is_dir() => Some(p.join("config.json")),
            Self::Path(p) => Some(p.clone()),
            _ => None,
        }
    }
}

/// A budget or grid: a path to its file, or its file's structure (relative paths in it taken
/// from the request's `base_dir`, default the working folder).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum BudgetSource {
    /// The file.
    Path(PathBuf),
    /// The file's structure.
    Inline(Value),
}

impl<'de> Deserialize<'de> for BudgetSource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(p) => Ok(Self::Path(path(p)?)),
            v @ Value::Object(_) => Ok(Self::Inline(v)),
            other => Err(D::Error::custom(format!(
                "expected a path or a dict of the file's structure, got {}",
                kind(&other)
            ))),
        }
    }
}

impl BudgetSource {
    fn dir(base_dir: Option<&Path>) -> &Path {
        base_dir.unwrap_or(Path::new("."))
    }

    /// The budget, at its workload with `changes` applied.
    pub fn budget(&self, base_dir: Option<&Path>, changes: &WorkloadChanges) -> Result<Budget> {
        let b = match self {
            Self::Path(p) => Budget::load(p)?,
            Self::Inline(v) => Budget::from_json_str(&v.to_string(), Self::dir(base_dir))?,
        };
        with_changes(b, changes)
    }

    /// The grid, every cell at its workload with `changes` applied.
    pub fn grid(&self, base_dir: Option<&Path>, changes: &WorkloadChanges) -> Result<GridSpec> {
        let mut g = match self {
            Self::Path(p) => GridSpec::load(p)?,
            Self::Inline(v) => GridSpec::from_json_str(&v.to_string(), Self::dir(base_dir))?,
        };
        for cell in &mut g.cells {
            cell.budget = with_changes(cell.budget.clone(), changes)?;
        }
        Ok(g)
    }

    /// The file it names, if any.
    pub fn input(&self) -> Option<PathBuf> {
        match self {
            Self::Path(p) => Some(p.clone()),
            Self::Inline(_) => None,
        }
    }
}

/// `b` at its workload with `changes` applied (unchanged when there are none).
pub(crate) fn with_changes(b: Budget, changes: &WorkloadChanges) -> Result<Budget> {
    match changes.is_empty() {
        true => Ok(b),
        false => b.with_workload(changes.apply(&b.baseline().workload)?),
    }
}

/// A JSON document (a bench report, a grid shard, a Baseline's `config.json`): a path to
/// it, or the document itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum JsonOrPath {
    /// The file.
    Path(PathBuf),
    /// The document.
    Inline(Value),
}

impl<'de> Deserialize<'de> for JsonOrPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(p) => Ok(Self::Path(path(p)?)),
            v @ Value::Object(_) => Ok(Self::Inline(v)),
            other => Err(D::Error::custom(format!(
                "expected a path or a dict, got {}",
                kind(&other)
            ))),
        }
    }
}

impl JsonOrPath {
    /// The document's text and a name for it in messages (`field`, or the file's path).
    pub fn text(&self, field: &str) -> Result<(String, String)> {
        match self {
            Self::Path(p) => {
                let text = crate::io::read_to_string(p)?;
                // A UTF-8 byte-order mark is not part of the JSON.
                let text = text.strip_prefix('\u{feff}').unwrap_or(&text).to_owned();
                Ok((text, p.display().to_string()))
            }
            Self::Inline(v) => Ok((v.to_string(), field.to_owned())),
        }
    }

    /// The document.
    pub fn value(&self, field: &str) -> Result<Value> {
        let (text, name) = self.text(field)?;
        serde_json::from_str(&text)
            .map_err(|e| Error::invalid(field, format!("'{name}' is not JSON: {e}")))
    }

    /// The file it names, if any.
    pub fn input(&self) -> Option<PathBuf> {
        match self {
            Self::Path(p) => Some(p.clone()),
            Self::Inline(_) => None,
        }
    }
}

/// A document-length histogram: a CSV file (header `length,count`) or `[[length, count],
/// ...]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum DocLengths {
    /// The CSV file.
    Path(PathBuf),
    /// The histogram.
    Pairs(Vec<[u64; 2]>),
}

impl<'de> Deserialize<'de> for DocLengths {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(p) => Ok(Self::Path(path(p)?)),
            v @ Value::Array(_) => serde_json::from_value(v)
                .map(Self::Pairs)
                .map_err(|e| D::Error::custom(format!("a list of [length, count] pairs: {e}"))),
            other => Err(D::Error::custom(format!(
                "expected a CSV path or a list of [length, count] pairs, got {}",
                kind(&other)
            ))),
        }
    }
}

/// The parts of a workload a request replaces (`smelt ... --context --mean-doc-len
/// --doc-lengths --dense`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadRequest {
    /// Packed sequence length, tokens.
    #[serde(default)]
    pub context: Option<u64>,
    /// Mean document length, tokens (replaces a histogram).
    #[serde(default)]
    pub mean_doc_len: Option<u64>,
    /// A document-length histogram (replaces a mean).
    #[serde(default)]
    pub doc_lengths: Option<DocLengths>,
    /// Dense attention instead of causal.
    #[serde(default)]
    pub dense: bool,
}

impl WorkloadRequest {
    /// Whether no change is asked for.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The changes, a histogram file read.
    pub fn changes(&self) -> Result<WorkloadChanges> {
        let doc_lengths = match &self.doc_lengths {
            None => None,
            Some(DocLengths::Pairs(p)) => Some(p.clone()),
            Some(DocLengths::Path(p)) => {
                let text = crate::io::read_to_string(p)?;
                Some(Workload::histogram_from_csv(
                    &text,
                    &p.display().to_string(),
                )?)
            }
        };
        for (what, v) in [
            ("context", self.context),
            ("mean_doc_len", self.mean_doc_len),
        ] {
            if v == Some(0) {
                return Err(Error::invalid(
                    format!("workload.{what}"),
                    "must be at least 1 token",
                ));
            }
        }
        Ok(WorkloadChanges {
            context: self.context,
            mean_doc_len: self.mean_doc_len,
            doc_lengths,
            dense: self.dense,
        })
    }

    /// The file it reads, if any.
    pub fn input(&self) -> Option<PathBuf> {
        match &self.doc_lengths {
            Some(DocLengths::Path(p)) => Some(p.clone()),
            _ => None,
        }
    }
}
