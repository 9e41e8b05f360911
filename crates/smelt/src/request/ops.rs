//! The requests of the operations that read models, budgets and data (the exports are in
//! `export.rs`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Request;
use super::source::{BudgetSource, JsonOrPath, ModelSource, WorkloadRequest};
use crate::bench::{Backend, BenchOptions, BenchReport};
use crate::budget::GridSpec;
use crate::cost::{Comparison, Cost};
use crate::error::{Error, Result};
use crate::launcher_flops::{LauncherFlops, LauncherPair, Mfu};
use crate::model::ModelSpec;
use crate::progress::Progress;
use crate::search::{MatchReport, SearchOptions};
use crate::study::{GridReport, SweepReport};
use crate::time::{Calibration, Card, Given, Peak, PredictReport, PredictSpec};

fn one() -> usize {
    1
}

/// A model, with its Baseline to compare it with (`against`), at the workload asked for:
/// what [`CostRequest`] and [`LauncherRequest`] read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPair {
    /// The model (the looped one, with `against`).
    pub spec: ModelSource,
    /// A Baseline to compare with.
    #[serde(default)]
    pub against: Option<ModelSource>,
    /// Workload changes.
    #[serde(default)]
    pub workload: WorkloadRequest,
}

/// The model and Baseline of a request with `against`, at the workload asked for.
fn pair(
    model: &ModelSource,
    against: Option<&ModelSource>,
    workload: &WorkloadRequest,
) -> Result<(ModelSpec, Option<ModelSpec>)> {
    let w = workload.changes()?;
    let base = against.map(|b| b.load(&w)).transpose()?;
    Ok((model.load(&w)?, base))
}

impl ModelPair {
    /// The model and the Baseline (with `against`), at the workload asked for.
    fn load(&self) -> Result<(ModelSpec, Option<ModelSpec>)> {
        pair(&self.spec, self.against.as_ref(), &self.workload)
    }
}

/// What a [`ModelPair`]'s operation returns: `One` for the model alone, `Pair` with
/// `against`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PairReply<One, Pair> {
    /// The model alone.
    One(Box<One>),
    /// The model against its Baseline.
    Pair(Box<Pair>),
}

/// `smelt cost`: a model's parameters, FLOPs, KV cache and sparsity; with `against` (its
/// Baseline), the comparison (`smelt cost --against`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CostRequest(pub ModelPair);

/// What [`CostRequest`] returns: the cost, or the comparison.
pub type CostReply = PairReply<Cost, Comparison>;

impl Request for CostRequest {
    type Output = CostReply;

    fn run(&self, _: &dyn Progress) -> Result<CostReply> {
        Ok(match self.0.load()? {
            (m, None) => PairReply::One(Box::new(crate::cost(&m)?)),
            (m, Some(b)) => PairReply::Pair(Box::new(crate::compare(&b, &m)?)),
        })
    }
}

/// `smelt cost --conventions`: per-token training FLOPs under each launcher's formula; with
/// `against` (the Baseline), the pair's ratios.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LauncherRequest(pub ModelPair);

/// What [`LauncherRequest`] returns: one model's counts, or the pair's.
pub type LauncherReply = PairReply<LauncherFlops, LauncherPair>;

impl Request for LauncherRequest {
    type Output = LauncherReply;

    fn run(&self, _: &dyn Progress) -> Result<LauncherReply> {
        use crate::launcher_flops::{launcher_flops, pair as flops_pair};
        Ok(match self.0.load()? {
            (m, None) => PairReply::One(Box::new(launcher_flops(&m)?)),
            (m, Some(b)) => {
                let label = m.name.clone().unwrap_or_else(|| "looped".to_owned());
                PairReply::Pair(Box::new(flops_pair(&label, &b, &m)?))
            }
        })
    }
}

/// `smelt mfu`: model FLOP/s and MFU of a training run, on a card or a given peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MfuRequest {
    /// The model trained.
    pub spec: ModelSource,
    /// Tokens per second over the whole run.
    pub tokens_per_second: f64,
    /// GPUs of the run.
    #[serde(default = "one_gpu")]
    pub gpus: u64,
    /// A card ([`Card::parse`]).
    #[serde(default)]
    pub card: Option<String>,
    /// A dense peak per GPU, TFLOP/s.
    #[serde(default)]
    pub peak: Option<f64>,
    /// Workload changes.
    #[serde(default)]
    pub workload: WorkloadRequest,
}

fn one_gpu() -> u64 {
    1
}

impl Request for MfuRequest {
    type Output = Mfu;

    fn run(&self, _: &dyn Progress) -> Result<Mfu> {
        let peak = match (&self.card, self.peak) {
            (Some(c), None) => Peak::Card(Card::parse(c)?),
            (None, Some(t)) => Peak::Given(t * 1e12),
            _ => {
                return Err(Error::invalid(
                    "card",
                    "give a card or a peak, not both or neither",
                ));
            }
        };
        let model = self.spec.load(&self.workload.changes()?)?;
        crate::launcher_flops::mfu(&model, self.tokens_per_second, self.gpus, peak)
    }
}

/// `smelt predict`: the predicted step time of a model's layer stack (and of its Baseline,
/// with the ratio) on the device `device` names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    /// The model.
    pub model: ModelSource,
    /// Its Baseline.
    #[serde(default)]
    pub against: Option<ModelSource>,
    /// The device and options, as `[objective.time]` and `smelt predict`'s flags give them.
    #[serde(default)]
    pub device: PredictSpec,
    /// Workload changes.
    #[serde(default)]
    pub workload: WorkloadRequest,
}

impl Request for PredictRequest {
    type Output = PredictReport;

    fn run(&self, _: &dyn Progress) -> Result<PredictReport> {
        let p = self.device.resolve(Path::new(""), Given::Arguments)?;
        let (model, base) = pair(&self.model, self.against.as_ref(), &self.workload)?;
        let models: Vec<&ModelSpec> = base.iter().chain([&model]).collect();
        crate::time::predict(&models, &p.roofline, &p.options)
    }
}

/// `smelt match`: the looped configuration matching a budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchRequest {
    /// The budget.
    pub budget: BudgetSource,
    /// Where relative paths of an inline budget are taken from (default: the working folder).
    #[serde(default)]
    pub base_dir: Option<PathBuf>,
    /// How many of the best configurations to keep.
    #[serde(default = "one")]
    pub top: usize,
    /// Search a lattice over the size limit.
    #[serde(default)]
    pub force: bool,
    /// Explain the floor and re-solve refinements.
    #[serde(default)]
    pub advise: bool,
    /// Workload changes.
    #[serde(default)]
    pub workload: WorkloadRequest,
}

impl Request for MatchRequest {
    type Output = MatchReport;

    fn run(&self, progress: &dyn Progress) -> Result<MatchReport> {
        let b = (self.budget).budget(self.base_dir.as_deref(), &self.workload.changes()?)?;
        let options = SearchOptions {
            top: self.top,
            force: self.force,
            advise: self.advise,
        };
        crate::search::match_budget_in(&b, &options, progress)
    }
}

/// `smelt grid`: every cell of a grid matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridRequest {
    /// The grid.
    pub grid: BudgetSource,
    /// Where relative paths of an inline grid are taken from.
    #[serde(default)]
    pub base_dir: Option<PathBuf>,
    /// Search lattices over the size limit.
    #[serde(default)]
    pub force: bool,
    /// Workload changes, for every cell.
    #[serde(default)]
    pub workload: WorkloadRequest,
}

impl GridRequest {
    /// The grid asked for.
    pub fn spec(&self) -> Result<GridSpec> {
        (self.grid).grid(self.base_dir.as_deref(), &self.workload.changes()?)
    }
}

impl Request for GridRequest {
    type Output = GridReport;

    fn run(&self, progress: &dyn Progress) -> Result<GridReport> {
        let options = SearchOptions {
            force: self.force,
            ..SearchOptions::default()
        };
        crate::study::match_grid_with(&self.spec()?, &options, progress)
    }
}

/// The values of a sweep: a list, or a text such as `0..=12` or `8,10,12`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Values {
    /// Listed.
    List(Vec<u64>),
    /// As `smelt sweep --values` reads them.
    Text(String),
}

impl<'de> Deserialize<'de> for Values {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        match Value::deserialize(d)? {
            Value::String(t) => Ok(Values::Text(t)),
            Value::Array(items) => (items.iter().enumerate())
                .map(|(i, v)| {
                    v.as_u64().ok_or_else(|| {
                        D::Error::custom(format!(
                            "[{i}] must be an integer from 0 to {} (got {v})",
                            u64::MAX
                        ))
                    })
                })
                .collect::<std::result::Result<_, _>>()
                .map(Values::List),
            v => Err(D::Error::custom(format!(
                "expected a list of integers or a text such as \"0..=12\" (got {v})"
            ))),
        }
    }
}

/// `smelt sweep`: the budget re-matched for every value of one recipe knob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepRequest {
    /// The budget.
    pub budget: BudgetSource,
    /// `span`, `depth` or `repeats`.
    pub knob: String,
    /// The values.
    pub values: Values,
    /// Where relative paths of an inline budget are taken from.
    #[serde(default)]
    pub base_dir: Option<PathBuf>,
    /// Search lattices over the size limit.
    #[serde(default)]
    pub force: bool,
    /// Workload changes.
    #[serde(default)]
    pub workload: WorkloadRequest,
}

impl Request for SweepRequest {
    type Output = SweepReport;

    fn run(&self, progress: &dyn Progress) -> Result<SweepReport> {
        let b = (self.budget).budget(self.base_dir.as_deref(), &self.workload.changes()?)?;
        let knob: crate::study::Knob = self.knob.parse()?;
        let values = match &self.values {
            Values::List(v) => v.clone(),
            Values::Text(t) => crate::study::parse_values("values", t)?,
        };
        let options = SearchOptions {
            force: self.force,
            ..SearchOptions::default()
        };
        crate::study::sweep_with(&b, knob, &values, &options, progress)
    }
}

fn standard() -> String {
    "standard".to_owned()
}

fn screened() -> String {
    "screened".to_owned()
}

/// `smelt fit`: a scaling-law surface per group of an endpoints CSV.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitRequest {
    /// The endpoints CSV.
    pub endpoints: PathBuf,
    /// The group column.
    #[serde(default)]
    pub group: Option<String>,
    /// `standard`, `small` or `paper`.
    #[serde(default = "standard")]
    pub starts: String,
    /// `screened` or `exhaustive`.
    #[serde(default = "screened")]
    pub search: String,
}

impl Request for FitRequest {
    type Output = crate::fit::Fits;

    fn run(&self, progress: &dyn Progress) -> Result<crate::fit::Fits> {
        use crate::fit::{FitOptions, Search, Starts, data};
        let starts: Starts = self.starts.parse()?;
        let search: Search = self.search.parse()?;
        let groups = data::load(&self.endpoints, self.group.as_deref())?;
        let opts = |form| FitOptions {
            starts: starts.grid(form),
            search,
            ..FitOptions::standard(form)
        };
        crate::fit::fit_groups(&groups, opts, progress)
    }
}

fn arch() -> String {
    "arch".to_owned()
}

fn computes() -> Vec<f64> {
    vec![1e20, 1e21]
}

fn sparsities() -> Vec<f64> {
    vec![0.85, 0.95, 0.97]
}

/// `smelt gain`: the compute-efficiency gain of `target` over `reference`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GainRequest {
    /// The endpoints CSV.
    pub endpoints: PathBuf,
    /// The reference group's value.
    pub reference: String,
    /// The target group's value.
    pub target: String,
    /// The group column.
    #[serde(default = "arch")]
    pub group: String,
    /// The computes (FLOPs) of the table.
    #[serde(default = "computes")]
    pub compute: Vec<f64>,
    /// The sparsities of the table.
    #[serde(default = "sparsities")]
    pub sparsity: Vec<f64>,
    /// Bootstrap resamples (0: none).
    #[serde(default)]
    pub bootstrap: usize,
    /// The resamples' seed.
    #[serde(default)]
    pub seed: u64,
    /// `standard`, `small` or `paper`.
    #[serde(default = "standard")]
    pub starts: String,
    /// `screened` or `exhaustive`.
    #[serde(default = "screened")]
    pub search: String,
}

impl Request for GainRequest {
    type Output = crate::fit::GainTable;

    fn run(&self, progress: &dyn Progress) -> Result<crate::fit::GainTable> {
        use crate::fit::{self, GainOptions};
        let search: fit::Search = self.search.parse()?;
        let groups = fit::data::load(&self.endpoints, Some(&self.group))?;
        let r = fit::data::group(&groups, &self.group, &self.reference)?;
        let t = fit::data::group(&groups, &self.group, &self.target)?;
        let mut opts = GainOptions {
            computes: self.compute.clone(),
            sparsities: self.sparsity.clone(),
            ..GainOptions::standard()
        }
        .with_starts(self.starts.parse()?)
        .with_bootstrap(self.bootstrap, self.seed);
        opts.fit.search = search;
        fit::gain_table_with((&self.reference, r), (&self.target, t), &opts, progress)
    }
}

fn cpu() -> String {
    "cpu".to_owned()
}

fn balanced() -> String {
    "balanced".to_owned()
}

fn three() -> usize {
    3
}

fn ten_minutes() -> f64 {
    600.0
}

/// `smelt bench`: the GEMMs of one training step timed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchRequest {
    /// The model.
    pub model: ModelSource,
    /// A Baseline timed beside it.
    #[serde(default)]
    pub against: Option<ModelSource>,
    /// `cpu` or `cuda`.
    #[serde(default = "cpu")]
    pub backend: String,
    /// Tokens per batch (default: the backend's).
    #[serde(default)]
    pub tokens: Option<u64>,
    /// `balanced` or `skew=S`.
    #[serde(default = "balanced")]
    pub routing: String,
    /// Timed rounds per kernel shape.
    #[serde(default = "three")]
    pub rounds: usize,
    /// A bound on the run, seconds.
    #[serde(default = "ten_minutes")]
    pub max_seconds: f64,
    /// The device's dense peak, TFLOP/s.
    #[serde(default)]
    pub peak: Option<f64>,
    /// Workload changes.
    #[serde(default)]
    pub workload: WorkloadRequest,
}

impl Request for BenchRequest {
    type Output = BenchReport;

    fn run(&self, progress: &dyn Progress) -> Result<BenchReport> {
        if let Some(p) = self.peak
            && p > 1e6
        {
            return Err(Error::invalid(
                "peak",
                format!(
                    "is in TFLOP/s; {p:e} looks like FLOP/s: pass {:e}",
                    p / 1e12
                ),
            ));
        }
        let (model, base) = pair(&self.model, self.against.as_ref(), &self.workload)?;
        let backend: Backend = self.backend.parse()?;
        let opts = BenchOptions {
            tokens: self.tokens.unwrap_or(backend.default_tokens()),
            routing: self.routing.parse()?,
            rounds: self.rounds,
            max_seconds: self.max_seconds,
            peak: self.peak.map(|t| t * 1e12),
            ..BenchOptions::new(backend)
        };
        let models: Vec<&ModelSpec> = base.iter().chain([&model]).collect();
        crate::bench::bench_with(&models, &opts, progress)
    }
}

/// `smelt import`: a Hugging Face `config.json` (a path to it or to a model directory, or
/// the config itself) as a model file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    /// The config.
    pub config: JsonOrPath,
}

impl Request for ImportRequest {
    type Output = ModelSpec;

    fn run(&self, _: &dyn Progress) -> Result<ModelSpec> {
        let text = match &self.config {
            JsonOrPath::Path(p) if p.is_dir() => crate::io::read_to_string(p.join("config.json"))?,
            c => c.text("config")?.0,
        };
        crate::hf::import(&text, ModelSpec::default_workload())
    }
}

/// `smelt calibrate`: a calibration fitted to a bench's measured kernels; written to
/// `output` when given (never over the bench report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrateRequest {
    /// The bench report (`smelt bench --format json`): a path, or the report itself.
    pub bench: JsonOrPath,
    /// Where to write the calibration (JSON).
    #[serde(default)]
    pub output: Option<PathBuf>,
}

impl Request for CalibrateRequest {
    type Output = Calibration;

    fn run(&self, _: &dyn Progress) -> Result<Calibration> {
        let (text, name) = self.bench.text("bench")?;
        let cal = Calibration::from_bench_json(&text, &name)?;
        if let Some(out) = &self.output {
            let json = crate::report::to_json(&cal)?;
            let inputs: Vec<PathBuf> = self.bench.input().into_iter().collect();
            crate::io::write_output(checked_output(out)?, json.as_bytes(), &inputs)?;
        }
        Ok(cal)
    }
}

/// `smelt merge`: the JSON outputs of a grid benchmarked in shards joined into the grid's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeRequest {
    /// Every shard of one run, in any order: paths, or the shards' results.
    pub shards: Vec<JsonOrPath>,
    /// Where to write the merged grid (JSON).
    #[serde(default)]
    pub output: Option<PathBuf>,
}

impl Request for MergeRequest {
    type Output = Value;

    fn run(&self, _: &dyn Progress) -> Result<Value> {
        let parts = (self.shards.iter().enumerate())
            .map(|(i, s)| s.value(&format!("shards[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let merged = crate::study::merge(&parts)?;
        if let Some(out) = &self.output {
            let json = crate::report::to_json(&merged)?;
            let inputs: Vec<PathBuf> = self.shards.iter().filter_map(JsonOrPath::input).collect();
            crate::io::write_output(checked_output(out)?, json.as_bytes(), &inputs)?;
        }
        Ok(merged)
    }
}

/// An output path, refused when empty (as the command line refuses `-o ''`).
pub(crate) fn checked_output(path: &Path) -> Result<&Path> {
    match path.as_os_str().is_empty() {
        true => Err(Error::invalid(
            "output",
            "is empty: give the file or folder to write",
        )),
        false => Ok(path),
    }
}
