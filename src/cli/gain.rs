//! `smelt gain`: the compute-efficiency gain of one architecture over another.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use smelt::fit::wall_clock::{TimeRatios, wall_clock};
use smelt::fit::{self, GainOptions, Search, Starts};
use smelt::progress::Terminal;
use smelt::report::{Format, WithWallClock};

use super::{LayoutArgs, all_formats, emit, named, write_file};

/// Compute-efficiency gain of a target architecture over a reference.
///
/// On the fitted compute-optimal frontiers: 1 - C / C_ref, with C_ref the compute the
/// reference needs to reach the target's frontier loss at compute C.
///
/// Both surfaces are fitted from the endpoints (see `smelt fit`); `--bootstrap N` adds 95%
/// intervals from N resamples of the grid cells (the `cell` column), refitting both.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Endpoints CSV with F, S, D, loss, a cell column and the group column.
    endpoints: PathBuf,
    /// The column naming the architecture.
    #[arg(long, value_name = "COLUMN", default_value = "arch")]
    group: String,
    /// The reference architecture (a value of the group column).
    #[arg(long)]
    reference: String,
    /// The target architecture.
    #[arg(long)]
    target: String,
    /// Training compute budgets C = F·D, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1e20,1e21")]
    compute: Vec<f64>,
    /// Sparsities, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.85,0.95,0.97")]
    sparsity: Vec<f64>,
    /// Cell-bootstrap resamples (0: none; at most 1,000,000).
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=fit::MAX_RESAMPLES as u64))]
    bootstrap: u64,
    /// Bootstrap seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Start grid: `standard` (the replication's, 13,500 starts for the surface) or `small`
    /// (32 starts, for a quick look).
    #[arg(long, default_value = "standard", value_parser = named::<Starts>())]
    starts: Starts,
    /// How the grid is searched: `screened` or `exhaustive` (see `smelt fit --help`).
    #[arg(long, default_value = "screened", value_parser = named::<Search>())]
    search: Search,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = all_formats())]
    format: Format,
    #[command(flatten)]
    layout: LayoutArgs,
    /// Also draw the two fitted frontiers as an SVG into this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Also report each row's wall-clock gain, 1 - (1 - CE gain) x r, with r the target's
    /// seconds per training FLOP over the reference's: a number, or the JSON of `smelt grid
    /// GRID --predict CARD --global-batch N --format json`, whose cells give their
    /// step-time ratio over their FLOP ratio (each row takes the cell nearest the
    /// reference's compute-optimal model in ln F and ln(1 - S)).
    #[arg(long, value_name = "RATIO|GRID.json")]
    time_ratio: Option<String>,
}

/// `--time-ratio`: a number, or a grid JSON file.
fn time_ratios(arg: &str) -> anyhow::Result<TimeRatios> {
    if let Ok(x) = arg.trim().parse::<f64>() {
        return TimeRatios::given(x).context("--time-ratio");
    }
    let text = std::fs::read_to_string(arg).with_context(|| {
        format!("--time-ratio: '{arg}' is neither a number nor a readable file")
    })?;
    TimeRatios::from_grid_json(&text, arg).context("--time-ratio")
}

/// Runs `smelt gain`.
pub fn run(args: Args, progress: &Terminal) -> anyhow::Result<ExitCode> {
    // Read before the fits, so that a bad file fails at once.
    let ratios = args.time_ratio.as_deref().map(time_ratios).transpose()?;
    let groups = fit::data::load(&args.endpoints, Some(&args.group))
        .with_context(|| format!("endpoints '{}'", args.endpoints.display()))?;
    let get = |name: &str, flag: &str| {
        fit::data::group(&groups, &args.group, name).with_context(|| format!("--{flag} '{name}'"))
    };
    let reference = (&*args.reference, get(&args.reference, "reference")?);
    let target = (&*args.target, get(&args.target, "target")?);
    let opts = GainOptions {
        computes: args.compute,
        sparsities: args.sparsity,
        ..GainOptions::standard()
    };
    let mut opts = opts
        .with_starts(args.starts)
        .with_bootstrap(args.bootstrap as usize, args.seed);
    opts.fit.search = args.search;
    let table = fit::gain_table_with(reference, target, &opts, progress)?;
    let text = match ratios {
        Some(r) => {
            let wall = wall_clock(&table, r);
            let with = WithWallClock {
                table: &table,
                wall_clock: &wall,
            };
            smelt::report::render_with(&with, args.format, args.layout.layout())?
        }
        None => smelt::report::render_with(&table, args.format, args.layout.layout())?,
    };
    if let Some(path) = &args.plot {
        let svg = smelt::report::plot::frontiers(&table)?;
        let mut inputs = vec![args.endpoints.clone()];
        // A --time-ratio that is a file is an input too (a number is not).
        if let Some(t) = args
            .time_ratio
            .as_deref()
            .filter(|t| t.trim().parse::<f64>().is_err())
        {
            inputs.push(PathBuf::from(t));
        }
        write_file(path, &svg, "the frontiers", &inputs)?;
    }
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
