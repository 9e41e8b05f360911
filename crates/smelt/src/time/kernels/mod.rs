//! Kernel efficiency fitted to published kernel measurements: the copy of
//! `kernels.json` in `crates/smelt/data/published/` (434 rows transcribed from public
//! benchmarks, each with its `source_url`; that folder's README says what each source
//! counts). [`fit`] computes every constant from those rows alone; [`SHIPPED`] holds its
//! output rounded to four significant digits, and a test requires the two to be equal, so
//! the constants the step model uses are the script's, not hand-tuned.
//!
//! What is fitted, per card where the data has it:
//!
//! * **Best-shape GEMM share of the peak** ([`GemmShare`]): the best matmul throughput a
//!   brute-force shape search found (`mamf-finder.py` rows), over the card's dense peak of
//!   the same type (bf16 or fp8).
//! * **Memory-bound kernels' share of the HBM bandwidth** ([`KernelConstants::memory_share`]):
//!   the largest bandwidth a published GEMM reached (DeepGEMM's small-`M` rows on H800) over
//!   the card's datasheet bandwidth.
//! * **Per-launch overhead** ([`KernelConstants::launch_seconds`]): one constant added to
//!   each GEMM, `t = max(F / (e·P), B / (s·W)) + λ`, fitted by a 1-D search (0.1 µs steps)
//!   minimising the mean `|ln(t_model / t_published)|` over DeepGEMM's dense FP8 GEMMs (`e`
//!   their best share of the fp8 peak, `s` the memory share above).
//! * **Grouped GEMM share vs rows per expert** ([`GroupedCurve`]): `a · m / (m + m½)` of
//!   the fp8 peak, fitted on DeepGEMM's grouped rows (search over `m½` in 1/8-octave steps,
//!   `a` the median that makes each row exact, the pair minimising the mean `|ln|` error).
//!   The step model applies its shape (`m / (m + m½)`) to a card's best-shape share.
//! * **Fused attention throughput** ([`AttentionCurve`]): per card, kernel family
//!   (FlashAttention-2, FlashAttention-3, cuDNN) and pass, `E · x / (x + x½)` in the
//!   source's own FLOP convention, `x = S_eff · d` with `S_eff` the keys each query attends
//!   on average (`S`, `(S+1)/2` when causal, the window's count for a sliding window) and
//!   `d` the query-key head dim; fitted like the grouped curve.

mod shipped;

use serde::Serialize;
use serde_json::Value;

use super::card::Card;
use crate::error::{Error, Result};

pub use shipped::SHIPPED;

/// The copy of the published kernel rows the constants are fitted to.
pub const KERNELS_JSON: &str = include_str!("../../../data/published/kernels.json");

/// A number type of a GEMM row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    /// bf16 inputs.
    Bf16,
    /// fp8 (e4m3) inputs.
    Fp8,
}

/// A card's best-shape GEMM throughput as a share of its dense peak.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GemmShare {
    /// The card.
    pub card: Card,
    /// The inputs' type (the peak divided by is the card's of that type).
    pub dtype: Dtype,
    /// Best published throughput over the dense peak.
    pub share: f64,
}

/// A grouped GEMM's share of the peak against rows per group: `a · m / (m + half_rows)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GroupedCurve {
    /// The share at infinitely many rows, `a`.
    pub max_share: f64,
    /// Rows per group at which half of `a` is reached.
    pub half_rows: f64,
}

impl GroupedCurve {
    /// The curve's share at `rows` per group.
    pub fn share(&self, rows: f64) -> f64 {
        self.max_share * rows / (rows + self.half_rows)
    }
}

/// A fused attention kernel family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKernel {
    /// FlashAttention-2.
    FlashAttention2,
    /// FlashAttention-3 (Hopper).
    FlashAttention3,
    /// cuDNN's fused SDPA.
    Cudnn,
}

/// A pass of an attention measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionPass {
    /// Forward.
    Forward,
    /// Backward.
    Backward,
    /// Forward and backward, timed together.
    ForwardBackward,
}

/// Fused attention throughput, in the source's FLOP convention: `tflops · x / (x + half_work)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AttentionCurve {
    /// The card.
    pub card: Card,
    /// The kernel family.
    pub kernel: AttentionKernel,
    /// The pass.
    pub pass: AttentionPass,
    /// Throughput at long sequences, TFLOP/s.
    pub tflops: f64,
    /// `S_eff · d` at which half of it is reached.
    pub half_work: f64,
    /// Rows fitted.
    pub rows: usize,
}

impl AttentionCurve {
    /// Predicted TFLOP/s at `seff` keys per query and head dim `d`.
    pub fn tflops_at(&self, seff: f64, d: f64) -> f64 {
        let x = seff * d;
        self.tflops * x / (x + self.half_work)
    }
}

/// Every fitted constant (module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelConstants {
    /// Best-shape GEMM shares, per card and type.
    pub gemm: Vec<GemmShare>,
    /// Memory-bound kernels' share of the HBM bandwidth.
    pub memory_share: f64,
    /// Seconds added per GEMM launch.
    pub launch_seconds: f64,
    /// Grouped GEMM curve.
    pub grouped: GroupedCurve,
    /// Fused attention curves.
    pub attention: Vec<AttentionCurve>,
}

/// One kernel row read from the JSON (only what the fit uses).
#[derive(Debug, Clone)]
pub struct KernelRow {
    /// Row id (`K001`).
    pub id: String,
    /// `gemm`, `grouped_gemm` or `attention`.
    pub kind: String,
    /// The card, when the table has it.
    pub card: Option<Card>,
    /// The source's name.
    pub source: String,
    /// Implementation (attention rows).
    pub implementation: String,
    /// Pass (attention rows).
    pub pass: String,
    /// Number type as published.
    pub dtype: String,
    /// GEMM shape `M, N, K` (rows per group for a grouped GEMM), groups.
    pub shape: Option<[f64; 4]>,
    /// Attention: batch, query and key length, query heads, head dims (qk, v), causal,
    /// sliding window.
    pub attention: Option<AttentionShape>,
    /// Published TFLOP/s.
    pub tflops: Option<f64>,
    /// Published milliseconds.
    pub time_ms: Option<f64>,
    /// Published GB/s.
    pub bandwidth_gbps: Option<f64>,
}

/// The shape of an attention row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionShape {
    /// Batch.
    pub batch: f64,
    /// Query length.
    pub seq_q: f64,
    /// Key length.
    pub seq_kv: f64,
    /// Query heads.
    pub heads: f64,
    /// Query-key head dim.
    pub d_qk: f64,
    /// Value head dim.
    pub d_v: f64,
    /// Causal mask.
    pub causal: bool,
    /// Sliding window, keys.
    pub window: Option<f64>,
}

impl AttentionShape {
    /// Keys each query attends on average (module docs).
    pub fn seff(&self) -> f64 {
        let s = self.seq_kv;
        match (self.causal, self.window) {
            (false, _) => s,
            (true, Some(w)) if w < s => (w * (w + 1.0) / 2.0 + (s - w) * w) / s,
            (true, _) => (s + 1.0) / 2.0,
        }
    }
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The rows of `json` (the published file's layout); an error names what is malformed.
pub fn rows(json: &str) -> Result<Vec<KernelRow>> {
    let value: Value =
        serde_json::from_str(json).map_err(|e| Error::parse(format!("kernels.json: {e}")))?;
    let Some(list) = value.as_array() else {
        return Err(Error::invalid("kernels.json", "expected an array of rows"));
    };
    let mut out = Vec::with_capacity(list.len());
    for v in list {
        let kind = text(v, "kind");
        let gpu = text(v, "gpu");
        let shape = match (num(v, "M"), num(v, "N"), num(v, "K")) {
            (Some(m), Some(n), Some(k)) => Some([m, n, k, num(v, "groups").unwrap_or(1.0)]),
            _ => None,
        };
        let attention = (kind == "attention")
            .then(|| {
                Some(AttentionShape {
                    batch: num(v, "batch")?,
                    seq_q: num(v, "seqlen_q")?,
                    seq_kv: num(v, "seqlen_kv")?,
                    heads: num(v, "num_q_heads")?,
                    d_qk: num(v, "head_dim_qk")?,
                    d_v: num(v, "head_dim_v")?,
                    causal: v.get("causal").and_then(Value::as_bool)?,
                    window: num(v, "sliding_window"),
                })
            })
            .flatten();
        out.push(KernelRow {
            id: text(v, "id"),
            // "variant not stated" rows are not tied to a card.
            card: if gpu.contains("not stated") {
                None
            } else {
                Card::of_device(&gpu)
            },
            kind,
            source: text(v, "source"),
            implementation: text(v, "impl"),
            pass: text(v, "pass"),
            dtype: text(v, "dtype"),
            shape,
            attention,
            tflops: num(v, "tflops"),
            time_ms: num(v, "time_ms"),
            bandwidth_gbps: num(v, "memory_bandwidth_GBps"),
        });
    }
    Ok(out)
}

/// Rounds to four significant digits (what [`SHIPPED`] keeps).
pub fn sig4(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    format!("{x:.3e}").parse().unwrap_or(x)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Whether a row is a best-shape search's (`mamf-finder.py`).
fn best_shape(r: &KernelRow) -> bool {
    r.kind == "gemm" && r.source.contains("mamf-finder")
}

/// Whether a row is DeepGEMM's.
fn deepgemm(r: &KernelRow) -> bool {
    r.source.contains("DeepGEMM")
}

/// A best-shape row's type.
fn dtype_of(r: &KernelRow) -> Dtype {
    if r.dtype.contains("float8") || r.dtype.to_lowercase().contains("fp8") {
        Dtype::Fp8
    } else {
        Dtype::Bf16
    }
}

/// The card's dense peak of `dtype`, FLOP/s.
pub fn peak(card: Card, dtype: Dtype) -> Option<f64> {
    let s = card.spec();
    match dtype {
        Dtype::Bf16 => Some(s.peak_flops_per_second),
        Dtype::Fp8 => s.fp8_peak_flops_per_second,
    }
}

/// The attention family of an implementation name, for the fused kernels only.
pub fn attention_kernel(implementation: &str) -> Option<AttentionKernel> {
    if implementation.contains("FlashAttention-3") {
        Some(AttentionKernel::FlashAttention3)
    } else if implementation == "FlashAttention-2"
        || implementation.starts_with("FlashAttention-2 native")
    {
        Some(AttentionKernel::FlashAttention2)
    } else if implementation == "cuDNN"
        || implementation.starts_with("cuDNN SDPA")
        || implementation.contains("SDPA cuDNN backend")
    {
        Some(AttentionKernel::Cudnn)
    } else {
        None
    }
}

fn attention_pass(pass: &str) -> Option<AttentionPass> {
    match pass {
        "fwd" => Some(AttentionPass::Forward),
        "bwd" => Some(AttentionPass::Backward),
        "fwd+bwd" => Some(AttentionPass::ForwardBackward),
        _ => None,
    }
}

/// A DeepGEMM dense row's time model at compute share `e`, memory share `s`, launch `l`.
fn gemm_seconds(r: &KernelRow, e: f64, s: f64, l: f64) -> Option<f64> {
    let [m, n, k, g] = r.shape?;
    let card = r.card?;
    let p8 = peak(card, Dtype::Fp8)?;
    let flops = 2.0 * m * n * k * g;
    // fp8 operands (1 byte), bf16 output (2 bytes).
    let bytes = g * (m * k + n * k + 2.0 * m * n);
    Some((flops / (e * p8)).max(bytes / (s * card.spec().memory_bytes_per_second)) + l)
}

/// A row's published seconds (from its time, or its FLOPs over its TFLOP/s).
fn gemm_published_seconds(r: &KernelRow) -> Option<f64> {
    let [m, n, k, g] = r.shape?;
    Some(2.0 * m * n * k * g / (r.tflops? * 1e12))
}

/// The search grid of half points: `base · 2^(i/8)`, `i` in `0..=steps`.
fn octaves(base: f64, steps: u32) -> impl Iterator<Item = f64> {
    (0..=steps).map(move |i| base * 2f64.powf(f64::from(i) / 8.0))
}

/// Fits `a · x / (x + h)` to `(x, y)` pairs: for each `h` of the grid, `a` the median
/// making each pair exact; the pair of least mean `|ln(model / y)|`.
fn fit_saturating(points: &[(f64, f64)], grid: impl Iterator<Item = f64>) -> (f64, f64) {
    let mut best = (f64::INFINITY, f64::NAN, f64::NAN);
    for h in grid {
        let a = median(points.iter().map(|&(x, y)| y * (x + h) / x).collect());
        let err = mean(
            &points
                .iter()
                .map(|&(x, y)| (a * x / (x + h) / y).ln().abs())
                .collect::<Vec<_>>(),
        );
        if err < best.0 {
            best = (err, a, h);
        }
    }
    (best.1, best.2)
}

/// Fits every constant to `rows` (module docs).
pub fn fit(rows: &[KernelRow]) -> Result<KernelConstants> {
    let missing = |what: &str| Error::invalid("kernels.json", format!("no rows for {what}"));
    // Best-shape GEMM shares: the best row per card and type.
    let mut gemm: Vec<GemmShare> = Vec::new();
    for r in rows.iter().filter(|r| best_shape(r)) {
        let (Some(card), Some(t)) = (r.card, r.tflops) else {
            continue;
        };
        let dtype = dtype_of(r);
        let Some(p) = peak(card, dtype) else { continue };
        let share = sig4(t * 1e12 / p);
        match gemm.iter_mut().find(|g| g.card == card && g.dtype == dtype) {
            Some(g) => g.share = g.share.max(share),
            None => gemm.push(GemmShare { card, dtype, share }),
        }
    }
    gemm.sort_by_key(|g| (g.card.as_str(), g.dtype == Dtype::Fp8));
    // Memory share: the largest bandwidth a DeepGEMM row reached.
    let memory_share = rows
        .iter()
        .filter(|r| deepgemm(r))
        .filter_map(|r| Some(r.bandwidth_gbps? * 1e9 / r.card?.spec().memory_bytes_per_second))
        .fold(f64::NAN, f64::max);
    if !memory_share.is_finite() {
        return Err(missing("DeepGEMM bandwidths"));
    }
    let memory_share = sig4(memory_share);
    // Launch overhead on DeepGEMM's dense rows.
    let dense: Vec<&KernelRow> = rows
        .iter()
        .filter(|r| deepgemm(r) && r.kind == "gemm" && r.shape.is_some())
        .collect();
    let e = dense
        .iter()
        .filter_map(|r| Some(r.tflops? * 1e12 / peak(r.card?, Dtype::Fp8)?))
        .fold(f64::NAN, f64::max);
    if dense.is_empty() || !e.is_finite() {
        return Err(missing("DeepGEMM dense GEMMs"));
    }
    let mut best = (f64::INFINITY, 0.0);
    for step in 0..=200u32 {
        let l = f64::from(step) * 1e-7;
        let errs: Vec<f64> = dense
            .iter()
            .filter_map(|r| {
                Some(
                    (gemm_seconds(r, e, memory_share, l)? / gemm_published_seconds(r)?)
                        .ln()
                        .abs(),
                )
            })
            .collect();
        let m = mean(&errs);
        if m < best.0 {
            best = (m, l);
        }
    }
    let launch_seconds = sig4(best.1);
    // Grouped GEMM curve.
    let grouped_points: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| deepgemm(r) && r.kind == "grouped_gemm")
        .filter_map(|r| Some((r.shape?[0], r.tflops? * 1e12 / peak(r.card?, Dtype::Fp8)?)))
        .collect();
    if grouped_points.is_empty() {
        return Err(missing("DeepGEMM grouped GEMMs"));
    }
    let (a, h) = fit_saturating(&grouped_points, octaves(1.0, 13 * 8));
    let grouped = GroupedCurve {
        max_share: sig4(a),
        half_rows: sig4(h),
    };
    let attention = fit_attention(rows);
    Ok(KernelConstants {
        gemm,
        memory_share,
        launch_seconds,
        grouped,
        attention,
    })
}

/// The fused attention curves per card, family and pass (module docs).
fn fit_attention(rows: &[KernelRow]) -> Vec<AttentionCurve> {
    let mut keys: Vec<(Card, AttentionKernel, AttentionPass)> = Vec::new();
    for r in rows {
        if let (Some(card), Some(k), Some(p), Some(_)) = (
            r.card,
            attention_kernel(&r.implementation),
            attention_pass(&r.pass),
            r.attention,
        ) && r.tflops.is_some()
            && !keys.contains(&(card, k, p))
        {
            keys.push((card, k, p));
        }
    }
    keys.sort_by_key(|&(c, k, p)| (c.as_str(), k, p));
    let mut attention = Vec::new();
    for (card, kernel, pass) in keys {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| {
                r.card == Some(card)
                    && attention_kernel(&r.implementation) == Some(kernel)
                    && attention_pass(&r.pass) == Some(pass)
            })
            .filter_map(|r| {
                let s = r.attention?;
                Some((s.seff() * s.d_qk, r.tflops?))
            })
            .collect();
        let (t, h) = fit_saturating(&points, octaves(64.0, 20 * 8));
        attention.push(AttentionCurve {
            card,
            kernel,
            pass,
            tflops: sig4(t),
            half_work: sig4(h),
            rows: points.len(),
        });
    }
    attention
}

/// One kernel row predicted by the constants.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelCheck {
    /// Row id.
    pub id: String,
    /// The class: `best-shape gemm`, `dense gemm (DeepGEMM)`, `grouped gemm (DeepGEMM)`,
    /// `attention`.
    pub class: &'static str,
    /// Published TFLOP/s.
    pub published_tflops: f64,
    /// Predicted TFLOP/s.
    pub predicted_tflops: f64,
    /// `published / predicted − 1`: the time's relative error.
    pub error: f64,
}

/// Predicts every row the constants cover (in-sample: the rows they were fitted on).
pub fn check(rows: &[KernelRow], c: &KernelConstants) -> Vec<KernelCheck> {
    let mut out = Vec::new();
    let dense_e = rows
        .iter()
        .filter(|r| deepgemm(r) && r.kind == "gemm")
        .filter_map(|r| Some(r.tflops? * 1e12 / peak(r.card?, Dtype::Fp8)?))
        .fold(f64::NAN, f64::max);
    for r in rows {
        let Some(t) = r.tflops else { continue };
        let push = |out: &mut Vec<KernelCheck>, class: &'static str, pred: f64| {
            if pred.is_finite() && pred > 0.0 {
                out.push(KernelCheck {
                    id: r.id.clone(),
                    class,
                    published_tflops: t,
                    predicted_tflops: pred,
                    error: pred / t - 1.0,
                });
            }
        };
        if best_shape(r) {
            // Predicted from the card generation's mean share (leave the row's own card
            // in: in-sample).
            if let Some(card) = r.card {
                let d = dtype_of(r);
                let family = generation(card);
                let shares: Vec<f64> = (c.gemm.iter())
                    .filter(|g| g.dtype == d && generation(g.card) == family)
                    .map(|g| g.share)
                    .collect();
                if let Some(p) = peak(card, d) {
                    push(&mut out, "best-shape gemm", mean(&shares) * p / 1e12);
                }
            }
        } else if deepgemm(r) && r.kind == "gemm" {
            if let (Some(s), Some(p)) = (
                gemm_seconds(r, dense_e, c.memory_share, c.launch_seconds),
                r.shape,
            ) {
                let [m, n, k, g] = p;
                push(
                    &mut out,
                    "dense gemm (DeepGEMM)",
                    2.0 * m * n * k * g / s / 1e12,
                );
            }
        } else if deepgemm(r) && r.kind == "grouped_gemm" {
            if let (Some(card), Some(p)) = (r.card, r.shape)
                && let Some(p8) = peak(card, Dtype::Fp8)
            {
                push(
                    &mut out,
                    "grouped gemm (DeepGEMM)",
                    c.grouped.share(p[0]) * p8 / 1e12,
                );
            }
        } else if let (Some(card), Some(k), Some(p), Some(s)) = (
            r.card,
            attention_kernel(&r.implementation),
            attention_pass(&r.pass),
            r.attention,
        ) && let Some(curve) = c
            .attention
            .iter()
            .find(|a| a.card == card && a.kernel == k && a.pass == p)
        {
            push(&mut out, "attention", curve.tflops_at(s.seff(), s.d_qk));
        }
    }
    out
}

/// A card's architecture generation, for sharing best-shape shares across a generation.
fn generation(card: Card) -> u8 {
    match card {
        Card::A100 | Card::A100Pcie => 0,
        Card::B200 | Card::B300 | Card::Gb200 | Card::Gb300 => 2,
        _ => 1,
    }
}

/// Median and largest `|error|` of the checks of `class`.
pub fn summary(checks: &[KernelCheck], class: &str) -> (usize, f64, f64) {
    let e: Vec<f64> = (checks.iter())
        .filter(|c| c.class == class)
        .map(|c| c.error.abs())
        .collect();
    let max = e.iter().copied().fold(0.0, f64::max);
    (e.len(), median(e), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_constants_are_the_fit_of_the_published_rows() {
        let r = rows(KERNELS_JSON).unwrap();
        assert_eq!(r.len(), 434);
        let fitted = fit(&r).unwrap();
        assert_eq!(
            fitted,
            SHIPPED.owned(),
            "{}",
            serde_json::to_string(&fitted).unwrap()
        );
    }

    #[test]
    fn the_fit_meets_the_kernel_rows_targets() {
        let r = rows(KERNELS_JSON).unwrap();
        let checks = check(&r, &SHIPPED.owned());
        let (n, med, _) = summary(&checks, "attention");
        assert!(n >= 200 && med <= 0.10, "attention: {n} rows, median {med}");
        let (n, med, _) = summary(&checks, "best-shape gemm");
        assert!(n >= 10 && med <= 0.05, "best-shape: {n} rows, median {med}");
    }

    #[test]
    fn malformed_files_are_refused() {
        assert!(rows("{").is_err());
        assert!(rows("{}").unwrap_err().to_string().contains("kernels.json"));
        assert!(fit(&rows("[]").unwrap()).is_err());
    }
}
