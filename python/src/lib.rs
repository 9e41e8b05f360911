//! Python bindings of smelt: plain dicts in and out (the same fields as the JSON contracts of
//! the command line), and `smelt.SmeltError` (a `ValueError`) carrying smelt's messages.
//!
//! Each function also accepts a path (a `str` or `os.PathLike`) to a model, budget, grid or
//! endpoints file instead of a dict. The limits are the command line's (`top` from 1 to
//! 1000, at most 1,000,000 bootstrap resamples, ...), and no Rust panic ever reaches Python:
//! one would be a bug in smelt, and arrives as a `SmeltError` saying so.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use smelt_core::search::SearchOptions;

create_exception!(
    smelt,
    SmeltError,
    PyValueError,
    "An invalid model, budget or grid (the message names the field and the rule), an \
     infeasible lattice, or an unreadable file."
);

fn err(e: smelt_core::Error) -> PyErr {
    SmeltError::new_err(e.to_string())
}

/// Runs `f` outside the GIL, turning smelt's errors and any panic into `SmeltError`.
fn guarded<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> smelt_core::Result<T> + Send,
) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(f)))
        .map_err(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            SmeltError::new_err(format!(
                "internal error in smelt (a bug; please report it): {what}"
            ))
        })?
        .map_err(err)
}

/// A dict as JSON text, or a path.
enum Input {
    Json(String),
    Path(PathBuf),
}

fn input(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Input> {
    if let Ok(path) = obj.extract::<PathBuf>() {
        return Ok(Input::Path(path));
    }
    let json = py.import("json")?;
    let text: String = json.call_method1("dumps", (obj,))?.extract()?;
    Ok(Input::Json(text))
}

fn output(py: Python<'_>, value: &impl serde::Serialize) -> PyResult<Py<PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| SmeltError::new_err(format!("serialising the result: {e}")))?;
    let json = py.import("json")?;
    Ok(json.call_method1("loads", (text,))?.unbind())
}

fn dir_of(base_dir: Option<PathBuf>) -> PathBuf {
    base_dir.unwrap_or_else(|| PathBuf::from("."))
}

fn spec(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<smelt_core::ModelSpec> {
    let i = input(py, obj)?;
    guarded(py, move || match i {
        Input::Json(text) => smelt_core::ModelSpec::from_json_str(&text),
        Input::Path(p) => smelt_core::ModelSpec::load(&p),
    })
}

fn budget(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    base_dir: Option<PathBuf>,
) -> PyResult<smelt_core::Budget> {
    let i = input(py, obj)?;
    guarded(py, move || match i {
        Input::Json(text) => smelt_core::Budget::from_json_str(&text, &dir_of(base_dir)),
        Input::Path(p) => smelt_core::Budget::load(&p),
    })
}

/// cost(spec, against=None) -> dict: parameters, FLOPs per token, KV cache and sparsity.
///
/// `spec` is a dict with the model file's structure ({"model": {...}, "workload": {...}})
/// or a path to a model file. The result has the fields of `smelt cost --format json`; with
/// `against` (a Baseline, dict or path), those of `smelt cost --against`.
#[pyfunction]
#[pyo3(signature = (spec, against = None))]
fn cost(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    against: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let model = self::spec(py, spec)?;
    match against {
        None => output(py, &guarded(py, || smelt_core::cost(&model))?),
        Some(b) => {
            let base = self::spec(py, b)?;
            output(py, &guarded(py, || smelt_core::compare(&base, &model))?)
        }
    }
}

/// match(budget, top=1, base_dir=None, force=False, advise=False) -> dict: the looped
/// configuration matching a budget.
///
/// `budget` is a dict with the budget file's structure or a path to a budget file; relative
/// Baseline paths in a dict are taken from `base_dir` (default: the working directory).
/// `top` (1 to 1000) keeps the best configurations; `force` searches a lattice over the size
/// limit; `advise` explains the floor and re-solves refinements (`floor`, `advice`). The
/// result has the fields of `smelt match --format json`.
#[pyfunction(name = "match")]
#[pyo3(signature = (budget, top = 1, base_dir = None, force = false, advise = false))]
fn match_budget(
    py: Python<'_>,
    budget: &Bound<'_, PyAny>,
    top: usize,
    base_dir: Option<PathBuf>,
    force: bool,
    advise: bool,
) -> PyResult<Py<PyAny>> {
    let b = self::budget(py, budget, base_dir)?;
    let options = SearchOptions { top, force, advise };
    output(
        py,
        &guarded(py, || smelt_core::search::match_budget_with(&b, &options))?,
    )
}

/// grid(grid, base_dir=None, force=False) -> dict: every cell of a grid matched, with the
/// summary: the fields of `smelt grid --format json` (`cells`, `summary`).
#[pyfunction]
#[pyo3(signature = (grid, base_dir = None, force = false))]
fn grid(
    py: Python<'_>,
    grid: &Bound<'_, PyAny>,
    base_dir: Option<PathBuf>,
    force: bool,
) -> PyResult<Py<PyAny>> {
    let i = input(py, grid)?;
    let report = guarded(py, move || {
        let g = match i {
            Input::Json(text) => smelt_core::GridSpec::from_json_str(&text, &dir_of(base_dir)),
            Input::Path(p) => smelt_core::GridSpec::load(&p),
        }?;
        let options = SearchOptions {
            force,
            ..SearchOptions::default()
        };
        smelt_core::search::match_grid_with(&g, &options, &smelt_core::progress::Silent)
    })?;
    output(py, &report)
}

/// sweep(budget, knob, values, base_dir=None) -> dict: the budget re-matched for every value
/// of one recipe knob ("span", "depth" or "repeats"); `values` a list of integers or a
/// string such as "0..=12". The fields of `smelt sweep --format json`.
#[pyfunction]
#[pyo3(signature = (budget, knob, values, base_dir = None))]
fn sweep(
    py: Python<'_>,
    budget: &Bound<'_, PyAny>,
    knob: &str,
    values: &Bound<'_, PyAny>,
    base_dir: Option<PathBuf>,
) -> PyResult<Py<PyAny>> {
    let b = self::budget(py, budget, base_dir)?;
    let values: Result<Vec<u64>, String> = match values.extract::<String>() {
        Ok(text) => Err(text),
        Err(_) => Ok(values.extract::<Vec<u64>>()?),
    };
    let knob = knob.to_owned();
    let report = guarded(py, move || {
        let knob: smelt_core::search::Knob = knob.parse()?;
        let values = match values {
            Ok(v) => v,
            Err(text) => smelt_core::search::parse_values("values", &text)?,
        };
        // The library checks the count (search::check_values), wherever the values came from.
        smelt_core::search::sweep(&b, knob, &values)
    })?;
    output(py, &report)
}

fn endpoints(path: PathBuf, group: Option<&str>) -> smelt_core::Result<smelt_core::fit::Groups> {
    smelt_core::fit::data::load(path, group)
}

/// fit(endpoints, group=None, starts="standard") -> dict: a scaling-law surface per group of
/// an endpoints CSV (a path): the fields of `smelt fit --format json` (`fits`).
#[pyfunction]
#[pyo3(signature = (endpoints, group = None, starts = "standard"))]
fn fit(
    py: Python<'_>,
    endpoints: PathBuf,
    group: Option<String>,
    starts: &str,
) -> PyResult<Py<PyAny>> {
    let starts = starts.to_owned();
    let fits = guarded(py, move || {
        let starts: smelt_core::fit::Starts = starts.parse()?;
        let groups = self::endpoints(endpoints, group.as_deref())?;
        let opts = |form| smelt_core::fit::FitOptions {
            starts: starts.grid(form),
            ..smelt_core::fit::FitOptions::standard(form)
        };
        smelt_core::fit::fit_groups(&groups, opts, &smelt_core::progress::Silent)
    })?;
    output(py, &fits)
}

/// gain(endpoints, reference, target, group="arch", compute=[1e20, 1e21],
/// sparsity=[0.85, 0.95, 0.97], bootstrap=0, seed=0, starts="standard") -> dict: the
/// compute-efficiency gain table of `smelt gain --format json`.
#[pyfunction]
#[pyo3(signature = (endpoints, reference, target, group = "arch", compute = vec![1e20, 1e21],
                    sparsity = vec![0.85, 0.95, 0.97], bootstrap = 0, seed = 0,
                    starts = "standard"))]
#[allow(clippy::too_many_arguments)]
fn gain(
    py: Python<'_>,
    endpoints: PathBuf,
    reference: String,
    target: String,
    group: &str,
    compute: Vec<f64>,
    sparsity: Vec<f64>,
    bootstrap: usize,
    seed: u64,
    starts: &str,
) -> PyResult<Py<PyAny>> {
    let (group, starts) = (group.to_owned(), starts.to_owned());
    let table = guarded(py, move || {
        use smelt_core::fit::{self, GainOptions};
        let groups = self::endpoints(endpoints, Some(&group))?;
        let r = fit::data::group(&groups, &group, &reference)?;
        let t = fit::data::group(&groups, &group, &target)?;
        let opts = GainOptions {
            computes: compute,
            sparsities: sparsity,
            ..GainOptions::standard()
        };
        let opts = opts
            .with_starts(starts.parse()?)
            .with_bootstrap(bootstrap, seed);
        fit::gain_table((&reference, r), (&target, t), &opts)
    })?;
    output(py, &table)
}

/// bench(model, against=None, backend="cpu", tokens=None, routing="balanced", repeats=3,
///       max_seconds=600.0, peak=None)
/// -> dict: the GEMMs of one training step of the layer stack timed: the fields of
/// `smelt bench --format json`. `model` and `against` are dicts or paths; `peak` is the
/// device's dense peak in FLOP/s.
#[pyfunction(name = "bench")]
#[pyo3(signature = (model, against = None, backend = "cpu", tokens = None,
                    routing = "balanced", repeats = 3, max_seconds = 600.0, peak = None))]
#[allow(clippy::too_many_arguments)]
fn bench_models(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    against: Option<&Bound<'_, PyAny>>,
    backend: &str,
    tokens: Option<u64>,
    routing: &str,
    repeats: usize,
    max_seconds: f64,
    peak: Option<f64>,
) -> PyResult<Py<PyAny>> {
    let model = spec(py, model)?;
    let base = against.map(|b| spec(py, b)).transpose()?;
    let (backend, routing) = (backend.to_owned(), routing.to_owned());
    let report = guarded(py, move || {
        use smelt_core::bench::{Backend, BenchOptions};
        let backend: Backend = backend.parse()?;
        let opts = BenchOptions {
            tokens: tokens.unwrap_or(backend.default_tokens()),
            routing: routing.parse()?,
            repeats,
            max_seconds,
            peak,
            ..BenchOptions::new(backend)
        };
        let models: Vec<&smelt_core::ModelSpec> = base.iter().chain([&model]).collect();
        smelt_core::bench::bench(&models, &opts)
    })?;
    output(py, &report)
}

/// import_hf(config) -> dict: a Hugging Face config.json (dict or path) as a model dict.
///
/// Families (model_type): mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2, deepseek_v3,
/// deepseek_v32, kimi_k2, glm4_moe, gpt_oss, minimax_m2, llama4_text (and a llama4 wrapper's
/// text decoder), granitemoe, phimoe. The embedding and LM head are counted (MTP modules are
/// not); the workload is smelt's default (4096-token context, mean document length 991,
/// causal).
/// What the cost model cannot describe is refused with a SmeltError saying why.
#[pyfunction]
fn import_hf(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let i = input(py, config)?;
    let spec = guarded(py, move || {
        match i {
            Input::Json(text) => {
                smelt_core::hf::import(&text, smelt_core::ModelSpec::default_workload())
            }
            // A config.json, or a model directory (a looped export) holding one.
            Input::Path(p) => {
                let p = if p.is_dir() { p.join("config.json") } else { p };
                let text = smelt_core::io::read_to_string(&p)?;
                smelt_core::hf::import(&text, smelt_core::ModelSpec::default_workload())
            }
        }
    })?;
    output(py, &spec)
}

/// export_hf(budget, dir, base_dir=None, family=None, vocab=None, force=False) -> dict:
/// matches a budget and writes the looped model for Transformers into the folder `dir`, the
/// same files as `smelt match BUDGET --format hf -o DIR`.
///
/// A looped match is a model directory (`config.json` of model_type "smelt_looped", with the
/// family's config as `text_config`, and the configuration and modeling files), which
/// `transformers.AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(dir,
/// trust_remote_code=True), trust_remote_code=True)` builds with the family's own classes,
/// looped as matched; a match without a loop is a plain `config.json` of its family. `family`
/// names the family to write (default: the Baseline's), `vocab` supplies a vocabulary the
/// Baseline lacks. Returns {"dir", "files", "looped", "residuals"}. No file of the budget is
/// ever overwritten.
#[pyfunction]
#[pyo3(signature = (budget, dir, base_dir = None, family = None, vocab = None, force = false))]
fn export_hf(
    py: Python<'_>,
    budget: &Bound<'_, PyAny>,
    dir: PathBuf,
    base_dir: Option<PathBuf>,
    family: Option<String>,
    vocab: Option<u64>,
    force: bool,
) -> PyResult<Py<PyAny>> {
    let budget_path = budget.extract::<PathBuf>().ok();
    let b = self::budget(py, budget, base_dir)?;
    let written = guarded(py, move || {
        let family = family
            .map(|f| f.parse::<smelt_core::hf::Family>())
            .transpose()?;
        let options = SearchOptions {
            top: 1,
            force,
            advise: false,
        };
        let report = smelt_core::search::match_budget_with(&b, &options)?;
        let config =
            smelt_core::hf::export_match(b.baseline_config(), &report.looped, family, vocab)?;
        let files = smelt_core::hf::looped::ModelDir::of(&config)?;
        let mut inputs: Vec<PathBuf> = budget_path.into_iter().collect();
        if let smelt_core::budget::BaselineSource::File(p)
        | smelt_core::budget::BaselineSource::HfConfig { path: p, .. } = b.source()
        {
            inputs.push(p.clone());
        }
        let paths = files.write(&dir, &inputs)?;
        Ok(serde_json::json!({
            "dir": dir,
            "files": paths,
            "looped": files.is_looped(),
            "residuals": report.residuals,
        }))
    })?;
    output(py, &written)
}

/// Compute-matched budgets for looped MoE Transformers (the smelt library).
#[pymodule]
fn smelt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cost, m)?)?;
    m.add_function(wrap_pyfunction!(match_budget, m)?)?;
    m.add_function(wrap_pyfunction!(grid, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(fit, m)?)?;
    m.add_function(wrap_pyfunction!(gain, m)?)?;
    m.add_function(wrap_pyfunction!(bench_models, m)?)?;
    m.add_function(wrap_pyfunction!(import_hf, m)?)?;
    m.add_function(wrap_pyfunction!(export_hf, m)?)?;
    m.add("SmeltError", m.py().get_type::<SmeltError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
