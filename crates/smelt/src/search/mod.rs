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
//! `|Δhidden|`, `|Δexperts|`, `|Δexpert_ffn|`, then (a hybrid) the recurrent mixer's knobs'
//! distances ([`mixer_knobs`]) and (MLA) `|Δv_head_dim|`; equal distances go to the larger
//! `head_dim`, fewer `kv_heads`, fewer `heads`, larger `hidden`, fewer `experts`, smaller
//! `expert_ffn`, the smaller mixer knobs, the smaller `v_head_dim` ([`rank_key`]). This is a total order on distinct configurations, so the answer is unique
//! and deterministic. In [`Mode::Conservative`] only candidates with every residual `<= 0`
//! (compared exactly, in integers) are admissible.
//!
//! A budget with a predicted time ([`crate::budget::time`]) has one more component, the
//! time's weighted `|r_T|` ([`Score::with_time`]); see "With the predicted time weighed"
//! below for what changes in the search.
//!
//! # Budgets
//!
//! The budgets are a set ([`crate::PerBudget`] over [`crate::BudgetKind::ALL`]), and the
//! search goes through it: each budget is held as an exact integer (`affine::exact`), its
//! coefficients are read like the others', every budget but the one the shapes are
//! streamed by (the KV cache) is bounded over the expert counts at each shape (step 3),
//! and the breakpoints of step 4 are taken for every budget and every pair of them. The
//! text below names the three there are.
//!
//! # Baselines with fixed parts
//!
//! The knobs hold some of a Baseline's parts fixed in a part of the search at a time: an
//! MLA Baseline's per-head widths and a hybrid's recurrent mixer shape, one lattice value at
//! a time (each part is searched as below, and the parts' kept candidates merged in the
//! same total order); a Gemma 4 Baseline's full-attention layers keep their own key/value
//! heads and head width throughout, so their queries, core and q/k norms add a term in the
//! number of query heads, and their cache a constant to the KV count (step 2's stream takes
//! that offset), and only query-head counts their key/value heads divide are lattice points.
//!
//! # Why the result is the optimum of the lattice
//!
//! The solver considers every lattice point except those it can prove cannot win:
//!
//! 1. **Exact coefficients.** At each hidden size the three budgets are exact affine
//!    functions of the expert width, the query and key widths, the head width and the
//!    expert count, with one product term (expert width × count): `affine` reads the
//!    integer coefficients off the cost model and checks them at a further point. A
//!    candidate is then *scored* from them in a few integer operations instead of being
//!    costed by the cost model.
//! 2. **Order.** The KV cache depends on the key width `kv_heads·head_dim` alone. Attention
//!    shapes are generated lazily, `(kv_heads, head_dim)` pairs in nondecreasing weighted KV
//!    residual (`shapes`), and for each pair every hidden size, every query-head count the
//!    q-width window admits there, and every expert width.
//! 3. **Bounds.** Every candidate's largest weighted residual is at least its
//!    `w_KV|r_KV|`: once a pair's is above the worst score still kept (the best, or the
//!    N-th best for `--top N`), it and every later pair are skipped, for every hidden size
//!    at once. For a shape and expert width, the FLOPs and parameters over the whole range
//!    of expert counts lie in an interval known exactly; if the nearest end of either is
//!    already too far from the Baseline's, the shape is skipped at that width.
//! 4. **Closed form in the expert count.** For fixed hidden size, expert width and shape,
//!    FLOPs and parameters are affine in the expert count `E` with positive slopes (zero
//!    when no layer is MoE: then every `E` ties and the `N` counts nearest the Baseline's,
//!    which the tie-break prefers, are scored); the KV cache does not depend on it.
//!    Between consecutive *breakpoints* — the zeros of `r_F` and `r_N` and every point
//!    where two of `w_F|r_F|`, `w_N|r_N|`, `w_KV|r_KV|` cross — each component of the sorted score is affine in `E`, and the component holding
//!    `|r_N|` is strictly monotone, so the lexicographic minimum over the lattice points of
//!    an interval is at one of its two ends and no interior point ties with it. It
//!    suffices to score the lattice points next to each breakpoint and the range's ends;
//!    the `N` best of an interval are the `N` nearest one of its ends, so for `--top N` the
//!    solver takes `N + 1` points each side (one more than needed, against rounding in
//!    locating a breakpoint). In conservative mode the admissible `E` form a prefix of the
//!    range ending next to a zero of `r_F` or `r_N`, a breakpoint, so the same points
//!    suffice.
//! 5. **The same floats as the cost model.** A candidate's budgets from the coefficients
//!    are the cost model's integers, and its residuals are computed from them as
//!    [`Budgets::residuals_against`] does (each budget rounded once to its nearest float,
//!    the FLOPs fraction included, then divided), so its score is the cost model's bit for
//!    bit. The `N` best are kept in the total order above, and the finalists are costed by
//!    the cost model, which must give the same scores (an internal error otherwise). The
//!    bounds of step 3 compare floats computed another way, so they prune only candidates
//!    more than `kept::MARGIN` worse than the `N`-th kept.
//!
//! # With the predicted time weighed
//!
//! The predicted time is a float from the roofline (a sum of maxima over the kernel plan,
//! whose expert GEMMs' shapes follow the tokens per expert), not an exact integer affine in
//! `E`: step 4's breakpoints do not locate its best. When it is weighed above 0 the search
//! keeps steps 1, 2, 3 and 5 and replaces step 4:
//!
//! * Steps 2 and 3 bound the largest component from below by the other budgets' weighted
//!   residuals alone. A score's largest component with the time among them is at least
//!   that, so they still prune only candidates worse than the `N`-th kept (none on the
//!   time).
//! * Step 4 becomes: **every** routable `E` at each shape and expert width that survives
//!   step 3 is scored. Its score with the time's component set to 0, `s₀`, is a lower
//!   bound: each component of the full score is at least the same component of `s₀` (the
//!   `i`-th largest of a list only grows when a 0 in it is raised), so the full score is
//!   no better than `s₀` in the order. A candidate whose `s₀` cannot be kept is skipped
//!   unpredicted; every other one's time is predicted
//!   ([`crate::time::predict_model`], as `smelt predict` predicts) and it is
//!   scored in full. In conservative mode a candidate predicted slower than the Baseline
//!   is not admissible. Where the time is nondecreasing in `E` (no calibration curves,
//!   balanced routing: `timed` proves it), `s₀` is raised further: between two counts
//!   whose times are predicted, `|r_T|` is at least its ends' distance from 0, and the
//!   counts are searched by branch and bound on that bound (predicting the middle of an
//!   interval only while one of its counts could still be kept), so a large time weight,
//!   which leaves `s₀` far below the kept scores, does not mean predicting every count.
//! * Step 5: the finalists' times are predicted again by the same function, which gives
//!   the same floats, so their scores are checked bit for bit as before.
//!
//! Every lattice point is then either scored in full or proven no better than the `N`-th
//! kept, and the result is the lattice optimum in the same total order. Weighed 0, the
//! time is reported, not matched: its component is 0 for every candidate, the search is
//! steps 1 to 5 unchanged, and only the finalists' times are predicted. The MILP
//! cross-check ([`milp`]) cannot express the time (maxima over a plan whose shapes depend
//! on `E`) and refuses a budget that weighs it; the brute-force test covers it.
//!
//! Scores are compared as floats, the floats the reports print. Two scores equal in exact
//! arithmetic can differ in their last bit, and are then ordered by it: a FLOPs residual
//! of exactly `+1/5` is the float `6/5 - 1 = 0.19999999999999996`, a KV residual of
//! `-2/5` at weight `1/2` is `0.5 × |3/5 - 1| = 0.2`. The brute-force test ranks by the
//! same floats.
//!
//! Hidden sizes are searched in parallel (rayon's work-stealing pool) with a shared bound;
//! the answer does not depend on the order in which they finish, since only strictly
//! dominated candidates are pruned and the finalists are ranked by a total order.
//!
//! The tests check this against brute force over every lattice point and against an
//! independent mixed-integer formulation solved by `good_lp` ([`milp`]).

pub mod advice;
pub(crate) mod affine;
mod candidate;
mod experts;
mod kept;
pub mod milp;
mod report;
pub(crate) mod shapes;
mod timed;
mod verdict;

pub use candidate::{Candidate, Point, TimeResidual, looped_model, mixer_knobs, rank_key};
pub use report::{
    Alternative, BudgetPair, MatchReport, MatchTime, SparsityPair, match_budget, match_budget_in,
    match_budget_with,
};
pub use verdict::Verdict;

use serde::Serialize;

use crate::budget::{Budget, Mode, Score, TimeBudget};
use crate::cost::{BudgetKind, Budgets, Keys, PerBudget, Residuals, budgets_with};
use crate::error::{Error, Result};
use crate::model::{Loop, Model, ModelSpec};
use crate::progress::Progress;
use affine::{AtHidden, Eval, Fixed, InFfn, Shape, exact};
use kept::{Entry, Kept, MARGIN};
use shapes::{KvPair, KvPairs, count_at, heads_at, mla_heads};

/// How big the search was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SearchStats {
    /// Points of the declared lattice (every combination allowed by the shape limits).
    pub lattice_points: u128,
    /// Models costed exactly by the cost model (coefficients and finalists).
    pub evaluated: u64,
    /// Candidates scored from the exact coefficients.
    pub scored: u64,
    /// Models whose step time was predicted (a time budget only; left out of the JSON when
    /// 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub predicted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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

/// The most configurations a search lists (`--top`).
pub const MAX_TOP: usize = 1000;

/// How a search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOptions {
    /// How many of the best configurations to keep (1 to [`MAX_TOP`]).
    pub top: usize,
    /// Search a lattice above [`crate::budget::MAX_COMBINATIONS`] anyway.
    pub force: bool,
    /// Explain the floor and try refinements ([`advice`]) even when every tolerance is
    /// met (they are always given when one is broken).
    pub advise: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            top: 1,
            force: false,
            advise: false,
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
                     width, attention shape and recurrent mixer shape, over the limit of {} \
                     (about a minute of \
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

/// Hidden sizes per part of a parallel search.
const HIDDEN_RUN: usize = 64;

/// The budget the attention shapes are streamed in order of (module docs, step 2): the KV
/// cache, which depends on the key width alone. Every other budget is bounded over the
/// expert counts at each shape and expert width (step 3) and located by its breakpoints in
/// the expert count (step 4).
const STREAMED: BudgetKind = BudgetKind::Kv;

/// The lattice indices of the expert counts that can route `top_k`: `first..=last`.
#[derive(Debug, Clone, Copy)]
struct Routable {
    first: u64,
    last: u64,
}

/// The time budget of a search and the Baseline's predicted seconds per token.
#[derive(Clone, Copy)]
struct TimeTerm<'a> {
    budget: &'a TimeBudget,
    baseline: f64,
}

impl TimeTerm<'_> {
    /// The predicted time of the looped model `model` of `budget` against the Baseline's.
    fn residual(&self, budget: &Budget, model: &Model) -> Result<TimeResidual> {
        let b = budget.baseline();
        let spec = ModelSpec {
            name: None,
            model: model.clone(),
            workload: b.workload.clone(),
            counting: b.counting,
            training: None,
        };
        let looped = self.budget.seconds_per_token(&spec)?;
        Ok(TimeResidual {
            baseline_seconds_per_token: self.baseline,
            looped_seconds_per_token: looped,
            residual: looped / self.baseline - 1.0,
        })
    }

    /// The weighted `|r_T|` of `r`.
    fn weighted(&self, r: &TimeResidual) -> f64 {
        self.budget.weight() * r.residual.abs()
    }
}

/// The fixed context of one search.
struct Search<'a> {
    budget: &'a Budget,
    keys: Keys,
    looping: Option<Loop>,
    /// The Baseline's budgets as the search's integers ([`affine::exact`]).
    base: PerBudget<i128>,
    /// What each of those integers is over ([`PerBudget::common_denominators`]).
    denominators: PerBudget<u128>,
    /// The Baseline's budgets as the floats of [`Budgets::to_f64`].
    base_f64: PerBudget<f64>,
    top: usize,
    experts: Routable,
    margin: f64,
    /// The predicted time, when the budget has one.
    time: Option<TimeTerm<'a>>,
    /// Whether that time is nondecreasing in the expert count at each shape
    /// ([`timed::monotone_in_experts`]): the weighed time's counts are then searched by
    /// branch and bound ([`timed`]), not all predicted.
    time_monotone: bool,
    /// Asked between attention shapes whether to stop ([`Progress::cancelled`]).
    progress: &'a dyn Progress,
}

/// What one part of the search (a run of hidden sizes) found.
struct Part {
    kept: Kept,
    points: u128,
    evaluated: u64,
    scored: u64,
    predicted: u64,
}

impl Search<'_> {
    /// The time term, when it is weighed above 0 (and so matched, module docs).
    fn weighed_time(&self) -> Option<TimeTerm<'_>> {
        self.time.filter(|t| t.budget.weighed())
    }

    /// The residuals of budgets `v`, bit for bit the cost model's
    /// [`Budgets::residuals_against`]: the same floats ([`Budgets::to_f64`]: each budget
    /// rounded once, the FLOPs `v / Q` as [`crate::units::Flops::as_f64`] rounds the
    /// fraction), divided by the same function.
    fn residuals(&self, v: PerBudget<i128>) -> Residuals {
        let value = v.zip(self.denominators).map(|(v, q)| {
            if q == 1 {
                v as f64
            } else {
                crate::units::ratio_to_f64(v.unsigned_abs(), q)
            }
        });
        Residuals::relative(value, self.base_f64)
    }

    fn admissible(&self, v: PerBudget<i128>) -> bool {
        // A budget weighed 0 is reported, not matched: it bounds nothing.
        self.budget.mode() == Mode::TwoSided
            || v.zip(self.base)
                .zip(**self.budget.weights())
                .all(|&((a, b), w)| w == 0.0 || a <= b)
    }

    /// The bound a candidate's first score component must not exceed: the worst kept in
    /// this part, plus the margin. (Parts do not share bounds, so that what is scored, and
    /// reported, does not depend on which part finishes first.)
    fn bar(&self, kept: &Kept) -> f64 {
        kept.bar().map_or(f64::INFINITY, |b| b.worst()) + self.margin
    }

    /// The distance of `[lo, hi]` from the Baseline's value `base`, relative, weighted.
    fn gap(lo: i128, hi: i128, base: i128, weight: f64) -> f64 {
        let d = if base < lo {
            lo - base
        } else if base > hi {
            base - hi
        } else {
            0
        };
        weight * d as f64 / base as f64
    }

    /// Searches the hidden sizes `hiddens` at the knobs `fixed` (MLA per-head widths, a
    /// recurrent mixer shape): the attention shapes in the order of the streamed budget
    /// (module docs, step 2), until its weighted residual alone is worse than the kept
    /// (step 3).
    fn part(&self, hiddens: &[u64], fixed: Fixed) -> Result<Part> {
        let budget = self.budget;
        let lattice = budget.lattice();
        let mut part = Part {
            kept: Kept::new(self.top, budget.baseline().model.clone()),
            points: 0,
            evaluated: 0,
            scored: 0,
            predicted: 0,
        };
        let eval = Eval {
            budget,
            looping: self.looping.as_ref(),
            keys: &self.keys,
            counting: &budget.baseline().counting,
            fixed,
        };
        let at = self.coefficients(&eval, hiddens, &mut part)?;
        let Some(first_at) = at.first() else {
            return Ok(part);
        };
        let mla = lattice.kv_lora_rank.is_some();
        let offset = mla || budget.baseline_stack().kv_beyond_key_width();
        let form = first_at.budgets[STREAMED].kv_form(offset)?;
        let (base, weight) = (self.base[STREAMED] as u64, budget.weights()[STREAMED]);
        let ranks: Vec<u64>;
        let pairs = match lattice.kv_lora_rank {
            Some(r) => {
                ranks = r.values().collect();
                KvPairs::new(&ranks, [1].into_iter(), form, base, weight)
            }
            None => KvPairs::new(
                &lattice.head_dim,
                lattice.kv_heads.values(),
                form,
                base,
                weight,
            ),
        };
        for pair in pairs {
            crate::progress::check(self.progress)?;
            if pair.kv_score > self.bar(&part.kept) {
                break;
            }
            for a in &at {
                self.shapes_at(&eval, a, &pair, &mut part)?;
            }
        }
        Ok(part)
    }

    /// The coefficients at each of `hiddens` (module docs, step 1), counting the lattice
    /// points and the evaluations into `part`.
    fn coefficients(&self, eval: &Eval, hiddens: &[u64], part: &mut Part) -> Result<Vec<AtHidden>> {
        let budget = self.budget;
        let lattice = budget.lattice();
        let routable = u128::from(self.experts.last + 1 - self.experts.first);
        let mut at = Vec::with_capacity(hiddens.len());
        for &h in hiddens {
            at.push(AtHidden::new(eval, h)?);
            part.evaluated += AtHidden::EVALUATIONS
                + u64::from(AtHidden::heads_term(budget))
                + u64::from(AtHidden::kv_heads_term(budget));
            let ffns = lattice.expert_ffn.values(h).len() as u128;
            part.points += count_at(lattice, h) * ffns * routable;
        }
        Ok(at)
    }

    /// Every query-head count and expert width at hidden size `a` and the key shape of
    /// `pair`.
    fn shapes_at(&self, eval: &Eval, a: &AtHidden, pair: &KvPair, part: &mut Part) -> Result<()> {
        let lattice = self.budget.lattice();
        let mla = lattice.kv_lora_rank.is_some();
        let conservative = self.budget.mode() == Mode::Conservative;
        let heads: Box<dyn Iterator<Item = u64>> = if mla {
            Box::new(mla_heads(lattice))
        } else {
            Box::new(heads_at(lattice, a.hidden, pair.kv_heads, pair.head_dim))
        };
        let mut heads = heads.peekable();
        if heads.peek().is_none() {
            return Ok(());
        }
        let widths = lattice.expert_ffn.values(a.hidden);
        // The key shape's terms summed once, then one product per head count and two per
        // expert width for each budget (the search's inner loop).
        let in_heads = a
            .budgets
            .map(|l| l.in_heads(mla, pair.kv_heads, pair.head_dim));
        for heads in heads {
            crate::progress::check(self.progress)?;
            let shape = Shape {
                expert_ffn: 0,
                heads,
                kv_heads: pair.kv_heads,
                width: pair.head_dim,
                experts: 0,
            };
            let free = in_heads.map(|l| l.in_ffn(heads));
            let streamed = free[STREAMED].in_experts(0).0;
            if conservative && streamed > self.base[STREAMED] {
                break;
            }
            for &expert_ffn in &widths {
                let shape = Shape {
                    expert_ffn,
                    ..shape
                };
                self.experts_at(eval, a, shape, &free, part)?;
            }
        }
        Ok(())
    }

    /// The expert counts worth scoring at hidden size `a` and `shape` (its expert count
    /// ignored; `free`, the budgets at its attention shape), skipped at once if a budget's
    /// distance over the whole range of counts is already too large (module docs, steps 3
    /// and 4; with the time weighed, every count, as "With the predicted time weighed"
    /// says).
    fn experts_at(
        &self,
        eval: &Eval,
        a: &AtHidden,
        shape: Shape,
        free: &PerBudget<InFfn>,
        part: &mut Part,
    ) -> Result<()> {
        let budget = self.budget;
        let w = budget.weights();
        let e = budget.lattice().experts;
        let Routable { first, last } = self.experts;
        let (e_first, e_last) = (i128::from(e.at(first)), i128::from(e.at(last)));
        // Each budget as `intercept + slope·E`.
        let lines = free.map(|l| l.in_experts(shape.expert_ffn));
        let bar = self.bar(&part.kept);
        // A budget weighed 0 bounds nothing (its distance is 0, and the bar is never
        // negative), so it is not computed.
        let mut lb = f64::NEG_INFINITY;
        for k in BudgetKind::ALL {
            if k != STREAMED && w[k] != 0.0 {
                let (c, s) = lines[k];
                lb = lb.max(Self::gap(
                    c + s * e_first,
                    c + s * e_last,
                    self.base[k],
                    w[k],
                ));
            }
        }
        if lb > bar {
            return Ok(());
        }
        let step = i128::from(e.step);
        let v0 = lines.map(|(c, s)| c + s * e_first);
        let counts: Vec<u64> = match self.weighed_time() {
            Some(t) if self.time_monotone => {
                return self.timed_experts(t, eval, a, shape, lines, part);
            }
            Some(_) => (first..=last).collect(),
            None => self.expert_candidates(v0, lines.map(|(_, s)| s * step)),
        };
        for i in counts {
            let experts = e.at(i);
            let v = lines.map(|(c, s)| c + s * i128::from(experts));
            part.scored += 1;
            if !self.admissible(v) {
                continue;
            }
            let untimed = Score::of(&self.residuals(v), w);
            // With a time budget, the time's component at 0: the score itself when it is
            // weighed 0, a lower bound of it otherwise (module docs).
            let mut s = match self.time {
                Some(_) => untimed.with_time(0.0),
                None => untimed,
            };
            if !part.kept.admits(&s) {
                continue;
            }
            let point = eval.point(a.hidden, Shape { experts, ..shape });
            let model = looped_model(budget, self.looping.as_ref(), point);
            if let Some(t) = self.weighed_time() {
                part.predicted += 1;
                let r = t.residual(budget, &model)?;
                if budget.mode() == Mode::Conservative && r.residual > 0.0 {
                    continue;
                }
                s = untimed.with_time(t.weighted(&r));
                if !part.kept.admits(&s) {
                    continue;
                }
            }
            part.kept.offer(Entry { score: s, model });
        }
        Ok(())
    }
}

/// [`solve`] with options.
pub fn solve_with(budget: &Budget, options: &SearchOptions) -> Result<Solution> {
    solve_in(budget, options, &crate::progress::Silent)
}

/// [`solve_with`], stopped with [`Error::Interrupted`] when `progress` asks
/// ([`Progress::cancelled`], polled between attention shapes).
pub fn solve_in(
    budget: &Budget,
    options: &SearchOptions,
    progress: &dyn Progress,
) -> Result<Solution> {
    options.check(budget)?;
    let baseline = budget.baseline();
    let keys = Keys::of(&baseline.workload, &baseline.model)?;
    let context = baseline.workload.context;
    let base = budgets_with(&baseline.model, &keys, context, &baseline.counting)?;
    let lattice = budget.lattice();
    let top_k = baseline.model.moe.top_k;
    let e = lattice.experts;
    let first = if e.min >= top_k {
        0
    } else {
        (top_k - e.min).div_ceil(e.step)
    };
    let hiddens: Vec<u64> = lattice.hidden.values().collect();
    let time = match budget.time() {
        Some(t) => Some(TimeTerm {
            budget: t,
            baseline: t.seconds_per_token(baseline)?,
        }),
        None => None,
    };
    let search = Search {
        budget,
        base: exact(&base, PerBudget::common_denominators(&keys))?,
        denominators: PerBudget::common_denominators(&keys),
        keys,
        looping: budget.looping().cloned(),
        base_f64: base.to_f64(),
        top: options.top,
        experts: Routable {
            first,
            last: e.len().saturating_sub(1),
        },
        margin: MARGIN * budget.weights().max().max(1.0),
        time_monotone: budget.time().is_some_and(timed::monotone_in_experts),
        time,
        progress,
    };
    if first >= e.len() {
        return Err(infeasible(budget, 0));
    }
    // Runs of hidden sizes of a fixed length (not one per thread: the output must not depend
    // on the number of threads), searched in parallel by rayon's work-stealing pool; with
    // MLA or recurrent layers, each pair of per-head widths and each mixer shape of the
    // lattice in turn.
    let fixed = Fixed::all(lattice);
    let runs: Vec<(Fixed, &[u64])> = fixed
        .iter()
        .flat_map(|&f| hiddens.chunks(HIDDEN_RUN).map(move |r| (f, r)))
        .collect();
    let parts = crate::par::map(&runs, |&(f, r)| search.part(r, f));
    let mut kept = Kept::new(options.top, baseline.model.clone());
    let mut stats = SearchStats {
        lattice_points: 0,
        evaluated: 0,
        scored: 0,
        predicted: 0,
    };
    for part in parts {
        let part = part?;
        stats.lattice_points += part.points;
        stats.evaluated += part.evaluated;
        stats.scored += part.scored;
        stats.predicted += part.predicted;
        kept.merge(part.kept);
    }
    let mut ranked = finalists(&search, kept, &base, &mut stats)?;
    ranked.sort_by(|a, b| a.cmp_rank(b, &baseline.model));
    ranked.truncate(options.top);
    if ranked.is_empty() {
        return Err(infeasible(budget, stats.lattice_points));
    }
    Ok(Solution {
        baseline: base,
        looping: budget.looping().cloned(),
        ranked,
        stats,
    })
}

/// The kept candidates, costed by the cost model, which must agree with the coefficients
/// bit for bit (module docs, step 5), their times predicted when the budget has a time
/// budget; in conservative mode, those within the Baseline's budgets `base` (and its
/// predicted time, when weighed).
fn finalists(
    search: &Search,
    kept: Kept,
    base: &Budgets,
    stats: &mut SearchStats,
) -> Result<Vec<Candidate>> {
    let budget = search.budget;
    let baseline = budget.baseline();
    let context = baseline.workload.context;
    let mut ranked = Vec::new();
    for entry in kept.into_entries() {
        stats.evaluated += 1;
        let budgets = budgets_with(&entry.model, &search.keys, context, &baseline.counting)?;
        let time = match &search.time {
            Some(t) => {
                stats.predicted += 1;
                Some((t, t.residual(budget, &entry.model)?))
            }
            None => None,
        };
        let slower = time
            .as_ref()
            .is_some_and(|(t, r)| t.budget.weighed() && r.residual > 0.0);
        if budget.mode() == Mode::Conservative
            && (!budgets.within(base, budget.weights()) || slower)
        {
            continue;
        }
        let residuals = budgets.residuals_against(base);
        let mut exact = Score::of(&residuals, budget.weights());
        if let Some((t, r)) = &time {
            exact = exact.with_time(t.weighted(r));
        }
        if exact != entry.score {
            return Err(Error::Internal {
                message: format!(
                    "the search scored {:?} as {:?} but the cost model gives {:?}",
                    entry.model, entry.score, exact
                ),
            });
        }
        ranked.push(Candidate {
            score: exact,
            model: entry.model,
            budgets,
            residuals,
            time: time.map(|(_, r)| r),
        });
    }
    Ok(ranked)
}

fn infeasible(budget: &Budget, points: u128) -> Error {
    let multiple = budget.lattice().heads_multiple;
    let what = if points == 0 {
        format!(
            "the lattice is empty: no combination of lattice.hidden, lattice.expert_ffn, \
             lattice.head_dim, lattice.heads, lattice.kv_heads, lattice.gqa and lattice.q_width \
             (with experts >= top_k{}) exists",
            if multiple > 1 {
                format!(
                    ", and heads a multiple of {multiple}, the Baseline's \
                     model.full_attention.kv_heads, which must divide them"
                )
            } else {
                String::new()
            }
        )
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
        training: None,
    }
}
