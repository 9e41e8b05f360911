//! The budgets of the looped model at one hidden size, as exact affine functions of the
//! other knobs, read off the cost model.
//!
//! Each budget is held as an integer ([`exact`]): the training FLOPs times the workload's
//! query count `Q` (which makes them whole), the parameters and KV elements as they are.
//! At a fixed hidden size `H` (with the loop, the dense layers and the shared experts
//! fixed, their widths tied to `H`), every budget is
//!
//! `c1 + cf·f + cq·q + ckv·kv + cd·d + ch·heads + cg·kv_heads + ce·E + cfe·f·E`
//!
//! in the expert width `f`, the query width `q = heads·head_dim`, the key width
//! `kv = kv_heads·head_dim`, the head width `d` (per-head q/k norms), the number of query
//! heads (attention sinks, and the activations' per-head rows or log-sum-exp), the number
//! of key/value heads (the fp32 row per key head of a per-head key norm that the stacks'
//! activations count) and the expert count `E` (the experts' weights are the one
//! product term). The coefficients are exact integers, read off seven cost-model
//! evaluations (eight with sinks), and checked at one more point that changes every knob: a cost model that
//! ever stopped being of this form would be reported as an error, not searched on.
//!
//! With an MLA Baseline the attention knobs are the heads and the key/value latent rank `r`,
//! at each pair of per-head widths (`qk_nope_head_dim`, `v_head_dim`) of the lattice, which
//! the search takes one at a time as it takes hidden sizes; the budgets are then of the
//! same form with
//! `q = heads`, `kv = r` and `d = heads·r` (the up-projection of the latent to every head's
//! keys and values is the one product term), read off and checked the same way.
//!
//! With a hybrid Baseline the recurrent mixer's shape (its heads and head widths) is taken
//! the same way, one shape at a time ([`Fixed`]): at a fixed mixer shape the recurrent
//! layers' parameters, FLOPs and state are constants of the form above (the mixer reads and
//! writes the hidden size, so its projections move `c1`'s dependence on `H`, which is fixed
//! here too), whatever the delta rule's or the SSD scan's own (nonlinear) dependence on the
//! mixer's widths.

use crate::budget::Budget;
use crate::cost::{BudgetKind, Budgets, Keys, PerBudget, budgets_with};
use crate::error::{Error, Result};
use crate::model::{ActivationPolicy, Counting, Loop, Mixer};

use super::{Point, looped_model};

/// `c1 + cf·f + cq·q + ckv·kv + cd·d + ch·heads + cg·kv_heads + ce·E + cfe·f·E`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Linear {
    c1: i128,
    cf: i128,
    cq: i128,
    ckv: i128,
    cd: i128,
    ch: i128,
    cg: i128,
    ce: i128,
    cfe: i128,
}

/// The knobs of a lattice point at one hidden size, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Expert width.
    pub expert_ffn: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads (GQA; with MLA every query head has its own).
    pub kv_heads: u64,
    /// The head width (GQA) or the key/value latent rank (MLA).
    pub width: u64,
    /// Routed experts.
    pub experts: u64,
}

/// The knobs the coefficients multiply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Knobs {
    pub f: u64,
    pub q: u64,
    pub kv: u64,
    pub d: u64,
    /// Query heads (GQA; with MLA `q` is the heads and this is 0).
    pub h: u64,
    /// Key/value heads (GQA; 0 with MLA).
    pub g: u64,
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
            + self.ch * k.h as i128
            + self.cg * k.g as i128
            + self.ce * e
            + self.cfe * f * e
    }

    /// The KV count as `(per unit of key width (GQA) or latent rank (MLA), offset)`: an
    /// error if it depends on anything else, as the shape stream assumes. An offset is
    /// allowed when `offset` says the model has one (MLA's RoPE key, a hybrid's recurrent
    /// state in the cache at the context).
    pub fn kv_form(&self, offset: bool) -> Result<(i128, i128)> {
        let others = [
            self.cf, self.cq, self.cd, self.ch, self.cg, self.ce, self.cfe,
        ];
        if others.iter().any(|&c| c != 0) || (!offset && self.c1 != 0) {
            return Err(Error::Internal {
                message: format!("a KV count that is not linear in the key width: {self:?}"),
            });
        }
        Ok((self.ckv, self.c1))
    }

    /// The part that does not depend on `E`, and the slope in `E`, at the expert width and
    /// shape of `k` (its `e` ignored): the value is `intercept + slope·E`. (The search
    /// reads it as [`InHeads`] and [`InFfn`]; the tests hold them to this.)
    #[cfg(test)]
    pub fn in_experts(&self, k: Knobs) -> (i128, i128) {
        (
            self.at(Knobs { e: 0, ..k }),
            self.ce + self.cfe * k.f as i128,
        )
    }
}

/// A budget at one attention shape with the expert width `f` and count `E` left free:
/// `c + cf·f + (ce + cfe·f)·E`, the [`Linear`] with the shape's terms summed once, so that
/// each expert width costs two products ([`InHeads::in_ffn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InFfn {
    c: i128,
    cf: i128,
    ce: i128,
    cfe: i128,
}

/// A budget at one key shape (key/value heads and head width, or MLA's latent rank) with
/// the query heads, expert width and count free. The knobs are linear in the heads
/// ([`Knobs::of`]), so the budget is `c0 + c_heads·heads` at `f = E = 0`, summed once per
/// key shape ([`Linear::in_heads`]) and then one product per head count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InHeads {
    c0: i128,
    c_heads: i128,
    cf: i128,
    ce: i128,
    cfe: i128,
}

impl Linear {
    /// This budget at the key shape `kv_heads` x `width` (GQA) or latent rank `width`
    /// (MLA), the query heads, expert width and count free.
    pub fn in_heads(&self, mla: bool, kv_heads: u64, width: u64) -> InHeads {
        let (kv_heads, width) = (i128::from(kv_heads), i128::from(width));
        // The knobs of [`Knobs::of`] at `heads`: GQA `q = heads·d`, `kv = kv_heads·d`, `d`,
        // `h = heads`; MLA `q = heads`, `kv = r`, `d = heads·r`, `h = 0`.
        let (c0, c_heads) = if mla {
            (self.c1 + self.ckv * width, self.cq + self.cd * width)
        } else {
            (
                self.c1 + self.ckv * kv_heads * width + self.cd * width + self.cg * kv_heads,
                self.cq * width + self.ch,
            )
        };
        InHeads {
            c0,
            c_heads,
            cf: self.cf,
            ce: self.ce,
            cfe: self.cfe,
        }
    }
}

impl InHeads {
    /// The budget at `heads` query heads, the expert width and count free.
    pub fn in_ffn(&self, heads: u64) -> InFfn {
        InFfn {
            c: self.c0 + self.c_heads * heads as i128,
            cf: self.cf,
            ce: self.ce,
            cfe: self.cfe,
        }
    }
}

impl InFfn {
    /// [`Linear::in_experts`] at expert width `f`: `(intercept, slope)` in `E`.
    pub fn in_experts(&self, f: u64) -> (i128, i128) {
        let f = f as i128;
        (self.c + self.cf * f, self.ce + self.cfe * f)
    }
}

/// The budgets at one hidden size: each budget's integer ([`exact`]) as a [`Linear`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct AtHidden {
    pub hidden: u64,
    pub budgets: PerBudget<Linear>,
}

/// The integer the search holds for each budget of `b`: its exact fraction
/// ([`Budgets::fractions`]) times the common denominator of its kind at the keys
/// ([`PerBudget::common_denominators`]: the training FLOPs times the query count, which
/// makes them whole; the parameters and KV elements as they are).
pub(crate) fn exact(b: &Budgets, denominators: PerBudget<u128>) -> Result<PerBudget<i128>> {
    let fractions = b.fractions();
    PerBudget::try_from_fn(|kind| {
        let ((n, d), q) = (fractions[kind], denominators[kind]);
        if !q.is_multiple_of(d) {
            return Err(Error::Internal {
                message: format!(
                    "a {} count {n}/{d} whose denominator does not divide {q}",
                    kind.as_str()
                ),
            });
        }
        n.checked_mul(q / d)
            .and_then(|v| i128::try_from(v).ok())
            .ok_or(Error::Overflow {
                what: "a budget scaled to a whole number",
            })
    })
}

/// The knobs one part of the search holds fixed while it walks hidden sizes and shapes
/// (module docs): an MLA Baseline's per-head widths and a hybrid's recurrent mixer shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fixed {
    /// With MLA, the per-head `(qk_nope_head_dim, v_head_dim)` searched (ignored otherwise).
    pub widths: (u64, u64),
    /// With recurrent layers, their mixer's shape (`None` without them).
    pub mixer: Option<Mixer>,
}

impl Fixed {
    /// Every combination of the lattice's MLA per-head widths and recurrent mixer shapes,
    /// in the lattice's order (one, at `(0, 0)` and no mixer, for a lattice with neither).
    pub fn all(lattice: &crate::budget::Lattice) -> Vec<Self> {
        let widths = match lattice.mla_widths.as_slice() {
            [] => vec![(0, 0)],
            w => w.to_vec(),
        };
        let mixers: Vec<Option<Mixer>> = match lattice.mixers.as_slice() {
            [] => vec![None],
            m => m.iter().copied().map(Some).collect(),
        };
        widths
            .iter()
            .flat_map(|&widths| mixers.iter().map(move |&mixer| Self { widths, mixer }))
            .collect()
    }
}

/// The search's fixed context for cost-model evaluations.
#[derive(Clone, Copy)]
pub(crate) struct Eval<'a> {
    pub budget: &'a Budget,
    pub looping: Option<&'a Loop>,
    pub keys: &'a Keys,
    pub counting: &'a Counting,
    /// The knobs held fixed.
    pub fixed: Fixed,
}

impl Eval<'_> {
    /// The budgets' integers ([`exact`]) of the model at `point`.
    pub fn at(&self, point: Point) -> Result<PerBudget<i128>> {
        let model = looped_model(self.budget, self.looping, point);
        let context = self.budget.baseline().workload.context;
        exact(
            &budgets_with(&model, self.keys, context, self.counting)?,
            PerBudget::common_denominators(self.keys),
        )
    }

    /// The model at `hidden` with the knobs of `shape`: its width the head width (GQA), or
    /// the latent rank (MLA: `kv_heads = heads`, the per-head widths `self.fixed.widths`),
    /// the recurrent mixer `self.fixed.mixer`.
    pub fn point(&self, hidden: u64, shape: Shape) -> Point {
        let Shape {
            expert_ffn,
            heads,
            kv_heads,
            width,
            experts,
        } = shape;
        match crate::budget::mla_of(self.budget.baseline_stack()) {
            None => Point {
                hidden,
                expert_ffn,
                heads,
                kv_heads,
                head_dim: width,
                experts,
                kv_lora_rank: 0,
                mla_widths: (0, 0),
                mixer: self.fixed.mixer,
            },
            Some(m) => Point {
                hidden,
                expert_ffn,
                heads,
                kv_heads: heads,
                head_dim: self.fixed.widths.0 + m.qk_rope_head_dim,
                experts,
                kv_lora_rank: width,
                mla_widths: self.fixed.widths,
                mixer: self.fixed.mixer,
            },
        }
    }
}

impl AtHidden {
    /// Cost-model evaluations per hidden size, besides the one [`AtHidden::heads_term`]
    /// adds.
    pub const EVALUATIONS: u64 = 8;

    /// Whether a term counts query heads apart from the query width: GQA with sinks, or
    /// with an activations policy that saves something per head (eager's rows of
    /// probabilities, flash's log-sum-exp, a fused attention's statistics and per-head q/k
    /// norms' fp32 rows under Megatron-Core).
    pub fn heads_term(budget: &Budget) -> bool {
        let b = budget.baseline();
        let per_head = matches!(
            b.counting.activations,
            ActivationPolicy::Eager
                | ActivationPolicy::Flash
                | ActivationPolicy::TransformersEager
                | ActivationPolicy::TransformersSdpa
                | ActivationPolicy::Megatron
                | ActivationPolicy::MegatronSelective
        );
        let stack = budget.baseline_stack();
        crate::budget::mla_of(stack).is_none() && (stack.counts_per_head() || per_head)
    }

    /// Whether a term counts key/value heads apart from the key width: a per-head key norm
    /// under a stack's activations policy (its fp32 row per key head).
    pub fn kv_heads_term(budget: &Budget) -> bool {
        let b = budget.baseline();
        let rows = matches!(
            b.counting.activations,
            ActivationPolicy::TransformersEager
                | ActivationPolicy::TransformersSdpa
                | ActivationPolicy::Megatron
                | ActivationPolicy::MegatronSelective
        );
        rows && Self::heads_term(budget)
            && (budget.baseline_stack().attention())
                .any(|(a, _)| a.qk_norm == crate::model::QkNorm::PerHead)
    }

    /// Reads the coefficients off the cost model at `hidden` (eight evaluations, nine with
    /// attention sinks, ten with a key/value-heads term).
    pub fn new(eval: &Eval, hidden: u64) -> Result<Self> {
        // Two experts at least: a stack's MoE dispatch sorts tokens by local expert only
        // when there is more than one, a step the coefficients must not straddle.
        let (f0, e0) = (1u64, eval.budget.baseline().model.moe.top_k.max(2));
        let mla = crate::budget::mla_of(eval.budget.baseline_stack()).is_some();
        let v = |shape| eval.at(eval.point(hidden, shape));
        // One knob changed at a time from `s0`.
        let s0 = Shape {
            expert_ffn: f0,
            heads: 1,
            kv_heads: 1,
            width: 1,
            experts: e0,
        };
        let p0 = v(s0)?;
        let pf = v(Shape {
            expert_ffn: f0 + 1,
            ..s0
        })?;
        let pe = v(Shape {
            experts: e0 + 1,
            ..s0
        })?;
        let pfe = v(Shape {
            expert_ffn: f0 + 1,
            experts: e0 + 1,
            ..s0
        })?;
        // GQA: q 1 -> 2; kv 1 -> 2; d 1 -> 2 (q = kv = 2). MLA: heads 1 -> 2 (q and d move
        // by 1); rank 1 -> 2 (kv and d by 1); both (q, kv by 1, d by 3).
        let pq = v(Shape { heads: 2, ..s0 })?;
        let pkv = if mla {
            v(Shape { width: 2, ..s0 })?
        } else {
            v(Shape {
                heads: 2,
                kv_heads: 2,
                ..s0
            })?
        };
        let pd = if mla {
            v(Shape {
                heads: 2,
                width: 2,
                ..s0
            })?
        } else {
            v(Shape { width: 2, ..s0 })?
        };
        // GQA with sinks (parameters per query head): heads 2, width 2 (q 1 -> 4, kv and d
        // 1 -> 2), to separate q from heads. Without sinks no term counts heads (the check
        // below would say so if one did).
        let ph = (Self::heads_term(eval.budget))
            .then(|| {
                v(Shape {
                    heads: 2,
                    width: 2,
                    ..s0
                })
            })
            .transpose()?;
        // Key/value heads apart from the key width: heads 2, kv_heads 2, width 2.
        let pg = (Self::kv_heads_term(eval.budget) && !mla)
            .then(|| {
                v(Shape {
                    heads: 2,
                    kv_heads: 2,
                    width: 2,
                    ..s0
                })
            })
            .transpose()?;
        let probes = Probes {
            p0,
            pf,
            pe,
            pfe,
            pq,
            pkv,
            pd,
            ph,
            pg,
        };
        let at = Self {
            hidden,
            budgets: PerBudget::from_fn(|i| probes.solve(i, (f0, e0), mla)),
        };
        at.check(eval, (f0, e0), mla)?;
        Ok(at)
    }

    /// The check of the coefficients read around `(f0, e0)`: every knob changed at once.
    fn check(&self, eval: &Eval, (f0, e0): (u64, u64), mla: bool) -> Result<()> {
        let (hidden, v) = (self.hidden, |shape| eval.at(eval.point(self.hidden, shape)));
        // The check: every knob changed at once.
        let check = Shape {
            expert_ffn: f0 + 3,
            heads: 4,
            kv_heads: if mla { 1 } else { 2 },
            width: 3,
            experts: e0 + 5,
        };
        let want = v(check)?;
        let k = Knobs::of(mla, check);
        let got = self.budgets.map(|l| l.at(k));
        if got != want {
            return Err(Error::Internal {
                message: format!(
                    "the budgets at hidden size {hidden} are not affine in the knobs as the \
                     solver assumes (predicted {got:?}, cost model {want:?})"
                ),
            });
        }
        Ok(())
    }
}

/// The budgets at the shapes [`AtHidden::new`] reads the coefficients off: `s0`, then one
/// knob (or, where named, two) changed.
struct Probes {
    p0: PerBudget<i128>,
    pf: PerBudget<i128>,
    pe: PerBudget<i128>,
    /// Expert width and count.
    pfe: PerBudget<i128>,
    pq: PerBudget<i128>,
    pkv: PerBudget<i128>,
    pd: PerBudget<i128>,
    /// Heads and width (GQA with a per-head term only, [`AtHidden::heads_term`]).
    ph: Option<PerBudget<i128>>,
    /// Heads, key/value heads and width (GQA with a key/value-heads term only,
    /// [`AtHidden::kv_heads_term`]).
    pg: Option<PerBudget<i128>>,
}

impl Probes {
    /// The coefficients of budget `i`, the probes taken around expert width and count
    /// `(f0, e0)`.
    fn solve(&self, i: BudgetKind, (f0, e0): (u64, u64), mla: bool) -> Linear {
        let cfe = self.pfe[i] - self.pf[i] - self.pe[i] + self.p0[i];
        let (f0, e0) = (f0 as i128, e0 as i128);
        let cf = self.pf[i] - self.p0[i] - cfe * e0;
        let ce = self.pe[i] - self.p0[i] - cfe * f0;
        let (cq, ckv, cd, ch, cg) = if mla {
            let (a, b, c) = (
                self.pq[i] - self.p0[i],
                self.pkv[i] - self.p0[i],
                self.pd[i] - self.p0[i],
            );
            let cd = c - a - b;
            (a - cd, b - cd, cd, 0, 0)
        } else if let Some(ph) = self.ph {
            // pq - p0 = cq + ch; pd - p0 = cq + ckv + cd; ph - p0 = 3cq + ckv + cd + ch;
            // pkv - pq = ckv + cg; pg - ph = 2ckv + cg.
            let (a, dd, x) = (
                self.pq[i] - self.p0[i],
                self.pd[i] - self.p0[i],
                ph[i] - self.p0[i],
            );
            let cq = x - dd - a;
            let kv_step = self.pkv[i] - self.pq[i];
            let (ckv, cg) = match self.pg {
                Some(pg) => {
                    let ckv = pg[i] - ph[i] - kv_step;
                    (ckv, kv_step - ckv)
                }
                None => (kv_step, 0),
            };
            (cq, ckv, dd - cq - ckv, a - cq, cg)
        } else {
            let cq = self.pq[i] - self.p0[i];
            let ckv = self.pkv[i] - self.pq[i];
            (cq, ckv, self.pd[i] - self.pkv[i], 0, 0)
        };
        let c1 = self.p0[i] - cf * f0 - cq - ckv - cd - ch - cg - ce * e0 - cfe * f0 * e0;
        Linear {
            c1,
            cf,
            cq,
            ckv,
            cd,
            ch,
            cg,
            ce,
            cfe,
        }
    }
}

impl Knobs {
    /// The knobs of a shape: GQA `(heads·d, kv_heads·d, d, heads)`; MLA (`d` the latent
    /// rank) `(heads, d, heads·d, 0)`.
    pub fn of(mla: bool, shape: Shape) -> Self {
        let Shape {
            expert_ffn: f,
            heads,
            kv_heads,
            width: d,
            experts: e,
        } = shape;
        if mla {
            Knobs {
                f,
                q: heads,
                kv: d,
                d: heads * d,
                h: 0,
                g: 0,
                e,
            }
        } else {
            Knobs {
                f,
                q: heads * d,
                kv: kv_heads * d,
                d,
                h: heads,
                g: kv_heads,
                e,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The search's reading of a budget by key shape, head count and expert width
        /// ([`InHeads`], [`InFfn`]) is [`Linear::in_experts`], exactly.
        #[test]
        fn the_inner_loop_reads_the_coefficients_exactly(
            c in proptest::array::uniform9(-(1i128 << 60)..(1i128 << 60)),
            mla in any::<bool>(),
            (heads, kv_heads, width, f) in (1u64..512, 1u64..64, 1u64..1024, 1u64..65536),
        ) {
            let [c1, cf, cq, ckv, cd, ch, cg, ce, cfe] = c;
            let l = Linear { c1, cf, cq, ckv, cd, ch, cg, ce, cfe };
            let shape = Shape { expert_ffn: f, heads, kv_heads, width, experts: 0 };
            let fast = l.in_heads(mla, kv_heads, width).in_ffn(heads).in_experts(f);
            prop_assert_eq!(fast, l.in_experts(Knobs::of(mla, shape)));
        }
    }

    /// A Baseline with every feature whose widths are tied to the hidden size: q/k norms,
    /// biases, a gated shared expert, dense layers, a loop; with `extras`, windowed layers,
    /// sinks, router and expert biases, LayerNorm and LM-head biases, counted MTP modules and a
    /// KV budget at the context;
    /// with `mla`, multi-head latent attention instead of GQA (with a sparse attention indexer
    /// when there is no window).
    fn budget(qk: &str, bias: &str, extras: bool, mla: bool) -> Budget {
        let attention = if mla {
            "heads = 6\nkv_heads = 6\nhead_dim = 24\n\
             [baseline.model.mla]\nq_lora_rank = 40\nkv_lora_rank = 32\n\
             qk_nope_head_dim = 16\nqk_rope_head_dim = 8\nv_head_dim = 12\n"
                .to_owned()
        } else {
            format!(
                "heads = 6\nkv_heads = 2\nhead_dim = 16\nqk_norm = \"{qk}\"\n\
                 attention_bias = \"{bias}\"\n"
            )
        };
        // An indexer wherever a query latent and no window are.
        let indexer = if mla && !extras {
            "[baseline.model.indexer]\nheads = 4\nhead_dim = 8\ntopk = 20\n"
        } else {
            ""
        };
        let extras = if extras {
            "[baseline.model.window]\nkind = \"sliding\"\nsize = 50\nlayers = [2, 3, 6]\n\
             [baseline.counting]\nmtp = true\nkv = \"at_context\"\nlm_head = true\n"
        } else {
            ""
        };
        let sinks = if extras.is_empty() {
            ""
        } else {
            "attention_sinks = true\nmtp_layers = 2\nvocab = 100\nnorm_bias = true\n\
             lm_head_bias = true\n"
        };
        let biases = if extras.is_empty() {
            ""
        } else {
            "router_bias = true\nexpert_bias = true\n"
        };
        let text = format!(
            r#"
            [baseline.model]
            layers = 6
            hidden = 96
            {sinks}
            {attention_first}
            [baseline.model.moe]
            experts = 12
            top_k = 2
            expert_ffn = 32
            shared_experts = 1
            shared_ffn = 48
            shared_gate = true
            {biases}
            [baseline.model.dense]
            layers = [1, 5]
            ffn = 200
            {mla_table}
            {indexer}
            {extras}
            [baseline.workload]
            context = 512
            doc_lengths = [[37, 3], [100, 2]]
            [lattice]
            hidden = {{ step = 8, min = 48, max = 192 }}
            "#,
            attention_first = attention.split("[baseline.model.mla]").next().unwrap_or(""),
            mla_table = attention
                .split_once("[baseline.model.mla]")
                .map_or(String::new(), |(_, t)| format!("[baseline.model.mla]{t}")),
        );
        Budget::from_toml_str(&text, std::path::Path::new(".")).unwrap()
    }

    proptest! {
        /// The coefficients predict the cost model exactly anywhere, not only where read.
        #[test]
        fn coefficients_predict_the_cost_model(
            norm in 0usize..3,
            bias in 0usize..3,
            (extras, mla) in (any::<bool>(), any::<bool>()),
            hidden in 1u64..300,
            (f, heads_per_kv, kv_heads, d, e) in (1u64..500, 1u64..8, 1u64..6, 1u64..64, 2u64..400),
        ) {
            let b = budget(["none", "per_head", "full"][norm], ["none", "qkv", "all"][bias], extras, mla);
            let base = b.baseline();
            let keys = Keys::of(&base.workload, &base.model).unwrap();
            let widths = base.model.mla.as_ref().map_or((0, 0), |a| (a.qk_nope_head_dim, a.v_head_dim));
            let mixer = base.model.recurrent.as_ref().map(|r| r.mixer);
            let fixed = Fixed { widths, mixer };
            let eval = Eval { budget: &b, looping: b.looping(), keys: &keys, counting: &base.counting, fixed };
            let at = AtHidden::new(&eval, hidden).unwrap();
            let heads = heads_per_kv * kv_heads;
            let shape = Shape { expert_ffn: f, heads, kv_heads, width: d, experts: e };
            let want = eval.at(eval.point(hidden, shape)).unwrap();
            prop_assert_eq!(at.budgets.map(|l| l.at(Knobs::of(mla, shape))), want);
        }
    }
}
