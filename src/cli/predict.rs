//! `smelt predict`: the predicted step time of a model's layer stack on a card, from a
//! roofline over the bench's kernel plan; `smelt calibrate`: a calibration from a bench.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use smelt::plan::MAX_TOKENS;
use smelt::time::{
    AttentionData, Calibration, Card, ExpertLaunch, Given, PredictOptions, PredictSpec, Roofline,
    predict,
};

use super::{ModelInputs, ReportArgs, Worded, card, named, write_file};

/// `--bandwidth` in TB/s: a number in the library's range of bandwidths.
fn terabytes(text: &str) -> Result<f64, String> {
    let (low, high) = (
        smelt::time::BANDWIDTH.start() / 1e12,
        smelt::time::BANDWIDTH.end() / 1e12,
    );
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (low..=high).contains(&x) => Ok(x),
        _ => Err(format!(
            "must be between {low:e} and {high:e} TB/s (1 MB/s to 1 EB/s); got {text}"
        )),
    }
}

/// A number of microseconds, 0 or more.
fn microseconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=1e6).contains(&x) => Ok(x),
        _ => Err(format!(
            "'{text}' is not a number of microseconds from 0 to 1e6"
        )),
    }
}

/// The device and efficiencies of a prediction (`smelt predict`).
#[derive(Debug, Clone, clap::Args)]
pub struct DeviceArgs {
    /// The dense peak in TFLOP/s of a card the table does not have (with --bandwidth).
    #[arg(long, value_name = "TFLOPS", value_parser = super::bench::parse_peak,
          allow_negative_numbers = true)]
    peak: Option<f64>,
    /// The memory bandwidth in TB/s: a card's datasheet figure replaced, or --peak's
    /// device's (without it, --peak's device has no memory roof).
    #[arg(long, value_name = "TB/S", value_parser = terabytes, allow_negative_numbers = true)]
    bandwidth: Option<f64>,
    /// Seconds per kernel launch, in µs (default: 4 µs on a card, or a CUDA calibration's
    /// measured launch floor; the calibration's own device keeps its floor).
    #[arg(long, value_name = "US", value_parser = microseconds, allow_negative_numbers = true)]
    launch_us: Option<f64>,
    /// A calibration (`smelt calibrate`): efficiencies per shape class fitted to a bench's
    /// measured kernels. Without it the roofline is uncalibrated (efficiency 1).
    #[arg(long, value_name = "CAL.json")]
    calibration: Option<PathBuf>,
    /// How the attention core is costed: fused (scores on chip, each token's tensors through
    /// memory once; the default on a card) or unfused (each tile kernel as the bench
    /// launches it; the default on a calibration's own device).
    #[arg(long, value_parser = named::<AttentionData>())]
    attention: Option<AttentionData>,
    /// How the routed experts' GEMMs are launched: grouped (one grouped GEMM per weight
    /// matrix and pass per layer; the default on a card) or per-expert (one launch per
    /// expert, as the bench launches them; the default on a calibration's own device).
    #[arg(long, value_parser = named::<ExpertLaunch>())]
    experts: Option<ExpertLaunch>,
    /// Tokens per batch, rounded to whole documents of the workload (default 16384, a GPU
    /// bench's batch).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_TOKENS))]
    tokens: Option<u64>,
    /// Token-to-expert assignment: `balanced`, or `skew=S`.
    #[arg(long, default_value = "balanced")]
    routing: String,
}

impl DeviceArgs {
    /// The roofline on `card` (or --peak's device, or the calibration's own) and the options:
    /// the flags as the library's [`PredictSpec`], read as `[objective.time]` and Python's
    /// `predict` are.
    pub fn roofline(&self, card: Option<Card>) -> anyhow::Result<(Roofline, PredictOptions)> {
        let spec = PredictSpec {
            card: card.map(|c| c.as_str().to_owned()),
            peak: self.peak,
            bandwidth: self.bandwidth,
            launch_us: self.launch_us,
            calibration: self.calibration.clone(),
            attention: self.attention,
            experts: self.experts,
            tokens: self.tokens,
            routing: Some(self.routing.clone()),
        };
        let p = spec.resolve(Path::new(""), Given::Flags)?;
        if let Some(w) = p.warning {
            super::note(&format!("smelt: warning: {w}"));
        }
        Ok((p.roofline, p.options))
    }
}

/// Predict the step time of a model's layer stack on a card: a roofline over the kernels
/// the bench would time.
///
/// Each kernel of the bench's plan (every GEMM of one training step, the attention core as
/// a fused kernel's tiles) takes max(FLOPs / (peak x efficiency), bytes / bandwidth) plus a
/// launch overhead; the model's time is the sum over its plan. Uncalibrated, every
/// efficiency is 1 (the card's datasheet peak and bandwidth: a lower bound on the time);
/// --calibration applies efficiencies fitted to a bench's measured kernels. With --against
/// (or --budget) the predicted time ratio of the two models next to their FLOP ratio. The
/// output says which card, which calibration and what it assumes.
#[derive(Debug, clap::Args)]
#[command(group(ModelInputs::group()), worded([
    "The model file to predict",
    "A Baseline model file, for the time and FLOP ratios",
    "A budget file: match it, then predict its Baseline and the matched looped model",
]))]
pub struct Args {
    #[command(flatten)]
    inputs: ModelInputs,
    /// The card: an id of the table (h100-sxm, h200-sxm, h200-nvl, b200, gb200, mi300x, ...)
    /// or a driver's name for it (h100 and h200 are the SXM cards, as their drivers name
    /// them); the same names as `smelt mfu --card` and `grid --predict`.
    #[arg(long, value_parser = card)]
    card: Option<Card>,
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    step: super::predict_step::StepFlags,
    #[command(flatten)]
    report: ReportArgs,
}

/// Runs `smelt predict`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let specs = args.inputs.specs(&args.report.workload)?;
    if args.step.asked() {
        let d = &args.device;
        if specs.len() != 1 {
            anyhow::bail!(
                "a step prediction (--global-batch) takes one model, not --against or --budget"
            );
        }
        if d.peak.is_some()
            || d.bandwidth.is_some()
            || d.launch_us.is_some()
            || d.calibration.is_some()
            || d.attention.is_some()
            || d.experts.is_some()
            || d.tokens.is_some()
            || d.routing.trim() != "balanced"
        {
            anyhow::bail!(
                "--peak, --bandwidth, --launch-us, --calibration, --attention, --experts, \
                 --tokens and --routing are the layer-stack roofline's; the step model \
                 (--global-batch) uses the card's fitted constants and balanced routing"
            );
        }
        let Some(card) = args.card else {
            anyhow::bail!("a step prediction (--global-batch) needs --card");
        };
        let r = args.step.report(&specs[0], card)?;
        args.report.emit(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (roof, opts) = args.device.roofline(args.card)?;
    let refs: Vec<_> = specs.iter().collect();
    args.report.emit(&predict(&refs, &roof, &opts)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Fit a calibration for `smelt predict` from a bench's measured kernels.
///
/// Reads `smelt bench --format json` (its per-shape times, `models[].kernels`) and fits per
/// shape class (other GEMMs, routed experts, attention tiles, softmax) the efficiency each
/// measured shape reached against the bench's peak (a GPU's datasheet peak or --peak; the
/// CPU's measured ceiling), by octave of work per launch, with the bench's launch floor as
/// the launch overhead.
#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// The bench report (JSON).
    bench: PathBuf,
    /// Where to write the calibration (JSON).
    #[arg(short, long, value_name = "CAL.json")]
    output: PathBuf,
}

/// Runs `smelt calibrate`.
pub fn calibrate(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.bench)
        .with_context(|| format!("reading bench report '{}'", args.bench.display()))?;
    let cal = Calibration::from_bench_json(&text, &args.bench.display().to_string())
        .with_context(|| format!("bench report '{}'", args.bench.display()))?;
    let json = smelt::report::to_json(&cal)?;
    write_file(
        &args.output,
        &json,
        "the calibration",
        std::slice::from_ref(&args.bench),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `--predict CARD [--calibration FILE]` for `grid`.
#[derive(Debug, Clone, clap::Args)]
pub struct PredictFlag {
    /// Also predict every cell's time ratio on this card (an id of the table or a driver's
    /// name for it: h200 is the SXM card). Alone: a lower bound from a one-GPU roofline of
    /// the layer stack (16384 tokens, balanced routing, attention fused, experts grouped,
    /// efficiency 1 unless calibrated): the `P ratio` column, `predicted` in the JSON. With
    /// --global-batch and a layout: each cell's training step (the step model), its ratio
    /// and drivers in a table after the grid, `step_time` in the JSON. See `smelt predict
    /// --help`.
    #[arg(long, value_name = "CARD", value_parser = card)]
    predict: Option<Card>,
    /// With --predict: efficiencies from a calibration (`smelt calibrate`) instead of the
    /// uncalibrated roofline's 1.
    #[arg(long, value_name = "CAL.json", requires = "predict")]
    calibration: Option<PathBuf>,
}

impl PredictFlag {
    /// The card of `--predict`, if given.
    pub fn card(&self) -> Option<Card> {
        self.predict
    }

    /// Whether `--calibration` is given.
    pub fn calibrated(&self) -> bool {
        self.calibration.is_some()
    }

    /// The file the flags read (the calibration), which no output may be written over.
    pub fn inputs(&self) -> Vec<PathBuf> {
        self.calibration.iter().cloned().collect()
    }

    /// The roofline and options, when a prediction is asked for.
    pub fn roofline(&self) -> anyhow::Result<Option<(Roofline, PredictOptions)>> {
        let Some(card) = self.predict else {
            return Ok(None);
        };
        let args = DeviceArgs {
            peak: None,
            bandwidth: None,
            launch_us: None,
            calibration: self.calibration.clone(),
            attention: None,
            experts: None,
            tokens: None,
            routing: "balanced".to_owned(),
        };
        args.roofline(Some(card)).map(Some)
    }
}
