//! Which tolerances a result breaks, in words: what a command line says on standard error
//! before it exits with the tolerance code, and what a launcher logs before it refuses.

use super::MatchReport;
use crate::units::percent;

/// A result judged against its budget's `[tolerance]` (a grid's and a sweep's are in
/// [`crate::study`]).
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
