//! Scaling-law surfaces, compute-optimal frontiers and the compute-efficiency gain.
//!
//! # The surface
//!
//! `L(F, S, D) = E + A·(1 - S)^b / F^a + K / D^c`, with `F` training FLOPs per token, `S`
//! compute-equivalent sparsity and `D` training tokens (SMELT, §4). It is fitted in
//! log-sum-exp form, `log L̂ = LSE(e, α + b·log(1 - S) - a·log F, κ - c·log D)` with
//! `e = log E`, `α = log A`, `κ = log K`, by minimising the Huber loss (`δ = 1e-3` by
//! default) of `log L̂ - log L` summed over the endpoints, with L-BFGS ([`lbfgs`]) from the
//! points of a start grid, keeping the lowest objective (Hoffmann et al. 2022, Approach 3):
//! from every start ([`Search::Exhaustive`]), or from the best-scored starts in rounds
//! until one finds nothing lower ([`Search::Screened`], the default; [`search`]).
//!
//! With every `S = 0` the `b` term vanishes and `F` may be read as parameters `N`: this is
//! Chinchilla's form `E + A/N^α + B/D^β` ([`Form::Chinchilla`], `b` fixed at 0).
//!
//! # The frontier
//!
//! Under a compute budget `C = F·D`, the loss is minimal at
//! `F* = (a·A(1-S)^b·C^c / (c·K))^(1/(a+c))`, `D* = C / F*`, and `L* - E ∝ C^(-γ)` with
//! `γ = a·c/(a + c)`. Tokens per equivalent parameter are `D* / (F*/6)`.
//!
//! # Compute-efficiency gain
//!
//! At compute `C` and sparsity `S`, `C_ref` is the compute the reference surface needs to
//! reach the target's frontier loss `L*_tgt(C, S)` (found by bisection on `log C` to a
//! relative tolerance of `1e-12`); the gain is `1 - C / C_ref`. It is undefined when the
//! target's loss is at or below the reference's irreducible loss `E`.

pub mod bootstrap;
pub mod data;
pub mod identify;
pub mod lbfgs;
mod objective;
pub mod search;
mod surface;
pub mod wall_clock;

use serde::Serialize;

pub use bootstrap::{
    BootstrapOptions, GainOptions, GainRow, GainTable, Interval, MAX_RESAMPLES, gain_table,
    gain_table_with,
};
pub use data::{Endpoint, Groups};
pub use objective::{objective, rmse};
pub use search::Search;
pub use surface::{Surface, ce_gain, params_of};

use crate::error::{Error, Result};
use crate::names::named_enum;
use crate::progress::{Progress, Silent};

named_enum! {
    /// Which parameters are fitted.
    pub enum Form: "form" {
        /// All six: `E, A, a, b, K, c`.
        Surface = "surface",
        /// `S = 0` everywhere: `b` is fixed at 0 (Chinchilla's form, `F` read as `N`).
        Chinchilla = "chinchilla",
    }
}

/// How the per-point Huber losses are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// Summed over points (the replication's protocol).
    #[default]
    Sum,
    /// Averaged over points (a smaller objective: with the same stopping rules the
    /// optimiser stops earlier).
    Mean,
}

/// A start grid: the values tried for each parameter (in log space for `E`, `A`, `K`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartGrid {
    /// `e = log E`.
    pub e: Vec<f64>,
    /// `α = log A`.
    pub log_a: Vec<f64>,
    /// `a`.
    pub a: Vec<f64>,
    /// `b` (ignored for [`Form::Chinchilla`]).
    pub b: Vec<f64>,
    /// `κ = log K`.
    pub log_k: Vec<f64>,
    /// `c`.
    pub c: Vec<f64>,
}

fn steps(from: f64, to: f64, step: f64) -> Vec<f64> {
    let n = ((to - from) / step).round() as usize;
    (0..=n).map(|i| from + step * i as f64).collect()
}

impl StartGrid {
    /// The replication's grid: exponents in `{0, 0.5, …, 2}`, `e` in `{-1, -0.5, …, 1}`,
    /// `log A, log K` in `{0, 5, …, 25}` (4,500 starts), and `b` in `{0, 0.5, 1}` for the
    /// full surface.
    pub fn standard(form: Form) -> Self {
        Self {
            e: steps(-1.0, 1.0, 0.5),
            log_a: steps(0.0, 25.0, 5.0),
            a: steps(0.0, 2.0, 0.5),
            b: match form {
                Form::Surface => vec![0.0, 0.5, 1.0],
                Form::Chinchilla => vec![0.0],
            },
            log_k: steps(0.0, 25.0, 5.0),
            c: steps(0.0, 2.0, 0.5),
        }
    }

    /// A small grid (32 starts for the surface, 16 for Chinchilla's form, which fixes `b`) for
    /// tests and quick looks: `e` in `{0, 0.5}`, `log A` and `log K` in `{5, 15}`, `a` in
    /// `{0.3, 0.8}`, `c` at 0.3, `b` in `{0, 0.3}`.
    pub fn small(form: Form) -> Self {
        Self {
            e: vec![0.0, 0.5],
            log_a: vec![5.0, 15.0],
            a: vec![0.3, 0.8],
            b: match form {
                Form::Surface => vec![0.0, 0.3],
                Form::Chinchilla => vec![0.0],
            },
            log_k: vec![5.0, 15.0],
            c: vec![0.3],
        }
    }

    /// Every start point, in a fixed order.
    pub fn points(&self) -> Vec<[f64; 6]> {
        let mut out = Vec::new();
        for &e in &self.e {
            for &la in &self.log_a {
                for &a in &self.a {
                    for &b in &self.b {
                        for &lk in &self.log_k {
                            for &c in &self.c {
                                out.push([e, la, a, b, lk, c]);
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

named_enum! {
    /// A named start grid.
    pub enum Starts: "starts" {
        /// [`StartGrid::standard`]: the replication's grid.
        Standard = "standard",
        /// [`StartGrid::small`]: 32 starts (16 for Chinchilla's form), for a quick look.
        Small = "small",
    }
}

impl Starts {
    /// The grid for `form`.
    pub fn grid(self, form: Form) -> StartGrid {
        match self {
            Starts::Standard => StartGrid::standard(form),
            Starts::Small => StartGrid::small(form),
        }
    }
}

/// The smallest Huber threshold a fit takes: the Huber loss's gradient scales with `delta`
/// (for residuals beyond it), and below about 1e-10 it falls under L-BFGS's absolute
/// gradient test at the first start, which would then be reported as converged unfitted;
/// 1e-6 leaves that four orders of magnitude away (the paper's threshold is 1e-3).
pub const MIN_DELTA: f64 = 1e-6;

/// Fitting options.
#[derive(Debug, Clone, PartialEq)]
pub struct FitOptions {
    /// Huber threshold on log-loss residuals.
    pub delta: f64,
    /// Sum or mean of the per-point losses.
    pub scale: Scale,
    /// Start points.
    pub starts: StartGrid,
    /// How they are searched.
    pub search: Search,
    /// Optimiser stopping rules.
    pub lbfgs: lbfgs::Options,
    /// Worker threads (`None`: all cores; results do not depend on it).
    pub threads: Option<usize>,
}

impl FitOptions {
    /// The replication's protocol for `form`: δ = 1e-3, summed, the standard grid searched
    /// [`Search::Screened`], each L-BFGS run to convergence
    /// ([`lbfgs::Options::converged`]), all available cores.
    pub fn standard(form: Form) -> Self {
        Self {
            delta: 1e-3,
            scale: Scale::Sum,
            starts: StartGrid::standard(form),
            search: Search::Screened,
            lbfgs: lbfgs::Options::converged(),
            threads: None,
        }
    }
}

/// How the best start's optimisation ended, how the grid was searched, and how many of
/// the starts run through L-BFGS agree with the best.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Convergence {
    /// Why the best start stopped.
    pub termination: lbfgs::Termination,
    /// Its iterations.
    pub iterations: usize,
    /// Its largest gradient component at the end.
    pub grad_max: f64,
    /// Starts in the grid (each scored, for a screened search).
    pub starts: usize,
    /// How the grid was searched.
    pub search: Search,
    /// L-BFGS runs on every endpoint: from the starts (all of them for an exhaustive
    /// search), or, for a large input, from the subsample's best ends ([`search`]).
    pub polished: usize,
    /// Of those, the runs that ended within `1e-9` (relative) of the best objective.
    pub polished_at_best: usize,
    /// For more than [`search::SUBSAMPLE`] endpoints (screened): the search of the
    /// subsample that chose where the runs on every endpoint start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subsample: Option<search::Subsample>,
}

/// A fitted surface: the JSON contract of `smelt fit` (one per group).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    /// The group's value (empty without `--group`).
    pub group: String,
    /// Surface or Chinchilla form.
    pub form: Form,
    /// The coefficients `E, A, a, b, K, c` (flattened into the JSON object; `b` is 0 and
    /// fixed for the Chinchilla form).
    #[serde(flatten)]
    pub surface: Surface,
    /// `a·c / (a + c)`.
    pub gamma: f64,
    /// Root-mean-square error of the predicted loss, in nats.
    pub rmse: f64,
    /// The minimised objective (Huber of log-loss residuals, summed or averaged).
    pub objective: f64,
    /// Huber threshold used.
    pub delta: f64,
    /// Sum or mean.
    pub scale: Scale,
    /// Endpoints fitted.
    pub points: usize,
    /// Distinct cells among them.
    pub cells: usize,
    /// How the optimisation ended.
    pub convergence: Convergence,
    /// Why the coefficients may not be determined by the data ([`identify`]); absent when
    /// there is nothing to say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The fits of an endpoints file, one per group: `smelt fit --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fits {
    /// One fit per group, sorted by group.
    pub fits: Vec<Fit>,
}

/// The form a set of endpoints calls for: Chinchilla when every `S` is 0.
pub fn form_of(points: &[Endpoint]) -> Form {
    if points.iter().all(|p| p.s == 0.0) {
        Form::Chinchilla
    } else {
        Form::Surface
    }
}

/// Fits a surface to `points` (module docs).
pub fn fit(group: &str, points: &[Endpoint], opts: &FitOptions) -> Result<Fit> {
    fit_with(group, points, opts, &Silent)
}

/// One fit per group, each with the options `opts` gives for the group's form
/// ([`form_of`]).
pub fn fit_groups(
    groups: &Groups,
    opts: impl Fn(Form) -> FitOptions,
    progress: &dyn Progress,
) -> Result<Fits> {
    let fits = groups.iter().map(|(name, points)| {
        let opts = opts(form_of(points));
        fit_with(name, points, &opts, progress)
    });
    Ok(Fits {
        fits: fits.collect::<Result<_>>()?,
    })
}

/// [`fit`], reporting each start run to `progress`.
pub fn fit_with(
    group: &str,
    points: &[Endpoint],
    opts: &FitOptions,
    progress: &dyn Progress,
) -> Result<Fit> {
    let form = form_of(points);
    let needed = match form {
        Form::Surface => 7,
        Form::Chinchilla => 6,
    };
    if points.len() < needed {
        return Err(Error::invalid(
            if group.is_empty() {
                "endpoints".to_owned()
            } else {
                format!("group '{group}'")
            },
            format!(
                "has {} endpoints; fitting the {} form needs at least {needed}",
                points.len(),
                match form {
                    Form::Surface => "6-parameter surface",
                    Form::Chinchilla => "5-parameter Chinchilla",
                }
            ),
        ));
    }
    if !(opts.delta.is_finite() && opts.delta >= MIN_DELTA) {
        return Err(Error::invalid(
            "delta",
            format!(
                "must be a finite number of at least {MIN_DELTA:e} (got {:e}): below it the \
                 Huber loss's gradient falls under L-BFGS's absolute gradient test, and a \
                 start would be reported as converged without being fitted",
                opts.delta
            ),
        ));
    }
    let warnings = identify::check_data(group, points, form, opts.delta)?;
    let mut starts = opts.starts.points();
    if form == Form::Chinchilla {
        // `b` has no effect: fix it at 0 and drop the starts that become duplicates.
        let mut seen = std::collections::BTreeSet::new();
        starts.iter_mut().for_each(|s| s[3] = 0.0);
        starts.retain(|s| seen.insert(s.map(f64::to_bits)));
    }
    if starts.is_empty() {
        return Err(Error::invalid("starts", "the start grid is empty"));
    }
    let task = if group.is_empty() {
        "fitting".to_owned()
    } else {
        format!("fitting {group}")
    };
    let found = search::minimise(
        &objective::logs(points),
        &starts,
        opts,
        form,
        (progress, &task),
    );
    crate::progress::check(progress)?;
    let mut fit = finish(group, points, found, starts.len(), opts, form);
    fit.warnings.splice(0..0, warnings);
    Ok(fit)
}

pub(crate) fn finish(
    group: &str,
    points: &[Endpoint],
    found: search::Outcome,
    starts: usize,
    opts: &FitOptions,
    form: Form,
) -> Fit {
    let best = found.best;
    let s = Surface::from_params(&best.x);
    let mut cells: Vec<&str> = points.iter().map(|p| p.cell.as_str()).collect();
    cells.sort_unstable();
    cells.dedup();
    Fit {
        group: group.to_owned(),
        form,
        surface: s,
        gamma: s.gamma(),
        rmse: rmse(&s, points),
        objective: best.f,
        delta: opts.delta,
        scale: opts.scale,
        points: points.len(),
        cells: cells.len(),
        convergence: Convergence {
            termination: best.termination,
            iterations: best.iterations,
            grad_max: best.grad_max,
            starts,
            search: opts.search,
            polished: found.polished,
            polished_at_best: found.at_best,
            subsample: found.subsample,
        },
        warnings: identify::check_fit(&s, points),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_matches_finite_differences() {
        let pts: Vec<Endpoint> = (0..20)
            .map(|i| Endpoint {
                f: 1e8 * (1.0 + i as f64),
                s: 0.1 * (i % 5) as f64,
                d: 1e10 * (2.0 + i as f64),
                loss: 2.0 + 0.05 * (i % 7) as f64,
                cell: i.to_string(),
            })
            .collect();
        let p = [0.5, 8.0, 0.35, 0.2, 9.0, 0.4];
        let mut g = [0.0; 6];
        let f0 = objective(&pts, &p, &mut g, 1e-3, Scale::Sum, Form::Surface);
        assert!(f0 > 0.0);
        for k in 0..6 {
            let h = 1e-6;
            let mut up = p;
            up[k] += h;
            let mut dn = p;
            dn[k] -= h;
            let mut tmp = [0.0; 6];
            let fd = (objective(&pts, &up, &mut tmp, 1e-3, Scale::Sum, Form::Surface)
                - objective(&pts, &dn, &mut tmp, 1e-3, Scale::Sum, Form::Surface))
                / (2.0 * h);
            assert!(
                (fd - g[k]).abs() <= 1e-5 * fd.abs().max(1e-3),
                "param {k}: {fd} vs {}",
                g[k]
            );
        }
    }
}
