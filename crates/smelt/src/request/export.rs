//! The export request: a budget matched then written, or a result smelt returned (a match,
//! grid or sweep, or a model) written, in either format.

use std::path::PathBuf;

use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Request;
use super::ops::checked_output;
use super::source::{BudgetSource, JsonOrPath, WorkloadRequest};
use crate::budget::Mode;
use crate::cost::Residuals;
use crate::error::{Error, Result};
use crate::export::{
    ExportFormat, ExportOptions, Exported, Item, cell_item, match_item, row_item, write_all,
    write_one,
};
use crate::io::Overwrite;
use crate::model::ModelSpec;
use crate::progress::Progress;
use crate::search::SearchOptions;
use crate::study::Knob;

/// What to export: a budget (a path, or its structure), matched first (a path to a model
/// file, a `config.json` or a model directory is that model, written as it is); a result smelt
/// returned (an object with `looped`, `cells`, `rows` or `model`); or a Hugging Face
/// `config.json` (an object with `model_type` and no `model`), its model written with its
/// own keys carried over.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ExportSource {
    /// A budget.
    Budget(BudgetSource),
    /// A result, or a model.
    Result(Value),
    /// A Hugging Face `config.json`.
    Hf(Value),
}

impl<'de> Deserialize<'de> for ExportSource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let is_result = |m: &serde_json::Map<String, Value>| {
            ["looped", "cells", "rows", "model"]
                .iter()
                .any(|k| m.contains_key(*k))
        };
        match v {
            v if crate::budget::file::is_hf_config(&v) => Ok(Self::Hf(v)),
            Value::Object(m) if is_result(&m) => Ok(Self::Result(Value::Object(m))),
            v => BudgetSource::deserialize(v)
                .map(Self::Budget)
                .map_err(D::Error::custom),
        }
    }
}

/// `smelt match --format hf|model -o PATH`, `smelt grid/sweep --export PATH`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    /// What to export.
    pub source: ExportSource,
    /// Where: a model directory, a model file, or a folder of them.
    pub path: PathBuf,
    /// `hf` or `model`.
    pub format: ExportFormat,
    /// The Hugging Face family (`hf`).
    #[serde(default)]
    pub family: Option<crate::hf::Family>,
    /// The vocabulary written when the Baseline has none (`hf`).
    #[serde(default)]
    pub vocab: Option<u64>,
    /// For a result: the Baseline's `config.json`, its other keys carried over.
    #[serde(default)]
    pub baseline: Option<JsonOrPath>,
    /// Where relative paths of an inline budget are taken from.
    #[serde(default)]
    pub base_dir: Option<PathBuf>,
    /// Search a lattice over the size limit (a budget).
    #[serde(default)]
    pub force: bool,
    /// Replace files smelt did not write (never an input).
    #[serde(default)]
    pub overwrite: bool,
    /// Workload changes (a budget).
    #[serde(default)]
    pub workload: WorkloadRequest,
}

/// What an export wrote: where, what, and the match's residuals when it matched a budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportReply {
    /// The path written.
    pub path: PathBuf,
    /// One entry per model written.
    pub models: Vec<Exported>,
    /// The match's residuals, when a budget was matched.
    pub residuals: Option<Residuals>,
}

/// A name, as results carry their Baseline's.
#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct MatchView {
    #[serde(default)]
    name: Option<String>,
    mode: Mode,
    baseline: Named,
    looped: ModelSpec,
    residuals: Residuals,
}

#[derive(Deserialize)]
struct CellView {
    scale: String,
    sparsity_label: String,
    baseline: Named,
    looped: ModelSpec,
    residuals: Residuals,
}

#[derive(Deserialize)]
struct GridView {
    mode: Mode,
    cells: Vec<CellView>,
}

#[derive(Deserialize)]
struct RowView {
    value: u64,
    looped: ModelSpec,
    residuals: Residuals,
}

#[derive(Deserialize)]
struct SweepView {
    knob: Knob,
    baseline: Named,
    rows: Vec<RowView>,
}

/// A result read back, as what it was.
enum View {
    Match(Box<MatchView>),
    Grid(GridView),
    Sweep(SweepView),
    Model(Box<ModelSpec>),
}

impl View {
    fn of(v: &Value) -> Result<Self> {
        let read = |what: &str| -> Error {
            Error::invalid(
                "source",
                format!("is not a {what} smelt returned: read it back unchanged"),
            )
        };
        let from = |what: &'static str| {
            move |e: Error| match e {
                Error::InvalidSpec { field, rule } => Error::invalid(
                    format!("source.{field}"),
                    format!("not a {what} smelt returned: {rule}"),
                ),
                e => Error::invalid("source", format!("not a {what} smelt returned: {e}")),
            }
        };
        let view = if v.get("cells").is_some() {
            View::Grid(crate::strict_toml::from_json_value(v.clone()).map_err(from("grid result"))?)
        } else if v.get("rows").is_some() {
            View::Sweep(
                crate::strict_toml::from_json_value(v.clone()).map_err(from("sweep result"))?,
            )
        } else if v.get("looped").is_some() {
            View::Match(
                crate::strict_toml::from_json_value(v.clone()).map_err(from("match result"))?,
            )
        } else if v.get("model").is_some() {
            View::Model(Box::new(ModelSpec::from_json_str(&v.to_string())?))
        } else {
            return Err(read("result"));
        };
        for m in view.models() {
            m.validate().map_err(from("result"))?;
        }
        Ok(view)
    }

    fn models(&self) -> Vec<&ModelSpec> {
        match self {
            View::Match(m) => vec![&m.looped],
            View::Grid(g) => g.cells.iter().map(|c| &c.looped).collect(),
            View::Sweep(s) => s.rows.iter().map(|r| &r.looped).collect(),
            View::Model(m) => vec![m],
        }
    }

    /// The items to write, and whether it is one model (written at the path) or a folder.
    fn items<'a>(&'a self, config: Option<&'a Value>) -> (Vec<Item<'a>>, bool) {
        match self {
            View::Match(m) => {
                let base = m.baseline.name.as_deref();
                let item = match_item(
                    m.name.as_deref(),
                    &m.looped,
                    base,
                    m.mode,
                    &m.residuals,
                    config,
                );
                (vec![item], true)
            }
            View::Grid(g) => {
                let items = g.cells.iter().map(|c| {
                    let labels = [c.scale.as_str(), &c.sparsity_label];
                    let base = c.baseline.name.as_deref();
                    cell_item(labels, &c.looped, base, g.mode, &c.residuals, config)
                });
                (items.collect(), false)
            }
            View::Sweep(s) => {
                let base = s.baseline.name.as_deref();
                let items = (s.rows.iter())
                    .map(|r| row_item(s.knob, r.value, &r.looped, base, &r.residuals, config));
                (items.collect(), false)
            }
            View::Model(m) => {
                let item = Item {
                    name: m
                        .name
                        .as_deref()
                        .map_or("match".into(), |n| crate::export::entry_name(&[n])),
                    looped: m,
                    baseline_config: config,
                    comment: "Exported by smelt".to_owned(),
                };
                (vec![item], true)
            }
        }
    }
}

/// Whether the file at `p` (a path given as `source`) is a model rather than a budget: a
/// model directory, a Hugging Face `config.json`, or a model file (a `[model]` table and no
/// `baseline`).
fn model_path(p: &std::path::Path) -> Result<bool> {
    if p.is_dir() {
        return Ok(true);
    }
    let Ok(text) = crate::io::read_to_string(p) else {
        // Unreadable: the budget's reader says why.
        return Ok(false);
    };
    let text = text.trim_start_matches('\u{feff}');
    if text.trim_start().starts_with('{') {
        return Ok(serde_json::from_str::<Value>(text).is_ok_and(|v| {
            crate::budget::file::is_hf_config(&v)
                || (v.get("model").is_some() && v.get("baseline").is_none())
        }));
    }
    Ok(toml::from_str::<toml::Table>(text)
        .is_ok_and(|t| t.contains_key("model") && !t.contains_key("baseline")))
}

impl ExportRequest {
    /// Refuses `force`, which applies only to a budget's match.
    fn refuse_budget_options(&self) -> Result<()> {
        match self.force {
            true => Err(Error::invalid(
                "force",
                "applies when a budget is matched, not to a result or a model",
            )),
            false => Ok(()),
        }
    }

    /// The model at `p` (a model file, a `config.json` or a model directory) written to
    /// `path` as `smelt export` writes it, never over one of `inputs` (nor over `p`).
    fn export_model_path(
        &self,
        p: &std::path::Path,
        options: &ExportOptions,
        path: &std::path::Path,
        mut inputs: Vec<PathBuf>,
    ) -> Result<ExportReply> {
        self.refuse_budget_options()?;
        if self.baseline.is_some() {
            return Err(Error::invalid(
                "baseline",
                "is for a result or a model given as a dict; a model path is exported \
                 with its own config.json's keys, if it is one",
            ));
        }
        let source = super::source::ModelSource::Path(p.to_path_buf());
        let spec = source.load(&self.workload.changes()?)?;
        inputs.extend(source.input());
        let config = match source.input() {
            Some(f) if f.extension().is_some_and(|e| e == "json") => {
                let value: Value = serde_json::from_str(
                    crate::io::read_to_string(&f)?.trim_start_matches('\u{feff}'),
                )
                .map_err(|e| Error::invalid("source", format!("config.json: {e}")))?;
                Some(crate::hf::looped::family_config(&value)?)
            }
            _ => None,
        };
        let item = Item {
            name: "model".to_owned(),
            looped: &spec,
            baseline_config: config.as_ref(),
            comment: format!("exported by smelt from {}", p.display()),
        };
        Ok(ExportReply {
            path: path.to_path_buf(),
            models: vec![write_one(&item, options, path, &inputs)?],
            residuals: None,
        })
    }

    /// The source as JSON (a result's, a config's; null for a budget's path).
    fn source_value(&self) -> &Value {
        match &self.source {
            ExportSource::Result(v) | ExportSource::Hf(v) => v,
            ExportSource::Budget(BudgetSource::Inline(v)) => v,
            ExportSource::Budget(BudgetSource::Path(_)) => &Value::Null,
        }
    }
}

impl Request for ExportRequest {
    type Output = ExportReply;

    fn run(&self, progress: &dyn Progress) -> Result<ExportReply> {
        let path = checked_output(&self.path)
            .map_err(|_| Error::invalid("path", "is empty: give the file or folder to write"))?;
        let options = ExportOptions {
            format: self.format,
            family: self.family,
            vocab: self.vocab,
            overwrite: match self.overwrite {
                true => Overwrite::Any,
                false => Overwrite::Own,
            },
        };
        if let Some(v) = self
            .vocab
            .filter(|v| !(1..=crate::model::MAX_VOCAB).contains(v))
        {
            return Err(Error::invalid(
                "vocab",
                format!("must be 1 to {} tokens; got {v}", crate::model::MAX_VOCAB),
            ));
        }
        if options.format == ExportFormat::Model && (self.family.is_some() || self.vocab.is_some())
        {
            return Err(Error::invalid(
                "family",
                "family and vocab are for the hf format, not a model file",
            ));
        }
        let mut inputs: Vec<PathBuf> = self.workload.input().into_iter().collect();
        match &self.source {
            ExportSource::Budget(BudgetSource::Path(p)) if model_path(p)? => {
                self.export_model_path(p, &options, path, inputs)
            }
            ExportSource::Budget(b) => {
                if self.baseline.is_some() {
                    return Err(Error::invalid(
                        "baseline",
                        "is for a result; a budget names its own Baseline",
                    ));
                }
                let budget = b.budget(self.base_dir.as_deref(), &self.workload.changes()?)?;
                let search = SearchOptions {
                    top: 1,
                    force: self.force,
                    advise: false,
                };
                let report = crate::search::match_budget_in(&budget, &search, progress)?;
                inputs.extend(b.input());
                inputs.extend(budget.inputs());
                let item = crate::export::item_of_match(&report, Some(&budget));
                let written = write_one(&item, &options, path, &inputs)?;
                Ok(ExportReply {
                    path: path.to_path_buf(),
                    models: vec![written],
                    residuals: Some(report.residuals),
                })
            }
            ExportSource::Result(_) | ExportSource::Hf(_) => {
                if !self.workload.is_default() {
                    return Err(Error::invalid(
                        "workload",
                        "applies when a budget is matched or a model file read, not to a \
                         result or a model given as a dict",
                    ));
                }
                self.refuse_budget_options()?;
                let mut config = (self.baseline.as_ref())
                    .map(|c| c.value("baseline"))
                    .transpose()?;
                inputs.extend(self.baseline.as_ref().and_then(JsonOrPath::input));
                let view = match &self.source {
                    ExportSource::Hf(v) => {
                        let spec = crate::hf::import(&v.to_string(), ModelSpec::default_workload())
                            .map_err(|e| Error::invalid("source", format!("config.json: {e}")))?;
                        config = config.or_else(|| Some(v.clone()));
                        View::Model(Box::new(spec))
                    }
                    _ => View::of(self.source_value())?,
                };
                let (items, single) = view.items(config.as_ref());
                let models = match (single, items.as_slice()) {
                    (true, [one]) => vec![write_one(one, &options, path, &inputs)?],
                    _ => write_all(&items, &options, path, &inputs)?,
                };
                Ok(ExportReply {
                    path: path.to_path_buf(),
                    models,
                    residuals: None,
                })
            }
        }
    }
}
