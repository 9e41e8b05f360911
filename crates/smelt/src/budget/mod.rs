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
//! weights = { flops = 1.0, params = 1.0, kv = 1.0 }   # activations, time: 0 unless given
//! # time = { card = "h200-sxm" }    # the device a weighted time is predicted on ([`mod@time`])
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
//!
//! Files are read by [`file`] (one parser for budget and grid files); [`Budget::new`] is
//! the one validating constructor, so a [`Budget`] in hand is always valid.

pub(crate) mod file;
mod grid;
mod lattice;
mod lattice_file;
mod mixers;
mod objective;
mod recipe;
pub mod time;

use std::path::{Path, PathBuf};

pub use grid::{Cell, GridSpec, is_budget_text};
pub use lattice::{FfnRule, HeadsRule, Lattice, MAX_COMBINATIONS, Steps};
pub(crate) use mixers::mixers_around;
pub use objective::{Mode, Score, Tolerance, Weights};
pub use recipe::{Placement, Recipe, Span};
pub use time::TimeBudget;

use crate::error::{Error, Result};
use crate::model::{
    AttentionShape, Ffn, Layer, Loop, MAX_WIDTH, Mla, ModelSpec, Stack, TokenMixer, Workload,
};
use file::PlanFile;

/// Where a budget's Baseline came from.
#[derive(Debug, Clone, PartialEq)]
pub enum BaselineSource {
    /// Built in code, or an inline `[baseline]` table.
    Inline,
    /// A smelt model file.
    File(PathBuf),
    /// A Hugging Face `config.json` (kept, so an export can carry its other keys over).
    HfConfig {
        /// Its path (`None`: given inline, as a table or a dict of the budget).
        path: Option<PathBuf>,
        /// Its contents.
        config: serde_json::Value,
    },
}

/// A validated budget: everything the solver needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    name: Option<String>,
    baseline: ModelSpec,
    source: BaselineSource,
    recipe: Recipe,
    lattice: Lattice,
    weights: Weights,
    mode: Mode,
    tolerance: Tolerance,
    looping: Option<Loop>,
    time: Option<TimeBudget>,
    notes: Vec<String>,
    /// The Baseline resolved ([`Stack`]), once.
    stack: Stack,
}

impl Budget {
    /// A budget matching `baseline` (its workload is the one both models are costed at)
    /// under `recipe` on `lattice`, minimising the weighted residuals; two-sided, no
    /// tolerances, unnamed. Everything is checked here, once.
    pub fn new(
        baseline: ModelSpec,
        recipe: Recipe,
        lattice: Lattice,
        weights: Weights,
    ) -> Result<Self> {
        baseline.validate()?;
        recipe.validate()?;
        let layers = recipe.layers(baseline.model.layers);
        let looping = recipe.resolve(layers)?;
        // The looped model keeps the Baseline's layer pattern at its positions.
        let stack = Stack::of(&baseline.model)?;
        for kind in ["dense", "windowed", "recurrent", "mixer-only", "FFN-only"] {
            let last = (stack.layers())
                .rposition(|l| is_kind(l, kind))
                .map(|i| i as u64 + 1);
            if let Some(last) = last
                && last > layers
            {
                return Err(Error::invalid(
                    "recipe.layers",
                    format!(
                        "the Baseline's {kind} layer {last} does not exist in a looped model of \
                         {layers} layers; the looped model keeps the Baseline's {kind} layers at \
                         their positions"
                    ),
                ));
            }
        }
        // Attention layers of their own shape keep their key/value heads, which must divide
        // every lattice point's heads.
        let multiple = stack.heads_multiple();
        if !lattice.heads_multiple.is_multiple_of(multiple) {
            return Err(Error::invalid(
                "lattice.heads_multiple",
                format!(
                    "must be a multiple of the Baseline's model.full_attention.kv_heads \
                     ({multiple}), which must divide every lattice point's heads (got {})",
                    lattice.heads_multiple
                ),
            ));
        }
        check_mla_lattice(&stack, &lattice)?;
        check_recurrent_lattice(&stack, &lattice)?;
        for (kind, &weight) in weights.iter() {
            if let Some(e) = kind
                .uncounted_in(&stack, &baseline.counting)
                .filter(|_| weight > 0.0)
            {
                return Err(Error::invalid(
                    format!("objective.weights.{}", kind.as_str()),
                    format!("must be 0: {e}"),
                ));
            }
        }
        Ok(Self {
            name: None,
            baseline,
            source: BaselineSource::Inline,
            recipe,
            lattice,
            weights,
            mode: Mode::TwoSided,
            tolerance: Tolerance::default(),
            looping,
            time: None,
            notes: Vec::new(),
            stack,
        })
    }

    /// The same budget with a display name.
    pub fn with_name(mut self, name: Option<String>) -> Self {
        self.name = name;
        self
    }

    /// The same budget in `mode`.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// The same budget with the predicted time as a term of the objective (`None`: no time
    /// budget, the default), checked by predicting the Baseline's time: an error names
    /// `objective.time` when it cannot be predicted (a hybrid's recurrent layers, say).
    pub fn with_time(mut self, time: Option<TimeBudget>) -> Result<Self> {
        if let Some(t) = &time {
            let s = t.seconds_per_token(&self.baseline).map_err(|e| {
                Error::invalid(
                    "objective.time",
                    format!("the Baseline's step time cannot be predicted: {e}"),
                )
            })?;
            if !(s.is_finite() && s > 0.0) {
                return Err(Error::invalid(
                    "objective.time",
                    format!("the Baseline's predicted seconds per token is {s}, not positive"),
                ));
            }
        }
        self.time = time;
        Ok(self)
    }

    /// The same budget with tolerances (checked when made: [`Tolerance::new`]).
    pub fn with_tolerance(mut self, tolerance: Tolerance) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// The same budget carrying `notes` for its reader ([`Budget::notes`]).
    pub fn with_notes(mut self, notes: Vec<String>) -> Self {
        self.notes = notes;
        self
    }

    /// The same budget, recording where its Baseline came from.
    pub fn with_source(mut self, source: BaselineSource) -> Self {
        self.source = source;
        self
    }

    /// The same budget under another recipe (checked like [`Budget::new`]).
    pub fn with_recipe(&self, recipe: Recipe) -> Result<Self> {
        self.rebuilt(self.baseline.clone(), recipe, self.lattice.clone())
    }

    /// The same budget with both models costed at `workload` (checked like
    /// [`Budget::new`]), as a `[workload]` table in the file would.
    pub fn with_workload(&self, workload: Workload) -> Result<Self> {
        let mut baseline = self.baseline.clone();
        baseline.workload = workload;
        self.rebuilt(baseline, self.recipe, self.lattice.clone())
    }

    /// The same budget on another lattice (checked like [`Budget::new`]).
    pub fn with_lattice(&self, lattice: Lattice) -> Result<Self> {
        self.rebuilt(self.baseline.clone(), self.recipe, lattice)
    }

    /// Everything but the parts given kept, and checked again by [`Budget::new`]: the one
    /// path every `with_*` that can make a budget invalid goes through.
    fn rebuilt(&self, baseline: ModelSpec, recipe: Recipe, lattice: Lattice) -> Result<Self> {
        let b = Budget::new(baseline, recipe, lattice, self.weights)?;
        Self {
            name: self.name.clone(),
            source: self.source.clone(),
            mode: self.mode,
            tolerance: self.tolerance,
            notes: self.notes.clone(),
            ..b
        }
        .with_time(self.time.clone())
    }

    /// Display name.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The Baseline.
    pub fn baseline(&self) -> &ModelSpec {
        &self.baseline
    }

    /// The Baseline as it executes ([`Stack`]), resolved once.
    pub fn baseline_stack(&self) -> &Stack {
        &self.stack
    }

    /// Where the Baseline came from.
    pub fn source(&self) -> &BaselineSource {
        &self.source
    }

    /// The files the budget was read from besides the budget file itself: its Baseline's
    /// (a model file or a `config.json`) and its `[objective.time]` calibration, each an
    /// input of the run that no output may be written over.
    pub fn inputs(&self) -> Vec<PathBuf> {
        let baseline = match &self.source {
            BaselineSource::File(p) | BaselineSource::HfConfig { path: Some(p), .. } => Some(p),
            BaselineSource::HfConfig { path: None, .. } => None,
            BaselineSource::Inline => None,
        };
        let calibration = self.time.as_ref().and_then(TimeBudget::calibration_file);
        (baseline.cloned().into_iter())
            .chain(calibration.map(Path::to_path_buf))
            .collect()
    }

    /// The Baseline's `config.json`, when it was read from one.
    pub fn baseline_config(&self) -> Option<&serde_json::Value> {
        match &self.source {
            BaselineSource::HfConfig { config, .. } => Some(config),
            _ => None,
        }
    }

    /// The loop recipe.
    pub fn recipe(&self) -> &Recipe {
        &self.recipe
    }

    /// The lattice.
    pub fn lattice(&self) -> &Lattice {
        &self.lattice
    }

    /// Residual weights.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// Two-sided or conservative.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The predicted-time budget, when the budget has one ([`mod@time`]).
    pub fn time(&self) -> Option<&TimeBudget> {
        self.time.as_ref()
    }

    /// The predicted time's weight in the objective (0 without a time budget).
    pub fn time_weight(&self) -> f64 {
        self.time.as_ref().map_or(0.0, TimeBudget::weight)
    }

    /// What reading the file decided that its reader may not expect, one sentence each
    /// (the command line prints them on standard error): which `[counting]` keys a budget's
    /// `[counting]` left to the Baseline when they differ from a model file's defaults.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Tolerances.
    pub fn tolerance(&self) -> &Tolerance {
        &self.tolerance
    }

    /// Physical layers of the looped model.
    pub fn layers(&self) -> u64 {
        self.recipe.layers(self.baseline.model.layers)
    }

    /// The loop of the looped model under this budget's recipe.
    pub fn looping(&self) -> Option<&Loop> {
        self.looping.as_ref()
    }

    file::plan_loaders!("a budget file", crate::strict_toml::FileKind::Budget);

    fn from_file(mut f: PlanFile, dir: &Path) -> Result<Self> {
        use crate::strict_toml::FileKind;
        for (key, set) in [
            ("template", f.template.is_some()),
            ("scales", f.scales.is_some()),
            ("sparsities", f.sparsities.is_some()),
            ("cells", f.cells.is_some()),
        ] {
            if set {
                return Err(FileKind::Grid.misplaced(key, FileKind::Budget));
            }
        }
        if let Some(config) = f.hf_baseline.take() {
            let (baseline, source) = file::baseline_from_hf(config, "baseline")?;
            return f.budget(f.name.clone(), baseline, source, dir);
        }
        let value = f.baseline.as_ref().ok_or_else(|| {
            Error::invalid(
                "baseline",
                "missing field `baseline`: give a model file, a config.json or an inline \
                 [baseline] table",
            )
        })?;
        let (baseline, source) = file::baseline_from(value, dir, "baseline")?;
        f.budget(f.name.clone(), baseline, source, dir)
    }
}

/// A lattice's recurrent mixer shapes: none without recurrent layers; with them, distinct
/// valid mixers that differ from the Baseline's only in the searched knobs (an empty list
/// searches the Baseline's alone).
fn check_recurrent_lattice(stack: &Stack, lattice: &Lattice) -> Result<()> {
    let Some(mixer) = stack.recurrent() else {
        if lattice.mixers.is_empty() {
            return Ok(());
        }
        return Err(Error::invalid(
            "lattice.recurrent",
            "sets the knobs of recurrent layers; this Baseline has no [model.recurrent]",
        ));
    };
    for (i, m) in lattice.mixers.iter().enumerate() {
        m.validate()?;
        if !m.same_but_knobs(&mixer) {
            return Err(Error::invalid(
                "lattice.recurrent",
                format!(
                    "shape {} ({} {}) is not the Baseline's {} mixer with other heads or head \
                     widths: its kind, convolution (and Mamba-2's groups, chunk and biases) \
                     stay the Baseline's",
                    i + 1,
                    m.as_str(),
                    m.shape_text(),
                    mixer.as_str()
                ),
            ));
        }
        if lattice.mixers[..i].contains(m) {
            return Err(Error::invalid(
                "lattice.recurrent",
                format!("lists shape {} ({}) twice", i + 1, m.shape_text()),
            ));
        }
    }
    Ok(())
}

/// An MLA Baseline is searched on an MLA lattice (latent ranks, per-head widths with its
/// RoPE width, free heads) and a GQA Baseline on a GQA one.
fn check_mla_lattice(stack: &Stack, lattice: &Lattice) -> Result<()> {
    match (mla_of(stack), lattice.kv_lora_rank) {
        (None, None) if lattice.mla_widths.is_empty() => Ok(()),
        (None, None) => Err(Error::invalid(
            "lattice.qk_nope_head_dim",
            "is a knob of an MLA Baseline; this Baseline has no [model.mla]",
        )),
        (None, Some(_)) => Err(Error::invalid(
            "lattice.kv_lora_rank",
            "is the KV knob of an MLA Baseline; this Baseline has no [model.mla]",
        )),
        (Some(_), None) => Err(Error::invalid(
            "lattice.kv_lora_rank",
            "missing: an MLA Baseline's KV knob is its latent rank",
        )),
        (Some(a), Some(_)) => {
            let rope = a.qk_rope_head_dim;
            let widths: Vec<u64> = lattice.mla_widths.iter().map(|w| w.0 + rope).collect();
            let mut sorted = widths.clone();
            sorted.dedup();
            let valid = !lattice.mla_widths.is_empty()
                && lattice
                    .mla_widths
                    .iter()
                    .all(|&(n, v)| n + rope >= 1 && (1..=MAX_WIDTH).contains(&v) && n <= MAX_WIDTH)
                && lattice.head_dim == sorted
                && matches!(lattice.heads, HeadsRule::Free { .. });
            if !valid {
                return Err(Error::invalid(
                    "lattice",
                    format!(
                        "an MLA lattice takes heads in a min..max range and per-head widths \
                         (qk_nope_head_dim, v_head_dim) with the Baseline's RoPE width ({rope}); \
                         its head_dim lists qk_nope_head_dim + {rope} for each"
                    ),
                ));
            }
            Ok(())
        }
    }
}

/// Whether `layer` is of the kind a budget names in words: `dense` (a dense FFN),
/// `windowed` (windowed attention), `recurrent` (a recurrent mixer), `mixer-only` (no
/// FFN), `FFN-only` (no mixer).
fn is_kind(layer: &Layer, kind: &str) -> bool {
    match kind {
        "dense" => matches!(layer.ffn, Some(Ffn::Dense { .. })),
        "windowed" => {
            matches!(&layer.mixer, Some(TokenMixer::Attention(a)) if a.window.is_some())
        }
        "recurrent" => matches!(layer.mixer, Some(TokenMixer::Recurrent(_))),
        "mixer-only" => layer.ffn.is_none(),
        _ => layer.mixer.is_none(),
    }
}

/// The MLA of a stack's attention, if it has one.
pub(crate) fn mla_of(stack: &Stack) -> Option<&Mla> {
    match &stack.model_attention()?.shape {
        AttentionShape::Mla { mla, .. } => Some(mla),
        AttentionShape::Gqa { .. } => None,
    }
}
