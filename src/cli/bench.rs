//! `smelt bench`: the GEMMs of one layer execution, executed and timed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::ValueEnum;
use smelt::ModelSpec;
use smelt::bench::{self, Backend, BenchOptions, BenchReport, Routing};
use smelt::budget::Budget;
use smelt::report::{self, group_digits};

use super::emit;

/// Execute the GEMMs of one training step of one layer and time them per component.
///
/// Checks that the executed arithmetic equals the cost model's count exactly, and shows
/// what FLOPs hide: with --against (or --budget) the measured time ratio of the two models
/// next to their FLOP ratio. The CPU backend runs f32 on one thread; the CUDA backend
/// (build with --features cuda) runs bf16 cuBLAS.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["model", "budget"])))]
pub struct Args {
    /// The model file to benchmark.
    model: Option<PathBuf>,
    /// A Baseline model file to benchmark first, for the time and FLOP ratios.
    #[arg(long, value_name = "BASELINE", requires = "model")]
    against: Option<PathBuf>,
    /// A budget file: match it, then benchmark its Baseline and the matched looped model.
    #[arg(long, value_name = "BUDGET", conflicts_with_all = ["model", "against"])]
    budget: Option<PathBuf>,
    /// Where the kernels run.
    #[arg(long, value_enum, default_value_t = BackendArg::Cpu)]
    backend: BackendArg,
    /// Tokens per batch, rounded to whole documents of the workload (default: 1024 on the
    /// CPU, 16384 on CUDA).
    #[arg(long)]
    tokens: Option<u64>,
    /// Token-to-expert assignment: `balanced`, or `skew=S` for shares proportional to
    /// 1/(rank+1)^S.
    #[arg(long, default_value = "balanced")]
    routing: String,
    /// Timed runs per kernel shape (the median is kept).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = BenchFormat::Table)]
    format: BenchFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    /// f32 on one CPU thread (matrixmultiply).
    Cpu,
    /// bf16 cuBLAS on GPU 0.
    Cuda,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BenchFormat {
    /// Tables per model and the comparison.
    Table,
    /// JSON (the `BenchReport` structure).
    Json,
}

fn parse_routing(s: &str) -> anyhow::Result<Routing> {
    if s == "balanced" {
        return Ok(Routing::Balanced);
    }
    if let Some(v) = s.strip_prefix("skew=") {
        let x: f64 = v
            .parse()
            .with_context(|| format!("--routing: '{v}' is not a number"))?;
        if !(x.is_finite() && x >= 0.0) {
            bail!("--routing: the skew must be a non-negative number (got {x})");
        }
        return Ok(Routing::Skewed(x));
    }
    bail!("--routing: expected 'balanced' or 'skew=S' (got '{s}')")
}

fn rate(x: f64) -> String {
    if x >= 1e12 {
        format!("{:.1} TFLOP/s", x / 1e12)
    } else {
        format!("{:.1} GFLOP/s", x / 1e9)
    }
}

fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} µs", s * 1e6)
    }
}

/// The report as tables.
pub fn bench_table(r: &BenchReport) -> String {
    let backend = match r.backend {
        Backend::Cpu => "CPU",
        Backend::Cuda => "CUDA",
    };
    let mut out = format!(
        "{backend} backend: {}\nceiling (large square GEMM): {}\n",
        r.device,
        rate(r.ceiling_flops_per_second)
    );
    for m in &r.models {
        out.push_str(&format!(
            "\n{}: {} layer executions; batch of {} tokens in {} documents; {} kernel shapes, {} launches per layer execution\n",
            m.name,
            m.layer_executions,
            group_digits(u128::from(m.tokens)),
            m.documents,
            m.kernel_shapes,
            group_digits(u128::from(m.launches))
        ));
        out.push_str(&format!(
            "FLOP check (training, per token, one layer execution): cost model {}, executed plan {}: {}\n",
            flops_text(m.analytic_flops_per_token),
            flops_text(m.plan_flops_per_token),
            if m.flops_exact { "equal, exactly" } else { "DIFFERENT" }
        ));
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::UTF8_FULL_CONDENSED)
            .force_no_tty();
        t.set_header(vec![
            "component",
            "FLOPs",
            "time",
            "achieved",
            "of ceiling",
            "time share",
            "FLOP share",
        ]);
        for c in &m.components {
            t.add_row(vec![
                c.component.as_str().to_owned(),
                report::short(c.flops as f64),
                seconds(c.seconds),
                rate(c.flops_per_second),
                format!("{:.1}%", c.of_ceiling * 100.0),
                format!("{:.1}%", c.time_share * 100.0),
                format!("{:.1}%", c.flop_share * 100.0),
            ]);
        }
        let total: u128 = m.components.iter().map(|c| c.flops).sum();
        t.add_row(vec![
            "layer execution".to_owned(),
            report::short(total as f64),
            seconds(m.seconds_per_layer_execution),
            rate(total as f64 / m.seconds_per_layer_execution),
            format!(
                "{:.1}%",
                total as f64 / m.seconds_per_layer_execution / r.ceiling_flops_per_second * 100.0
            ),
            "100%".to_owned(),
            "100%".to_owned(),
        ]);
        out.push_str(&format!("{t}\n"));
        out.push_str(&format!(
            "per token, all {} layer executions: {} and {} training FLOPs\n",
            m.layer_executions,
            seconds(m.seconds_per_token),
            report::short(m.flops_per_token)
        ));
    }
    if let (Some(tr), Some(fr)) = (r.time_ratio, r.flop_ratio) {
        out.push_str(&format!(
            "\n{} / {}: measured time ratio {:.3}, FLOP ratio {:.3}\n",
            r.models[1].name, r.models[0].name, tr, fr
        ));
    }
    out
}

fn flops_text(x: f64) -> String {
    if x.fract() == 0.0 && x < 1e18 {
        group_digits(x as u128)
    } else {
        format!("{x:.3}")
    }
}

fn load(path: &PathBuf) -> anyhow::Result<ModelSpec> {
    ModelSpec::load(path).with_context(|| format!("model file '{}'", path.display()))
}

/// Runs `smelt bench`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let backend = match args.backend {
        BackendArg::Cpu => Backend::Cpu,
        BackendArg::Cuda => Backend::Cuda,
    };
    let tokens = args.tokens.unwrap_or(match backend {
        Backend::Cpu => 1024,
        Backend::Cuda => 16384,
    });
    if tokens == 0 {
        bail!("--tokens must be at least 1");
    }
    if args.repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    let opts = BenchOptions {
        backend,
        tokens,
        routing: parse_routing(&args.routing)?,
        repeats: args.repeats,
    };
    let specs: Vec<ModelSpec> = match (&args.model, &args.against, &args.budget) {
        (Some(m), None, None) => vec![load(m)?],
        (Some(m), Some(b), None) => vec![load(b)?, load(m)?],
        (None, None, Some(b)) => {
            let budget =
                Budget::load(b).with_context(|| format!("budget file '{}'", b.display()))?;
            let m = smelt::search::match_budget(&budget, 1)?;
            vec![m.baseline, m.looped]
        }
        _ => bail!("give a model file (optionally with --against) or --budget"),
    };
    let refs: Vec<&ModelSpec> = specs.iter().collect();
    let r = bench::bench(&refs, &opts)?;
    let text = match args.format {
        BenchFormat::Table => bench_table(&r),
        BenchFormat::Json => report::to_json(&r)?,
    };
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
