//! Kernel efficiency: the share of the peak a kernel reaches, per shape class ([`ShapeClass`])
//! as a curve over the work per launch ([`Curve`]), and the work and rate it is measured in.

use crate::names::named_enum;
use crate::plan::{Component, Kernel, Op};

/// The exponentials a device computes per second, as a share of its dense peak: 1/256
/// (FlashAttention-3, Shah et al. 2024, §3.1: 3.9 TFLOP/s of special functions against
/// 989 TFLOP/s of bf16 matrix multiply on the H100 SXM5).
pub const EXP_RATE_DIVISOR: f64 = 256.0;

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
    pub(super) fn fallbacks(self) -> &'static [ShapeClass] {
        match self {
            ShapeClass::Gemm => &[ShapeClass::Experts],
            ShapeClass::Experts => &[ShapeClass::Gemm],
            ShapeClass::Tile => &[ShapeClass::Gemm, ShapeClass::Experts],
            ShapeClass::Softmax => &[],
        }
    }
}

/// An efficiency curve: `(log2 work per launch, efficiency)` points, sorted.
pub type Curve = Vec<[f64; 2]>;

/// The product of `xs` as a float: exact in 128 bits then rounded once where it fits (every
/// kernel of a plan), else multiplied in floats (a shape read from a file, which a
/// calibration refuses).
fn product(xs: &[u64]) -> f64 {
    let exact = (xs.iter()).try_fold(1u128, |p, &x| p.checked_mul(u128::from(x)));
    match exact {
        Some(p) => p as f64,
        None => xs.iter().map(|&x| x as f64).product(),
    }
}

/// Work per launch: FLOPs for a GEMM, score elements for a softmax.
pub(super) fn work(k: &Kernel) -> f64 {
    match k.op {
        Op::Gemm => 2.0 * product(&[k.m, k.n, k.k, k.batch]),
        Op::Softmax => product(&[k.m, k.n, k.batch]),
    }
}

/// The rate a class's work runs at, at efficiency 1: the peak, or the exponentials'.
pub(super) fn rate(class: ShapeClass, peak: f64) -> f64 {
    match class {
        ShapeClass::Softmax => peak / EXP_RATE_DIVISOR,
        _ => peak,
    }
}

/// `curve` at `x` (linear between points, constant beyond the ends).
pub(super) fn interpolate(curve: &[[f64; 2]], x: f64) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_is_linear_and_clamped() {
        let c = [[10.0, 0.2], [20.0, 0.6]];
        assert_eq!(interpolate(&c, 0.0), 0.2);
        assert_eq!(interpolate(&c, 30.0), 0.6);
        assert!((interpolate(&c, 15.0) - 0.4).abs() < 1e-12);
    }
}
