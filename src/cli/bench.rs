//! `smelt bench`: the GEMMs of one training step of a layer stack, executed and timed.

use std::process::ExitCode;

use smelt::bench::{self, Backend, BenchOptions};
use smelt::plan::{MAX_TOKENS, Routing};
use smelt::progress::Terminal;
use smelt::report::Format;

use super::{LayoutArgs, ModelInputs, Worded, WorkloadArgs, emit_report, formats, named};

/// How kernels are timed: shared by `bench`, and by `match` and `grid` with `--bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct TimingArgs {
    /// Tokens per batch, rounded to whole documents of the workload (default: 1024 on the
    /// CPU, 16384 on CUDA; at most 1,048,576).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_TOKENS))]
    tokens: Option<u64>,
    /// Token-to-expert assignment: `balanced`, or `skew=S` for shares proportional to
    /// 1/(rank+1)^S.
    #[arg(long, default_value = "balanced")]
    routing: Routing,
    /// Timed rounds per kernel shape (the median is kept; 1 to 100).
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u64).range(1..=100))]
    rounds: u64,
    /// The old name of --rounds, refused with a pointer to it: `--repeats` names a loop's
    /// executions (a budget's recipe, `smelt sweep --repeats`), not timed rounds.
    #[arg(long = "repeats", value_name = "N", hide = true, value_parser = renamed_rounds)]
    #[allow(dead_code)] // never set: its parser refuses every value
    old_repeats: Option<u64>,
    /// The longest the benchmark may take (under `grid --bench`, the whole grid: each cell
    /// gets what the cells before it left): a plan estimated to need more is refused before
    /// it starts, and one that overruns stops with an error.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0, value_parser = seconds,
          allow_negative_numbers = true)]
    max_seconds: f64,
    /// The device's dense peak in TFLOP/s (default: a GPU's datasheet bf16 peak when the
    /// card is a known one).
    #[arg(long, value_name = "TFLOPS", value_parser = parse_peak, allow_negative_numbers = true)]
    peak: Option<f64>,
}

/// `--repeats` on a timing command: always refused, naming `--rounds`.
fn renamed_rounds(text: &str) -> Result<u64, String> {
    Err(format!(
        "--repeats is now --rounds here (timed rounds per kernel shape): give --rounds {text}; \
         --repeats names a loop's executions (smelt sweep --repeats, a budget's recipe)"
    ))
}

/// `--max-seconds`: a positive, finite number of seconds.
fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("'{text}' is not a positive number of seconds")),
    }
}

/// `--peak` in TFLOP/s: a number in the library's range of peaks (1e-6 to 1e6 TFLOP/s).
pub(super) fn parse_peak(text: &str) -> Result<f64, String> {
    let tflops: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number"))?;
    let (low, high) = (
        smelt::time::PEAK_FLOPS.start() / 1e12,
        smelt::time::PEAK_FLOPS.end() / 1e12,
    );
    match tflops.is_finite() && (low..=high).contains(&tflops) {
        true => Ok(tflops),
        false => Err(format!(
            "must be between {low:e} and {high:e} TFLOP/s (1 MFLOP/s to 1 EFLOP/s); got {text}"
        )),
    }
}

impl TimingArgs {
    /// The options on `backend`.
    pub fn options(&self, backend: Backend) -> BenchOptions {
        BenchOptions {
            tokens: self.tokens.unwrap_or(backend.default_tokens()),
            routing: self.routing,
            rounds: self.rounds as usize,
            max_seconds: self.max_seconds,
            peak: self.peak.map(|t| t * 1e12),
            ..BenchOptions::new(backend)
        }
    }
}

/// `--bench BACKEND` with the timing flags, for `match` and `grid`.
#[derive(Debug, clap::Args)]
pub struct BenchFlag {
    /// Also benchmark the Baseline and the match (under `grid`, every cell's) on this backend
    /// (cpu or cuda) and report the measured time ratio (the `T ratio` column; `time` in
    /// the JSON).
    #[arg(long, value_name = "BACKEND", value_parser = named::<Backend>())]
    bench: Option<Backend>,
    #[command(flatten)]
    timing: TimingArgs,
}

impl BenchFlag {
    /// The benchmark's options, when one is asked for.
    pub fn options(&self) -> Option<BenchOptions> {
        self.bench.map(|b| self.timing.options(b))
    }

    /// The backend asked for, if any.
    pub fn backend(&self) -> Option<Backend> {
        self.bench
    }
}

/// Execute the GEMMs of one training step of a model's layers and time them per component.
///
/// Checks that the executed arithmetic equals the cost model's count exactly, and shows
/// what FLOPs hide: with --against (or --budget) the measured time ratio of the two models
/// next to their FLOP ratio. The CPU backend runs f32 on one thread; the CUDA backend
/// (build with --features cuda) runs bf16 cuBLAS. Progress goes to standard error.
#[derive(Debug, clap::Args)]
#[command(group(ModelInputs::group()), worded([
    "The model file to benchmark",
    "A Baseline model file to benchmark first, for the time and FLOP ratios",
    "A budget file: match it, then benchmark its Baseline and the matched looped model",
]))]
pub struct Args {
    #[command(flatten)]
    inputs: ModelInputs,
    /// Where the kernels run: cpu (f32, one thread) or cuda (bf16 cuBLAS on GPU 0).
    #[arg(long, default_value = "cpu", value_parser = named::<Backend>())]
    backend: Backend,
    #[command(flatten)]
    timing: TimingArgs,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Output format.
    #[arg(long, default_value = "table",
          value_parser = formats(&[Format::Table, Format::Json, Format::Markdown, Format::Toml]))]
    format: Format,
    #[command(flatten)]
    layout: LayoutArgs,
}

/// Runs `smelt bench`.
pub fn run(args: Args, progress: &Terminal) -> anyhow::Result<ExitCode> {
    let specs = args.inputs.specs(&args.workload)?;
    let opts = args.timing.options(args.backend);
    let refs: Vec<_> = specs.iter().collect();
    emit_report(
        &bench::bench_with(&refs, &opts, progress)?,
        args.format,
        &args.layout,
    )?;
    Ok(ExitCode::SUCCESS)
}
