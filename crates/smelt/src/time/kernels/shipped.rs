//! The constants [`super::fit`] computes from the published kernel rows, rounded to four
//! significant digits (a test requires them equal to the fit's output).

use super::{
    AttentionCurve, AttentionKernel, AttentionPass, Dtype, GemmShare, GroupedCurve, KernelConstants,
};
use crate::time::card::Card;

/// The shipped constants, as static data.
#[derive(Debug, Clone, Copy)]
pub struct Shipped {
    /// Best-shape GEMM shares.
    pub gemm: &'static [GemmShare],
    /// Memory-bound kernels' share of the HBM bandwidth.
    pub memory_share: f64,
    /// Seconds added per GEMM launch.
    pub launch_seconds: f64,
    /// Grouped GEMM curve.
    pub grouped: GroupedCurve,
    /// Fused attention curves.
    pub attention: &'static [AttentionCurve],
}

impl Shipped {
    /// The same constants, owned.
    pub fn owned(&self) -> KernelConstants {
        KernelConstants {
            gemm: self.gemm.to_vec(),
            memory_share: self.memory_share,
            launch_seconds: self.launch_seconds,
            grouped: self.grouped,
            attention: self.attention.to_vec(),
        }
    }
}

/// The fit of `data/published/kernels.json` ([`super::fit`]).
pub const SHIPPED: Shipped = Shipped {
    gemm: &[
        GemmShare {
            card: Card::A100,
            dtype: Dtype::Bf16,
            share: 0.8692,
        },
        GemmShare {
            card: Card::B200,
            dtype: Dtype::Bf16,
            share: 0.7756,
        },
        GemmShare {
            card: Card::B200,
            dtype: Dtype::Fp8,
            share: 0.7628,
        },
        GemmShare {
            card: Card::B300,
            dtype: Dtype::Bf16,
            share: 0.7862,
        },
        GemmShare {
            card: Card::B300,
            dtype: Dtype::Fp8,
            share: 0.7452,
        },
        GemmShare {
            card: Card::Gb200,
            dtype: Dtype::Bf16,
            share: 0.7288,
        },
        GemmShare {
            card: Card::Gb200,
            dtype: Dtype::Fp8,
            share: 0.7231,
        },
        GemmShare {
            card: Card::Gh200,
            dtype: Dtype::Bf16,
            share: 0.8375,
        },
        GemmShare {
            card: Card::Gh200,
            dtype: Dtype::Fp8,
            share: 0.7757,
        },
        GemmShare {
            card: Card::H100Sxm,
            dtype: Dtype::Bf16,
            share: 0.803,
        },
        GemmShare {
            card: Card::H100Sxm,
            dtype: Dtype::Fp8,
            share: 0.7088,
        },
        GemmShare {
            card: Card::H200Sxm,
            dtype: Dtype::Fp8,
            share: 0.7344,
        },
    ],
    memory_share: 0.7964,
    launch_seconds: 1.9e-6,
    grouped: GroupedCurve {
        max_share: 0.6328,
        half_rows: 107.6,
    },
    attention: &[
        AttentionCurve {
            card: Card::B200,
            kernel: AttentionKernel::FlashAttention2,
            pass: AttentionPass::Forward,
            tflops: 463.0,
            half_work: 131100.0,
            rows: 9,
        },
        AttentionCurve {
            card: Card::B200,
            kernel: AttentionKernel::FlashAttention2,
            pass: AttentionPass::Backward,
            tflops: 363.8,
            half_work: 110200.0,
            rows: 9,
        },
        AttentionCurve {
            card: Card::B200,
            kernel: AttentionKernel::Cudnn,
            pass: AttentionPass::Forward,
            tflops: 1649.0,
            half_work: 340000.0,
            rows: 9,
        },
        AttentionCurve {
            card: Card::B200,
            kernel: AttentionKernel::Cudnn,
            pass: AttentionPass::Backward,
            tflops: 1216.0,
            half_work: 202100.0,
            rows: 9,
        },
        AttentionCurve {
            card: Card::Gb200,
            kernel: AttentionKernel::Cudnn,
            pass: AttentionPass::Forward,
            tflops: 1787.0,
            half_work: 77940.0,
            rows: 20,
        },
        AttentionCurve {
            card: Card::Gb200,
            kernel: AttentionKernel::Cudnn,
            pass: AttentionPass::Backward,
            tflops: 1258.0,
            half_work: 55110.0,
            rows: 20,
        },
        AttentionCurve {
            card: Card::H100Sxm,
            kernel: AttentionKernel::FlashAttention2,
            pass: AttentionPass::Forward,
            tflops: 328.8,
            half_work: 13780.0,
            rows: 36,
        },
        AttentionCurve {
            card: Card::H100Sxm,
            kernel: AttentionKernel::FlashAttention2,
            pass: AttentionPass::ForwardBackward,
            tflops: 318.1,
            half_work: 21250.0,
            rows: 24,
        },
        AttentionCurve {
            card: Card::H100Sxm,
            kernel: AttentionKernel::FlashAttention3,
            pass: AttentionPass::Forward,
            tflops: 655.0,
            half_work: 42490.0,
            rows: 35,
        },
        AttentionCurve {
            card: Card::H100Sxm,
            kernel: AttentionKernel::Cudnn,
            pass: AttentionPass::Forward,
            tflops: 556.0,
            half_work: 25270.0,
            rows: 36,
        },
        AttentionCurve {
            card: Card::H200Sxm,
            kernel: AttentionKernel::Cudnn,
            pass: AttentionPass::Forward,
            tflops: 754.8,
            half_work: 71470.0,
            rows: 28,
        },
        AttentionCurve {
            card: Card::H200Sxm,
            kernel: AttentionKernel::Cudnn,
            pass: AttentionPass::Backward,
            tflops: 611.9,
            half_work: 65540.0,
            rows: 28,
        },
    ],
};
