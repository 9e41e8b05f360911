//! The same matching problem as a mixed-integer program, solved by `good_lp` on its
//! pure-Rust `microlp` backend: an independent cross-check of [`super::solve`] for small
//! lattices (it is far slower, and exact only up to the LP solver's tolerances).
//!
//! Formulation, for the first criterion of the objective (the largest weighted residual):
//!
//! * one binary `u_p` per pair `p = (hidden, expert_ffn, attention shape)` allowed by the
//!   lattice, `Σ u_p = 1`;
//! * one integer `e`, the index of the expert count on the lattice (`E = E_min + step·e`),
//!   restricted to `E >= top_k`;
//! * `v_p = u_p · e`, linearised exactly (McCormick, with `M` the largest index):
//!   `0 <= v_p <= M·u_p`, `v_p <= e`, `v_p >= e - M·(1 - u_p)`;
//! * residuals `r_F = Σ_p u_p·a_p + v_p·b_p` and likewise `r_N` and `r_KV` (and any other
//!   budget), with the intercepts and slopes read off the cost model at the first two
//!   expert counts of each pair (every budget is affine in `E`; the KV cache's slope is 0,
//!   and a zero slope adds no term);
//! * `t >= ±w·r` for each budget; in conservative mode also `r <= 0`;
//! * minimise `t`.
//!
//! The predicted time ([`crate::budget::time`]) is not expressible here: it is a sum of
//! roofline maxima over a kernel plan whose expert GEMMs' shapes follow the tokens per
//! expert, neither linear nor affine in `e`. A budget that weighs it is refused; the
//! brute-force test covers the solver with the time weighed.

use good_lp::{
    Expression, ProblemVariables, Solution as _, SolverModel, constraint, microlp, variable,
};

use super::{Point, looped_model};
use crate::budget::{Budget, HeadsRule, Mode};
use crate::cost::{Keys, PerBudget, budgets_with};
use crate::error::{Error, Result};
use crate::model::Model;

/// The MILP's optimum.
#[derive(Debug, Clone, PartialEq)]
pub struct MilpOptimum {
    /// The largest weighted |residual| at the optimum.
    pub objective: f64,
    /// The architecture it chose.
    pub model: Model,
}

fn lp_error(e: impl std::fmt::Display) -> Error {
    Error::Solver {
        message: e.to_string(),
    }
}

fn infeasible(budget: &Budget, reason: &str) -> Error {
    Error::Infeasible {
        budget: budget.name().unwrap_or("budget").to_owned(),
        reason: reason.to_owned(),
    }
}

/// One pair `p` of the formulation, with its residuals `r = a + b·e` in the expert-count
/// index `e`, per budget (`b` is 0 for a budget that does not depend on `E`).
struct Pair {
    model: Model,
    a: PerBudget<f64>,
    b: PerBudget<f64>,
}

/// An attention shape of the lattice: `(heads, kv_heads, head_dim, kv_lora_rank, MLA
/// widths)`, the fields of [`Point`] besides the hidden size, expert width and count.
type AttentionShape = (u64, u64, u64, u64, (u64, u64));

/// The lattice indices `first..=last` of the expert counts that can route `top_k`.
fn routable(budget: &Budget) -> Result<(u64, u64)> {
    let top_k = budget.baseline().model.moe.top_k;
    let e = budget.lattice().experts;
    let first = if e.min >= top_k {
        0
    } else {
        (top_k - e.min).div_ceil(e.step)
    };
    if first >= e.len() {
        return Err(infeasible(
            budget,
            "no expert count on the lattice can route top_k",
        ));
    }
    Ok((first, e.len() - 1))
}

/// The attention shapes of the lattice at `hidden`, enumerated directly from its ranges.
fn shapes_at(budget: &Budget, hidden: u64) -> Vec<AttentionShape> {
    let l = budget.lattice();
    let mut out = Vec::new();
    if let (Some(ranks), HeadsRule::Free { min, max }, Some(mla)) = (
        l.kv_lora_rank,
        l.heads,
        crate::budget::mla_of(budget.baseline_stack()),
    ) {
        let rope = mla.qk_rope_head_dim;
        for &(nope, v) in &l.mla_widths {
            for heads in min..=max {
                for r in ranks.values() {
                    out.push((heads, heads, nope + rope, r, (nope, v)));
                }
            }
        }
        return out;
    }
    for head_dim in l.head_dim.iter().copied() {
        for kv_heads in l.kv_heads.values() {
            for g in l.gqa.0..=l.gqa.1 {
                let heads = kv_heads * g;
                if l.admits_attention(hidden, heads, head_dim) {
                    out.push((heads, kv_heads, head_dim, 0, (0, 0)));
                }
            }
        }
    }
    out
}

/// Every pair of the lattice with its coefficients, read off the cost model at the first
/// two routable expert counts.
fn pairs(budget: &Budget, (first, last): (u64, u64)) -> Result<Vec<Pair>> {
    let baseline = budget.baseline();
    let keys = Keys::of(&baseline.workload, &baseline.model)?;
    let context = baseline.workload.context;
    let costed = |m: &Model| -> Result<PerBudget<f64>> {
        Ok(budgets_with(m, &keys, context, &baseline.counting)?.to_f64())
    };
    let base = costed(&baseline.model)?;
    let l = budget.lattice();
    let e = l.experts;
    let mut pairs = Vec::new();
    // A hybrid's recurrent mixer shapes (none otherwise: the one `None`).
    let mixers: Vec<_> = match l.mixers.as_slice() {
        [] => vec![None],
        m => m.iter().copied().map(Some).collect(),
    };
    for hidden in l.hidden.values() {
        for ffn in l.expert_ffn.values(hidden) {
            for &mixer in &mixers {
                for (heads, kv_heads, head_dim, kv_lora_rank, mla_widths) in
                    shapes_at(budget, hidden)
                {
                    let point = Point {
                        hidden,
                        expert_ffn: ffn,
                        heads,
                        kv_heads,
                        head_dim,
                        experts: e.at(first),
                        kv_lora_rank,
                        mla_widths,
                        mixer,
                    };
                    pairs.push(pair(&point, &costed, base, (first, last), budget)?);
                }
            }
        }
    }
    Ok(pairs)
}

/// The pair of `point` (at the first routable expert count) with its coefficients, read off
/// `costed` at the first two routable expert counts against the Baseline's `base`.
fn pair(
    point: &Point,
    costed: &dyn Fn(&Model) -> Result<PerBudget<f64>>,
    base: PerBudget<f64>,
    (first, last): (u64, u64),
    budget: &Budget,
) -> Result<Pair> {
    let e = budget.lattice().experts;
    let model = looped_model(budget, budget.looping(), *point);
    let b0 = costed(&model)?;
    let mut next = model.clone();
    next.moe.experts = e.at((first + 1).min(last));
    let b1 = costed(&next)?;
    // r(e) = a + b * e, with e the lattice index.
    let b = b1
        .zip(b0)
        .zip(base)
        .map(|((b1, b0), base)| (b1 - b0) / base);
    let a = b0
        .zip(base)
        .zip(b)
        .map(|((b0, base), b)| b0 / base - 1.0 - b * first as f64);
    Ok(Pair { model, a, b })
}

/// Solves the MILP for `budget`. Meant for small lattices (tests, benchmarks).
pub fn solve(budget: &Budget) -> Result<MilpOptimum> {
    if budget.time_weight() > 0.0 {
        return Err(Error::invalid(
            "objective.weights.time",
            "the MILP cross-check cannot express the predicted time (roofline maxima over a \
             kernel plan, not linear in the expert count); it matches only with the time \
             weighed 0",
        ));
    }
    let (first, last) = routable(budget)?;
    let pairs = pairs(budget, (first, last))?;
    if pairs.is_empty() {
        return Err(infeasible(budget, "the lattice is empty"));
    }
    let big_m = last as f64;
    let mut vars = ProblemVariables::new();
    let t = vars.add(variable().min(0.0));
    let ei = vars.add(variable().integer().min(first as f64).max(last as f64));
    let u: Vec<_> = pairs
        .iter()
        .map(|_| vars.add(variable().binary()))
        .collect();
    let v: Vec<_> = pairs
        .iter()
        .map(|_| vars.add(variable().min(0.0).max(big_m)))
        .collect();
    let mut r = PerBudget::from_fn(|_| Expression::from(0.0));
    let mut one = Expression::from(0.0);
    for (i, p) in pairs.iter().enumerate() {
        r = r.zip(p.a.zip(p.b)).map(|(mut r, (a, b))| {
            r += a * u[i];
            if b != 0.0 {
                r += b * v[i];
            }
            r
        });
        one += u[i];
    }
    let mut model = vars.minimise(t).using(microlp);
    model = model.with(constraint!(one == 1.0));
    for i in 0..pairs.len() {
        model = model
            .with(constraint!(v[i] <= big_m * u[i]))
            .with(constraint!(v[i] <= ei))
            .with(constraint!(v[i] >= ei - big_m + big_m * u[i]));
    }
    for (weight, r) in budget.weights().zip(r).into_array() {
        // A budget weighed 0 is reported, not matched: it bounds nothing (and may be 0 at
        // the Baseline, as a hybrid's uncounted activations are, its relative residual
        // then undefined).
        if weight == 0.0 {
            continue;
        }
        model = model
            .with(constraint!(t >= weight * r.clone()))
            .with(constraint!(t >= -weight * r.clone()));
        if budget.mode() == Mode::Conservative {
            model = model.with(constraint!(r <= 0.0));
        }
    }
    let sol = model.solve().map_err(lp_error)?;
    let chosen = u
        .iter()
        .position(|&x| sol.value(x) > 0.5)
        .ok_or_else(|| lp_error("no pair selected"))?;
    let mut chosen_model = pairs[chosen].model.clone();
    chosen_model.moe.experts = budget.lattice().experts.at(sol.value(ei).round() as u64);
    Ok(MilpOptimum {
        objective: sol.value(t),
        model: chosen_model,
    })
}
