//! The IsoFLOP study's requests: `smelt plan` and `smelt collect`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{BudgetSource, Request, WorkloadRequest};
use crate::error::{Error, Result};
use crate::export::{ExportFormat, ExportOptions};
use crate::io::Overwrite;
use crate::progress::Progress;
use crate::search::SearchOptions;
use crate::study::{IsoflopPlan, PlanOptions};

/// `smelt plan`: the run matrix of an IsoFLOP study from a grid or a budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The grid, or a budget (a file or structure with a `baseline`).
    pub source: BudgetSource,
    /// Where relative paths of an inline source are taken from.
    #[serde(default)]
    pub base_dir: Option<PathBuf>,
    /// The compute levels, FLOPs.
    pub compute: Vec<f64>,
    /// Sequences per optimizer step.
    pub global_batch: u64,
    /// Search lattices over the size limit.
    #[serde(default)]
    pub force: bool,
    /// Workload changes, for every model.
    #[serde(default)]
    pub workload: WorkloadRequest,
    /// A folder to write every run's model and the manifest into.
    #[serde(default)]
    pub export: Option<PathBuf>,
    /// The Hugging Face family of the export.
    #[serde(default)]
    pub family: Option<crate::hf::Family>,
    /// The vocabulary written when a Baseline has none.
    #[serde(default)]
    pub vocab: Option<u64>,
    /// Replace files smelt did not write.
    #[serde(default)]
    pub overwrite: bool,
}

/// What `plan` returns: the plan and, with an export, its manifest's path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanReply {
    /// The plan.
    #[serde(flatten)]
    pub plan: IsoflopPlan,
    /// The manifest written, with an export (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest: Option<PathBuf>,
}

impl PlanRequest {
    fn is_budget(&self) -> Result<bool> {
        match &self.source {
            BudgetSource::Path(p) => crate::budget::is_budget_text(
                &crate::io::read_to_string(p)?,
                &format!("'{}'", p.display()),
            ),
            BudgetSource::Inline(v) => Ok(v.get("baseline").is_some()),
        }
    }
}

impl Request for PlanRequest {
    type Output = PlanReply;

    fn run(&self, progress: &dyn Progress) -> Result<PlanReply> {
        if self.export.is_none()
            && (self.family.is_some() || self.vocab.is_some() || self.overwrite)
        {
            return Err(Error::invalid(
                "export",
                "family, vocab and overwrite apply to an export; give export",
            ));
        }
        let options = PlanOptions {
            computes: self.compute.clone(),
            global_batch: self.global_batch,
        };
        let search = SearchOptions {
            force: self.force,
            ..SearchOptions::default()
        };
        let changes = self.workload.changes()?;
        let base = self.base_dir.as_deref();
        let (mut plan, budgets) = match self.is_budget()? {
            true => {
                let b = self.source.budget(base, &changes)?;
                let r = crate::search::match_budget_with(&b, &search)?;
                (crate::study::plan_match(&r, &options)?, vec![b])
            }
            false => {
                let g = self.source.grid(base, &changes)?;
                let r = crate::study::match_grid_with(&g, &search, progress)?;
                let budgets = g.cells.into_iter().map(|c| c.budget).collect();
                (crate::study::plan_grid(&r, &options)?, budgets)
            }
        };
        let mut manifest = None;
        if let Some(dir) = &self.export {
            let export = ExportOptions {
                format: ExportFormat::Hf,
                family: self.family,
                vocab: self.vocab,
                overwrite: match self.overwrite {
                    true => Overwrite::Any,
                    false => Overwrite::Own,
                },
            };
            let configs: Vec<Option<&Value>> =
                budgets.iter().map(|b| b.baseline_config()).collect();
            let mut inputs: Vec<PathBuf> = self.source.input().into_iter().collect();
            inputs.extend(budgets.iter().flat_map(|b| b.inputs()));
            inputs.extend(self.workload.input());
            crate::export::write_plan(&mut plan, &configs, &export, dir, &inputs)?;
            manifest = Some(dir.join(crate::export::MANIFEST));
        }
        Ok(PlanReply { plan, manifest })
    }
}

/// `smelt collect`: the endpoints `fit` reads, from a plan's manifest and its runs' results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectRequest {
    /// The manifest (`manifest.jsonl`, or the plan's JSON).
    pub manifest: PathBuf,
    /// The runs' results (CSV or JSON lines).
    pub results: PathBuf,
    /// Accept a plan with runs still missing.
    #[serde(default)]
    pub partial: bool,
    /// Also write the endpoints CSV there.
    #[serde(default)]
    pub output: Option<PathBuf>,
}

/// What `collect` returns: the endpoints, their CSV and where it was written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectReply {
    /// The endpoints and the cells lacking runs.
    #[serde(flatten)]
    pub collected: crate::study::Collected,
    /// The CSV `fit` reads.
    pub csv: String,
    /// Where it was written.
    pub path: Option<PathBuf>,
}

impl Request for CollectRequest {
    type Output = CollectReply;

    fn run(&self, _progress: &dyn Progress) -> Result<CollectReply> {
        let source = |p: &Path| format!("'{}'", p.display());
        let runs = crate::study::parse_manifest(
            &crate::io::read_to_string(&self.manifest)?,
            &source(&self.manifest),
        )?;
        let given = crate::study::parse_results(
            &crate::io::read_to_string(&self.results)?,
            &source(&self.results),
        )?;
        let collected = crate::study::collect(&runs, &given, self.partial)?;
        let csv = collected.to_csv()?;
        if let Some(path) = &self.output {
            let inputs = [self.manifest.clone(), self.results.clone()];
            crate::io::write_output(path, csv.as_bytes(), &inputs)?;
        }
        Ok(CollectReply {
            collected,
            csv,
            path: self.output.clone(),
        })
    }
}
