//! The paper's ablations: one recipe knob varied, every candidate re-matched to the same
//! Baseline. The JSON contract of `smelt sweep`.

use serde::Serialize;

use crate::budget::{Budget, Span};
use crate::cost::{BudgetKind, Ratios, Residuals};
use crate::error::{Error, Result};
use crate::model::ModelSpec;
use crate::names::named_enum;
use crate::progress::{Progress, Silent};
use crate::search::{SearchOptions, SparsityPair, Verdict, match_budget_in};

named_enum! {
    /// Which recipe knob a sweep varies.
    pub enum Knob: "knob" {
        /// Looped layers (0: no loop).
        Span = "span",
        /// Physical layers of the looped model (the loop stays "half, middle" or as given).
        Depth = "depth",
        /// Executions of the looped block.
        Repeats = "repeats",
    }
}

/// Most values one sweep takes ([`check_values`]; [`sweep_with`] checks it, whatever the
/// values came from).
pub const MAX_SWEEP_VALUES: usize = 1024;

/// Checks that a sweep has one to [`MAX_SWEEP_VALUES`] values, none twice; `field` names them in the
/// error.
pub fn check_values(field: &str, values: &[u64]) -> Result<()> {
    if values.is_empty() {
        return Err(Error::invalid(field, "needs at least one value"));
    }
    if values.len() > MAX_SWEEP_VALUES {
        return Err(Error::invalid(
            field,
            format!("at most {MAX_SWEEP_VALUES} values (got {})", values.len()),
        ));
    }
    // Each value is a row (and, with an export folder, a file): one given twice is a slip.
    let mut seen = std::collections::BTreeSet::new();
    if let Some(v) = values.iter().find(|v| !seen.insert(**v)) {
        return Err(Error::invalid(
            field,
            format!("{v} is given twice: each value is one row, so give it once"),
        ));
    }
    Ok(())
}

/// Parses a sweep's values: `a..=b`, `a..b`, `n`, and comma-separated lists of them
/// (`0..=12`, `8,10,12`, `1,2..=4`); `field` names them in errors.
pub fn parse_values(field: &str, text: &str) -> Result<Vec<u64>> {
    let bad = |why: String| Error::invalid(field, why);
    let num = |s: &str| -> Result<u64> {
        s.trim()
            .parse::<u64>()
            .map_err(|_| bad(format!("'{}' is not a non-negative integer", s.trim())))
    };
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(bad(format!("empty item in '{text}'")));
        }
        let (lo, hi) = if let Some((a, b)) = part.split_once("..=") {
            (num(a)?, num(b)?)
        } else if let Some((a, b)) = part.split_once("..") {
            let b = num(b)?;
            (
                num(a)?,
                b.checked_sub(1)
                    .ok_or_else(|| bad(format!("the range '{part}' is empty")))?,
            )
        } else if let Some((a, b)) = part.split_once('-')
            && let (Ok(a), Ok(b)) = (a.trim().parse::<u64>(), b.trim().parse::<u64>())
        {
            return Err(bad(format!(
                "'{part}' is not a value or a range: write the range from {a} to {b} as \
                 {a}..={b} ({a}..{b} leaves {b} out)"
            )));
        } else {
            let v = num(part)?;
            (v, v)
        };
        if lo > hi {
            return Err(bad(format!("the range '{part}' is empty")));
        }
        if hi - lo >= MAX_SWEEP_VALUES as u64 || out.len() + (hi - lo) as usize >= MAX_SWEEP_VALUES
        {
            return Err(bad(format!("at most {MAX_SWEEP_VALUES} values")));
        }
        out.extend(lo..=hi);
    }
    check_values(field, &out)?;
    Ok(out)
}

/// One row of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    /// The knob's value.
    pub value: u64,
    /// Layer executions of the matched model.
    pub layer_executions: u64,
    /// The matched looped model file.
    pub looped: ModelSpec,
    /// `looped / Baseline` per budget.
    pub ratios: Ratios,
    /// `looped / Baseline - 1` per budget.
    pub residuals: Residuals,
    /// Sparsity of both models.
    pub sparsity: SparsityPair,
    /// Whether the residuals are within the tolerances: `null` when the budget sets no
    /// `[tolerance]`.
    pub within_tolerance: Option<bool>,
    /// Budgets outside their tolerance.
    pub broken: Vec<BudgetKind>,
    /// The per-GPU training memory peaks under the Baseline's `[training]` (only with
    /// one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_per_gpu: Option<crate::cost::PeakPair>,
}

/// The result of a sweep: `smelt sweep --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    /// The budget's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The knob varied.
    pub knob: Knob,
    /// The Baseline every candidate is matched to.
    pub baseline: ModelSpec,
    /// One row per value, in the order given.
    pub rows: Vec<SweepRow>,
}

/// Re-matches `budget` for every `value` of `knob`.
pub fn sweep(budget: &Budget, knob: Knob, values: &[u64]) -> Result<SweepReport> {
    sweep_with(budget, knob, values, &SearchOptions::default(), &Silent)
}

/// [`sweep`] with search options (each value keeps the best configuration), reporting each
/// value matched to `progress`. At most [`MAX_SWEEP_VALUES`] values (an error naming
/// `values` otherwise). A budget with a time budget ([`crate::budget::time`]) is refused:
/// the rows do not report it.
pub fn sweep_with(
    budget: &Budget,
    knob: Knob,
    values: &[u64],
    options: &SearchOptions,
    progress: &dyn Progress,
) -> Result<SweepReport> {
    check_values("values", values)?;
    if budget.time().is_some() {
        return Err(Error::invalid(
            "objective.time",
            "a sweep's rows do not report the predicted time; match the budget (smelt match) \
             at each value instead, or sweep it without [objective.time]",
        ));
    }
    let options = SearchOptions { top: 1, ..*options };
    let mut rows = Vec::with_capacity(values.len());
    progress.begin(&format!("sweeping {}", knob.as_str()), values.len() as u64);
    for &v in values {
        crate::progress::check(progress)?;
        let at = |e: Error| Error::invalid(format!("sweep {} = {v}", knob.as_str()), e.to_string());
        let mut recipe = *budget.recipe();
        match knob {
            Knob::Span => recipe.span = Span::Layers(v),
            Knob::Depth => recipe.layers = Some(v),
            Knob::Repeats => recipe.repeats = v,
        }
        let b = budget.with_recipe(recipe).map_err(at)?;
        let m = match_budget_in(&b, &options, progress).map_err(|e| match e {
            Error::Interrupted => e,
            e => at(e),
        })?;
        progress.advance(1);
        rows.push(SweepRow {
            value: v,
            layer_executions: m.looped.model.executions(),
            looped: m.looped,
            ratios: m.ratios,
            residuals: m.residuals,
            sparsity: m.sparsity,
            within_tolerance: m.within_tolerance,
            broken: m.broken,
            peak_per_gpu: m.peak_per_gpu,
        });
    }
    progress.end();
    Ok(SweepReport {
        name: budget.name().map(str::to_owned),
        knob,
        baseline: budget.baseline().clone(),
        rows,
    })
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

#[cfg(test)]
mod tests {
    use super::{MAX_SWEEP_VALUES, check_values, parse_values};

    #[test]
    fn values_parse() {
        assert_eq!(parse_values("span", "0..=3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_values("span", "0..3").unwrap(), vec![0, 1, 2]);
        assert_eq!(parse_values("depth", "8,10, 12").unwrap(), vec![8, 10, 12]);
        assert_eq!(parse_values("repeats", "1,2..=3").unwrap(), vec![1, 2, 3]);
        for bad in [
            "3..=1",
            "a",
            "1,,2",
            "0..0",
            "0..=100000",
            "0..=18446744073709551615",
            "1,2..=4,3",
        ] {
            let e = parse_values("--span", bad).unwrap_err().to_string();
            assert!(e.starts_with("--span: "), "{e}");
        }
    }

    #[test]
    fn values_are_counted_whatever_they_came_from() {
        let most: Vec<u64> = (0..MAX_SWEEP_VALUES as u64).collect();
        assert!(check_values("values", &most).is_ok());
        let more: Vec<u64> = (0..=MAX_SWEEP_VALUES as u64).collect();
        let e = check_values("values", &more).unwrap_err().to_string();
        assert!(
            e.starts_with("values: at most 1024 values (got 1025)"),
            "{e}"
        );
    }
}
