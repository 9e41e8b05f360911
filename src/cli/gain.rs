//! `smelt gain`: the compute-efficiency gain of one architecture over another.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use smelt::fit::{self, BootstrapOptions, FitOptions, GainTable};
use smelt::report;

use super::{OutputFormat, Starts, emit};

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
    /// Cell-bootstrap resamples (0: none).
    #[arg(long, value_name = "N", default_value_t = 0)]
    bootstrap: usize,
    /// Bootstrap seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Start grid: `standard` (the replication's, 4,500 starts for Chinchilla's form and
    /// 13,500 for the surface) or `small` (32 starts, for a quick look).
    #[arg(long, value_enum, default_value_t = Starts::Standard)]
    starts: Starts,
    /// Output format (table or json; toml also works).
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Also draw the two fitted frontiers as an SVG into this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

fn pct(x: Option<f64>) -> String {
    x.map_or("unreachable".to_owned(), |g| format!("{:.1}%", g * 100.0))
}

/// The gain table, like the paper's.
pub fn gain_table(t: &GainTable) -> String {
    let mut out = String::new();
    let gi = |i: &Option<fit::Interval>| {
        i.map_or(String::new(), |i| format!(" (95% {:.3}–{:.3})", i.lo, i.hi))
    };
    out.push_str(&format!(
        "gamma: {} {:.3}{}, {} {:.3}{}\n",
        t.reference.group,
        t.reference.gamma,
        gi(&t.gamma_reference_interval),
        t.target.group,
        t.target.gamma,
        gi(&t.gamma_target_interval)
    ));
    if let Some(b) = t.bootstrap {
        out.push_str(&format!(
            "bootstrap: {} resamples of {} cells, seed {}\n",
            b.resamples, t.cells, b.seed
        ));
    }
    let mut tab = comfy_table::Table::new();
    tab.load_style(comfy_table::presets::UTF8_FULL_CONDENSED)
        .force_no_tty();
    tab.set_header(vec![
        "compute C".to_owned(),
        "S".to_owned(),
        "CE gain".to_owned(),
        "95% interval".to_owned(),
        format!("L* {}", t.reference.group),
        format!("L* {}", t.target.group),
        format!("TPP {}", t.reference.group),
        format!("TPP {}", t.target.group),
    ]);
    for r in &t.rows {
        tab.add_row(vec![
            format!("{:.0e}", r.compute),
            format!("{:.2}", r.sparsity),
            pct(r.gain),
            r.gain_interval.map_or("-".to_owned(), |i| {
                format!("{:.1}% – {:.1}%", i.lo * 100.0, i.hi * 100.0)
            }),
            format!("{:.4}", r.loss_reference),
            format!("{:.4}", r.loss_target),
            format!("{:.1}", r.tpp_reference),
            format!("{:.1}", r.tpp_target),
        ]);
    }
    out.push_str(&format!("{tab}\n"));
    out
}

/// Runs `smelt gain`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let groups = fit::data::load(&args.endpoints, Some(&args.group))
        .with_context(|| format!("endpoints '{}'", args.endpoints.display()))?;
    let get = |name: &str, flag: &str| {
        groups.get(name).with_context(|| {
            format!(
                "--{flag} '{name}': no such value in column '{}' (found: {})",
                args.group,
                groups.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })
    };
    let (r, t) = (
        get(&args.reference, "reference")?,
        get(&args.target, "target")?,
    );
    if args.reference == args.target {
        bail!("--reference and --target name the same architecture");
    }
    let mut opts = FitOptions::standard(fit::Form::Surface);
    opts.starts = args.starts.grid(fit::Form::Surface);
    let boot = (args.bootstrap > 0).then_some(BootstrapOptions {
        resamples: args.bootstrap,
        seed: args.seed,
    });
    let table = fit::gain_table(
        (&args.reference, r),
        (&args.target, t),
        &args.compute,
        &args.sparsity,
        &opts,
        boot,
    )?;
    let text = match args.format {
        OutputFormat::Table => gain_table(&table),
        OutputFormat::Json => report::to_json(&table)?,
        OutputFormat::Toml => report::to_toml(&table)?,
    };
    if let Some(path) = &args.plot {
        let svg = smelt::report::plot::frontiers(&table)?;
        std::fs::write(path, svg).with_context(|| format!("writing '{}'", path.display()))?;
    }
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
