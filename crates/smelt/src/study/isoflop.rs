//! The run matrix of an IsoFLOP study ([`plan`]): per matched cell, its Baseline and its
//! looped model trained at each compute level `C` for `D = C / F` tokens, `F` the exact
//! per-token training FLOPs ([`crate::launcher_flops::training_flops`] under
//! [`Convention::Exact`]: every layer execution, so a loop's second visits count), rounded
//! to whole optimizer steps of `global_batch` sequences of the workload's context.
//!
//! Rounding to the nearest whole step puts every run's reached compute `D·F` within half a
//! step's compute of its level. Beside each run, what a plan by each launcher convention
//! (6N, Megatron's, torchtitan's formula) would have trained, and the compute that run
//! would really have spent by the exact count: how far off such a plan lands.
//!
//! A run's tokens and compute are the contract `smelt collect` ([`super::collect`]) checks
//! results against; the plan's runs, one JSON object per line, are the manifest a launcher
//! reads.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::launcher_flops::{Convention, training_flops};
use crate::model::ModelSpec;
use crate::search::SparsityPair;
use crate::units::Flops;

crate::names::named_enum! {
    /// Which model of a cell a run trains.
    pub enum Arch: "architecture" {
        /// The cell's Baseline.
        Baseline = "baseline",
        /// The looped model matched to it.
        Looped = "looped",
    }
}

/// The most compute levels a plan takes.
pub const MAX_COMPUTES: usize = 64;

/// One matched cell to plan: its name, its two models and their sparsities.
#[derive(Debug, Clone, Copy)]
pub struct PlanCell<'a> {
    /// The cell's name (`100m-s85`; a budget's name for a single match).
    pub name: &'a str,
    /// The Baseline.
    pub baseline: &'a ModelSpec,
    /// The looped model matched to it.
    pub looped: &'a ModelSpec,
    /// Both models' compute-equivalent sparsity `S`.
    pub sparsity: SparsityPair,
}

/// What a plan is asked for: the compute levels and the batch shape.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// Training compute levels `C`, FLOPs, each positive and finite, none twice.
    pub computes: Vec<f64>,
    /// Sequences per optimizer step (the global batch).
    pub global_batch: u64,
}

/// What a plan by one launcher convention would have trained, and really spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConventionPlan {
    /// The convention.
    pub convention: Convention,
    /// Per-token training FLOPs under it (absent when the convention cannot count the
    /// model: `refused` says why).
    pub training_flops_per_token: Option<f64>,
    /// The whole optimizer steps its plan would train.
    pub steps: Option<u64>,
    /// The compute those steps really spend, by the exact count.
    pub compute_reached: Option<f64>,
    /// `compute_reached / compute`: how far off that plan lands.
    pub reached_over_compute: Option<f64>,
    /// Why the convention cannot count the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// One run of the study: a model trained at one compute level. Also one line of the
/// manifest (`directory` and `config_sha256` set by an export).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// `CELL-ARCH-C` (`100m-s85-looped-1e18`).
    pub id: String,
    /// The model's name (`CELL-ARCH`), its directory's name in an export.
    pub model: String,
    /// The grid cell.
    pub cell: String,
    /// Which model of the cell.
    pub arch: Arch,
    /// The model's compute-equivalent sparsity `S`.
    pub sparsity: f64,
    /// The compute level `C`, FLOPs.
    pub compute: f64,
    /// Exact per-token training FLOPs (every layer execution), as the nearest float.
    pub training_flops_per_token: f64,
    /// The same, exact: `n` or `n/d`.
    pub training_flops_per_token_exact: String,
    /// Training tokens: `steps · global_batch · sequence_length`.
    pub tokens: u64,
    /// Optimizer steps (whole).
    pub steps: u64,
    /// Sequences per step.
    pub global_batch: u64,
    /// Tokens per sequence (the workload's context).
    pub sequence_length: u64,
    /// `tokens · training_flops_per_token`, by the exact count.
    pub compute_reached: f64,
    /// `compute_reached / compute`.
    pub reached_over_compute: f64,
    /// What a plan by each launcher convention would have trained (6N first).
    pub conventions: Vec<ConventionPlan>,
    /// The model directory, relative to the manifest (set by an export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
    /// SHA-256 of the model's `config.json` as exported (set by an export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
}

/// A planned model: one per cell and architecture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedModel {
    /// `CELL-ARCH`.
    pub name: String,
    /// The grid cell.
    pub cell: String,
    /// Which model of the cell.
    pub arch: Arch,
    /// The model, at the workload it was costed at.
    #[serde(skip)]
    pub spec: ModelSpec,
    /// Exact per-token training FLOPs, as the nearest float.
    pub training_flops_per_token: f64,
}

/// The run matrix ([`plan`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IsoflopPlan {
    /// The grid's or budget's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The compute levels, as given.
    pub computes: Vec<f64>,
    /// Sequences per optimizer step.
    pub global_batch: u64,
    /// Tokens per sequence.
    pub sequence_length: u64,
    /// Tokens per optimizer step.
    pub tokens_per_step: u64,
    /// The models trained, cell by cell, Baseline first.
    pub models: Vec<PlannedModel>,
    /// The runs: per model, per compute level in the order given.
    pub runs: Vec<Run>,
}

/// The short name of a compute level in run ids: `1e18`, `3e18`, `2.5e19`.
pub fn compute_label(c: f64) -> String {
    format!("{c:e}")
}

/// The exact count's `tokens · F` as the nearest float (exact product, one rounding).
pub fn reached(flops: Flops, tokens: u64) -> f64 {
    match flops.checked_mul(tokens) {
        Ok(p) => p.as_f64(),
        Err(_) => flops.as_f64() * tokens as f64,
    }
}

/// `text` (`n` or `n/d`, as [`Run::training_flops_per_token_exact`] writes) as [`Flops`].
pub fn parse_flops(text: &str, field: &str) -> Result<Flops> {
    let bad = || {
        Error::invalid(
            field,
            format!("'{text}' is not a FLOP count (a whole number, or n/d)"),
        )
    };
    let (n, d) = match text.split_once('/') {
        Some((n, d)) => (n.trim(), d.trim()),
        None => (text.trim(), "1"),
    };
    let n: u128 = n.parse().map_err(|_| bad())?;
    let d: u128 = d.parse().map_err(|_| bad())?;
    if d == 0 {
        return Err(bad());
    }
    Flops::ratio(n, d)
}

/// Checks the options: at least one compute level, each positive and finite, none twice;
/// a positive batch.
fn check(options: &PlanOptions) -> Result<()> {
    if options.computes.is_empty() {
        return Err(Error::invalid("compute", "give at least one compute level"));
    }
    if options.computes.len() > MAX_COMPUTES {
        return Err(Error::invalid(
            "compute",
            format!(
                "{} levels given; a plan takes at most {MAX_COMPUTES}",
                options.computes.len()
            ),
        ));
    }
    for (i, &c) in options.computes.iter().enumerate() {
        if !(c.is_finite() && c > 0.0) {
            return Err(Error::invalid(
                "compute",
                format!(
                    "level {} is {c}; each must be a positive number of FLOPs",
                    i + 1
                ),
            ));
        }
        if options.computes[..i].contains(&c) {
            return Err(Error::invalid(
                "compute",
                format!("{} is given twice; give each level once", compute_label(c)),
            ));
        }
    }
    if options.global_batch == 0 {
        return Err(Error::invalid(
            "global_batch",
            "must be at least 1 sequence",
        ));
    }
    Ok(())
}

/// Whole steps of `per_step` FLOPs nearest to `compute` (an error naming `what` when that
/// is no step, or more than `u64` tokens).
fn steps_for(compute: f64, per_step: f64, tokens_per_step: u64, what: &str) -> Result<u64> {
    let steps = (compute / per_step).round();
    if steps < 1.0 {
        return Err(Error::invalid(
            "compute",
            format!(
                "{what}: {} FLOPs is under half an optimizer step ({} FLOPs a step); raise \
                 the compute level or lower the global batch",
                compute_label(compute),
                compute_label(per_step)
            ),
        ));
    }
    let max = (u64::MAX / tokens_per_step) as f64;
    if steps > max {
        return Err(Error::invalid(
            "compute",
            format!(
                "{what}: {} FLOPs is more than 2^64 tokens",
                compute_label(compute)
            ),
        ));
    }
    Ok(steps as u64)
}

/// The run matrix of `cells` at the compute levels and batch of `options` ([`IsoflopPlan`]).
///
/// Each model is counted at its cell's Baseline's workload and `[counting]` (the looped
/// model as [`crate::cost::compare`] counts it); the sequence length is that workload's
/// context, which must be the same in every cell.
pub fn plan(
    name: Option<&str>,
    cells: &[PlanCell<'_>],
    options: &PlanOptions,
) -> Result<IsoflopPlan> {
    check(options)?;
    let Some(first) = cells.first() else {
        return Err(Error::invalid("grid", "has no cells to plan"));
    };
    let sequence_length = first.baseline.workload.context;
    let tokens_per_step =
        options
            .global_batch
            .checked_mul(sequence_length)
            .ok_or(Error::Overflow {
                what: "tokens per step",
            })?;
    let mut models = Vec::new();
    let mut runs = Vec::new();
    for cell in cells {
        if cell.baseline.workload.context != sequence_length {
            return Err(Error::invalid(
                format!("cell {}: workload.context", cell.name),
                format!(
                    "is {} but cell {}'s is {sequence_length}; one plan trains one sequence \
                     length (give --context)",
                    cell.baseline.workload.context, first.name
                ),
            ));
        }
        let looped = ModelSpec {
            counting: cell.baseline.counting,
            workload: cell.baseline.workload.clone(),
            ..cell.looped.clone()
        };
        for (arch, spec, s) in [
            (Arch::Baseline, cell.baseline, cell.sparsity.baseline),
            (Arch::Looped, &looped, cell.sparsity.looped),
        ] {
            let model = format!("{}-{}", cell.name, arch.as_str());
            let exact = training_flops(Convention::Exact, spec).map_err(|e| at(&model, e))?;
            let conventions = convention_counts(spec);
            for &compute in &options.computes {
                let id = format!("{model}-{}", compute_label(compute));
                let per_step = reached(exact, tokens_per_step);
                let steps = steps_for(compute, per_step, tokens_per_step, &id)?;
                let tokens = steps * tokens_per_step;
                let compute_reached = reached(exact, tokens);
                runs.push(Run {
                    id,
                    model: model.clone(),
                    cell: cell.name.to_owned(),
                    arch,
                    sparsity: s,
                    compute,
                    training_flops_per_token: exact.as_f64(),
                    training_flops_per_token_exact: exact.to_string(),
                    tokens,
                    steps,
                    global_batch: options.global_batch,
                    sequence_length,
                    compute_reached,
                    reached_over_compute: compute_reached / compute,
                    conventions: conventions
                        .iter()
                        .map(|(c, f)| convention_plan(*c, f, exact, compute, tokens_per_step))
                        .collect(),
                    directory: None,
                    config_sha256: None,
                });
            }
            models.push(PlannedModel {
                name: model,
                cell: cell.name.to_owned(),
                arch,
                spec: spec.clone(),
                training_flops_per_token: exact.as_f64(),
            });
        }
    }
    unique_names(&models)?;
    Ok(IsoflopPlan {
        name: name.map(str::to_owned),
        computes: options.computes.clone(),
        global_batch: options.global_batch,
        sequence_length,
        tokens_per_step,
        models,
        runs,
    })
}

/// Refuses two models of one name (their directories would collide).
fn unique_names(models: &[PlannedModel]) -> Result<()> {
    let mut names = std::collections::BTreeSet::new();
    for m in models {
        if !names.insert(m.name.as_str()) {
            return Err(Error::invalid(
                "grid",
                format!(
                    "two models would be named '{}': give the cells distinct labels",
                    m.name
                ),
            ));
        }
    }
    Ok(())
}

/// The plan of a matched grid: one cell per grid cell, named `SCALE-SPARSITY`
/// ([`crate::names::entry_name`]).
pub fn plan_grid(report: &super::GridReport, options: &PlanOptions) -> Result<IsoflopPlan> {
    let names: Vec<String> = (report.cells.iter())
        .map(|c| crate::names::entry_name(&[&c.scale, &c.sparsity_label]))
        .collect();
    let cells: Vec<PlanCell<'_>> = (report.cells.iter().zip(&names))
        .map(|(c, name)| PlanCell {
            name,
            baseline: &c.baseline,
            looped: &c.looped,
            sparsity: c.sparsity,
        })
        .collect();
    plan(report.name.as_deref(), &cells, options)
}

/// The plan of one match: one cell named after the budget (`match` without a name).
pub fn plan_match(
    report: &crate::search::MatchReport,
    options: &PlanOptions,
) -> Result<IsoflopPlan> {
    let name = crate::names::entry_name(&[report.name.as_deref().unwrap_or("match")]);
    let cell = PlanCell {
        name: &name,
        baseline: &report.baseline,
        looped: &report.looped,
        sparsity: report.sparsity,
    };
    plan(report.name.as_deref(), &[cell], options)
}

/// The launcher conventions' counts of `spec`, 6N first, each or why it cannot count it.
fn convention_counts(spec: &ModelSpec) -> Vec<(Convention, std::result::Result<Flops, String>)> {
    [
        Convention::SixN,
        Convention::SixNAttn,
        Convention::Megatron,
        Convention::Torchtitan,
    ]
    .into_iter()
    .map(|c| (c, training_flops(c, spec).map_err(|e| e.to_string())))
    .collect()
}

/// What a plan by `convention` (counting `count` per token) would have trained at
/// `compute`, and what that spends by the `exact` count.
fn convention_plan(
    convention: Convention,
    count: &std::result::Result<Flops, String>,
    exact: Flops,
    compute: f64,
    tokens_per_step: u64,
) -> ConventionPlan {
    let refused = |why: String| ConventionPlan {
        convention,
        training_flops_per_token: None,
        steps: None,
        compute_reached: None,
        reached_over_compute: None,
        refused: Some(why),
    };
    let f = match count {
        Ok(f) => *f,
        Err(why) => return refused(why.clone()),
    };
    let per_step = reached(f, tokens_per_step);
    match steps_for(compute, per_step, tokens_per_step, convention.as_str()) {
        Ok(steps) => {
            let spent = reached(exact, steps * tokens_per_step);
            ConventionPlan {
                convention,
                training_flops_per_token: Some(f.as_f64()),
                steps: Some(steps),
                compute_reached: Some(spent),
                reached_over_compute: Some(spent / compute),
                refused: None,
            }
        }
        Err(e) => refused(e.to_string()),
    }
}

/// `e`, said of model `model`.
fn at(model: &str, e: Error) -> Error {
    match e {
        Error::InvalidSpec { field, rule } => {
            Error::invalid(format!("model {model}: {field}"), rule)
        }
        other => other,
    }
}

/// The manifest: each run as one line of JSON, in the plan's order.
pub fn manifest_lines(runs: &[Run]) -> Result<String> {
    let mut out = String::new();
    for r in runs {
        let line = serde_json::to_string(r).map_err(|e| Error::Internal {
            message: format!("serialising run {}: {e}", r.id),
        })?;
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(layers: u64, hidden: u64) -> ModelSpec {
        ModelSpec::from_toml_str(&format!(
            "[model]\nlayers = {layers}\nhidden = {hidden}\nheads = 4\nkv_heads = 2\n\
             head_dim = 16\nvocab = 256\n[model.moe]\nexperts = 4\ntop_k = 4\nexpert_ffn = 64\n\
             [workload]\ncontext = 128\nmean_doc_len = 128\n"
        ))
        .unwrap()
    }

    /// Every run lands within half a step of its level, on whole steps, by the exact count
    /// recomputed here from the spec.
    #[test]
    fn runs_land_within_half_a_step() {
        let (b, l) = (spec(2, 64), spec(3, 64));
        let cells = [PlanCell {
            name: "a",
            baseline: &b,
            looped: &l,
            sparsity: SparsityPair {
                baseline: 0.0,
                looped: 0.0,
            },
        }];
        let options = PlanOptions {
            computes: vec![1e12, 3e12],
            global_batch: 4,
        };
        let p = plan(Some("t"), &cells, &options).unwrap();
        assert_eq!(p.runs.len(), 4);
        assert_eq!(p.tokens_per_step, 512);
        for r in &p.runs {
            let f = training_flops(
                Convention::Exact,
                if r.arch == Arch::Baseline { &b } else { &l },
            )
            .unwrap()
            .as_f64();
            assert_eq!(r.tokens, r.steps * 512);
            assert!((r.compute_reached - r.tokens as f64 * f).abs() <= 1e-6 * r.compute_reached);
            assert!((r.compute_reached - r.compute).abs() <= 0.5 * 512.0 * f * (1.0 + 1e-12));
        }
        assert_eq!(p.runs[0].id, "a-baseline-1e12");
        assert_eq!(p.runs[3].id, "a-looped-3e12");
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        let b = spec(2, 64);
        let cells = [PlanCell {
            name: "a",
            baseline: &b,
            looped: &b,
            sparsity: SparsityPair {
                baseline: 0.0,
                looped: 0.0,
            },
        }];
        let e = |computes: Vec<f64>, global_batch| {
            plan(
                None,
                &cells,
                &PlanOptions {
                    computes,
                    global_batch,
                },
            )
            .unwrap_err()
            .to_string()
        };
        assert!(e(vec![1e12, 1e12], 4).contains("1e12 is given twice"));
        assert!(e(vec![-1.0], 4).contains("positive"));
        assert!(e(vec![1e12], 0).contains("global_batch"));
        let tiny = e(vec![1e3], 4);
        assert!(
            tiny.contains("a-baseline-1e3") && tiny.contains("half an optimizer step"),
            "{tiny}"
        );
    }

    #[test]
    fn exact_counts_round_trip_through_their_text() {
        let f = Flops::ratio(7, 3).unwrap();
        assert_eq!(parse_flops(&f.to_string(), "x").unwrap(), f);
        assert_eq!(parse_flops("12", "x").unwrap(), Flops::from_int(12));
        assert!(parse_flops("1/0", "x").is_err());
        assert!(parse_flops("1.5", "x").is_err());
    }
}
