//! Budget files: a Baseline, a loop recipe, a search lattice and an objective; and grid
//! files, which share a recipe and lattice over many Baselines.
//!
//! ```toml
//! name = "smelt-200m-s95"
//! baseline = "base-200m-s95.toml"   # relative to this file; or an inline [baseline] table
//! mode = "two-sided"                # or "conservative": no budget may exceed the Baseline's
//!
//! [recipe]
//! span = "half"                     # or a number of layers (0: no loop)
//! placement = "middle"              # or first = 4 (1-based first looped layer)
//! repeats = 2
//!
//! [lattice]                         # every knob optional; defaults below
//! hidden = { step = 32, min = 640, max = 1280 }
//! experts = { step = 8 }
//! expert_ffn = { ratio = "1/3", multiple = 16 }   # or { step = 16, min = 64, max = 1024 }
//! head_dim = { step = 8, min = 32, max = 256 }    # or { values = [64, 128] }
//! heads = { min = 1, max = 128 }                  # or { tied = true }: q width = hidden
//! kv_heads = { min = 1, max = 16 }
//! gqa = { min = 1, max = 16 }                     # heads / kv_heads
//! q_width = { min = 0.9, max = 1.1 }              # heads * head_dim / hidden
//!
//! [objective]
//! weights = { flops = 1.0, params = 1.0, kv = 1.0 }
//!
//! [tolerance]                       # optional: a result outside is reported as a failure
//! flops = 0.04
//! params = 0.01
//! kv = 0.04
//! ```
//!
//! Lattice defaults, relative to the Baseline (`H`, `E`, `k` its hidden size, experts and
//! `top_k`): `hidden` step 32 from `H/2` to `2H`; `experts` step 8 from `k` to `4E`;
//! `expert_ffn` tied to `hidden` by the Baseline's own ratio `expert_ffn / hidden`, rounded
//! to a multiple of 16; `head_dim` step 8 from 32 to 256; `heads` 1 to 256; `kv_heads` 1
//! to 64; `gqa` 1 to 64; `q_width` 0.5 to 2. Layers default to the Baseline's physical depth
//! (`[recipe] layers` overrides it).

mod grid;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use grid::{Cell, GridSpec};

use crate::error::{Error, Result};
use crate::spec::{Loop, ModelSpec, Workload};

/// Whether the looped model may get more of a budget than the Baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Residuals of either sign; minimise their size.
    #[default]
    TwoSided,
    /// No budget may exceed the Baseline's: every residual `<= 0`.
    Conservative,
}

impl Mode {
    /// `"two-sided"` or `"conservative"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::TwoSided => "two-sided",
            Mode::Conservative => "conservative",
        }
    }
}

/// How many layers are looped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// `floor(layers / 2)`.
    Half,
    /// An explicit number of layers (0: no loop).
    Layers(u64),
}

/// Where the looped block sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// `floor((layers - span) / 2)` layers before the block (SMELT).
    Middle,
    /// The block starts at this 1-based layer.
    First(u64),
}

/// The loop recipe: which layers loop, and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recipe {
    /// Looped layers.
    pub span: Span,
    /// Position of the block.
    pub placement: Placement,
    /// Executions of the block.
    pub repeats: u64,
    /// Physical layers of the looped model (`None`: the Baseline's).
    pub layers: Option<u64>,
}

impl Default for Recipe {
    fn default() -> Self {
        Self {
            span: Span::Half,
            placement: Placement::Middle,
            repeats: 2,
            layers: None,
        }
    }
}

impl Recipe {
    /// The loop for a model of `layers` physical layers (`None` when nothing loops).
    pub fn resolve(&self, layers: u64) -> Result<Option<Loop>> {
        let span = match self.span {
            Span::Half => layers / 2,
            Span::Layers(s) => s,
        };
        if span == 0 {
            return Ok(None);
        }
        if span > layers {
            return Err(Error::invalid(
                "recipe.span",
                format!("{span} looped layers do not fit in {layers} layers"),
            ));
        }
        if self.repeats == 0 {
            return Err(Error::invalid("recipe.repeats", "must be at least 1"));
        }
        let first = match self.placement {
            Placement::Middle => (layers - span) / 2 + 1,
            Placement::First(f) => f,
        };
        if first == 0 || first + span - 1 > layers {
            return Err(Error::invalid(
                "recipe.first",
                format!(
                    "a block of {span} layers starting at layer {first} does not fit in {layers} layers"
                ),
            ));
        }
        Ok(Some(Loop {
            first,
            span,
            repeats: self.repeats,
            residual_scale: Some(1.0 / self.repeats as f64),
        }))
    }
}

/// An arithmetic progression `min, min + step, ...` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Steps {
    /// First value.
    pub min: u64,
    /// Upper bound (inclusive; the last value is the largest `min + i*step <= max`).
    pub max: u64,
    /// Step.
    pub step: u64,
}

impl Steps {
    /// Checks `step >= 1`, `1 <= min <= max`.
    pub fn new(field: &str, min: u64, max: u64, step: u64) -> Result<Self> {
        if step == 0 {
            return Err(Error::invalid(
                format!("{field}.step"),
                "must be at least 1",
            ));
        }
        if min == 0 {
            return Err(Error::invalid(format!("{field}.min"), "must be at least 1"));
        }
        if min > max {
            return Err(Error::invalid(
                field,
                format!("min ({min}) must not exceed max ({max})"),
            ));
        }
        Ok(Self { min, max, step })
    }

    /// Number of values.
    pub fn len(&self) -> u64 {
        (self.max - self.min) / self.step + 1
    }

    /// Always false: a valid progression has at least one value.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `i`-th value.
    pub fn at(&self, i: u64) -> u64 {
        self.min + i * self.step
    }

    /// All values in increasing order.
    pub fn values(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.len()).map(|i| self.at(i))
    }
}

/// How `expert_ffn` is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FfnRule {
    /// `expert_ffn = hidden * num / den`, rounded half up to a multiple of `multiple`.
    Tied {
        /// Ratio numerator.
        num: u64,
        /// Ratio denominator.
        den: u64,
        /// Rounding multiple.
        multiple: u64,
    },
    /// A free knob.
    Free(Steps),
}

impl FfnRule {
    /// The `expert_ffn` values allowed at hidden size `hidden`.
    pub fn values(&self, hidden: u64) -> Vec<u64> {
        match *self {
            FfnRule::Tied { num, den, multiple } => {
                let (h, n, d, m) = (
                    u128::from(hidden),
                    u128::from(num),
                    u128::from(den),
                    u128::from(multiple),
                );
                // round(h*n/d / m) * m, half up, in exact integers.
                let f = (2 * h * n + d * m) / (2 * d * m) * m;
                match u64::try_from(f) {
                    Ok(f) if f > 0 => vec![f],
                    _ => Vec::new(),
                }
            }
            FfnRule::Free(s) => s.values().collect(),
        }
    }

    /// Scales a Baseline's shared-expert (or dense FFN) width to `hidden` the same way
    /// (free: unchanged).
    pub fn shared_width(&self, base_shared: u64, base_hidden: u64, hidden: u64) -> u64 {
        match *self {
            FfnRule::Tied { multiple, .. } if base_shared > 0 => FfnRule::Tied {
                num: base_shared,
                den: base_hidden,
                multiple,
            }
            .values(hidden)
            .first()
            .copied()
            .unwrap_or(multiple),
            _ => base_shared,
        }
    }
}

/// How the number of query heads is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadsRule {
    /// `heads * head_dim == hidden` exactly.
    Tied,
    /// Any `heads` in `min..=max` (subject to `gqa` and `q_width`).
    Free {
        /// Fewest heads.
        min: u64,
        /// Most heads.
        max: u64,
    },
}

/// The resolved search lattice: every knob the solver may turn, and the shape limits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lattice {
    /// Physical layers of the looped model.
    pub layers: u64,
    /// Hidden sizes.
    pub hidden: Steps,
    /// Routed experts per layer.
    pub experts: Steps,
    /// Expert width rule.
    pub expert_ffn: FfnRule,
    /// Head widths, increasing.
    pub head_dim: Vec<u64>,
    /// Query-head rule.
    pub heads: HeadsRule,
    /// Key/value heads.
    pub kv_heads: Steps,
    /// GQA ratio `heads / kv_heads` bounds (inclusive).
    pub gqa: (u64, u64),
    /// Bounds (inclusive) on `heads * head_dim / hidden`.
    pub q_width: (f64, f64),
}

impl Lattice {
    /// Whether `heads` query heads of width `head_dim` respect the heads rule and the
    /// q-width limits at hidden size `hidden`.
    pub fn admits_attention(&self, hidden: u64, heads: u64, head_dim: u64) -> bool {
        let q = heads.saturating_mul(head_dim);
        match self.heads {
            HeadsRule::Tied => q == hidden,
            HeadsRule::Free { min, max } => {
                let ratio = q as f64 / hidden as f64;
                (min..=max).contains(&heads)
                    && ratio >= self.q_width.0 - 1e-12
                    && ratio <= self.q_width.1 + 1e-12
            }
        }
    }
}

/// Weights of the three residuals in the objective.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weights {
    /// FLOPs weight.
    #[serde(default = "one")]
    pub flops: f64,
    /// Parameters weight.
    #[serde(default = "one")]
    pub params: f64,
    /// KV-cache weight.
    #[serde(default = "one")]
    pub kv: f64,
}

fn one() -> f64 {
    1.0
}

impl Weights {
    /// Checks that every weight is a positive finite number.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("flops", self.flops),
            ("params", self.params),
            ("kv", self.kv),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::invalid(
                    format!("objective.weights.{name}"),
                    format!("must be a positive finite number (got {v})"),
                ));
            }
        }
        Ok(())
    }
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            flops: 1.0,
            params: 1.0,
            kv: 1.0,
        }
    }
}

/// Largest acceptable |residual| per budget (`None`: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    /// FLOPs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
    /// Parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<f64>,
    /// KV cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<f64>,
}

/// The knobs of one lattice point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Hidden size.
    pub hidden: u64,
    /// Expert width.
    pub expert_ffn: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Head width.
    pub head_dim: u64,
    /// Routed experts.
    pub experts: u64,
}

/// A resolved budget: everything the solver needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Display name.
    pub name: Option<String>,
    /// The Baseline (its workload is the one both models are costed at).
    pub baseline: ModelSpec,
    /// The loop recipe.
    pub recipe: Recipe,
    /// The lattice.
    pub lattice: Lattice,
    /// Residual weights.
    pub weights: Weights,
    /// Two-sided or conservative.
    pub mode: Mode,
    /// Optional tolerances.
    pub tolerance: Tolerance,
}

// ---------------------------------------------------------------------------------------
// File formats.

/// `[recipe]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecipeFile {
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
    pub(crate) fn resolve(&self) -> Result<Recipe> {
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
        let repeats = self.repeats.unwrap_or(2);
        if !(1..=crate::spec::MAX_REPEATS).contains(&repeats) {
            return Err(Error::invalid(
                "recipe.repeats",
                format!(
                    "must be between 1 and {} (got {repeats})",
                    crate::spec::MAX_REPEATS
                ),
            ));
        }
        if let Some(l) = self.layers
            && !(1..=crate::spec::MAX_COUNT).contains(&l)
        {
            return Err(Error::invalid(
                "recipe.layers",
                format!("must be between 1 and {} (got {l})", crate::spec::MAX_COUNT),
            ));
        }
        Ok(Recipe {
            span,
            placement,
            repeats,
            layers: self.layers,
        })
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
    fn resolve(&self, field: &str, default: (u64, u64, u64)) -> Result<Steps> {
        let (min, max, step) = default;
        Steps::new(
            field,
            self.min.unwrap_or(min),
            self.max.unwrap_or(max),
            self.step.unwrap_or(step),
        )
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
pub(crate) struct LatticeFile {
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

/// Parses `"a/b"`, `"baseline"` or a float into a ratio `num/den`.
fn parse_ratio(value: &toml::Value, base: &ModelSpec) -> Result<(u64, u64)> {
    let field = "lattice.expert_ffn.ratio";
    let bad = |why: String| Error::invalid(field, why);
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
            let a: u64 = a
                .trim()
                .parse()
                .map_err(|_| bad(format!("bad numerator in \"{s}\"")))?;
            let b: u64 = b
                .trim()
                .parse()
                .map_err(|_| bad(format!("bad denominator in \"{s}\"")))?;
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

impl LatticeFile {
    pub(crate) fn resolve(&self, base: &ModelSpec, layers: u64) -> Result<Lattice> {
        let m = &base.model;
        let hidden = self.hidden.resolve(
            "lattice.hidden",
            ((m.hidden / 2).max(1), m.hidden.saturating_mul(2), 32),
        )?;
        if hidden.max > crate::spec::MAX_WIDTH {
            return Err(Error::invalid(
                "lattice.hidden.max",
                format!("must be at most {}", crate::spec::MAX_WIDTH),
            ));
        }
        let experts = self.experts.resolve(
            "lattice.experts",
            (m.moe.top_k, m.moe.experts.saturating_mul(4), 8),
        )?;
        if experts.max > crate::spec::MAX_EXPERTS {
            return Err(Error::invalid(
                "lattice.experts.max",
                format!("must be at most {}", crate::spec::MAX_EXPERTS),
            ));
        }
        if experts.max < m.moe.top_k {
            return Err(Error::invalid(
                "lattice.experts",
                format!(
                    "max ({}) is below the Baseline's top_k ({}): no lattice point can route",
                    experts.max, m.moe.top_k
                ),
            ));
        }
        let f = &self.expert_ffn;
        let expert_ffn = match (&f.ratio, f.step.or(f.min).or(f.max)) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "lattice.expert_ffn",
                    "give either ratio (+ multiple) or step/min/max, not both",
                ));
            }
            (None, Some(_)) => {
                if f.multiple.is_some() {
                    return Err(Error::invalid(
                        "lattice.expert_ffn.multiple",
                        "only applies with ratio",
                    ));
                }
                FfnRule::Free(Steps::new(
                    "lattice.expert_ffn",
                    f.min.unwrap_or(16),
                    f.max.unwrap_or(m.moe.expert_ffn.saturating_mul(2)),
                    f.step.unwrap_or(16),
                )?)
            }
            (ratio, None) => {
                let (num, den) = match ratio {
                    Some(r) => parse_ratio(r, base)?,
                    None => (m.moe.expert_ffn, m.hidden),
                };
                let multiple = f.multiple.unwrap_or(16);
                if !(1..=1 << 20).contains(&multiple) {
                    return Err(Error::invalid(
                        "lattice.expert_ffn.multiple",
                        "must be between 1 and 2^20",
                    ));
                }
                FfnRule::Tied { num, den, multiple }
            }
        };
        let d = &self.head_dim;
        let head_dim = match (&d.values, d.step.or(d.min).or(d.max)) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "lattice.head_dim",
                    "give either values or step/min/max, not both",
                ));
            }
            (Some(v), None) => {
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
            (None, _) => Steps::new(
                "lattice.head_dim",
                d.min.unwrap_or(32),
                d.max.unwrap_or(256),
                d.step.unwrap_or(8),
            )?
            .values()
            .collect(),
        };
        if head_dim.iter().any(|&v| v > crate::spec::MAX_WIDTH) {
            return Err(Error::invalid(
                "lattice.head_dim",
                format!("values must be at most {}", crate::spec::MAX_WIDTH),
            ));
        }
        let h = &self.heads;
        let heads = if h.tied {
            if h.min.is_some() || h.max.is_some() {
                return Err(Error::invalid(
                    "lattice.heads",
                    "give either tied = true or min/max, not both",
                ));
            }
            HeadsRule::Tied
        } else {
            let s = Steps::new("lattice.heads", h.min.unwrap_or(1), h.max.unwrap_or(256), 1)?;
            HeadsRule::Free {
                min: s.min,
                max: s.max,
            }
        };
        let kv_heads = self.kv_heads.resolve("lattice.kv_heads", (1, 64, 1))?;
        let gqa = self.gqa.resolve("lattice.gqa", (1, 64, 1))?;
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
            layers,
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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ObjectiveFile {
    #[serde(default)]
    weights: Weights,
}

impl ObjectiveFile {
    pub(crate) fn resolve(&self) -> Result<Weights> {
        self.weights.validate()?;
        Ok(self.weights)
    }
}

pub(crate) fn check_tolerance(t: &Tolerance) -> Result<()> {
    for (name, v) in [("flops", t.flops), ("params", t.params), ("kv", t.kv)] {
        if let Some(v) = v
            && !(v.is_finite() && v >= 0.0)
        {
            return Err(Error::invalid(
                format!("tolerance.{name}"),
                format!("must be a non-negative finite number (got {v})"),
            ));
        }
    }
    Ok(())
}

/// The parts a budget and a grid file share.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Shared {
    #[serde(default)]
    pub(crate) mode: Mode,
    #[serde(default)]
    pub(crate) recipe: RecipeFile,
    #[serde(default)]
    pub(crate) workload: Option<Workload>,
    #[serde(default)]
    pub(crate) lattice: LatticeFile,
    #[serde(default)]
    pub(crate) objective: ObjectiveFile,
    #[serde(default)]
    pub(crate) tolerance: Tolerance,
}

impl Shared {
    /// Resolves against one Baseline.
    pub(crate) fn resolve(&self, name: Option<String>, mut baseline: ModelSpec) -> Result<Budget> {
        if let Some(w) = &self.workload {
            w.validate()?;
            baseline.workload = w.clone();
        }
        baseline.validate()?;
        let recipe = self.recipe.resolve()?;
        let layers = recipe.layers.unwrap_or(baseline.model.layers);
        recipe.resolve(layers)?;
        let lattice = self.lattice.resolve(&baseline, layers)?;
        check_tolerance(&self.tolerance)?;
        let budget = Budget {
            name,
            baseline,
            recipe,
            lattice,
            weights: self.objective.resolve()?,
            mode: self.mode,
            tolerance: self.tolerance,
        };
        budget.check_dense_layers()?;
        Ok(budget)
    }
}

/// JSON text as the equivalent TOML text (JSON `null` has no TOML form and is an error).
pub(crate) fn json_to_toml(text: &str) -> Result<String> {
    let value: toml::Value = serde_json::from_str(text).map_err(|e| Error::Parse {
        message: format!("JSON: {e} (null values are not allowed)"),
    })?;
    match value {
        toml::Value::Table(_) => toml::to_string(&value).map_err(parse_error),
        _ => Err(Error::Parse {
            message: "JSON: expected an object at the top level".to_owned(),
        }),
    }
}

pub(crate) fn parse_error(e: impl std::fmt::Display) -> Error {
    Error::Parse {
        message: e.to_string(),
    }
}

pub(crate) fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|error| Error::Io {
        path: path.display().to_string(),
        error,
    })
}

/// Loads a Baseline given as a path (relative to `dir`) or an inline table.
pub(crate) fn baseline_from(value: toml::Value, dir: &Path, field: &str) -> Result<ModelSpec> {
    match value {
        toml::Value::String(p) => {
            let path: PathBuf = dir.join(&p);
            ModelSpec::load(&path).map_err(|e| match e {
                Error::Io { error, .. } => Error::invalid(
                    field,
                    format!("cannot read model file '{}': {error}", path.display()),
                ),
                other => Error::invalid(field, format!("model file '{}': {other}", path.display())),
            })
        }
        toml::Value::Table(t) => {
            let spec: ModelSpec = toml::Value::Table(t)
                .try_into()
                .map_err(|e| Error::invalid(field, e.to_string()))?;
            spec.validate()?;
            Ok(spec)
        }
        other => Err(Error::invalid(
            field,
            format!("must be a model file path or an inline table (got {other})"),
        )),
    }
}

/// A budget file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetFile {
    #[serde(default)]
    name: Option<String>,
    baseline: toml::Value,
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
    tolerance: Tolerance,
}

impl Budget {
    /// Parses a budget file's text; relative Baseline paths are taken from `dir`.
    pub fn from_toml_str(text: &str, dir: &Path) -> Result<Self> {
        let f: BudgetFile = toml::from_str(text).map_err(parse_error)?;
        let shared = Shared {
            mode: f.mode,
            recipe: f.recipe,
            workload: f.workload,
            lattice: f.lattice,
            objective: f.objective,
            tolerance: f.tolerance,
        };
        let baseline = baseline_from(f.baseline, dir, "baseline")?;
        shared.resolve(f.name, baseline)
    }

    /// Parses a budget given as JSON (the budget file's structure as a JSON object, e.g. from
    /// a Python dict); relative Baseline paths are taken from `dir`.
    pub fn from_json_str(text: &str, dir: &Path) -> Result<Self> {
        Self::from_toml_str(&json_to_toml(text)?, dir)
    }

    /// The Hugging Face `config.json` a budget file's Baseline is read from, parsed, if its
    /// `baseline` is a path ending in `.json` (`None` for a model file or an inline table).
    pub fn baseline_config(path: impl AsRef<Path>) -> Result<Option<serde_json::Value>> {
        let path = path.as_ref();
        let dir = path.parent().unwrap_or(Path::new("."));
        let f: BudgetFile = toml::from_str(&read(path)?).map_err(parse_error)?;
        match f.baseline {
            toml::Value::String(p) if p.ends_with(".json") => {
                let config = dir.join(p);
                let text = read(&config)?;
                serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| Error::Parse {
                        message: format!("{}: {e}", config.display()),
                    })
            }
            _ => Ok(None),
        }
    }

    /// Reads and parses a budget file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::from_toml_str(&read(path)?, dir)
    }

    /// The loop of the looped model under this budget's recipe.
    pub fn looping(&self) -> Result<Option<Loop>> {
        self.recipe.resolve(self.lattice.layers)
    }

    /// The Baseline's dense layers (if any) must exist in the looped model, which keeps them
    /// at the same 1-based positions.
    pub fn check_dense_layers(&self) -> Result<()> {
        if let Some(d) = &self.baseline.model.dense
            && let Some(&last) = d.layers.last()
            && last > self.lattice.layers
        {
            return Err(Error::invalid(
                "recipe.layers",
                format!(
                    "the Baseline's dense layer {last} does not exist in a looped model of {} layers; \
                     the looped model keeps the Baseline's dense layers at their positions",
                    self.lattice.layers
                ),
            ));
        }
        Ok(())
    }

    /// The looped model at one lattice point: the knobs given here, everything else
    /// (`top_k`, shared experts and their gate, dense layers, vocabulary, q/k norm,
    /// attention biases) from the Baseline, shared-expert and dense FFN widths scaled as
    /// [`FfnRule::shared_width`] says.
    pub fn looped_model(&self, looping: &Option<Loop>, point: Point) -> crate::spec::Model {
        let base = &self.baseline.model;
        crate::spec::Model {
            layers: self.lattice.layers,
            hidden: point.hidden,
            heads: point.heads,
            kv_heads: point.kv_heads,
            head_dim: point.head_dim,
            vocab: base.vocab,
            tie_embeddings: base.tie_embeddings,
            qk_norm: base.qk_norm,
            attention_bias: base.attention_bias,
            dense: base.dense.as_ref().map(|d| crate::spec::Dense {
                layers: d.layers.clone(),
                ffn: self
                    .lattice
                    .expert_ffn
                    .shared_width(d.ffn, base.hidden, point.hidden),
            }),
            moe: crate::spec::Moe {
                experts: point.experts,
                top_k: base.moe.top_k,
                expert_ffn: point.expert_ffn,
                shared_experts: base.moe.shared_experts,
                shared_ffn: self.lattice.expert_ffn.shared_width(
                    base.moe.shared_ffn,
                    base.hidden,
                    point.hidden,
                ),
                shared_gate: base.moe.shared_gate,
            },
            looping: looping.clone(),
        }
    }
}
