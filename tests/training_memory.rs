//! Training memory against a brute-force count: every parameter tensor of the model listed
//! one by one (as a Transformers/Megatron module tree holds them), each placed on its
//! pipeline stage and cut as its parallelism cuts it, summed for one GPU (TP rank 0, EP
//! rank 0), then sharded by ZeRO as a flat buffer padded to its group; against the closed
//! form of `smelt::training_memory`, on random models of every supported architecture and
//! random layouts.

use proptest::prelude::*;
use smelt::{AttentionBias, Model, ModelSpec, QkNorm, Training, training_memory};

/// Where a tensor lives.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    Layer(u64),
    Embedding,
    Head,
}

/// One parameter tensor: its place, its elements, whether TP cuts it, and the routed
/// expert it belongs to.
struct Tensor {
    place: Place,
    numel: u64,
    tp: bool,
    expert: Option<u64>,
}

fn rep(place: Place, numel: u64) -> Tensor {
    Tensor {
        place,
        numel,
        tp: false,
        expert: None,
    }
}

fn cut(place: Place, numel: u64) -> Tensor {
    Tensor {
        place,
        numel,
        tp: true,
        expert: None,
    }
}

/// A SwiGLU of width `f` (gate, up, down and, with `bias`, their biases) of expert `e`.
fn swiglu(out: &mut Vec<Tensor>, p: Place, h: u64, f: u64, bias: bool, e: Option<u64>) {
    for numel in [f * h, f * h, h * f] {
        out.push(Tensor {
            expert: e,
            ..cut(p, numel)
        });
    }
    if bias {
        out.push(Tensor {
            expert: e,
            ..cut(p, f)
        });
        out.push(Tensor {
            expert: e,
            ..cut(p, f)
        });
        out.push(Tensor {
            expert: e,
            ..rep(p, h)
        });
    }
}

/// Every parameter tensor of `m`, embedding and LM head included (a tied head once, as the
/// embedding, plus its copy on the last stage when `pp > 1`).
fn tensors(m: &Model, pp: u64) -> Vec<Tensor> {
    let h = m.hidden;
    let mut out = Vec::new();
    let norm = |out: &mut Vec<Tensor>, p| {
        out.push(rep(p, h));
        if m.norm_bias {
            out.push(rep(p, h));
        }
    };
    for l in 1..=m.layers {
        let p = Place::Layer(l);
        norm(&mut out, p);
        norm(&mut out, p);
        match &m.mla {
            None => {
                let (q, kv) = (m.heads * m.head_dim, m.kv_heads * m.head_dim);
                for numel in [q * h, kv * h, kv * h, h * q] {
                    out.push(cut(p, numel));
                }
                if m.attention_bias != AttentionBias::None {
                    for numel in [q, kv, kv] {
                        out.push(cut(p, numel));
                    }
                }
                if m.attention_bias == AttentionBias::All {
                    out.push(rep(p, h));
                }
                match m.qk_norm {
                    QkNorm::None | QkNorm::L2 => {}
                    QkNorm::PerHead => {
                        out.push(rep(p, m.head_dim));
                        out.push(rep(p, m.head_dim));
                    }
                    QkNorm::Full => {
                        out.push(cut(p, q));
                        out.push(cut(p, kv));
                    }
                }
            }
            Some(a) => {
                let qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
                if a.q_lora_rank > 0 {
                    out.push(rep(p, a.q_lora_rank * h));
                    out.push(rep(p, a.q_lora_rank));
                    out.push(cut(p, m.heads * qk * a.q_lora_rank));
                } else {
                    out.push(cut(p, m.heads * qk * h));
                }
                out.push(rep(p, (a.kv_lora_rank + a.qk_rope_head_dim) * h));
                out.push(rep(p, a.kv_lora_rank));
                out.push(cut(
                    p,
                    m.heads * (a.qk_nope_head_dim + a.v_head_dim) * a.kv_lora_rank,
                ));
                out.push(cut(p, h * m.heads * a.v_head_dim));
            }
        }
        if m.attention_sinks {
            out.push(cut(p, m.heads));
        }
        if let Some(ix) = &m.indexer {
            let r_q = m.mla.as_ref().map_or(0, |a| a.q_lora_rank);
            for numel in [
                ix.heads * ix.head_dim * r_q,
                ix.head_dim * h,
                ix.head_dim,
                ix.head_dim,
                ix.heads * h,
            ] {
                out.push(rep(p, numel));
            }
        }
        let dense = m.dense.as_ref().filter(|d| d.layers.contains(&l));
        if let Some(d) = dense {
            swiglu(&mut out, p, h, d.ffn, false, None);
            continue;
        }
        let e = &m.moe;
        out.push(rep(p, e.experts * h));
        if e.router_bias {
            out.push(rep(p, e.experts));
        }
        for i in 0..e.experts {
            swiglu(&mut out, p, h, e.expert_ffn, e.expert_bias, Some(i));
        }
        for _ in 0..e.shared_experts {
            swiglu(&mut out, p, h, e.shared_ffn, false, None);
        }
        if e.shared_gate {
            out.push(rep(p, h));
        }
    }
    out.push(cut(Place::Embedding, m.vocab * h));
    norm(&mut out, Place::Head);
    if !m.tie_embeddings || pp > 1 {
        out.push(cut(Place::Head, m.vocab * h));
    }
    if m.lm_head_bias {
        out.push(cut(Place::Head, m.vocab));
    }
    out
}

/// `spec` made divisible by the layout: heads, widths and vocabulary times `tp`, experts
/// times `ep`, `pp - 1` layers of each stage's size appended after the model's own.
fn divisible(mut spec: ModelSpec, t: &Training) -> ModelSpec {
    let m = &mut spec.model;
    m.heads *= t.tp;
    m.kv_heads *= t.tp;
    m.moe.expert_ffn *= t.etp();
    m.moe.shared_ffn *= t.tp;
    m.moe.experts *= t.ep;
    if let Some(d) = &mut m.dense {
        d.ffn *= t.tp;
    }
    m.vocab *= t.tp;
    m.layers *= t.pp;
    spec.counting.mtp = false;
    // The unfused count, which every random model has (the stacks refuse some features).
    spec.counting.activations = smelt::ActivationPolicy::Flash;
    spec.training = Some(*t);
    spec
}

fn arb_training() -> impl Strategy<Value = Training> {
    (
        1u64..=2,
        1u64..=2,
        1u64..=3,
        1u64..=3,
        0u64..=3,
        1u64..=2,
        (1u64..=4, 1u64..=4, 0u64..=4, 0u64..=8),
        proptest::bool::ANY,
    )
        .prop_map(
            |(tp, ep, pp, k, zero, micro_batch, (w, g, master, opt), etp_tp)| Training {
                tp,
                ep,
                etp: etp_tp.then_some(tp),
                pp,
                first_stage_layers: None,
                last_stage_layers: None,
                dp: ep * k,
                cp: 1,
                vp: 1,
                zero,
                micro_batch,
                weight_bytes: w,
                grad_bytes: g,
                master_bytes: master,
                optimizer_bytes: opt,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Per stage and GPU: parameters, weights, gradients and optimizer bytes equal the
    /// tensor-by-tensor count; the stages' activations add up to the model's.
    #[test]
    fn per_gpu_memory_equals_the_tensor_by_tensor_count(
        (spec, _) in crate::reference::arb_spec(),
        t in arb_training(),
    ) {
        let spec = divisible(spec, &t);
        prop_assume!(spec.validate().is_ok());
        let m = &spec.model;
        let mem = training_memory(&spec, &t).unwrap();
        let all = tensors(m, t.pp);
        // One replica, unsharded: the cost model's parameters with embedding and head
        // (a copy of a tied head on the last stage is not another parameter).
        let copy = if m.tie_embeddings && t.pp > 1 { m.vocab * m.hidden } else { 0 };
        prop_assert_eq!(mem.params.0 + copy, all.iter().map(|x| x.numel).sum::<u64>());
        prop_assert_eq!(mem.static_bytes.0, mem.params.0 * t.bytes_per_param());
        let per = m.layers / t.pp;
        let mut activations = smelt::ActivationBytes::ZERO;
        for st in &mem.stages {
            let s = st.stage;
            let here = |p: Place| match p {
                Place::Layer(l) => (l - 1) / per + 1 == s,
                Place::Embedding => s == 1,
                Place::Head => s == t.pp,
            };
            let mut own = 0;
            let mut expert = 0;
            for x in all.iter().filter(|x| here(x.place)) {
                // Routed experts are cut by etp, the rest by tp.
                let n = match (x.tp, x.expert) {
                    (true, Some(_)) => x.numel / t.etp(),
                    (true, None) => x.numel / t.tp,
                    (false, _) => x.numel,
                };
                match x.expert {
                    None => own += n,
                    // EP rank 0 holds the first experts / ep of each layer.
                    Some(i) if i < m.moe.experts / t.ep => expert += n,
                    Some(_) => {}
                }
            }
            prop_assert_eq!(st.params.0, own);
            prop_assert_eq!(st.expert_params.0, expert);
            // ZeRO: a flat buffer of n elements over a group of g GPUs, padded to g equal
            // partitions; rank 0's partition.
            let part = |n: u64, g: u64, on: bool| {
                if !on { return n; }
                let mut size = 0;
                while size * g < n { size += 1; }
                size
            };
            let edp = t.tp * t.dp / (t.etp() * t.ep);
            let held = |z: u64| part(own, t.dp, t.zero >= z) + part(expert, edp, t.zero >= z);
            prop_assert_eq!(st.weights.0, held(3) * t.weight_bytes);
            prop_assert_eq!(st.grads.0, held(2) * t.grad_bytes);
            prop_assert_eq!(st.optimizer.0, held(1) * (t.master_bytes + t.optimizer_bytes));
            prop_assert_eq!(st.in_flight, t.pp - s + 1);
            prop_assert_eq!(
                st.peak,
                st.activations_per_micro_batch
                    .checked_mul(st.in_flight)
                    .unwrap()
                    .checked_add(smelt::ActivationBytes::from_int(st.static_bytes.0))
                    .unwrap()
            );
            prop_assert!(mem.peak >= st.peak);
            activations = activations
                .checked_add(st.activations_per_micro_batch.checked_mul(t.tp).unwrap())
                .unwrap();
        }
        prop_assert!(mem.stages.iter().any(|st| st.peak == mem.peak && st.stage == mem.peak_stage));
        let whole = smelt::budgets(&spec).unwrap().activations;
        let tokens = spec.workload.context * t.micro_batch;
        prop_assert_eq!(activations, whole.checked_mul(tokens).unwrap());
    }
}

/// Digits in groups of three, as the tables print them.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The guide's per-GPU peaks of the 200M / S95 pair are what `smelt cost --against`
/// computes.
#[test]
fn readme_shows_the_200m_peaks() {
    let args = [
        "cost",
        "budgets/smelt-200m-s95.toml",
        "--against",
        "budgets/base-200m-s95.toml",
        "--ep",
        "8",
        "--pp",
        "2",
        "--dp",
        "8",
        "--zero",
        "1",
        "--format",
        "json",
    ];
    let json = crate::common::run_json(&args);
    let peak = |side: &str| json[side]["training"]["peak"].as_u64().unwrap();
    let (base, looped) = (peak("baseline"), peak("model"));
    let guide = std::fs::read_to_string("docs/guide.md").unwrap();
    let shown = format!(
        "Baseline's peak per GPU is {} bytes and the\nlooped model's {} ({:+.2}%)",
        grouped(base),
        grouped(looped),
        (looped as f64 / base as f64 - 1.0) * 100.0
    );
    assert!(guide.contains(&shown), "the guide should say: {shown}");
}

/// Bad layouts and tables: refused with the field named, never a panic.
#[test]
fn bad_training_inputs_are_refused() {
    let (code, _, err) = crate::common::run(&["cost", "budgets/base-200m-s95.toml", "--tp", "3"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("training.tp") && err.contains("model.heads"),
        "{err}"
    );
    let (code, _, err) = crate::common::run(&["cost", "budgets/base-200m-s95.toml", "--zero", "5"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("training.zero"), "{err}");
    let base = std::fs::read_to_string("budgets/base-200m-s95.toml").unwrap();
    for (table, field) in [
        ("[training]\ntpp = 2\n", "tpp"),
        ("training = [1, 2]\n", "training"),
        ("[training]\npp = 5\n", "training.pp"),
    ] {
        let text = if table.starts_with('[') {
            format!("{base}\n{table}")
        } else {
            format!("{table}{base}")
        };
        let path = crate::common::temp_file("toml", &text);
        let (code, _, err) = crate::common::run(&["cost", path.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{table}");
        assert!(err.contains(field), "{table}: {err}");
    }
}

/// A loop that crosses a pipeline-stage boundary sends each micro-batch through those
/// stages more than once, which the 1F1B count of micro-batches in flight does not
/// describe: the memory says so (JSON `pipeline_note`, a note under `cost`, `M~` in a
/// grid), and is silent for a loop inside one stage and for an unlooped model.
#[test]
fn a_loop_across_pipeline_stages_is_flagged() {
    let looped = smelt::ModelSpec::load("budgets/smelt-200m-s95.toml").unwrap();
    let base = smelt::ModelSpec::load("budgets/base-200m-s95.toml").unwrap();
    let note = |spec: &ModelSpec, pp: u64| {
        let t = Training {
            pp,
            ..Training::default()
        };
        training_memory(spec, &t).unwrap().pipeline_note
    };
    // Layers 4-9 looped: stages of 6 (1-6, 7-12) and of 3 (4-6, 7-9) split the loop.
    for pp in [2, 4] {
        let n = note(&looped, pp).expect("the loop crosses stages");
        assert!(n.contains("layers 4-9") && n.contains("not exact"), "{n}");
    }
    // One stage holds the whole model; twelve stages of one layer each split the loop too.
    assert_eq!(note(&looped, 1), None);
    assert!(note(&looped, 12).is_some());
    for pp in [1, 2, 4, 12] {
        assert_eq!(note(&base, pp), None, "unlooped, pp {pp}");
    }
    let (_, out, _) = crate::common::run(&["cost", "budgets/smelt-200m-s95.toml", "--pp", "2"]);
    assert!(out.contains("crosses pipeline stages 1-2"), "{out}");
}
