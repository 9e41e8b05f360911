//! Step 4 of the search (module docs): the expert counts worth scoring at one shape, from
//! the breakpoints of the residuals that depend on the expert count.

use super::{Routable, Search};
use crate::cost::PerBudget;

impl Search<'_> {
    /// Lattice indices of `E` worth scoring (module docs, step 4), given the budgets at the
    /// first routable index and their slopes per index.
    pub(super) fn expert_candidates(
        &self,
        v0: PerBudget<i128>,
        slopes: PerBudget<i128>,
    ) -> Vec<u64> {
        let Routable { first, last } = self.experts;
        let radius = self.top as i64 + 1;
        let mut idx: Vec<u64> = (0..=radius as u64)
            .flat_map(|d| {
                [
                    first.saturating_add(d).min(last),
                    last.saturating_sub(d).max(first),
                ]
            })
            .collect();
        if slopes.all(|&s| s == 0) {
            // No MoE layer (every layer dense): no budget depends on `E`, every count ties,
            // and the tie-break (module docs) ranks them by distance to the Baseline's
            // count. The `N` best are the `N` nearest it, so score those.
            let e = self.budget.lattice().experts;
            let near = self
                .budget
                .baseline()
                .model
                .moe
                .experts
                .saturating_sub(e.min)
                / e.step;
            let near = near.clamp(first, last);
            idx.extend(
                (near.saturating_sub(radius as u64)..=near.saturating_add(radius as u64))
                    .map(|i| i.clamp(first, last)),
            );
        } else if first < last {
            for p in self.breakpoints(v0, slopes) {
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
        idx
    }

    /// The breakpoints in `E` (module docs, step 4), as lattice indices counted from the
    /// first routable one (finite ones only): the zeros of the residuals that depend on
    /// `E`, the crossings of two such weighted `|r|`, and the points where one meets the
    /// weighted `|r|` of a budget that does not depend on `E`.
    fn breakpoints(&self, v0: PerBudget<i128>, slopes: PerBudget<i128>) -> Vec<f64> {
        let w = self.budget.weights();
        // r(x) = a + b·x, x the index counted from `first`.
        let lines = v0.zip(slopes).zip(self.base).map(|((v, s), base)| {
            let base = base as f64;
            (v as f64 / base - 1.0, s as f64 / base)
        });
        let mut points: Vec<f64> = lines
            .iter()
            .filter(|(_, (_, b))| *b != 0.0)
            .map(|(_, (a, b))| -a / b)
            .collect();
        for (i, &(ai, bi)) in lines.iter().filter(|(_, (_, b))| *b != 0.0) {
            for (j, &(aj, bj)) in lines.iter() {
                for s in [1.0, -1.0] {
                    if bj == 0.0 {
                        let c = w[j] * aj.abs();
                        points.push((s * c / w[i] - ai) / bi);
                    } else if i < j {
                        points.push((s * w[j] * aj - w[i] * ai) / (w[i] * bi - s * w[j] * bj));
                    }
                }
            }
        }
        points.retain(|p| p.is_finite());
        points
    }
}
