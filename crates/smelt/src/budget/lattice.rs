//! The search lattice: every knob the solver may turn, and the shape limits.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::Mixer;

/// An arithmetic progression `min, min + step, ...` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Steps {
    /// First value.
    pub min: u64,
    /// Upper bound (inclusive; the last value is the largest `min + i*step <= max`).
    pub max: u64,
    /// Step.
    pub step: u64,
}

impl Steps {
    /// Checks `step >= 1`, `1 <= min <= max`.
    pub fn new(field: &str, min: u64, max: u64, step: u64) -> Result<Self> {
        if step == 0 {
            return Err(Error::invalid(
                format!("{field}.step"),
                "must be at least 1",
            ));
        }
        if min == 0 {
            return Err(Error::invalid(format!("{field}.min"), "must be at least 1"));
        }
        if min > max {
            return Err(Error::invalid(
                field,
                format!("min ({min}) must not exceed max ({max})"),
            ));
        }
        Ok(Self { min, max, step })
    }

    /// Number of values.
    pub fn len(&self) -> u64 {
        (self.max - self.min) / self.step + 1
    }

    /// Always false: a valid progression has at least one value.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `i`-th value.
    pub fn at(&self, i: u64) -> u64 {
        self.min + i * self.step
    }

    /// The largest value.
    pub fn last(&self) -> u64 {
        self.at(self.len() - 1)
    }

    /// All values in increasing order.
    pub fn values(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.len()).map(|i| self.at(i))
    }
}

/// How `expert_ffn` is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FfnRule {
    /// `expert_ffn = hidden * num / den`, rounded half up to a multiple of `multiple`.
    Tied {
        /// Ratio numerator.
        num: u64,
        /// Ratio denominator.
        den: u64,
        /// Rounding multiple.
        multiple: u64,
    },
    /// A free knob.
    Free(Steps),
}

impl FfnRule {
    /// `hidden * num / den` rounded half up to a multiple of `multiple`, in exact integers
    /// (`None` when it rounds to 0 or does not fit).
    fn tied(hidden: u64, num: u64, den: u64, multiple: u64) -> Option<u64> {
        let (h, n, d, m) = (
            u128::from(hidden),
            u128::from(num),
            u128::from(den),
            u128::from(multiple),
        );
        let f = (2 * h * n + d * m) / (2 * d * m) * m;
        u64::try_from(f).ok().filter(|&f| f > 0)
    }

    /// The `expert_ffn` values allowed at hidden size `hidden`.
    pub fn values(&self, hidden: u64) -> Vec<u64> {
        match *self {
            FfnRule::Tied { num, den, multiple } => {
                Self::tied(hidden, num, den, multiple).into_iter().collect()
            }
            FfnRule::Free(s) => s.values().collect(),
        }
    }

    /// Scales a Baseline's shared-expert (or dense FFN) width to `hidden` the same way
    /// (free: unchanged).
    pub fn shared_width(&self, base_shared: u64, base_hidden: u64, hidden: u64) -> u64 {
        match *self {
            FfnRule::Tied { multiple, .. } if base_shared > 0 => {
                Self::tied(hidden, base_shared, base_hidden, multiple).unwrap_or(multiple)
            }
            _ => base_shared,
        }
    }
}

/// How the number of query heads is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadsRule {
    /// `heads * head_dim == hidden` exactly.
    Tied,
    /// Any `heads` in `min..=max` (subject to `gqa` and `q_width`).
    Free {
        /// Fewest heads.
        min: u64,
        /// Most heads.
        max: u64,
    },
}

/// The resolved search lattice. The looped model's depth is the recipe's
/// ([`super::Recipe::layers`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lattice {
    /// Hidden sizes.
    pub hidden: Steps,
    /// Routed experts per layer.
    pub experts: Steps,
    /// Expert width rule.
    pub expert_ffn: FfnRule,
    /// Head widths, increasing.
    pub head_dim: Vec<u64>,
    /// Query-head rule.
    pub heads: HeadsRule,
    /// Key/value heads.
    pub kv_heads: Steps,
    /// GQA ratio `heads / kv_heads` bounds (inclusive).
    pub gqa: (u64, u64),
    /// Bounds (inclusive) on `heads * head_dim / hidden` (not applied with MLA).
    pub q_width: (f64, f64),
    /// Query-head counts are multiples of this: 1, or a Baseline with full-attention layers
    /// of their own shape (`[model.full_attention]`, Gemma 4)'s key/value heads there, which
    /// must divide the query heads (checked by [`super::Budget::new`]).
    pub heads_multiple: u64,
    /// With an MLA Baseline, the key/value latent ranks: the KV knob. The per-head widths
    /// stay the Baseline's (`head_dim` is their query/key width) and `kv_heads = heads`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_lora_rank: Option<Steps>,
    /// With an MLA Baseline, the per-head widths searched: `(qk_nope_head_dim, v_head_dim)`
    /// pairs (the Baseline's alone by default; `qk_rope_head_dim` stays the Baseline's).
    /// Empty without MLA.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mla_widths: Vec<(u64, u64)>,
    /// With a hybrid Baseline (`[model.recurrent]`), the recurrent mixer shapes searched:
    /// every combination of `[lattice.recurrent]`'s lists that is a valid mixer of the
    /// Baseline's kind (the Baseline's shape alone by default; its convolution taps, and
    /// Mamba-2's groups and chunk, stay the Baseline's). Empty without recurrent layers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mixers: Vec<Mixer>,
}

/// The most combinations of hidden size, expert width and attention shape
/// ([`Lattice::combinations`]) a search takes on without being forced: about a minute of
/// solving on one core, far more than any lattice of hardware-friendly steps needs.
pub const MAX_COMBINATIONS: u128 = 10_000_000_000;

impl Lattice {
    /// An upper bound on the (hidden size, expert width, attention shape, recurrent mixer
    /// shape) combinations a search considers, each with its expert counts in closed form: computed from the
    /// ranges, without building anything, so a hopeless lattice is refused at once.
    pub fn combinations(&self) -> u128 {
        self.combinations_per_mixer()
            .saturating_mul(self.mixers.len().max(1) as u128)
    }

    /// [`Lattice::combinations`] at one recurrent mixer shape.
    fn combinations_per_mixer(&self) -> u128 {
        let ffn = match self.expert_ffn {
            FfnRule::Tied { .. } => 1,
            FfnRule::Free(s) => u128::from(s.len()),
        };
        let (hmin, hmax) = match self.heads {
            HeadsRule::Tied => (1, u64::MAX),
            HeadsRule::Free { min, max } => (min, max),
        };
        // (kv_heads, gqa) pairs with kv_heads * gqa within the heads range.
        let (gmin, gmax) = self.gqa;
        let pairs: u128 = self
            .kv_heads
            .values()
            .map(|kv| {
                let lo = gmin.max(hmin.div_ceil(kv));
                let hi = gmax.min(hmax / kv);
                u128::from(hi.saturating_sub(lo) + u64::from(hi >= lo))
            })
            .sum();
        if let Some(ranks) = self.kv_lora_rank {
            // MLA: every heads count with every latent rank and per-head widths.
            let heads = u128::from(hmax.saturating_sub(hmin) + 1);
            let widths = self.mla_widths.len().max(1) as u128;
            return u128::from(self.hidden.len()) * ffn * u128::from(ranks.len()) * heads * widths;
        }
        let per_hidden = match self.heads {
            // One heads count per head width; kv_heads must divide it.
            HeadsRule::Tied => u128::from(self.kv_heads.len()),
            HeadsRule::Free { .. } => pairs,
        };
        u128::from(self.hidden.len()) * ffn * self.head_dim.len() as u128 * per_hidden
    }

    /// Whether `heads` query heads of width `head_dim` respect the heads rule, the q-width
    /// limits at hidden size `hidden` and [`Lattice::heads_multiple`].
    pub fn admits_attention(&self, hidden: u64, heads: u64, head_dim: u64) -> bool {
        let q = heads.saturating_mul(head_dim);
        // (No division for the usual multiple of 1: this runs for every shape counted.)
        if self.heads_multiple > 1 && !heads.is_multiple_of(self.heads_multiple) {
            return false;
        }
        match self.heads {
            HeadsRule::Tied => q == hidden,
            HeadsRule::Free { min, max } if self.kv_lora_rank.is_some() => {
                (min..=max).contains(&heads)
            }
            HeadsRule::Free { min, max } => {
                let ratio = q as f64 / hidden as f64;
                (min..=max).contains(&heads)
                    && ratio >= self.q_width.0 - 1e-12
                    && ratio <= self.q_width.1 + 1e-12
            }
        }
    }
}
