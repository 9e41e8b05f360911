//! The step model's kernel predictions against a bench's measured kernels (`smelt
//! validate-time --bench BENCH.json`, run by `benches/gpu.sh` on a GPU).
//!
//! Each GEMM shape the bench timed (`smelt bench --format json`, `models[].kernels`) is
//! predicted as the step model costs it on the card: per launch `F / (e · P) + λ`, with `P`
//! the card's dense bf16 peak, `λ` the fitted launch overhead
//! ([`super::super::kernels::KernelConstants::launch_seconds`]) and `e` the card's
//! best-shape GEMM share ([`super::gemm_share`]), times, for the routed experts, the
//! grouped-GEMM curve's `r / (r + r½)` at the GEMM's rows per expert `r` (its token
//! dimension: `m`, or `k` for the weight gradient). The attention core's tiles and their
//! softmax are not predicted: the step model costs attention as one fused kernel from its
//! own fitted curves, not tile by tile; they are counted, with their share of the measured
//! time.

use serde::{Deserialize, Serialize};

use super::super::calibration::{ModelInput, measured_kernels};
use super::super::card::Card;
use super::super::kernels::SHIPPED;
use super::gemm_share;
use crate::error::{Error, Result};
use crate::plan::{Component, Kernel, Op, Pass};

#[derive(Debug, Deserialize)]
struct BenchInput {
    device: String,
    models: Vec<ModelInput>,
}

/// How the step model costs a measured kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelClass {
    /// A GEMM at the best-shape share.
    Gemm,
    /// A routed expert's GEMM on the grouped-GEMM curve.
    Grouped,
}

/// One measured kernel shape and its prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    /// The model the bench ran.
    pub model: String,
    /// The kernel (shape and launches).
    pub kernel: Kernel,
    /// How it is costed.
    pub class: KernelClass,
    /// Rows per expert (routed experts only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_per_expert: Option<u64>,
    /// Measured seconds, all launches.
    pub measured_seconds: f64,
    /// Predicted seconds, all launches.
    pub predicted_seconds: f64,
    /// `predicted / measured − 1`.
    pub error: f64,
}

/// A class's rows in summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassSummary {
    /// The class.
    pub class: KernelClass,
    /// Shapes.
    pub kernels: usize,
    /// Median `|error|` over the shapes.
    pub median_abs_error: f64,
    /// Predicted over measured seconds, summed over the shapes, less 1.
    pub total_error: f64,
    /// Measured seconds of the class.
    pub measured_seconds: f64,
}

/// `smelt validate-time --bench`: every measured GEMM shape against the step model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelCheck {
    /// The bench report.
    pub source: String,
    /// The device it names.
    pub device: String,
    /// The card predicted.
    pub card: Card,
    /// The card's dense bf16 peak, FLOP/s.
    pub peak_flops_per_second: f64,
    /// The best-shape GEMM share used.
    pub gemm_share: f64,
    /// The launch overhead used, seconds.
    pub launch_seconds: f64,
    /// One row per predicted shape, in the report's order.
    pub rows: Vec<KernelRow>,
    /// Per class.
    pub classes: Vec<ClassSummary>,
    /// Shapes not predicted (the attention core's tiles and softmax).
    pub not_predicted: usize,
    /// Their share of the measured time.
    pub not_predicted_time_share: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The kernels of the bench report `json` (named `source`) predicted on `card` (the
/// report's device when `None`: an error if the table does not know it).
pub fn check_bench(json: &str, source: &str, card: Option<Card>) -> Result<KernelCheck> {
    let input: BenchInput = serde_json::from_str(json).map_err(|e| Error::Parse {
        message: format!("{source}: a bench report (smelt bench --format json): {e}"),
    })?;
    let card = bench_card(card, &input.device, source)?;
    let share = gemm_share(card).ok_or_else(|| {
        Error::invalid(
            "card",
            format!("{card} has no published best-shape GEMM row"),
        )
    })?;
    let peak = card.spec().peak_flops_per_second;
    let launch = SHIPPED.launch_seconds;
    let g = &SHIPPED.grouped;
    let (mut rows, mut skipped, mut skipped_time, mut total) = (Vec::new(), 0, 0.0, 0.0);
    for k in measured_kernels(&input.models)? {
        let kk = k.kernel;
        total += k.seconds;
        if kk.op != Op::Gemm || kk.component == Component::AttentionCore {
            skipped += 1;
            skipped_time += k.seconds;
            continue;
        }
        let flops_per_launch = kk.flops() as f64 / kk.count as f64;
        let (class, rows_per_expert, e) = if kk.component == Component::Experts {
            let r = if kk.pass == Pass::BackwardWeight {
                kk.k
            } else {
                kk.m
            };
            let e = share * g.share(r as f64) / g.max_share;
            (KernelClass::Grouped, Some(r), e)
        } else {
            (KernelClass::Gemm, None, share)
        };
        let predicted = kk.count as f64 * (flops_per_launch / (e * peak) + launch);
        rows.push(KernelRow {
            model: k.model.to_owned(),
            kernel: kk,
            class,
            rows_per_expert,
            measured_seconds: k.seconds,
            predicted_seconds: predicted,
            error: predicted / k.seconds - 1.0,
        });
    }
    if rows.is_empty() {
        return Err(Error::invalid(
            "models[].kernels",
            format!("{source} times no GEMM the step model predicts"),
        ));
    }
    let classes = class_summaries(&rows);
    Ok(KernelCheck {
        source: source.to_owned(),
        device: input.device,
        card,
        peak_flops_per_second: peak,
        gemm_share: share,
        launch_seconds: launch,
        rows,
        classes,
        not_predicted: skipped,
        not_predicted_time_share: skipped_time / total,
    })
}

/// The card a bench report was measured on: `card` when given, else its device's card.
fn bench_card(card: Option<Card>, device: &str, source: &str) -> Result<Card> {
    match card {
        Some(c) => Ok(c),
        None => Card::of_device(device).ok_or_else(|| {
            Error::invalid(
                "card",
                format!("{source} was measured on '{device}', which is no card of the table: give --card"),
            )
        }),
    }
}

/// Each kernel class's summary over `rows`.
fn class_summaries(rows: &[KernelRow]) -> Vec<ClassSummary> {
    [KernelClass::Gemm, KernelClass::Grouped]
        .into_iter()
        .filter_map(|class| {
            let of: Vec<&KernelRow> = rows.iter().filter(|r| r.class == class).collect();
            let measured: f64 = of.iter().map(|r| r.measured_seconds).sum();
            let predicted: f64 = of.iter().map(|r| r.predicted_seconds).sum();
            (!of.is_empty()).then(|| ClassSummary {
                class,
                kernels: of.len(),
                median_abs_error: median(of.iter().map(|r| r.error.abs()).collect()),
                total_error: predicted / measured - 1.0,
                measured_seconds: measured,
            })
        })
        .collect()
}
