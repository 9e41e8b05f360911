//! The native half of the Python module `smelt` (`smelt._smelt`). The public functions,
//! with their signatures and docs, are in `python/smelt/__init__.py`; each hands its call
//! over here as one request, the JSON of the library's request type for the operation
//! (`smelt_core::request`), which reads and validates it, and gets back the library's
//! result as JSON text. Nothing is checked or derived here.
//!
//! Work that can take long (a grid, a sweep, a fit, a gain, a benchmark) runs on a thread of
//! its own while the calling thread watches for Ctrl-C (raised as `KeyboardInterrupt`, the
//! work stopped at its next step) and passes progress to a callback or to `sys.stderr`.
//! No Rust panic ever reaches Python: one would be a bug in smelt, and arrives as a
//! `SmeltError` saying so.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use smelt_core::Error;
use smelt_core::progress::Progress;
use smelt_core::request::{self as req, Request};
use smelt_core::search::Verdict;

create_exception!(
    smelt,
    SmeltError,
    PyValueError,
    "An invalid model, budget or grid (the message names the field and the rule), an \
     infeasible lattice, or an unreadable file. `field` is the offending field when one is \
     named (e.g. \"model.kv_heads\", \"top\"), else None; `rule` the rule it breaks (the \
     parser's words for text it cannot read), else None."
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
        Error::Parse { message } => (parse_field(message), Some(message.clone())),
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
                let (done, finished) = std::sync::mpsc::channel::<()>();
                let work = s.spawn(move || {
                    let _done = done;
                    catch_unwind(AssertUnwindSafe(|| f(watch))).unwrap_or_else(|p| Err(panicked(p)))
                });
                // The work's end drops `done`: the wait returns at once, not at the next tick.
                while let Err(RecvTimeoutError::Timeout) =
                    finished.recv_timeout(Duration::from_millis(50))
                {
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

fn to_json(value: &impl serde::Serialize) -> smelt_core::Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Internal {
        message: format!("serialising the result: {e}"),
    })
}

/// Reads `request` as `R`, runs it (as [`long_call`]) and returns its result as JSON.
fn answer<R: Request>(
    py: Python<'_>,
    request: &str,
    progress: Option<Bound<'_, PyAny>>,
    quiet: bool,
) -> PyResult<String> {
    long_call(py, progress, quiet, |p| {
        to_json(&req::from_json::<R>(request)?.run(p)?)
    })
}

/// [`answer`] for a result judged against its tolerances: `{"result": ..., "tolerance":
/// [line, ...]}`, the lines the command line says before it exits 3.
fn judged<R: Request>(
    py: Python<'_>,
    request: &str,
    progress: Option<Bound<'_, PyAny>>,
    quiet: bool,
) -> PyResult<String>
where
    R::Output: Verdict,
{
    long_call(py, progress, quiet, |p| {
        let result = req::from_json::<R>(request)?.run(p)?;
        let tolerance = req::tolerance_lines(&result);
        to_json(&serde_json::json!({ "result": result, "tolerance": tolerance }))
    })
}

/// Declares one native function per operation: `name(request, progress=None, quiet=True)
/// -> JSON`, the request the JSON of the library's `Request` type.
macro_rules! operations {
    ($($how:ident $name:ident: $request:ty, $doc:literal;)+) => {
        $(
            #[doc = $doc]
            #[pyfunction]
            #[pyo3(signature = (request, progress=None, quiet=true))]
            fn $name(
                py: Python<'_>,
                request: &str,
                progress: Option<Bound<'_, PyAny>>,
                quiet: bool,
            ) -> PyResult<String> {
                $how::<$request>(py, request, progress, quiet)
            }
        )+

        /// Adds every operation to the module.
        fn add_operations(m: &Bound<'_, PyModule>) -> PyResult<()> {
            $(m.add_function(wrap_pyfunction!($name, m)?)?;)+
            Ok(())
        }
    };
}

operations! {
    answer cost: req::CostRequest, "`smelt cost --format json` (with `against`, `--against`).";
    judged match_: req::MatchRequest, "`smelt match --format json`.";
    judged grid: req::GridRequest, "`smelt grid --format json`.";
    judged sweep: req::SweepRequest, "`smelt sweep --format json`.";
    answer fit: req::FitRequest, "`smelt fit --format json`.";
    answer gain: req::GainRequest, "`smelt gain --format json`.";
    answer bench_: req::BenchRequest, "`smelt bench --format json`.";
    answer import_hf: req::ImportRequest, "`smelt import`: a config.json as a model file.";
    answer export: req::ExportRequest, "`smelt match --format hf|model -o`, `--export`.";
    answer launcher_flops: req::LauncherRequest, "`smelt cost --conventions --format json`.";
    answer mfu: req::MfuRequest, "`smelt mfu --format json`.";
    answer predict: req::PredictRequest, "`smelt predict --format json`.";
    answer predict_step: req::StepPredictRequest, "`smelt predict --global-batch --format json`.";
    answer calibrate: req::CalibrateRequest, "`smelt calibrate`: a calibration from a bench.";
    answer merge: req::MergeRequest, "`smelt merge`: a grid's shards joined.";
    answer plan: req::PlanRequest, "`smelt plan --format json` (with `export`, `--export`).";
    answer collect: req::CollectRequest, "`smelt collect --format json`.";
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
    add_operations(m)?;
    m.add_function(wrap_pyfunction!(families, m)?)?;
    m.add_function(wrap_pyfunction!(cards, m)?)?;
    m.add("SmeltError", m.py().get_type::<SmeltError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
