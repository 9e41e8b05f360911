//! The solver against brute force over every lattice point and against the independent
//! MILP formulation; constraints, conservative mode, determinism and errors.

use std::cmp::Ordering;

use proptest::prelude::*;
use smelt::budget::{
    Budget, FfnRule, HeadsRule, Lattice, Mode, Placement, Recipe, Span, Steps, Weights,
};
use smelt::search::{self, Candidate};
use smelt::{
    ActivationPolicy, Attention, AttentionBias, BudgetKind, Counting, Dense, KvCount, Mla, Model,
    ModelSpec, Moe, PerBudget, Residuals,
};

use crate::common;

/// A Baseline from `[layers, hidden, kv_heads, gqa, head_dim, experts, top_k, expert_ffn]`.
fn baseline(shape: [u64; 8], doc: u64, attention: Attention) -> ModelSpec {
    let mut s = common::spec(shape, doc, attention);
    s.name = Some("base".into());
    s
}

/// Every lattice point, costed with the public API, in the documented total order.
pub(crate) fn brute_force(b: &Budget) -> Vec<(Model, [f64; BudgetKind::COUNT], Residuals)> {
    let base = smelt::budgets(b.baseline()).unwrap();
    let looping = b.looping().cloned();
    let l = b.lattice();
    let m0 = &b.baseline().model;
    let mut all = Vec::new();
    for hidden in l.hidden.values() {
        // Every attention shape `(heads, kv_heads, head_dim, kv_lora_rank, MLA widths)` at
        // this size.
        let mut shapes = Vec::new();
        if let (Some(ranks), HeadsRule::Free { min, max }, Some(a)) =
            (l.kv_lora_rank, l.heads, &m0.mla)
        {
            for &(nope, v) in &l.mla_widths {
                for heads in min..=max {
                    for r in ranks.values() {
                        shapes.push((heads, heads, nope + a.qk_rope_head_dim, r, (nope, v)));
                    }
                }
            }
        }
        for &d in &l.head_dim {
            for kv in l.kv_heads.values() {
                for g in l.gqa.0..=l.gqa.1 {
                    let heads = kv * g;
                    let q = (heads * d) as f64 / hidden as f64;
                    // Query heads a multiple of the full-attention layers' key/value heads.
                    let fits = heads % l.heads_multiple == 0
                        && match l.heads {
                            HeadsRule::Tied => heads * d == hidden,
                            HeadsRule::Free { min, max } => {
                                (min..=max).contains(&heads)
                                    && q >= l.q_width.0 - 1e-12
                                    && q <= l.q_width.1 + 1e-12
                            }
                        };
                    if fits && l.kv_lora_rank.is_none() {
                        shapes.push((heads, kv, d, 0, (0, 0)));
                    }
                }
            }
        }
        // The recurrent mixer shapes (the Baseline's alone when the lattice lists none).
        let mixers: Vec<Option<smelt::Mixer>> = match l.mixers.as_slice() {
            [] => vec![m0.recurrent.as_ref().map(|r| r.mixer)],
            list => list.iter().copied().map(Some).collect(),
        };
        for ffn in l.expert_ffn.values(hidden) {
            for &(heads, kv, d, rank, (nope, v)) in &shapes {
                for &mixer in &mixers {
                    for experts in l.experts.values().filter(|&e| e >= m0.moe.top_k) {
                        let mut spec = b.baseline().clone();
                        spec.model = Model {
                            layers: b.layers(),
                            hidden,
                            heads,
                            kv_heads: kv,
                            head_dim: d,
                            mla: m0.mla.as_ref().map(|a| Mla {
                                kv_lora_rank: rank,
                                qk_nope_head_dim: nope,
                                v_head_dim: v,
                                ..a.clone()
                            }),
                            moe: Moe {
                                experts,
                                expert_ffn: ffn,
                                shared_ffn: l.expert_ffn.shared_width(
                                    m0.moe.shared_ffn,
                                    m0.hidden,
                                    hidden,
                                ),
                                ..m0.moe.clone()
                            },
                            dense: m0.dense.as_ref().map(|dl| Dense {
                                layers: dl.layers.clone(),
                                ffn: l.expert_ffn.shared_width(dl.ffn, m0.hidden, hidden),
                            }),
                            recurrent: m0.recurrent.as_ref().map(|r| smelt::Recurrent {
                                layers: r.layers.clone(),
                                mixer: mixer.unwrap_or(r.mixer),
                            }),
                            looping: looping.clone(),
                            ..m0.clone()
                        };
                        let got = smelt::budgets(&spec).unwrap();
                        // No budget above the Baseline's, compared as exact fractions.
                        // (A budget weighed 0 is reported, not matched: it bounds nothing.)
                        let within = got
                            .fractions()
                            .zip(base.fractions())
                            .zip(**b.weights())
                            .all(|&(((n, d), (bn, bd)), w)| w == 0.0 || n * bd <= bn * d);
                        if b.mode() == Mode::Conservative && !within {
                            continue;
                        }
                        let r: Residuals = got.residuals_against(&base);
                        let mut s = r.zip(**b.weights()).map(|(r, w)| w * r.abs()).into_array();
                        s.sort_by(|a, b| b.total_cmp(a));
                        all.push((spec.model, s, r));
                    }
                }
            }
        }
    }
    let b0 = &b.baseline().model;
    let key = |m: &Model| tie_key(m, b0);
    all.sort_by(|a, b| {
        a.1.iter()
            .zip(&b.1)
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
            .then_with(|| key(&a.0).cmp(&key(&b.0)))
    });
    all
}

/// The documented tie-break key of `m` against the Baseline `b0` (module docs of
/// `smelt::search`), written out here independently of the solver's.
pub(crate) fn tie_key(m: &Model, b0: &Model) -> impl Ord + use<> {
    let rank = |m: &Model| m.mla.as_ref().map_or(0, |a| a.kv_lora_rank);
    let d = |x: u64, y: u64| x.abs_diff(y);
    // The recurrent mixer's knobs in the documented order (zeros without one).
    let mixer = |m: &Model| match m.recurrent.as_ref().map(|r| r.mixer) {
        Some(smelt::Mixer::GatedDeltanet(g)) => {
            [g.key_heads, g.value_heads, g.key_head_dim, g.value_head_dim]
        }
        Some(smelt::Mixer::Mamba2(s)) => [s.heads, s.head_dim, s.state, 0],
        None => [0; 4],
    };
    let (x, y) = (mixer(m), mixer(b0));
    // MLA's value head width (0 otherwise).
    let v = |m: &Model| m.mla.as_ref().map_or(0, |a| a.v_head_dim);
    (
        (
            d(rank(m), rank(b0)),
            d(m.head_dim, b0.head_dim),
            d(m.kv_heads, b0.kv_heads),
            d(m.heads, b0.heads),
            d(m.hidden, b0.hidden),
            d(m.moe.experts, b0.moe.experts),
            d(m.moe.expert_ffn, b0.moe.expert_ffn),
            [d(x[0], y[0]), d(x[1], y[1]), d(x[2], y[2]), d(x[3], y[3])],
            d(v(m), v(b0)),
        ),
        (
            std::cmp::Reverse(m.head_dim),
            m.kv_heads,
            m.heads,
            std::cmp::Reverse(m.hidden),
            m.moe.experts,
            m.moe.expert_ffn,
            rank(m),
            x,
            v(m),
        ),
    )
}

pub(crate) fn arb_budget() -> impl Strategy<Value = Budget> {
    let base = (
        (2u64..=6, 2u64..=8, 1u64..=2, 1u64..=3, 1u64..=4),
        (1u64..=4, 1u64..=3, 1u64..=8, 1u64..=48, any::<bool>()),
        1u64..=6,
    );
    let lattice = (
        (1u64..=4, 1u64..=4, 1u64..=4),  // hidden: step, count, min shift
        (1u64..=4, 1u64..=4, 2u64..=12), // experts: min, step, count
        prop_oneof![
            (1u64..=3, 1u64..=4, 1u64..=4).prop_map(|(n, d, m)| FfnRule::Tied {
                num: n,
                den: d,
                multiple: m
            }),
            (1u64..=4, 1u64..=3).prop_map(|(min, step)| FfnRule::Free(Steps {
                min,
                max: min + 2 * step,
                step
            })),
        ],
        prop::sample::subsequence(vec![2u64, 4, 6, 8], 1..=3),
        any::<bool>(),                       // heads tied
        (1u64..=3, 1u64..=4),                // kv max, gqa max
        (0u64..=3, any::<bool>(), 1u64..=3), // span, conservative, repeats
        (
            prop::sample::select(vec![0.5f64, 1.0, 2.0]),
            // The activations' weight (0: reported, not matched) and policy.
            prop::sample::select(vec![0.0f64, 0.0, 0.5, 1.0, 2.0]),
            0usize..4,
        ),
    );
    // Qwen-style extras on the Baseline: attention biases, a (gated) shared expert, dense
    // layers (bit mask over the layers, dense FFN width).
    let extras = (
        prop::sample::select(vec![
            AttentionBias::None,
            AttentionBias::Qkv,
            AttentionBias::All,
        ]),
        prop_oneof![
            Just(None),
            (1u64..=2, 1u64..=16, any::<bool>()).prop_map(Some)
        ],
        prop_oneof![Just(None), (1u64..64, 1u64..=32).prop_map(Some)],
    );
    // The open MoE architectures: sinks, router and expert biases, windowed layers, counted
    // MTP modules, a KV budget at the context; and MLA (query rank, latent rank, nope,
    // rope, value widths; the lattice's ranks: min, step, count; most heads).
    let newer = (
        (any::<bool>(), any::<bool>(), any::<bool>()),
        proptest::option::of((any::<bool>(), 1u64..=40, 1u64..64)),
        (0u64..=1, any::<bool>(), any::<bool>()),
        proptest::option::of((
            (0u64..=8, 1u64..=8, 0u64..=4, 0u64..=4, 1u64..=4),
            (1u64..=4, 1u64..=4, 1u64..=4, 1u64..=6),
        )),
    );
    (base, lattice, extras, newer).prop_map(
        |(
            ((layers, h8, kv, g, d4), (top_k, e_mult, ffn, doc, dense), hmul),
            (
                (hstep, hcount, hshift),
                (emin, estep, ecount),
                ffn_rule,
                head_dims,
                tied,
                (kvmax, gqamax),
                (span, conservative, repeats),
                (wkv, wact, policy),
            ),
            (bias, shared, dense_layers),
            ((sinks, router_bias, expert_bias), window, (mtp_layers, mtp, at_context), mla),
        )| {
            let hidden = h8 * 8;
            let experts = top_k * e_mult + (hmul % 3);
            let attention = if dense {
                Attention::Dense
            } else {
                Attention::Causal
            };
            let baseline = baseline(
                [layers, hidden, kv, g, d4 * 2, experts, top_k, ffn],
                doc,
                attention,
            );
            let mut baseline = baseline;
            baseline.model.attention_bias = bias;
            if let Some((n, width, gate)) = shared {
                baseline.model.moe.shared_experts = n;
                baseline.model.moe.shared_ffn = width;
                baseline.model.moe.shared_gate = gate;
            }
            if let Some((mask, ffn)) = dense_layers {
                let listed: Vec<u64> = (1..=layers)
                    .filter(|l| mask & (1 << (l - 1)) != 0)
                    .collect();
                if !listed.is_empty() {
                    baseline.model.dense = Some(Dense {
                        layers: listed,
                        ffn,
                    });
                }
            }
            baseline.model.attention_sinks = sinks;
            baseline.model.moe.router_bias = router_bias;
            baseline.model.moe.expert_bias = expert_bias;
            baseline.model.window = window.and_then(|w| common::window(layers, w));
            baseline.model.mtp_layers = mtp_layers;
            baseline.counting = Counting {
                mtp,
                kv: if at_context {
                    KvCount::AtContext
                } else {
                    KvCount::PerToken
                },
                activations: ActivationPolicy::UNFUSED[policy],
                ..baseline.counting
            };
            let mut mla_lattice = None;
            let mut rope = 0;
            if let Some((shape, (rmin, rstep, rcount, hmax))) = mla {
                common::with_mla(&mut baseline.model, common::mla(shape));
                // A sparse attention indexer wherever it can be (a query latent, no window),
                // on every other such Baseline.
                if shape.0 > 0 && baseline.model.window.is_none() && hmul % 2 == 0 {
                    baseline.model.indexer = Some(smelt::Indexer {
                        heads: 1 + hmul % 3,
                        head_dim: 2,
                        topk: 1 + doc / 3,
                    });
                }
                // The Baseline's per-head widths, and on every third budget two more pairs.
                let a = baseline.model.mla.clone().unwrap();
                let (n, v) = (a.qk_nope_head_dim, a.v_head_dim);
                let widths = if hmul % 3 == 0 {
                    vec![(n, v), (n, v + 2), (n + 1, v)]
                } else {
                    vec![(n, v)]
                };
                let mut widths = widths;
                widths.sort_unstable();
                rope = a.qk_rope_head_dim;
                mla_lattice = Some((
                    widths,
                    Steps {
                        min: rmin,
                        max: rmin + rstep * (rcount - 1),
                        step: rstep,
                    },
                    hmax,
                ));
            }
            let hmin = (hidden / 2).max(1) + hshift;
            let recipe = Recipe {
                span: Span::Layers(span.min(layers)),
                placement: Placement::Middle,
                repeats,
                layers: None,
            };
            let lattice = Lattice {
                hidden: Steps {
                    min: hmin,
                    max: hmin + hstep * (hcount - 1),
                    step: hstep,
                },
                experts: Steps {
                    min: emin,
                    max: emin + estep * (ecount - 1),
                    step: estep,
                },
                expert_ffn: ffn_rule,
                head_dim: head_dims,
                heads: if tied {
                    HeadsRule::Tied
                } else {
                    HeadsRule::Free { min: 1, max: 16 }
                },
                kv_heads: Steps {
                    min: 1,
                    max: kvmax,
                    step: 1,
                },
                gqa: (1, gqamax),
                q_width: (0.5, 2.0),
                kv_lora_rank: None,
                mla_widths: Vec::new(),
                mixers: Vec::new(),
                heads_multiple: 1,
            };
            let lattice = match mla_lattice {
                None => lattice,
                Some((widths, ranks, hmax)) => Lattice {
                    head_dim: {
                        let mut d: Vec<u64> = widths.iter().map(|&(n, _)| n + rope).collect();
                        d.dedup();
                        d
                    },
                    mla_widths: widths,
                    heads: HeadsRule::Free { min: 1, max: hmax },
                    kv_heads: Steps {
                        min: 1,
                        max: 1,
                        step: 1,
                    },
                    gqa: (1, 1),
                    q_width: (0.0, f64::INFINITY),
                    kv_lora_rank: Some(ranks),
                    ..lattice
                },
            };
            // The KV weight drawn, every other 1.
            let weights = Weights::new(PerBudget::from_fn(|k| match k {
                BudgetKind::Kv => wkv,
                BudgetKind::Activations => wact,
                _ => 1.0,
            }))
            .expect("positive weights");
            let mode = if conservative {
                Mode::Conservative
            } else {
                Mode::TwoSided
            };
            Budget::new(baseline, recipe, lattice, weights)
                .expect("a valid budget")
                .with_name(Some("prop".into()))
                .with_mode(mode)
        },
    )
}

/// The solver's top 3 for `b` are brute force's, in order, bit for bit (both fail alike),
/// and `each` holds of every one.
fn top3_is_brute_force(
    b: &Budget,
    each: impl Fn(&Candidate) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let brute = brute_force(b);
    match search::solve(b, 3) {
        Ok(sol) => {
            prop_assert_eq!(sol.ranked.len(), brute.len().min(3));
            for (c, (m, s, _)) in sol.ranked.iter().zip(&brute) {
                prop_assert!(
                    same(c, m, s),
                    "solver {:?} {:?}\nbrute {:?} {:?}",
                    c.model,
                    c.score,
                    m,
                    s
                );
                each(c)?;
            }
        }
        Err(e) => {
            prop_assert!(
                brute.is_empty(),
                "solver failed ({e}) but brute force found {:?}",
                brute[0].0
            );
        }
    }
    Ok(())
}

/// The MILP formulation reaches the solver's optimum value of the first criterion for `b`
/// (or both find none).
fn milp_agrees(
    b: &Budget,
    milp: smelt::Result<search::milp::MilpOptimum>,
) -> Result<(), TestCaseError> {
    match (search::solve(b, 1), milp) {
        (Ok(sol), Ok(m)) => {
            let best = sol.best().score[0];
            prop_assert!(
                (best - m.objective).abs() <= 1e-6 * best.max(1.0),
                "solver {best} ({:?}) vs MILP {} ({:?})",
                sol.best().model,
                m.objective,
                m.model
            );
        }
        (Err(_), Err(_)) => {}
        (a, b) => prop_assert!(
            false,
            "one infeasible: solver {:?} MILP {:?}",
            a.map(|s| s.best().score),
            b.map(|m| m.objective)
        ),
    }
    Ok(())
}

pub(crate) fn same(c: &Candidate, m: &Model, s: &[f64; BudgetKind::COUNT]) -> bool {
    &c.model == m && c.score.components() == s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    /// The solver's top 3 are exactly brute force's top 3, in order.
    #[test]
    fn solver_equals_brute_force(b in arb_budget()) {
        let brute = brute_force(&b);
        match search::solve(&b, 3) {
            Ok(sol) => {
                prop_assert!(!brute.is_empty());
                prop_assert_eq!(sol.ranked.len(), brute.len().min(3));
                for (c, (m, s, _)) in sol.ranked.iter().zip(&brute) {
                    prop_assert!(same(c, m, s), "solver {:?} {:?}\nbrute {:?} {:?}", c.model, c.score, m, s);
                }
                let points = sol.stats.lattice_points;
                if b.mode() == Mode::TwoSided {
                    prop_assert_eq!(points, brute.len() as u128);
                }
                prop_assert!(sol.stats.evaluated > 0);
            }
            Err(e) => {
                prop_assert!(brute.is_empty(), "solver failed ({e}) but brute force found {:?}", brute[0].0);
                let msg = e.to_string();
                prop_assert!(msg.contains("no feasible configuration"), "{}", msg);
            }
        }
    }

    /// Every returned configuration satisfies its constraints; conservative results never
    /// exceed any Baseline budget; the search is deterministic.
    #[test]
    fn returned_configs_satisfy_constraints(b in arb_budget()) {
        let Ok(sol) = search::solve(&b, 5) else { return Ok(()); };
        prop_assert_eq!(&sol, &search::solve(&b, 5).unwrap());
        for c in &sol.ranked {
            let m = &c.model;
            let spec = search::model_spec(&b, c);
            prop_assert!(spec.validate().is_ok());
            prop_assert_eq!(m.heads % m.kv_heads, 0);
            let l = b.lattice();
            prop_assert!(l.head_dim.contains(&m.head_dim));
            prop_assert!(l.hidden.values().any(|h| h == m.hidden));
            prop_assert!(l.experts.values().any(|e| e == m.moe.experts));
            prop_assert!(m.moe.experts >= m.moe.top_k);
            prop_assert!(l.expert_ffn.values(m.hidden).contains(&m.moe.expert_ffn));
            prop_assert_eq!(smelt::budgets(&spec).unwrap(), c.budgets);
            if b.mode() == Mode::Conservative {
                prop_assert!(c.residuals.flops <= 0.0 && c.residuals.params <= 0.0 && c.residuals.kv <= 0.0);
            }
        }
        for pair in sol.ranked.windows(2) {
            prop_assert_eq!(pair[0].cmp_rank(&pair[1], &b.baseline().model), Ordering::Less);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The MILP formulation reaches the same optimum value of the first criterion.
    #[test]
    fn solver_equals_milp(b in arb_budget()) {
        let milp = search::milp::solve(&b);
        milp_agrees(&b, milp)?;
    }
}

use common::budget as budget_file;

#[test]
fn paper_example_is_at_least_as_close_as_the_paper() {
    let b = Budget::load(budget_file("match-200m-s95.toml")).unwrap();
    let sol = search::solve(&b, 1).unwrap();
    let r = sol.best().residuals;
    // Paper: FLOPs +2.9%, params +0.4%, KV within 4%.
    assert!(
        r.flops.abs() <= 0.029 && r.params.abs() <= 0.004 && r.kv.abs() <= 0.04,
        "{r:?}"
    );
    assert_eq!(
        sol.best()
            .model
            .looping
            .as_ref()
            .map(|l| (l.first, l.span, l.repeats)),
        Some((4, 6, 2))
    );
}

#[test]
fn milp_agrees_on_the_real_200m_instance() {
    let b = Budget::load(budget_file("match-200m-s95-small.toml")).unwrap();
    let exact = search::solve(&b, 1).unwrap();
    let milp = search::milp::solve(&b).unwrap();
    assert!((exact.best().score[0] - milp.objective).abs() < 1e-7);
    assert!(
        (exact.best().score[0] - 0.025).abs() < 1e-12,
        "KV granularity binds: 104/106.7"
    );
}

/// On the paper-like lattice, weighting each residual by 1 / the paper's worst residual
/// (3.9%, 1.0%, 3.6%) shows which sparse cells can meet all three bounds at once: every one
/// but 100M/S85, whose optimum exceeds 1 — so, the solver being exact, no point of that
/// lattice meets the paper's bounds there (the 8-expert step is too coarse for 1% params).
#[test]
fn paper_bounds_are_met_in_every_sparse_cell_but_one() {
    let grid = smelt::GridSpec::load(budget_file("smelt-grid-paper-bounds.toml")).unwrap();
    let report = smelt::study::match_grid(&grid).unwrap();
    for cell in report.cells.iter().filter(|c| c.sparse) {
        let impossible = cell.scale == "100m" && cell.sparsity_label == "s85";
        assert_eq!(
            cell.score[0] > 1.0,
            impossible,
            "{} {}: {:?}",
            cell.scale,
            cell.sparsity_label,
            cell.score
        );
        assert_eq!(cell.within_tolerance, Some(!impossible));
    }
    // On the finer lattice the same cell matches well within the paper's bounds.
    let fine = smelt::GridSpec::load(budget_file("smelt-grid-fine.toml")).unwrap();
    let report = smelt::study::match_grid(&fine).unwrap();
    let m = report.summary.max_abs_residual;
    assert!(m.flops < 0.039 && m.params < 0.010 && m.kv < 0.036, "{m:?}");
}

/// The KV floor: 12 executions x 160 over 18 executions is a kv width of 106.67, so no
/// lattice can do better than |107 / 106.67 - 1| = 0.3125%; with head_dim in steps of 2,
/// 106 (-0.625%) is the best, and the fine lattice finds it.
#[test]
fn fine_lattice_reaches_the_kv_floor_of_its_step() {
    let b = Budget::load(budget_file("match-200m-s95-fine.toml")).unwrap();
    let sol = search::solve(&b, 1).unwrap();
    let r = sol.best().residuals;
    assert_eq!(sol.best().model.kv_heads * sol.best().model.head_dim, 106);
    assert!((r.kv + 0.00625).abs() < 1e-12);
    assert!(r.flops.abs() < 0.00625 && r.params.abs() < 0.00625, "{r:?}");
}

/// A broken tolerance says why and what would fix it: 100M/S85 on the paper-like lattice
/// cannot meet 1% on parameters (one step of 8 experts is about 7.75% of them), and freeing
/// the expert width does, re-solved exactly.
#[test]
fn a_broken_tolerance_explains_its_floor() {
    let text = format!(
        "baseline = {:?}\n{}",
        budget_file("base-100m-s85.toml"),
        r#"
[lattice]
experts = { step = 8, min = 8, max = 1024 }
expert_ffn = { ratio = "baseline", multiple = 16 }
head_dim = { step = 8, min = 32, max = 256 }
heads = { min = 1, max = 64 }
kv_heads = { min = 1, max = 16 }
gqa = { min = 1, max = 16 }
q_width = { min = 0.75, max = 1.25 }
[tolerance]
flops = 0.039
params = 0.010
kv = 0.036
"#
    );
    let b = Budget::from_toml_str(&text, std::path::Path::new(".")).unwrap();
    let m = smelt::match_budget(&b, 1).unwrap();
    assert_eq!(m.within_tolerance, Some(false));
    let floor = m.floor.as_ref().unwrap();
    assert_eq!(
        floor.budget,
        smelt::search::advice::Binding::Budget(smelt::BudgetKind::Params)
    );
    assert_eq!(floor.knob, "lattice.experts");
    assert!((floor.step_moves - 0.0775).abs() < 0.001, "{floor:?}");
    let best = &m.advice[0];
    assert_eq!(best.knob, "lattice.expert_ffn");
    assert_eq!(best.within_tolerance, Some(true), "{:?}", m.advice);
    // The refinement's residuals are what a match on the refined lattice gives.
    let r = best.residuals.unwrap();
    assert!(r.params.abs() < 0.01 && r.flops.abs() < 0.039 && r.kv.abs() < 0.036);
    // Within tolerance and not asked: no advice.
    let ok = smelt::match_budget(
        &Budget::load(budget_file("match-200m-s95.toml")).unwrap(),
        1,
    )
    .unwrap();
    assert!(ok.floor.is_none() && ok.advice.is_empty());
}

/// The same bytes whatever the number of threads.
#[test]
fn the_search_does_not_depend_on_the_thread_count() {
    let args = [
        "grid",
        &budget_file("smelt-grid-fine.toml"),
        "--format",
        "json",
        "--quiet",
    ];
    let run = |threads: &str| {
        crate::common::smelt()
            .env("RAYON_NUM_THREADS", threads)
            .args(args)
            .output()
            .unwrap()
            .stdout
    };
    let one = run("1");
    assert!(!one.is_empty());
    assert_eq!(one, run("2"));
    assert_eq!(one, run("5"));
}

/// A hybrid of budget `b`'s Baseline: the layers in `mask` (but windowed ones) Gated
/// DeltaNet of `(key heads, value heads per key head, key width, value width, taps)`,
/// attention layers gated; MLA and its indexer dropped (no family has both), the
/// activations weighed 0 (not counted for hybrids). `None` when no layer, or every layer,
/// would be recurrent.
fn hybrid_budget(
    b: Budget,
    mask: u64,
    (nk, group, dk, dv, taps): (u64, u64, u64, u64, u64),
    gate: bool,
    knobs: u64,
) -> Option<Budget> {
    if b.baseline().model.mla.is_some() {
        return None;
    }
    let mut base = b.baseline().clone();
    let m = &mut base.model;
    let windowed = m.window.as_ref().map_or(Vec::new(), |w| w.layers.clone());
    let layers: Vec<u64> = (1..=m.layers)
        .filter(|l| mask & (1 << (l - 1)) != 0 && !windowed.contains(l))
        .collect();
    if layers.is_empty() || layers.len() as u64 == m.layers {
        return None;
    }
    // With `gate` off, every other case is Nemotron-H-like instead: Mamba-2 mixers of
    // `(heads nk·group, width dk, state dv, groups nk, taps, chunk 2)`, those layers
    // mixer-only (but dense ones), relu2 MLPs.
    let mamba = !gate && mask % 2 == 1;
    let dense = m.dense.as_ref().map_or(Vec::new(), |d| d.layers.clone());
    if mamba {
        m.blocks = Some(smelt::Blocks {
            mixer_only: layers
                .iter()
                .copied()
                .filter(|l| !dense.contains(l))
                .collect(),
            ffn_only: Vec::new(),
        })
        .filter(|b| !b.mixer_only.is_empty());
        m.moe.activation = smelt::ExpertActivation::Relu2;
        m.moe.expert_bias = false;
        m.mtp_layers = 0;
        m.indexer = None;
    }
    m.recurrent = Some(smelt::Recurrent {
        layers,
        mixer: if mamba {
            smelt::Mixer::Mamba2(smelt::Mamba2 {
                heads: nk * group,
                head_dim: dk,
                state: dv,
                groups: nk,
                conv_kernel: taps,
                chunk: 2,
                conv_bias: true,
                proj_bias: false,
            })
        } else {
            smelt::Mixer::GatedDeltanet(smelt::GatedDeltaNet {
                key_heads: nk,
                value_heads: nk * group,
                key_head_dim: dk,
                value_head_dim: dv,
                conv_kernel: taps,
            })
        },
    });
    m.attention_gate = gate;
    if base.validate().is_err() {
        // A Nemotron-H-like case without a MoE layer left.
        return None;
    }
    let weights = Weights::new(PerBudget::from_fn(|k| match k {
        BudgetKind::Activations => 0.0,
        k => b.weights()[k],
    }))
    .unwrap();
    let mixer = base.model.recurrent.as_ref().map(|r| r.mixer)?;
    let lattice = smelt::budget::Lattice {
        mixers: mixer_variants(mixer, knobs),
        ..b.lattice().clone()
    };
    Some(
        Budget::new(base, *b.recipe(), lattice, weights)
            .expect("a valid hybrid budget")
            .with_mode(b.mode()),
    )
}

/// The recurrent mixer shapes of a hybrid lattice: none (the Baseline's alone) when
/// `knobs` is 0, else the Baseline's and the valid shapes among each knob of `mixer` moved
/// by -1, 0 or +1 (Gated DeltaNet: its key and value heads and widths; Mamba-2: its heads,
/// width and state) whose bit in `knobs` (by position, modulo 64) is set, the first
/// [`MIXERS`] in all.
fn mixer_variants(mixer: smelt::Mixer, knobs: u64) -> Vec<smelt::Mixer> {
    if knobs == 0 {
        return Vec::new();
    }
    let near = |v: u64| [v.saturating_sub(1).max(1), v, v + 1];
    let mut all = Vec::new();
    match mixer {
        smelt::Mixer::GatedDeltanet(g) => {
            for key_heads in near(g.key_heads) {
                for value_heads in near(g.value_heads) {
                    for key_head_dim in near(g.key_head_dim) {
                        for value_head_dim in near(g.value_head_dim) {
                            all.push(smelt::Mixer::GatedDeltanet(smelt::GatedDeltaNet {
                                key_heads,
                                value_heads,
                                key_head_dim,
                                value_head_dim,
                                ..g
                            }));
                        }
                    }
                }
            }
        }
        smelt::Mixer::Mamba2(m) => {
            for heads in near(m.heads) {
                for head_dim in near(m.head_dim) {
                    for state in near(m.state) {
                        all.push(smelt::Mixer::Mamba2(smelt::Mamba2 {
                            heads,
                            head_dim,
                            state,
                            ..m
                        }));
                    }
                }
            }
        }
    }
    let picked = all
        .into_iter()
        .enumerate()
        .filter(|(i, _)| knobs & (1 << (i % 64)) != 0)
        .map(|(_, m)| m);
    let mut out = vec![mixer];
    for m in picked {
        if out.len() < MIXERS && m.validate().is_ok() && !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// The most mixer shapes [`mixer_variants`] gives (each multiplies the brute force).
const MIXERS: usize = 4;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    /// Hybrid Baselines (Gated DeltaNet or Mamba-2 layers, the latter mixer-only with relu2
    /// MLPs, each looped layer keeping its kind; the KV budget per token or, with the
    /// recurrent state, at the context; on half the lattices the mixer's heads, head widths
    /// and state are knobs too): the solver's top 3 are brute force's, in order.
    #[test]
    fn hybrid_solver_equals_brute_force(
        b in arb_budget(),
        mask in 1u64..64,
        shapes in (1u64..=2, 1u64..=2, 1u64..=3, 1u64..=3, 1u64..=4),
        gate in any::<bool>(),
        knobs in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let b = hybrid_budget(b, mask, shapes, gate, knobs);
        prop_assume!(b.is_some(), "no layer, or every layer, recurrent; or MLA");
        let b = b.unwrap();
        let base = b.baseline().model.recurrent.clone().unwrap();
        let allowed = match b.lattice().mixers.as_slice() {
            [] => vec![base.mixer],
            m => m.to_vec(),
        };
        top3_is_brute_force(&b, |c| {
            // Each looped layer keeps its kind; the mixer is one of the lattice's.
            let r = c.model.recurrent.as_ref().unwrap();
            prop_assert_eq!(&r.layers, &base.layers);
            prop_assert!(allowed.contains(&r.mixer), "{:?} not on the lattice", r.mixer);
            prop_assert_eq!(&c.model.blocks, &b.baseline().model.blocks);
            Ok(())
        })?;
    }
}

/// The lattice of `b` with its recurrent mixer held at the Baseline's shape.
fn mixer_held(b: &Budget) -> Budget {
    let mixer = b.baseline().model.recurrent.as_ref().unwrap().mixer;
    let lattice = smelt::budget::Lattice {
        mixers: vec![mixer],
        ..b.lattice().clone()
    };
    b.with_lattice(lattice).unwrap()
}

/// A Qwen3.5-style Baseline (budgets/match-qwen3.5-style.toml) matches with the loop
/// recipe, each looped layer keeping its kind, within the file's tolerances (all three
/// within 0.5%), and the report carries all three budgets: the KV budget is the cache at the
/// context with the recurrent state in it. The Gated DeltaNet heads and widths are knobs:
/// the mixer moves to one of the lattice's shapes, and held at the Baseline's the cache
/// misses by more than 3%.
#[test]
fn a_qwen3_5_style_baseline_matches() {
    let b = Budget::load(common::budget("match-qwen3.5-style.toml")).unwrap();
    let report = smelt::match_budget(&b, 1).unwrap();
    assert_eq!(
        report.within_tolerance,
        Some(true),
        "{:?}",
        report.residuals
    );
    let (base, looped) = (&report.baseline, &report.looped);
    let (r, r0) = (
        looped.model.recurrent.as_ref().unwrap(),
        base.model.recurrent.as_ref().unwrap(),
    );
    assert_eq!(r.layers, r0.layers);
    assert_ne!(r.mixer, r0.mixer);
    assert!(b.lattice().mixers.contains(&r.mixer));
    assert!(looped.model.looping.is_some());
    let kv = smelt::cost::kv_cache(&looped.model, &looped.workload, &looped.counting).unwrap();
    let state = kv.recurrent_state.unwrap();
    assert_eq!(
        report.budgets.looped.kv.0,
        kv.elements.0 * looped.workload.context + state.elements.0
    );
    for kind in [BudgetKind::Flops, BudgetKind::Params, BudgetKind::Kv] {
        assert!(report.residuals[kind].abs() <= 0.005, "{kind:?}");
    }
    let held = search::solve(&mixer_held(&b), 1).unwrap();
    assert_eq!(held.best().model.recurrent.as_ref(), Some(r0));
    assert!(
        held.best().residuals.kv > 0.03,
        "{:?}",
        held.best().residuals
    );
}

/// SMELT's half span on Nemotron 3 Nano (budgets/match-nemotron-3-nano-half.toml) matches
/// all three budgets within 0.1% with the Mamba-2 heads, width and state on the lattice,
/// each looped layer keeping its kind; held at the Baseline's Mamba-2 shape the cache
/// misses by more than 2%.
#[test]
fn smelt_s_half_span_matches_nemotron_with_mamba_knobs() {
    let b = Budget::load(common::budget("match-nemotron-3-nano-half.toml")).unwrap();
    let report = smelt::match_budget(&b, 1).unwrap();
    assert_eq!(
        report.within_tolerance,
        Some(true),
        "{:?}",
        report.residuals
    );
    let (base, looped) = (&report.baseline, &report.looped);
    let l = looped.model.looping.as_ref().unwrap();
    assert_eq!((l.span, l.repeats), (base.model.layers / 2, 2));
    let r = looped.model.recurrent.as_ref().unwrap();
    assert_eq!(r.layers, base.model.recurrent.as_ref().unwrap().layers);
    assert!(b.lattice().mixers.contains(&r.mixer));
    assert_eq!(looped.model.blocks, base.model.blocks);
    for kind in [BudgetKind::Flops, BudgetKind::Params, BudgetKind::Kv] {
        assert!(report.residuals[kind].abs() <= 0.001, "{kind:?}");
    }
    let held = search::solve(&mixer_held(&b), 1).unwrap();
    let h = held.best().residuals;
    assert!(h.kv > 0.02, "{h:?}");
}

/// Gemma 4 26B-A4B (budgets/match-gemma-4-26b-a4b.toml) matches with SMELT's recipe
/// within 1% on all three budgets: the looped model keeps the windowed layers, the
/// full-attention layers' own shape (2 key/value heads of 512, no value projection) and
/// Gemma's norms and router scales, and is a valid model (its query heads a multiple of
/// the full layers' key/value heads).
#[test]
fn a_gemma_4_baseline_matches() {
    let b = Budget::load(common::budget("match-gemma-4-26b-a4b.toml")).unwrap();
    let report = smelt::match_budget(&b, 1).unwrap();
    assert_eq!(
        report.within_tolerance,
        Some(true),
        "{:?}",
        report.residuals
    );
    let (base, looped) = (&report.baseline.model, &report.looped.model);
    assert_eq!(looped.full_attention, base.full_attention);
    assert_eq!(looped.window, base.window);
    assert_eq!(
        (
            looped.v_norm,
            looped.post_norms,
            looped.moe.branch_norms,
            looped.moe.router_scale
        ),
        (true, true, true, true)
    );
    assert!(looped.looping.is_some());
    assert!(report.looped.validate().is_ok());
    for kind in [BudgetKind::Flops, BudgetKind::Params, BudgetKind::Kv] {
        assert!(report.residuals[kind].abs() <= 0.01, "{kind:?}");
    }
}

/// A Nemotron-H-style Baseline (budgets/match-nemotron-3-nano-style.toml: Mamba-2,
/// attention and MoE one-block layers) matches with a loop of 8 middle layers run twice,
/// each looped layer keeping its kind and its one block, within the file's tolerances (all
/// three within 0.5%); the KV budget is the cache at the context with the convolution and
/// SSM state in it.
#[test]
fn a_nemotron_style_baseline_matches() {
    let b = Budget::load(common::budget("match-nemotron-3-nano-style.toml")).unwrap();
    let report = smelt::match_budget(&b, 1).unwrap();
    assert_eq!(
        report.within_tolerance,
        Some(true),
        "{:?}",
        report.residuals
    );
    let (base, looped) = (&report.baseline, &report.looped);
    assert_eq!(looped.model.recurrent, base.model.recurrent);
    assert_eq!(looped.model.blocks, base.model.blocks);
    assert_eq!(looped.model.moe.activation, smelt::ExpertActivation::Relu2);
    assert!(looped.model.looping.is_some());
    let kv = smelt::cost::kv_cache(&looped.model, &looped.workload, &looped.counting).unwrap();
    let state = kv.recurrent_state.unwrap();
    assert_eq!(state.kind, "mamba2");
    assert_eq!(
        report.budgets.looped.kv.0,
        kv.elements.0 * looped.workload.context + state.elements.0
    );
    for kind in [BudgetKind::Flops, BudgetKind::Params, BudgetKind::Kv] {
        assert!(report.residuals[kind].abs() <= 0.005, "{kind:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Hybrid Baselines whose lattices move the recurrent mixer's shape: the MILP
    /// formulation (every mixer shape a pair of its own) reaches the solver's optimum.
    #[test]
    fn hybrid_solver_equals_milp(
        b in arb_budget(),
        mask in 1u64..64,
        shapes in (1u64..=2, 1u64..=2, 1u64..=3, 1u64..=3, 1u64..=4),
        gate in any::<bool>(),
        knobs in 1u64..,
    ) {
        let b = hybrid_budget(b, mask, shapes, gate, knobs);
        prop_assume!(b.is_some(), "no layer, or every layer, recurrent; or MLA");
        let b = b.unwrap();
        let milp = search::milp::solve(&b);
        // The pure-Rust simplex (microlp) can fail numerically ("Singular matrix") on a
        // degenerate instance: no verdict there, said and skipped.
        if let Err(smelt::Error::Solver { message }) = &milp {
            eprintln!("hybrid_solver_equals_milp: skipped, the MILP backend failed: {message}");
            prop_assume!(false, "the MILP backend failed numerically");
        }
        milp_agrees(&b, milp)?;
    }
}

/// A Gemma 4-style Baseline of budget `b`'s: its layers that are not windowed are full
/// attention of `fk` key/value heads (the `pick`-th divisor of its heads up to 4) of width
/// `fd`, without a
/// value projection when `k_eq_v`; by the bits of `pieces`, value norms, post norms, branch
/// norms and router scales on the MoE, gelu_tanh experts. MLA, its indexer and the attention
/// gate are dropped (Gemma has none), the activations weighed 0 (not counted for Gemma's
/// pieces), the lattice's heads multiples of `fk`. `None` for an MLA Baseline, or one
/// without a full-attention layer.
fn gemma_budget(b: Budget, (pick, fd, k_eq_v): (u64, u64, bool), pieces: u64) -> Option<Budget> {
    let mut base = b.baseline().clone();
    let m = &mut base.model;
    if m.mla.is_some() {
        return None;
    }
    // The full layers' key/value heads: one of the divisors of the heads up to 4, by `pick`.
    let divisors: Vec<u64> = (1..=4).filter(|d| m.heads.is_multiple_of(*d)).collect();
    let fk = divisors[pick as usize % divisors.len()];
    m.full_attention = Some(smelt::FullAttention {
        kv_heads: fk,
        head_dim: fd,
        k_eq_v,
    });
    m.v_norm = pieces & 1 != 0;
    m.post_norms = pieces & 2 != 0;
    m.moe.branch_norms = pieces & 4 != 0;
    m.moe.router_scale = pieces & 8 != 0;
    if pieces & 16 != 0 {
        m.moe.activation = smelt::ExpertActivation::GeluTanh;
    }
    m.attention_gate = false;
    if base.validate().is_err() {
        return None;
    }
    let weights = Weights::new(PerBudget::from_fn(|k| match k {
        BudgetKind::Activations => 0.0,
        k => b.weights()[k],
    }))
    .unwrap();
    let lattice = smelt::budget::Lattice {
        heads_multiple: fk,
        ..b.lattice().clone()
    };
    Some(
        Budget::new(base, *b.recipe(), lattice, weights)
            .expect("a valid Gemma-style budget")
            .with_mode(b.mode()),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    /// Gemma 4-style Baselines (full-attention layers of their own key/value heads and head
    /// width, with or without a value projection, beside the windowed ones; value, post and
    /// branch norms, router scales; the KV budget per token or at the context): the solver's
    /// top 3 are brute force's, in order, each a valid model keeping the Baseline's
    /// full-attention shape.
    #[test]
    fn gemma_solver_equals_brute_force(
        b in arb_budget(),
        full in (0u64..4, 1u64..=6, any::<bool>()),
        pieces in 0u64..32,
    ) {
        let b = gemma_budget(b, full, pieces);
        prop_assume!(b.is_some(), "MLA, or no full-attention layer");
        let b = b.unwrap();
        top3_is_brute_force(&b, |c| {
            prop_assert_eq!(&c.model.full_attention, &b.baseline().model.full_attention);
            prop_assert!(c.model.validate().is_ok(), "{:?}", c.model.validate());
            Ok(())
        })?;
    }
}
