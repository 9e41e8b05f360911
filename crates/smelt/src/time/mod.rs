//! The time model: the step time of a model's layer stack on a device, predicted by a
//! roofline walked over the kernel plan ([`crate::plan`]) kernel by kernel, so that a
//! prediction and the benchmark's measurement ([`mod@crate::bench`]) line up shape by shape.
//!
//! The files, by concern: `card.rs`, the table of cards with their sources and the one
//! parser of a card's name ([`Card::parse`]); `device.rs`, the device a prediction is for
//! ([`Device`]), the benchmark's [`Backend`]s and the peak an MFU divides by ([`Peak`]);
//! `request.rs`, a request (card, peak, calibration, figures replaced) resolved into a
//! [`Roofline`] ([`DeviceRequest`]); `efficiency.rs`, the share of the peak a kernel
//! reaches ([`ShapeClass`], [`Curve`]); `calibration.rs`, efficiencies fitted to a bench's
//! measured kernels ([`Calibration`]); `roofline.rs`, a kernel's and a plan's time
//! ([`Roofline`]); `predict.rs`, a model's prediction and `smelt predict`'s report
//! ([`predict`]); `ratio.rs`, a looped model's time against its Baseline's, measured
//! ([`TimeRatio`]) or predicted ([`PredictedRatio`]).
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

mod calibration;
mod card;
mod device;
mod efficiency;
pub mod kernels;
mod predict;
mod ratio;
mod request;
mod roofline;
pub mod step;
mod system;

pub use calibration::{Calibration, Traffic};
pub use card::{Card, CardSpec, cards_markdown};
pub use device::{
    BANDWIDTH, Backend, CARD_ELEMENT_BYTES, DEFAULT_LAUNCH_SECONDS, Device, PEAK_FLOPS, Peak,
    check_peak,
};
pub use efficiency::{Curve, EXP_RATE_DIVISOR, ShapeClass};
pub use predict::{
    ComponentPrediction, ModelPrediction, PredictOptions, PredictReport, PredictionBasis, predict,
    predict_model,
};
pub use ratio::{PredictedRatio, TimeRatio, predicted_ratio};
pub use request::{DeviceRequest, Given, PredictSpec, Prediction};
pub use roofline::{
    AttentionData, Bounds, ExpertLaunch, GROUPED_LAUNCHES, Roofline, fused_io_bytes,
};
pub use system::{System, SystemSpec};
