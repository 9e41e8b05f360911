//! Every convention's count of one model (`smelt cost --conventions`), the conventions that
//! refuse it, and of a looped model against its Baseline.

use serde::Serialize;

use super::{Convention, Feature, training_flops};
use crate::error::Result;
use crate::model::{ModelSpec, Stack};
use crate::units::Flops;

/// One convention's count of a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConventionCount {
    /// The convention.
    pub convention: Convention,
    /// Per-token training FLOPs under it.
    pub training_flops: Flops,
    /// Over the exact count.
    pub ratio_to_exact: f64,
    /// What of any model it does not see.
    pub ignores: Vec<Feature>,
    /// Of those, what this model has (what makes its count differ).
    pub ignored_here: Vec<Feature>,
    /// Its source, pinned.
    pub source: &'static str,
}

/// A model's per-token training FLOPs under every convention (`smelt cost --conventions`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LauncherFlops {
    /// The model's name, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The sequence length the launchers' attention terms use (the workload's context).
    pub sequence_length: u64,
    /// Physical layers: what every launcher convention counts.
    pub physical_layers: u64,
    /// Layer executions: what the exact count counts.
    pub layer_executions: u64,
    /// One count per convention that counts the model, the exact one first.
    pub counts: Vec<ConventionCount>,
    /// The launcher conventions whose formula cannot count the model, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<ConventionRefusal>,
}

/// A launcher convention whose formula cannot count a model (e.g. a feature it has no term
/// for), and why: its count is left out rather than guessed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConventionRefusal {
    /// The convention.
    pub convention: Convention,
    /// Why, naming the model's field.
    pub reason: String,
}

/// The conventions that count a model, with their per-token training FLOPs, and those
/// refused ([`counts_or_refusals`]).
pub type CountsOrRefusals = (Vec<(Convention, Flops)>, Vec<ConventionRefusal>);

/// Each convention's per-token training FLOPs of `spec`, the exact count first (its error
/// is the call's), then the launchers' that count it; a launcher formula's error is its
/// refusal.
pub fn counts_or_refusals(spec: &ModelSpec) -> Result<CountsOrRefusals> {
    let mut counts = vec![(Convention::Exact, training_flops(Convention::Exact, spec)?)];
    let mut refused = Vec::new();
    for &c in Convention::LAUNCHERS.iter() {
        match training_flops(c, spec) {
            Ok(f) => counts.push((c, f)),
            Err(e) => refused.push(ConventionRefusal {
                convention: c,
                reason: e.to_string(),
            }),
        }
    }
    Ok((counts, refused))
}

/// Every convention's count of `spec` ([`LauncherFlops`]).
pub fn launcher_flops(spec: &ModelSpec) -> Result<LauncherFlops> {
    let (all, refused) = counts_or_refusals(spec)?;
    let exact = all[0].1;
    let counts = (all.into_iter())
        .map(|(c, f)| ConventionCount {
            convention: c,
            training_flops: f,
            ratio_to_exact: f.as_f64() / exact.as_f64(),
            // The features only hybrids have are listed only for them.
            ignores: (c.ignores_for(spec).into_iter())
                .filter(|f| !f.hybrid_only() || f.present_in(spec))
                .collect(),
            ignored_here: c.ignored_in(spec),
            source: c.source(),
        })
        .collect();
    let stack = Stack::of(&spec.model)?;
    Ok(LauncherFlops {
        name: spec.name.clone(),
        sequence_length: spec.workload.context,
        physical_layers: stack.physical(),
        layer_executions: stack.executions(),
        counts,
        refused,
    })
}

/// One convention's counts of a looped model and its Baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairCount {
    /// The convention.
    pub convention: Convention,
    /// The Baseline's per-token training FLOPs under it.
    pub baseline: Flops,
    /// The looped model's.
    pub looped: Flops,
    /// Looped over Baseline: the FLOP ratio a log under this convention shows.
    pub ratio: f64,
}

/// What every convention says of a looped model against its Baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LauncherPair {
    /// Which pair (a grid's cell, or the Baseline's name).
    pub label: String,
    /// One count per convention, the exact one first.
    pub counts: Vec<PairCount>,
}

impl LauncherPair {
    /// The ratio under `convention`.
    pub fn ratio(&self, convention: Convention) -> Option<f64> {
        self.counts
            .iter()
            .find(|c| c.convention == convention)
            .map(|c| c.ratio)
    }
}

/// Every convention's counts of `looped` against `baseline`, the looped model counted
/// under the Baseline's `[counting]` and workload (as [`crate::cost::compare`] does).
pub fn pair(label: &str, baseline: &ModelSpec, looped: &ModelSpec) -> Result<LauncherPair> {
    let under = ModelSpec {
        counting: baseline.counting,
        workload: baseline.workload.clone(),
        ..looped.clone()
    };
    let counts = Convention::ALL
        .iter()
        .map(|&c| {
            let (b, l) = (training_flops(c, baseline)?, training_flops(c, &under)?);
            Ok(PairCount {
                convention: c,
                baseline: b,
                looped: l,
                ratio: l.as_f64() / b.as_f64(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(LauncherPair {
        label: label.to_owned(),
        counts,
    })
}
