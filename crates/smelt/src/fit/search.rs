//! Searching a start grid for the objective's lowest minimum.
//!
//! **Exhaustive** ([`Search::Exhaustive`]): L-BFGS from every start, the lowest end kept
//! (Hoffmann et al. 2022, Approach 3, as Epoch AI's replication runs it). It costs
//! `starts × evaluations per run × endpoints`: about 100 evaluations per start, so the
//! standard grid's 13,500 starts make over a million passes over the endpoints.
//!
//! **Screened** ([`Search::Screened`], the default): every start is *scored* by the
//! objective there (one pass over the endpoints each, no gradient); L-BFGS then runs from
//! the best-scored starts in rounds of [`ROUND`], in score order, until a round ends no
//! lower than the best found before it (by more than `1e-9` relative); at least two rounds
//! run, so the best is always confirmed by a further [`ROUND`] starts that do not beat it.
//! Each L-BFGS run is the exhaustive search's run from the same start, in the same
//! arithmetic, so whenever the start that wins the exhaustive search is among those
//! polished the two searches return the same optimum, bit for bit; otherwise a start of the
//! same basin, equal to rounding. That the best-scored starts reach the best basin is an
//! observation, not a theorem: on the Chinchilla data and on the synthetic surfaces the
//! first ten starts by score all end at the exhaustive optimum, and the tests compare both
//! searches on them. The equivalence is for runs to convergence (the standard options):
//! runs stopped early, as scipy's `ftol` stops them, end wherever they stop, and the lowest
//! of a few such ends is not the lowest of all; `--search exhaustive` runs the full
//! protocol.
//!
//! **Large inputs** (more than [`SUBSAMPLE`] endpoints, screened): scoring and the rounds
//! above run on an evenly strided subsample of [`SUBSAMPLE`] endpoints (every `n / SUBSAMPLE`-th
//! row, so every cell of a file sorted by cell is in it); L-BFGS then runs on *every*
//! endpoint from the [`CONFIRM`] best distinct ends found there (ends more than `1e-9` apart
//! in objective), and the lowest of those runs is the fit. The cost of a start's L-BFGS run
//! grows with the endpoints; its number of iterations does not, so a million endpoints are
//! fitted in the time of a few runs on them rather than of every start's (timings in
//! docs/benchmarks.md). The fit is the full data's optimum in the basin of one of those ends,
//! to rounding; a basin that the full data alone would rank first, and that none of the
//! subsample's best ends lies in, is not searched: `--search exhaustive` runs the full
//! protocol on every endpoint. Inputs of at most [`SUBSAMPLE`] endpoints are searched as
//! above, on all of them.
//!
//! Ties: of two equal minima the one from the earlier start in grid order is kept, in both
//! searches, so neither depends on the number of threads.

use super::lbfgs::{self, Minimum};
use super::objective::{Logs, objective_logs, value_logs};
use super::{FitOptions, Form};
use crate::names::named_enum;
use crate::progress::Progress;

named_enum! {
    /// How the start grid is searched (module docs).
    pub enum Search: "search" {
        /// Score every start, run L-BFGS from the best-scored, in rounds.
        Screened = "screened",
        /// Run L-BFGS from every start.
        Exhaustive = "exhaustive",
    }
}

/// Starts run through L-BFGS per round of a screened search.
pub const ROUND: usize = 64;

/// Endpoints above which a screened search screens on a subsample of this many (module docs).
pub const SUBSAMPLE: usize = 1 << 14;

/// The distinct ends of a subsample's search that are run again on every endpoint.
pub const CONFIRM: usize = 4;

/// Two objectives this close (relative) are the same minimum.
const SAME: f64 = 1e-9;

/// What a search found.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// The lowest minimum.
    pub best: Minimum,
    /// L-BFGS runs on every endpoint.
    pub polished: usize,
    /// Of them, those that ended within `1e-9` (relative) of the best.
    pub at_best: usize,
    /// The screening of a large input, when it ran on a subsample.
    pub subsample: Option<Subsample>,
}

/// The screened search of a large input on its subsample (module docs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Subsample {
    /// Endpoints in the subsample.
    pub points: usize,
    /// Starts run through L-BFGS on it.
    pub polished: usize,
    /// Of them, those that ended within `1e-9` (relative) of its best.
    pub polished_at_best: usize,
}

/// Runs L-BFGS from `starts[i]` for each `i` of `which`, in parallel, reporting each run.
fn polish(
    points: &[Logs],
    starts: &[[f64; 6]],
    which: &[usize],
    opts: &FitOptions,
    form: Form,
    progress: &dyn Progress,
) -> Vec<(usize, Minimum)> {
    crate::par::with_threads(opts.threads, || {
        crate::par::map(which, |&i| {
            let f = |p: &[f64], g: &mut [f64]| {
                objective_logs(points, p, g, (opts.delta, opts.scale, form))
            };
            // Once the caller asks to stop, the remaining starts are skipped (and the fit
            // returns Error::Interrupted).
            let lbfgs = match progress.cancelled() {
                true => lbfgs::Options {
                    max_iter: 0,
                    ..opts.lbfgs
                },
                false => opts.lbfgs,
            };
            let m = lbfgs::minimize(f, &starts[i], &lbfgs);
            progress.advance(1);
            (i, m)
        })
    })
}

/// The lowest finite minimum of `runs`, the earlier start on a tie (the first run when none
/// is finite).
fn lowest(runs: &[(usize, Minimum)]) -> &(usize, Minimum) {
    runs.iter()
        .filter(|(_, m)| m.f.is_finite())
        .min_by(|(i, x), (j, y)| x.f.total_cmp(&y.f).then(i.cmp(j)))
        .unwrap_or(&runs[0])
}

fn same(f: f64, best: f64) -> bool {
    (f - best).abs() <= SAME * best.abs().max(1e-300)
}

fn outcome(runs: &[(usize, Minimum)]) -> Outcome {
    let best = lowest(runs).1.clone();
    Outcome {
        polished: runs.len(),
        at_best: runs.iter().filter(|(_, m)| same(m.f, best.f)).count(),
        best,
        subsample: None,
    }
}

/// Searches `starts` (not empty) as `opts.search` says, reporting to `progress` under
/// `task`.
pub(crate) fn minimise(
    points: &[Logs],
    starts: &[[f64; 6]],
    opts: &FitOptions,
    form: Form,
    (progress, task): (&dyn Progress, &str),
) -> Outcome {
    let n = starts.len();
    if opts.search == Search::Exhaustive {
        progress.begin(task, n as u64);
        let all: Vec<usize> = (0..n).collect();
        let runs = polish(points, starts, &all, opts, form, progress);
        progress.end();
        return outcome(&runs);
    }
    if points.len() > SUBSAMPLE && n > 1 {
        return subsampled(points, starts, opts, form, (progress, task));
    }
    outcome(&screen(points, starts, opts, form, (progress, task)))
}

/// The L-BFGS runs of a screened search of `points` (module docs).
fn screen(
    points: &[Logs],
    starts: &[[f64; 6]],
    opts: &FitOptions,
    form: Form,
    (progress, task): (&dyn Progress, &str),
) -> Vec<(usize, Minimum)> {
    let n = starts.len();
    progress.begin(&format!("{task}: scoring {n} starts"), n as u64);
    let scores = crate::par::with_threads(opts.threads, || {
        crate::par::map(starts, |x| {
            let v = value_logs(points, x, (opts.delta, opts.scale, form));
            progress.advance(1);
            if v.is_finite() { v } else { f64::INFINITY }
        })
    });
    progress.end();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| scores[i].total_cmp(&scores[j]).then(i.cmp(&j)));
    let mut runs: Vec<(usize, Minimum)> = Vec::new();
    for (round, batch) in order.chunks(ROUND).enumerate() {
        let before = (!runs.is_empty()).then(|| lowest(&runs).1.f);
        progress.begin(
            &format!("{task}: L-BFGS from the best-scored, round {}", round + 1),
            batch.len() as u64,
        );
        runs.extend(polish(points, starts, batch, opts, form, progress));
        progress.end();
        let now = lowest(&runs).1.f;
        let improved = match before {
            None => true,
            Some(b) => !b.is_finite() || (now < b && !same(now, b)),
        };
        if !improved || progress.cancelled() {
            break;
        }
    }
    runs
}

/// A screened search of more than [`SUBSAMPLE`] endpoints: screened on a strided subsample,
/// its [`CONFIRM`] best distinct ends run again on every endpoint (module docs).
fn subsampled(
    points: &[Logs],
    starts: &[[f64; 6]],
    opts: &FitOptions,
    form: Form,
    (progress, task): (&dyn Progress, &str),
) -> Outcome {
    let (n, m) = (points.len(), SUBSAMPLE);
    // Row i * n / m for i < m: evenly strided, in file order (n * m fits in u128).
    let sub: Vec<Logs> = (0..m)
        .map(|i| points[(i as u128 * n as u128 / m as u128) as usize])
        .collect();
    let on_sub = format!("{task} (a subsample of {m} of the {n} endpoints)");
    let runs = screen(&sub, starts, opts, form, (progress, &on_sub));
    let screened = outcome(&runs);
    let mut ranked: Vec<&(usize, Minimum)> = runs.iter().filter(|(_, r)| r.f.is_finite()).collect();
    ranked.sort_by(|(i, x), (j, y)| x.f.total_cmp(&y.f).then(i.cmp(j)));
    let mut ends: Vec<[f64; 6]> = Vec::new();
    let mut kept: Vec<f64> = Vec::new();
    for (_, r) in ranked {
        if ends.len() == CONFIRM {
            break;
        }
        if kept.iter().all(|&f| !same(r.f, f))
            && let Ok(x) = <[f64; 6]>::try_from(r.x.as_slice())
        {
            ends.push(x);
            kept.push(r.f);
        }
    }
    if ends.is_empty() {
        // No finite end: the lowest start by its own run, so that the fit says where it
        // stopped.
        ends.push(starts[lowest(&runs).0]);
    }
    progress.begin(
        &format!(
            "{task}: L-BFGS on all {n} endpoints from the subsample's {} best ends",
            ends.len()
        ),
        ends.len() as u64,
    );
    let all: Vec<usize> = (0..ends.len()).collect();
    let confirmed = polish(points, &ends, &all, opts, form, progress);
    progress.end();
    Outcome {
        subsample: Some(Subsample {
            points: m,
            polished: screened.polished,
            polished_at_best: screened.at_best,
        }),
        ..outcome(&confirmed)
    }
}
