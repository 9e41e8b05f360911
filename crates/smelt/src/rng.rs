//! The seeded pseudo-random streams smelt uses; no global state, so the same seed gives the
//! same bytes on any machine and any number of threads.
//!
//! * [`SplitMix64`] (Steele, Lea and Flood 2014): the bootstrap's resampling and synthetic
//!   endpoints.
//! * [`Lcg`]: Knuth's 64-bit MMIX linear congruential generator, for benchmark inputs,
//!   where speed matters more than quality and only "random, never zero" is asked for.

/// SplitMix64.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below `n / 2^64`).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// Knuth's MMIX linear congruential generator.
#[derive(Debug, Clone)]
pub struct Lcg(u64);

impl Lcg {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A value in `[-1, -0.25] ∪ [0.25, 1]` (never zero, so no GEMM is timed on zeros),
    /// from the top 24 bits of the next state.
    pub fn nonzero_unit(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let u = ((self.0 >> 40) as f32) / (1u64 << 24) as f32;
        if u < 0.5 {
            -1.0 + 1.5 * u
        } else {
            0.25 + 1.5 * (u - 0.5)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_stable() {
        // SplitMix64's published first output for seed 0.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        let mut r = SplitMix64::new(7);
        assert!((0..1000).all(|_| r.below(10) < 10 && (0.0..1.0).contains(&r.unit())));
        let mut l = Lcg::new(0x5EED);
        assert!((0..1000).all(|_| l.nonzero_unit().abs() >= 0.25));
    }
}
