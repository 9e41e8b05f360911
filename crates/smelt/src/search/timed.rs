//! With the predicted time weighed: the expert counts at one shape and expert width, by
//! branch and bound on the time's order in the expert count (module docs, "With the
//! predicted time weighed").
//!
//! At a fixed hidden size, attention shape and expert width, the predicted time of a
//! training step is nondecreasing in the expert count `E` when every kernel whose shape
//! depends on `E` is costed by a convex function of its tokens that is not negative at 0
//! tokens ([`monotone_in_experts`] says when):
//!
//! * the router's GEMM (`tokens × E × hidden`): each of its arithmetic and its operands
//!   grows with `E`, and so does their maximum or their sum;
//! * the routed experts' GEMMs: one expert's kernels cost `f(t)` at `t` tokens, a maximum
//!   (or a sum) of affine functions of `t` (arithmetic at efficiency 1 or at the traffic
//!   fit's seconds per FLOP, operands, launches), so convex, with `f(0) ≥ 0`. Balanced
//!   routing splits `T·k` assignments into `E` parts differing by at most one, which
//!   minimises `Σ f(t_e)` over all splits into `E` parts (convexity). Merging two parts
//!   `a, b` of the balanced split into `E + 1` parts gives a split into `E` parts no
//!   dearer (`f(a) + f(b) ≥ f(a + b) + f(0) ≥ f(a + b)`, convexity), so the balanced
//!   split into `E` parts is no dearer than the one into `E + 1`;
//! * the launches of grouped expert GEMMs (a constant per MoE layer execution) and of
//!   one GEMM per expert (in `f(0)`).
//!
//! Every other kernel does not depend on `E`. A calibration's efficiency curves (a share of
//! the peak interpolated between measured points) and skewed routing break the argument;
//! there every routable count is predicted, as before.
//!
//! So for counts `lo < E < hi` whose times `T(lo) ≤ T(E) ≤ T(hi)` are known at the ends,
//! the time's `|r_T|` is at least the distance of `[r_T(lo), r_T(hi)]` from 0 (less a slack
//! for the floats' rounding, [`SLACK`]); with it in place of step 4's 0, the score of each
//! count between is bounded from below. An interval none of whose counts' bounds could be
//! kept is skipped; otherwise its middle count is predicted and scored, and both halves are
//! searched. Every count is then scored in full or proven no better than the `N`-th kept,
//! as before, after a number of predictions that grows with the counts near the best, not
//! with all of them.

use crate::budget::{Mode, Score, TimeBudget};
use crate::cost::PerBudget;
use crate::error::Result;
use crate::plan::Routing;

use super::affine::{AtHidden, Eval, Shape};
use super::candidate::looped_model;
use super::kept::Entry;
use super::{Part, Routable, Search, TimeTerm};

/// The relative slack on the time's residual in the bound: far above the rounding of a sum
/// of a few hundred kernels' seconds, far below any difference that matters.
pub(super) const SLACK: f64 = 1e-9;

/// Whether `t`'s predicted time is nondecreasing in the expert count at a fixed shape and
/// expert width (module docs): balanced routing, and the expert and router GEMMs costed at
/// efficiency 1 (no calibration) or by the calibration's operand-traffic fit, which costs
/// every GEMM on its own device.
pub(super) fn monotone_in_experts(t: &TimeBudget) -> bool {
    let roof = t.roofline();
    t.options().routing == Routing::Balanced
        && (roof.calibration.is_none() || roof.traffic().is_some())
}

impl Search<'_> {
    /// The expert counts at hidden size `a` and `shape` (its expert count ignored) with the
    /// time weighed and monotone in the count (module docs), each budget `lines` as
    /// `intercept + slope·E`.
    pub(super) fn timed_experts(
        &self,
        t: TimeTerm<'_>,
        eval: &Eval,
        a: &AtHidden,
        shape: Shape,
        lines: PerBudget<(i128, i128)>,
        part: &mut Part,
    ) -> Result<()> {
        let budget = self.budget;
        let w = budget.weights();
        let e = budget.lattice().experts;
        let conservative = budget.mode() == Mode::Conservative;
        let Routable { first, last } = self.experts;
        // Each count's score without its time, `None` where inadmissible.
        let untimed: Vec<Option<Score>> = (first..=last)
            .map(|i| {
                let v = lines.map(|(c, s)| c + s * i128::from(e.at(i)));
                self.admissible(v).then(|| Score::of(&self.residuals(v), w))
            })
            .collect();
        part.scored += untimed.len() as u64;
        let at = |i: u64| untimed[(i - first) as usize];
        if !(untimed.iter().flatten()).any(|s| part.kept.admits(&s.with_time(0.0))) {
            return Ok(());
        }
        // Predicts count `i`, offers it, and gives its time's residual.
        let predict = |i: u64, part: &mut Part| -> Result<f64> {
            let point = eval.point(
                a.hidden,
                Shape {
                    experts: e.at(i),
                    ..shape
                },
            );
            let model = looped_model(budget, self.looping.as_ref(), point);
            part.predicted += 1;
            let r = t.residual(budget, &model)?;
            if let Some(u) = at(i)
                && !(conservative && r.residual > 0.0)
            {
                let score = u.with_time(t.weighted(&r));
                if part.kept.admits(&score) {
                    part.kept.offer(Entry { score, model });
                }
            }
            Ok(r.residual)
        };
        let r_first = predict(first, part)?;
        if last == first {
            return Ok(());
        }
        let r_last = predict(last, part)?;
        let mut open = vec![(first, last, r_first, r_last)];
        while let Some((lo, hi, r_lo, r_hi)) = open.pop() {
            if hi - lo < 2 {
                continue;
            }
            // Every count between is at least as slow as `lo` and at most as slow as `hi`.
            if conservative && r_lo > SLACK {
                continue;
            }
            let least = if r_lo > SLACK {
                r_lo - SLACK
            } else if r_hi < -SLACK {
                -r_hi - SLACK
            } else {
                0.0
            };
            let bound = t.budget.weight() * least;
            let worth =
                (lo + 1..hi).any(|i| at(i).is_some_and(|u| part.kept.admits(&u.with_time(bound))));
            if !worth {
                continue;
            }
            let mid = lo + (hi - lo) / 2;
            let r_mid = predict(mid, part)?;
            open.push((mid, hi, r_mid, r_hi));
            open.push((lo, mid, r_lo, r_mid));
        }
        Ok(())
    }
}
