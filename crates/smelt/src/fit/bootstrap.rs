//! The compute-efficiency gain table, with cell-bootstrap intervals.
//!
//! The bootstrap resamples *cells*, not endpoints (SMELT §4): the distinct `cell` labels of
//! both architectures are drawn with replacement, each architecture keeps the endpoints of
//! the drawn cells (with multiplicity), both surfaces are refitted, and every quantity is
//! recomputed. Refits start from the full-data optimum (a warm start; the full fit used the
//! whole start grid). Resample `i` draws from its own SplitMix64 stream seeded by
//! `(seed, i)`, so the result does not depend on the number of threads. Intervals are the
//! 2.5th and 97.5th percentiles (linear interpolation) of the resamples where the quantity
//! is defined.

use serde::Serialize;

use super::{Endpoint, Fit, FitOptions, Search, ce_gain, finish, form_of, params_of, search};
use crate::error::{Error, Result};
use crate::progress::{Progress, Silent};
use crate::rng::SplitMix64;

/// Bootstrap settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BootstrapOptions {
    /// Number of resamples.
    pub resamples: usize,
    /// Seed.
    pub seed: u64,
}

/// A percentile interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// 2.5th percentile.
    pub lo: f64,
    /// Median.
    pub median: f64,
    /// 97.5th percentile.
    pub hi: f64,
    /// Resamples in which the quantity was defined.
    pub defined: usize,
}

/// One row of the gain table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GainRow {
    /// Training compute `C = F·D`.
    pub compute: f64,
    /// Sparsity.
    pub sparsity: f64,
    /// `1 - C / C_ref` (absent when the reference cannot reach the target's loss).
    pub gain: Option<f64>,
    /// Bootstrap interval of the gain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gain_interval: Option<Interval>,
    /// Frontier loss of the reference at `C`.
    pub loss_reference: f64,
    /// Frontier loss of the target at `C`.
    pub loss_target: f64,
    /// Compute-optimal `F*` of the reference.
    pub f_star_reference: f64,
    /// Compute-optimal `F*` of the target.
    pub f_star_target: f64,
    /// Tokens per equivalent parameter of the reference.
    pub tpp_reference: f64,
    /// Tokens per equivalent parameter of the target.
    pub tpp_target: f64,
}

/// The gain table: `smelt gain --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GainTable {
    /// The reference architecture's fit.
    pub reference: Fit,
    /// The target architecture's fit.
    pub target: Fit,
    /// Bootstrap interval of the reference's `γ`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma_reference_interval: Option<Interval>,
    /// Bootstrap interval of the target's `γ`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma_target_interval: Option<Interval>,
    /// The bootstrap settings, if one was run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<BootstrapOptions>,
    /// Cells resampled.
    pub cells: usize,
    /// One row per (compute, sparsity).
    pub rows: Vec<GainRow>,
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos - pos.floor());
    if i + 1 < sorted.len() {
        sorted[i] + frac * (sorted[i + 1] - sorted[i])
    } else {
        sorted[i]
    }
}

fn interval(mut values: Vec<f64>) -> Option<Interval> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(Interval {
        lo: percentile(&values, 0.025),
        median: percentile(&values, 0.5),
        hi: percentile(&values, 0.975),
        defined: values.len(),
    })
}

fn refit(points: &[Endpoint], warm: &Fit, opts: &FitOptions) -> Option<Fit> {
    let form = form_of(points);
    // One start, run through L-BFGS, on the pool the resamples already run on.
    let inner = FitOptions {
        threads: None,
        search: Search::Exhaustive,
        ..opts.clone()
    };
    let start = [params_of(&warm.surface)];
    let logs = super::objective::logs(points);
    let found = search::minimise(&logs, &start, &inner, form, (&Silent, ""));
    found
        .best
        .f
        .is_finite()
        .then(|| finish(&warm.group, points, found, 1, &inner, form))
}

/// Where and how a gain table compares two architectures.
#[derive(Debug, Clone, PartialEq)]
pub struct GainOptions {
    /// Training compute budgets C = F·D (positive).
    pub computes: Vec<f64>,
    /// Sparsities, each in [0, 1).
    pub sparsities: Vec<f64>,
    /// How both surfaces are fitted.
    pub fit: FitOptions,
    /// A cell bootstrap, for intervals.
    pub bootstrap: Option<BootstrapOptions>,
}

impl GainOptions {
    /// C of 1e20 and 1e21, S of 0.85, 0.95 and 0.97, the standard surface fit, no bootstrap.
    pub fn standard() -> Self {
        Self {
            computes: vec![1e20, 1e21],
            sparsities: vec![0.85, 0.95, 0.97],
            fit: FitOptions::standard(super::Form::Surface),
            bootstrap: None,
        }
    }

    /// The surface fits from `starts`' grid.
    pub fn with_starts(mut self, starts: super::Starts) -> Self {
        self.fit.starts = starts.grid(super::Form::Surface);
        self
    }

    /// A cell bootstrap of `resamples` resamples (0: none) from `seed`.
    pub fn with_bootstrap(mut self, resamples: usize, seed: u64) -> Self {
        self.bootstrap = (resamples > 0).then_some(BootstrapOptions { resamples, seed });
        self
    }
}

/// Builds the gain table of `target` over `reference` (each a name and its endpoints) at
/// every compute x sparsity, with an optional cell bootstrap.
pub fn gain_table(
    reference: (&str, &[Endpoint]),
    target: (&str, &[Endpoint]),
    opts: &GainOptions,
) -> Result<GainTable> {
    gain_table_with(reference, target, opts, &Silent)
}

/// The most bootstrap resamples a gain table takes.
pub const MAX_RESAMPLES: usize = 1_000_000;

/// [`gain_table`], reporting both fits' starts and each resample to `progress`.
pub fn gain_table_with(
    reference: (&str, &[Endpoint]),
    target: (&str, &[Endpoint]),
    gain: &GainOptions,
    progress: &dyn Progress,
) -> Result<GainTable> {
    check(reference.0, target.0, gain)?;
    let (opts, boot) = (&gain.fit, gain.bootstrap);
    let ref_fit = super::fit_with(reference.0, reference.1, opts, progress)?;
    let tgt_fit = super::fit_with(target.0, target.1, opts, progress)?;
    for (role, fit) in [("reference", &ref_fit), ("target", &tgt_fit)] {
        if let Some(why) = fit.surface.frontier_defect() {
            return Err(Error::invalid(
                role,
                format!(
                    "'{}': {why}; its frontier loss (loss_{role} in the gain table) cannot be \
                     computed, so no gain is. The endpoints do not determine the surface: \
                     add runs nearer the compute-optimal frontier, over a wider range of F and \
                     D, and check the fit with smelt fit",
                    fit.group
                ),
            ));
        }
    }
    let mut cells: Vec<String> = reference
        .1
        .iter()
        .chain(target.1)
        .map(|p| p.cell.clone())
        .collect();
    cells.sort_unstable();
    cells.dedup();

    let grid: Vec<(f64, f64)> = gain
        .computes
        .iter()
        .flat_map(|&c| gain.sparsities.iter().map(move |&s| (c, s)))
        .collect();

    let samples = match boot {
        Some(b) => Resampler {
            seed: b.seed,
            cells: &cells,
            reference: (reference.1, &ref_fit),
            target: (target.1, &tgt_fit),
            grid: &grid,
            opts,
        }
        .run(b.resamples, progress)?,
        None => Vec::new(),
    };
    let ok: Vec<&Sample> = samples.iter().flatten().collect();
    let rows = rows(&grid, &ref_fit, &tgt_fit, boot.map(|_| ok.as_slice()));
    Ok(GainTable {
        gamma_reference_interval: boot.and_then(|_| interval(ok.iter().map(|x| x.0).collect())),
        gamma_target_interval: boot.and_then(|_| interval(ok.iter().map(|x| x.1).collect())),
        reference: ref_fit,
        target: tgt_fit,
        bootstrap: boot,
        cells: cells.len(),
        rows,
    })
}

/// An error unless the two names differ, the bootstrap is not too large, every compute is
/// in [`COMPUTE`], every sparsity in `[0, 1)`, and there is at least one of each.
fn check(reference: &str, target: &str, gain: &GainOptions) -> Result<()> {
    if reference == target {
        return Err(Error::invalid(
            "reference/target",
            format!("both name '{target}': compare two architectures"),
        ));
    }
    if let Some(b) = gain.bootstrap
        && b.resamples > MAX_RESAMPLES
    {
        return Err(Error::invalid(
            "bootstrap",
            format!("at most {MAX_RESAMPLES} resamples (got {})", b.resamples),
        ));
    }
    for &c in &gain.computes {
        if !COMPUTE.contains(&c) {
            return Err(Error::invalid(
                "compute",
                format!(
                    "must be between {:e} and {:e} FLOPs (got {c:e}): past them the frontier \
                     is extrapolated so far that its losses and gains are no figures at all",
                    COMPUTE.start(),
                    COMPUTE.end()
                ),
            ));
        }
    }
    for &s in &gain.sparsities {
        if !(s.is_finite() && (0.0..1.0).contains(&s)) {
            return Err(Error::invalid(
                "sparsity",
                format!("must be in [0, 1) (got {s})"),
            ));
        }
    }
    if gain.computes.is_empty() || gain.sparsities.is_empty() {
        return Err(Error::invalid(
            "compute/sparsity",
            "give at least one value of each",
        ));
    }
    for (field, values) in [("compute", &gain.computes), ("sparsity", &gain.sparsities)] {
        if let Some((i, v)) =
            (values.iter().enumerate()).find(|&(i, v)| values[..i].iter().any(|w| w == v))
        {
            let shown = match field {
                "compute" => format!("{v:e}"),
                _ => format!("{v}"),
            };
            return Err(Error::invalid(
                field,
                format!(
                    "{shown} is given twice (values {} and {}): each value is one row of the \
                     table, so give it once",
                    values.iter().position(|w| w == v).map_or(0, |j| j + 1),
                    i + 1
                ),
            ));
        }
    }
    Ok(())
}

/// The training computes `C = F·D` a gain is evaluated at, FLOPs: 10^6 to 10^32 (today's
/// largest runs are near 10^26). A surface fitted on real endpoints says nothing past them,
/// and at `C = 1e300` the printed gain was a 280-digit percentage.
pub const COMPUTE: std::ops::RangeInclusive<f64> = 1e6..=1e32;

/// Resamples below which a percentile interval's 2.5% and 97.5% ends are the extreme
/// resamples themselves (`1 / 0.025 = 40`): not a 95% interval.
pub const MIN_INTERVAL_RESAMPLES: usize = 40;

/// One resample's `(γ of the reference, γ of the target, the gain at each grid point)`.
type Sample = (f64, f64, Vec<f64>);

/// What the cell bootstrap draws from: both architectures' endpoints and full fits.
struct Resampler<'a> {
    seed: u64,
    /// The distinct cells of both architectures, sorted.
    cells: &'a [String],
    reference: (&'a [Endpoint], &'a Fit),
    target: (&'a [Endpoint], &'a Fit),
    /// The (compute, sparsity) points of the table.
    grid: &'a [(f64, f64)],
    opts: &'a FitOptions,
}

impl Resampler<'_> {
    /// `resamples` resamples, in parallel, each reported to `progress`; `None` for one
    /// that keeps too few endpoints or whose refit fails.
    fn run(&self, resamples: usize, progress: &dyn Progress) -> Result<Vec<Option<Sample>>> {
        if resamples == 0 {
            return Err(Error::invalid("bootstrap", "needs at least 1 resample"));
        }
        progress.begin("bootstrap resamples", resamples as u64);
        let samples = crate::par::with_threads(self.opts.threads, || {
            crate::par::map_range(resamples, |i| {
                if progress.cancelled() {
                    return None;
                }
                let r = self.draw(i);
                progress.advance(1);
                r
            })
        });
        progress.end();
        crate::progress::check(progress)?;
        Ok(samples)
    }

    /// Resample `i`, from its own stream (module docs).
    fn draw(&self, i: usize) -> Option<Sample> {
        let cells = self.cells;
        let mut rng =
            SplitMix64::new(self.seed ^ (i as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
        let mut count = std::collections::BTreeMap::new();
        for _ in 0..cells.len() {
            *count
                .entry(&cells[rng.below(cells.len())])
                .or_insert(0usize) += 1;
        }
        let take = |pts: &[Endpoint]| -> Vec<Endpoint> {
            pts.iter()
                .flat_map(|p| {
                    let k = count.get(&p.cell).copied().unwrap_or(0);
                    std::iter::repeat_n(p.clone(), k)
                })
                .collect()
        };
        let ((rpts, ref_fit), (tpts, tgt_fit)) = (self.reference, self.target);
        let (rp, tp) = (take(rpts), take(tpts));
        if rp.len() < ref_fit.points.min(7) || tp.len() < tgt_fit.points.min(7) {
            return None;
        }
        let rf = refit(&rp, ref_fit, self.opts)?;
        let tf = refit(&tp, tgt_fit, self.opts)?;
        let (rs, ts) = (rf.surface, tf.surface);
        let gains = self
            .grid
            .iter()
            .map(|&(c, s)| ce_gain(&rs, &ts, c, s).unwrap_or(f64::NAN))
            .collect();
        Some((rs.gamma(), ts.gamma(), gains))
    }
}

/// One row per grid point from the full fits, with the gain's interval over the bootstrap's
/// defined resamples `ok` when one was run.
fn rows(
    grid: &[(f64, f64)],
    reference: &Fit,
    target: &Fit,
    ok: Option<&[&Sample]>,
) -> Vec<GainRow> {
    let (rs, ts) = (reference.surface, target.surface);
    grid.iter()
        .enumerate()
        .map(|(k, &(c, s))| GainRow {
            compute: c,
            sparsity: s,
            gain: ce_gain(&rs, &ts, c, s),
            gain_interval: ok.and_then(|ok| interval(ok.iter().map(|x| x.2[k]).collect())),
            loss_reference: rs.l_star(c, s),
            loss_target: ts.l_star(c, s),
            f_star_reference: rs.f_star(c, s),
            f_star_target: ts.f_star(c, s),
            tpp_reference: rs.tokens_per_parameter(c, s),
            tpp_target: ts.tokens_per_parameter(c, s),
        })
        .collect()
}
