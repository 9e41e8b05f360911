//! What every backend shares: the [`TimingBackend`] trait (a backend's primitives: time the
//! ceiling, time one kernel shape, estimate a run) and [`measure`], the one bookkeeping
//! that runs the rounds with them.
//!
//! A run times the ceiling once, estimates the whole run from that rate and refuses it if
//! the estimate passes the deadline; then each of `rounds` rounds times the ceiling and
//! every kernel shape of every plan, in plan order (so that a drift in the machine's speed
//! hits them alike), checking the deadline before each shape and reporting each timing to
//! the progress. Per shape the median round counts ([`Measurement::of`]).

use std::time::Instant;

use super::{Measurement, seconds};
use crate::error::{Error, Result};
use crate::plan::{Kernel, Plan};
use crate::progress::Progress;

/// A backend's timing primitives, for [`measure`]. A backend is opened on the plans of a
/// run (each backend's `new`), which it lays out as it needs.
pub trait TimingBackend {
    /// The ceiling kernel: a large square GEMM.
    fn ceiling(&self) -> Kernel;

    /// Seconds per launch of the ceiling; `warm` once it has run in this run.
    fn time_ceiling(&mut self, warm: bool) -> Result<f64>;

    /// Seconds per launch of the `index`-th kernel shape of plan `plan`; `warm` once it has
    /// run in this run.
    fn time(&mut self, plan: usize, index: usize, warm: bool) -> Result<f64>;

    /// The seconds `rounds` rounds of every shape should take, from the ceiling's first
    /// time `first` (seconds per launch).
    fn estimate(&self, first: f64, rounds: usize) -> f64;

    /// Waits for the device after the last round (nothing on a synchronous backend).
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }

    /// The device, in words.
    fn device(&self) -> String;

    /// The kernel library loaded, when the backend loads one (the CUDA backend's cuBLAS).
    fn library(&self) -> Option<String> {
        None
    }

    /// Seconds per launch of the smallest kernel (a `1 x 1 x 1` GEMM): the launch floor
    /// below which a shape's time is the launch's, not its arithmetic's; `None` where the
    /// backend has none to measure.
    fn time_floor(&mut self) -> Result<Option<f64>> {
        Ok(None)
    }
}

/// A shape is launch-bound when its time per launch is under this many times the
/// backend's launch floor ([`TimingBackend::time_floor`]).
pub const LAUNCH_BOUND_FACTOR: f64 = 2.0;

/// The `index`-th shape of plan `plan` in a backend's per-plan `shapes`: an internal error
/// if the backend was opened on other plans than it is asked to time.
pub(crate) fn shape<T: Copy>(shapes: &[Vec<T>], plan: usize, index: usize) -> Result<T> {
    shapes
        .get(plan)
        .and_then(|p| p.get(index))
        .copied()
        .ok_or_else(|| Error::Internal {
            message: format!(
                "kernel shape {index} of plan {plan} timed on a backend opened on other plans"
            ),
        })
}

/// What a backend is asked to time.
pub struct Job<'a> {
    /// The plans, timed interleaved with the ceiling kernel.
    pub plans: &'a [&'a Plan],
    /// Timed rounds per kernel shape (at least 1 is run).
    pub rounds: usize,
    /// The time the run may take.
    pub deadline: Deadline,
    /// Who hears of the rounds.
    pub progress: &'a dyn Progress,
}

/// What a backend measured.
pub struct Timings {
    /// One per plan, in order.
    pub measurements: Vec<Measurement>,
    /// The ceiling kernel's FLOP/s in each round.
    pub ceiling_rounds: Vec<f64>,
    /// The device, in words.
    pub device: String,
    /// The kernel library loaded ([`TimingBackend::library`]).
    pub library: Option<String>,
    /// The launch floor ([`TimingBackend::time_floor`]).
    pub launch_floor: Option<f64>,
}

impl Timings {
    /// Per plan the [`Measurement::of`] its `times[kernel][round]` on `device`, with the
    /// ceiling's FLOP/s in each round.
    pub(crate) fn of(
        plans: &[&Plan],
        times: Vec<Vec<Vec<f64>>>,
        rounds: usize,
        ceiling_rounds: Vec<f64>,
        (device, launch_floor): (String, Option<f64>),
    ) -> Self {
        let measurements = plans.iter().zip(times);
        Self {
            measurements: measurements
                .map(|(p, t)| Measurement::of(p, t, rounds, (&device, launch_floor)))
                .collect(),
            ceiling_rounds,
            device,
            library: None,
            launch_floor,
        }
    }
}

/// Runs `job` on `backend`: the rounds of the module docs.
pub fn measure(backend: &mut dyn TimingBackend, job: &Job) -> Result<Timings> {
    let (plans, deadline, progress) = (job.plans, &job.deadline, job.progress);
    let ceiling = backend.ceiling();
    let rounds = job.rounds.max(1);
    let shapes: usize = plans.iter().map(|p| p.kernels.len()).sum();
    // The first ceiling round gives the rate that estimates the whole run.
    let first = backend.time_ceiling(false)?;
    deadline.refuse_over(
        backend.estimate(first, rounds),
        &format!("{shapes} kernel shapes"),
    )?;
    progress.begin(
        &format!(
            "timing {shapes} kernel shapes and the ceiling, {}",
            super::rounds(rounds)
        ),
        (rounds * (shapes + 1)) as u64,
    );
    let mut ceiling_rates = Vec::with_capacity(rounds);
    let mut times: Vec<Vec<Vec<f64>>> = plans
        .iter()
        .map(|p| vec![Vec::with_capacity(rounds); p.kernels.len()])
        .collect();
    for round in 0..rounds {
        let t = if round == 0 {
            first
        } else {
            backend.time_ceiling(true)?
        };
        ceiling_rates.push(ceiling.flops() as f64 / t);
        progress.advance(1);
        for (i, (p, tp)) in plans.iter().zip(times.iter_mut()).enumerate() {
            for (j, (k, tk)) in p.kernels.iter().zip(tp.iter_mut()).enumerate() {
                deadline.check(&format!("timing a {}x{}x{} GEMM", k.m, k.n, k.k))?;
                crate::progress::check(progress)?;
                tk.push(backend.time(i, j, round > 0)?);
                progress.advance(1);
            }
        }
    }
    let floor = backend.time_floor()?;
    backend.finish()?;
    progress.end();
    Ok(Timings {
        library: backend.library(),
        ..Timings::of(
            plans,
            times,
            rounds,
            ceiling_rates,
            (backend.device(), floor),
        )
    })
}

/// A run's time budget, on a clock: the wall clock, or one a test advances.
pub struct Deadline {
    clock: Box<dyn Fn() -> f64>,
    limit: f64,
    backend: &'static str,
}

impl Deadline {
    /// A budget of `limit` seconds from now, on the wall clock.
    pub fn new(limit: f64, backend: &'static str) -> Self {
        let start = Instant::now();
        Self::with_clock(limit, backend, move || start.elapsed().as_secs_f64())
    }

    /// A budget of `limit` seconds on `clock`, which gives the seconds since the start.
    pub fn with_clock(
        limit: f64,
        backend: &'static str,
        clock: impl Fn() -> f64 + 'static,
    ) -> Self {
        Self {
            clock: Box::new(clock),
            limit,
            backend,
        }
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        (self.clock)()
    }

    /// An error if the run is past its budget.
    pub fn check(&self, doing: &str) -> Result<()> {
        if self.elapsed() > self.limit {
            return Err(Error::Backend {
                backend: self.backend,
                message: format!(
                    "stopped after {}, past the run's limit of {} (--max-seconds), \
                     while {doing}; use fewer --tokens or --rounds, or a larger limit",
                    seconds(self.elapsed()),
                    seconds(self.limit)
                )
                .into(),
            });
        }
        Ok(())
    }

    /// Refuses a run estimated at `estimate` more seconds than the budget leaves.
    pub fn refuse_over(&self, estimate: f64, what: &str) -> Result<()> {
        if self.elapsed() + estimate > self.limit {
            return Err(Error::Backend {
                backend: self.backend,
                message: format!(
                    "timing {what} would take about {}, over the limit of {} \
                     (--max-seconds); use fewer --tokens or --rounds, or a larger limit",
                    seconds(estimate),
                    seconds(self.limit)
                )
                .into(),
            });
        }
        Ok(())
    }
}
