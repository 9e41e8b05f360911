//! Attention shapes, generated lazily: `(kv_heads, head_dim)` pairs in nondecreasing KV
//! score, and for each pair and hidden size the query-head counts the lattice admits.
//!
//! The KV cache depends on the key width `kv_heads·head_dim` alone, so the best pairs are
//! those whose width is nearest the Baseline's per-execution width `t`. For each `kv_heads`
//! the head widths nearest `t / kv_heads` are found by binary search in the (sorted) head
//! widths, and a heap merges the streams walking away from them in both directions: the
//! pairs come out in nondecreasing score, and memory is one heap entry per `kv_heads` value
//! and direction, whatever the head-width range. The query heads of a pair at a hidden size
//! are a range of GQA ratios (from the q-width window), filtered by the lattice's own rule.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::budget::{HeadsRule, Lattice};
use crate::model::MAX_COUNT;

/// A `(kv_heads, head_dim)` pair with its weighted KV residual.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct KvPair {
    pub kv_heads: u64,
    pub head_dim: u64,
    /// `w_KV · |KV / KV_base - 1|`.
    pub kv_score: f64,
}

/// A heap entry: a cursor into the head widths for one `kv_heads`, walking one way.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cursor {
    score: f64,
    kv_heads: u64,
    index: usize,
    up: bool,
}

impl Eq for Cursor {}

impl Ord for Cursor {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(self.kv_heads.cmp(&other.kv_heads))
            .then(self.index.cmp(&other.index))
            .then(self.up.cmp(&other.up))
    }
}

impl PartialOrd for Cursor {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The pairs in nondecreasing KV score.
pub(crate) struct KvPairs<'a> {
    head_dims: &'a [u64],
    /// KV elements per unit of key width, and the part that does not depend on it.
    per_width: f64,
    offset: f64,
    base_kv: f64,
    weight: f64,
    heap: BinaryHeap<Reverse<Cursor>>,
}

impl<'a> KvPairs<'a> {
    /// The stream over `widths` (sorted) times `multipliers`, where a shape's KV is
    /// `offset + per_width × multiplier × width`, against a Baseline KV of `base_kv`
    /// elements weighted by `weight`. GQA: the head widths times the `kv_heads` counts, no
    /// offset; MLA: the latent ranks times 1, the RoPE key the offset.
    pub fn new(
        widths: &'a [u64],
        multipliers: impl Iterator<Item = u64>,
        (per_width, offset): (i128, i128),
        base_kv: u64,
        weight: f64,
    ) -> Self {
        let mut s = Self {
            head_dims: widths,
            per_width: per_width as f64,
            offset: offset as f64,
            base_kv: base_kv as f64,
            weight,
            heap: BinaryHeap::new(),
        };
        let target = (s.base_kv - s.offset) / s.per_width;
        for kv_heads in multipliers {
            let ideal = target / kv_heads as f64;
            let i = s.head_dims.partition_point(|&d| (d as f64) < ideal);
            if i > 0 {
                s.push(kv_heads, i - 1, false);
            }
            if i < s.head_dims.len() {
                s.push(kv_heads, i, true);
            }
        }
        s
    }

    /// As the solver scores a candidate: the exact KV count as a float, over the Baseline's.
    fn score(&self, kv_heads: u64, head_dim: u64) -> f64 {
        let width = u128::from(kv_heads) * u128::from(head_dim);
        let kv = self.offset + self.per_width * width as f64;
        self.weight * (kv / self.base_kv - 1.0).abs()
    }

    fn push(&mut self, kv_heads: u64, index: usize, up: bool) {
        let score = self.score(kv_heads, self.head_dims[index]);
        self.heap.push(Reverse(Cursor {
            score,
            kv_heads,
            index,
            up,
        }));
    }
}

impl Iterator for KvPairs<'_> {
    type Item = KvPair;

    fn next(&mut self) -> Option<KvPair> {
        let Reverse(c) = self.heap.pop()?;
        match (c.up, c.index) {
            (true, i) if i + 1 < self.head_dims.len() => self.push(c.kv_heads, i + 1, true),
            (false, i) if i > 0 => self.push(c.kv_heads, i - 1, false),
            _ => {}
        }
        Some(KvPair {
            kv_heads: c.kv_heads,
            head_dim: self.head_dims[c.index],
            kv_score: c.score,
        })
    }
}

/// The query-head counts of an MLA lattice (any in the heads range), in increasing order.
pub(crate) fn mla_heads(lattice: &Lattice) -> std::ops::RangeInclusive<u64> {
    match lattice.heads {
        HeadsRule::Free { min, max } => min..=max,
        // Refused for MLA when the lattice is read; an empty range if it ever got here.
        #[allow(clippy::reversed_empty_ranges)]
        HeadsRule::Tied => 1..=0,
    }
}

/// `x.floor() as u64`, without the call to `floor` (which this target makes a library call,
/// and the shape counts make millions of): a cast truncates towards 0 and saturates, which
/// is the floor for `x >= 0`, and 0 for every `x < 0` and NaN, as the floor's cast gives.
fn floor_u64(x: f64) -> u64 {
    x as u64
}

/// `x.ceil() as u64`, without the call to `ceil` ([`floor_u64`]): the truncation, plus one
/// when it lies below `x` (above 2^53 every float is whole, and the cast exact or
/// saturated).
fn ceil_u64(x: f64) -> u64 {
    let t = x as u64;
    if (t as f64) < x {
        t.saturating_add(1)
    } else {
        t
    }
}

/// The query-head counts `heads = kv_heads · g` the lattice admits with `kv_heads` heads of
/// width `head_dim` at hidden size `hidden`, in increasing order.
pub(crate) fn heads_at(
    lattice: &Lattice,
    hidden: u64,
    kv_heads: u64,
    head_dim: u64,
) -> impl DoubleEndedIterator<Item = u64> + '_ {
    let (gmin, gmax) = lattice.gqa;
    let width = (kv_heads * head_dim) as f64;
    // The q-width window, widened by one step each side; the lattice's rule decides.
    let (lo, hi) = match lattice.heads {
        HeadsRule::Tied => {
            let g = hidden / (kv_heads * head_dim);
            (g, g)
        }
        HeadsRule::Free { .. } => {
            let lo = floor_u64(lattice.q_width.0 * hidden as f64 / width);
            let hi = ceil_u64(lattice.q_width.1 * hidden as f64 / width);
            (lo.saturating_sub(1), hi.saturating_add(1))
        }
    };
    let max_g = MAX_COUNT / kv_heads;
    (lo.max(gmin).max(1)..=hi.min(gmax).min(max_g))
        .map(move |g| kv_heads * g)
        .filter(move |&heads| lattice.admits_attention(hidden, heads, head_dim))
}

/// The number of attention shapes the lattice admits at `hidden`, without building them:
/// for each `kv_heads`, only the head widths whose GQA range can meet the q-width window.
pub(crate) fn count_at(lattice: &Lattice, hidden: u64) -> u128 {
    if let Some(ranks) = lattice.kv_lora_rank {
        return mla_heads(lattice).count() as u128 * u128::from(ranks.len());
    }
    let (gmin, gmax) = lattice.gqa;
    let mut n: u128 = 0;
    for kv_heads in lattice.kv_heads.values() {
        let (d_lo, d_hi) = match lattice.heads {
            HeadsRule::Tied => (1, hidden),
            HeadsRule::Free { .. } => {
                let lo = lattice.q_width.0 * hidden as f64 / (kv_heads * gmax.max(1)) as f64;
                let hi = lattice.q_width.1 * hidden as f64 / (kv_heads * gmin.max(1)) as f64;
                (
                    floor_u64(lo).saturating_sub(1),
                    ceil_u64(hi).saturating_add(1),
                )
            }
        };
        let ds = &lattice.head_dim;
        let start = ds.partition_point(|&d| d < d_lo);
        let end = ds.partition_point(|&d| d <= d_hi);
        for &d in &ds[start..end] {
            n += u128::from(count_heads(lattice, hidden, kv_heads, d));
        }
    }
    n
}

/// `heads_at(lattice, hidden, kv_heads, head_dim).count()`, without testing every group
/// size: the lattice admits query-head counts by bounds on the heads and on the query width
/// (or, tied, one query width), each monotone in the group size, so the sizes it admits are
/// one run, found from both ends. (With a heads multiple, every size is tested.)
pub(crate) fn count_heads(lattice: &Lattice, hidden: u64, kv_heads: u64, head_dim: u64) -> u64 {
    if lattice.heads_multiple > 1 {
        return heads_at(lattice, hidden, kv_heads, head_dim).count() as u64;
    }
    let mut sizes = heads_at(lattice, hidden, kv_heads, head_dim);
    match (sizes.next(), sizes.next_back()) {
        (Some(first), Some(last)) => (last - first) / kv_heads + 1,
        (Some(_), None) => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Budget;

    #[test]
    fn the_casts_are_floor_and_ceil() {
        let mut xs = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            -1.0,
            -1.5,
            1.0,
            1.0 - f64::EPSILON,
            1.0 + f64::EPSILON,
            2.5,
            1e300,
            -1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            (1u64 << 53) as f64 + 2.0,
            u64::MAX as f64,
            4503599627370495.5,
        ];
        xs.extend((0..2000).map(|i| i as f64 * 0.37 - 100.0));
        for x in xs {
            assert_eq!(floor_u64(x), x.floor() as u64, "{x}");
            assert_eq!(ceil_u64(x), x.ceil() as u64, "{x}");
        }
    }

    /// `count_heads` against the shapes `heads_at` lists, over the attention shapes of a
    /// lattice with a q-width window, a tied one, and one with a heads multiple.
    #[test]
    fn the_heads_counted_are_the_heads_listed() {
        let base = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../budgets/base-200m-s95.toml"
        );
        for (extra, multiple) in [
            (
                "heads = { min = 4, max = 40 }\nq_width = { min = 0.7, max = 1.3 }",
                1,
            ),
            ("heads = { tied = true }", 1),
            ("heads = { min = 1, max = 64 }", 4),
        ] {
            let text = format!(
                "baseline = \"{base}\"\n[lattice]\nhidden = {{ step = 16, min = 512, max = \
                 1536 }}\nhead_dim = {{ step = 8, min = 32, max = 160 }}\nkv_heads = {{ max \
                 = 8 }}\ngqa = {{ max = 16 }}\n{extra}\n"
            );
            let b = Budget::from_toml_str(&text, std::path::Path::new(".")).unwrap();
            let mut lattice = b.lattice().clone();
            lattice.heads_multiple = multiple;
            let l = &lattice;
            let mut shapes = 0;
            for hidden in l.hidden.values() {
                for kv in l.kv_heads.values() {
                    for &d in &l.head_dim {
                        let listed = heads_at(l, hidden, kv, d).count() as u64;
                        assert_eq!(
                            count_heads(l, hidden, kv, d),
                            listed,
                            "{extra}: {hidden} {kv} {d}"
                        );
                        shapes += listed;
                    }
                }
            }
            assert!(shapes > 0, "{extra}");
        }
    }
}
