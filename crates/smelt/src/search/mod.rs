//! The exact budget-matching solver.
//!
//! Given a [`Budget`] (a Baseline, a loop recipe, a lattice, weights and a mode), find the
//! looped configuration on the lattice whose budgets match the Baseline's best, and report
//! what is left over. Every count comes from the cost model ([`mod@crate::cost`]); nothing here
//! re-derives one.
//!
//! # Objective
//!
//! For a candidate with signed relative residuals `r_F, r_N, r_KV` (`looped / Baseline - 1`
//! of training FLOPs, parameters and KV elements per token) and weights `w`, the **score**
//! is the vector `(w_F|r_F|, w_N|r_N|, w_KV|r_KV|)` sorted in decreasing order. Candidates
//! are ordered by score lexicographically (minimise the largest weighted residual, then the
//! next largest, then the smallest). Equal scores (different factorisations of the same
//! widths, say `16 x 80` and `8 x 160` heads) go to the configuration closest to the
//! Baseline's shape, compared knob by knob: `|Δhead_dim|`, `|Δkv_heads|`, `|Δheads|`,
//! `|Δhidden|`, `|Δexperts|`, `|Δexpert_ffn|`; equal distances go to the larger `head_dim`,
//! fewer `kv_heads`, fewer `heads`, larger `hidden`, fewer `experts`, smaller `expert_ffn`
//! ([`rank_key`]). This is a total order on distinct configurations, so the answer is unique
//! and deterministic. In [`Mode::Conservative`] only candidates with every residual `<= 0`
//! (compared exactly, in integers) are admissible.
//!
//! # Why the result is the optimum of the lattice
//!
//! The solver enumerates every lattice point except most expert counts, and skips those
//! with a proof that they cannot win:
//!
//! 1. **Order.** Attention shapes `(head_dim, kv_heads, heads)` are generated once and
//!    sorted by their weighted KV residual (KV depends on the shape alone). The loops run
//!    over `hidden`, then `expert_ffn`, then shapes in that order, then expert counts.
//! 2. **KV bound.** Every candidate's largest weighted residual is at least its
//!    `w_KV|r_KV|`. Once that bound is strictly above the worst score still kept (the best
//!    one, or the N-th best for `--top N`), this shape and every later one are skipped for
//!    this `hidden`: none can enter the kept set.
//! 3. **Closed form in the expert count.** For fixed `hidden`, `expert_ffn` and shape, the
//!    FLOPs and parameters are affine in the expert count `E` (only the router and the
//!    expert weights depend on it, both linearly), with positive slopes; the KV cache does
//!    not depend on `E`. The solver reads the two affine maps off the cost model at the
//!    first two lattice values of `E`. Between consecutive *breakpoints* — the zeros of
//!    `r_F` and `r_N` and every point where two of `w_F|r_F|`, `w_N|r_N|`, `w_KV|r_KV|`
//!    cross — each component of the sorted score is an affine function of `E`, and the
//!    component holding `|r_N|` is strictly monotone. The lexicographic minimum over the
//!    lattice points of such an interval is therefore attained at one of its two end
//!    points, and no interior point ties with it. So it suffices to evaluate the lattice
//!    points next to each breakpoint and the two ends of the range; each is then costed
//!    exactly by the cost model. Inside an interval the order is monotone, so the `N` best
//!    points of an interval are the `N` nearest one of its ends: for `--top N` the solver
//!    takes `N + 1` lattice points on each side of every breakpoint and range end (one more
//!    than needed, to be safe from floating-point rounding in locating a breakpoint). In conservative mode the admissible
//!    `E` form a prefix of the range ending next to a zero of `r_F` or `r_N`, which is a
//!    breakpoint, so the same candidates suffice.
//!
//! The tests check this against brute force over every lattice point and against an
//! independent mixed-integer formulation solved by `good_lp` ([`milp`]).

mod candidate;
mod grid;
pub mod milp;
mod report;
mod sweep;

use std::cmp::Ordering;

pub use candidate::{Candidate, Point, looped_model, rank_key};
pub use grid::{GridCell, GridReport, GridSummary, match_grid, match_grid_with};
pub use report::{
    Alternative, BudgetPair, MatchReport, SparsityPair, match_budget, match_budget_with,
};
pub use sweep::{Knob, MAX_SWEEP_VALUES, SweepReport, SweepRow, parse_values, sweep, sweep_with};

use serde::Serialize;

use crate::budget::{Budget, HeadsRule, Mode, score};
use crate::cost::{Budgets, MeanKeys, budgets_with};
use crate::error::{Error, Result};
use crate::spec::{Loop, Model, ModelSpec};

/// How big the search was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SearchStats {
    /// Points of the declared lattice (every combination allowed by the shape limits).
    pub lattice_points: u128,
    /// Points costed exactly by the cost model.
    pub evaluated: u64,
}

/// The result of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// The Baseline's budgets.
    pub baseline: Budgets,
    /// The loop of the looped model.
    pub looping: Option<Loop>,
    /// The best candidates, best first (at most the `top` asked for).
    pub ranked: Vec<Candidate>,
    /// Search size.
    pub stats: SearchStats,
}

impl Solution {
    /// The optimum.
    pub fn best(&self) -> &Candidate {
        &self.ranked[0]
    }
}

/// An attention shape and its KV cache.
#[derive(Debug, Clone, Copy)]
struct Shape {
    head_dim: u64,
    kv_heads: u64,
    heads: u64,
    kv_score: f64,
    kv_ok: bool,
}

/// The fixed context of one search.
struct Search<'a> {
    budget: &'a Budget,
    base: Budgets,
    keys: MeanKeys,
    looping: Option<Loop>,
    top: usize,
    kept: Vec<Candidate>,
    evaluated: u64,
}

impl Search<'_> {
    fn model(&self, hidden: u64, ffn: u64, shape: &Shape, experts: u64) -> Model {
        looped_model(
            self.budget,
            self.looping.as_ref(),
            Point {
                hidden,
                expert_ffn: ffn,
                heads: shape.heads,
                kv_heads: shape.kv_heads,
                head_dim: shape.head_dim,
                experts,
            },
        )
    }

    fn budgets(&mut self, model: &Model) -> Result<Budgets> {
        self.evaluated += 1;
        budgets_with(model, self.keys, &self.budget.baseline().counting)
    }

    fn admissible(&self, b: &Budgets) -> bool {
        match self.budget.mode() {
            Mode::TwoSided => true,
            Mode::Conservative => b.within(&self.base),
        }
    }

    /// The worst score still kept, once `top` candidates are kept.
    fn bar(&self) -> Option<f64> {
        (self.kept.len() >= self.top).then(|| self.kept[self.kept.len() - 1].score[0])
    }

    fn offer(&mut self, model: Model, budgets: Budgets) {
        if !self.admissible(&budgets) {
            return;
        }
        let base = &self.budget.baseline().model;
        let residuals = budgets.residuals_against(&self.base);
        let c = Candidate {
            score: score(&residuals, self.budget.weights()),
            model,
            budgets,
            residuals,
        };
        if self.kept.len() >= self.top
            && c.cmp_rank(&self.kept[self.kept.len() - 1], base) != Ordering::Less
        {
            return;
        }
        let at = self
            .kept
            .partition_point(|k| k.cmp_rank(&c, base) == Ordering::Less);
        self.kept.insert(at, c);
        self.kept.truncate(self.top);
    }

    /// Lattice indices of `E` worth evaluating (module docs, step 3).
    fn expert_candidates(&mut self, hidden: u64, ffn: u64, shape: &Shape) -> Result<Vec<u64>> {
        let e = self.budget.lattice().experts;
        let n = e.len();
        let top_k = self.budget.baseline().model.moe.top_k;
        // Indices below top_k cannot route.
        let first = if e.min >= top_k {
            0
        } else {
            (top_k - e.min).div_ceil(e.step)
        };
        if first >= n {
            return Ok(Vec::new());
        }
        let last = n - 1;
        // Within one interval the order is monotone, so the `top` best of it are the `top`
        // lattice points nearest one of its ends: take `top + 1` on each side of each end.
        let radius = self.top as i64 + 1;
        let mut idx: Vec<u64> = (0..=radius as u64)
            .flat_map(|d| {
                [
                    first.saturating_add(d).min(last),
                    last.saturating_sub(d).max(first),
                ]
            })
            .collect();
        if first < last {
            let b0 = self.budgets(&self.model(hidden, ffn, shape, e.at(first)))?;
            let b1 = self.budgets(&self.model(hidden, ffn, shape, e.at(first + 1)))?;
            let (fb, nb) = (self.base.flops.as_f64(), self.base.params.as_f64());
            // r(i) = a + b*(i - first), per lattice index.
            let (af, bf) = (
                b0.flops.as_f64() / fb - 1.0,
                (b1.flops.as_f64() - b0.flops.as_f64()) / fb,
            );
            let (an, bn) = (
                b0.params.as_f64() / nb - 1.0,
                (b1.params.as_f64() - b0.params.as_f64()) / nb,
            );
            let w = *self.budget.weights();
            let c = shape.kv_score;
            let mut points = vec![-af / bf, -an / bn];
            for s in [1.0, -1.0] {
                // w_F(af + bf x) = s w_N(an + bn x)
                points
                    .push((s * w.params * an - w.flops * af) / (w.flops * bf - s * w.params * bn));
                // w_F(af + bf x) = s c ; w_N(an + bn x) = s c
                points.push((s * c / w.flops - af) / bf);
                points.push((s * c / w.params - an) / bn);
            }
            for p in points {
                if !p.is_finite() {
                    continue;
                }
                let base = p.floor();
                for d in -radius..=radius {
                    let x = base + d as f64;
                    if x >= 0.0 && x <= (last - first) as f64 {
                        idx.push(first + x as u64);
                    }
                }
            }
        }
        idx.sort_unstable();
        idx.dedup();
        Ok(idx)
    }

    fn run(&mut self, shapes: &[Shape]) -> Result<u128> {
        let lattice = self.budget.lattice();
        let mut points: u128 = 0;
        let e = lattice.experts;
        let top_k = self.budget.baseline().model.moe.top_k;
        let routable = e.values().filter(|&v| v >= top_k).count() as u128;
        for hidden in lattice.hidden.values() {
            let allowed: Vec<Shape> = shapes
                .iter()
                .filter(|s| lattice.admits_attention(hidden, s.heads, s.head_dim))
                .copied()
                .collect();
            let ffns = lattice.expert_ffn.values(hidden);
            points += allowed.len() as u128 * ffns.len() as u128 * routable;
            for &ffn in &ffns {
                for shape in &allowed {
                    if !shape.kv_ok {
                        continue;
                    }
                    if let Some(bar) = self.bar()
                        && shape.kv_score > bar
                    {
                        break;
                    }
                    for i in self.expert_candidates(hidden, ffn, shape)? {
                        let model = self.model(hidden, ffn, shape, e.at(i));
                        let b = self.budgets(&model)?;
                        self.offer(model, b);
                    }
                }
            }
        }
        Ok(points)
    }
}

/// Every attention shape of the lattice (before the per-`hidden` limits), sorted by their
/// weighted KV residual, then by the tie-break order.
fn shapes(budget: &Budget, looping: Option<&Loop>, base: &Budgets) -> Result<Vec<Shape>> {
    let l = budget.lattice();
    let max_heads = match l.heads {
        HeadsRule::Tied => u64::MAX,
        HeadsRule::Free { max, .. } => max,
    };
    let executions = budget.layers() + looping.map_or(0, |lp| lp.extra_executions());
    let mut out = Vec::new();
    for &head_dim in &l.head_dim {
        for kv_heads in l.kv_heads.values() {
            let kv =
                crate::units::product(&[2, kv_heads, head_dim, executions], "kv_cache.elements")?;
            let kv_residual = kv as f64 / base.kv.as_f64() - 1.0;
            for g in l.gqa.0..=l.gqa.1 {
                let heads = kv_heads.saturating_mul(g);
                if heads > max_heads || heads > crate::spec::MAX_COUNT {
                    break;
                }
                out.push(Shape {
                    head_dim,
                    kv_heads,
                    heads,
                    kv_score: budget.weights().kv * kv_residual.abs(),
                    kv_ok: budget.mode() == Mode::TwoSided || kv <= base.kv.0,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        a.kv_score
            .total_cmp(&b.kv_score)
            .then(b.head_dim.cmp(&a.head_dim))
            .then(a.kv_heads.cmp(&b.kv_heads))
            .then(a.heads.cmp(&b.heads))
    });
    // Order inside equal KV scores does not matter for correctness: pruning is strict.
    Ok(out)
}

/// The most configurations a search lists (`--top`).
pub const MAX_TOP: usize = 1000;

/// How a search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOptions {
    /// How many of the best configurations to keep (1 to [`MAX_TOP`]).
    pub top: usize,
    /// Search a lattice above [`crate::budget::MAX_COMBINATIONS`] anyway.
    pub force: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            top: 1,
            force: false,
        }
    }
}

impl SearchOptions {
    /// The `top` best, not forced.
    pub fn top(top: usize) -> Self {
        Self {
            top,
            ..Self::default()
        }
    }

    /// Checks `top` and, unless forced, the lattice's size.
    pub fn check(&self, budget: &Budget) -> Result<()> {
        if !(1..=MAX_TOP).contains(&self.top) {
            return Err(Error::invalid(
                "top",
                format!("must be between 1 and {MAX_TOP} (got {})", self.top),
            ));
        }
        let n = budget.lattice().combinations();
        if !self.force && n > crate::budget::MAX_COMBINATIONS {
            return Err(Error::invalid(
                "lattice",
                format!(
                    "the search would weigh up to {n} combinations of hidden size, expert \
                     width and attention shape, over the limit of {} (about a minute of \
                     solving); use coarser steps or tighter ranges, or force it (--force)",
                    crate::budget::MAX_COMBINATIONS
                ),
            ));
        }
        Ok(())
    }
}

/// Finds the `top` best looped configurations for `budget` (module docs).
pub fn solve(budget: &Budget, top: usize) -> Result<Solution> {
    solve_with(budget, &SearchOptions::top(top))
}

/// [`solve`] with options.
pub fn solve_with(budget: &Budget, options: &SearchOptions) -> Result<Solution> {
    options.check(budget)?;
    let top = options.top;
    let baseline = budget.baseline();
    // The budget is valid (Budget::new): the weights the closed form in the expert count
    // (module docs, step 3) needs are positive.
    let keys = MeanKeys::of(&baseline.workload)?;
    let base = budgets_with(&baseline.model, keys, &baseline.counting)?;
    let looping = budget.looping().cloned();
    let shapes = shapes(budget, looping.as_ref(), &base)?;
    let mut search = Search {
        budget,
        base,
        keys,
        looping: looping.clone(),
        top,
        kept: Vec::with_capacity(top + 1),
        evaluated: 0,
    };
    let lattice_points = search.run(&shapes)?;
    if search.kept.is_empty() {
        return Err(infeasible(budget, lattice_points));
    }
    Ok(Solution {
        baseline: base,
        looping,
        ranked: search.kept,
        stats: SearchStats {
            lattice_points,
            evaluated: search.evaluated,
        },
    })
}

fn infeasible(budget: &Budget, points: u128) -> Error {
    let what = if points == 0 {
        "the lattice is empty: no combination of lattice.hidden, lattice.expert_ffn, \
         lattice.head_dim, lattice.heads, lattice.kv_heads, lattice.gqa and lattice.q_width \
         (with experts >= top_k) exists"
            .to_owned()
    } else {
        format!(
            "none of the {points} lattice points keeps every budget at or below the \
             Baseline's (conservative mode); widen the lattice or use mode = \"two-sided\""
        )
    };
    Error::Infeasible {
        budget: budget.name().unwrap_or("budget").to_owned(),
        reason: what,
    }
}

/// The looped model file of a candidate: named `<budget>-looped`, with the Baseline's workload
/// and counting.
pub fn model_spec(budget: &Budget, candidate: &Candidate) -> ModelSpec {
    ModelSpec {
        name: Some(format!("{}-looped", budget.name().unwrap_or("budget"))),
        model: candidate.model.clone(),
        workload: budget.baseline().workload.clone(),
        counting: budget.baseline().counting,
    }
}
