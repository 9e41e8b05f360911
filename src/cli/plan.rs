//! `smelt plan`: the run matrix of an IsoFLOP study; `smelt collect`: its runs' results as
//! the endpoints `smelt fit` reads.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use smelt::budget::{Budget, GridSpec};
use smelt::export::{self, ExportFormat};
use smelt::progress::Terminal;
use smelt::report::Format;
use smelt::search::{MatchReport, SearchOptions};
use smelt::study::{GridReport, PlanOptions};

use super::{LayoutArgs, WorkloadArgs, all_formats, budget_inputs, note, write_file};

/// A positive, finite number of FLOPs.
fn flops(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("'{text}' is not a positive number of FLOPs")),
    }
}

/// Plan an IsoFLOP study: every cell's Baseline and looped model at each compute level.
///
/// From a grid (or a budget: one cell), the compute levels C and the batch shape, one run per
/// model and level: tokens D = C / F with F the exact per-token training FLOPs (every layer
/// execution, a loop's second visits included), rounded to whole optimizer steps of
/// --global-batch sequences of the workload's context, so that the compute reached is
/// within half a step of C. Beside it, how far a plan by 6N (and by the launcher formulas:
/// 6N-attn, Megatron's, torchtitan's) would have landed from C, by the exact count.
///
/// With --export DIR, every model is written as a folder Transformers builds (a looped one as
/// a model directory loaded with trust_remote_code=True), with DIR/manifest.jsonl: one line
/// per run (its directory, tokens, steps, batch shape and its config.json's SHA-256), what a
/// launcher or a job array reads and `smelt collect` checks results against.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The grid file or budget file (TOML).
    input: PathBuf,
    /// Training compute levels C in FLOPs, comma-separated (e.g. 1e18,3e18,1e19).
    #[arg(long, value_delimiter = ',', required = true, value_parser = flops)]
    compute: Vec<f64>,
    /// Sequences per optimizer step (the global batch); each is the workload's context long
    /// (--context sets it).
    #[arg(long, value_name = "SEQUENCES",
          value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
    global_batch: u64,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
    #[command(flatten)]
    layout: LayoutArgs,
    /// Write the output to this file instead of standard output (never over an input).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Search lattices larger than the documented limit (docs/guide.md, "Budget files").
    #[arg(long)]
    force: bool,
    /// Also write every model of the plan into this folder (created if missing), one folder
    /// per model named CELL-ARCH (a looped model's directory, built with
    /// trust_remote_code=True; a model without a loop, its family's config.json), and the
    /// manifest DIR/manifest.jsonl. All or nothing; never over an input, nor over a file
    /// smelt did not write without --overwrite.
    #[arg(long, value_name = "DIR")]
    export: Option<PathBuf>,
    #[command(flatten)]
    hf: super::export::HfExportArgs,
}

/// What the input matched: a grid's cells or one budget's match.
enum Matched {
    Grid(Box<GridSpec>, Box<GridReport>),
    Budget(Box<Budget>, Box<MatchReport>),
}

/// Whether the TOML file at `path` is a budget (it has a Baseline) rather than a grid.
fn is_budget(path: &Path) -> anyhow::Result<bool> {
    let text =
        smelt::io::read_to_string(path).with_context(|| format!("reading '{}'", path.display()))?;
    Ok(smelt::budget::is_budget_text(
        &text,
        &format!("'{}'", path.display()),
    )?)
}

fn matched(args: &Args, progress: &Terminal) -> anyhow::Result<Matched> {
    let options = SearchOptions {
        force: args.force,
        ..SearchOptions::default()
    };
    if is_budget(&args.input)? {
        let budget = args.workload.budget(super::load_budget(&args.input)?)?;
        let report = smelt::search::match_budget_with(&budget, &options)?;
        return Ok(Matched::Budget(Box::new(budget), Box::new(report)));
    }
    let mut grid = GridSpec::load(&args.input)
        .with_context(|| format!("grid file '{}'", args.input.display()))?;
    for cell in &mut grid.cells {
        let what = format!(
            "grid file '{}', cell {}-{}",
            args.input.display(),
            cell.scale,
            cell.sparsity
        );
        super::budget_notes(&what, &cell.budget);
        cell.budget = args.workload.budget(cell.budget.clone())?;
    }
    let report = smelt::study::match_grid_with(&grid, &options, progress)?;
    Ok(Matched::Grid(Box::new(grid), Box::new(report)))
}

/// Runs `smelt plan`.
pub fn run(args: Args, progress: &Terminal) -> anyhow::Result<ExitCode> {
    let matched = matched(&args, progress)?;
    let options = PlanOptions {
        computes: args.compute.clone(),
        global_batch: args.global_batch,
    };
    let (mut plan, configs, mut inputs) = match &matched {
        Matched::Grid(grid, r) => (
            smelt::study::plan_grid(r, &options)?,
            grid.cells
                .iter()
                .map(|c| c.budget.baseline_config())
                .collect(),
            (grid.cells.iter())
                .flat_map(|c| budget_inputs(&args.input, &c.budget))
                .collect::<Vec<_>>(),
        ),
        Matched::Budget(b, r) => (
            smelt::study::plan_match(r, &options)?,
            vec![b.baseline_config()],
            budget_inputs(&args.input, b),
        ),
    };
    inputs.extend(args.workload.inputs());
    if let Some(dir) = &args.export {
        let options = args.hf.options(ExportFormat::Hf);
        let written = export::write_plan(&mut plan, &configs, &options, dir, &inputs)
            .with_context(|| format!("--export '{}'", dir.display()))?;
        let looped = written.iter().filter(|w| w.looped).count();
        note(&format!(
            "smelt: wrote {} models for Transformers ({looped} looped: model directories, \
             built with trust_remote_code=True) and the manifest of {} runs ({}) into '{}'",
            written.len(),
            plan.runs.len(),
            export::MANIFEST,
            dir.display()
        ));
    }
    let text = smelt::report::render_with(&plan, args.format, args.layout.layout())?;
    match &args.output {
        Some(path) => write_file(path, &text, "the plan", &inputs)?,
        None => super::emit(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Write the endpoints `smelt fit` reads from a plan's manifest and its runs' results.
///
/// RESULTS is a CSV (header with id, tokens, loss and optionally config_sha256) or JSON lines
/// (objects with those keys): per run, its id in the manifest, the tokens it trained and its
/// final validation loss. Each run is checked against the plan: refused, naming the run, are a
/// result for a run the manifest does not have, a run given twice, a run whose tokens differ
/// from the plan's, a run whose config_sha256 differs from its model's, and (without
/// --partial) a run of the plan without a result; the cells lacking runs are named.
///
/// The endpoints CSV has run, arch, cell, F (exact per-token training FLOPs), S, D (tokens),
/// C (the compute the run spent by the exact count), compute (the plan's level) and loss:
/// `smelt fit ENDPOINTS --group arch`, `smelt gain ENDPOINTS --reference baseline --target
/// looped`.
#[derive(Debug, clap::Args)]
pub struct CollectArgs {
    /// The plan's manifest (DIR/manifest.jsonl of `smelt plan --export DIR`, or the JSON of
    /// `smelt plan --format json`).
    manifest: PathBuf,
    /// The runs' results (CSV or JSON lines).
    results: PathBuf,
    /// Write the endpoints CSV to this file instead of standard output (never over an input).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write the endpoints of the runs that have results, leaving out (and naming) those that
    /// have none, instead of refusing.
    #[arg(long)]
    partial: bool,
}

/// Runs `smelt collect`.
pub fn collect(args: CollectArgs) -> anyhow::Result<ExitCode> {
    let read = |p: &Path| {
        smelt::io::read_to_string(p).with_context(|| format!("reading '{}'", p.display()))
    };
    let source = |p: &Path| format!("'{}'", p.display());
    let runs = smelt::study::parse_manifest(&read(&args.manifest)?, &source(&args.manifest))?;
    let results = smelt::study::parse_results(&read(&args.results)?, &source(&args.results))?;
    let collected = smelt::study::collect(&runs, &results, args.partial)?;
    if !collected.cells_lacking.is_empty() {
        note(&format!(
            "smelt: warning: {} run(s) without a result left out; cells lacking runs: {}",
            collected.missing.len(),
            collected.cells_lacking.join("; ")
        ));
    }
    let csv = collected.to_csv()?;
    match &args.output {
        Some(path) => {
            let inputs = [args.manifest.clone(), args.results.clone()];
            write_file(path, &csv, "the endpoints", &inputs)?
        }
        None => super::emit(&csv)?,
    }
    Ok(ExitCode::SUCCESS)
}
