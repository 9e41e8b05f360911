//! Why a match stops where it does, and what would move it: the budget that binds, the
//! lattice step that sets its floor, and single-knob refinements of the lattice, each
//! re-solved exactly (`smelt match --advise`, and whenever a tolerance is broken).
//!
//! A refinement halves one knob's step, frees the expert width from its tie to the hidden
//! size, widens the q-width window or the GQA and key-head ranges, or (a hybrid whose
//! lattice keeps the Baseline's recurrent mixer) lets the mixer's heads and head widths
//! move around the Baseline's (`crate::budget::mixers_around`); one whose search
//! would exceed [`crate::budget::MAX_COMBINATIONS`] is listed as not tried. They are listed
//! those meeting the tolerance first, then by score.

use serde::Serialize;

use super::{Candidate, SearchOptions, solve_with};
use crate::budget::{Budget, FfnRule, Lattice, Score, Steps, Tolerance};
use crate::cost::{BudgetKind, Keys, Residuals, budgets_with};
use crate::error::Result;
use crate::model::{AttentionShape, Model, Stack};

/// What binds a match: one of the budgets, or the predicted time
/// ([`crate::budget::time`]). Serialised as the budget's key, or `"time"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// A budget.
    Budget(BudgetKind),
    /// The predicted time.
    Time,
}

impl Binding {
    /// The budget's key ([`BudgetKind::as_str`]), or `"time"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::Budget(k) => k.as_str(),
            Binding::Time => "time",
        }
    }
}

impl Serialize for Binding {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The budget that binds at the optimum and the lattice step behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Floor {
    /// The budget (or the predicted time) with the largest weighted residual.
    pub budget: Binding,
    /// The lattice knob whose step sets it.
    pub knob: String,
    /// How much one step of that knob moves the budget, relative, near the optimum.
    pub step_moves: f64,
    /// In words.
    pub why: String,
}

/// One lattice refinement and what it achieves, re-solved exactly.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refinement {
    /// The lattice knob changed.
    pub knob: String,
    /// The change, in words.
    pub change: String,
    /// The optimum's residuals on the refined lattice (absent when not tried).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub residuals: Option<Residuals>,
    /// Its predicted time's residual (a budget with a time budget only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_residual: Option<f64>,
    /// Its weighted residuals, largest first (absent when not tried).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<Score>,
    /// Whether it meets every tolerance (`null` when none is set, or it was not tried).
    pub within_tolerance: Option<bool>,
    /// Why it was not tried, if it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_tried: Option<String>,
}

fn halve(s: Steps) -> Option<Steps> {
    (s.step > 1).then_some(Steps {
        step: s.step / 2,
        ..s
    })
}

/// `s` with half its step, and the change in words (`step 32 -> 16`).
fn halved(s: Steps) -> Option<(String, Steps)> {
    let h = halve(s)?;
    Some((format!("step {} -> {}", s.step, h.step), h))
}

/// The refinements of `lattice` to try: `(knob, change, lattice)`.
fn refinements(lattice: &Lattice, base: &Model) -> Vec<(String, String, Lattice)> {
    let mut out = Vec::new();
    // One refinement: `knob` changed as `change` says, by `set` on a copy of the lattice.
    let mut refine = |knob: &str, change: String, set: &dyn Fn(&mut Lattice)| {
        let mut l = lattice.clone();
        set(&mut l);
        out.push((knob.to_owned(), change, l));
    };
    if let Some((change, h)) = halved(lattice.hidden) {
        refine("lattice.hidden", change, &|l| l.hidden = h);
    }
    if let Some((change, e)) = halved(lattice.experts) {
        refine("lattice.experts", change, &|l| l.experts = e);
    }
    match lattice.expert_ffn {
        FfnRule::Tied { multiple, .. } => {
            let max = base
                .moe
                .expert_ffn
                .saturating_mul(2)
                .min(crate::model::MAX_WIDTH);
            let free = Steps {
                min: multiple,
                max: max.max(multiple),
                step: multiple,
            };
            let change = format!("free, {}..={} in steps of {multiple}", free.min, free.max);
            refine("lattice.expert_ffn", change, &|l| {
                l.expert_ffn = FfnRule::Free(free)
            });
        }
        FfnRule::Free(s) => {
            if let Some((change, h)) = halved(s) {
                refine("lattice.expert_ffn", change, &|l| {
                    l.expert_ffn = FfnRule::Free(h)
                });
            }
        }
    }
    if let [only] = lattice.mixers.as_slice() {
        let (change, mixers) = crate::budget::mixers_around(*only);
        refine("lattice.recurrent", change, &|l| l.mixers = mixers.clone());
    }
    if let Some(r) = lattice.kv_lora_rank {
        // MLA: the latent rank is the only attention knob with a step.
        if let Some((change, h)) = halved(r) {
            refine("lattice.kv_lora_rank", change, &|l| {
                l.kv_lora_rank = Some(h)
            });
        }
        return out;
    }
    let d = &lattice.head_dim;
    let mut finer: Vec<u64> = d
        .windows(2)
        .filter(|w| w[1] - w[0] > 1)
        .map(|w| (w[0] + w[1]) / 2)
        .collect();
    if !finer.is_empty() {
        finer.extend(d);
        finer.sort_unstable();
        finer.dedup();
        let change = format!(
            "{} -> {} head widths (midpoints added)",
            d.len(),
            finer.len()
        );
        refine("lattice.head_dim", change, &|l| l.head_dim = finer.clone());
    }
    let (qmin, qmax) = lattice.q_width;
    let round = |x: f64| (x * 1e4).round() / 1e4;
    let wider = (round(qmin * 0.8), round(qmax * 1.25));
    let change = format!("{qmin}..{qmax} -> {}..{}", wider.0, wider.1);
    refine("lattice.q_width", change, &|l| l.q_width = wider);
    let (gmin, gmax) = lattice.gqa;
    let kv = lattice.kv_heads;
    let (g2, kv2) = (
        gmax.saturating_mul(2).min(crate::model::MAX_COUNT),
        kv.max.saturating_mul(2).min(crate::model::MAX_COUNT),
    );
    if g2 > gmax || kv2 > kv.max {
        let change = format!("gqa max {gmax} -> {g2}, kv_heads max {} -> {kv2}", kv.max);
        refine("lattice.gqa", change, &|l| {
            l.gqa = (gmin, g2);
            l.kv_heads = Steps { max: kv2, ..kv };
        });
    }
    out
}

/// Where the optimum's largest residual comes from.
fn floor(budget: &Budget, best: &Candidate) -> Result<Floor> {
    let w = budget.weights();
    let r = best.residuals;
    let binding = BudgetKind::ALL
        .into_iter()
        .max_by(|&a, &b| (w[a] * r[a].abs()).total_cmp(&(w[b] * r[b].abs())))
        .unwrap_or(BudgetKind::Kv);
    let lattice = budget.lattice();
    let m = &best.model;
    if let (Some(t), Some(rt)) = (budget.time(), &best.time)
        && t.weight() * rt.residual.abs() > w[binding] * r[binding].abs()
    {
        let mut next = m.clone();
        next.hidden += lattice.hidden.step;
        let spec = |model: &Model| crate::model::ModelSpec {
            name: None,
            model: model.clone(),
            workload: budget.baseline().workload.clone(),
            counting: budget.baseline().counting,
            training: None,
        };
        let moves = (t.seconds_per_token(&spec(&next))? - rt.looped_seconds_per_token)
            / rt.baseline_seconds_per_token;
        return Ok(Floor {
            budget: Binding::Time,
            knob: "lattice.hidden".to_owned(),
            step_moves: moves,
            why: format!(
                "the predicted time on {} is {:+.2}% off the Baseline's; it follows from every \
                 knob through the roofline over the kernel plan, not from one budget, and one \
                 step of lattice.hidden ({}) moves it by {:.2}% here",
                t.roofline().device.name,
                100.0 * rt.residual,
                lattice.hidden.step,
                100.0 * moves
            ),
        });
    }
    let (knob, step_moves, why) = match binding {
        BudgetKind::Kv => {
            let stack = Stack::of(m)?;
            let fixed = kv_fixed_parts(budget, &stack);
            kv_floor(lattice, m, &stack, r.kv, &fixed)
        }
        BudgetKind::Params => {
            let moves = step_moves(budget, m, binding, Knob::Experts)?;
            (
                "lattice.experts".to_owned(),
                moves,
                format!(
                    "one step of lattice.experts ({}) moves the parameters by {:.2}% at this \
                     width (hidden {}, expert_ffn {}), so no point lands nearer than about half that",
                    lattice.experts.step,
                    100.0 * moves,
                    m.hidden,
                    m.moe.expert_ffn
                ),
            )
        }
        BudgetKind::Activations => {
            let moves = step_moves(budget, m, binding, Knob::Hidden)?;
            (
                "lattice.hidden".to_owned(),
                moves,
                format!(
                    "one step of lattice.hidden ({}) moves the activations by {:.2}% here; \
                     they grow with the layer executions ({} against the Baseline's {}) \
                     times the widths each execution saves, the FLOPs with the widths \
                     squared, so a width that matches one misses the other",
                    lattice.hidden.step,
                    100.0 * moves,
                    m.checked_executions()?,
                    budget.baseline().model.checked_executions()?
                ),
            )
        }
        BudgetKind::Flops => {
            let moves = step_moves(budget, m, binding, Knob::Hidden)?;
            (
                "lattice.hidden".to_owned(),
                moves,
                format!(
                    "one step of lattice.hidden ({}) moves the FLOPs by {:.2}% here, and the \
                     expert count that restores the parameters fixes the rest",
                    lattice.hidden.step,
                    100.0 * moves
                ),
            )
        }
    };
    let why = with_fixed_mixer(why, binding, lattice);
    Ok(Floor {
        budget: Binding::Budget(binding),
        knob,
        step_moves,
        why,
    })
}

/// `why` the FLOPs or parameters bind, with what a hybrid whose recurrent mixers keep the
/// Baseline's shape pays: their cost at every added execution, whatever the other knobs do.
fn with_fixed_mixer(why: String, binding: BudgetKind, lattice: &Lattice) -> String {
    match (binding, lattice.mixers.as_slice()) {
        (BudgetKind::Flops | BudgetKind::Params, [only]) => format!(
            "{why}; the {} layers keep the Baseline's shape ({}) here, a fixed cost per \
             execution that only lattice.recurrent moves",
            only.as_str(),
            only.shape_text()
        ),
        _ => why,
    }
}

/// A lattice knob [`step_moves`] steps.
#[derive(Debug, Clone, Copy)]
enum Knob {
    Experts,
    Hidden,
}

/// How much one lattice step of `knob` from the optimum `m` moves budget `binding`,
/// relative to the Baseline's.
fn step_moves(budget: &Budget, m: &Model, binding: BudgetKind, knob: Knob) -> Result<f64> {
    let lattice = budget.lattice();
    let baseline = budget.baseline();
    let keys = Keys::of(&baseline.workload, &baseline.model)?;
    let context = baseline.workload.context;
    let mut next = m.clone();
    match knob {
        Knob::Experts => next.moe.experts += lattice.experts.step,
        Knob::Hidden => next.hidden += lattice.hidden.step,
    }
    let (a, b) = (
        budgets_with(m, &keys, context, &baseline.counting)?,
        budgets_with(&next, &keys, context, &baseline.counting)?,
    );
    let base = budgets_with(&baseline.model, &keys, context, &baseline.counting)?;
    let (a, b, base) = (a.to_f64(), b.to_f64(), base.to_f64());
    Ok((b[binding] - a[binding]) / base[binding])
}

/// What else the KV budget of the optimum, whose stack is `m`, holds besides the knob
/// [`kv_floor`] names: a hybrid's recurrent state at the context (which `lattice.recurrent`
/// moves) and the cache of attention layers of their own shape (a Gemma 4 Baseline's
/// full-attention layers: fixed); empty when nothing.
fn kv_fixed_parts(budget: &Budget, m: &Stack) -> String {
    let at_context = budget.baseline().counting.kv == crate::model::KvCount::AtContext;
    let mut out = String::new();
    if let (Some(mixer), true) = (m.recurrent(), at_context) {
        let moved = match budget.lattice().mixers.len() {
            0 | 1 => "held at the Baseline's shape here; lattice.recurrent moves it",
            _ => "its shape one of lattice.recurrent's",
        };
        out.push_str(&format!(
            "; the cache at the context also holds the {} layers' state per sequence ({}: \
             {moved})",
            mixer.as_str(),
            mixer.shape_text()
        ));
    }
    let own = m.own_shapes().find_map(|a| match a.shape {
        AttentionShape::Gqa {
            kv_heads, head_dim, ..
        } => Some((kv_heads, head_dim)),
        AttentionShape::Mla { .. } => None,
    });
    if let Some((kv_heads, head_dim)) = own {
        out.push_str(&format!(
            "; the full-attention layers' keys and values keep the Baseline's shape ({kv_heads} \
             x {head_dim}), a fixed part of it"
        ));
    }
    out
}

/// The floor of the KV cache at the optimum `m` (its residual `r_kv`): the key width
/// (GQA) or the latent rank (MLA), the one knob it depends on, and the `fixed` parts of the
/// budget beside it ([`kv_fixed_parts`]).
fn kv_floor(
    lattice: &Lattice,
    m: &Model,
    stack: &Stack,
    r_kv: f64,
    fixed: &str,
) -> (String, f64, String) {
    if let Some(a) = crate::budget::mla_of(stack) {
        let rank = a.kv_lora_rank;
        let step = lattice.kv_lora_rank.map_or(1, |r| r.step);
        return (
            "lattice.kv_lora_rank".to_owned(),
            step as f64 / rank.max(1) as f64,
            format!(
                "the KV cache of MLA depends on the latent rank alone (kv_lora_rank + \
                 qk_rope_head_dim per layer execution); the lattice's nearest to the \
                 Baseline's is a rank of {rank}, {:+.2}% off",
                100.0 * r_kv
            ),
        );
    }
    let kv = m.kv_heads * m.head_dim;
    let moves = 1.0 / kv as f64;
    let why = match fixed.is_empty() {
        true => format!(
            "the KV cache depends on the key width kv_heads x head_dim alone; the \
             lattice's nearest to the Baseline's is {} x {} = {kv}, {:+.2}% off",
            m.kv_heads,
            m.head_dim,
            100.0 * r_kv
        ),
        // Other parts hold (or move) the budget too: the key width is the best with them,
        // not the nearest to the Baseline's.
        false => format!(
            "the attention layers' keys and values depend on the key width kv_heads x \
             head_dim alone; the best on the lattice here is {} x {} = {kv}, the KV budget \
             {:+.2}% off{fixed}",
            m.kv_heads,
            m.head_dim,
            100.0 * r_kv
        ),
    };
    (
        "lattice.head_dim".to_owned(),
        moves
            * (lattice
                .head_dim
                .windows(2)
                .map(|p| p[1] - p[0])
                .min()
                .unwrap_or(1) as f64)
            * m.kv_heads as f64,
        why,
    )
}

/// The floor of `best` on `budget`'s lattice and the refinements that move it.
pub fn advise(budget: &Budget, best: &Candidate) -> Result<(Floor, Vec<Refinement>)> {
    let floor = floor(budget, best)?;
    let tolerance: &Tolerance = budget.tolerance();
    let mut out = Vec::new();
    for (knob, change, lattice) in refinements(budget.lattice(), &budget.baseline().model) {
        let options = SearchOptions::top(1);
        // A refinement the budget's checks refuse is listed as not tried, with the reason.
        let tried = budget
            .with_lattice(lattice)
            .and_then(|refined| {
                options.check(&refined)?;
                solve_with(&refined, &options)
            })
            .map_err(|e| e.to_string());
        out.push(match tried {
            Ok(sol) => {
                let b = sol.best();
                Refinement {
                    knob,
                    change,
                    residuals: Some(b.residuals),
                    time_residual: b.time.map(|t| t.residual),
                    score: Some(b.score),
                    within_tolerance: tolerance.verdict(&b.residuals),
                    not_tried: None,
                }
            }
            Err(why) => Refinement {
                knob,
                change,
                residuals: None,
                time_residual: None,
                score: None,
                within_tolerance: None,
                not_tried: Some(why),
            },
        });
    }
    out.sort_by(|a, b| {
        b.within_tolerance.cmp(&a.within_tolerance).then_with(|| {
            let s = |r: &Refinement| r.score.map_or(f64::INFINITY, |s| s.worst());
            s(a).total_cmp(&s(b))
        })
    });
    Ok((floor, out))
}
