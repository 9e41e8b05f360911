//! The three budgets of the looped model at one hidden size, as exact affine functions of
//! the other knobs, read off the cost model.
//!
//! At a fixed hidden size `H` (with the loop, the dense layers and the shared experts
//! fixed, their widths tied to `H`), the cost model's training FLOPs (times the workload's
//! query count `Q`, which makes them whole), parameters and KV elements are each
//!
//! `c1 + cf·f + cq·q + ckv·kv + cd·d + ce·E + cfe·f·E`
//!
//! in the expert width `f`, the query width `q = heads·head_dim`, the key width
//! `kv = kv_heads·head_dim`, the head width `d` (per-head q/k norms), and the expert count
//! `E` (the experts' weights are the one product term). The seven coefficients are exact
//! integers, read off seven cost-model evaluations that change one knob at a time, and
//! checked at an eighth point that changes all of them: a cost model that ever stopped
//! being of this form would be reported as an error, not searched on.

use crate::budget::Budget;
use crate::cost::{MeanKeys, budgets_with};
use crate::error::{Error, Result};
use crate::spec::{Counting, Loop};

use super::{Point, looped_model};

/// `c1 + cf·f + cq·q + ckv·kv + cd·d + ce·E + cfe·f·E`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Linear {
    c1: i128,
    cf: i128,
    cq: i128,
    ckv: i128,
    cd: i128,
    ce: i128,
    cfe: i128,
}

/// The knobs the coefficients multiply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Knobs {
    pub f: u64,
    pub q: u64,
    pub kv: u64,
    pub d: u64,
    pub e: u64,
}

impl Linear {
    /// The value at `k` (exact; the knobs are bounded, so no product overflows `i128`).
    pub fn at(&self, k: Knobs) -> i128 {
        let (f, e) = (k.f as i128, k.e as i128);
        self.c1
            + self.cf * f
            + self.cq * k.q as i128
            + self.ckv * k.kv as i128
            + self.cd * k.d as i128
            + self.ce * e
            + self.cfe * f * e
    }

    /// The part that does not depend on `E`, and the slope in `E`, at expert width `f` and
    /// shape `(q, kv, d)`: the value is `intercept + slope·E`.
    pub fn in_experts(&self, f: u64, q: u64, kv: u64, d: u64) -> (i128, i128) {
        let k = Knobs { f, q, kv, d, e: 0 };
        (self.at(k), self.ce + self.cfe * f as i128)
    }
}

/// The three budgets at one hidden size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AtHidden {
    pub hidden: u64,
    /// Training FLOPs per token times the workload's query count.
    pub flops: Linear,
    pub params: Linear,
    pub kv: Linear,
}

/// One cost-model evaluation: `[flops × Q, params, kv]`.
fn exact(
    budget: &Budget,
    looping: Option<&Loop>,
    keys: MeanKeys,
    counting: &Counting,
    hidden: u64,
    (f, heads, kv_heads, d, e): (u64, u64, u64, u64, u64),
) -> Result<[i128; 3]> {
    let point = Point {
        hidden,
        expert_ffn: f,
        heads,
        kv_heads,
        head_dim: d,
        experts: e,
    };
    let b = budgets_with(&looped_model(budget, looping, point), keys, counting)?;
    Ok([
        flops_scaled(b.flops, keys)?,
        i128::from(b.params.0),
        i128::from(b.kv.0),
    ])
}

/// `flops × Q` as an integer (`Q` = the workload's query count, which every FLOP count's
/// denominator divides).
pub(crate) fn flops_scaled(f: crate::units::Flops, keys: MeanKeys) -> Result<i128> {
    let q = keys.queries;
    if !q.is_multiple_of(f.denom()) {
        return Err(Error::Internal {
            message: format!("a FLOP count {f} whose denominator does not divide {q}"),
        });
    }
    f.numer()
        .checked_mul(q / f.denom())
        .and_then(|v| i128::try_from(v).ok())
        .ok_or(Error::Overflow {
            what: "a FLOP count",
        })
}

impl AtHidden {
    /// Reads the coefficients off the cost model at `hidden` (eight evaluations).
    pub fn new(
        budget: &Budget,
        looping: Option<&Loop>,
        keys: MeanKeys,
        hidden: u64,
    ) -> Result<Self> {
        let counting = budget.baseline().counting;
        let (f0, e0) = (1u64, budget.baseline().model.moe.top_k);
        let v = |p| exact(budget, looping, keys, &counting, hidden, p);
        // (f, heads, kv_heads, head_dim, E): one knob changed at a time.
        let p0 = v((f0, 1, 1, 1, e0))?;
        let pf = v((f0 + 1, 1, 1, 1, e0))?;
        let pe = v((f0, 1, 1, 1, e0 + 1))?;
        let pfe = v((f0 + 1, 1, 1, 1, e0 + 1))?;
        let pq = v((f0, 2, 1, 1, e0))?; // q 1 -> 2
        let pkv = v((f0, 2, 2, 1, e0))?; // kv 1 -> 2
        let pd = v((f0, 1, 1, 2, e0))?; // d 1 -> 2 (q = kv = 2)
        let solve = |i: usize| {
            let cfe = pfe[i] - pf[i] - pe[i] + p0[i];
            let (f0, e0) = (f0 as i128, e0 as i128);
            let cf = pf[i] - p0[i] - cfe * e0;
            let ce = pe[i] - p0[i] - cfe * f0;
            let cq = pq[i] - p0[i];
            let ckv = pkv[i] - pq[i];
            let cd = pd[i] - pkv[i];
            let c1 = p0[i] - cf * f0 - cq - ckv - cd - ce * e0 - cfe * f0 * e0;
            Linear {
                c1,
                cf,
                cq,
                ckv,
                cd,
                ce,
                cfe,
            }
        };
        let at = Self {
            hidden,
            flops: solve(0),
            params: solve(1),
            kv: solve(2),
        };
        // The check: every knob changed at once.
        let (f, heads, kv_heads, d, e) = (f0 + 3, 4, 2, 3, e0 + 5);
        let want = v((f, heads, kv_heads, d, e))?;
        let k = Knobs {
            f,
            q: heads * d,
            kv: kv_heads * d,
            d,
            e,
        };
        let got = [at.flops.at(k), at.params.at(k), at.kv.at(k)];
        if got != want {
            return Err(Error::Internal {
                message: format!(
                    "the budgets at hidden size {hidden} are not affine in the knobs as the \
                     solver assumes (predicted {got:?}, cost model {want:?})"
                ),
            });
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A Baseline with every feature whose widths are tied to the hidden size: q/k norms,
    /// biases, a gated shared expert, dense layers, a loop.
    fn budget(qk: &str, bias: &str) -> Budget {
        let text = format!(
            r#"
            [baseline.model]
            layers = 6
            hidden = 96
            heads = 6
            kv_heads = 2
            head_dim = 16
            qk_norm = "{qk}"
            attention_bias = "{bias}"
            [baseline.model.moe]
            experts = 12
            top_k = 2
            expert_ffn = 32
            shared_experts = 1
            shared_ffn = 48
            shared_gate = true
            [baseline.model.dense]
            layers = [1, 5]
            ffn = 200
            [baseline.workload]
            context = 512
            doc_lengths = [[37, 3], [100, 2]]
            [lattice]
            hidden = {{ step = 8, min = 48, max = 192 }}
            "#
        );
        Budget::from_toml_str(&text, std::path::Path::new(".")).unwrap()
    }

    proptest! {
        /// The coefficients predict the cost model exactly anywhere, not only where read.
        #[test]
        fn coefficients_predict_the_cost_model(
            norm in 0usize..3,
            bias in 0usize..3,
            hidden in 1u64..300,
            (f, heads_per_kv, kv_heads, d, e) in (1u64..500, 1u64..8, 1u64..6, 1u64..64, 2u64..400),
        ) {
            let b = budget(["none", "per_head", "full"][norm], ["none", "qkv", "all"][bias]);
            let keys = MeanKeys::of(&b.baseline().workload).unwrap();
            let at = AtHidden::new(&b, b.looping(), keys, hidden).unwrap();
            let heads = heads_per_kv * kv_heads;
            let want = exact(&b, b.looping(), keys, &b.baseline().counting, hidden, (f, heads, kv_heads, d, e)).unwrap();
            let k = Knobs { f, q: heads * d, kv: kv_heads * d, d, e };
            prop_assert_eq!([at.flops.at(k), at.params.at(k), at.kv.at(k)], want);
        }
    }
}
