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
//! * residuals `r_F = Σ_p u_p·a_p + v_p·b_p` and likewise `r_N`, with the intercepts and
//!   slopes read off the cost model at the first two expert counts of each pair (FLOPs and
//!   parameters are affine in `E`); `r_KV = Σ_p u_p·kv_p`;
//! * `t >= ±w·r` for each budget; in conservative mode also `r <= 0`;
//! * minimise `t`.

use good_lp::{
    Expression, ProblemVariables, Solution as _, SolverModel, constraint, microlp, variable,
};

use super::{Point, looped_model};
use crate::budget::{Budget, HeadsRule, Mode};
use crate::cost::{Keys, budgets_with};
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

/// Solves the MILP for `budget`. Meant for small lattices (tests, benchmarks).
pub fn solve(budget: &Budget) -> Result<MilpOptimum> {
    let baseline = budget.baseline();
    let keys = Keys::of(&baseline.workload, &baseline.model)?;
    let context = baseline.workload.context;
    let base = budgets_with(&baseline.model, &keys, context, &baseline.counting)?;
    let looping = budget.looping();
    let l = budget.lattice();
    let top_k = baseline.model.moe.top_k;
    let e = l.experts;
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
    let last = e.len() - 1;
    let big_m = last as f64;

    // Enumerate the pairs with their affine coefficients.
    struct Pair {
        model: Model,
        af: f64,
        bf: f64,
        an: f64,
        bn: f64,
        kv: f64,
    }
    let mut pairs = Vec::new();
    let (fb, nb, kb) = (base.flops.as_f64(), base.params.as_f64(), base.kv.as_f64());
    // The attention shapes `(heads, kv_heads, head_dim, kv_lora_rank, MLA widths)` of the
    // lattice, enumerated directly from its ranges.
    let rope = baseline
        .model
        .mla
        .as_ref()
        .map_or(0, |a| a.qk_rope_head_dim);
    type Shape = (u64, u64, u64, u64, (u64, u64));
    let shapes_at = |hidden: u64| -> Vec<Shape> {
        let mut out = Vec::new();
        if let (Some(ranks), HeadsRule::Free { min, max }) = (l.kv_lora_rank, l.heads) {
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
    };
    for hidden in l.hidden.values() {
        for ffn in l.expert_ffn.values(hidden) {
            for (heads, kv_heads, head_dim, kv_lora_rank, mla_widths) in shapes_at(hidden) {
                let model = looped_model(
                    budget,
                    looping,
                    Point {
                        hidden,
                        expert_ffn: ffn,
                        heads,
                        kv_heads,
                        head_dim,
                        experts: e.at(first),
                        kv_lora_rank,
                        mla_widths,
                    },
                );
                let b0 = budgets_with(&model, &keys, context, &baseline.counting)?;
                let mut next = model.clone();
                next.moe.experts = e.at((first + 1).min(last));
                let b1 = budgets_with(&next, &keys, context, &baseline.counting)?;
                // r(e) = a + b * e, with e the lattice index.
                let bf = (b1.flops.as_f64() - b0.flops.as_f64()) / fb;
                let bn = (b1.params.as_f64() - b0.params.as_f64()) / nb;
                pairs.push(Pair {
                    af: b0.flops.as_f64() / fb - 1.0 - bf * first as f64,
                    bf,
                    an: b0.params.as_f64() / nb - 1.0 - bn * first as f64,
                    bn,
                    kv: b0.kv.as_f64() / kb - 1.0,
                    model,
                });
            }
        }
    }
    if pairs.is_empty() {
        return Err(infeasible(budget, "the lattice is empty"));
    }

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
    let mut rf = Expression::from(0.0);
    let mut rn = Expression::from(0.0);
    let mut rk = Expression::from(0.0);
    let mut one = Expression::from(0.0);
    for (i, p) in pairs.iter().enumerate() {
        rf += p.af * u[i] + p.bf * v[i];
        rn += p.an * u[i] + p.bn * v[i];
        rk += p.kv * u[i];
        one += u[i];
    }
    let w = *budget.weights();
    let mut model = vars.minimise(t).using(microlp);
    model = model.with(constraint!(one == 1.0));
    for i in 0..pairs.len() {
        model = model
            .with(constraint!(v[i] <= big_m * u[i]))
            .with(constraint!(v[i] <= ei))
            .with(constraint!(v[i] >= ei - big_m + big_m * u[i]));
    }
    for (weight, r) in [(w.flops, &rf), (w.params, &rn), (w.kv, &rk)] {
        model = model
            .with(constraint!(t >= weight * r.clone()))
            .with(constraint!(t >= -weight * r.clone()));
        if budget.mode() == Mode::Conservative {
            model = model.with(constraint!(r.clone() <= 0.0));
        }
    }
    let sol = model.solve().map_err(lp_error)?;
    let chosen = u
        .iter()
        .position(|&x| sol.value(x) > 0.5)
        .ok_or_else(|| lp_error("no pair selected"))?;
    let mut chosen_model = pairs[chosen].model.clone();
    chosen_model.moe.experts = e.at(sol.value(ei).round() as u64);
    Ok(MilpOptimum {
        objective: sol.value(t),
        model: chosen_model,
    })
}
