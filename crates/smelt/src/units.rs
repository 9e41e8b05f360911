//! Typed quantities: parameters, FLOPs, KV-cache elements and bytes.
//!
//! Each quantity is its own type, so a sum of FLOPs and parameters does not compile. All
//! arithmetic on them is checked: a count that does not fit returns [`Error::Overflow`]
//! rather than wrapping.
//!
//! Parameters, KV elements and bytes are plain integers. FLOPs *per token* are an exact
//! non-negative rational number, because the attention core of a causal document of
//! length `T` costs `(T+1)/2` keys per query on average, and a document-length histogram
//! gives `Σ T(T+1)/2 / Σ T`: neither is an integer in general. [`Flops`] keeps the fraction
//! reduced and exact; it is shown as an integer when it is one.

use std::fmt;

use num_rational::Ratio;
use num_traits::{CheckedAdd, CheckedDiv, CheckedMul};
use serde::{Serialize, Serializer};

use crate::error::{Error, Result};

/// `a * b`, or [`Error::Overflow`] naming `what`.
pub(crate) fn mul(a: u64, b: u64, what: &'static str) -> Result<u64> {
    // A `match`, not `ok_or`: an error built and dropped on every product shows in the
    // search's profile.
    match a.checked_mul(b) {
        Some(p) => Ok(p),
        None => Err(Error::Overflow { what }),
    }
}

/// The product of `factors`, or [`Error::Overflow`] naming `what`.
pub(crate) fn product(factors: &[u64], what: &'static str) -> Result<u64> {
    factors.iter().try_fold(1u64, |acc, &f| mul(acc, f, what))
}

/// `a + b`, or [`Error::Overflow`] naming `what`.
pub(crate) fn add(a: u64, b: u64, what: &'static str) -> Result<u64> {
    match a.checked_add(b) {
        Some(s) => Ok(s),
        None => Err(Error::Overflow { what }),
    }
}

macro_rules! integer_quantity {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl $name {
            /// Zero.
            pub const ZERO: Self = Self(0);

            /// Checked sum.
            pub fn checked_add(self, other: Self) -> Result<Self> {
                add(self.0, other.0, $what).map(Self)
            }

            /// Checked multiplication by a count.
            pub fn checked_mul(self, factor: u64) -> Result<Self> {
                mul(self.0, factor, $what).map(Self)
            }

            /// The value as a float, for ratios and display.
            pub fn as_f64(self) -> f64 {
                self.0 as f64
            }

            /// The checked sum of many values.
            pub fn sum(values: &[Self]) -> Result<Self> {
                values.iter().try_fold(Self::ZERO, |acc, &v| acc.checked_add(v))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

integer_quantity!(
    /// A number of (non-embedding, unless stated) parameters.
    Params,
    "a parameter count"
);
integer_quantity!(
    /// A number of KV-cache elements (keys plus values).
    KvElements,
    "a KV-cache element count"
);
integer_quantity!(
    /// A number of bytes.
    Bytes,
    "a byte count"
);

/// An exact non-negative quantity per token held as a reduced fraction
/// (`num_rational::Ratio<u128>`): arithmetic checked ([`Error::Overflow`] naming `$what`
/// instead of a wrap), comparison exact for every pair of values (`Ratio`'s order never
/// rounds and never overflows: it compares integer parts, then the reciprocals of the
/// fractional parts), printed as `n` or `n/d`, serialised as an integer when whole and
/// otherwise as the nearest float.
macro_rules! exact_quantity {
    ($(#[$meta:meta])* $name:ident, what: $what:literal, field: $field:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Ratio<u128>);

        impl $name {
            /// Zero.
            pub const ZERO: Self = Self(Ratio::new_raw(0, 1));
            const OVERFLOW: Error = Error::Overflow { what: $what };

            /// A whole number.
            pub fn from_int(n: u64) -> Self {
                Self(Ratio::from_integer(u128::from(n)))
            }

            /// `num / den`, reduced. `den` must be positive.
            pub fn ratio(num: u128, den: u128) -> Result<Self> {
                if den == 0 {
                    return Err(Error::invalid(
                        $field,
                        concat!("a ratio of ", $what, " needs a positive denominator"),
                    ));
                }
                Ok(Self(Ratio::new(num, den)))
            }

            /// Numerator of the reduced fraction.
            pub fn numer(self) -> u128 {
                *self.0.numer()
            }

            /// Denominator of the reduced fraction (1 for a whole number).
            pub fn denom(self) -> u128 {
                *self.0.denom()
            }

            /// The value when it is a whole number that fits in `u64`.
            pub fn as_integer(self) -> Option<u64> {
                if self.0.is_integer() {
                    u64::try_from(self.numer()).ok()
                } else {
                    None
                }
            }

            /// The value as a float: the nearest one (ties to even), so equal values give
            /// the same float however the fraction is written ([`ratio_to_f64`]).
            pub fn as_f64(self) -> f64 {
                ratio_to_f64(self.numer(), self.denom())
            }

            /// Checked exact sum.
            pub fn checked_add(self, other: Self) -> Result<Self> {
                match self.0.checked_add(&other.0) {
                    Some(s) => Ok(Self(s)),
                    None => Err(Self::OVERFLOW),
                }
            }

            /// Checked exact multiplication by a whole number.
            pub fn checked_mul(self, factor: u64) -> Result<Self> {
                match self.0.checked_mul(&Ratio::from_integer(u128::from(factor))) {
                    Some(p) => Ok(Self(p)),
                    None => Err(Self::OVERFLOW),
                }
            }

            /// The checked exact sum of many values.
            pub fn sum(values: &[Self]) -> Result<Self> {
                values
                    .iter()
                    .try_fold(Self::ZERO, |acc, &v| acc.checked_add(v))
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::ZERO
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                if self.0.is_integer() {
                    write!(f, "{}", self.numer())
                } else {
                    write!(f, "{}/{}", self.numer(), self.denom())
                }
            }
        }

        /// Serialised as an integer when the value is whole, otherwise as the nearest float.
        impl Serialize for $name {
            fn serialize<S: Serializer>(
                &self,
                serializer: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                match self.as_integer() {
                    Some(n) => serializer.serialize_u64(n),
                    None => serializer.serialize_f64(self.as_f64()),
                }
            }
        }
    };
}

exact_quantity!(
    /// FLOPs per token, as an exact reduced fraction (`num_rational::Ratio<u128>`).
    ///
    /// Arithmetic is checked ([`Error::Overflow`] instead of a wrap) and comparison is exact
    /// for every pair of values: `Ratio`'s order never rounds and never overflows (it
    /// compares integer parts, then the reciprocals of the fractional parts), which a test
    /// checks on fractions whose cross products do not fit in 128 bits.
    Flops, what: "a FLOP count", field: "flops"
);

impl Flops {
    /// Checked exact division by a positive whole number.
    pub fn checked_div(self, divisor: u64) -> Result<Self> {
        if divisor == 0 {
            return Err(Error::invalid("flops", "division by zero"));
        }
        self.0
            .checked_div(&Ratio::from_integer(u128::from(divisor)))
            .map(Self)
            .ok_or(Self::OVERFLOW)
    }
}

exact_quantity!(
    /// Bytes of saved activations per token, as an exact reduced fraction: a layer under the
    /// `eager` policy saves one attention row as long as its document, and a document-length
    /// histogram gives the token-weighted mean `Σ n·T² / Σ n·T` (see
    /// [`crate::cost::memory`]). Arithmetic is checked and comparison exact, as for
    /// [`Flops`].
    ActivationBytes, what: "an activation byte count", field: "activations"
);

/// `num / den` correctly rounded to the nearest float (ties to even): a function of the
/// value alone, so `6/4` and `3/2` give the same float. (`num as f64 / den as f64` rounds
/// up to three times once either term passes 2^53.) A zero `den` gives what float
/// division would: infinity, or NaN for `0/0`.
pub fn ratio_to_f64(num: u128, den: u128) -> f64 {
    const EXACT: u128 = 1 << f64::MANTISSA_DIGITS;
    if num == 0 || den == 0 || (num < EXACT && den < EXACT) {
        // Both terms are exact floats, and IEEE division rounds the exact quotient once.
        return num as f64 / den as f64;
    }
    // Long division to at least 56 significant quotient bits, the remainder folded into a
    // sticky lowest bit: converting that integer rounds as the exact quotient would, and
    // the power-of-two scaling after it is exact.
    let (mut q, mut r) = (num / den, num % den);
    let mut shift = 0i32;
    while q < 1 << 55 {
        // r < den, so 2r is computed without overflow as r - (den - r) or r + r.
        let bit = r >= den - r;
        r = if bit { r - (den - r) } else { r + r };
        q = (q << 1) | u128::from(bit);
        shift += 1;
    }
    let sticky = u128::from(r != 0);
    // 2^-shift, built from its bits (shift is at most 128 + 55).
    let scale = f64::from_bits(((1023 - shift) as u64) << 52);
    ((q | sticky) as f64) * scale
}

/// Signed relative residual `value / reference - 1`.
pub fn relative(value: f64, reference: f64) -> f64 {
    value / reference - 1.0
}

/// A signed percentage with two decimals, e.g. `+2.91%`.
pub fn percent(x: f64) -> String {
    format!("{:+.2}%", x * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_fractions_reduce_and_add_exactly() {
        let a = Flops::ratio(6, 4).unwrap();
        assert_eq!((a.numer(), a.denom()), (3, 2));
        let b = Flops::ratio(1, 3).unwrap();
        let s = a.checked_add(b).unwrap();
        assert_eq!((s.numer(), s.denom()), (11, 6));
        assert_eq!(s.checked_mul(6).unwrap().as_integer(), Some(11));
        assert!(Flops::ratio(1, 0).is_err());
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        assert!(Params(u64::MAX).checked_add(Params(1)).is_err());
        assert!(Params(u64::MAX / 2 + 1).checked_mul(2).is_err());
        let big = Flops::ratio(u128::MAX, 1).unwrap();
        assert!(big.checked_add(Flops::from_int(1)).is_err());
        assert!(mul(u64::MAX, 2, "x").is_err());
    }

    /// Whether `f` is the float nearest `num / den`: `|num/den - f| <= ulp(f)/2`, compared
    /// in integers (for `num`, `den` below 2^60, where every product fits in 128 bits).
    fn is_nearest(f: f64, num: u128, den: u128) -> bool {
        if num == 0 {
            return f == 0.0;
        }
        // f = m·2^e with m odd or 53 bits; the halfway points are (2m ± 1)·2^(e-1).
        let bits = f.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as i32;
        let m = u128::from((bits & ((1 << 52) - 1)) | (1 << 52));
        let e = exp - 1075;
        // num/den against (2m ± 1)·2^(e-1): num·2^(1-e) against den·(2m ± 1), or
        // num against den·(2m ± 1)·2^(e-1).
        let (lhs, lo, hi) = if e <= 1 {
            let s = (1 - e) as u32;
            (num << s, den * (2 * m - 1), den * (2 * m + 1))
        } else {
            let s = (e - 1) as u32;
            (num, (den * (2 * m - 1)) << s, (den * (2 * m + 1)) << s)
        };
        let even = m % 2 == 0;
        (lo < lhs || (lo == lhs && even)) && (lhs < hi || (lhs == hi && even))
    }

    #[test]
    fn ratio_to_f64_rounds_to_nearest_even() {
        assert_eq!(ratio_to_f64(6, 4), 1.5);
        assert_eq!(ratio_to_f64(1, 3), 1.0 / 3.0);
        assert_eq!(ratio_to_f64(0, 7), 0.0);
        assert_eq!(ratio_to_f64(0, u128::MAX), 0.0);
        assert_eq!(ratio_to_f64(u128::MAX, 0), f64::INFINITY);
        assert!(ratio_to_f64(0, 0).is_nan());
        // 2^53 + 1 is halfway between two floats: ties to even (2^53), whole or as a fraction.
        let half = (1u128 << 53) + 1;
        assert_eq!(ratio_to_f64(half, 1), 9007199254740992.0);
        assert_eq!(ratio_to_f64(half * 3, 3), 9007199254740992.0);
        // Where rounding both terms first lands one float low (checked against Python's
        // correctly rounded `float(Fraction(n, d))`, 0x1.760308af44ee9p+3).
        let (num, den) = (11652879636272361973, 997006236827347679);
        assert_eq!(ratio_to_f64(num, den), f64::from_bits(0x402760308af44ee9));
        assert_eq!(num as f64 / den as f64, f64::from_bits(0x402760308af44ee8));
        // Huge terms on both sides.
        assert_eq!(ratio_to_f64(u128::MAX, u128::MAX), 1.0);
        assert_eq!(ratio_to_f64(u128::MAX - 1, u128::MAX), 1.0);
        assert_eq!(ratio_to_f64(1, u128::MAX), 2f64.powi(-128));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// The nearest float, checked in integers; and a function of the value alone.
        #[test]
        fn ratio_to_f64_is_the_nearest_float(
            num in 0u128..(1 << 60),
            den in 1u128..(1 << 60),
            k in 1u128..(1 << 60),
        ) {
            let f = ratio_to_f64(num, den);
            proptest::prop_assert!(is_nearest(f, num, den), "{num}/{den} -> {f}");
            // The oracle can fail: the next float up is never the nearest.
            let up = f64::from_bits(f.to_bits() + 1);
            proptest::prop_assert!(num == 0 || !is_nearest(up, num, den));
            if let (Some(n), Some(d)) = (num.checked_mul(k), den.checked_mul(k)) {
                proptest::prop_assert_eq!(ratio_to_f64(n, d), f);
            }
        }
    }

    #[test]
    fn flops_order_is_exact() {
        let a = Flops::ratio(1_000_000_001, 1_000_000_000).unwrap();
        assert!(a > Flops::from_int(1));
        assert!(Flops::ratio(1, 3).unwrap() < Flops::ratio(1, 2).unwrap());
    }

    #[test]
    fn flops_order_is_exact_where_cross_products_overflow() {
        // (2^127 - 1) / (2^127 - 2) against (2^127 - 2) / (2^127 - 3): both just above 1,
        // equal as f64, and their cross products need 254 bits.
        let big = (1u128 << 127) - 1;
        let a = Flops::ratio(big, big - 1).unwrap();
        let b = Flops::ratio(big - 1, big - 2).unwrap();
        assert_eq!(a.as_f64(), b.as_f64());
        assert!(big.checked_mul(big - 2).is_none());
        // 1 + 1/(big-1) < 1 + 1/(big-2)
        assert!(a < b);
        assert!(b > a);
        assert_eq!(a.cmp(&a), std::cmp::Ordering::Equal);
        // Integer parts decide first, exactly.
        let c = Flops::ratio(u128::MAX, 2).unwrap();
        let d = Flops::ratio(u128::MAX - 2, 2).unwrap();
        assert!(d < c);
    }
}
