//! Which tolerances a result breaks, in words: what a command line says on standard error
//! before it exits with the tolerance code, and what a launcher logs before it refuses.

use super::{GridReport, MatchReport, SweepReport};
use crate::units::percent;

/// A result judged against its budget's `[tolerance]`.
pub trait Verdict {
    /// One line per broken tolerance (empty: every tolerance is met).
    fn broken_tolerances(&self) -> Vec<String>;
}

impl Verdict for MatchReport {
    /// Per broken budget, the residual against its tolerance: `kv: |-2.50%| > 1.00%`.
    fn broken_tolerances(&self) -> Vec<String> {
        let tolerance = |k| self.tolerance.get(k).unwrap_or(0.0) * 100.0;
        self.broken
            .iter()
            .map(|&k| {
                let residual = percent(*self.residuals.get(k));
                format!("{}: |{residual}| > {:.2}%", k.as_str(), tolerance(k))
            })
            .collect()
    }
}

impl Verdict for GridReport {
    /// Per cell outside its tolerances, the budgets it breaks: `cell 200m s95 (kv)`.
    fn broken_tolerances(&self) -> Vec<String> {
        let cells = (self.cells.iter()).filter(|c| c.within_tolerance == Some(false));
        cells
            .map(|c| {
                let kinds: Vec<&str> = c.broken.iter().map(|k| k.as_str()).collect();
                let (scale, sparsity) = (&c.scale, &c.sparsity_label);
                format!("cell {scale} {sparsity} ({})", kinds.join(", "))
            })
            .collect()
    }
}

impl Verdict for SweepReport {
    /// Per value outside the tolerances, the budgets it breaks: `span = 4 (flops, kv)`.
    fn broken_tolerances(&self) -> Vec<String> {
        let rows = (self.rows.iter()).filter(|r| r.within_tolerance == Some(false));
        rows.map(|r| {
            let kinds: Vec<&str> = r.broken.iter().map(|k| k.as_str()).collect();
            let knob = self.knob.as_str();
            format!("{knob} = {} ({})", r.value, kinds.join(", "))
        })
        .collect()
    }
}
