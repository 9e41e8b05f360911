//! The `megatron` activation policies against the published formula they follow:
//! Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
//! (arXiv:2205.05198, §4), for the dense parts of a layer, and the tensor-by-tensor table of
//! `smelt::cost::megatron` for the MoE parts, each computed here from the model's shape
//! alone, on Mixtral-8x7B, Qwen3-30B-A3B and DeepSeek-V3 at their published layouts
//! (Megatron-MoE model zoo, runtime_configs/benchmarking/runtime.conf: Mixtral-8x7B TP1 PP4
//! EP8 VPP8, Qwen3-30B-A3B TP1 PP1 EP8, DeepSeek-V3 TP1 PP16 EP64 with 4 layers on the
//! first stage and 1 on the last; every one MBS 1, sequence 4096, ETP 1).
//!
//! Korthikanti et al.'s layer (16-bit, `s` tokens, batch `b`, hidden `h`, `a` heads, `t`
//! tensor-parallel ranks with sequence parallelism) saves, per tensor: each layer norm's
//! input `2sbh` (two), the QKV projection's input `2sbh`, `Q` and `K` `4sbh`, the softmax
//! output `2as²b`, its dropout mask `as²b`, the dropout's output `2as²b`, `V` `2sbh`, the
//! output projection's input `2sbh`, the attention dropout mask `sbh`; the MLP's first
//! linear input `2sbh`, the GeLU's input `8sbh`, the second linear's input `8sbh`, its
//! dropout mask `sbh`: `34sbh + 5as²b` with no recomputation, `34sbh` with selective
//! recomputation, all over `t` with sequence parallelism. Generalised here to the models'
//! shapes: `Q`, `K`, `V` and the output projection's input at their widths (`q = a·d`,
//! `kv = g·d`), the MLP's activation input and second input at a gated unit's widths
//! (`2·2F`, `2F`), a MoE FFN's "first linear input" its normed input `2h`. With a fused
//! attention the `as²` terms are not materialised; the published recipes set both dropouts
//! to 0, so no mask is saved. What Megatron-Core keeps beyond that is a named term below,
//! asserted exactly.

use smelt::cost::megatron::{self, Split};
use smelt::model::Stack;
use smelt::{ActivationPolicy, ModelSpec, RecomputeModule, RecomputeModules, Training};

/// A model of `tests/data/hf` with sequences of 4096 tokens.
fn model(file: &str) -> ModelSpec {
    let mut spec = ModelSpec::load(format!("tests/data/hf/{file}")).unwrap();
    spec.workload.context = 4096;
    spec.workload.mean_doc_len = Some(4096);
    spec.workload.doc_lengths = None;
    spec.counting.embeddings = false;
    spec.counting.lm_head = false;
    spec
}

/// Korthikanti et al.'s attention block and both layer-norm inputs, generalised (module
/// docs), in bytes per token (`s = b = 1`): no score terms (fused attention), no dropout.
fn korthikanti_attention(h: u128, q: u128, kv: u128) -> u128 {
    let norm_inputs = 2 * h + 2 * h;
    let qkv_input = 2 * h;
    let q_k = 2 * q + 2 * kv;
    let v = 2 * kv;
    let projection_input = 2 * q;
    norm_inputs + qkv_input + q_k + v + projection_input
}

/// Korthikanti et al.'s MLP block, generalised to a gated unit of width `f`: first linear
/// input `2h`, the activation's input `2·2f`, the second linear's input `2f`.
fn korthikanti_mlp(h: u128, f: u128) -> u128 {
    2 * h + 2 * (2 * f) + 2 * f
}

/// Bytes per token of one layer execution of `kind` under `policy` (module units).
fn per_layer(
    spec: &ModelSpec,
    stack: &Stack,
    kind: &smelt::model::LayerKind,
    policy: ActivationPolicy,
    split: Split,
) -> smelt::cost::ActivationBreakdown {
    let one = smelt::model::LayerKind {
        executions: 1,
        ..kind.clone()
    };
    let mut c = spec.counting;
    c.activations = policy;
    megatron::activations(stack, &[one], &c, policy, split).unwrap()
}

fn int(a: smelt::ActivationBytes) -> u128 {
    u128::from(a.as_integer().unwrap())
}

/// The MoE tensors of the policy's table, per token of one layer: router `E + 4E + 4E`, the
/// first permutation's int32 map `4·(2E + 1)`, per routed copy `etp·(2h + 4 + 8)` (the
/// dispatched input, the fp32 routing weight, the int32 sort and unsort maps with more than
/// one local expert) and `2·3F` (fc1's output, the SwiGLU's output), shared experts
/// `2·3·F_s`.
fn moe_table(e: &smelt::Moe, h: u128, split: Split) -> u128 {
    let (ne, k, f) = (
        u128::from(e.experts),
        u128::from(e.top_k),
        u128::from(e.expert_ffn),
    );
    let maps = if e.experts / split.ep > 1 { 8 } else { 0 };
    let router = ne + 4 * ne + 4 * ne + 4 * (2 * ne + 1);
    let copy = u128::from(split.etp) * (2 * h + 4 + maps) + 2 * 3 * f;
    let shared = 2 * 3 * u128::from(e.shared_experts * e.shared_ffn);
    router + k * copy + shared
}

/// GQA models (Mixtral, Qwen3): the dense parts equal Korthikanti's formula plus the named
/// terms, under no recomputation and `core_attn`, at the published layout and with `tp`
/// ranks; the MoE parts equal the table.
fn check_gqa(file: &str, split: Split) {
    let spec = model(file);
    let m = &spec.model;
    let stack = Stack::of(m).unwrap();
    let (h, a, g, d) = (
        u128::from(m.hidden),
        u128::from(m.heads),
        u128::from(m.kv_heads),
        u128::from(m.head_dim),
    );
    let (q, kv) = (a * d, g * d);
    let rstd = 2 * 4;
    let statistics = 4 * a;
    let qk_norms = match m.qk_norm {
        smelt::QkNorm::PerHead => 2 * (q + kv) + 4 * (a + g),
        _ => 0,
    };
    for kind in stack.kinds() {
        let none = per_layer(&spec, &stack, kind, ActivationPolicy::Megatron, split);
        let dense = int(none.norms) + int(none.attention) + int(none.scores) + int(none.ffn_input);
        let formula = korthikanti_attention(h, q, kv) + 2 * h;
        assert_eq!(
            dense,
            formula + rstd + statistics + qk_norms,
            "{file}: no recompute"
        );
        let sel = per_layer(
            &spec,
            &stack,
            kind,
            ActivationPolicy::MegatronSelective,
            split,
        );
        let dense = int(sel.norms) + int(sel.attention) + int(sel.scores) + int(sel.ffn_input);
        // core_attn: the checkpoint's view of v keeps the packed QKV output.
        let packed_qkv = 2 * (q + 2 * kv) - 2 * kv;
        assert_eq!(
            dense,
            formula + rstd + qk_norms + packed_qkv,
            "{file}: selective"
        );
        let smelt::model::Ffn::Moe(e) = kind.layer.ffn.as_ref().unwrap() else {
            panic!("{file}: every layer is MoE");
        };
        let moe = int(none.router) + int(none.experts) + int(none.shared);
        assert_eq!(moe, moe_table(e, h, split), "{file}: MoE table");
        let full = per_layer(&spec, &stack, kind, ActivationPolicy::MegatronFull, split);
        assert_eq!(int(full.total().unwrap()), 2 * h, "{file}: full");
    }
}

#[test]
fn mixtral_and_qwen3_follow_korthikanti_and_the_table() {
    // Published: TP1, EP8 (one expert per GPU for Mixtral: no sort maps).
    for (file, tps) in [
        ("mixtral-8x7b-v0.1.json", [1, 8]),
        ("qwen3-30b-a3b.json", [1, 4]),
    ] {
        for tp in tps {
            check_gqa(file, Split { tp, etp: 1, ep: 8 });
        }
        check_gqa(
            file,
            Split {
                tp: 2,
                etp: 2,
                ep: 4,
            },
        );
    }
}

/// DeepSeek-V3 (MLA): Korthikanti's formula with `Q`, `K` at `a·(d_n + d_r)`, `V` and the
/// output projection's input at `a·d_v`, the "QKV input" the normed input the
/// down-projections read, plus the latents' saves (named); its three dense layers'
/// MLP as the formula's.
#[test]
fn deepseek_v3_follows_korthikanti_and_the_table() {
    let spec = model("deepseek-v3.json");
    let m = &spec.model;
    let mla = m.mla.as_ref().unwrap();
    let stack = Stack::of(m).unwrap();
    let (h, a) = (u128::from(m.hidden), u128::from(m.heads));
    let (rq, r, dn, dr, dv) = (
        u128::from(mla.q_lora_rank),
        u128::from(mla.kv_lora_rank),
        u128::from(mla.qk_nope_head_dim),
        u128::from(mla.qk_rope_head_dim),
        u128::from(mla.v_head_dim),
    );
    let (qk, v) = (a * (dn + dr), a * dv);
    // Korthikanti's attention with MLA's widths: K at qk, V at v.
    let formula_attention = 2 * h + 2 * h + 2 * h + 2 * qk + 2 * qk + 2 * v + 2 * v;
    // The latents: each up-projection's input (the key/value latent's storage includes
    // its RoPE part), its fp32 rstd and its normed copy.
    let latents = 2 * rq + 4 + 2 * rq + 2 * (r + dr) + 4 + 2 * r;
    let (rstd, statistics) = (2 * 4, 4 * a);
    for tp in [1u64, 8] {
        let split = Split { tp, etp: 1, ep: 64 };
        for kind in stack.kinds() {
            let none = per_layer(&spec, &stack, kind, ActivationPolicy::Megatron, split);
            let dense =
                int(none.norms) + int(none.attention) + int(none.scores) + int(none.ffn_input);
            let ffn = match kind.layer.ffn.as_ref().unwrap() {
                smelt::model::Ffn::Dense { width, .. } => {
                    let f = u128::from(*width);
                    // The dense MLP's formula; its first-linear input is the FFN input.
                    assert_eq!(int(none.dense) + 2 * h, korthikanti_mlp(h, f));
                    2 * h
                }
                smelt::model::Ffn::Moe(e) => {
                    let moe = int(none.router) + int(none.experts) + int(none.shared);
                    assert_eq!(moe, moe_table(e, h, split), "MoE table, tp {tp}");
                    2 * h
                }
            };
            assert_eq!(
                dense,
                formula_attention + ffn + latents + rstd + statistics,
                "no recompute, tp {tp}"
            );
            // The published best practice: mla_up_proj and mlp recomputed.
            let mut c = spec.counting;
            c.activations = ActivationPolicy::MegatronSelective;
            c.recompute_modules =
                RecomputeModules::of(&[RecomputeModule::MlaUpProj, RecomputeModule::Mlp]);
            let one = smelt::model::LayerKind {
                executions: 1,
                ..kind.clone()
            };
            let sel = megatron::activations(&stack, &[one], &c, c.activations, split).unwrap();
            // Kept: the input norm's saves and normed input, the latents as the checkpoint
            // takes them (the key/value storage; the RoPE key gathered over the sequence
            // on every rank when tp > 1), the output and the statistics; q, k, v dropped.
            let gathered = if tp > 1 { 2 * dr * u128::from(tp) } else { 0 };
            let kept = 2 * h + 4 + 2 * h + 2 * rq + 2 * (r + dr) + gathered + 2 * v + statistics;
            let ffn_kept = match kind.layer.ffn.as_ref().unwrap() {
                smelt::model::Ffn::Dense { .. } => 2 * h,
                smelt::model::Ffn::Moe(e) => 2 * h + 4 + 2 * h + moe_table(e, h, split),
            };
            assert_eq!(
                int(sel.total().unwrap()),
                kept + ffn_kept,
                "selective, tp {tp}"
            );
        }
    }
}

/// Sequence parallelism: a GPU holds `1/t` of it all. Korthikanti et al.'s selective
/// recomputation with sequence parallelism, `34·s·b·h/t`, on an MHA GPT layer whose
/// gated MLP (`F = 8h/3`) saves what their GeLU MLP saves, read per GPU off the training
/// memory of the first of two pipeline stages: their formula less the two dropout masks
/// (`2sbh`, no dropout), plus the packed QKV the checkpoint keeps (`4sbh`) and two fp32
/// `rstd` rows.
#[test]
fn selective_with_sequence_parallelism_is_34_sbh_over_t() {
    let (h, a, layers) = (3072u64, 24u64, 4u64);
    let text = format!(
        "[model]\nlayers = {layers}\nhidden = {h}\nheads = {a}\nkv_heads = {a}\nhead_dim = {}\n\
         vocab = 1024\n[model.moe]\nexperts = 1\ntop_k = 1\nexpert_ffn = 1\n\
         [model.dense]\nlayers = [1, 2, 3, 4]\nffn = {}\n\
         [workload]\ncontext = 2048\nmean_doc_len = 2048\n\
         [counting]\nactivations = \"megatron-selective\"\n",
        h / a,
        8 * h / 3
    );
    let spec = ModelSpec::from_toml_str(&text).unwrap();
    let (s, b) = (2048u64, 2u64);
    for t in [1u64, 2, 4, 8] {
        let training = Training {
            tp: t,
            pp: 2,
            micro_batch: b,
            ..Training::default()
        };
        let mem = smelt::training_memory(&spec, &training).unwrap();
        let stage = &mem.stages[0];
        let per_layer = 34 * s * b * h - 2 * s * b * h + 4 * s * b * h + 2 * 4 * s * b;
        let want =
            smelt::ActivationBytes::ratio(u128::from(per_layer * (layers / 2)), u128::from(t))
                .unwrap();
        assert_eq!(stage.activations_per_micro_batch, want, "t = {t}");
        // No recomputation: Korthikanti's 34sbh less the dropout masks, the fused
        // attention's fp32 statistics (4 bytes per head and token) instead of the `as²`
        // terms, two rstd rows.
        let none = ModelSpec {
            counting: smelt::Counting {
                activations: ActivationPolicy::Megatron,
                ..spec.counting
            },
            ..spec.clone()
        };
        let mem = smelt::training_memory(&none, &training).unwrap();
        let per_layer = 34 * s * b * h - 2 * s * b * h + 4 * a * s * b + 2 * 4 * s * b;
        let want =
            smelt::ActivationBytes::ratio(u128::from(per_layer * (layers / 2)), u128::from(t))
                .unwrap();
        assert_eq!(mem.stages[0].activations_per_micro_batch, want, "t = {t}");
    }
}

/// DeepSeek-V3 at its published layout (PP16 over 61 layers, 4 on the first stage and 1 on
/// the last, EP64, 1024 GPUs): every stage's layers as Megatron places them, a peak per
/// GPU with its verdict on an 80 GB card, and the knob that would make it fit, re-evaluated.
#[test]
fn deepseek_v3_published_layout_gets_a_verdict() {
    let args = [
        "cost",
        "tests/data/hf/deepseek-v3.json",
        "--context",
        "4096",
        "--mean-doc-len",
        "4096",
        "--pp",
        "16",
        "--first-stage-layers",
        "4",
        "--last-stage-layers",
        "1",
        "--ep",
        "64",
        "--dp",
        "64",
        "--zero",
        "1",
        "--grad-bytes",
        "4",
        "--activations",
        "megatron-selective",
        "--recompute-modules",
        "mla_up_proj,mlp",
        "--card",
        "h800",
        "--format",
        "json",
    ];
    let v = crate::common::run_json(&args);
    let stages = v["training"]["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 16);
    let layers: Vec<(u64, u64)> = stages
        .iter()
        .map(|s| {
            (
                s["layers"][0].as_u64().unwrap(),
                s["layers"][1].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(layers[0], (1, 4));
    assert_eq!(layers[1], (5, 8));
    assert_eq!(layers[14], (57, 60));
    assert_eq!(layers[15], (61, 61));
    let fit = &v["fit"];
    let peak = v["training"]["peak"].as_f64().unwrap();
    assert_eq!(fit["peak_bytes"].as_f64().unwrap(), peak);
    assert_eq!(fit["card_bytes"].as_f64().unwrap(), 80e9);
    assert_eq!(fit["fits"].as_bool().unwrap(), peak <= 80e9);
    assert_eq!(fit["margin_bytes"].as_f64().unwrap(), 80e9 - peak);
    // Each knob's peak is the training memory with that knob changed.
    let mut spec = ModelSpec::load("tests/data/hf/deepseek-v3.json").unwrap();
    spec.workload.context = 4096;
    spec.workload.mean_doc_len = Some(4096);
    spec.counting.activations = ActivationPolicy::MegatronSelective;
    spec.counting.recompute_modules = RecomputeModules::parse_list("mla_up_proj,mlp").unwrap();
    let t = Training {
        pp: 16,
        first_stage_layers: Some(4),
        last_stage_layers: Some(1),
        ep: 64,
        dp: 64,
        zero: 1,
        grad_bytes: 4,
        ..Training::default()
    };
    for k in fit["knobs"].as_array().unwrap() {
        let setting = k["setting"].as_str().unwrap();
        let mut s = spec.clone();
        let mut tt = t;
        match k["knob"].as_str().unwrap() {
            "recompute" if setting == "megatron-full" => {
                s.counting.activations = ActivationPolicy::MegatronFull;
            }
            "recompute" => {
                let list = setting
                    .trim_start_matches("megatron-selective [")
                    .trim_end_matches(']');
                s.counting.recompute_modules = RecomputeModules::parse_list(list).unwrap();
            }
            "zero" => tt.zero = setting.trim_start_matches("ZeRO-").parse().unwrap(),
            other => panic!("an unexpected knob here: {other}"),
        }
        let m = smelt::training_memory(&s, &tt).unwrap();
        assert_eq!(
            k["peak_bytes"].as_f64().unwrap(),
            m.peak.as_f64(),
            "{setting}"
        );
        assert_eq!(
            k["fits"].as_bool().unwrap(),
            m.peak.as_f64() <= 80e9,
            "{setting}"
        );
    }
    assert!(!fit["knobs"].as_array().unwrap().is_empty() || fit["fits"].as_bool().unwrap());
    // The table says it in words.
    let table: Vec<&str> = args[..args.len() - 2].to_vec();
    let (code, out, _) = crate::common::run(&table);
    assert_eq!(code, Some(0));
    assert!(out.contains("fits h800 (80.00 GB)"), "{out}");
}

/// The micro-batch knob: halved until the peak fits, each value re-evaluated.
#[test]
fn the_micro_batch_knob_is_the_largest_that_fits() {
    let base = [
        "cost",
        "budgets/base-200m-s95.toml",
        "--ep",
        "8",
        "--pp",
        "2",
    ];
    let args = [
        &base[..],
        &["--dp", "8", "--zero", "1", "--micro-batch", "32"],
    ]
    .concat();
    let card = [&args[..], &["--card", "h100-sxm", "--format", "json"]].concat();
    let v = crate::common::run_json(&card);
    assert!(!v["fit"]["fits"].as_bool().unwrap());
    let knob = v["fit"]["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["knob"] == "micro_batch")
        .expect("a micro-batch knob")
        .clone();
    assert!(knob["fits"].as_bool().unwrap());
    let mb: u64 = knob["setting"]
        .as_str()
        .unwrap()
        .trim_start_matches("micro_batch ")
        .parse()
        .unwrap();
    let spec = ModelSpec::load("budgets/base-200m-s95.toml").unwrap();
    let t = |micro_batch| Training {
        ep: 8,
        pp: 2,
        dp: 8,
        zero: 1,
        micro_batch,
        ..Training::default()
    };
    let peak = |m| smelt::training_memory(&spec, &t(m)).unwrap().peak.as_f64();
    assert_eq!(knob["peak_bytes"].as_f64().unwrap(), peak(mb));
    assert!(peak(mb) <= 80e9 && peak(2 * mb) > 80e9, "{mb}");
}

/// Recompute modules are Megatron's names, read by megatron-selective only; an expert
/// layout that Megatron cannot cut is refused naming the rule.
#[test]
fn bad_recompute_and_expert_layouts_are_refused_by_name() {
    for (args, field) in [
        (
            vec!["--recompute-modules", "moe_act"],
            "counting.recompute_modules",
        ),
        (
            vec![
                "--activations",
                "megatron-selective",
                "--recompute-modules",
                "mhc",
            ],
            "counting.recompute_modules",
        ),
        (
            vec![
                "--activations",
                "megatron-selective",
                "--recompute-modules",
                "mla_up_proj",
            ],
            "counting.recompute_modules",
        ),
        (vec!["--ep", "4", "--dp", "2"], "training.ep"),
        (vec!["--pp", "5"], "training.pp"),
        (
            vec![
                "--pp",
                "4",
                "--first-stage-layers",
                "5",
                "--last-stage-layers",
                "4",
            ],
            "training.pp",
        ),
    ] {
        let all = [&["cost", "budgets/base-200m-s95.toml"][..], &args[..]].concat();
        let (code, _, err) = crate::common::run(&all);
        assert_ne!(code, Some(0), "{args:?}");
        assert!(err.contains(field), "{args:?}: {err}");
    }
}
