//! `smelt sweep`: the paper's ablations, every candidate re-matched to the same Baseline.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::TypedValueParser;
use smelt::progress::Terminal;
use smelt::report::Format;
use smelt::search::SearchOptions;
use smelt::study::{self, Knob};

use super::export::ExportArgs;
use super::{LayoutArgs, all_formats, budget_inputs, emit_report, load_budget, tolerance_exit};

/// The values of a knob (a newtype, so that clap takes the list as one value).
#[derive(Debug, Clone)]
struct Values(Vec<u64>);

/// A list of values and ranges, checked as the command line is parsed (a malformed one is
/// a usage error).
fn values() -> impl TypedValueParser<Value = Values> {
    clap::builder::NonEmptyStringValueParser::new()
        .try_map(|text| study::parse_values("values", &text).map(Values))
}

/// Vary one recipe knob (loop span, depth or repeats) and re-match every candidate.
///
/// Values are a list and/or ranges: `0..=12`, `0..12`, `8,10,12,14,16`, `1,2..=4` (at most
/// 1024 values).
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("knob").required(true).args(["span", "depth", "repeats"])))]
pub struct Args {
    /// The budget file.
    budget: PathBuf,
    /// Looped layers (0: no loop), placed as the recipe says.
    #[arg(long, value_name = "VALUES", value_parser = values())]
    span: Option<Values>,
    /// Physical layers of the looped model (the recipe's span and placement apply).
    #[arg(long, value_name = "VALUES", value_parser = values())]
    depth: Option<Values>,
    /// Executions of the looped block.
    #[arg(long, value_name = "VALUES", value_parser = values())]
    repeats: Option<Values>,
    /// Search lattices larger than the documented limit (docs/guide.md, "Budget files").
    #[arg(long)]
    force: bool,
    /// Output format (one row per value; no summary rows).
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
    #[command(flatten)]
    layout: LayoutArgs,
    #[command(flatten)]
    export: ExportArgs,
}

/// Runs `smelt sweep`.
pub fn run(args: Args, progress: &Terminal) -> anyhow::Result<ExitCode> {
    let budget = load_budget(&args.budget)?;
    let (knob, values) = match (args.span, args.depth, args.repeats) {
        (Some(Values(v)), None, None) => (Knob::Span, v),
        (None, Some(Values(v)), None) => (Knob::Depth, v),
        (None, None, Some(Values(v))) => (Knob::Repeats, v),
        _ => anyhow::bail!("give exactly one of --span, --depth, --repeats"),
    };
    let options = SearchOptions {
        force: args.force,
        ..SearchOptions::default()
    };
    let inputs = budget_inputs(&args.budget, &budget);
    args.export.refuse_inputs(&inputs)?;
    let r = study::sweep_with(&budget, knob, &values, &options, progress)?;
    let items = smelt::export::items_of_sweep(&r, Some(&budget));
    args.export.write(&items, &inputs)?;
    emit_report(&r, args.format, &args.layout)?;
    Ok(tolerance_exit(&r))
}
