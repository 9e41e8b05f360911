//! The GPU backend's inputs, laid out on the host (no driver needed, so the layout is tested
//! and measured anywhere): one device-resident pool of random bf16 values, filled once per
//! run, at least [`POOL_MIN_ELEMS`] long (twice the largest GPU L2 of today, so an operand
//! is not timed warm out of the cache); every kernel shape takes its A and B operands as
//! views into it at offsets that rotate from call to call; one output buffer as long as the
//! largest call's C. Identical launches of a shape (heads, documents, experts with the same
//! token count, layers) are batched into strided-batched calls of `group` launches.
//!
//! Setup is one pool fill ([`fill`], in parallel, seeded per chunk so the values do not
//! depend on the number of threads) and one pass over the kernel shapes: it does not grow
//! with their number beyond that pass.

use crate::error::{Error, Result};
use crate::plan::{Kernel, Plan};
use crate::rng::{Lcg, SplitMix64};

/// The pool's least length in bf16 elements (256 MiB).
pub const POOL_MIN_ELEMS: usize = 128 << 20;
/// The largest pool, in elements (16 GiB): a plan needing more is refused.
pub const POOL_MAX_ELEMS: usize = 8 << 30;
/// The most elements one batched call's output may take (2 GiB of bf16).
pub const OUT_MAX_ELEMS: usize = 1 << 30;
/// Offsets are multiples of this many elements (256 bytes).
const ALIGN: usize = 128;

/// Elements filled per seeded chunk.
const FILL_CHUNK: usize = 1 << 20;

/// `len` random bf16 values (as bit patterns) in `[-1, -0.25] ∪ [0.25, 1]`, never zero: the
/// pool's contents. The same `len` gives the same values on any machine.
pub fn fill(len: usize) -> Vec<u16> {
    let mut out = vec![0u16; len];
    crate::par::for_chunks(&mut out, FILL_CHUNK, |i, chunk| {
        let mut rng = Lcg::new(SplitMix64::new(0x5EED ^ i as u64).next_u64());
        for x in chunk {
            *x = bf16_bits(rng.nonzero_unit());
        }
    });
    out
}

/// `x` rounded to the nearest bf16 (ties to even), as bits; `x` is finite.
fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

fn aligned(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// One kernel shape's place in the pool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    /// The kernel.
    pub kernel: Kernel,
    /// Identical launches batched into one strided-batched call.
    pub group: u64,
    /// Elements of A, B and C per call (`group × batch × m·k`, `k·n`, `m·n`).
    pub a: usize,
    /// See `a`.
    pub b: usize,
    /// See `a`.
    pub c: usize,
}

impl Slot {
    /// Batched GEMMs per call: `group × batch`.
    pub fn calls_batch(&self) -> u64 {
        self.group * self.kernel.batch
    }

    /// The offsets of A and B for the `call`-th call in a pool of `pool` elements: they move
    /// on by the operands' length each call, wrapping around.
    pub fn offsets(&self, call: u64, pool: usize) -> (usize, usize) {
        let span = aligned(self.a) + aligned(self.b);
        let room = pool - span;
        let a = ((call as usize).wrapping_mul(span) % (room / ALIGN + 1)) * ALIGN;
        (a, a + aligned(self.a))
    }
}

/// The layout of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The pool's length in elements.
    pub pool: usize,
    /// The output buffer's length in elements.
    pub out: usize,
    /// One slot per kernel shape of each plan, in plan order.
    pub slots: Vec<Vec<Slot>>,
}

/// Lays out `plans` (and the ceiling's `ceiling³` GEMM) in one pool.
pub fn layout(plans: &[&Plan], ceiling: u64) -> Result<Layout> {
    let elems = |k: &Kernel| -> Result<(usize, usize, usize)> {
        let (a, b, c) = k.operands();
        let e = |x: u128| usize::try_from(x).ok();
        match (e(a), e(b), e(c)) {
            (Some(a), Some(b), Some(c)) => Ok((a, b, c)),
            _ => Err(Error::invalid("tokens", "a kernel too large to address")),
        }
    };
    let one = |k: Kernel| -> Result<Slot> {
        let (a, b, c) = elems(&k)?;
        // As many launches per call as fit in half the pool's least length and the output.
        let by_inputs = (POOL_MIN_ELEMS / 2) / (aligned(a) + aligned(b)).max(1);
        let by_output = OUT_MAX_ELEMS / c.max(1);
        let group = (by_inputs.min(by_output) as u64).clamp(1, k.count.max(1));
        let g = group as usize;
        Ok(Slot {
            kernel: k,
            group,
            a: a * g,
            b: b * g,
            c: c * g,
        })
    };
    let mut slots = Vec::with_capacity(plans.len());
    for p in plans {
        slots.push(
            p.kernels
                .iter()
                .map(|&k| one(k))
                .collect::<Result<Vec<_>>>()?,
        );
    }
    let c = ceiling as usize * ceiling as usize;
    let widest = slots
        .iter()
        .flatten()
        .map(|s| (aligned(s.a) + aligned(s.b), s.c))
        .chain([(2 * aligned(c), c)])
        .fold((0, 0), |(ab, c), (x, y)| (ab.max(x), c.max(y)));
    let pool = POOL_MIN_ELEMS.max(2 * widest.0);
    if pool > POOL_MAX_ELEMS || widest.1 > OUT_MAX_ELEMS {
        return Err(Error::invalid(
            "tokens",
            format!(
                "one launch needs {:.1} GiB of inputs and {:.1} GiB of output, over the GPU \
                 backend's limits ({} and {} GiB); use fewer --tokens",
                widest.0 as f64 * 2.0 / f64::from(1 << 30),
                widest.1 as f64 * 2.0 / f64::from(1 << 30),
                (POOL_MAX_ELEMS * 2) >> 30,
                (OUT_MAX_ELEMS * 2) >> 30
            ),
        ));
    }
    Ok(Layout {
        pool,
        out: widest.1,
        slots,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Component, Pass};

    fn kernel(m: u64, n: u64, k: u64, batch: u64, count: u64) -> Kernel {
        Kernel {
            count,
            ..Kernel::gemm(Component::Experts, Pass::Forward, [m, n, k], batch)
        }
    }

    #[test]
    fn operands_stay_inside_the_pool_and_rotate() {
        let plan = Plan {
            tokens: 8,
            documents: vec![8],
            executions: 1,
            kernels: vec![
                kernel(1, 1, 1, 1, 1),
                kernel(512, 1408, 2048, 1, 60),
                kernel(991, 991, 128, 16, 12),
                kernel(16384, 2048, 2048, 1, 3),
                kernel(2, 3, 4, 1, 60),
            ],
            pair_flops: Default::default(),
        };
        let l = layout(&[&plan], 8192).unwrap();
        assert!(l.pool >= POOL_MIN_ELEMS && l.out >= 8192 * 8192);
        for s in &l.slots[0] {
            assert!(s.group >= 1 && s.group <= s.kernel.count);
            let mut seen = std::collections::BTreeSet::new();
            for call in 0..50 {
                let (a, b) = s.offsets(call, l.pool);
                assert!(a + s.a <= b && b + s.b <= l.pool, "{s:?} call {call}");
                assert_eq!(a % ALIGN, 0);
                seen.insert(a);
            }
            if aligned(s.a) + aligned(s.b) < l.pool / 4 {
                assert!(seen.len() > 1, "the operands rotate: {s:?}");
            }
        }
        // A tiny kernel launched 60 times is one call of 60 launches; a larger one is
        // batched as far as half the least pool holds: 64 Mi / (1 Mi + 2.75 Mi) = 17.
        assert_eq!(l.slots[0][4].group, 60);
        assert_eq!(l.slots[0][1].group, 17);
        assert_eq!(l.slots[0][3].group, 1);
    }

    #[test]
    fn the_pool_is_random_never_zero_and_rounded_to_bf16() {
        let v = fill(3 * FILL_CHUNK + 5);
        assert_eq!(v, fill(3 * FILL_CHUNK + 5));
        let back = |b: u16| f32::from_bits(u32::from(b) << 16);
        assert!(v.iter().all(|&b| (0.25..=1.0).contains(&back(b).abs())));
        let distinct: std::collections::BTreeSet<u16> = v.iter().copied().collect();
        assert!(distinct.len() > 200, "{}", distinct.len());
        // Chunks are not copies of each other.
        assert_ne!(v[..64], v[FILL_CHUNK..FILL_CHUNK + 64]);
        // Round to nearest, ties to even.
        assert_eq!(bf16_bits(1.0), 0x3F80);
        assert_eq!(bf16_bits(f32::from_bits(0x3F80_8000)), 0x3F80);
        assert_eq!(bf16_bits(f32::from_bits(0x3F81_8000)), 0x3F82);
        assert_eq!(bf16_bits(f32::from_bits(0x3F80_8001)), 0x3F81);
    }
}
