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

use serde::{Serialize, Serializer};

use crate::error::{Error, Result};

/// `a * b`, or [`Error::Overflow`] naming `what`.
pub(crate) fn mul(a: u64, b: u64, what: &'static str) -> Result<u64> {
    a.checked_mul(b).ok_or(Error::Overflow { what })
}

/// The product of `factors`, or [`Error::Overflow`] naming `what`.
pub(crate) fn product(factors: &[u64], what: &'static str) -> Result<u64> {
    factors.iter().try_fold(1u64, |acc, &f| mul(acc, f, what))
}

/// `a + b`, or [`Error::Overflow`] naming `what`.
pub(crate) fn add(a: u64, b: u64, what: &'static str) -> Result<u64> {
    a.checked_add(b).ok_or(Error::Overflow { what })
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

/// FLOPs per token, as an exact reduced fraction `num / den` (`den >= 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flops {
    num: u128,
    den: u128,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

const FLOPS_OVERFLOW: &str = "a FLOP count";

impl Flops {
    /// Zero FLOPs.
    pub const ZERO: Self = Self { num: 0, den: 1 };

    /// A whole number of FLOPs.
    pub fn from_int(n: u64) -> Self {
        Self {
            num: u128::from(n),
            den: 1,
        }
    }

    /// `num / den` FLOPs, reduced. `den` must be positive.
    pub fn ratio(num: u128, den: u128) -> Result<Self> {
        if den == 0 {
            return Err(Error::invalid(
                "flops",
                "a FLOP ratio needs a positive denominator",
            ));
        }
        let g = gcd(num, den).max(1);
        Ok(Self {
            num: num / g,
            den: den / g,
        })
    }

    /// Numerator of the reduced fraction.
    pub fn numer(self) -> u128 {
        self.num
    }

    /// Denominator of the reduced fraction (1 for a whole number).
    pub fn denom(self) -> u128 {
        self.den
    }

    /// The value when it is a whole number that fits in `u64`.
    pub fn as_integer(self) -> Option<u64> {
        if self.den == 1 {
            u64::try_from(self.num).ok()
        } else {
            None
        }
    }

    /// The value as a float (nearest), for ratios and display.
    pub fn as_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// Checked exact sum.
    pub fn checked_add(self, other: Self) -> Result<Self> {
        let overflow = Error::Overflow {
            what: FLOPS_OVERFLOW,
        };
        if self.den == other.den {
            let num = self.num.checked_add(other.num).ok_or(overflow)?;
            return Self::ratio(num, self.den);
        }
        let g = gcd(self.den, other.den);
        let (a, b) = (self.den / g, other.den / g);
        let left = self.num.checked_mul(b);
        let right = other.num.checked_mul(a);
        let num = left
            .zip(right)
            .and_then(|(l, r)| l.checked_add(r))
            .ok_or(Error::Overflow {
                what: FLOPS_OVERFLOW,
            })?;
        let den = self.den.checked_mul(b).ok_or(overflow)?;
        Self::ratio(num, den)
    }

    /// Checked exact multiplication by a whole number.
    pub fn checked_mul(self, factor: u64) -> Result<Self> {
        let num = self
            .num
            .checked_mul(u128::from(factor))
            .ok_or(Error::Overflow {
                what: FLOPS_OVERFLOW,
            })?;
        Self::ratio(num, self.den)
    }

    /// The checked exact sum of many values.
    pub fn sum(values: &[Self]) -> Result<Self> {
        values
            .iter()
            .try_fold(Self::ZERO, |acc, &v| acc.checked_add(v))
    }
}

impl Default for Flops {
    fn default() -> Self {
        Self::ZERO
    }
}

impl PartialOrd for Flops {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Flops {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // a/b vs c/d  <=>  a*d vs c*b; fall back to floats only if the products overflow.
        match (
            self.num.checked_mul(other.den),
            other.num.checked_mul(self.den),
        ) {
            (Some(l), Some(r)) => l.cmp(&r),
            _ => self.as_f64().total_cmp(&other.as_f64()),
        }
    }
}

impl fmt::Display for Flops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

/// Serialised as an integer when the value is whole, otherwise as the nearest float.
impl Serialize for Flops {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self.as_integer() {
            Some(n) => serializer.serialize_u64(n),
            None => serializer.serialize_f64(self.as_f64()),
        }
    }
}

/// Signed relative residual `value / reference - 1`.
pub fn relative(value: f64, reference: f64) -> f64 {
    value / reference - 1.0
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

    #[test]
    fn flops_order_is_exact() {
        let a = Flops::ratio(1_000_000_001, 1_000_000_000).unwrap();
        assert!(a > Flops::from_int(1));
        assert!(Flops::ratio(1, 3).unwrap() < Flops::ratio(1, 2).unwrap());
    }
}
