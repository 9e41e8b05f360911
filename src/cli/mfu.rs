//! `smelt mfu`: model FLOP/s and MFU of a measured throughput, under the exact count and
//! each launcher convention.

use std::path::PathBuf;
use std::process::ExitCode;

use smelt::launcher_flops::mfu;
use smelt::time::{Card, Peak};

use super::cost::load;
use super::{ReportArgs, card};

/// Model FLOP utilisation of a training run, under smelt's exact count and under each
/// launcher's formula (megatron, torchtitan, 6n, 6n-attn).
///
/// MFU = tokens per second x FLOPs per token / (GPUs x the card's dense bf16 peak). The
/// throughput is the whole run's (all GPUs together); a per-GPU throughput is the same with
/// --gpus 1. The peak comes from the table of cards (--card) or is given (--peak); an
/// unknown card is an error, never another card's peak.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The model file (TOML), or a Hugging Face config.json.
    model: PathBuf,
    /// Training throughput of the whole run, tokens per second.
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    tokens_per_second: f64,
    /// GPUs of the run.
    #[arg(long, value_name = "N", default_value_t = 1)]
    gpus: u64,
    /// The card: an id of the table (h100-sxm, h200-sxm, h200-nvl, b200, gb200, mi300x, ...)
    /// or a driver's name for it (h100 and h200 are the SXM cards, as their drivers name
    /// them); the same names as `smelt predict --card` and `grid --predict`.
    #[arg(long, value_parser = card, required_unless_present = "peak", conflicts_with = "peak")]
    card: Option<Card>,
    /// The dense bf16 peak per GPU in TFLOP/s, for a card the table does not have.
    #[arg(long, value_name = "TFLOPS", allow_negative_numbers = true,
          value_parser = super::bench::parse_peak)]
    peak: Option<f64>,
    #[command(flatten)]
    report: ReportArgs,
}

/// Runs `smelt mfu`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let model = args.report.workload.spec(load(&args.model)?)?;
    let peak = match (args.card, args.peak) {
        (Some(card), _) => Peak::Card(card),
        (None, Some(tflops)) => Peak::Given(tflops * 1e12),
        (None, None) => anyhow::bail!("--card or --peak is required"),
    };
    let r = mfu(&model, args.tokens_per_second, args.gpus, peak)?;
    if let Some(row) = r.rows.iter().find(|row| row.mfu > 1.0) {
        super::note(&format!(
            "smelt: warning: MFU above 100% ({:.1}% under {}): check the throughput (the whole \
             run's), --gpus and the peak",
            row.mfu * 100.0,
            row.convention
        ));
    }
    args.report.emit(&r)?;
    Ok(ExitCode::SUCCESS)
}
