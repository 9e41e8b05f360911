//! Predicted step time: a roofline walked over the bench's own kernel plan ([`super::plan`]),
//! kernel by kernel, so that a prediction and a measurement line up shape by shape.
//!
//! # The model
//!
//! For a device of dense peak `P` (FLOP/s), memory bandwidth `W` (bytes/s), launch overhead
//! `λ` (seconds) and `b` bytes per element, one launch of a kernel of `F` FLOPs moving `B`
//! bytes takes
//!
//! ```text
//! t = max(F / (P · e(class, F)), B / W) + λ
//! ```
//!
//! and a kernel shape launched `n` times takes `n · t` (time is additive over launches and
//! over the plan: the prediction of a model is the sum over its plan). `e` is an efficiency
//! per shape class ([`ShapeClass`]: the GEMMs of the projections, router, shared and dense
//! FFNs and indexer; the routed experts' GEMMs; the attention tiles' GEMMs; the tiles'
//! softmax), a function of the work per launch (FLOPs, or score elements for a softmax).
//! A GEMM moves its operands once: `B = b · batch · (m·k + k·n + m·n)`. A softmax has no
//! FLOPs in the cost model; its time is its exponentials, one per score element, at
//! `P / 256`: FlashAttention-3 (Shah et al., 2024, §3.1) gives the H100 SXM5 989 TFLOP/s of
//! matrix multiply against 3.9 TFLOP/s of exponentials ([`EXP_RATE_DIVISOR`]).
//!
//! **The attention core** is costed one of two ways ([`AttentionData`]):
//!
//! * `fused` (the default for a card): as a fused attention kernel (FlashAttention 2) runs
//!   it. Its tiles' GEMMs and softmax are computed on chip (the scores never go to memory):
//!   the tiles' compute is summed, and the kernel reads and writes each token's queries,
//!   keys, values, output and their gradients once per layer execution (forward `Q, K, V`
//!   in and `O` out; backward `Q, K, V, O, dO` in and `dQ, dK, dV` out; keys and values
//!   per KV head); its time is the larger of the two plus two launches (forward and
//!   backward) per layer execution.
//! * `unfused`: every tile kernel as the bench times it (each a batched GEMM or softmax
//!   launch, the scores through memory): what a calibration measured on the bench predicts.
//!
//! **The routed experts** are launched one of two ways ([`ExpertLaunch`]): `grouped` (the
//! default for a card), as a grouped GEMM runs them (Megatron-Core's and MegaBlocks'
//! MoE layers): each expert's GEMM costed at its own shape, with [`GROUPED_LAUNCHES`]
//! launches per MoE layer execution; or `per-expert`, one launch per expert's GEMM, as the
//! bench launches them.
//!
//! # Uncalibrated defaults
//!
//! Without a calibration every efficiency is 1 (each kernel reaches the card's datasheet
//! peak or bandwidth: a lower bound on the time), and the launch overhead is
//! [`DEFAULT_LAUNCH_SECONDS`] (4 µs: Volkov and Demmel, "Benchmarking GPUs to tune dense
//! linear algebra", SC 2008, measured 3 to 7 µs per kernel launch). Predicted ratios are
//! then the roofline's; the absolute times are optimistic.
//!
//! # Calibration
//!
//! [`Calibration::from_bench_json`] reads a bench report's per-shape times (`smelt bench --format
//! json`, `models[].kernels`) and fits, per shape class, the efficiency each measured shape
//! reached: `e = F / (P_ref · (t − λ))` per launch, with `λ` the bench's launch floor and
//! `P_ref` the bench's peak (a GPU's datasheet peak, or `--peak`) or, where it has none
//! (the CPU), its measured ceiling. The shapes are grouped in octaves of work per launch
//! (powers of two); each octave's efficiency is its total work over its total time (each
//! shape weighted by its launches), and `e(class, w)` is interpolated linearly in `log2 w`
//! between the octaves, held constant beyond the first and last. A class the bench did not
//! run borrows another's curve (experts and the other GEMMs from each other, the tiles'
//! GEMMs from the other GEMMs); one with no curve to borrow stays at 1, and the report
//! lists which classes were fitted.
//!
//! **The GEMMs' operand traffic.** Efficiency as a function of work alone cannot follow a
//! shape smaller than every shape measured: it is held at the smallest octave's, and a looped
//! model's routed experts (fewer tokens per expert, a narrower hidden size) run below it. The
//! calibration therefore also fits one line through every measured GEMM (the projections',
//! experts' and tiles' alike: one GEMM library runs them all), per launch
//!
//! ```text
//! t − λ = F / (P · e∞) + B / W_eff
//! ```
//!
//! with `F` its FLOPs, `B` the bytes of its operands (as above) and two fitted constants, the
//! share of the reference peak a large GEMM reaches (`e∞`) and the bandwidth its operand
//! traffic is served at (`W_eff`). The two terms are added, not maxed: the
//! Execution-Cache-Memory model (Treibig and Hager, "Introducing a performance model for
//! bandwidth-limited loop kernels", PPAM 2009; Hager et al., "Exploring performance and power
//! properties of modern multi-core chips via simple machine models", CCPE 2016) assumes a
//! core's arithmetic does not overlap its data transfers. The fit minimises the squared
//! relative error of each shape's time, weighted by that time ([`Traffic`]). It is applied,
//! to every GEMM in place of the curves, only on the calibration's own device (`smelt
//! predict --calibration FILE` with no card or peak): `W_eff` is that device's, not a card's.
//! The softmax keeps its curve. A fit with a negative or zero constant is not kept.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::plan::{self, Component, Kernel, Op, Plan, Routing};
use super::{Backend, stats};
use crate::card::Card;
use crate::error::{Error, Result};
use crate::model::{Model, ModelSpec};
use crate::names::named_enum;

/// The exponentials a device computes per second, as a share of its dense peak: 1/256
/// (FlashAttention-3, Shah et al. 2024, §3.1: 3.9 TFLOP/s of special functions against
/// 989 TFLOP/s of bf16 matrix multiply on the H100 SXM5).
pub const EXP_RATE_DIVISOR: f64 = 256.0;

/// The launch overhead of a kernel when no calibration gives one: 4 µs (Volkov and Demmel,
/// SC 2008, measured 3 to 7 µs).
pub const DEFAULT_LAUNCH_SECONDS: f64 = 4e-6;

/// Bytes per element on a card: bf16.
pub const CARD_ELEMENT_BYTES: u64 = 2;

/// The bandwidths a device may be given, bytes/s: 1 MB/s to 1 EB/s.
pub const BANDWIDTH: std::ops::RangeInclusive<f64> = 1e6..=1e18;

named_enum! {
    /// How the attention core's tiles are costed (module docs).
    pub enum AttentionData: "attention" {
        /// As a fused kernel: scores on chip, each token's tensors through memory once.
        Fused = "fused",
        /// Each tile kernel as the bench launches it, the scores through memory.
        Unfused = "unfused",
    }
}

named_enum! {
    /// How the routed experts' GEMMs are launched (module docs).
    pub enum ExpertLaunch: "experts" {
        /// One grouped GEMM per weight matrix and pass for all the experts of a layer
        /// (nine launches per MoE layer execution), each expert's GEMM at its own shape.
        Grouped = "grouped",
        /// One GEMM launch per expert, as the bench launches them.
        PerExpert = "per-expert",
    }
}

/// Launches of a grouped expert GEMM per MoE layer execution: gate, up and down, each
/// forward, data gradient and weight gradient.
pub const GROUPED_LAUNCHES: u64 = 9;

named_enum! {
    /// What an efficiency is fitted per.
    #[derive(PartialOrd, Ord)]
    pub enum ShapeClass: "class" {
        /// The GEMMs of the projections, router, shared experts, dense FFNs and indexer.
        Gemm = "gemm",
        /// The routed experts' GEMMs.
        Experts = "experts",
        /// The attention tiles' GEMMs.
        Tile = "tile",
        /// The attention tiles' softmax.
        Softmax = "softmax",
    }
}

impl ShapeClass {
    /// The class of a kernel.
    pub fn of(k: &Kernel) -> Self {
        match (k.component, k.op) {
            (_, Op::Softmax) => ShapeClass::Softmax,
            (Component::AttentionCore, Op::Gemm) => ShapeClass::Tile,
            (Component::Experts, Op::Gemm) => ShapeClass::Experts,
            _ => ShapeClass::Gemm,
        }
    }

    /// The classes whose curve this one borrows when it has none, in order.
    fn fallbacks(self) -> &'static [ShapeClass] {
        match self {
            ShapeClass::Gemm => &[ShapeClass::Experts],
            ShapeClass::Experts => &[ShapeClass::Gemm],
            ShapeClass::Tile => &[ShapeClass::Gemm, ShapeClass::Experts],
            ShapeClass::Softmax => &[],
        }
    }
}

/// The device a prediction is for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// The device, in words.
    pub name: String,
    /// Dense peak, FLOP/s.
    pub peak_flops_per_second: f64,
    /// Memory bandwidth, bytes/s (`None`: no memory roof).
    pub memory_bytes_per_second: Option<f64>,
    /// Seconds per kernel launch.
    pub launch_seconds: f64,
    /// Bytes per element (2 for bf16, 4 for f32).
    pub element_bytes: u64,
    /// Where the figures come from.
    pub source: String,
}

impl Device {
    /// A card of the table: its dense bf16 peak and bandwidth, bf16 elements, the default
    /// launch overhead.
    pub fn card(card: Card) -> Self {
        let s = card.spec();
        Device {
            name: s.name.to_owned(),
            peak_flops_per_second: s.peak_flops_per_second,
            memory_bytes_per_second: Some(s.memory_bytes_per_second),
            launch_seconds: DEFAULT_LAUNCH_SECONDS,
            element_bytes: CARD_ELEMENT_BYTES,
            source: s.source.to_owned(),
        }
    }

    /// An error unless the figures are in range.
    pub fn validate(&self) -> Result<()> {
        if !super::PEAK_FLOPS.contains(&self.peak_flops_per_second) {
            return Err(Error::invalid(
                "peak",
                format!(
                    "must be between 1e6 and 1e18 FLOP/s; got {:e}",
                    self.peak_flops_per_second
                ),
            ));
        }
        if let Some(w) = self.memory_bytes_per_second
            && !BANDWIDTH.contains(&w)
        {
            return Err(Error::invalid(
                "bandwidth",
                format!("must be between 1e6 and 1e18 bytes/s; got {w:e}"),
            ));
        }
        if !(self.launch_seconds.is_finite() && (0.0..=1.0).contains(&self.launch_seconds)) {
            return Err(Error::invalid(
                "launch_seconds",
                format!("must be between 0 and 1 s; got {}", self.launch_seconds),
            ));
        }
        if !matches!(self.element_bytes, 1 | 2 | 4 | 8) {
            return Err(Error::invalid(
                "element_bytes",
                format!("must be 1, 2, 4 or 8; got {}", self.element_bytes),
            ));
        }
        Ok(())
    }
}

/// An efficiency curve: `(log2 work per launch, efficiency)` points, sorted.
pub type Curve = Vec<[f64; 2]>;

/// Efficiencies fitted from a bench's measured kernel shapes (module docs): `smelt
/// calibrate`'s file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Where the measurements come from (the bench file, as given).
    pub source: String,
    /// The bench's backend.
    pub backend: Backend,
    /// The measured device: the reference peak, no memory roof unless the calibration is
    /// given one, the bench's launch floor, its element size.
    pub device: Device,
    /// The models measured.
    pub models: Vec<String>,
    /// The shapes the fit used.
    pub shapes: usize,
    /// Per class, the efficiency curve.
    pub curves: BTreeMap<ShapeClass, Curve>,
    /// The GEMMs' time as arithmetic plus operand traffic (module docs), when the fit kept
    /// one; absent from calibrations written before it was fitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
}

/// A GEMM's busy time per launch as `F · seconds_per_flop + B · seconds_per_byte` (module
/// docs), fitted to every measured GEMM shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Traffic {
    /// Seconds per FLOP of a GEMM's arithmetic (`1 / (P · e∞)`).
    pub seconds_per_flop: f64,
    /// Seconds per byte of its operands (`1 / W_eff`).
    pub seconds_per_byte: f64,
    /// The GEMM shapes fitted.
    pub shapes: usize,
    /// The time-weighted root-mean-square relative error of the fit over those shapes.
    pub rms_relative_error: f64,
}

impl Traffic {
    /// The share of `peak` a large GEMM reaches (`e∞`).
    pub fn peak_share(&self, peak: f64) -> f64 {
        1.0 / (self.seconds_per_flop * peak)
    }

    /// The bandwidth its operand traffic is served at, bytes/s (`W_eff`).
    pub fn bandwidth(&self) -> f64 {
        1.0 / self.seconds_per_byte
    }

    /// An error unless both constants are positive and finite.
    pub fn validate(&self) -> Result<()> {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        let fit = self.rms_relative_error.is_finite() && self.rms_relative_error >= 0.0;
        if !(ok(self.seconds_per_flop) && ok(self.seconds_per_byte) && fit) {
            return Err(Error::invalid(
                "traffic",
                "must have positive finite seconds_per_flop and seconds_per_byte and a \
                 non-negative rms_relative_error",
            ));
        }
        Ok(())
    }
}

/// What a calibration reads from a bench report (the rest is left alone).
#[derive(Debug, Deserialize)]
struct BenchInput {
    backend: Backend,
    device: String,
    ceiling_flops_per_second: f64,
    #[serde(default)]
    peak_flops_per_second: Option<f64>,
    #[serde(default)]
    launch_floor_seconds: Option<f64>,
    models: Vec<ModelInput>,
}

#[derive(Debug, Deserialize)]
struct ModelInput {
    name: String,
    #[serde(default)]
    kernels: Option<Vec<KernelInput>>,
}

#[derive(Debug, Deserialize)]
struct KernelInput {
    kernel: Kernel,
    seconds: f64,
}

/// Work per launch: FLOPs for a GEMM, score elements for a softmax.
fn work(k: &Kernel) -> f64 {
    match k.op {
        Op::Gemm => 2.0 * (k.m * k.n * k.k * k.batch) as f64,
        Op::Softmax => (k.m * k.n * k.batch) as f64,
    }
}

/// The rate a class's work runs at, at efficiency 1: the peak, or the exponentials'.
fn rate(class: ShapeClass, peak: f64) -> f64 {
    match class {
        ShapeClass::Softmax => peak / EXP_RATE_DIVISOR,
        _ => peak,
    }
}

impl Calibration {
    /// The calibration of the bench report `json` (the text of `smelt bench --format json`),
    /// naming it `source`.
    pub fn from_bench_json(json: &str, source: &str) -> Result<Self> {
        if serde_json::from_str::<serde_json::Value>(json)
            .is_ok_and(|v| v.get("curves").is_some() && v.get("device").is_some())
        {
            return Err(Error::invalid(
                "bench report",
                format!(
                    "{source} is a calibration (smelt calibrate's output), not a bench report: \
                     give it to `smelt predict --calibration`, or calibrate from `smelt bench \
                     --format json`"
                ),
            ));
        }
        let input: BenchInput = serde_json::from_str(json).map_err(|e| Error::Parse {
            message: format!("a bench report (smelt bench --format json): {e}"),
        })?;
        let peak = input
            .peak_flops_per_second
            .unwrap_or(input.ceiling_flops_per_second);
        if !(peak.is_finite() && peak > 0.0) {
            return Err(Error::invalid(
                "ceiling_flops_per_second",
                "must be a positive number of FLOP/s",
            ));
        }
        let launch = input.launch_floor_seconds.unwrap_or(0.0);
        let mut measured = Vec::new();
        for m in &input.models {
            let Some(kernels) = &m.kernels else {
                return Err(Error::invalid(
                    format!("models[{}].kernels", m.name),
                    "missing: the bench report predates per-shape times; rerun smelt bench",
                ));
            };
            for k in kernels {
                if !(k.seconds.is_finite() && k.seconds > 0.0) || k.kernel.count == 0 {
                    return Err(Error::invalid(
                        format!("models[{}].kernels[].seconds", m.name),
                        "must be a positive number of seconds with at least one launch",
                    ));
                }
                measured.push((k.kernel, k.seconds));
            }
        }
        let element_bytes = match input.backend {
            Backend::Cpu => 4,
            Backend::Cuda => 2,
        };
        let device = Device {
            name: input.device.clone(),
            peak_flops_per_second: peak,
            memory_bytes_per_second: None,
            launch_seconds: launch,
            element_bytes,
            source: match input.peak_flops_per_second {
                Some(_) => format!("{source}: the bench's peak, its launch floor"),
                None => format!("{source}: the bench's measured ceiling, its launch floor"),
            },
        };
        device.validate()?;
        Ok(Calibration {
            source: source.to_owned(),
            backend: input.backend,
            curves: fit(&measured, peak, launch),
            traffic: fit_traffic(&measured, launch, element_bytes),
            shapes: measured.len(),
            models: input.models.iter().map(|m| m.name.clone()).collect(),
            device,
        })
    }

    /// A calibration file's text (`smelt calibrate`'s output), checked: a bench report given
    /// in its place is refused with what to run instead.
    pub fn from_json(json: &str) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(json).map_err(|e| Error::Parse {
            message: format!("a calibration (smelt calibrate's file): {e}"),
        })?;
        if value.get("curves").is_none() && value.get("ceiling_flops_per_second").is_some() {
            return Err(Error::invalid(
                "calibration",
                "this is a bench report (smelt bench --format json), not a calibration: fit \
                 one from it first with `smelt calibrate BENCH.json -o CAL.json`",
            ));
        }
        let c: Calibration = serde_json::from_value(value).map_err(|e| Error::Parse {
            message: format!("a calibration (smelt calibrate's file): {e}"),
        })?;
        c.validate()?;
        Ok(c)
    }

    /// An error unless the curves are usable.
    pub fn validate(&self) -> Result<()> {
        self.device.validate()?;
        if let Some(t) = &self.traffic {
            t.validate()?;
        }
        for (class, curve) in &self.curves {
            let ok = curve
                .iter()
                .all(|[x, e]| x.is_finite() && e.is_finite() && *e > 0.0)
                && curve.windows(2).all(|w| w[0][0] < w[1][0]);
            if !ok || curve.is_empty() {
                return Err(Error::invalid(
                    format!("curves.{class}"),
                    "must be points [log2 work, efficiency] with rising work and positive \
                     efficiencies",
                ));
            }
        }
        Ok(())
    }

    /// The classes fitted from measurements.
    pub fn classes(&self) -> Vec<ShapeClass> {
        self.curves.keys().copied().collect()
    }
}

/// The curves of `measured` (kernel, seconds of all its launches) at reference peak `peak`
/// and launch floor `launch` (module docs).
fn fit(measured: &[(Kernel, f64)], peak: f64, launch: f64) -> BTreeMap<ShapeClass, Curve> {
    // Per class and octave: (Σ launches·work, Σ launches·(t − λ), Σ launches, Σ launches·log2 work).
    let mut bins: BTreeMap<(ShapeClass, i64), [f64; 4]> = BTreeMap::new();
    for (k, seconds) in measured {
        let class = ShapeClass::of(k);
        let w = work(k);
        if w <= 0.0 {
            continue;
        }
        let n = k.count as f64;
        let busy = busy(seconds / n, launch);
        let e = bins.entry((class, w.log2().floor() as i64)).or_default();
        e[0] += n * w;
        e[1] += n * busy;
        e[2] += n;
        e[3] += n * w.log2();
    }
    let mut curves: BTreeMap<ShapeClass, Curve> = BTreeMap::new();
    for ((class, _), [w, t, n, lw]) in bins {
        let efficiency = w / (rate(class, peak) * t);
        curves.entry(class).or_default().push([lw / n, efficiency]);
    }
    curves
}

/// A launch's busy time: its time less the launch floor, never under half of it (the floor
/// is what a 1x1x1 GEMM takes).
fn busy(per_launch: f64, launch: f64) -> f64 {
    (per_launch - launch).max(0.5 * per_launch)
}

/// The operand-traffic line through the measured GEMMs (module docs): minimises
/// `Σ s_i (1 − (F_i x + B_i y) / t_i)²` over the GEMM shapes, `t_i` a shape's busy time per
/// launch and `s_i` the seconds of all its launches (its share of the step). `None` when fewer
/// than two shapes, a singular system, or a constant that is not positive.
fn fit_traffic(measured: &[(Kernel, f64)], launch: f64, element_bytes: u64) -> Option<Traffic> {
    // Normal equations of the weighted least squares in (x, y), a = F/t, b = B/t.
    let rows: Vec<(f64, f64, f64)> = measured
        .iter()
        .filter(|(k, s)| k.op == Op::Gemm && k.count > 0 && *s > 0.0)
        .map(|(k, s)| {
            let t = busy(s / k.count as f64, launch);
            let (p, q, r) = k.operands();
            let bytes = (p + q + r) as f64 * element_bytes as f64;
            (work(k) / t, bytes / t, *s)
        })
        .collect();
    if rows.len() < 2 {
        return None;
    }
    let (mut aa, mut ab, mut bb, mut a1, mut b1) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(a, b, s) in &rows {
        aa += s * a * a;
        ab += s * a * b;
        bb += s * b * b;
        a1 += s * a;
        b1 += s * b;
    }
    let det = aa * bb - ab * ab;
    if !(det.is_finite() && det > 1e-12 * aa * bb) {
        return None;
    }
    let x = (a1 * bb - b1 * ab) / det;
    let y = (b1 * aa - a1 * ab) / det;
    let total: f64 = rows.iter().map(|r| r.2).sum();
    let sq: f64 = rows
        .iter()
        .map(|&(a, b, s)| s * (1.0 - (a * x + b * y)).powi(2))
        .sum();
    let t = Traffic {
        seconds_per_flop: x,
        seconds_per_byte: y,
        shapes: rows.len(),
        rms_relative_error: (sq / total).sqrt(),
    };
    t.validate().ok().map(|()| t)
}

/// `curve` at `x` (linear between points, constant beyond the ends).
fn interpolate(curve: &[[f64; 2]], x: f64) -> f64 {
    let (first, last) = (curve[0], curve[curve.len() - 1]);
    if x <= first[0] {
        return first[1];
    }
    if x >= last[0] {
        return last[1];
    }
    for w in curve.windows(2) {
        let ([x0, y0], [x1, y1]) = (w[0], w[1]);
        if x <= x1 {
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
        }
    }
    last[1]
}

/// A device with its efficiencies: what a prediction walks a plan with.
#[derive(Debug, Clone, PartialEq)]
pub struct Roofline {
    /// The device.
    pub device: Device,
    /// The efficiencies (`None`: 1 everywhere, uncalibrated).
    pub calibration: Option<Calibration>,
    /// How the attention core is costed.
    pub attention: AttentionData,
    /// How the routed experts' GEMMs are launched.
    pub experts: ExpertLaunch,
}

/// What a prediction is asked to run on: a card, a peak (with a bandwidth), or a
/// calibration's own device, with the figures a caller replaces.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceRequest {
    /// A card of the table.
    pub card: Option<Card>,
    /// A dense peak in FLOP/s, for a device the table lacks.
    pub peak: Option<f64>,
    /// A memory bandwidth in bytes/s (replacing the card's or the calibration's).
    pub bandwidth: Option<f64>,
    /// Seconds per kernel launch (replacing the default or the calibration's).
    pub launch_seconds: Option<f64>,
    /// The efficiencies.
    pub calibration: Option<Calibration>,
    /// How the attention core is costed (default: fused, or unfused on the calibration's own
    /// device).
    pub attention: Option<AttentionData>,
    /// How the experts are launched (default: grouped, or per-expert on the calibration's own
    /// device).
    pub experts: Option<ExpertLaunch>,
}

/// Where a [`DeviceRequest`]'s values were given, so that the device's name and the errors
/// name them as their reader gave them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Given {
    /// As arguments of a function (the library, Python): `card`, `peak`, `bandwidth`.
    #[default]
    Arguments,
    /// As `smelt predict`'s flags: `--card`, `--peak`, `--bandwidth`.
    Flags,
    /// As a budget file's keys: `[objective.time] card`, `peak`, `bandwidth`.
    TimeKeys,
}

impl Given {
    /// How `key` (`card`, `peak`, `bandwidth`) was given.
    fn name(self, key: &str) -> String {
        match self {
            Given::Arguments => key.to_owned(),
            Given::Flags => format!("--{key}"),
            Given::TimeKeys => format!("[objective.time] {key}"),
        }
    }
}

impl DeviceRequest {
    /// The roofline asked for, and a warning when a calibration measured on a CPU is applied
    /// to a card. A card and a peak together, or neither with no calibration, are errors.
    /// The values are named as a function's arguments ([`Given::Arguments`]).
    pub fn roofline(self) -> Result<(Roofline, Option<String>)> {
        self.roofline_given(Given::Arguments)
    }

    /// [`DeviceRequest::roofline`], with a peak's device and the errors naming the values
    /// as `given` (a flag, a budget file's key).
    pub fn roofline_given(self, given: Given) -> Result<(Roofline, Option<String>)> {
        let calibration = self.calibration;
        if let Some(c) = &calibration {
            c.validate()?;
        }
        let cuda_floor = calibration
            .as_ref()
            .filter(|c| c.backend == Backend::Cuda)
            .map(|c| c.device.launch_seconds);
        let mut warning = None;
        let (mut device, own) = match (self.card, self.peak, &calibration) {
            (Some(_), Some(_), _) => {
                return Err(Error::invalid("peak", "give a card or a peak, not both"));
            }
            (Some(card), None, _) => {
                if let Some(c) = calibration.as_ref().filter(|c| c.backend != Backend::Cuda) {
                    warning = Some(format!(
                        "the calibration was measured on {} ({} backend): its efficiencies \
                         are applied to {} as they are, not measured on it",
                        c.device.name,
                        c.backend,
                        card.spec().name
                    ));
                }
                let mut d = Device::card(card);
                if let Some(l) = cuda_floor {
                    d.launch_seconds = l;
                    d.source
                        .push_str("; launch: the calibration's measured floor");
                }
                (d, false)
            }
            (None, Some(peak), _) => (
                Device {
                    name: format!(
                        "a device of {} TFLOP/s ({})",
                        peak / 1e12,
                        given.name("peak")
                    ),
                    peak_flops_per_second: peak,
                    memory_bytes_per_second: None,
                    launch_seconds: cuda_floor.unwrap_or(DEFAULT_LAUNCH_SECONDS),
                    element_bytes: CARD_ELEMENT_BYTES,
                    source: format!("{}, {}", given.name("peak"), given.name("bandwidth")),
                },
                false,
            ),
            (None, None, Some(c)) => (c.device.clone(), true),
            (None, None, None) => {
                return Err(Error::invalid(
                    "card",
                    format!(
                        "give a card ({}), a peak ({}) or a calibration to predict with",
                        given.name("card"),
                        given.name("peak")
                    ),
                ));
            }
        };
        if let Some(w) = self.bandwidth {
            device.memory_bytes_per_second = Some(w);
        }
        if let Some(l) = self.launch_seconds {
            device.launch_seconds = l;
        }
        device.validate()?;
        let roof = Roofline {
            device,
            calibration,
            attention: self.attention.unwrap_or(match own {
                true => AttentionData::Unfused,
                false => AttentionData::Fused,
            }),
            experts: self.experts.unwrap_or(match own {
                true => ExpertLaunch::PerExpert,
                false => ExpertLaunch::Grouped,
            }),
        };
        Ok((roof, warning))
    }
}

/// What bounds a kernel's time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Bounds {
    /// Seconds spent where arithmetic bounds the time.
    pub compute: f64,
    /// Seconds spent where memory traffic bounds the time.
    pub memory: f64,
    /// Seconds of launch overhead.
    pub launch: f64,
}

impl Bounds {
    /// The total seconds.
    pub fn total(&self) -> f64 {
        self.compute + self.memory + self.launch
    }

    fn add(&mut self, o: Bounds) {
        self.compute += o.compute;
        self.memory += o.memory;
        self.launch += o.launch;
    }

    fn scaled(self, n: f64) -> Bounds {
        Bounds {
            compute: self.compute * n,
            memory: self.memory * n,
            launch: self.launch * n,
        }
    }
}

impl Roofline {
    /// The efficiency of `class` at `work` per launch.
    pub fn efficiency(&self, class: ShapeClass, work: f64) -> f64 {
        let Some(c) = &self.calibration else {
            return 1.0;
        };
        std::iter::once(class)
            .chain(class.fallbacks().iter().copied())
            .find_map(|c2| c.curves.get(&c2))
            .map_or(1.0, |curve| interpolate(curve, work.log2()))
    }

    /// The calibration's operand-traffic fit, when it applies: a calibration that kept one,
    /// on its own device (the same device and peak; module docs).
    pub fn traffic(&self) -> Option<&Traffic> {
        let c = self.calibration.as_ref()?;
        let own = c.device.name == self.device.name
            && c.device.peak_flops_per_second == self.device.peak_flops_per_second
            && c.device.element_bytes == self.device.element_bytes;
        c.traffic.as_ref().filter(|_| own)
    }

    /// Seconds of the arithmetic of one launch of `k` (its FLOPs, or a softmax's
    /// exponentials), at its efficiency (a GEMM's at the traffic fit's seconds per FLOP,
    /// where it applies).
    pub fn compute_seconds(&self, k: &Kernel) -> f64 {
        let class = ShapeClass::of(k);
        let w = work(k);
        if let (Some(t), Op::Gemm) = (self.traffic(), k.op) {
            return w * t.seconds_per_flop;
        }
        w / (rate(class, self.device.peak_flops_per_second) * self.efficiency(class, w))
    }

    /// Bytes one launch of `k` moves: its operands once.
    pub fn bytes(&self, k: &Kernel) -> f64 {
        let (a, b, c) = k.operands();
        (a + b + c) as f64 * self.device.element_bytes as f64
    }

    /// The time of all launches of `k`, as the roofline costs a kernel on its own
    /// (`max(compute, memory) + launch` per launch).
    pub fn kernel(&self, k: &Kernel) -> Bounds {
        let compute = self.compute_seconds(k);
        if let (Some(t), Op::Gemm) = (self.traffic(), k.op) {
            // Arithmetic and operand traffic added (module docs).
            return Bounds {
                compute,
                memory: self.bytes(k) * t.seconds_per_byte,
                launch: self.device.launch_seconds,
            }
            .scaled(k.count as f64);
        }
        let memory = self
            .device
            .memory_bytes_per_second
            .map_or(0.0, |w| self.bytes(k) / w);
        let one = match memory > compute {
            true => Bounds {
                memory,
                launch: self.device.launch_seconds,
                ..Bounds::default()
            },
            false => Bounds {
                compute,
                launch: self.device.launch_seconds,
                ..Bounds::default()
            },
        };
        one.scaled(k.count as f64)
    }

    /// The launches the prediction counts for `plan`: the plan's, with a fused attention
    /// kernel's two per layer execution for its tiles and a grouped GEMM's
    /// [`GROUPED_LAUNCHES`] per MoE layer execution for the experts'.
    pub fn launches(&self, model: &Model, plan: &Plan) -> u64 {
        let of = |c: Component| -> u64 {
            (plan.kernels.iter())
                .filter(|k| k.component == c)
                .map(|k| k.count)
                .sum()
        };
        let mut n: u64 = plan.kernels.iter().map(|k| k.count).sum();
        let tiles = of(Component::AttentionCore);
        if self.attention == AttentionData::Fused && tiles > 0 {
            n = n - tiles + 2 * plan.executions;
        }
        let experts = of(Component::Experts);
        if self.experts == ExpertLaunch::Grouped && experts > 0 {
            n = n - experts + GROUPED_LAUNCHES * moe_executions(model);
        }
        n
    }

    /// The predicted time of `plan` for `model`, by component.
    pub fn plan(&self, model: &Model, plan: &Plan) -> BTreeMap<Component, Bounds> {
        let mut out: BTreeMap<Component, Bounds> = BTreeMap::new();
        let mut fused = 0.0;
        let grouped = self.experts == ExpertLaunch::Grouped;
        for k in &plan.kernels {
            if self.attention == AttentionData::Fused && k.component == Component::AttentionCore {
                fused += self.compute_seconds(k) * k.count as f64;
                continue;
            }
            let mut b = self.kernel(k);
            if grouped && k.component == Component::Experts {
                b.launch = 0.0;
            }
            out.entry(k.component).or_default().add(b);
        }
        if grouped && let Some(e) = out.get_mut(&Component::Experts) {
            e.launch +=
                (GROUPED_LAUNCHES * moe_executions(model)) as f64 * self.device.launch_seconds;
        }
        if self.attention == AttentionData::Fused && fused > 0.0 {
            let io = fused_io_bytes(
                model,
                plan.tokens,
                plan.executions,
                self.device.element_bytes,
            );
            let memory = self.device.memory_bytes_per_second.map_or(0.0, |w| io / w);
            let launch = 2.0 * plan.executions as f64 * self.device.launch_seconds;
            let b = match memory > fused {
                true => Bounds {
                    memory,
                    launch,
                    ..Bounds::default()
                },
                false => Bounds {
                    compute: fused,
                    launch,
                    ..Bounds::default()
                },
            };
            out.entry(Component::AttentionCore).or_default().add(b);
        }
        out
    }
}

/// Executions of MoE layers per forward pass (a looped layer once per visit).
fn moe_executions(model: &Model) -> u64 {
    let dense: Vec<u64> = model
        .dense
        .as_ref()
        .map(|d| d.layers.clone())
        .unwrap_or_default();
    (1..=model.layers)
        .filter(|l| !dense.contains(l))
        .map(|l| model.visits(l))
        .sum()
}

/// Bytes a fused attention kernel moves over a training step of `executions` layer
/// executions of `tokens` tokens (module docs): per token, forward `Q, K, V` in and `O` out,
/// backward `Q, K, V, O, dO` in and `dQ, dK, dV` out.
pub fn fused_io_bytes(model: &Model, tokens: u64, executions: u64, element_bytes: u64) -> f64 {
    let (q_heads, kv_heads, dk, dv) = match &model.mla {
        // MLA's keys and values are per query head once up-projected.
        Some(a) => (
            model.heads,
            model.heads,
            a.qk_nope_head_dim + a.qk_rope_head_dim,
            a.v_head_dim,
        ),
        None => (model.heads, model.kv_heads, model.head_dim, model.head_dim),
    };
    let (q, kv, o) = (q_heads * dk, kv_heads * (dk + dv), q_heads * dv);
    let forward = q + kv + o;
    let backward = (q + kv + 2 * o) + (q + kv);
    (forward + backward) as f64 * (tokens * executions * element_bytes) as f64
}

/// One component's predicted time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComponentPrediction {
    /// Component.
    pub component: Component,
    /// Seconds of the training step (the whole stack), split by what bounds them.
    pub bounds: Bounds,
    /// Seconds of the training step.
    pub seconds: f64,
    /// Share of the model's time.
    pub time_share: f64,
}

/// One model's prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelPrediction {
    /// The model's name.
    pub name: String,
    /// Tokens in the batch (whole documents of the workload).
    pub tokens: u64,
    /// Layer executions per forward pass.
    pub layer_executions: u64,
    /// Kernel launches of the training step ([`Roofline::launches`]).
    pub launches: u64,
    /// Training FLOPs per token of the layer stack (the cost model's).
    pub flops_per_token: f64,
    /// Predicted seconds of one training step of the layer stack on the batch.
    pub seconds: f64,
    /// Predicted seconds per token.
    pub seconds_per_token: f64,
    /// The model FLOPs per token over the predicted seconds per token, as a share of the
    /// peak (the roofline's model FLOP utilisation of the layer stack).
    pub mfu: f64,
    /// What bounds the time, over the whole step.
    pub bounds: Bounds,
    /// Per component.
    pub components: Vec<ComponentPrediction>,
}

/// How a prediction is made: the batch and the routing, as for the bench.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PredictOptions {
    /// Tokens per batch (rounded to whole documents).
    pub tokens: u64,
    /// Expert assignment.
    pub routing: Routing,
}

impl Default for PredictOptions {
    /// A GPU bench's batch (16384 tokens), balanced routing.
    fn default() -> Self {
        Self {
            tokens: Backend::Cuda.default_tokens(),
            routing: Routing::Balanced,
        }
    }
}

/// The prediction of `spec` on `roof`.
pub fn predict_model(
    spec: &ModelSpec,
    roof: &Roofline,
    opts: &PredictOptions,
) -> Result<ModelPrediction> {
    spec.validate()?;
    if !(1..=super::MAX_TOKENS).contains(&opts.tokens) {
        return Err(Error::invalid(
            "tokens",
            format!(
                "must be between 1 and {} (got {})",
                super::MAX_TOKENS,
                opts.tokens
            ),
        ));
    }
    let docs = plan::documents(&spec.workload, opts.tokens)?;
    let p = plan::plan(&spec.model, &docs, spec.workload.attention, opts.routing)?;
    let by = roof.plan(&spec.model, &p);
    let mut bounds = Bounds::default();
    for b in by.values() {
        bounds.add(*b);
    }
    let seconds = bounds.total();
    let flops_per_token = p.flops() as f64 / p.tokens as f64;
    let seconds_per_token = seconds / p.tokens as f64;
    Ok(ModelPrediction {
        name: spec.name.clone().unwrap_or_else(|| "model".to_owned()),
        tokens: p.tokens,
        layer_executions: p.executions,
        launches: roof.launches(&spec.model, &p),
        flops_per_token,
        seconds,
        seconds_per_token,
        mfu: flops_per_token / seconds_per_token / roof.device.peak_flops_per_second,
        bounds,
        components: by
            .into_iter()
            .map(|(component, b)| ComponentPrediction {
                component,
                bounds: b,
                seconds: b.total(),
                time_share: b.total() / seconds,
            })
            .collect(),
    })
}

/// What a prediction was made with, for a report's reader.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictionBasis {
    /// The device.
    pub device: Device,
    /// How the attention core was costed.
    pub attention: AttentionData,
    /// How the routed experts' GEMMs were launched.
    pub experts: ExpertLaunch,
    /// Whether efficiencies come from measurements.
    pub calibrated: bool,
    /// The calibration's bench file, when calibrated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
    /// The device the calibration measured, when calibrated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibrated_on: Option<String>,
    /// The shape classes with a fitted curve, when calibrated.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calibrated_classes: Vec<ShapeClass>,
    /// The GEMMs' operand-traffic fit, when it applied (the calibration's own device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
    /// The batch and routing.
    pub options: PredictOptions,
}

impl PredictionBasis {
    /// The basis of predictions on `roof` with `opts`.
    pub fn of(roof: &Roofline, opts: &PredictOptions) -> Self {
        let c = roof.calibration.as_ref();
        PredictionBasis {
            device: roof.device.clone(),
            attention: roof.attention,
            experts: roof.experts,
            calibrated: c.is_some(),
            calibration: c.map(|c| c.source.clone()),
            calibrated_on: c.map(|c| c.device.name.clone()),
            calibrated_classes: c.map(Calibration::classes).unwrap_or_default(),
            traffic: roof.traffic().copied(),
            options: *opts,
        }
    }

    /// One line saying what the prediction assumes.
    pub fn summary(&self) -> String {
        let roof = match self.device.memory_bytes_per_second {
            Some(w) => format!(
                "{:.1} TFLOP/s, {:.2} TB/s",
                self.device.peak_flops_per_second / 1e12,
                w / 1e12
            ),
            None if self.traffic.is_some() => format!(
                "{:.1} GFLOP/s, memory as the GEMMs' fitted operand traffic",
                self.device.peak_flops_per_second / 1e9
            ),
            None => format!(
                "{:.1} GFLOP/s, no memory roof",
                self.device.peak_flops_per_second / 1e9
            ),
        };
        let how = match (&self.calibration, &self.calibrated_on) {
            (Some(file), Some(on)) => format!(
                "calibrated by {file} (measured on {on}; classes {})",
                self.calibrated_classes
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "uncalibrated roofline (efficiency 1)".to_owned(),
        };
        let how = match &self.traffic {
            Some(t) => format!(
                "{how}; GEMMs as arithmetic at {:.3} of the peak plus operand traffic at \
                 {:.1} GB/s (fitted to {} shapes, rms error {:.1}%)",
                t.peak_share(self.device.peak_flops_per_second),
                t.bandwidth() / 1e9,
                t.shapes,
                100.0 * t.rms_relative_error
            ),
            None => how,
        };
        format!(
            "predicted on {} ({roof}, launch {:.2} µs, {} attention, {} experts, {} tokens): \
             {how}",
            self.device.name,
            self.device.launch_seconds * 1e6,
            self.attention.as_str(),
            self.experts.as_str(),
            self.options.tokens
        )
    }
}

/// A prediction of one model, or of a model against its Baseline: `smelt predict --format
/// json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictReport {
    /// What the prediction assumes.
    pub basis: PredictionBasis,
    /// The models, the Baseline first when there are two.
    pub models: Vec<ModelPrediction>,
    /// Predicted seconds per token, second model over first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ratio: Option<f64>,
    /// Training FLOPs per token, second model over first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flop_ratio: Option<f64>,
}

/// Predicts `models` (the Baseline first) on `roof`.
pub fn predict(
    models: &[&ModelSpec],
    roof: &Roofline,
    opts: &PredictOptions,
) -> Result<PredictReport> {
    roof.device.validate()?;
    if let Some(c) = &roof.calibration {
        c.validate()?;
    }
    let out = models
        .iter()
        .map(|m| predict_model(m, roof, opts))
        .collect::<Result<Vec<_>>>()?;
    let ratio = |f: fn(&ModelPrediction) -> f64| (out.len() == 2).then(|| f(&out[1]) / f(&out[0]));
    Ok(PredictReport {
        basis: PredictionBasis::of(roof, opts),
        time_ratio: ratio(|m| m.seconds_per_token),
        flop_ratio: ratio(|m| m.flops_per_token),
        models: out,
    })
}

/// The predicted time of a looped model against its Baseline (a grid cell's `predicted`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PredictedRatio {
    /// Looped / Baseline predicted seconds per token.
    pub ratio: f64,
    /// The Baseline's predicted seconds per token.
    pub baseline_seconds_per_token: f64,
    /// The looped model's predicted seconds per token.
    pub looped_seconds_per_token: f64,
}

/// The predicted time ratio of `looped` to `baseline`.
pub fn predicted_ratio(
    baseline: &ModelSpec,
    looped: &ModelSpec,
    roof: &Roofline,
    opts: &PredictOptions,
) -> Result<PredictedRatio> {
    let (b, l) = (
        predict_model(baseline, roof, opts)?,
        predict_model(looped, roof, opts)?,
    );
    Ok(PredictedRatio {
        ratio: l.seconds_per_token / b.seconds_per_token,
        baseline_seconds_per_token: b.seconds_per_token,
        looped_seconds_per_token: l.seconds_per_token,
    })
}

/// The absolute error of `predicted` against a measured ratio, and whether the measured
/// interval holds it.
pub fn against_measured(predicted: f64, measured: &stats::RatioStats) -> (f64, bool) {
    let [lo, hi] = measured.interval;
    (
        (predicted - measured.median).abs(),
        (lo..=hi).contains(&predicted),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::Pass;

    fn device(bandwidth: Option<f64>, launch: f64) -> Device {
        Device {
            name: "test".into(),
            peak_flops_per_second: 1e12,
            memory_bytes_per_second: bandwidth,
            launch_seconds: launch,
            element_bytes: 2,
            source: "a test".into(),
        }
    }

    fn roof(bandwidth: Option<f64>, launch: f64) -> Roofline {
        Roofline {
            device: device(bandwidth, launch),
            calibration: None,
            attention: AttentionData::Unfused,
            experts: ExpertLaunch::PerExpert,
        }
    }

    #[test]
    fn a_kernel_whose_bytes_dominate_is_bandwidth_bound() {
        let r = roof(Some(1e9), 0.0);
        // 1 x 4096 x 4096: 2·16.8M FLOPs (33.5 µs at 1 TFLOP/s), 2·(4096 + 16.8M + 4096)
        // bytes (33.6 ms at 1 GB/s).
        let thin = Kernel::gemm(Component::Projections, Pass::Forward, [1, 4096, 4096], 1);
        let b = r.kernel(&thin);
        assert_eq!(b.compute, 0.0);
        let bytes = 2.0 * (4096.0 + 4096.0 * 4096.0 + 4096.0);
        assert!((b.memory - bytes / 1e9).abs() < 1e-12, "{b:?}");
        // A square one is compute-bound: 2·4096³ FLOPs against 3·2·4096² bytes.
        let square = Kernel::gemm(Component::Projections, Pass::Forward, [4096; 3], 1);
        let b = r.kernel(&square);
        assert_eq!(b.memory, 0.0);
        assert!((b.compute - 2.0 * 4096f64.powi(3) / 1e12).abs() < 1e-12);
    }

    #[test]
    fn time_is_additive_over_launches() {
        let r = roof(Some(1e11), 3e-6);
        let one = Kernel::gemm(Component::Experts, Pass::Forward, [64, 432, 1280], 1);
        let many = Kernel { count: 7, ..one };
        let (a, b) = (r.kernel(&one).total(), r.kernel(&many).total());
        assert!((b - 7.0 * a).abs() < 1e-15 * b.max(1.0), "{a} {b}");
        assert!((r.kernel(&many).launch - 7.0 * 3e-6).abs() < 1e-18);
    }

    #[test]
    fn a_models_prediction_is_the_sum_over_its_plan() {
        let spec = crate::model::ModelSpec::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../budgets/base-200m-s95.toml"
        )))
        .unwrap();
        for attention in [AttentionData::Unfused, AttentionData::Fused] {
            let r = Roofline {
                attention,
                ..roof(Some(2e12), 4e-6)
            };
            let opts = PredictOptions {
                tokens: 2048,
                routing: Routing::Balanced,
            };
            let p = predict_model(&spec, &r, &opts).unwrap();
            let docs = plan::documents(&spec.workload, 2048).unwrap();
            let plan =
                plan::plan(&spec.model, &docs, spec.workload.attention, opts.routing).unwrap();
            let mut sum = 0.0;
            for k in &plan.kernels {
                if attention == AttentionData::Fused && k.component == Component::AttentionCore {
                    continue;
                }
                sum += r.kernel(k).total();
            }
            if attention == AttentionData::Fused {
                let tiles: f64 = (plan.kernels.iter())
                    .filter(|k| k.component == Component::AttentionCore)
                    .map(|k| r.compute_seconds(k) * k.count as f64)
                    .sum();
                let io = fused_io_bytes(&spec.model, plan.tokens, plan.executions, 2) / 2e12;
                sum += tiles.max(io) + 2.0 * plan.executions as f64 * 4e-6;
            }
            assert!(
                (p.seconds - sum).abs() <= 1e-12 * sum,
                "{attention}: {p:?} {sum}"
            );
            let parts: f64 = p.components.iter().map(|c| c.seconds).sum();
            assert!((parts - p.seconds).abs() <= 1e-12 * sum);
            let all: u64 = plan.kernels.iter().map(|k| k.count).sum();
            let tiles: u64 = (plan.kernels.iter())
                .filter(|k| k.component == Component::AttentionCore)
                .map(|k| k.count)
                .sum();
            let expected = match attention {
                AttentionData::Unfused => all,
                AttentionData::Fused => all - tiles + 2 * plan.executions,
            };
            assert_eq!(p.launches, expected);
            // Grouped experts: the experts' launch overhead is nine launches per execution.
            let g = Roofline {
                experts: ExpertLaunch::Grouped,
                ..r.clone()
            };
            let pg = predict_model(&spec, &g, &opts).unwrap();
            let experts = |p: &ModelPrediction| {
                let c = p
                    .components
                    .iter()
                    .find(|c| c.component == Component::Experts);
                c.unwrap().bounds
            };
            let (a, b) = (experts(&p), experts(&pg));
            assert_eq!(a.compute + a.memory, b.compute + b.memory);
            assert!((b.launch - 9.0 * plan.executions as f64 * 4e-6).abs() < 1e-15);
        }
    }

    #[test]
    fn a_calibration_reproduces_what_it_measured() {
        // Shapes timed at a known efficiency are predicted at that efficiency.
        let shapes = [
            Kernel {
                count: 4,
                ..Kernel::gemm(Component::Projections, Pass::Forward, [1024, 1280, 1280], 1)
            },
            Kernel {
                count: 96,
                ..Kernel::gemm(Component::Experts, Pass::Forward, [43, 432, 1280], 1)
            },
        ];
        let peak = 1e11;
        let launch = 1e-7;
        let eff = [0.8, 0.3];
        let measured: Vec<(Kernel, f64)> = shapes
            .iter()
            .zip(eff)
            .map(|(k, e)| (*k, k.count as f64 * (work(k) / (peak * e) + launch)))
            .collect();
        let curves = fit(&measured, peak, launch);
        let mut d = device(None, launch);
        d.peak_flops_per_second = peak;
        let cal = Calibration {
            source: "t".into(),
            backend: Backend::Cpu,
            device: d.clone(),
            models: vec![],
            shapes: 2,
            curves,
            traffic: None,
        };
        cal.validate().unwrap();
        let r = Roofline {
            device: d,
            calibration: Some(cal),
            attention: AttentionData::Unfused,
            experts: ExpertLaunch::PerExpert,
        };
        for (k, t) in &measured {
            let p = r.kernel(k).total();
            assert!((p - t).abs() < 1e-9 * t, "{k:?}: {p} vs {t}");
        }
        // The tiles' GEMMs borrow the other GEMMs' curve; softmax has none and stays at 1.
        assert!((r.efficiency(ShapeClass::Tile, work(&shapes[0])) - 0.8).abs() < 1e-12);
        assert_eq!(r.efficiency(ShapeClass::Softmax, 1e6), 1.0);
    }

    #[test]
    fn the_traffic_fit_recovers_its_constants_and_applies_on_its_own_device_only() {
        // GEMMs timed as exactly x·F + y·B + λ per launch: the fit gives back x and y, and
        // predicts each shape's time, including one smaller than any it was fitted to.
        let (x, y, launch) = (1.0 / 1.5e11, 1.0 / 2.0e10, 2e-7);
        let shape = |m, n, k, count| Kernel {
            count,
            ..Kernel::gemm(Component::Experts, Pass::Forward, [m, n, k], 1)
        };
        let bytes = |k: &Kernel| {
            let (a, b, c) = k.operands();
            4.0 * (a + b + c) as f64
        };
        let time = |k: &Kernel| k.count as f64 * (work(k) * x + bytes(k) * y + launch);
        let fitted = [
            shape(991, 1280, 1280, 24),
            shape(991, 160, 1280, 24),
            shape(41, 432, 1280, 3264),
        ];
        let measured: Vec<(Kernel, f64)> = fitted.iter().map(|k| (*k, time(k))).collect();
        let t = fit_traffic(&measured, launch, 4).expect("a fit");
        assert!((t.seconds_per_flop - x).abs() < 1e-9 * x, "{t:?}");
        assert!((t.seconds_per_byte - y).abs() < 1e-9 * y, "{t:?}");
        assert!(t.rms_relative_error < 1e-9 && t.shapes == 3);
        let mut d = device(None, launch);
        d.peak_flops_per_second = 1.5e11;
        d.element_bytes = 4;
        let cal = Calibration {
            source: "t".into(),
            backend: Backend::Cpu,
            device: d.clone(),
            models: vec![],
            shapes: 3,
            curves: fit(&measured, 1.5e11, launch),
            traffic: Some(t),
        };
        let own = Roofline {
            device: d,
            calibration: Some(cal.clone()),
            attention: AttentionData::Unfused,
            experts: ExpertLaunch::PerExpert,
        };
        let smaller = shape(27, 352, 1056, 4896);
        for k in fitted.iter().chain([&smaller]) {
            let (p, m) = (own.kernel(k).total(), time(k));
            assert!((p - m).abs() < 1e-9 * m, "{k:?}: {p} vs {m}");
        }
        // The curves alone hold the smallest octave's efficiency below it: too fast.
        let curves_only = Roofline {
            calibration: Some(Calibration {
                traffic: None,
                ..cal.clone()
            }),
            ..own.clone()
        };
        assert!(curves_only.kernel(&smaller).total() < 0.99 * time(&smaller));
        // On a card, the measured device's bandwidth does not apply.
        let card = Roofline {
            device: Device::card(Card::H200Sxm),
            ..own.clone()
        };
        assert!(card.traffic().is_none() && own.traffic().is_some());
        // A calibration written before the fit still reads, without one.
        let mut json = serde_json::to_value(&cal).unwrap();
        json.as_object_mut().unwrap().remove("traffic");
        let old: Calibration = serde_json::from_value(json).unwrap();
        assert_eq!(old.traffic, None);
        // A fit through a single shape, or with a negative constant, is not kept.
        assert!(fit_traffic(&measured[..1], launch, 4).is_none());
        let faster_when_bigger = [(fitted[0], 1e-4), (fitted[1], 1e-2)];
        assert!(fit_traffic(&faster_when_bigger, launch, 4).is_none());
    }

    #[test]
    fn interpolation_is_linear_and_clamped() {
        let c = [[10.0, 0.2], [20.0, 0.6]];
        assert_eq!(interpolate(&c, 0.0), 0.2);
        assert_eq!(interpolate(&c, 30.0), 0.6);
        assert!((interpolate(&c, 15.0) - 0.4).abs() < 1e-12);
    }

    #[test]
    fn bad_devices_are_refused_by_field() {
        let mut d = device(Some(-1.0), 0.0);
        assert!(d.validate().unwrap_err().to_string().contains("bandwidth"));
        d.memory_bytes_per_second = None;
        d.peak_flops_per_second = 0.0;
        assert!(d.validate().unwrap_err().to_string().contains("peak"));
        let e = Calibration::from_bench_json("{}", "x.json").unwrap_err();
        assert!(e.to_string().contains("bench report"), "{e}");
    }
}
