//! Calibration: the efficiencies a bench's measured kernel shapes reached, per shape class
//! and octave of work, and the GEMMs' operand-traffic line (the argument is in the docs of
//! [`crate::time`]): `smelt calibrate`'s file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::device::{Backend, Device};
use super::efficiency::{Curve, ShapeClass, rate, work};
use crate::error::{Error, Result};
use crate::plan::{Kernel, Op};

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

    /// An error unless its constants are in range (`EFFICIENCY` of `peak` for the
    /// arithmetic, the bandwidth of a device for the operands: [`super::BANDWIDTH`]) and it
    /// was fitted to at least two shapes with a finite error. The one check of a fit, made
    /// when `smelt calibrate` writes it and whenever one is read.
    pub fn validate(&self, peak: f64) -> Result<()> {
        let share = self.peak_share(peak);
        if !(self.seconds_per_flop.is_finite() && EFFICIENCY.contains(&share)) {
            return Err(Error::invalid(
                "traffic.seconds_per_flop",
                format!(
                    "must put a large GEMM at {:e} to {} of the peak ({peak:e} FLOP/s); got \
                     {:e} s/FLOP ({share:e} of the peak): refit with smelt calibrate",
                    EFFICIENCY.start(),
                    EFFICIENCY.end(),
                    self.seconds_per_flop
                ),
            ));
        }
        let w = self.bandwidth();
        if !(self.seconds_per_byte.is_finite() && super::BANDWIDTH.contains(&w)) {
            return Err(Error::invalid(
                "traffic.seconds_per_byte",
                format!(
                    "must be a bandwidth between {:e} and {:e} bytes/s; got {:e} s/byte: refit \
                     with smelt calibrate",
                    super::BANDWIDTH.start(),
                    super::BANDWIDTH.end(),
                    self.seconds_per_byte
                ),
            ));
        }
        if self.shapes < 2 {
            return Err(Error::invalid(
                "traffic.shapes",
                format!(
                    "must be at least 2 (a line through the GEMMs); got {}",
                    self.shapes
                ),
            ));
        }
        if !(self.rms_relative_error.is_finite() && self.rms_relative_error >= 0.0) {
            return Err(Error::invalid(
                "traffic.rms_relative_error",
                format!(
                    "must be a non-negative number; got {}",
                    self.rms_relative_error
                ),
            ));
        }
        Ok(())
    }
}

/// The efficiencies a calibration may hold, as shares of its peak: below 1e-7 a kernel would
/// run ten million times under the peak (a tiny launch on a busy CPU can reach 1e-4), above
/// 4 the peak (a card's, or the bench's measured ceiling) would be a quarter of what was
/// measured; either is a broken measurement or file.
pub const EFFICIENCY: std::ops::RangeInclusive<f64> = 1e-7..=4.0;

/// How many times faster than the bench's measured ceiling a kernel may run before the
/// calibration stops taking the ceiling as measured on a busy machine (and raising it to the
/// fastest kernel) and refuses the report instead.
const BUSY_CEILING: f64 = 100.0;

/// The work per launch a curve may be placed at: `log2` of 1 to 2^128 FLOPs.
const LOG2_WORK: std::ops::RangeInclusive<f64> = 0.0..=128.0;

/// The largest dimension, batch or launch count of a measured kernel a calibration reads
/// (2^40: a plan's largest, a query width of 2^16 heads of 2^20, is 2^36).
const MAX_KERNEL_DIM: u64 = 1 << 40;

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
        let mut peak = input
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
                let kk = &k.kernel;
                for (dim, v) in [
                    ("m", kk.m),
                    ("n", kk.n),
                    ("k", kk.k),
                    ("batch", kk.batch),
                    ("count", kk.count),
                ] {
                    if v > MAX_KERNEL_DIM {
                        return Err(Error::invalid(
                            format!("models[{}].kernels[].kernel.{dim}", m.name),
                            format!(
                                "must be at most {MAX_KERNEL_DIM} (got {v}): no kernel smelt \
                                 bench runs is that large; give a bench report as smelt bench \
                                 wrote it"
                            ),
                        ));
                    }
                }
                if !(k.seconds.is_finite() && k.seconds > 0.0) || k.kernel.count == 0 {
                    return Err(Error::invalid(
                        format!("models[{}].kernels[].seconds", m.name),
                        "must be a positive number of seconds with at least one launch",
                    ));
                }
                measured.push((k.kernel, k.seconds));
            }
        }
        if measured.is_empty() {
            return Err(Error::invalid(
                "models[].kernels",
                "the bench report times no kernel: nothing to fit; bench a model with smelt \
                 bench --format json and calibrate from that",
            ));
        }
        let mut curves = fit(&measured, peak, launch);
        // A measured ceiling (no datasheet peak) that some kernel outran by more than the
        // window allows, by at most `BUSY_CEILING`, was measured on a busy machine: the
        // fastest kernel is the ceiling. Further off, the file is broken and is refused.
        let top = curves.values().flatten().map(|p| p[1]).fold(0.0, f64::max);
        let raised =
            input.peak_flops_per_second.is_none() && top > *EFFICIENCY.end() && top <= BUSY_CEILING;
        if raised {
            peak *= top;
            curves = fit(&measured, peak, launch);
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
            source: match (input.peak_flops_per_second, raised) {
                (Some(_), _) => format!("{source}: the bench's peak, its launch floor"),
                (None, false) => {
                    format!("{source}: the bench's measured ceiling, its launch floor")
                }
                (None, true) => format!(
                    "{source}: its fastest kernel (the measured ceiling, {:.3e} FLOP/s, ran \
                     {top:.1}x slower: a busy machine), its launch floor",
                    input.ceiling_flops_per_second
                ),
            },
        };
        device.validate()?;
        let c = Calibration {
            source: source.to_owned(),
            backend: input.backend,
            curves,
            traffic: fit_traffic(&measured, launch, element_bytes, peak),
            shapes: measured.len(),
            models: input.models.iter().map(|m| m.name.clone()).collect(),
            device,
        };
        // The check every reader makes, so that what calibrate writes is never refused.
        c.validate()?;
        Ok(c)
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

    /// An error unless the calibration is usable: its device valid, fitted to at least one
    /// shape, every curve's points at rising work (`LOG2_WORK`) with efficiencies in
    /// `EFFICIENCY`, its traffic fit valid ([`Traffic::validate`]). The one check of a
    /// calibration: `smelt calibrate` makes it before it writes one, and `predict`,
    /// `grid --predict` and `[objective.time]` when they read one, so that a file calibrate
    /// wrote is never refused.
    pub fn validate(&self) -> Result<()> {
        self.device.validate()?;
        if self.shapes == 0 || self.curves.is_empty() {
            return Err(Error::invalid(
                "shapes",
                "a calibration is fitted to measured kernel shapes and this one has none: fit \
                 one with smelt calibrate from a bench report that timed kernels",
            ));
        }
        if let Some(t) = &self.traffic {
            t.validate(self.device.peak_flops_per_second)?;
        }
        for (class, curve) in &self.curves {
            let ok = curve
                .iter()
                .all(|[x, e]| LOG2_WORK.contains(x) && EFFICIENCY.contains(e))
                && curve.windows(2).all(|w| w[0][0] < w[1][0]);
            if !ok || curve.is_empty() {
                return Err(Error::invalid(
                    format!("curves.{class}"),
                    format!(
                        "must be points [log2 work, efficiency] with rising work between {} and \
                         {} and efficiencies (shares of the peak) between {:e} and {}: a \
                         measurement outside them is broken; rebench, or refit with smelt \
                         calibrate",
                        LOG2_WORK.start(),
                        LOG2_WORK.end(),
                        EFFICIENCY.start(),
                        EFFICIENCY.end()
                    ),
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
fn fit_traffic(
    measured: &[(Kernel, f64)],
    launch: f64,
    element_bytes: u64,
    peak: f64,
) -> Option<Traffic> {
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
    t.validate(peak).ok().map(|()| t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Component, Pass};
    use crate::time::card::Card;
    use crate::time::device::test_device;
    use crate::time::roofline::{AttentionData, ExpertLaunch, Roofline};

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
        let mut d = test_device(None, launch);
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
        let t = fit_traffic(&measured, launch, 4, 1.5e11).expect("a fit");
        assert!((t.seconds_per_flop - x).abs() < 1e-9 * x, "{t:?}");
        assert!((t.seconds_per_byte - y).abs() < 1e-9 * y, "{t:?}");
        assert!(t.rms_relative_error < 1e-9 && t.shapes == 3);
        let mut d = test_device(None, launch);
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
        assert!(fit_traffic(&measured[..1], launch, 4, 1.5e11).is_none());
        let faster_when_bigger = [(fitted[0], 1e-4), (fitted[1], 1e-2)];
        assert!(fit_traffic(&faster_when_bigger, launch, 4, 1.5e11).is_none());
    }

    #[test]
    fn a_ceiling_measured_on_a_busy_machine_gives_way_to_the_fastest_kernel() {
        // A GEMM timed at 20x the ceiling the bench measured (its ceiling round ran while
        // the machine was busy): the fastest kernel becomes the peak, and the source says so.
        let k = Kernel {
            count: 4,
            ..Kernel::gemm(Component::Projections, Pass::Forward, [1024, 1280, 1280], 1)
        };
        let ceiling = 1e10;
        let bench = |peak: Option<f64>| {
            let mut b = serde_json::json!({
                "backend": "cpu",
                "device": "cpu",
                "ceiling_flops_per_second": ceiling,
                "models": [{
                    "name": "m",
                    "kernels": [{"kernel": k, "seconds": 4.0 * work(&k) / (20.0 * ceiling)}],
                }],
            });
            if let Some(p) = peak {
                b["peak_flops_per_second"] = p.into();
            }
            b.to_string()
        };
        let c = Calibration::from_bench_json(&bench(None), "b.json").unwrap();
        let raised = c.device.peak_flops_per_second;
        assert!((raised - 20.0 * ceiling).abs() < 1e-9 * raised, "{raised}");
        assert!(
            c.device.source.contains("ran 20.0x slower"),
            "{}",
            c.device.source
        );
        let gemm = &c.curves[&ShapeClass::Gemm];
        assert!(gemm.iter().all(|p| (p[1] - 1.0).abs() < 1e-12), "{gemm:?}");
        // A datasheet peak is not moved: 20x over it is a broken file.
        let e = Calibration::from_bench_json(&bench(Some(ceiling)), "b.json").unwrap_err();
        assert!(e.to_string().contains("between 1e-7 and 4"), "{e}");
        // Nor is a ceiling more than BUSY_CEILING under a kernel.
        let far = bench(None).replace(
            &format!(
                "\"ceiling_flops_per_second\":{}",
                serde_json::json!(ceiling)
            ),
            &format!(
                "\"ceiling_flops_per_second\":{}",
                serde_json::json!(ceiling / 10.0)
            ),
        );
        assert_ne!(far, bench(None));
        let e = Calibration::from_bench_json(&far, "b.json").unwrap_err();
        assert!(e.to_string().contains("between 1e-7 and 4"), "{e}");
    }

    #[test]
    fn a_calibration_is_not_a_bench_report() {
        let e = Calibration::from_bench_json("{}", "x.json").unwrap_err();
        assert!(e.to_string().contains("bench report"), "{e}");
    }
}
