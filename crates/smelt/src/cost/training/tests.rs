//! Unit tests of the training memory per GPU.
use super::*;

const SPEC: &str = r#"
[model]
layers = 4
hidden = 64
heads = 4
kv_heads = 2
head_dim = 16
vocab = 96
[model.moe]
experts = 8
top_k = 2
expert_ffn = 32
shared_experts = 1
shared_ffn = 32
shared_gate = true
[model.dense]
layers = [1]
ffn = 128
[model.loop]
first = 2
span = 2
repeats = 2
[workload]
context = 64
mean_doc_len = 16
"#;

/// With no parallelism one GPU holds every parameter, 16 bytes each, and the activations
/// of one sequence: the activations budget's, plus under Megatron-Core the LM head's
/// and the loss's, and the transients.
#[test]
fn one_gpu_holds_everything() {
    let spec = ModelSpec::from_toml_str(SPEC).unwrap();
    let mem = training_memory(&spec, &Training::default()).unwrap();
    let all = Counting {
        embeddings: true,
        lm_head: true,
        ..spec.counting
    };
    let (p, _) = super::super::params(&spec.model, &all).unwrap();
    assert_eq!(mem.params, p.total().unwrap());
    let st = &mem.stages[0];
    assert_eq!(st.params.0 + st.expert_params.0, mem.params.0);
    assert_eq!(st.static_bytes.0, 16 * mem.params.0);
    let act = super::super::cost(&spec).unwrap().budgets().activations;
    // The head: final norm input and rstd, the LM head's input, the fp32 softmax over
    // the 96-token vocabulary, the target mask and index.
    let head = (2 * 64 + 4 + 2 * 64 + 4 * 96 + 9) * 64;
    assert_eq!(st.head, ActivationBytes::from_int(head));
    assert_eq!(
        st.activations,
        act.checked_mul(64)
            .unwrap()
            .checked_add(ActivationBytes::from_int(head))
            .unwrap()
    );
    // Under the unfused count: the layers only, no transient, no optimizer step.
    let mut flash = spec.clone();
    flash.counting.activations = ActivationPolicy::Flash;
    let f = training_memory(&flash, &Training::default()).unwrap();
    let fact = super::super::cost(&flash).unwrap().budgets().activations;
    assert_eq!(f.stages[0].activations, fact.checked_mul(64).unwrap());
    assert_eq!(
        f.peak,
        fact.checked_mul(64)
            .unwrap()
            .checked_add(ActivationBytes::from_int(st.static_bytes.0))
            .unwrap()
    );
    assert_eq!(mem.peak, st.peak);
}

/// Context parallelism splits every micro-batch's activations across `cp` GPUs and
/// widens the optimizer's data-parallel group to `dp · cp`.
#[test]
fn context_parallelism_splits_activations_and_shards_over_dp_cp() {
    let spec = ModelSpec::from_toml_str(SPEC).unwrap();
    let zero1 = |dp, cp| Training {
        dp,
        cp,
        zero: 1,
        ..Training::default()
    };
    let one = training_memory(&spec, &zero1(2, 1)).unwrap();
    let two = training_memory(&spec, &zero1(1, 2)).unwrap();
    assert_eq!(two.gpus, 2);
    let (a, b) = (&one.stages[0], &two.stages[0]);
    assert_eq!(a.optimizer, b.optimizer);
    assert_eq!(
        a.activations_per_micro_batch,
        b.activations_per_micro_batch.checked_mul(2).unwrap()
    );
}

/// The interleaved schedule keeps `2·(pp − s) + (vp − 1)·pp + 1` chunk forwards, the
/// `k`-th of chunk `⌊k/pp⌋ mod vp`; with equal chunks the first stage holds
/// `pp + (pp − 1)/vp` micro-batches (Narayanan et al.'s `1 + (pp − 1)/(pp·vp)` times
/// 1F1B's `pp`).
#[test]
fn interleaving_keeps_more_in_flight_on_the_first_stage() {
    let text = SPEC
        .replace("[model.loop]\nfirst = 2\nspan = 2\nrepeats = 2\n", "")
        .replace("layers = 4\n", "layers = 8\n")
        .replace("[model.dense]\nlayers = [1]\nffn = 128\n", "");
    let spec = ModelSpec::from_toml_str(&text).unwrap();
    let (pp, vp) = (2u64, 2u64);
    let t = Training {
        pp,
        vp,
        ..Training::default()
    };
    let mem = training_memory(&spec, &t).unwrap();
    let first = &mem.stages[0];
    assert_eq!(first.chunks, vec![[1, 2], [5, 6]]);
    assert_eq!(mem.stages[1].chunks, vec![[3, 4], [7, 8]]);
    assert_eq!(first.in_flight, 2 * (pp - 1) + (vp - 1) * pp + 1);
    let chunk = divide(first.activations_per_micro_batch, vp).unwrap();
    assert_eq!(
        first.activations,
        chunk.checked_mul(first.in_flight).unwrap()
    );
    // pp + (pp - 1)/vp micro-batches: 2.5 of the stage's.
    assert_eq!(
        first.activations,
        divide(first.activations_per_micro_batch.checked_mul(5).unwrap(), 2).unwrap()
    );
    assert!(mem.pipeline_note.is_none(), "{:?}", mem.pipeline_note);
}

/// An uneven pipeline: the first and last stages hold what they are given, the others
/// split the rest; Megatron's rules refused by name.
#[test]
fn uneven_stages_follow_megatron() {
    let text = SPEC
        .replace("[model.loop]\nfirst = 2\nspan = 2\nrepeats = 2\n", "")
        .replace("layers = 4\n", "layers = 9\n")
        .replace("[model.dense]\nlayers = [1]\nffn = 128\n", "");
    let spec = ModelSpec::from_toml_str(&text).unwrap();
    let t = Training {
        pp: 4,
        first_stage_layers: Some(3),
        last_stage_layers: Some(2),
        ..Training::default()
    };
    let mem = training_memory(&spec, &t).unwrap();
    let layers: Vec<[u64; 2]> = mem.stages.iter().map(|s| s.layers).collect();
    assert_eq!(layers, vec![[1, 3], [4, 5], [6, 7], [8, 9]]);
    for (first, last, field) in [
        (Some(4), Some(2), "training.pp"),
        (Some(8), Some(2), "training.first_stage_layers"),
    ] {
        let t = Training {
            first_stage_layers: first,
            last_stage_layers: last,
            ..t
        };
        let err = training_memory(&spec, &t).unwrap_err().to_string();
        assert!(err.contains(field), "{err}");
    }
    let t = Training { vp: 2, ..t };
    let err = training_memory(&spec, &t).unwrap_err().to_string();
    assert!(err.contains("training.vp"), "{err}");
}

/// The Transformers policies are counted under data parallelism only.
#[test]
fn transformers_policies_take_data_parallelism_only() {
    let text = SPEC
        .replace("[model.loop]\nfirst = 2\nspan = 2\nrepeats = 2\n", "")
        .replace(
            "shared_gate = true\n",
            "shared_gate = true\nrouter = \"softmax\"\n",
        );
    let mut spec = ModelSpec::from_toml_str(&text).unwrap();
    spec.counting.activations = ActivationPolicy::TransformersSdpa;
    let dp = Training {
        dp: 4,
        zero: 3,
        ..Training::default()
    };
    assert!(training_memory(&spec, &dp).is_ok());
    for (t, field) in [
        (Training { tp: 2, ..dp }, "training.tp"),
        (Training { pp: 2, ..dp }, "training.pp"),
        (Training { ep: 2, ..dp }, "training.ep"),
    ] {
        let err = training_memory(&spec, &t).unwrap_err().to_string();
        assert!(
            err.contains(field) && err.contains("transformers-sdpa"),
            "{err}"
        );
    }
}

/// Layouts that do not divide are refused, naming the field.
#[test]
fn refuses_layouts_that_do_not_divide() {
    let spec = ModelSpec::from_toml_str(SPEC).unwrap();
    for (t, field) in [
        (
            Training {
                tp: 8,
                ..Training::default()
            },
            "model.heads",
        ),
        (
            Training {
                tp: 4,
                ..Training::default()
            },
            "model.kv_heads",
        ),
        (
            Training {
                ep: 3,
                dp: 3,
                ..Training::default()
            },
            "model.moe.experts",
        ),
        (
            Training {
                etp: Some(64),
                dp: 64,
                ..Training::default()
            },
            "training.etp",
        ),
        (
            Training {
                pp: 3,
                ..Training::default()
            },
            "model.layers",
        ),
        (
            Training {
                ep: 2,
                ..Training::default()
            },
            "training.dp",
        ),
    ] {
        let err = training_memory(&spec, &t).unwrap_err().to_string();
        assert!(err.contains(field), "{t:?}: {err}");
    }
}
