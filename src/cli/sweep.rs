//! `smelt sweep`: the paper's ablations, every candidate re-matched to the same Baseline.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use smelt::report::Format;
use smelt::search::{self, Knob};

use super::{all_formats, emit_report, load_budget, tolerance_exit};

/// Vary one recipe knob (loop span, depth or repeats) and re-match every candidate.
///
/// Values are a list and/or ranges: `0..=12`, `0..12`, `8,10,12,14,16`, `1,2..=4`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("knob").required(true).args(["span", "depth", "repeats"])))]
pub struct Args {
    /// The budget file.
    budget: PathBuf,
    /// Looped layers (0: no loop), placed as the recipe says.
    #[arg(long, value_name = "VALUES")]
    span: Option<String>,
    /// Physical layers of the looped model (the recipe's span and placement apply).
    #[arg(long, value_name = "VALUES")]
    depth: Option<String>,
    /// Executions of the looped block.
    #[arg(long, value_name = "VALUES")]
    repeats: Option<String>,
    /// Output format (one row per value; no summary rows).
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
}

/// Runs `smelt sweep`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let budget = load_budget(&args.budget)?;
    let (knob, text) = match (&args.span, &args.depth, &args.repeats) {
        (Some(t), None, None) => (Knob::Span, t),
        (None, Some(t), None) => (Knob::Depth, t),
        (None, None, Some(t)) => (Knob::Repeats, t),
        _ => bail!("give exactly one of --span, --depth, --repeats"),
    };
    let values = search::parse_values(&format!("--{}", knob.as_str()), text)?;
    let r = search::sweep(&budget, knob, &values)?;
    emit_report(&r, args.format)?;
    Ok(tolerance_exit(
        r.rows.iter().all(|row| row.within_tolerance),
    ))
}
