//! Python bindings of smelt: plain dicts in and out (the same fields as the JSON contracts of
//! the command line), and `smelt.SmeltError` (a `ValueError`) carrying smelt's messages.
//!
//! Each function also accepts a path (a `str` or `os.PathLike`) to a model, budget or grid
//! file instead of a dict.

use std::path::{Path, PathBuf};

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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

/// cost(spec) -> dict: parameters, FLOPs per token, KV cache and sparsity of a model.
///
/// `spec` is a dict with the model file's structure ({"model": {...}, "workload": {...}})
/// or a path to a model file. The result has the fields of `smelt cost --format json`.
#[pyfunction]
fn cost(py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let spec = match input(py, spec)? {
        Input::Json(text) => smelt_core::ModelSpec::from_json_str(&text),
        Input::Path(p) => smelt_core::ModelSpec::load(&p),
    }
    .map_err(err)?;
    output(py, &smelt_core::cost(&spec).map_err(err)?)
}

/// match(budget, top=1, base_dir=None) -> dict: the looped configuration matching a budget.
///
/// `budget` is a dict with the budget file's structure or a path to a budget file; relative
/// Baseline paths in a dict are taken from `base_dir` (default: the working directory).
/// The result has the fields of `smelt match --format json` (`looped` is the model dict,
/// `residuals`, `ratios`, `sparsity`, `lattice`, ...).
#[pyfunction(name = "match")]
#[pyo3(signature = (budget, top = 1, base_dir = None))]
fn match_budget(
    py: Python<'_>,
    budget: &Bound<'_, PyAny>,
    top: usize,
    base_dir: Option<PathBuf>,
) -> PyResult<Py<PyAny>> {
    let budget = match input(py, budget)? {
        Input::Json(text) => smelt_core::Budget::from_json_str(&text, &dir_of(base_dir)),
        Input::Path(p) => smelt_core::Budget::load(&p),
    }
    .map_err(err)?;
    let report = py
        .detach(|| smelt_core::match_budget(&budget, top.max(1)))
        .map_err(err)?;
    output(py, &report)
}

/// grid(grid, base_dir=None) -> dict: every cell of a grid matched, with the summary.
///
/// The result has the fields of `smelt grid --format json` (`cells`, `summary`).
#[pyfunction]
#[pyo3(signature = (grid, base_dir = None))]
fn grid(py: Python<'_>, grid: &Bound<'_, PyAny>, base_dir: Option<PathBuf>) -> PyResult<Py<PyAny>> {
    let grid = match input(py, grid)? {
        Input::Json(text) => smelt_core::GridSpec::from_json_str(&text, &dir_of(base_dir)),
        Input::Path(p) => smelt_core::GridSpec::load(Path::new(&p)),
    }
    .map_err(err)?;
    let report = py.detach(|| smelt_core::match_grid(&grid)).map_err(err)?;
    output(py, &report)
}

/// import_hf(config) -> dict: a Hugging Face config.json (dict or path) as a model dict.
///
/// Supported: mixtral, qwen2_moe, qwen3_moe, olmoe; the embedding and LM head are counted; the
/// workload is smelt's default (4096-token context, mean document length 991, causal).
/// What the cost model cannot describe is refused with a SmeltError saying why.
#[pyfunction]
fn import_hf(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let text = match input(py, config)? {
        Input::Json(text) => text,
        Input::Path(p) => std::fs::read_to_string(&p)
            .map_err(|e| SmeltError::new_err(format!("{}: {e}", p.display())))?,
    };
    let spec = smelt_core::spec::hf::import(&text, smelt_core::ModelSpec::default_workload())
        .map_err(err)?;
    output(py, &spec)
}

/// Compute-matched budgets for looped MoE Transformers (the smelt library).
#[pymodule]
fn smelt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cost, m)?)?;
    m.add_function(wrap_pyfunction!(match_budget, m)?)?;
    m.add_function(wrap_pyfunction!(grid, m)?)?;
    m.add_function(wrap_pyfunction!(import_hf, m)?)?;
    m.add("SmeltError", m.py().get_type::<SmeltError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
