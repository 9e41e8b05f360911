//! Budget and grid files as written, and their resolution into [`Budget`]s.
//!
//! Both kinds of file are read by one parser into one struct, [`PlanFile`], whose keys are
//! the union of the two (serde cannot combine `flatten` with `deny_unknown_fields`, and a
//! typo must fail loudly); each loader then refuses the other kind's keys by name. A file
//! may be TOML or, from the library and Python, JSON of the same structure.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::time::{TimeBudget, TimeFile};
use super::{BaselineSource, Budget, Mode, Placement, Recipe, Span, Tolerance, Weights};
use crate::cost::{BudgetKind, PerBudget};
use crate::error::{Error, Result};
use crate::model::validate::check_name;
use crate::model::{
    ActivationPolicy, Counting, KvCount, ModelSpec, RecomputeModules, Training, Workload,
};
use crate::strict_toml::FileKind;

/// The text format of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    Toml,
    Json,
}

/// Parses a budget or grid file; tables must be tables (positional forms are refused).
pub(crate) fn parse<T: serde::de::DeserializeOwned>(text: &str, syntax: Syntax) -> Result<T> {
    match syntax {
        Syntax::Toml => crate::strict_toml::from_toml(text),
        Syntax::Json => crate::strict_toml::from_json(text),
    }
}

/// A [`PlanFile`] read from `text` as the file of `kind`: a file of another kind (a model
/// file given as a budget) is named as what it is.
/// A Baseline given inline as a Hugging Face `config.json` (a dict or table with
/// `model_type` and no `model`) is read as one; in JSON it is kept as written (its nulls
/// included) in [`PlanFile::hf_baseline`].
pub(crate) fn parse_plan(text: &str, syntax: Syntax, kind: FileKind) -> Result<PlanFile> {
    let foreign = |e| kind.foreign_in(text, syntax == Syntax::Json).unwrap_or(e);
    if syntax == Syntax::Json {
        let mut value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::parse(format!("JSON: {e}")))?;
        let hf = match value.get("baseline") {
            Some(b) if is_hf_config(b) => value.as_object_mut().and_then(|m| m.remove("baseline")),
            _ => None,
        };
        let mut plan: PlanFile = crate::strict_toml::from_json_value(value).map_err(foreign)?;
        plan.hf_baseline = hf;
        return Ok(plan);
    }
    parse(text, syntax).map_err(foreign)
}

/// Whether `value` is a Hugging Face `config.json` (`model_type`, no `model`), not a model
/// file's structure.
pub(crate) fn is_hf_config(value: &serde_json::Value) -> bool {
    value.get("model_type").is_some() && value.get("model").is_none()
}

/// A Baseline given inline as a Hugging Face `config.json`, named `field` in errors.
pub(crate) fn baseline_from_hf(
    config: serde_json::Value,
    field: &str,
) -> Result<(ModelSpec, BaselineSource)> {
    let spec = crate::hf::import(&config.to_string(), ModelSpec::default_workload())
        .map_err(|e| Error::invalid(field, format!("the inline config.json: {e}")))?;
    Ok((spec, BaselineSource::HfConfig { path: None, config }))
}

/// `from_toml_str`, `from_json_str` and `load` of a type read from a [`PlanFile`] by its
/// `from_file(PlanFile, dir)`.
macro_rules! plan_loaders {
    ($what:literal, $kind:expr) => {
        #[doc = concat!("Parses ", $what, "'s text; relative paths are taken from `dir`.")]
        pub fn from_toml_str(text: &str, dir: &std::path::Path) -> $crate::Result<Self> {
            use $crate::budget::file::{Syntax, parse_plan};
            Self::from_file(parse_plan(text, Syntax::Toml, $kind)?, dir)
        }

        #[doc = concat!(
            "Parses ", $what, " given as JSON (the file's structure as a JSON object, e.g. ",
            "from a Python dict); relative paths are taken from `dir`."
        )]
        pub fn from_json_str(text: &str, dir: &std::path::Path) -> $crate::Result<Self> {
            use $crate::budget::file::{Syntax, parse_plan};
            Self::from_file(parse_plan(text, Syntax::Json, $kind)?, dir)
        }

        #[doc = concat!("Reads and parses ", $what, ".")]
        pub fn load(path: impl AsRef<std::path::Path>) -> $crate::Result<Self> {
            let path = path.as_ref();
            let dir = path.parent().unwrap_or(std::path::Path::new("."));
            Self::from_toml_str(&$crate::io::read_to_string(path)?, dir)
        }
    };
}
pub(crate) use plan_loaders;

/// A budget or grid file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanFile {
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// Budget files: the Baseline (a path or an inline table).
    #[serde(default)]
    pub(crate) baseline: Option<toml::Value>,
    /// Budget files given as JSON: the Baseline as an inline Hugging Face `config.json`.
    #[serde(skip)]
    pub(crate) hf_baseline: Option<serde_json::Value>,
    /// Grid files: a path template with `{scale}` and `{sparsity}`.
    #[serde(default)]
    pub(crate) template: Option<String>,
    #[serde(default)]
    pub(crate) scales: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) sparsities: Option<Vec<String>>,
    /// Grid files: explicit cells.
    #[serde(default)]
    pub(crate) cells: Option<Vec<CellFile>>,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    recipe: RecipeFile,
    #[serde(default)]
    workload: Option<Workload>,
    #[serde(default)]
    lattice: super::lattice_file::LatticeFile,
    #[serde(default)]
    pub(crate) objective: ObjectiveFile,
    #[serde(default)]
    tolerance: PerBudget<Option<f64>>,
    /// Replaces the Baseline's `[counting]` key by key (e.g. the paper's convention for a
    /// `config.json` Baseline, which counts the embedding and LM head); a key left out keeps
    /// the Baseline's ([`CountingFile`]).
    #[serde(default)]
    counting: Option<CountingFile>,
    /// A training recipe and layout for the Baseline (and so the per-GPU peaks of the
    /// match), replacing its own `[training]`.
    #[serde(default)]
    training: Option<Training>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CellFile {
    pub(crate) scale: String,
    pub(crate) sparsity: String,
    pub(crate) baseline: toml::Value,
}

impl PlanFile {
    /// The budget of one Baseline under this file's recipe, lattice and objective.
    pub(crate) fn budget(
        &self,
        name: Option<String>,
        mut baseline: ModelSpec,
        source: BaselineSource,
        dir: &Path,
    ) -> Result<Budget> {
        if let Some(n) = &name {
            check_name("name", n)?;
        }
        if let Some(w) = &self.workload {
            w.validate()?;
            baseline.workload = w.clone();
        }
        let mut notes = Vec::new();
        if let Some(c) = &self.counting {
            let (counting, note) = c.over(baseline.counting, &source);
            baseline.counting = counting;
            notes.extend(note);
        }
        if let Some(t) = self.training {
            baseline.training = Some(t);
        }
        baseline.validate()?;
        let recipe = self.recipe.resolve()?;
        let lattice = self.lattice.resolve(&baseline)?;
        Budget::new(baseline, recipe, lattice, self.objective.weights()?)?
            .with_mode(self.mode)
            .with_tolerance(Tolerance::new(self.tolerance)?)
            .with_name(name)
            .with_source(source)
            .with_notes(notes)
            .with_time(self.objective.time(dir)?)
    }
}

/// `[counting]` in a budget or grid file: each key given replaces the Baseline's, each key
/// left out keeps the Baseline's (its model file's `[counting]`, or a `config.json`'s
/// import, which counts the embedding and the LM head).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CountingFile {
    #[serde(default)]
    embeddings: Option<bool>,
    #[serde(default)]
    lm_head: Option<bool>,
    #[serde(default)]
    mtp: Option<bool>,
    #[serde(default)]
    kv: Option<KvCount>,
    #[serde(default)]
    activations: Option<ActivationPolicy>,
    #[serde(default)]
    recompute_modules: Option<RecomputeModules>,
    #[serde(default)]
    activation_bytes: Option<u64>,
}

impl CountingFile {
    /// The Baseline's `counting` with the keys given here replaced, and a note when a key
    /// left out keeps a value that is not a model file's default: the one case where
    /// reading the table as a whole (a key left out meaning its default) would count
    /// otherwise, so standard error says which key came from where.
    fn over(&self, base: Counting, source: &BaselineSource) -> (Counting, Option<String>) {
        // Destructured whole, so that a new `[counting]` key cannot be forgotten here.
        let Counting {
            embeddings,
            lm_head,
            mtp,
            kv,
            activations,
            recompute_modules,
            activation_bytes,
        } = base;
        let merged = Counting {
            embeddings: self.embeddings.unwrap_or(embeddings),
            lm_head: self.lm_head.unwrap_or(lm_head),
            mtp: self.mtp.unwrap_or(mtp),
            kv: self.kv.unwrap_or(kv),
            activations: self.activations.unwrap_or(activations),
            recompute_modules: self.recompute_modules.unwrap_or(recompute_modules),
            activation_bytes: self.activation_bytes.unwrap_or(activation_bytes),
        };
        let d = Counting::default();
        // (key, given here, the value kept when not, whether that is not a default)
        let keys = [
            (
                "embeddings",
                self.embeddings.is_some(),
                embeddings.to_string(),
                embeddings != d.embeddings,
            ),
            (
                "lm_head",
                self.lm_head.is_some(),
                lm_head.to_string(),
                lm_head != d.lm_head,
            ),
            ("mtp", self.mtp.is_some(), mtp.to_string(), mtp != d.mtp),
            ("kv", self.kv.is_some(), format!("\"{kv}\""), kv != d.kv),
            (
                "activations",
                self.activations.is_some(),
                format!("\"{activations}\""),
                activations != d.activations,
            ),
            (
                "recompute_modules",
                self.recompute_modules.is_some(),
                format!("\"{}\"", recompute_modules.names()),
                recompute_modules != d.recompute_modules,
            ),
            (
                "activation_bytes",
                self.activation_bytes.is_some(),
                activation_bytes.to_string(),
                activation_bytes != d.activation_bytes,
            ),
        ];
        let kept: Vec<String> = (keys.iter())
            .filter(|(_, given, _, other)| !given && *other)
            .map(|(key, _, value, _)| format!("{key} = {value}"))
            .collect();
        if kept.is_empty() {
            return (merged, None);
        }
        let given: Vec<&str> = (keys.iter())
            .filter(|(_, given, _, _)| *given)
            .map(|(key, ..)| *key)
            .collect();
        let given = match given.is_empty() {
            true => "takes no key from the budget file".to_owned(),
            false => format!("takes {} from the budget file", given.join(", ")),
        };
        let from = match source {
            BaselineSource::HfConfig { .. } => {
                "the Baseline (a config.json: its import counts the embedding and the LM head)"
            }
            BaselineSource::File(_) => "the Baseline's model file",
            BaselineSource::Inline => "the inline Baseline",
        };
        let note = format!(
            "[counting] {given} and keeps {} from {from}; give them in the budget's \
             [counting] to change them",
            kept.join(", ")
        );
        (merged, Some(note))
    }
}

/// `[recipe]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeFile {
    #[serde(default)]
    span: Option<toml::Value>,
    #[serde(default)]
    placement: Option<String>,
    #[serde(default)]
    first: Option<u64>,
    #[serde(default)]
    repeats: Option<u64>,
    #[serde(default)]
    layers: Option<u64>,
}

impl RecipeFile {
    fn resolve(&self) -> Result<Recipe> {
        let span = match &self.span {
            None => Span::Half,
            Some(toml::Value::String(s)) if s == "half" => Span::Half,
            Some(toml::Value::Integer(n)) if *n >= 0 => Span::Layers(*n as u64),
            Some(other) => {
                return Err(Error::invalid(
                    "recipe.span",
                    format!("must be \"half\" or a non-negative number of layers (got {other})"),
                ));
            }
        };
        let placement = match (&self.placement, self.first) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "recipe.first",
                    "give either placement or first, not both",
                ));
            }
            (None, Some(f)) => Placement::First(f),
            (Some(p), None) if p == "middle" => Placement::Middle,
            (Some(p), None) => {
                return Err(Error::invalid(
                    "recipe.placement",
                    format!("must be \"middle\" (or give first = N instead); got \"{p}\""),
                ));
            }
            (None, None) => Placement::Middle,
        };
        let recipe = Recipe {
            span,
            placement,
            repeats: self.repeats.unwrap_or(2),
            layers: self.layers,
        };
        recipe.validate()?;
        Ok(recipe)
    }
}

/// `[objective]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ObjectiveFile {
    /// `[objective.weights]` as written: a weight per budget, the default one
    /// ([`Weights::default`]) when not given.
    #[serde(default)]
    weights: WeightsFile,
    /// `[objective.time]`: the device the predicted time is for ([`super::time`]).
    #[serde(default)]
    time: Option<TimeFile>,
}

/// `[objective.weights]` as written: one key per budget ([`crate::BudgetKind`]) and the
/// predicted time's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightsFile {
    #[serde(default)]
    flops: Option<f64>,
    #[serde(default)]
    params: Option<f64>,
    #[serde(default)]
    kv: Option<f64>,
    #[serde(default)]
    activations: Option<f64>,
    #[serde(default)]
    time: Option<f64>,
}

impl ObjectiveFile {
    fn weights(&self) -> Result<Weights> {
        let default = Weights::default();
        let w = &self.weights;
        Weights::new(PerBudget::from_fn(|k| {
            match k {
                BudgetKind::Flops => w.flops,
                BudgetKind::Params => w.params,
                BudgetKind::Kv => w.kv,
                BudgetKind::Activations => w.activations,
            }
            .unwrap_or(default[k])
        }))
    }

    /// Whether the file gives the time budget (a weight for it, or its device).
    pub(crate) fn has_time(&self) -> bool {
        self.weights.time.is_some() || self.time.is_some()
    }

    /// The time budget: `None` unless `[objective.time]` names its device; refused when
    /// `weights.time` is above 0 without one.
    fn time(&self, dir: &Path) -> Result<Option<TimeBudget>> {
        let weight = self.weights.time.unwrap_or(0.0);
        match &self.time {
            Some(t) => super::time::resolve(t, weight, dir).map(Some),
            None if weight.is_finite() && weight == 0.0 => Ok(None),
            None if !(weight.is_finite() && weight >= 0.0) => Err(Error::invalid(
                "objective.weights.time",
                format!("must be a non-negative finite number (got {weight})"),
            )),
            None => Err(Error::invalid(
                "objective.weights.time",
                format!(
                    "is {weight}, but no [objective.time] names the device the time is \
                     predicted on: give card = \"h200-sxm\" (or peak = TFLOP/s, or a \
                     calibration) there"
                ),
            )),
        }
    }
}

/// Loads a Baseline given as a path (relative to `dir`) or an inline table; `field` names
/// it in errors.
pub(crate) fn baseline_from(
    value: &toml::Value,
    dir: &Path,
    field: &str,
) -> Result<(ModelSpec, BaselineSource)> {
    match value {
        toml::Value::String(p) => {
            let path: PathBuf = dir.join(p);
            let wrap = |e: Error| match e {
                Error::Io { error, .. } => Error::invalid(
                    field,
                    format!(
                        "cannot read model file '{}'{}: {error}",
                        std::path::absolute(&path)
                            .unwrap_or_else(|_| path.clone())
                            .display(),
                        match Path::new(p).is_relative() {
                            true => format!(
                                " (\"{p}\" is taken relative to the folder of the file that \
                                 names it)"
                            ),
                            false => String::new(),
                        }
                    ),
                ),
                other => Error::invalid(field, format!("model file '{}': {other}", path.display())),
            };
            let text = crate::io::read_to_string(&path).map_err(wrap)?;
            if path.extension().is_some_and(|e| e == "json") {
                let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
                let spec = crate::hf::import(text, ModelSpec::default_workload()).map_err(wrap)?;
                let config = serde_json::from_str(text).map_err(|e| {
                    wrap(Error::Parse {
                        message: e.to_string(),
                    })
                })?;
                let path = Some(path);
                return Ok((spec, BaselineSource::HfConfig { path, config }));
            }
            let spec = ModelSpec::from_toml_str(&text).map_err(wrap)?;
            Ok((spec, BaselineSource::File(path)))
        }
        toml::Value::Table(t) if t.contains_key("model_type") && !t.contains_key("model") => {
            let config =
                serde_json::to_value(t).map_err(|e| Error::invalid(field, e.to_string()))?;
            baseline_from_hf(config, field)
        }
        toml::Value::Table(t) => {
            let spec: ModelSpec =
                crate::strict_toml::from_toml_value(toml::Value::Table(t.clone()))
                    .map_err(|e| Error::invalid(field, e.to_string()))?;
            spec.validate()
                .map_err(|e| Error::invalid(field, format!("inline Baseline: {e}")))?;
            Ok((spec, BaselineSource::Inline))
        }
        other => Err(Error::invalid(
            field,
            format!("must be a model file path or an inline table (got {other})"),
        )),
    }
}
