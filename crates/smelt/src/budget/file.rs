//! Budget and grid files as written, and their resolution into [`Budget`]s.
//!
//! Both kinds of file are read by one parser into one struct, [`PlanFile`], whose keys are
//! the union of the two (serde cannot combine `flatten` with `deny_unknown_fields`, and a
//! typo must fail loudly); each loader then refuses the other kind's keys by name. A file
//! may be TOML or, from the library and Python, JSON of the same structure.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    BaselineSource, Budget, FfnRule, HeadsRule, Lattice, Mode, Placement, Recipe, Span, Steps,
    Tolerance, Weights,
};
use crate::error::{Error, Result};
use crate::spec::validate::check_name;
use crate::spec::{Counting, MAX_COUNT, MAX_EXPERTS, MAX_WIDTH, ModelSpec, Workload};

/// The text format of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    Toml,
    Json,
}

/// Parses a budget or grid file; tables must be tables (positional forms are refused).
pub(crate) fn parse<T: serde::de::DeserializeOwned>(text: &str, syntax: Syntax) -> Result<T> {
    crate::structure::require_plan_tables(&crate::structure::tree(text, syntax == Syntax::Json)?)?;
    match syntax {
        Syntax::Toml => toml::from_str(text).map_err(Error::parse),
        Syntax::Json => serde_json::from_str(text).map_err(|e| Error::parse(format!("JSON: {e}"))),
    }
}

/// `from_toml_str`, `from_json_str` and `load` of a type read from a [`PlanFile`] by its
/// `from_file(PlanFile, dir)`.
macro_rules! plan_loaders {
    ($what:literal) => {
        #[doc = concat!("Parses ", $what, "'s text; relative paths are taken from `dir`.")]
        pub fn from_toml_str(text: &str, dir: &std::path::Path) -> $crate::Result<Self> {
            Self::from_file($crate::budget::file::parse(text, $crate::budget::file::Syntax::Toml)?, dir)
        }

        #[doc = concat!(
            "Parses ", $what, " given as JSON (the file's structure as a JSON object, e.g. ",
            "from a Python dict); relative paths are taken from `dir`."
        )]
        pub fn from_json_str(text: &str, dir: &std::path::Path) -> $crate::Result<Self> {
            Self::from_file($crate::budget::file::parse(text, $crate::budget::file::Syntax::Json)?, dir)
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
    lattice: LatticeFile,
    #[serde(default)]
    objective: ObjectiveFile,
    #[serde(default)]
    tolerance: ToleranceFile,
    /// Overrides the Baseline's `[counting]` (e.g. the paper's convention for a
    /// `config.json` Baseline, which counts the embedding and LM head).
    #[serde(default)]
    counting: Option<Counting>,
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
    ) -> Result<Budget> {
        if let Some(n) = &name {
            check_name("name", n)?;
        }
        if let Some(w) = &self.workload {
            w.validate()?;
            baseline.workload = w.clone();
        }
        if let Some(c) = self.counting {
            baseline.counting = c;
        }
        baseline.validate()?;
        let recipe = self.recipe.resolve()?;
        let lattice = self.lattice.resolve(&baseline)?;
        Ok(
            Budget::new(baseline, recipe, lattice, self.objective.weights.resolve())?
                .with_mode(self.mode)
                .with_tolerance(self.tolerance.resolve())?
                .with_name(name)
                .with_source(source),
        )
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

/// A `{ step, min, max }` knob as written; every part optional.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeFile {
    step: Option<u64>,
    min: Option<u64>,
    max: Option<u64>,
}

impl RangeFile {
    /// The progression, with `max` at most `limit` (checked before anything is built).
    fn resolve(&self, field: &str, default: (u64, u64, u64), limit: u64) -> Result<Steps> {
        let (min, max, step) = default;
        let max = self.max.unwrap_or(max.min(limit));
        at_most(&format!("{field}.max"), max, limit)?;
        Steps::new(
            field,
            self.min.unwrap_or(min),
            max,
            self.step.unwrap_or(step),
        )
    }

    fn is_set(&self) -> bool {
        self.step.or(self.min).or(self.max).is_some()
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FfnFile {
    ratio: Option<toml::Value>,
    multiple: Option<u64>,
    step: Option<u64>,
    min: Option<u64>,
    max: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadDimFile {
    values: Option<Vec<u64>>,
    step: Option<u64>,
    min: Option<u64>,
    max: Option<u64>,
}

/// The `{ step, min, max }` part of a knob that also takes other keys.
macro_rules! range_of {
    ($file:expr) => {
        RangeFile {
            step: $file.step,
            min: $file.min,
            max: $file.max,
        }
    };
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadsFile {
    #[serde(default)]
    tied: bool,
    min: Option<u64>,
    max: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RatioRangeFile {
    min: Option<f64>,
    max: Option<f64>,
}

/// `[lattice]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LatticeFile {
    #[serde(default)]
    hidden: RangeFile,
    #[serde(default)]
    experts: RangeFile,
    #[serde(default)]
    expert_ffn: FfnFile,
    #[serde(default)]
    head_dim: HeadDimFile,
    #[serde(default)]
    heads: HeadsFile,
    #[serde(default)]
    kv_heads: RangeFile,
    #[serde(default)]
    gqa: RangeFile,
    #[serde(default)]
    q_width: RatioRangeFile,
}

/// Parses `"a/b"`, `"baseline"` or a number into a ratio `num/den`.
fn parse_ratio(value: &toml::Value, base: &ModelSpec) -> Result<(u64, u64)> {
    let bad = |why: String| Error::invalid("lattice.expert_ffn.ratio", why);
    match value {
        toml::Value::String(s) if s == "baseline" => {
            Ok((base.model.moe.expert_ffn, base.model.hidden))
        }
        toml::Value::String(s) => {
            let (a, b) = s.split_once('/').ok_or_else(|| {
                bad(format!(
                    "must be \"a/b\", \"baseline\" or a number (got \"{s}\")"
                ))
            })?;
            let part = |p: &str, what: &str| -> Result<u64> {
                p.trim()
                    .parse()
                    .map_err(|_| bad(format!("bad {what} in \"{s}\"")))
            };
            let (a, b) = (part(a, "numerator")?, part(b, "denominator")?);
            if a == 0 || b == 0 || a > 1 << 20 || b > 1 << 20 {
                return Err(bad(format!(
                    "numerator and denominator must be between 1 and 2^20 (got \"{s}\")"
                )));
            }
            Ok((a, b))
        }
        toml::Value::Float(x) if x.is_finite() && *x > 0.0 && *x <= 64.0 => {
            // A decimal ratio, kept to 6 decimal places.
            Ok(((x * 1e6).round() as u64, 1_000_000))
        }
        toml::Value::Integer(n) if (1..=64).contains(n) => Ok((*n as u64, 1)),
        other => Err(bad(format!(
            "must be \"a/b\", \"baseline\" or a positive number up to 64 (got {other})"
        ))),
    }
}

fn at_most(field: &str, value: u64, max: u64) -> Result<()> {
    if value > max {
        return Err(Error::invalid(field, format!("must be at most {max}")));
    }
    Ok(())
}

impl FfnFile {
    fn resolve(&self, base: &ModelSpec) -> Result<FfnRule> {
        let m = &base.model;
        let range = range_of!(self);
        match (&self.ratio, range.is_set()) {
            (Some(_), true) => Err(Error::invalid(
                "lattice.expert_ffn",
                "give either ratio (+ multiple) or step/min/max, not both",
            )),
            (None, true) => {
                if self.multiple.is_some() {
                    return Err(Error::invalid(
                        "lattice.expert_ffn.multiple",
                        "only applies with ratio",
                    ));
                }
                Ok(FfnRule::Free(range.resolve(
                    "lattice.expert_ffn",
                    (16, m.moe.expert_ffn.saturating_mul(2), 16),
                    MAX_WIDTH,
                )?))
            }
            (ratio, false) => {
                let (num, den) = match ratio {
                    Some(r) => parse_ratio(r, base)?,
                    None => (m.moe.expert_ffn, m.hidden),
                };
                let multiple = self.multiple.unwrap_or(16);
                if !(1..=1 << 20).contains(&multiple) {
                    return Err(Error::invalid(
                        "lattice.expert_ffn.multiple",
                        "must be between 1 and 2^20",
                    ));
                }
                Ok(FfnRule::Tied { num, den, multiple })
            }
        }
    }
}

impl HeadDimFile {
    fn resolve(&self) -> Result<Vec<u64>> {
        let range = range_of!(self);
        let values = match (&self.values, range.is_set()) {
            (Some(_), true) => {
                return Err(Error::invalid(
                    "lattice.head_dim",
                    "give either values or step/min/max, not both",
                ));
            }
            (Some(v), false) => {
                if v.is_empty() || v.contains(&0) {
                    return Err(Error::invalid(
                        "lattice.head_dim.values",
                        "must list at least one positive head width",
                    ));
                }
                let mut v = v.clone();
                v.sort_unstable();
                v.dedup();
                v
            }
            (None, _) => range
                .resolve("lattice.head_dim", (32, 256, 8), MAX_WIDTH)?
                .values()
                .collect(),
        };
        if values.iter().any(|&v| v > MAX_WIDTH) {
            return Err(Error::invalid(
                "lattice.head_dim.values",
                format!("must be at most {MAX_WIDTH}"),
            ));
        }
        Ok(values)
    }
}

impl HeadsFile {
    fn resolve(&self) -> Result<HeadsRule> {
        if self.tied {
            if self.min.is_some() || self.max.is_some() {
                return Err(Error::invalid(
                    "lattice.heads",
                    "give either tied = true or min/max, not both",
                ));
            }
            return Ok(HeadsRule::Tied);
        }
        let max = self.max.unwrap_or(256);
        at_most("lattice.heads.max", max, MAX_COUNT)?;
        let s = Steps::new("lattice.heads", self.min.unwrap_or(1), max, 1)?;
        Ok(HeadsRule::Free {
            min: s.min,
            max: s.max,
        })
    }
}

impl LatticeFile {
    fn resolve(&self, base: &ModelSpec) -> Result<Lattice> {
        let m = &base.model;
        let hidden = self.hidden.resolve(
            "lattice.hidden",
            ((m.hidden / 2).max(1), m.hidden.saturating_mul(2), 32),
            MAX_WIDTH,
        )?;
        let experts = self.experts.resolve(
            "lattice.experts",
            (m.moe.top_k, m.moe.experts.saturating_mul(4), 8),
            MAX_EXPERTS,
        )?;
        if experts.max < m.moe.top_k {
            return Err(Error::invalid(
                "lattice.experts",
                format!(
                    "max ({}) is below the Baseline's top_k ({}): no lattice point can route",
                    experts.max, m.moe.top_k
                ),
            ));
        }
        let expert_ffn = self.expert_ffn.resolve(base)?;
        widths_fit(&expert_ffn, base, hidden.last())?;
        let head_dim = self.head_dim.resolve()?;
        let heads = self.heads.resolve()?;
        let kv_heads = self
            .kv_heads
            .resolve("lattice.kv_heads", (1, 64, 1), MAX_COUNT)?;
        let gqa = self.gqa.resolve("lattice.gqa", (1, 64, 1), MAX_COUNT)?;
        if self.gqa.step.is_some() {
            return Err(Error::invalid(
                "lattice.gqa.step",
                "is not a knob: gqa takes min and max",
            ));
        }
        let q = self.q_width;
        let q_width = (q.min.unwrap_or(0.5), q.max.unwrap_or(2.0));
        if !(q_width.0.is_finite()
            && q_width.1.is_finite()
            && q_width.0 > 0.0
            && q_width.0 <= q_width.1)
        {
            return Err(Error::invalid(
                "lattice.q_width",
                format!(
                    "needs 0 < min <= max (got min = {}, max = {})",
                    q_width.0, q_width.1
                ),
            ));
        }
        Ok(Lattice {
            hidden,
            experts,
            expert_ffn,
            head_dim,
            heads,
            kv_heads,
            gqa: (gqa.min, gqa.max),
            q_width,
        })
    }
}

/// The widths tied to `hidden` (the expert width, and the Baseline's shared and dense FFN
/// widths scaled alike) stay within the model limits at the largest hidden size, so that
/// every lattice point is a valid model; the error names the lattice knob.
fn widths_fit(rule: &FfnRule, base: &ModelSpec, hidden_max: u64) -> Result<()> {
    let m = &base.model;
    let too_wide = |what: &str, width: u64| {
        Error::invalid(
            "lattice.expert_ffn",
            format!(
                "at lattice.hidden.max ({hidden_max}) gives {what} {width}, above the limit of \
                 {MAX_WIDTH}; lower the ratio or lattice.hidden.max"
            ),
        )
    };
    if let FfnRule::Tied { .. } = rule {
        let widest = rule.values(hidden_max).into_iter().max().unwrap_or(0);
        if widest > MAX_WIDTH {
            return Err(too_wide("an expert width of", widest));
        }
    }
    let shared = rule.shared_width(m.moe.shared_ffn, m.hidden, hidden_max);
    if shared > MAX_WIDTH {
        return Err(too_wide("a shared-expert width of", shared));
    }
    if let Some(d) = &m.dense {
        let dense = rule.shared_width(d.ffn, m.hidden, hidden_max);
        if dense > MAX_WIDTH {
            return Err(too_wide("a dense FFN width of", dense));
        }
    }
    Ok(())
}

fn one() -> f64 {
    1.0
}

/// `[objective]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectiveFile {
    #[serde(default)]
    weights: WeightsFile,
}

/// `[objective.weights]` as written: each weight defaults to 1.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightsFile {
    #[serde(default = "one")]
    flops: f64,
    #[serde(default = "one")]
    params: f64,
    #[serde(default = "one")]
    kv: f64,
}

impl Default for WeightsFile {
    fn default() -> Self {
        Self {
            flops: 1.0,
            params: 1.0,
            kv: 1.0,
        }
    }
}

impl WeightsFile {
    fn resolve(&self) -> Weights {
        Weights {
            flops: self.flops,
            params: self.params,
            kv: self.kv,
        }
    }
}

/// `[tolerance]` as written.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToleranceFile {
    flops: Option<f64>,
    params: Option<f64>,
    kv: Option<f64>,
}

impl ToleranceFile {
    fn resolve(&self) -> Tolerance {
        Tolerance {
            flops: self.flops,
            params: self.params,
            kv: self.kv,
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
                    format!("cannot read model file '{}': {error}", path.display()),
                ),
                other => Error::invalid(field, format!("model file '{}': {other}", path.display())),
            };
            let text = crate::io::read_to_string(&path).map_err(wrap)?;
            if path.extension().is_some_and(|e| e == "json") {
                let spec =
                    crate::spec::hf::import(&text, ModelSpec::default_workload()).map_err(wrap)?;
                let config = serde_json::from_str(&text).map_err(|e| {
                    wrap(Error::Parse {
                        message: e.to_string(),
                    })
                })?;
                return Ok((spec, BaselineSource::HfConfig { path, config }));
            }
            let spec = ModelSpec::from_toml_str(&text).map_err(wrap)?;
            Ok((spec, BaselineSource::File(path)))
        }
        toml::Value::Table(t) => {
            let spec: ModelSpec = toml::Value::Table(t.clone())
                .try_into()
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
