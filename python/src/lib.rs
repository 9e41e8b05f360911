//! The native half of the Python module `smelt` (`smelt._smelt`). The public functions,
//! with their signatures, types and the checks of their arguments, are in
//! `python/smelt/__init__.py`; this module takes what that layer has checked:
//!
//! * a model, budget or grid as a *source*: `("path", PATH)`, `("json", TEXT)` (the file's
//!   structure as JSON) or `("hf", TEXT)` (a Hugging Face `config.json` as JSON);
//! * workload changes as JSON (`WorkloadChanges`: `context`, `mean_doc_len`,
//!   `doc_lengths`, `dense`);
//! * results back as JSON text, which the Python layer loads.
//!
//! Work that can take long (a grid, a sweep, a fit, a gain, a benchmark) runs on a thread of
//! its own while the calling thread watches for Ctrl-C (raised as `KeyboardInterrupt`, the
//! work stopped at its next step) and passes progress to a callback or to `sys.stderr`.
//! No Rust panic ever reaches Python: one would be a bug in smelt, and arrives as a
//! `SmeltError` saying so.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use smelt_core::budget::{Budget, GridSpec};
use smelt_core::export::{ExportFormat, ExportOptions, Item};
use smelt_core::model::WorkloadChanges;
use smelt_core::progress::Progress;
use smelt_core::search::SearchOptions;
use smelt_core::{Error, ModelSpec};

create_exception!(
    smelt,
    SmeltError,
    PyValueError,
    "An invalid model, budget or grid (the message names the field and the rule), an \
     infeasible lattice, or an unreadable file. `field` is the offending field when one is \
     named (e.g. \"model.kv_heads\", \"top\"), else None; `rule` the rule it breaks."
);

/// The field a parser's message names (`unknown field `x``, `missing field `x``).
fn parse_field(message: &str) -> Option<String> {
    ["unknown field `", "missing field `", "for key `"]
        .iter()
        .find_map(|p| message.split(p).nth(1))
        .and_then(|rest| rest.split('`').next())
        .map(str::to_owned)
}

/// `e` as the Python exception a caller catches: `KeyboardInterrupt` for an interrupted
/// call, else `SmeltError` with `field` and `rule` set.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let (field, rule) = match &e {
        Error::Interrupted => return PyKeyboardInterrupt::new_err("interrupted"),
        Error::InvalidSpec { field, rule } => (Some(field.clone()), Some(rule.clone())),
        Error::Parse { message } => (parse_field(message), None),
        _ => (None, None),
    };
    let err = SmeltError::new_err(e.to_string());
    let value = err.value(py);
    let set = value
        .setattr("field", field)
        .and_then(|()| value.setattr("rule", rule));
    match set {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// A panic's message, as a `SmeltError` that calls it a bug.
fn panicked(panic: Box<dyn std::any::Any + Send>) -> Error {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    Error::Internal {
        message: format!("a panic in the Python module: {what}"),
    }
}

/// Runs `f` outside the GIL, turning smelt's errors and any panic into Python exceptions.
fn guarded<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> smelt_core::Result<T> + Send,
) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(panicked(p))))
        .map_err(|e| to_py(py, e))
}

/// What a long call's work tells the watching thread.
#[derive(Default)]
struct Heard {
    /// `(task, done, total)` to pass on, oldest first.
    events: Vec<(String, u64, u64)>,
    /// Lines of news (printed when not quiet).
    notes: Vec<String>,
    /// The task in progress: `(task, done, total)`.
    current: Option<(String, u64, u64)>,
    /// Whether `current` advanced since it was last passed on.
    moved: bool,
}

/// The [`Progress`] of a long call: heard by the work's threads, passed on by the watcher.
#[derive(Default)]
struct Watch {
    cancel: AtomicBool,
    heard: Mutex<Heard>,
}

impl Watch {
    fn with(&self, f: impl FnOnce(&mut Heard)) {
        if let Ok(mut h) = self.heard.lock() {
            f(&mut h);
        }
    }
}

impl Progress for Watch {
    fn begin(&self, task: &str, total: u64) {
        self.with(|h| {
            h.events.push((task.to_owned(), 0, total));
            h.current = Some((task.to_owned(), 0, total));
            h.moved = false;
        });
    }

    fn advance(&self, n: u64) {
        self.with(|h| {
            if let Some((_, done, _)) = &mut h.current {
                *done = done.saturating_add(n);
                h.moved = true;
            }
        });
    }

    fn note(&self, text: &str) {
        self.with(|h| h.notes.push(text.to_owned()));
    }

    fn end(&self) {
        self.with(|h| {
            if let Some(c) = h.current.take() {
                h.events.push(c);
            }
            h.moved = false;
        });
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// How a long call reports: to a callback `progress(task, done, total)`, and on
/// `sys.stderr` unless quiet.
struct Reporter {
    callback: Option<Py<PyAny>>,
    quiet: bool,
    last_line: Option<Instant>,
}

impl Reporter {
    /// Passes on what was heard since the last call; `final_` passes every event.
    fn pass_on(&mut self, py: Python<'_>, watch: &Watch, final_: bool) -> PyResult<()> {
        let (mut events, notes) = match watch.heard.lock() {
            Ok(mut h) => {
                let mut events = std::mem::take(&mut h.events);
                if h.moved {
                    h.moved = false;
                    events.extend(h.current.clone());
                }
                (events, std::mem::take(&mut h.notes))
            }
            Err(_) => return Ok(()),
        };
        events.dedup();
        for (task, done, total) in &events {
            if let Some(cb) = &self.callback {
                cb.call1(py, (task.as_str(), *done, *total))?;
            }
        }
        if self.quiet {
            return Ok(());
        }
        let stderr = py.import("sys")?.getattr("stderr")?;
        for n in &notes {
            stderr.call_method1("write", (format!("smelt: {n}\n"),))?;
        }
        let due = self
            .last_line
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if let Some((task, done, total)) = events.last()
            && (due || final_ || done == total)
        {
            let of = match total {
                0 => String::new(),
                t => format!("/{t}"),
            };
            stderr.call_method1("write", (format!("smelt: {task}: {done}{of}\n"),))?;
            self.last_line = Some(Instant::now());
        }
        Ok(())
    }
}

/// Runs `f` on a thread of its own while this thread, every 50 ms, checks for Ctrl-C
/// (stopping the work at its next step and raising `KeyboardInterrupt`) and passes progress
/// on; an exception raised by the callback stops the work too and is raised.
fn long_call<T: Send>(
    py: Python<'_>,
    progress: Option<Bound<'_, PyAny>>,
    quiet: bool,
    f: impl FnOnce(&dyn Progress) -> smelt_core::Result<T> + Send,
) -> PyResult<T> {
    let watch = Watch::default();
    let mut reporter = Reporter {
        callback: progress.map(Bound::unbind),
        quiet,
        last_line: None,
    };
    let mut raised: Option<PyErr> = None;
    let result = {
        let watch = &watch;
        let (reporter, raised) = (&mut reporter, &mut raised);
        // The callback is only called on this thread, with the GIL held.
        py.detach(move || {
            std::thread::scope(|s| {
                let work = s.spawn(move || {
                    catch_unwind(AssertUnwindSafe(|| f(watch))).unwrap_or_else(|p| Err(panicked(p)))
                });
                while !work.is_finished() {
                    std::thread::sleep(Duration::from_millis(50));
                    Python::attach(|py| {
                        let checked = py
                            .check_signals()
                            .and_then(|()| reporter.pass_on(py, watch, false));
                        if let Err(e) = checked
                            && raised.is_none()
                        {
                            watch.cancel.store(true, Ordering::Relaxed);
                            *raised = Some(e);
                        }
                    });
                }
                work.join().unwrap_or_else(|p| Err(panicked(p)))
            })
        })
    };
    if let Some(e) = raised {
        return Err(e);
    }
    reporter.pass_on(py, &watch, true)?;
    result.map_err(|e| to_py(py, e))
}

/// A model, budget or grid as the Python layer passes it.
type Source = (String, String);

fn bad_kind(kind: &str) -> Error {
    Error::Internal {
        message: format!("the Python layer passed a source of kind '{kind}'"),
    }
}

/// The workload changes the Python layer passes as JSON; `doc_lengths_path` (a CSV
/// histogram, as `--doc-lengths FILE`) is read here.
fn changes(workload: Option<&str>) -> smelt_core::Result<WorkloadChanges> {
    let Some(text) = workload else {
        return Ok(WorkloadChanges::default());
    };
    let bad = |e: serde_json::Error| Error::invalid("workload", e.to_string());
    let mut value: serde_json::Value = serde_json::from_str(text).map_err(bad)?;
    if let Some(path) = value
        .as_object_mut()
        .and_then(|m| m.remove("doc_lengths_path"))
    {
        let path = path.as_str().unwrap_or_default().to_owned();
        let csv = smelt_core::io::read_to_string(&path)?;
        let hist = smelt_core::Workload::histogram_from_csv(&csv, &path)?;
        value["doc_lengths"] = serde_json::to_value(hist).map_err(bad)?;
    }
    serde_json::from_value(value).map_err(bad)
}

fn model_spec((kind, value): &Source, workload: &WorkloadChanges) -> smelt_core::Result<ModelSpec> {
    let mut spec = match kind.as_str() {
        "path" => ModelSpec::load(value)?,
        "json" => ModelSpec::from_json_str(value)?,
        "hf" => smelt_core::hf::import(value, ModelSpec::default_workload())?,
        other => return Err(bad_kind(other)),
    };
    if !workload.is_empty() {
        spec.workload = workload.apply(&spec.workload)?;
    }
    Ok(spec)
}

fn dir_of(base_dir: Option<&str>) -> PathBuf {
    PathBuf::from(base_dir.unwrap_or("."))
}

fn with_changes(b: Budget, workload: &WorkloadChanges) -> smelt_core::Result<Budget> {
    match workload.is_empty() {
        true => Ok(b),
        false => b.with_workload(workload.apply(&b.baseline().workload)?),
    }
}

fn budget(
    (kind, value): &Source,
    base_dir: Option<&str>,
    workload: &WorkloadChanges,
) -> smelt_core::Result<Budget> {
    let b = match kind.as_str() {
        "path" => Budget::load(value)?,
        "json" => Budget::from_json_str(value, &dir_of(base_dir))?,
        other => return Err(bad_kind(other)),
    };
    with_changes(b, workload)
}

fn to_json(value: &impl serde::Serialize) -> smelt_core::Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Internal {
        message: format!("serialising the result: {e}"),
    })
}

/// cost(spec, against, workload) -> JSON: `smelt cost --format json` (with `against`,
/// `smelt cost --against`).
#[pyfunction]
#[pyo3(signature = (spec, against, workload))]
fn cost(
    py: Python<'_>,
    spec: Source,
    against: Option<Source>,
    workload: Option<String>,
) -> PyResult<String> {
    guarded(py, move || {
        let w = changes(workload.as_deref())?;
        let model = model_spec(&spec, &w)?;
        match against {
            None => to_json(&smelt_core::cost(&model)?),
            Some(b) => to_json(&smelt_core::compare(&model_spec(&b, &w)?, &model)?),
        }
    })
}

/// match_(budget, base_dir, top, force, advise, workload) -> JSON: `smelt match --format json`.
#[pyfunction]
#[pyo3(signature = (budget, base_dir, top, force, advise, workload))]
fn match_(
    py: Python<'_>,
    budget: Source,
    base_dir: Option<String>,
    top: usize,
    force: bool,
    advise: bool,
    workload: Option<String>,
) -> PyResult<String> {
    guarded(py, move || {
        let b = self::budget(&budget, base_dir.as_deref(), &changes(workload.as_deref())?)?;
        let options = SearchOptions { top, force, advise };
        to_json(&smelt_core::search::match_budget_with(&b, &options)?)
    })
}

/// grid(grid, base_dir, force, workload, progress, quiet) -> JSON: `smelt grid --format json`.
#[pyfunction]
#[pyo3(signature = (grid, base_dir, force, workload, progress, quiet))]
fn grid(
    py: Python<'_>,
    grid: Source,
    base_dir: Option<String>,
    force: bool,
    workload: Option<String>,
    progress: Option<Bound<'_, PyAny>>,
    quiet: bool,
) -> PyResult<String> {
    long_call(py, progress, quiet, move |p| {
        let mut g = load_grid(&grid, base_dir.as_deref())?;
        let w = changes(workload.as_deref())?;
        for cell in &mut g.cells {
            cell.budget = with_changes(cell.budget.clone(), &w)?;
        }
        let options = SearchOptions {
            force,
            ..SearchOptions::default()
        };
        to_json(&smelt_core::study::match_grid_with(&g, &options, p)?)
    })
}

fn load_grid((kind, value): &Source, base_dir: Option<&str>) -> smelt_core::Result<GridSpec> {
    match kind.as_str() {
        "path" => GridSpec::load(value),
        "json" => GridSpec::from_json_str(value, &dir_of(base_dir)),
        other => Err(bad_kind(other)),
    }
}

/// sweep(budget, knob, values, values_text, base_dir, force, workload, progress, quiet) ->
/// JSON: `smelt sweep --format json`.
#[pyfunction]
#[pyo3(signature = (budget, knob, values, values_text, base_dir, force, workload, progress, quiet))]
#[allow(clippy::too_many_arguments)]
fn sweep(
    py: Python<'_>,
    budget: Source,
    knob: String,
    values: Option<Vec<u64>>,
    values_text: Option<String>,
    base_dir: Option<String>,
    force: bool,
    workload: Option<String>,
    progress: Option<Bound<'_, PyAny>>,
    quiet: bool,
) -> PyResult<String> {
    long_call(py, progress, quiet, move |p| {
        let b = self::budget(&budget, base_dir.as_deref(), &changes(workload.as_deref())?)?;
        let knob: smelt_core::study::Knob = knob.parse()?;
        let values = match (values, values_text) {
            (Some(v), _) => v,
            (None, Some(text)) => smelt_core::study::parse_values("values", &text)?,
            (None, None) => Vec::new(),
        };
        let options = SearchOptions {
            force,
            ..SearchOptions::default()
        };
        to_json(&smelt_core::study::sweep_with(
            &b, knob, &values, &options, p,
        )?)
    })
}

/// fit(endpoints, group, starts, search, progress, quiet) -> JSON: `smelt fit --format
/// json`.
#[pyfunction]
#[pyo3(signature = (endpoints, group, starts, search, progress, quiet))]
fn fit(
    py: Python<'_>,
    endpoints: String,
    group: Option<String>,
    starts: String,
    search: String,
    progress: Option<Bound<'_, PyAny>>,
    quiet: bool,
) -> PyResult<String> {
    long_call(py, progress, quiet, move |p| {
        let starts: smelt_core::fit::Starts = starts.parse()?;
        let search: smelt_core::fit::Search = search.parse()?;
        let groups = smelt_core::fit::data::load(PathBuf::from(endpoints), group.as_deref())?;
        let opts = |form| smelt_core::fit::FitOptions {
            starts: starts.grid(form),
            search,
            ..smelt_core::fit::FitOptions::standard(form)
        };
        to_json(&smelt_core::fit::fit_groups(&groups, opts, p)?)
    })
}

/// gain(endpoints, reference, target, group, compute, sparsity, bootstrap, seed, starts,
/// search, progress, quiet) -> JSON: `smelt gain --format json`.
#[pyfunction]
#[pyo3(signature = (endpoints, reference, target, group, compute, sparsity, bootstrap, seed,
                    starts, search, progress, quiet))]
#[allow(clippy::too_many_arguments)]
fn gain(
    py: Python<'_>,
    endpoints: String,
    reference: String,
    target: String,
    group: String,
    compute: Vec<f64>,
    sparsity: Vec<f64>,
    bootstrap: usize,
    seed: u64,
    starts: String,
    search: String,
    progress: Option<Bound<'_, PyAny>>,
    quiet: bool,
) -> PyResult<String> {
    long_call(py, progress, quiet, move |p| {
        use smelt_core::fit::{self, GainOptions};
        let search: fit::Search = search.parse()?;
        let groups = fit::data::load(PathBuf::from(endpoints), Some(&group))?;
        let r = fit::data::group(&groups, &group, &reference)?;
        let t = fit::data::group(&groups, &group, &target)?;
        let opts = GainOptions {
            computes: compute,
            sparsities: sparsity,
            ..GainOptions::standard()
        };
        let mut opts = opts
            .with_starts(starts.parse()?)
            .with_bootstrap(bootstrap, seed);
        opts.fit.search = search;
        to_json(&fit::gain_table_with(
            (&reference, r),
            (&target, t),
            &opts,
            p,
        )?)
    })
}

/// bench(model, against, backend, tokens, routing, rounds, max_seconds, peak_tflops,
/// workload, progress, quiet) -> JSON: `smelt bench --format json`.
#[pyfunction(name = "bench")]
#[pyo3(signature = (model, against, backend, tokens, routing, rounds, max_seconds,
                    peak_tflops, workload, progress, quiet))]
#[allow(clippy::too_many_arguments)]
fn bench_models(
    py: Python<'_>,
    model: Source,
    against: Option<Source>,
    backend: String,
    tokens: Option<u64>,
    routing: String,
    rounds: usize,
    max_seconds: f64,
    peak_tflops: Option<f64>,
    workload: Option<String>,
    progress: Option<Bound<'_, PyAny>>,
    quiet: bool,
) -> PyResult<String> {
    long_call(py, progress, quiet, move |p| {
        use smelt_core::bench::{Backend, BenchOptions};
        let w = changes(workload.as_deref())?;
        let model = model_spec(&model, &w)?;
        let base = against.map(|b| model_spec(&b, &w)).transpose()?;
        let backend: Backend = backend.parse()?;
        let opts = BenchOptions {
            tokens: tokens.unwrap_or(backend.default_tokens()),
            routing: routing.parse()?,
            rounds,
            max_seconds,
            peak: peak_tflops.map(|t| t * 1e12),
            ..BenchOptions::new(backend)
        };
        let models: Vec<&ModelSpec> = base.iter().chain([&model]).collect();
        to_json(&smelt_core::bench::bench_with(&models, &opts, p)?)
    })
}

/// import_hf(config) -> JSON: a Hugging Face config.json (or a model directory holding one)
/// as a model file.
#[pyfunction]
fn import_hf(py: Python<'_>, config: Source) -> PyResult<String> {
    guarded(py, move || {
        let spec = match config.0.as_str() {
            "path" => {
                let p = PathBuf::from(&config.1);
                let p = if p.is_dir() { p.join("config.json") } else { p };
                let text = smelt_core::io::read_to_string(&p)?;
                smelt_core::hf::import(&text, ModelSpec::default_workload())?
            }
            "json" | "hf" => smelt_core::hf::import(&config.1, ModelSpec::default_workload())?,
            other => return Err(bad_kind(other)),
        };
        to_json(&spec)
    })
}

fn export_options(
    format: &str,
    family: Option<&str>,
    vocab: Option<u64>,
    overwrite: bool,
) -> smelt_core::Result<ExportOptions> {
    Ok(ExportOptions {
        format: format.parse::<ExportFormat>()?,
        family: family
            .map(str::parse::<smelt_core::hf::Family>)
            .transpose()?,
        vocab,
        overwrite: match overwrite {
            true => smelt_core::io::Overwrite::Any,
            false => smelt_core::io::Overwrite::Own,
        },
    })
}

/// The JSON an export returns: where, what, and the match's residuals when it matched.
fn exported(
    path: &Path,
    models: &[smelt_core::export::Exported],
    residuals: Option<&smelt_core::cost::Residuals>,
) -> smelt_core::Result<String> {
    to_json(&serde_json::json!({
        "path": path,
        "models": models,
        "residuals": residuals,
    }))
}

/// export_budget(budget, base_dir, path, format, family, vocab, force, workload, inputs) ->
/// JSON: the budget matched and its model written at `path` (as `smelt match --format hf -o
/// PATH` or `--format model -o PATH`).
#[pyfunction]
#[pyo3(signature = (budget, base_dir, path, format, family, vocab, force, workload, inputs,
                    overwrite))]
#[allow(clippy::too_many_arguments)]
fn export_budget(
    py: Python<'_>,
    budget: Source,
    base_dir: Option<String>,
    path: PathBuf,
    format: String,
    family: Option<String>,
    vocab: Option<u64>,
    force: bool,
    workload: Option<String>,
    inputs: Vec<PathBuf>,
    overwrite: bool,
) -> PyResult<String> {
    guarded(py, move || {
        let options = export_options(&format, family.as_deref(), vocab, overwrite)?;
        let b = self::budget(&budget, base_dir.as_deref(), &changes(workload.as_deref())?)?;
        let search = SearchOptions {
            top: 1,
            force,
            advise: false,
        };
        let report = smelt_core::search::match_budget_with(&b, &search)?;
        let mut inputs = inputs;
        inputs.extend(b.inputs());
        let item = smelt_core::export::item_of_match(&report, Some(&b));
        let written = smelt_core::export::write_one(&item, &options, &path, &inputs)?;
        exported(&path, &[written], Some(&report.residuals))
    })
}

/// One model of a result to export, read from the result's JSON.
struct Owned {
    name: String,
    looped: ModelSpec,
    comment: String,
}

/// The models of a result smelt returned (a match, grid or sweep result, or a model file),
/// and whether it is one model (written at the path) or many (a folder of them).
fn models_of(result: &serde_json::Value) -> smelt_core::Result<(Vec<Owned>, bool)> {
    use serde_json::Value;
    let bad = |why: String| Error::invalid("result", why);
    let spec = |v: &Value, at: &str| -> smelt_core::Result<ModelSpec> {
        let spec: ModelSpec = serde_json::from_value(v.clone())
            .map_err(|e| bad(format!("{at}: not a model smelt returned: {e}")))?;
        spec.validate().map_err(|e| bad(format!("{at}: {e}")))?;
        Ok(spec)
    };
    let residuals = |v: &Value, at: &str| -> smelt_core::Result<smelt_core::cost::Residuals> {
        serde_json::from_value(v.clone()).map_err(|e| bad(format!("{at}.residuals: {e}")))
    };
    let text = |v: &Value| v.as_str().map(str::to_owned).unwrap_or_default();
    let baseline_name = |v: &Value| v["baseline"]["name"].as_str().map(str::to_owned);
    let comment = |base: Option<String>, how: &str, r| {
        smelt_core::report::match_comment(base.as_deref(), how, &r)
    };
    let mode = format!("{} mode", text(&result["mode"]));
    if let Some(cells) = result.get("cells").and_then(Value::as_array) {
        let models = cells.iter().enumerate().map(|(i, c)| {
            let at = format!("cells[{i}]");
            let (scale, sparsity) = (text(&c["scale"]), text(&c["sparsity_label"]));
            Ok(Owned {
                name: smelt_core::export::entry_name(&[&scale, &sparsity]),
                looped: spec(&c["looped"], &format!("{at}.looped"))?,
                comment: comment(
                    baseline_name(c),
                    &format!("{scale} {sparsity}, {mode}"),
                    residuals(&c["residuals"], &at)?,
                ),
            })
        });
        return Ok((models.collect::<smelt_core::Result<_>>()?, false));
    }
    if let Some(rows) = result.get("rows").and_then(Value::as_array) {
        let knob = text(&result["knob"]);
        let models = rows.iter().enumerate().map(|(i, r)| {
            let at = format!("rows[{i}]");
            let value = r["value"].to_string();
            Ok(Owned {
                name: smelt_core::export::entry_name(&[&knob, &value]),
                looped: spec(&r["looped"], &format!("{at}.looped"))?,
                comment: comment(
                    baseline_name(result),
                    &format!("{knob} {value}"),
                    residuals(&r["residuals"], &at)?,
                ),
            })
        });
        return Ok((models.collect::<smelt_core::Result<_>>()?, false));
    }
    let name = |v: &Value| {
        v.as_str()
            .map_or("match".into(), |n| smelt_core::export::entry_name(&[n]))
    };
    if result.get("looped").is_some() {
        let one = Owned {
            name: name(&result["name"]),
            looped: spec(&result["looped"], "looped")?,
            comment: comment(
                baseline_name(result),
                &mode,
                residuals(&result["residuals"], "result")?,
            ),
        };
        return Ok((vec![one], true));
    }
    if result.get("model").is_some() {
        let one = Owned {
            name: name(&result["name"]),
            looped: spec(result, "model")?,
            comment: "Exported by smelt".to_owned(),
        };
        return Ok((vec![one], true));
    }
    Err(bad(
        "is not a match, grid or sweep result smelt returned, nor a model (a dict with `model`)"
            .into(),
    ))
}

/// export_result(result, path, format, family, vocab, baseline_config, inputs) -> JSON: the
/// models of a result (a match, grid or sweep result, or a model) written at `path`: one
/// model there, or a folder with one entry per cell or value (as `smelt grid --export`).
/// `baseline_config`, a Baseline's config.json as JSON, has its other keys carried over.
#[pyfunction]
#[pyo3(signature = (result, path, format, family, vocab, baseline_config, inputs, overwrite))]
#[allow(clippy::too_many_arguments)]
fn export_result(
    py: Python<'_>,
    result: String,
    path: PathBuf,
    format: String,
    family: Option<String>,
    vocab: Option<u64>,
    baseline_config: Option<String>,
    inputs: Vec<PathBuf>,
    overwrite: bool,
) -> PyResult<String> {
    guarded(py, move || {
        let options = export_options(&format, family.as_deref(), vocab, overwrite)?;
        let result: serde_json::Value =
            serde_json::from_str(&result).map_err(|e| Error::invalid("result", e.to_string()))?;
        let config: Option<serde_json::Value> = baseline_config
            .map(|t| serde_json::from_str(&t))
            .transpose()
            .map_err(|e| Error::invalid("baseline", e.to_string()))?;
        let (models, single) = models_of(&result)?;
        let items: Vec<Item<'_>> = models
            .iter()
            .map(|m| Item {
                name: m.name.clone(),
                looped: &m.looped,
                baseline_config: config.as_ref(),
                comment: m.comment.clone(),
            })
            .collect();
        let written = match (single, items.as_slice()) {
            (true, [one]) => vec![smelt_core::export::write_one(
                one, &options, &path, &inputs,
            )?],
            _ => smelt_core::export::write_all(&items, &options, &path, &inputs)?,
        };
        exported(&path, &written, None)
    })
}

/// plan(source, base_dir, compute, global_batch, force, workload, export, family, vocab,
/// inputs, overwrite, progress, quiet) -> JSON: `smelt plan --format json` of a grid or a
/// budget (a budget names a `baseline`); with `export`, the models and the manifest written
/// there (`smelt plan --export`), the runs' `directory` and `config_sha256` set and
/// `manifest` its path.
#[pyfunction]
#[pyo3(signature = (source, base_dir, compute, global_batch, force, workload, export, family,
                    vocab, inputs, overwrite, progress, quiet))]
#[allow(clippy::too_many_arguments)]
fn plan(
    py: Python<'_>,
    source: Source,
    base_dir: Option<String>,
    compute: Vec<f64>,
    global_batch: u64,
    force: bool,
    workload: Option<String>,
    export: Option<PathBuf>,
    family: Option<String>,
    vocab: Option<u64>,
    inputs: Vec<PathBuf>,
    overwrite: bool,
    progress: Option<Bound<'_, PyAny>>,
    quiet: bool,
) -> PyResult<String> {
    long_call(py, progress, quiet, move |p| {
        let w = changes(workload.as_deref())?;
        let is_budget = match source.0.as_str() {
            "path" => smelt_core::budget::is_budget_text(
                &smelt_core::io::read_to_string(&source.1)?,
                &source.1,
            )?,
            "json" => serde_json::from_str::<serde_json::Value>(&source.1)
                .map_err(|e| Error::invalid("source", e.to_string()))?
                .get("baseline")
                .is_some(),
            other => return Err(bad_kind(other)),
        };
        let options = smelt_core::study::PlanOptions {
            computes: compute,
            global_batch,
        };
        let search = SearchOptions {
            force,
            ..SearchOptions::default()
        };
        let (mut plan, budgets) = match is_budget {
            true => {
                let b = budget(&source, base_dir.as_deref(), &w)?;
                let r = smelt_core::search::match_budget_with(&b, &search)?;
                (smelt_core::study::plan_match(&r, &options)?, vec![b])
            }
            false => {
                let mut g = load_grid(&source, base_dir.as_deref())?;
                for cell in &mut g.cells {
                    cell.budget = with_changes(cell.budget.clone(), &w)?;
                }
                let r = smelt_core::study::match_grid_with(&g, &search, p)?;
                let budgets = g.cells.into_iter().map(|c| c.budget).collect();
                (smelt_core::study::plan_grid(&r, &options)?, budgets)
            }
        };
        let mut manifest = None;
        if let Some(dir) = export {
            let options = export_options("hf", family.as_deref(), vocab, overwrite)?;
            let configs: Vec<_> = budgets.iter().map(Budget::baseline_config).collect();
            let mut read = inputs;
            read.extend(budgets.iter().flat_map(Budget::inputs));
            smelt_core::export::write_plan(&mut plan, &configs, &options, &dir, &read)?;
            manifest = Some(dir.join(smelt_core::export::MANIFEST));
        }
        let mut value = serde_json::to_value(&plan).map_err(|e| Error::Internal {
            message: format!("serialising the plan: {e}"),
        })?;
        if let (Some(m), Some(o)) = (manifest, value.as_object_mut()) {
            o.insert("manifest".into(), serde_json::json!(m));
        }
        to_json(&value)
    })
}

/// collect(manifest, results, partial, output) -> JSON: `smelt collect`'s endpoints
/// (`endpoints`, `missing`, `cells_lacking`) and the endpoints CSV (`csv`), also written at
/// `output` when given (`path`).
#[pyfunction]
#[pyo3(signature = (manifest, results, partial, output))]
fn collect(
    py: Python<'_>,
    manifest: PathBuf,
    results: PathBuf,
    partial: bool,
    output: Option<PathBuf>,
) -> PyResult<String> {
    guarded(py, move || {
        let source = |p: &Path| format!("'{}'", p.display());
        let runs = smelt_core::study::parse_manifest(
            &smelt_core::io::read_to_string(&manifest)?,
            &source(&manifest),
        )?;
        let given = smelt_core::study::parse_results(
            &smelt_core::io::read_to_string(&results)?,
            &source(&results),
        )?;
        let collected = smelt_core::study::collect(&runs, &given, partial)?;
        let csv = collected.to_csv()?;
        if let Some(path) = &output {
            let inputs = [manifest.clone(), results.clone()];
            smelt_core::io::write_output(path, csv.as_bytes(), &inputs)?;
        }
        let mut value = serde_json::to_value(&collected).map_err(|e| Error::Internal {
            message: format!("serialising the endpoints: {e}"),
        })?;
        if let Some(o) = value.as_object_mut() {
            o.insert("csv".into(), serde_json::json!(csv));
            o.insert("path".into(), serde_json::json!(output));
        }
        to_json(&value)
    })
}

/// launcher_flops(spec, against, workload) -> JSON: per-token training FLOPs under each
/// training stack's convention beside the exact count (`smelt cost --conventions`); with
/// `against`, the pair's ratios (Baseline `against`, looped `spec`).
#[pyfunction]
#[pyo3(signature = (spec, against, workload))]
fn launcher_flops(
    py: Python<'_>,
    spec: Source,
    against: Option<Source>,
    workload: Option<String>,
) -> PyResult<String> {
    guarded(py, move || {
        let w = changes(workload.as_deref())?;
        let model = model_spec(&spec, &w)?;
        match against {
            None => to_json(&smelt_core::launcher_flops::launcher_flops(&model)?),
            Some(b) => {
                let base = model_spec(&b, &w)?;
                let label = model.name.clone().unwrap_or_else(|| "looped".to_owned());
                to_json(&smelt_core::launcher_flops::pair(&label, &base, &model)?)
            }
        }
    })
}

/// predict(model, against, card, peak_tflops, bandwidth_tbs, launch_us, calibration,
/// attention, experts, tokens, routing, workload) -> JSON: `smelt predict --format json`.
#[pyfunction]
#[pyo3(signature = (model, against, card, peak_tflops, bandwidth_tbs, launch_us, calibration,
                    attention, experts, tokens, routing, workload))]
#[allow(clippy::too_many_arguments)]
fn predict(
    py: Python<'_>,
    model: Source,
    against: Option<Source>,
    card: Option<String>,
    peak_tflops: Option<f64>,
    bandwidth_tbs: Option<f64>,
    launch_us: Option<f64>,
    calibration: Option<String>,
    attention: Option<String>,
    experts: Option<String>,
    tokens: Option<u64>,
    routing: String,
    workload: Option<String>,
) -> PyResult<String> {
    guarded(py, move || {
        use smelt_core::time::{Calibration, Card, DeviceRequest, PredictOptions};
        let w = changes(workload.as_deref())?;
        let model = model_spec(&model, &w)?;
        let base = against.map(|b| model_spec(&b, &w)).transpose()?;
        let card = card.as_deref().map(Card::parse).transpose()?;
        let calibration = calibration
            .map(|path| {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| Error::invalid("calibration", format!("reading '{path}': {e}")))?;
                Calibration::from_json(&text).map_err(|e| Error::Parse {
                    message: format!("calibration '{path}': {e}"),
                })
            })
            .transpose()?;
        let (roof, _warning) = DeviceRequest {
            card,
            peak: peak_tflops.map(|t| t * 1e12),
            bandwidth: bandwidth_tbs.map(|t| t * 1e12),
            launch_seconds: launch_us.map(|us| us * 1e-6),
            calibration,
            attention: attention.map(|a| a.parse()).transpose()?,
            experts: experts.map(|e| e.parse()).transpose()?,
        }
        .roofline()?;
        let opts = PredictOptions {
            tokens: tokens.unwrap_or(PredictOptions::default().tokens),
            routing: routing.parse()?,
        };
        let models: Vec<&ModelSpec> = base.iter().chain([&model]).collect();
        to_json(&smelt_core::time::predict(&models, &roof, &opts)?)
    })
}

/// mfu(spec, tokens_per_second, gpus, card, peak_tflops, workload) -> JSON: `smelt mfu
/// --format json`.
#[pyfunction]
#[pyo3(signature = (spec, tokens_per_second, gpus, card, peak_tflops, workload))]
fn mfu(
    py: Python<'_>,
    spec: Source,
    tokens_per_second: f64,
    gpus: u64,
    card: Option<String>,
    peak_tflops: Option<f64>,
    workload: Option<String>,
) -> PyResult<String> {
    guarded(py, move || {
        use smelt_core::time::{Card, Peak};
        let model = model_spec(&spec, &changes(workload.as_deref())?)?;
        let peak = match (card, peak_tflops) {
            (Some(c), None) => Peak::Card(Card::parse(&c)?),
            (None, Some(t)) => Peak::Given(t * 1e12),
            _ => {
                return Err(Error::invalid(
                    "card",
                    "give a card or a peak (peak_tflops), not both or neither",
                ));
            }
        };
        to_json(&smelt_core::launcher_flops::mfu(
            &model,
            tokens_per_second,
            gpus,
            peak,
        )?)
    })
}

/// cards() -> JSON: the table of cards (`smelt predict --card`, `smelt mfu --card`), each with
/// its id, name, the words a name of it holds, its peak, bandwidth and source.
#[pyfunction]
fn cards(py: Python<'_>) -> PyResult<String> {
    guarded(py, || to_json(&smelt_core::time::Card::table()))
}

/// The names of the families smelt reads and writes, with what each is.
#[pyfunction]
fn families() -> Vec<(&'static str, &'static str)> {
    smelt_core::hf::Family::ALL
        .iter()
        .map(|f| (f.as_str(), f.about()))
        .collect()
}

/// The native half of the `smelt` module.
#[pymodule]
fn _smelt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cost, m)?)?;
    m.add_function(wrap_pyfunction!(match_, m)?)?;
    m.add_function(wrap_pyfunction!(grid, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(fit, m)?)?;
    m.add_function(wrap_pyfunction!(gain, m)?)?;
    m.add_function(wrap_pyfunction!(bench_models, m)?)?;
    m.add_function(wrap_pyfunction!(import_hf, m)?)?;
    m.add_function(wrap_pyfunction!(export_budget, m)?)?;
    m.add_function(wrap_pyfunction!(export_result, m)?)?;
    m.add_function(wrap_pyfunction!(families, m)?)?;
    m.add_function(wrap_pyfunction!(cards, m)?)?;
    m.add_function(wrap_pyfunction!(launcher_flops, m)?)?;
    m.add_function(wrap_pyfunction!(mfu, m)?)?;
    m.add_function(wrap_pyfunction!(predict, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(collect, m)?)?;
    m.add("SmeltError", m.py().get_type::<SmeltError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
