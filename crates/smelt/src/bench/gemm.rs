//! How the CUDA backend issues a kernel shape: in the operand layouts a trainer's GEMMs
//! have, in batches cuBLAS is known to take.
//!
//! A PyTorch linear layer computes `y = x·Wᵀ`: in cuBLAS's column-major terms its forward
//! GEMM reads one operand transposed (`TN`), the weight gradient `dW = dyᵀ·x` the other
//! (`NT`), and the data gradient `dx = dy·W` neither (`NN`); the attention core's batched
//! GEMMs (`Q·Kᵀ` forward) follow the same pattern by pass. The backend times each kernel in
//! its pass's layout ([`layout`]); the FLOPs are the same in every layout.
//!
//! `cublasGemmStridedBatchedEx` is documented for batches up to 65,535 on the grid's third
//! dimension in some cuBLAS versions, and larger batches have failed on some; a batch above
//! [`MAX_BATCH`] is cut into calls of at most that many GEMMs ([`batch_chunks`]), timed
//! together as one launch.

use crate::plan::{Kernel, Pass};

/// Whether cuBLAS reads an operand as stored (`N`) or transposed (`T`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// As stored.
    N,
    /// Transposed.
    T,
}

/// The operand layout of one GEMM `C (m×n) = op(A) (m×k) · op(B) (k×n)`, column-major.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmLayout {
    /// How A is read.
    pub transa: Op,
    /// How B is read.
    pub transb: Op,
    /// Leading dimension of A as stored (`m` for `N`, `k` for `T`).
    pub lda: u64,
    /// Leading dimension of B as stored (`k` for `N`, `n` for `T`).
    pub ldb: u64,
    /// Leading dimension of C.
    pub ldc: u64,
}

/// The layout a trainer's GEMM of `kernel`'s pass has: `TN` forward (and for a fused
/// attention kernel's recomputed scores), `NN` for the data gradient, `NT` for the weight
/// gradient.
pub fn layout(kernel: &Kernel) -> GemmLayout {
    let (transa, transb) = match kernel.pass {
        Pass::Forward | Pass::Recompute => (Op::T, Op::N),
        Pass::BackwardData => (Op::N, Op::N),
        Pass::BackwardWeight => (Op::N, Op::T),
    };
    GemmLayout {
        transa,
        transb,
        lda: match transa {
            Op::N => kernel.m,
            Op::T => kernel.k,
        },
        ldb: match transb {
            Op::N => kernel.k,
            Op::T => kernel.n,
        },
        ldc: kernel.m,
    }
}

/// The largest batch of one strided-batched call.
pub const MAX_BATCH: u64 = 65_535;

/// `batch` GEMMs as calls of at most [`MAX_BATCH`]: `(first, count)` per call, in order.
pub fn batch_chunks(batch: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut first = 0;
    while first < batch {
        let count = (batch - first).min(MAX_BATCH);
        out.push((first, count));
        first += count;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Component;

    fn kernel(pass: Pass) -> Kernel {
        Kernel::gemm(Component::Projections, pass, [3, 5, 7], 1)
    }

    #[test]
    fn each_pass_has_a_trainers_layout() {
        let f = layout(&kernel(Pass::Forward));
        assert_eq!(
            (f.transa, f.transb, f.lda, f.ldb, f.ldc),
            (Op::T, Op::N, 7, 7, 3)
        );
        let d = layout(&kernel(Pass::BackwardData));
        assert_eq!(
            (d.transa, d.transb, d.lda, d.ldb, d.ldc),
            (Op::N, Op::N, 3, 7, 3)
        );
        let w = layout(&kernel(Pass::BackwardWeight));
        assert_eq!(
            (w.transa, w.transb, w.lda, w.ldb, w.ldc),
            (Op::N, Op::T, 3, 5, 3)
        );
    }

    #[test]
    fn large_batches_are_cut_into_calls_cublas_takes() {
        assert_eq!(batch_chunks(0), vec![]);
        assert_eq!(batch_chunks(7), vec![(0, 7)]);
        assert_eq!(batch_chunks(65_535), vec![(0, 65_535)]);
        // The 200M pair's largest batch, and a 1.6B cell's.
        assert_eq!(batch_chunks(98_304), vec![(0, 65_535), (65_535, 32_769)]);
        let big = batch_chunks(506_880);
        assert_eq!(big.len(), 8);
        assert_eq!(big.iter().map(|c| c.1).sum::<u64>(), 506_880);
        assert!(big.iter().all(|c| c.1 <= MAX_BATCH));
        assert!(big.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
    }
}
