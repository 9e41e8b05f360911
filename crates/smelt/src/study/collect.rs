//! The endpoints of a study's runs ([`collect`]): each run of the plan's manifest matched
//! with its result (run id, tokens trained, final validation loss), checked against the
//! plan, and written as the endpoints CSV `smelt fit` and `smelt gain` read
//! ([`crate::fit::data`]: `F`, `S`, `D`, `loss`, `cell` and the group column `arch`).
//!
//! A run's compute is what it spent by the exact count: its tokens times the exact per-token
//! training FLOPs the manifest carries (as a fraction, so the product is exact before its
//! one rounding), the same figure the plan reached.
//!
//! Refused, each naming the run: a result for a run the manifest does not have, a run given
//! twice, a run whose tokens differ from the plan's, one whose model (its `config.json`'s
//! SHA-256, when the result gives it) differs, a run of the manifest without a result
//! (unless partial results are allowed), and a run whose model's sparsity `S` is outside
//! the `[0, 1)` the fit takes. The cells lacking runs are said either way.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::isoflop::{Arch, Run, parse_flops, reached};
use crate::error::{Error, Result};

/// One run's result, as a results file gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// The run's id in the manifest.
    pub id: String,
    /// Tokens trained.
    pub tokens: u64,
    /// Final validation loss, nats.
    pub loss: f64,
    /// SHA-256 of the `config.json` the run trained, when given.
    pub config_sha256: Option<String>,
    /// Where it was read (`results.csv: line 3`).
    pub at: String,
}

/// One endpoint: a run of the plan and its result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectedRun {
    /// The run's id.
    pub run: String,
    /// Which model of the cell.
    pub arch: Arch,
    /// The grid cell.
    pub cell: String,
    /// Exact per-token training FLOPs, nearest float.
    #[serde(rename = "F")]
    pub f: f64,
    /// Compute-equivalent sparsity.
    #[serde(rename = "S")]
    pub s: f64,
    /// Tokens trained.
    #[serde(rename = "D")]
    pub d: u64,
    /// The compute the run spent, by the exact count.
    #[serde(rename = "C")]
    pub c: f64,
    /// The plan's compute level.
    pub compute: f64,
    /// Final validation loss.
    pub loss: f64,
}

/// What [`collect`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Collected {
    /// The endpoints, in the manifest's order.
    pub endpoints: Vec<CollectedRun>,
    /// The runs of the manifest without a result (only with partial results allowed).
    pub missing: Vec<String>,
    /// The cells (and architectures) lacking runs, each with the compute levels missing:
    /// `100m-s0 looped: 1e18, 3e18`.
    pub cells_lacking: Vec<String>,
}

impl Collected {
    /// The endpoints CSV `smelt fit` reads: `run,arch,cell,F,S,D,C,compute,loss`.
    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let io = |e: csv::Error| Error::Internal {
            message: format!("writing the endpoints CSV: {e}"),
        };
        w.write_record(["run", "arch", "cell", "F", "S", "D", "C", "compute", "loss"])
            .map_err(io)?;
        for e in &self.endpoints {
            w.write_record([
                e.run.clone(),
                e.arch.as_str().to_owned(),
                e.cell.clone(),
                e.f.to_string(),
                e.s.to_string(),
                e.d.to_string(),
                e.c.to_string(),
                e.compute.to_string(),
                e.loss.to_string(),
            ])
            .map_err(io)?;
        }
        let bytes = w.into_inner().map_err(|e| Error::Internal {
            message: format!("writing the endpoints CSV: {e}"),
        })?;
        String::from_utf8(bytes).map_err(|e| Error::Internal {
            message: format!("writing the endpoints CSV: {e}"),
        })
    }
}

/// The runs of a manifest: JSON lines, one run each (what `smelt plan --export` writes), or
/// a plan's JSON (`smelt plan --format json`, its `runs`). `source` names it in errors.
pub fn parse_manifest(text: &str, source: &str) -> Result<Vec<Run>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let runs: Vec<Run> = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(o)) if o.contains_key("runs") => {
            serde_json::from_value(o["runs"].clone())
                .map_err(|e| Error::parse(format!("{source}: runs: {e}")))?
        }
        _ => {
            let mut runs = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let run: Run = serde_json::from_str(line)
                    .map_err(|e| Error::parse(format!("{source}: line {}: {e}", i + 1)))?;
                runs.push(run);
            }
            runs
        }
    };
    if runs.is_empty() {
        return Err(Error::invalid(source, "has no runs"));
    }
    let mut seen = BTreeSet::new();
    for r in &runs {
        if !seen.insert(r.id.as_str()) {
            return Err(Error::invalid(
                source,
                format!("run '{}' is listed twice", r.id),
            ));
        }
        let planned = r
            .steps
            .checked_mul(r.global_batch)
            .and_then(|x| x.checked_mul(r.sequence_length));
        if planned != Some(r.tokens) {
            return Err(Error::invalid(
                format!("{source}: run '{}'", r.id),
                format!(
                    "tokens {} are not steps × global_batch × sequence_length ({} × {} × {}): \
                     the manifest was edited; plan again",
                    r.tokens, r.steps, r.global_batch, r.sequence_length
                ),
            ));
        }
        parse_flops(
            &r.training_flops_per_token_exact,
            &format!("{source}: run '{}': training_flops_per_token_exact", r.id),
        )?;
    }
    Ok(runs)
}

/// The results of runs: JSON lines (each an object with `id`, `tokens`, `loss` and
/// optionally `config_sha256`) or CSV with those columns (any order, others ignored).
/// `source` names it in errors.
pub fn parse_results(text: &str, source: &str) -> Result<Vec<RunResult>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let results = match text.trim_start().starts_with('{') {
        true => json_lines(text, source)?,
        false => csv_results(text, source)?,
    };
    if results.is_empty() {
        return Err(Error::invalid(source, "has no results"));
    }
    Ok(results)
}

fn check_loss(loss: f64, at: &str) -> Result<f64> {
    match loss.is_finite() && loss > 0.0 {
        true => Ok(loss),
        false => Err(Error::invalid(
            format!("{at}: loss"),
            format!("must be a positive number of nats (got {loss})"),
        )),
    }
}

fn json_lines(text: &str, source: &str) -> Result<Vec<RunResult>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{source}: line {}", i + 1);
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| Error::parse(format!("{at}: {e}")))?;
        let field = |k: &str| {
            v.get(k).ok_or_else(|| {
                Error::invalid(
                    &at,
                    format!("has no '{k}' (each line needs id, tokens and loss)"),
                )
            })
        };
        let id = field("id")?
            .as_str()
            .ok_or_else(|| Error::invalid(format!("{at}: id"), "must be a string"))?
            .to_owned();
        let tokens = field("tokens")?.as_u64().ok_or_else(|| {
            Error::invalid(format!("{at}: tokens"), "must be a whole number of tokens")
        })?;
        let loss = field("loss")?
            .as_f64()
            .ok_or_else(|| Error::invalid(format!("{at}: loss"), "must be a number"))?;
        let sha = match v.get("config_sha256") {
            None | Some(serde_json::Value::Null) => None,
            Some(s) => Some(
                s.as_str()
                    .ok_or_else(|| {
                        Error::invalid(format!("{at}: config_sha256"), "must be a string")
                    })?
                    .to_owned(),
            ),
        };
        out.push(RunResult {
            id,
            tokens,
            loss: check_loss(loss, &at)?,
            config_sha256: sha,
            at,
        });
    }
    Ok(out)
}

fn csv_results(text: &str, source: &str) -> Result<Vec<RunResult>> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| Error::parse(format!("{source}: {e}")))?
        .clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let need = |name: &str| {
        col(name).ok_or_else(|| {
            Error::invalid(
                format!("{source}: header"),
                format!(
                    "has no column '{name}'; the header needs id, tokens and loss (found: {})",
                    headers.iter().collect::<Vec<_>>().join(", ")
                ),
            )
        })
    };
    let (id, tokens, loss) = (need("id")?, need("tokens")?, need("loss")?);
    let sha = col("config_sha256");
    let mut out = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let at = format!("{source}: line {}", i + 2);
        let record = record.map_err(|e| Error::parse(format!("{at}: {e}")))?;
        let get = |c: usize| record.get(c).unwrap_or("");
        let t = get(tokens).parse::<u64>().map_err(|_| {
            Error::invalid(
                format!("{at}: tokens"),
                format!("'{}' is not a whole number of tokens", get(tokens)),
            )
        })?;
        let l = get(loss).parse::<f64>().map_err(|_| {
            Error::invalid(
                format!("{at}: loss"),
                format!("'{}' is not a number", get(loss)),
            )
        })?;
        out.push(RunResult {
            id: get(id).to_owned(),
            tokens: t,
            loss: check_loss(l, &at)?,
            config_sha256: sha.map(get).filter(|s| !s.is_empty()).map(str::to_owned),
            at,
        });
    }
    Ok(out)
}

/// The endpoints of `runs` (the manifest) from `results`, checked against the plan; with
/// `partial`, runs without a result are left out (and listed) instead of refused.
pub fn collect(runs: &[Run], results: &[RunResult], partial: bool) -> Result<Collected> {
    let planned: BTreeMap<&str, &Run> = runs.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut given: BTreeMap<&str, &RunResult> = BTreeMap::new();
    for r in results {
        let Some(run) = planned.get(r.id.as_str()) else {
            return Err(Error::invalid(
                &r.at,
                format!(
                    "run '{}' is not in the plan: an unknown run (the manifest's runs are {})",
                    r.id,
                    examples(runs.iter().map(|r| r.id.as_str()))
                ),
            ));
        };
        if let Some(first) = given.insert(r.id.as_str(), r) {
            return Err(Error::invalid(
                &r.at,
                format!("run '{}' is given twice (also at {})", r.id, first.at),
            ));
        }
        if r.tokens != run.tokens {
            return Err(Error::invalid(
                &r.at,
                format!(
                    "run '{}' trained {} tokens; the plan says {} ({} steps of {} sequences of \
                     {} tokens): its compute would not be the plan's",
                    r.id, r.tokens, run.tokens, run.steps, run.global_batch, run.sequence_length
                ),
            ));
        }
        if let (Some(got), Some(want)) = (&r.config_sha256, &run.config_sha256)
            && !got.eq_ignore_ascii_case(want)
        {
            return Err(Error::invalid(
                &r.at,
                format!(
                    "run '{}' trained a model whose config.json has SHA-256 {got}; the plan's \
                     model {} has {want}: not the model planned",
                    r.id, run.model
                ),
            ));
        }
    }
    let missing: Vec<&Run> = runs
        .iter()
        .filter(|r| !given.contains_key(r.id.as_str()))
        .collect();
    let cells_lacking = lacking(&missing);
    if !missing.is_empty() && !partial {
        return Err(Error::invalid(
            "results",
            format!(
                "{} run(s) of the plan have no result: {}; cells lacking runs: {}",
                missing.len(),
                examples(missing.iter().map(|r| r.id.as_str())),
                cells_lacking.join("; ")
            ),
        ));
    }
    let mut endpoints = Vec::new();
    for run in runs {
        let Some(r) = given.get(run.id.as_str()) else {
            continue;
        };
        if !(run.sparsity.is_finite() && (0.0..1.0).contains(&run.sparsity)) {
            return Err(Error::invalid(
                format!("run '{}'", run.id),
                format!(
                    "its model {} has compute-equivalent sparsity S = {}, outside the [0, 1) \
                     smelt fit takes (a looped model with more FLOPs per parameter than its \
                     Baseline's control); match it on a lattice that gives it more experts",
                    run.model, run.sparsity
                ),
            ));
        }
        let exact = parse_flops(&run.training_flops_per_token_exact, &run.id)?;
        endpoints.push(CollectedRun {
            run: run.id.clone(),
            arch: run.arch,
            cell: run.cell.clone(),
            f: exact.as_f64(),
            s: run.sparsity,
            d: r.tokens,
            c: reached(exact, r.tokens),
            compute: run.compute,
            loss: r.loss,
        });
    }
    Ok(Collected {
        endpoints,
        missing: missing.iter().map(|r| r.id.clone()).collect(),
        cells_lacking,
    })
}

/// `cell arch: C1, C2` per cell and architecture with missing runs, in the plan's order.
fn lacking(missing: &[&Run]) -> Vec<String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for r in missing {
        let key = format!("{} {}", r.cell, r.arch.as_str());
        let level = super::isoflop::compute_label(r.compute);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, levels)) => levels.push(level),
            None => out.push((key, vec![level])),
        }
    }
    out.into_iter()
        .map(|(k, levels)| format!("{k} at {}", levels.join(", ")))
        .collect()
}

/// Up to eight names, then how many more.
fn examples<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    let shown = all.iter().take(8).copied().collect::<Vec<_>>().join(", ");
    match all.len() > 8 {
        true => format!("{shown} and {} more", all.len() - 8),
        false => shown,
    }
}
